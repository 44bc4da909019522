//! Moving a relay's bytes between the client's stdio and a channel
//! socket: with `splice(2)` where one end is a pipe (an MCP client's
//! usual stdio), so that the bytes go from one kernel buffer to the other
//! without a copy through ours; with `read` and `write` otherwise.
//!
//! The channel socket is made non-blocking ([`channel_socket`]) and every
//! splice is non-blocking too: a splice holds its pipe's lock for as long
//! as it runs, even a client's non-blocking write into our stdin waits on
//! that lock, and a splice waiting for room in a socket the guest is not
//! draining would stop such a client from reading our stdout — while the
//! server in the guest waits for exactly that. So a pump never waits
//! inside a splice: it waits in `poll`, holding no lock. (Both flags:
//! older kernels, Debian 12's 6.1 among them, make a splice into a
//! socket wait by the socket's own flags, whatever the splice's say.)

use std::io;
use std::os::fd::{AsRawFd, BorrowedFd, RawFd};

/// The most one call moves: the relays' buffer size before splice.
const CHUNK: usize = 64 * 1024;

/// Makes a channel socket non-blocking for [`pump`] (both relays on a
/// socket share its flags, so this is done once, before either starts).
/// `fcntl`, not `set_nonblocking`: the relay filters allow no `ioctl`
/// but the terminal check.
pub fn channel_socket(socket: &impl AsRawFd) -> io::Result<()> {
    let fd = socket.as_raw_fd();
    // SAFETY: plain fcntl calls on a descriptor the caller owns.
    let flags = unsafe { libc::fcntl(fd, libc::F_GETFL) };
    if flags < 0 || unsafe { libc::fcntl(fd, libc::F_SETFL, flags | libc::O_NONBLOCK) } < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Copies from `from` to `to` until `from` ends or either end fails.
/// Either may be non-blocking; neither's flags are changed (stdin and
/// stdout are shared with the client's other processes).
pub fn pump(from: BorrowedFd<'_>, to: BorrowedFd<'_>) {
    if let Spliced::Copy = splice_all(from.as_raw_fd(), to.as_raw_fd()) {
        copy(from.as_raw_fd(), to.as_raw_fd());
    }
}

/// [`pump`] for a person's terminal: the server's bytes with every control
/// character but newline, tab and carriage return shown as `\xNN` (C0,
/// DEL, and C1 as UTF-8 encodes it), so that what a hostile server writes
/// cannot move the cursor, retitle the window, write the clipboard (OSC
/// 52) or answer for the user. Only where `to` is a terminal: a file or a
/// client's pipe gets the bytes as they are.
pub fn pump_printable(from: BorrowedFd<'_>, to: BorrowedFd<'_>) {
    let (from, to) = (from.as_raw_fd(), to.as_raw_fd());
    let mut buf = vec![0u8; CHUNK];
    // A 0xC2 that ended the last read: the start of a C1 control, maybe.
    let mut held = false;
    loop {
        let Some(n) = read_some(from, &mut buf) else {
            if held {
                write_all(to, &[0xc2]);
            }
            return;
        };
        let (shown, hold) = printable_bytes(held, &buf[..n]);
        held = hold;
        if !write_all(to, &shown) {
            return;
        }
    }
}

/// `bytes` with controls escaped ([`pump_printable`]); `held`: a 0xC2 came
/// last before them. Returns what to show and whether a 0xC2 is held now.
fn printable_bytes(held: bool, bytes: &[u8]) -> (Vec<u8>, bool) {
    let mut out = Vec::with_capacity(bytes.len() + 16);
    let mut prev_c2 = held;
    for &b in bytes {
        if prev_c2 {
            prev_c2 = false;
            if (0x80..=0x9f).contains(&b) {
                out.extend_from_slice(format!("\\xc2\\x{b:02x}").as_bytes());
                continue;
            }
            out.push(0xc2);
        }
        match b {
            b'\n' | b'\t' | b'\r' => out.push(b),
            0x00..=0x1f | 0x7f => out.extend_from_slice(format!("\\x{b:02x}").as_bytes()),
            0xc2 => prev_c2 = true,
            _ => out.push(b),
        }
    }
    (out, prev_c2)
}

/// Whether `fd` is a terminal (`TCGETS`, the one ioctl the relay filters
/// allow).
pub fn is_terminal(fd: BorrowedFd<'_>) -> bool {
    // SAFETY: isatty only asks.
    unsafe { libc::isatty(fd.as_raw_fd()) == 1 }
}

enum Spliced {
    /// `from` ended.
    Ended,
    /// Splice does not apply (neither end is a pipe: a terminal, a file,
    /// a socket) or failed: `read` and `write` go on from here. A failed
    /// splice moved nothing, so only their verdict ends a stream (a
    /// splice can fail where they would not: by the kernel's source, a
    /// Unix socket's splice into a pipe reports some of the pipe's
    /// refusals as `EFAULT`; not seen here, but a relay that ended on it
    /// would cut the stream).
    Copy,
}

fn splice_all(from: RawFd, to: RawFd) -> Spliced {
    loop {
        // SAFETY: no offsets (both ends are streams); the kernel checks
        // the descriptors.
        let n = unsafe {
            libc::splice(
                from,
                std::ptr::null_mut(),
                to,
                std::ptr::null_mut(),
                CHUNK,
                libc::SPLICE_F_MOVE | libc::SPLICE_F_NONBLOCK,
            )
        };
        if n > 0 {
            continue;
        }
        if n == 0 {
            return Spliced::Ended;
        }
        match io::Error::last_os_error().raw_os_error() {
            Some(libc::EINTR) => {}
            // Either end: wait for the one that is not ready.
            Some(libc::EAGAIN) => {
                if !wait(from, libc::POLLIN) || !wait(to, libc::POLLOUT) {
                    return Spliced::Ended;
                }
            }
            _ => return Spliced::Copy,
        }
    }
}

fn copy(from: RawFd, to: RawFd) {
    let mut buf = vec![0u8; CHUNK];
    while let Some(n) = read_some(from, &mut buf) {
        if !write_all(to, &buf[..n]) {
            return;
        }
    }
}

/// Reads what `from` has into `buf`, waiting on a non-blocking one; None
/// at its end or on an error that ends the stream.
fn read_some(from: RawFd, buf: &mut [u8]) -> Option<usize> {
    loop {
        // SAFETY: reads at most buf.len() bytes into buf.
        let n = unsafe { libc::read(from, buf.as_mut_ptr().cast(), buf.len()) };
        match n {
            0 => return None,
            n if n > 0 => return Some(n as usize),
            _ => match io::Error::last_os_error().raw_os_error() {
                Some(libc::EINTR) => {}
                Some(libc::EAGAIN) if wait(from, libc::POLLIN) => {}
                _ => return None,
            },
        }
    }
}

fn write_all(to: RawFd, mut bytes: &[u8]) -> bool {
    while !bytes.is_empty() {
        // SAFETY: writes at most bytes.len() bytes from bytes.
        let n = unsafe { libc::write(to, bytes.as_ptr().cast(), bytes.len()) };
        if n > 0 {
            bytes = &bytes[n as usize..];
            continue;
        }
        if n == 0 {
            // Nothing taken and no error to say why: not a stream to go on with.
            return false;
        }
        match io::Error::last_os_error().raw_os_error() {
            Some(libc::EINTR) => {}
            Some(libc::EAGAIN) if wait(to, libc::POLLOUT) => {}
            _ => return false,
        }
    }
    true
}

/// Waits until `fd` is ready for `events`, or hung up or failed (the next
/// call then says which). False if it cannot wait on it at all.
fn wait(fd: RawFd, events: libc::c_short) -> bool {
    let mut p = libc::pollfd {
        fd,
        events,
        revents: 0,
    };
    loop {
        // SAFETY: one pollfd, ours.
        let n = unsafe { libc::poll(&mut p, 1, -1) };
        if n > 0 {
            return p.revents & libc::POLLNVAL == 0;
        }
        if n < 0 && io::Error::last_os_error().raw_os_error() != Some(libc::EINTR) {
            return false;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs::File;
    use std::io::{Read, Write};
    use std::os::fd::{AsFd, FromRawFd, OwnedFd};
    use std::os::unix::net::UnixStream;
    use std::sync::mpsc;
    use std::time::Duration;

    fn pipe() -> (File, File) {
        let mut fds = [0; 2];
        // SAFETY: pipe2 fills two descriptors we then own.
        assert_eq!(unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) }, 0);
        // SAFETY: just created, owned by nothing else.
        unsafe { (File::from_raw_fd(fds[0]), File::from_raw_fd(fds[1])) }
    }

    fn bytes(len: usize) -> Vec<u8> {
        (0..len).map(|i| (i * 7 + i / 4096) as u8).collect()
    }

    #[test]
    fn a_terminal_sees_controls_escaped_and_text_whole() {
        let evil = "ok\ttab\r\n\x1b]52;c;ZXZpbA==\x07\x1b[2J\u{9b}31m é \u{7f}";
        let (shown, held) = printable_bytes(false, evil.as_bytes());
        assert!(!held);
        let shown = String::from_utf8(shown).unwrap();
        assert_eq!(
            shown,
            "ok\ttab\r\n\\x1b]52;c;ZXZpbA==\\x07\\x1b[2J\\xc2\\x9b31m é \\x7f"
        );
        // A C1 control split across two reads is still caught.
        let bytes = "a\u{9b}b".as_bytes();
        let (first, held) = printable_bytes(false, &bytes[..2]);
        let (rest, _) = printable_bytes(held, &bytes[2..]);
        assert_eq!([first, rest].concat(), b"a\\xc2\\x9bb");
        // Through the pump, from a pipe to a pipe.
        let (r, mut w) = pipe();
        let (out_r, out_w) = pipe();
        w.write_all(b"\x1b[31mred\xc2").unwrap();
        drop(w);
        let t = std::thread::spawn(move || pump_printable(r.as_fd(), out_w.as_fd()));
        t.join().unwrap();
        let mut got = Vec::new();
        (&out_r).read_to_end(&mut got).unwrap();
        assert_eq!(got, b"\\x1b[31mred\xc2");
    }

    /// Runs `pump(from, to)` on a thread that ends with it.
    fn pumping(from: OwnedFd, to: OwnedFd) -> std::thread::JoinHandle<()> {
        std::thread::spawn(move || pump(from.as_fd(), to.as_fd()))
    }

    #[test]
    fn stdin_as_a_pipe_reaches_the_socket_whole_and_its_end_ends_the_pump() {
        let (stdin, mut client) = pipe();
        let (relay_end, guest) = UnixStream::pair().unwrap();
        channel_socket(&relay_end).unwrap();
        let pump = pumping(stdin.into(), relay_end.into());
        let sent = bytes(3 << 20);
        let writer = {
            let sent = sent.clone();
            std::thread::spawn(move || client.write_all(&sent).unwrap())
        };
        let mut got = vec![0u8; sent.len()];
        (&guest).read_exact(&mut got).unwrap();
        assert!(got == sent, "the bytes changed on the way");
        writer.join().unwrap(); // the client closes its end
        pump.join().unwrap();
    }

    /// The stdout relay's ends: the client's read end of its stdout
    /// pipe, the guest's end of the channel socket, and the pump between.
    fn socket_to_pipe() -> (File, UnixStream, std::thread::JoinHandle<()>) {
        let (client, stdout) = pipe();
        let (relay_end, guest) = UnixStream::pair().unwrap();
        channel_socket(&relay_end).unwrap();
        (client, guest, pumping(relay_end.into(), stdout.into()))
    }

    /// The guest sends `sent` in writes of `sizes` in turn (pausing now
    /// and then), then shuts its side; the socket is handed back, held
    /// open until the reader is done.
    fn guest_sends(
        guest: UnixStream,
        sent: &[u8],
        sizes: &'static [usize],
    ) -> std::thread::JoinHandle<UnixStream> {
        let sent = sent.to_vec();
        std::thread::spawn(move || {
            let (mut at, mut i) = (0, 0);
            while at < sent.len() {
                let end = sent.len().min(at.saturating_add(sizes[i % sizes.len()]));
                (&guest).write_all(&sent[at..end]).unwrap();
                at = end;
                i += 1;
                if i % 37 == 0 {
                    std::thread::sleep(Duration::from_millis(1));
                }
            }
            guest.shutdown(std::net::Shutdown::Write).unwrap();
            guest
        })
    }

    #[test]
    fn the_socket_reaches_stdout_as_a_pipe_whole_and_its_shutdown_ends_the_pump() {
        let (mut client, guest, pump) = socket_to_pipe();
        let sent = bytes(3 << 20);
        let writer = guest_sends(guest, &sent, &[usize::MAX]);
        let mut got = Vec::new();
        client.read_to_end(&mut got).unwrap(); // EOF: the pump ended, stdout closed
        assert!(got == sent, "the bytes changed on the way");
        pump.join().unwrap();
        drop(writer.join().unwrap());
    }

    #[test]
    fn a_bursty_guest_and_a_slow_client_get_every_byte_in_order() {
        // The socket in chunks of every size, now and then pausing; the
        // client reading in small and large pieces, now and then late:
        // the pump meets an empty socket and a full pipe, often.
        let (mut client, guest, pump) = socket_to_pipe();
        let sent = bytes(6 << 20);
        let writer = guest_sends(guest, &sent, &[1, 100, 4096, 65536, 200_000]);
        let mut got = Vec::new();
        let mut buf = vec![0u8; 65536];
        for i in 0.. {
            let want = [1, 4096, 65536][i % 3];
            let n = client.read(&mut buf[..want]).unwrap();
            if n == 0 {
                break;
            }
            got.extend_from_slice(&buf[..n]);
            if i % 41 == 0 {
                std::thread::sleep(Duration::from_millis(1));
            }
        }
        assert_eq!(got.len(), sent.len());
        assert!(got == sent, "the bytes changed on the way");
        pump.join().unwrap();
        drop(writer.join().unwrap());
    }

    #[test]
    fn without_a_pipe_it_copies_and_waits_on_the_non_blocking_socket() {
        // A terminal or a file as stdio: splice does not apply.
        let (stdin_end, mut client) = UnixStream::pair().unwrap();
        let (relay_end, guest) = UnixStream::pair().unwrap();
        channel_socket(&relay_end).unwrap();
        let pump = pumping(stdin_end.into(), relay_end.into());
        // Sent late, so the pump meets an empty socket first.
        std::thread::sleep(Duration::from_millis(50));
        let sent = bytes(1 << 20);
        let writer = {
            let sent = sent.clone();
            std::thread::spawn(move || {
                client.write_all(&sent).unwrap();
                client.shutdown(std::net::Shutdown::Write).unwrap();
            })
        };
        let mut got = vec![0u8; sent.len()];
        (&guest).read_exact(&mut got).unwrap();
        assert!(got == sent, "the bytes changed on the way");
        writer.join().unwrap();
        pump.join().unwrap();
    }

    #[test]
    fn a_socket_the_guest_does_not_drain_leaves_the_clients_pipe_usable() {
        // The client writes our stdin without blocking (as an event loop
        // does), while the guest reads none of it. The client must keep
        // getting answers (bytes taken, or EAGAIN) and never wait on the
        // pipe's lock behind a splice stuck on the full socket.
        let (stdin, client) = pipe();
        let (relay_end, _guest) = UnixStream::pair().unwrap();
        channel_socket(&relay_end).unwrap();
        let _pump = pumping(stdin.into(), relay_end.into());
        // SAFETY: fcntl on our own descriptor.
        unsafe {
            let fl = libc::fcntl(client.as_raw_fd(), libc::F_GETFL);
            libc::fcntl(client.as_raw_fd(), libc::F_SETFL, fl | libc::O_NONBLOCK);
        }
        let (done_tx, done) = mpsc::channel();
        std::thread::spawn(move || {
            let chunk = bytes(16 * 1024);
            let (mut taken, mut refused) = (0usize, 0usize);
            for _ in 0..400 {
                match (&client).write(&chunk) {
                    Ok(n) => taken += n,
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => refused += 1,
                    Err(e) => panic!("write: {e}"),
                }
                std::thread::sleep(Duration::from_millis(1));
            }
            let _ = done_tx.send((taken, refused));
            client // kept open: the pump is not told to end
        });
        let (taken, refused) = done
            .recv_timeout(Duration::from_secs(20))
            .expect("the client's non-blocking write waited on the pipe behind the relay");
        assert!(taken > 0 && refused > 0, "taken {taken}, refused {refused}");
    }
}

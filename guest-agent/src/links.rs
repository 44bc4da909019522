//! The agent's host channels (CONTROL, STDIO, STDERR), replaceable: a VM
//! restored from a snapshot loses them (its vsock transport is reset)
//! and connects new ones, while the server's pipes stay as they were.
//!
//! Each set of channels is a generation. A relay that loses its channel
//! asks [`Links::after_loss`]: if a snapshot was announced in that
//! generation, it waits for the next one and goes on there; otherwise
//! the loss is the end of the run, as without snapshots.

use std::fs::File;
use std::io::{self, BufRead, BufReader, Read, Write};
use std::sync::{Condvar, Mutex, MutexGuard};
use std::time::Duration;

use mcpvm_protocol::messages::{Event, HostMessage};
use mcpvm_protocol::ports::*;

use crate::tail::Progress;
use crate::vsock;

/// One generation's channels.
pub struct Channels {
    pub control: File,
    pub stdio: File,
    pub stderr: File,
}

struct State {
    generation: u64,
    channels: Channels,
    /// The generation in which a snapshot was announced.
    armed: Option<u64>,
}

pub struct Links {
    state: Mutex<State>,
    changed: Condvar,
}

/// Which channel of a generation.
#[derive(Clone, Copy)]
pub enum Which {
    Control,
    Stdio,
    Stderr,
}

impl Links {
    pub fn new(channels: Channels) -> Self {
        Links {
            state: Mutex::new(State {
                generation: 0,
                channels,
                armed: None,
            }),
            changed: Condvar::new(),
        }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The current generation and a handle on its `which` channel.
    pub fn get(&self, which: Which) -> io::Result<(u64, File)> {
        let s = self.lock();
        Ok((s.generation, pick(&s.channels, which).try_clone()?))
    }

    /// Sends one event on the current CONTROL channel.
    pub fn send(&self, e: &Event) {
        let mut line = serde_json::to_string(e).expect("events serialize");
        line.push('\n');
        let s = self.lock();
        let _ = (&s.channels.control).write_all(line.as_bytes());
    }

    /// A snapshot is coming: losing this generation's channels from now
    /// on means a restore.
    pub fn arm(&self) {
        let mut s = self.lock();
        s.armed = Some(s.generation);
    }

    /// `which` of `generation` failed or ended. Returns the next
    /// generation's channel if that is a restore (waiting for it), None
    /// if the run is over.
    pub fn after_loss(&self, generation: u64, which: Which) -> Option<(u64, File)> {
        let mut s = self.lock();
        if s.generation == generation && s.armed != Some(generation) {
            return None;
        }
        while s.generation == generation {
            s = self.changed.wait(s).unwrap_or_else(|p| p.into_inner());
        }
        let f = pick(&s.channels, which).try_clone().ok()?;
        Some((s.generation, f))
    }

    /// The next generation is connected.
    pub fn replace(&self, channels: Channels) {
        let mut s = self.lock();
        s.generation += 1;
        s.channels = channels;
        s.armed = None;
        self.changed.notify_all();
    }
}

fn pick(c: &Channels, which: Which) -> &File {
    match which {
        Which::Control => &c.control,
        Which::Stdio => &c.stdio,
        Which::Stderr => &c.stderr,
    }
}

/// Copies the server's `from` (stdout or stderr) to the host's `which`
/// channel until `from` ends. A write that fails across a restore is
/// written again, whole, on the next generation. `on_first` runs at the
/// first byte, `seen` on every chunk read; `progress` says what the
/// host has taken (the agent waits for the tail by it).
pub fn relay_out(
    links: &Links,
    mut from: impl Read,
    which: Which,
    progress: &Progress,
    mut on_first: impl FnMut(),
    mut seen: impl FnMut(&[u8]),
) {
    let Ok((mut generation, mut to)) = links.get(which) else {
        return;
    };
    let mut buf = vec![0u8; 64 * 1024];
    let mut first = true;
    loop {
        let n = match from.read(&mut buf) {
            Ok(0) => return,
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(_) => return,
        };
        if first {
            first = false;
            on_first();
        }
        seen(&buf[..n]);
        progress.writing();
        while (&to).write_all(&buf[..n]).is_err() {
            match links.after_loss(generation, which) {
                Some((g, f)) => (generation, to) = (g, f),
                None => return,
            }
        }
        progress.wrote(n);
    }
}

/// Copies the host's STDIO to the server's stdin until the host ends it
/// (in a generation without a snapshot coming); then `to` is dropped,
/// which closes the server's stdin. `seen` gets every chunk before the
/// server does.
pub fn relay_in(links: &Links, mut to: impl Write, mut seen: impl FnMut(&[u8])) {
    let Ok((mut generation, mut from)) = links.get(Which::Stdio) else {
        return;
    };
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        match from.read(&mut buf) {
            Ok(n) if n > 0 => {
                seen(&buf[..n]);
                if to.write_all(&buf[..n]).is_err() {
                    return;
                }
                let _ = to.flush();
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            // EOF or a reset.
            _ => match links.after_loss(generation, Which::Stdio) {
                Some((g, f)) => (generation, from) = (g, f),
                None => return,
            },
        }
    }
}

/// The longest line the host sends on CONTROL.
const MAX_LINE: u64 = mcpvm_protocol::ports::MAX_CONTROL_LINE as u64;

/// Serves [`HostMessage`]s on CONTROL for a run that may be snapshotted:
/// a snapshot announcement is answered, and the loss of CONTROL after it
/// is a restore: reconnect, resume, and go on. Returns when CONTROL ends
/// without a snapshot announced.
pub fn serve_control(links: &Links) {
    loop {
        let Ok((generation, control)) = links.get(Which::Control) else {
            return;
        };
        let mut lines = BufReader::new(control);
        loop {
            let mut line = String::new();
            match (&mut lines).take(MAX_LINE).read_line(&mut line) {
                Ok(n) if n > 0 => match serde_json::from_str::<HostMessage>(&line) {
                    Ok(HostMessage::Snapshot) => {
                        links.arm();
                        links.send(&Event::SnapshotReady);
                    }
                    Ok(other) => eprintln!("mcpvm-agent: unexpected host message {other:?}"),
                    Err(e) => eprintln!("mcpvm-agent: unreadable host message ({e})"),
                },
                _ => break,
            }
        }
        if links.lock().armed != Some(generation) {
            return;
        }
        eprintln!("mcpvm-agent: the host channels are gone after a snapshot: reconnecting");
        match reconnect() {
            Ok(channels) => links.replace(channels),
            Err(e) => {
                // Nothing can reach the host any more: end the VM.
                eprintln!("mcpvm-agent: cannot reconnect after a restore: {e}");
                crate::ports::power_off(125);
                return;
            }
        }
    }
}

/// A restored VM's new channels: CONTROL first (the host answers with
/// [`HostMessage::Resume`], applied before the server's stdio goes on),
/// then STDIO and STDERR.
fn reconnect() -> io::Result<Channels> {
    let control = connect_again(CONTROL_PORT)?;
    let mut line = format!(
        "{}\n",
        serde_json::to_string(&Event::Resumed {
            uptime_ms: guest_agent::uptime_ms()
        })
        .expect("events serialize")
    );
    (&control).write_all(line.as_bytes())?;
    line.clear();
    BufReader::new((&control).take(MAX_LINE)).read_line(&mut line)?;
    match serde_json::from_str::<HostMessage>(&line) {
        Ok(HostMessage::Resume {
            unix_ns,
            entropy,
            hostname,
        }) => crate::system::resume(unix_ns, &entropy, &hostname),
        _ => {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!("expected a resume message, got: {}", line.trim()),
            ))
        }
    }
    Ok(Channels {
        control,
        stdio: connect_again(STDIO_PORT)?,
        stderr: connect_again(STDERR_PORT)?,
    })
}

/// Connects to the host, retrying briefly: the reset may still be in
/// flight when the first attempt goes out.
fn connect_again(port: u32) -> io::Result<File> {
    let mut last = None;
    for _ in 0..200 {
        match vsock::connect(HOST_CID, port) {
            Ok(f) => return Ok(f),
            Err(e) => last = Some(e),
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    Err(last.unwrap_or_else(|| io::Error::other("no attempt")))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::OwnedFd;
    use std::os::unix::net::UnixStream;
    use std::sync::Arc;

    /// Agent-side channels, and the host ends of each.
    fn channels() -> (Channels, [UnixStream; 3]) {
        let pairs: Vec<(UnixStream, UnixStream)> =
            (0..3).map(|_| UnixStream::pair().unwrap()).collect();
        let mut agent = Vec::new();
        let mut host = Vec::new();
        for (a, h) in pairs {
            agent.push(File::from(OwnedFd::from(a)));
            host.push(h);
        }
        let [control, stdio, stderr]: [File; 3] = agent.try_into().unwrap();
        (
            Channels {
                control,
                stdio,
                stderr,
            },
            host.try_into().unwrap(),
        )
    }

    fn read_some(s: &mut UnixStream) -> String {
        let mut buf = [0u8; 64];
        let n = s.read(&mut buf).unwrap();
        String::from_utf8_lossy(&buf[..n]).into()
    }

    #[test]
    fn server_output_goes_on_in_the_next_generation_after_a_snapshot() {
        let (first, host) = channels();
        let links = Arc::new(Links::new(first));
        let (server_out, mut server_writes) = UnixStream::pair().unwrap();
        let l = links.clone();
        let relay = std::thread::spawn(move || {
            relay_out(
                &l,
                server_out,
                Which::Stdio,
                &Progress::default(),
                || {},
                |_| {},
            )
        });
        links.arm();
        drop(host); // the old VM's host ends are gone
        server_writes.write_all(b"after").unwrap();
        std::thread::sleep(Duration::from_millis(100));
        let (second, [_c, mut stdio, _e]) = channels();
        links.replace(second);
        assert_eq!(read_some(&mut stdio), "after");
        drop(server_writes);
        relay.join().unwrap();
    }

    #[test]
    fn host_input_ends_the_server_stdin_without_a_snapshot() {
        let (first, [_c, stdio, _e]) = channels();
        let links = Arc::new(Links::new(first));
        let (to_server, mut server_reads) = UnixStream::pair().unwrap();
        let l = links.clone();
        let relay = std::thread::spawn(move || relay_in(&l, to_server, |_| {}));
        (&stdio).write_all(b"hi").unwrap();
        drop(stdio);
        relay.join().unwrap();
        let mut got = String::new();
        server_reads.read_to_string(&mut got).unwrap();
        assert_eq!(got, "hi", "and then EOF");
    }

    #[test]
    fn host_input_goes_on_in_the_next_generation_after_a_snapshot() {
        let (first, [_c, stdio, _e]) = channels();
        let links = Arc::new(Links::new(first));
        let (to_server, mut server_reads) = UnixStream::pair().unwrap();
        let l = links.clone();
        let relay = std::thread::spawn(move || relay_in(&l, to_server, |_| {}));
        links.arm();
        drop(stdio);
        let (second, [_c2, stdio2, _e2]) = channels();
        links.replace(second);
        (&stdio2).write_all(b"again").unwrap();
        assert_eq!(read_some(&mut server_reads), "again");
        drop(stdio2);
        relay.join().unwrap();
    }
}

//! `mcpvm run --listen ADDR`: the host's side of connections to a server
//! that speaks Streamable HTTP in the guest (docs/network.md, "Inbound").
//! The listener is bound before the run jails itself (the jail has its
//! own network namespace); each connection it accepts becomes a vsock
//! stream to the agent's inbound port (`CONNECT <port>` on the VMM's
//! socket), which the agent forwards to the server's port. One thread
//! accepts, confined to the `inbound` filter; one per direction copies.

use std::io::{self, Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::os::unix::net::UnixStream;
use std::path::PathBuf;

use mcpvm_protocol::ports::INBOUND_PORT;
use vmm::{SeccompMode, ThreadKind};

/// Connections at once at most; more wait in the listener's backlog.
const MAX_CONNECTIONS: usize = 256;

/// Starts accepting on `listener`; each connection goes to the guest
/// through the VMM's vsock socket at `uds`.
pub fn serve(listener: TcpListener, uds: PathBuf, mode: SeccompMode) {
    let addr = listener
        .local_addr()
        .map(|a| a.to_string())
        .unwrap_or_default();
    let spawned = std::thread::Builder::new()
        .name("inbound".into())
        .spawn(move || {
            if let Err(e) = vmm::host_seccomp::confine(ThreadKind::Inbound, mode) {
                log::error!("inbound: cannot confine the listener thread: {e}");
                return;
            }
            let active = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
            for conn in listener.incoming() {
                let Ok(conn) = conn else { continue };
                if active.load(std::sync::atomic::Ordering::SeqCst) >= MAX_CONNECTIONS {
                    let _ = conn.shutdown(Shutdown::Both);
                    continue;
                }
                active.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                let (uds, active) = (uds.clone(), active.clone());
                let _ = std::thread::Builder::new()
                    .stack_size(256 << 10)
                    .spawn(move || {
                        if let Err(e) = forward(conn, &uds) {
                            log::info!("inbound: a connection ended: {e}");
                        }
                        active.fetch_sub(1, std::sync::atomic::Ordering::SeqCst);
                    });
            }
        });
    match spawned {
        Ok(_) => log::info!("inbound: listening on {addr}, forwarding to the guest's server"),
        Err(e) => log::error!("inbound: cannot start the listener thread: {e}"),
    }
}

fn forward(client: TcpStream, uds: &PathBuf) -> io::Result<()> {
    let _ = client.set_nodelay(true);
    let mut guest = UnixStream::connect(uds)?;
    guest.write_all(format!("CONNECT {INBOUND_PORT}\n").as_bytes())?;
    // `OK <port>\n`, byte by byte: what follows is the server's.
    let mut line = Vec::new();
    let mut b = [0u8; 1];
    while line.len() < 32 {
        match guest.read(&mut b)? {
            0 => break,
            _ if b[0] == b'\n' => break,
            _ => line.push(b[0]),
        }
    }
    if !line.starts_with(b"OK ") {
        return Err(io::Error::new(
            io::ErrorKind::ConnectionRefused,
            "the guest is not listening (is its server an http one?)",
        ));
    }
    let (client2, guest2) = (client.try_clone()?, guest.try_clone()?);
    let up = std::thread::Builder::new()
        .stack_size(128 << 10)
        .spawn(move || {
            copy(&client2, &guest2);
            let _ = guest2.shutdown(Shutdown::Write);
        })?;
    copy(&guest, &client);
    let _ = client.shutdown(Shutdown::Write);
    let _ = up.join();
    Ok(())
}

fn copy(mut from: impl Read, mut to: impl Write) {
    let mut buf = vec![0u8; 64 << 10];
    while let Ok(n) = from.read(&mut buf) {
        if n == 0 || to.write_all(&buf[..n]).is_err() {
            break;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::BufRead;
    use std::os::unix::net::UnixListener;

    /// The VMM's side as the muxer speaks it: `CONNECT <port>\n`, then
    /// `OK <port>\n` (or a close), then the guest's bytes.
    fn fake_vmm(path: &std::path::Path, accept: bool) {
        let l = UnixListener::bind(path).unwrap();
        std::thread::spawn(move || {
            let (s, _) = l.accept().unwrap();
            let mut line = String::new();
            let mut r = io::BufReader::new(&s);
            r.read_line(&mut line).unwrap();
            assert_eq!(line, format!("CONNECT {INBOUND_PORT}\n"));
            if !accept {
                return;
            }
            (&s).write_all(b"OK 1234\n").unwrap();
            let mut req = [0u8; 4];
            r.read_exact(&mut req).unwrap();
            (&s).write_all(b"HTTP/1.1 200 OK\r\n\r\n").unwrap();
            (&s).write_all(&req).unwrap();
        });
    }

    #[test]
    fn a_host_connection_reaches_the_guest_and_back() {
        let dir = tempfile::tempdir().unwrap();
        let uds = dir.path().join("vsock.sock");
        fake_vmm(&uds, true);
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        serve(listener, uds, SeccompMode::Off);
        let mut c = TcpStream::connect(addr).unwrap();
        c.write_all(b"ping").unwrap();
        let mut got = String::new();
        c.read_to_string(&mut got).unwrap();
        assert_eq!(got, "HTTP/1.1 200 OK\r\n\r\nping");
    }

    #[test]
    fn a_guest_that_does_not_listen_closes_the_connection() {
        let dir = tempfile::tempdir().unwrap();
        let uds = dir.path().join("vsock.sock");
        fake_vmm(&uds, false);
        let (client, server) = {
            let l = TcpListener::bind("127.0.0.1:0").unwrap();
            let c = TcpStream::connect(l.local_addr().unwrap()).unwrap();
            (c, l.accept().unwrap().0)
        };
        let e = forward(server, &uds).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::ConnectionRefused);
        drop(client);
    }
}

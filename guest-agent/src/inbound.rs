//! Connections from the host to a server that speaks HTTP (docs/network.md,
//! "Inbound"): the agent listens on vsock and forwards each connection to
//! the server's port on the guest's own loopback. The host side is
//! `mcpvm run --listen`.

use std::fs::File;
use std::io;
use std::net::{Ipv4Addr, Shutdown, TcpStream};
use std::time::{Duration, Instant};

use mcpvm_protocol::ports::INBOUND_PORT;

use crate::vsock;

/// How long a connection waits for the server to listen (it may still be
/// starting when the first client comes).
const SERVER_WAIT: Duration = Duration::from_secs(120);

/// Starts forwarding the host's connections to `port`.
pub fn start(port: u16) -> io::Result<()> {
    crate::egress::loopback_up()?;
    let listener = vsock::listen(INBOUND_PORT)?;
    std::thread::Builder::new()
        .name("inbound".into())
        .spawn(move || loop {
            let Ok(conn) = vsock::accept(&listener) else {
                continue;
            };
            let _ = std::thread::Builder::new()
                .stack_size(128 << 10)
                .spawn(move || forward(conn, port));
        })?;
    Ok(())
}

fn forward(host: File, port: u16) {
    let deadline = Instant::now() + SERVER_WAIT;
    let server = loop {
        match TcpStream::connect((Ipv4Addr::LOCALHOST, port)) {
            Ok(s) => break s,
            Err(_) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(100)),
            Err(_) => return,
        }
    };
    let _ = server.set_nodelay(true);
    let (Ok(server2), Ok(host2)) = (server.try_clone(), host.try_clone()) else {
        return;
    };
    let up = std::thread::Builder::new()
        .stack_size(128 << 10)
        .spawn(move || {
            crate::egress::copy(&host2, &server2);
            let _ = server2.shutdown(Shutdown::Write);
        });
    crate::egress::copy(&server, &host);
    vsock::shutdown_write(&host);
    if let Ok(up) = up {
        let _ = up.join();
    }
}

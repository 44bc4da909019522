//! Who may `connect()` for the guest.
//!
//! A guest-initiated stream to host port P reaches the host socket
//! `<uds_path>_<P>` (Firecracker's hybrid convention). The vsock worker
//! parses every packet the guest sends; a memory bug there must not let a
//! guest connect to any Unix socket the user can reach (the session bus,
//! `docker.sock`, `$SSH_AUTH_SOCK`). So the worker cannot connect at all
//! (its seccomp filter has neither `socket` nor `connect`): it asks the
//! connector thread over a socketpair, sending only the port number. The
//! connector, which reads nothing else from anyone, connects to
//! `<uds_path>_<P>` (a path it holds, not one it is given) and hands the
//! connected socket back with `SCM_RIGHTS`, or the errno.
//!
//! Request: the port, 4 bytes little-endian. Answer: the errno, 4 bytes
//! little-endian (0 with the socket attached).

use std::io::{self, Read, Write};
use std::os::fd::{FromRawFd, IntoRawFd, OwnedFd};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};

use vmm_sys_util::sock_ctrl_msg::ScmSocket;

use crate::host_seccomp::{self, SeccompMode, ThreadKind};

/// How the worker gets a connected host socket for a guest port.
pub enum Connector {
    /// Connect in the calling thread (tests and fuzzing: nothing confined).
    Direct(PathBuf),
    /// Ask the connector thread.
    Broker(UnixStream),
}

impl Connector {
    /// Starts the connector thread for `uds_path`, confined to its own
    /// filter in `mode`. It ends when the returned connector is dropped.
    pub fn start(uds_path: &Path, mode: SeccompMode) -> io::Result<Connector> {
        let (ours, theirs) = UnixStream::pair()?;
        let uds = uds_path.to_path_buf();
        std::thread::Builder::new()
            .name("vsock-connector".into())
            .spawn(
                move || match host_seccomp::confine(ThreadKind::VsockConnector, mode) {
                    Ok(()) => serve(&theirs, &uds),
                    Err(e) => log::error!("vsock connector: {e}"),
                },
            )?;
        Ok(Connector::Broker(ours))
    }

    /// A nonblocking stream connected to `<uds_path>_<port>`.
    pub fn connect(&self, port: u32) -> io::Result<UnixStream> {
        match self {
            Connector::Direct(uds) => connect_nonblocking(&super::port_path(uds, port)),
            Connector::Broker(sock) => {
                (&*sock).write_all(&port.to_le_bytes())?;
                let mut errno = [0u8; 4];
                let (n, file) = sock.recv_with_fd(&mut errno).map_err(io::Error::other)?;
                match (n, file) {
                    (4, Some(f)) if errno == [0; 4] => {
                        // SAFETY: the fd came to us with SCM_RIGHTS and is ours.
                        Ok(unsafe { UnixStream::from_raw_fd(f.into_raw_fd()) })
                    }
                    (4, _) => Err(io::Error::from_raw_os_error(i32::from_le_bytes(errno))),
                    _ => Err(io::Error::other("the vsock connector is gone")),
                }
            }
        }
    }
}

/// The connector thread: one port in, one socket (or errno) out, until
/// the worker's end closes.
fn serve(sock: &UnixStream, uds: &Path) {
    let mut port = [0u8; 4];
    while (&*sock).read_exact(&mut port).is_ok() {
        let path = super::port_path(uds, u32::from_le_bytes(port));
        let sent = match connect_nonblocking(&path) {
            Ok(stream) => {
                let fd = OwnedFd::from(stream);
                use std::os::fd::AsRawFd;
                sock.send_with_fd(&[0u8; 4][..], fd.as_raw_fd())
            }
            Err(e) => {
                let errno = e.raw_os_error().unwrap_or(libc::EIO).to_le_bytes();
                sock.send_with_fds(&[&errno[..]], &[])
            }
        };
        if sent.is_err() {
            return;
        }
    }
}

/// A nonblocking `connect()` to the Unix socket at `path`.
pub fn connect_nonblocking(path: &Path) -> io::Result<UnixStream> {
    use std::os::unix::ffi::OsStrExt;
    let path = path.as_os_str().as_bytes();
    // SAFETY: sockaddr_un is plain data; all zeros is a valid value.
    let mut addr: libc::sockaddr_un = unsafe { std::mem::zeroed() };
    addr.sun_family = libc::AF_UNIX as libc::sa_family_t;
    if path.len() >= addr.sun_path.len() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "socket path too long",
        ));
    }
    for (d, s) in addr.sun_path.iter_mut().zip(path) {
        *d = *s as libc::c_char;
    }
    // SAFETY: a fresh socket, owned at once; connect gets a filled-in
    // sockaddr_un and its size.
    unsafe {
        let fd = libc::socket(
            libc::AF_UNIX,
            libc::SOCK_STREAM | libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC,
            0,
        );
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        let fd = OwnedFd::from_raw_fd(fd);
        let len = std::mem::size_of::<libc::sockaddr_un>() as libc::socklen_t;
        if libc::connect(
            std::os::fd::AsRawFd::as_raw_fd(&fd),
            (&addr as *const libc::sockaddr_un).cast(),
            len,
        ) != 0
        {
            let e = io::Error::last_os_error();
            // A nonblocking Unix connect completes at once or not at all,
            // except EAGAIN when the listener's backlog is full.
            return Err(e);
        }
        Ok(UnixStream::from(fd))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::net::UnixListener;

    #[test]
    fn the_broker_connects_only_to_its_own_ports() {
        let d = tempfile::tempdir().unwrap();
        let uds = d.path().join("v.sock");
        let l = UnixListener::bind(super::super::port_path(&uds, 1025)).unwrap();
        let c = Connector::start(&uds, SeccompMode::Off).unwrap();
        let mut s = c.connect(1025).unwrap();
        let (mut peer, _) = l.accept().unwrap();
        s.set_nonblocking(false).unwrap();
        s.write_all(b"hi").unwrap();
        let mut got = [0u8; 2];
        peer.read_exact(&mut got).unwrap();
        assert_eq!(&got, b"hi");
        // Nobody listens on another port: the errno comes back.
        let e = c.connect(4242).unwrap_err();
        assert!(
            matches!(e.raw_os_error(), Some(libc::ENOENT | libc::ECONNREFUSED)),
            "{e}"
        );
        // Still answering afterwards.
        assert!(c.connect(1025).is_ok());
    }
}

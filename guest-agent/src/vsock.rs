//! AF_VSOCK stream sockets (std has none).

use std::fs::File;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd};

/// A fresh stream socket and the address `cid:port`.
fn socket(cid: u32, port: u32) -> io::Result<(File, libc::sockaddr_vm)> {
    // SAFETY: socket returns a fresh fd we then own; sockaddr_vm is plain
    // data, zero is valid, and every field we use is set.
    unsafe {
        let fd = libc::socket(libc::AF_VSOCK, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0);
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        let mut addr: libc::sockaddr_vm = std::mem::zeroed();
        addr.svm_family = libc::AF_VSOCK as libc::sa_family_t;
        addr.svm_cid = cid;
        addr.svm_port = port;
        Ok((File::from_raw_fd(fd), addr))
    }
}

const ADDR_LEN: libc::socklen_t = std::mem::size_of::<libc::sockaddr_vm>() as libc::socklen_t;

/// Connects to `cid:port`; the stream is a plain File for read/write.
pub fn connect(cid: u32, port: u32) -> io::Result<File> {
    let (file, addr) = socket(cid, port)?;
    // SAFETY: connect reads the address we own, on an fd we own.
    let rc = unsafe {
        libc::connect(
            file.as_raw_fd(),
            (&addr as *const libc::sockaddr_vm).cast(),
            ADDR_LEN,
        )
    };
    match rc {
        0 => Ok(file),
        _ => Err(io::Error::last_os_error()),
    }
}

/// Closes the write side: the peer reads EOF.
pub fn shutdown_write(f: &File) {
    // SAFETY: shutdown on an fd we own.
    unsafe { libc::shutdown(f.as_raw_fd(), libc::SHUT_WR) };
}

/// Listens on `port` for the host's connections; each accepted stream is
/// a plain File.
pub fn listen(port: u32) -> io::Result<File> {
    let (file, addr) = socket(libc::VMADDR_CID_ANY, port)?;
    let fd = file.as_raw_fd();
    // SAFETY: bind reads the address we own; listen takes our fd.
    let bound = unsafe { libc::bind(fd, (&addr as *const libc::sockaddr_vm).cast(), ADDR_LEN) };
    // SAFETY: as above.
    if bound != 0 || unsafe { libc::listen(fd, 64) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(file)
}

/// Accepts one connection on a listener from [`listen`].
pub fn accept(listener: &File) -> io::Result<File> {
    // SAFETY: accept4 on a listening fd we own; the new fd is ours.
    let fd = unsafe {
        libc::accept4(
            listener.as_raw_fd(),
            std::ptr::null_mut(),
            std::ptr::null_mut(),
            libc::SOCK_CLOEXEC,
        )
    };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: a fresh fd from accept4.
    Ok(unsafe { File::from_raw_fd(fd) })
}

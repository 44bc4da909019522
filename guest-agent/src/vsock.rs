//! AF_VSOCK stream sockets (std has none).

use std::fs::File;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd};

/// Connects to `cid:port`; the stream is a plain File for read/write.
pub fn connect(cid: u32, port: u32) -> io::Result<File> {
    // SAFETY: plain syscalls on a fresh fd we own; sockaddr_vm is fully
    // initialised before connect reads it.
    unsafe {
        let fd = libc::socket(libc::AF_VSOCK, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0);
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        let file = File::from_raw_fd(fd);
        let mut addr: libc::sockaddr_vm = std::mem::zeroed();
        addr.svm_family = libc::AF_VSOCK as libc::sa_family_t;
        addr.svm_cid = cid;
        addr.svm_port = port;
        let rc = libc::connect(
            fd,
            (&addr as *const libc::sockaddr_vm).cast(),
            std::mem::size_of::<libc::sockaddr_vm>() as libc::socklen_t,
        );
        if rc != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(file)
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
    // SAFETY: plain syscalls on a fresh fd we own; sockaddr_vm is fully
    // initialised before bind reads it.
    unsafe {
        let fd = libc::socket(libc::AF_VSOCK, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0);
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        let file = File::from_raw_fd(fd);
        let mut addr: libc::sockaddr_vm = std::mem::zeroed();
        addr.svm_family = libc::AF_VSOCK as libc::sa_family_t;
        addr.svm_cid = libc::VMADDR_CID_ANY;
        addr.svm_port = port;
        let len = std::mem::size_of::<libc::sockaddr_vm>() as libc::socklen_t;
        if libc::bind(fd, (&addr as *const libc::sockaddr_vm).cast(), len) != 0
            || libc::listen(fd, 64) != 0
        {
            return Err(io::Error::last_os_error());
        }
        Ok(file)
    }
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

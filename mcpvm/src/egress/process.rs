//! The egress proxy's own process. `mcpvm run` starts it before it jails
//! itself (the jail has no network namespace of the host's), then hands
//! it the listening socket of the run's egress port and the `--events`
//! file over a Unix socket (SCM_RIGHTS). It confines itself with the
//! `egress` seccomp filter and serves until that socket closes (the run
//! ended) — or dies with the run (`PR_SET_PDEATHSIG`).

use std::fs::File;
use std::io::{self, Read};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::net::{UnixListener, UnixStream};
use std::os::unix::process::CommandExt;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;

use serde::{Deserialize, Serialize};
use withholding::network::NetworkPolicy;

use super::proxy::{NetLog, Proxy};

/// What the run tells the proxy with the sockets.
#[derive(Serialize, Deserialize)]
struct Handover {
    policy: NetworkPolicy,
    /// How long the run had been going (ms), for events' `at_ms`.
    since_start_ms: f64,
    events: bool,
}

/// The running proxy, seen from the run. Dropping it ends the proxy.
pub struct Egress {
    /// Never waited for (see `Drop`).
    #[allow(dead_code)]
    child: Child,
    control: UnixStream,
    policy: NetworkPolicy,
}

impl Egress {
    /// Starts `mcpvm egress`, waiting for its sockets.
    pub fn spawn(policy: &NetworkPolicy, seccomp: vmm::SeccompMode) -> io::Result<Egress> {
        Egress::spawn_exe(&crate::exe::vm()?, policy, seccomp)
    }

    /// [`Egress::spawn`] of the `mcpvm` binary at `exe`.
    pub fn spawn_exe(
        exe: &std::path::Path,
        policy: &NetworkPolicy,
        seccomp: vmm::SeccompMode,
    ) -> io::Result<Egress> {
        let (ours, theirs) = UnixStream::pair()?;
        let mut cmd = Command::new(exe);
        cmd.arg("egress")
            .arg(format!("--seccomp={}", seccomp.as_str()))
            .stdin(Stdio::from(OwnedFd::from(theirs)))
            .stdout(Stdio::null());
        if log::log_enabled!(log::Level::Info) {
            cmd.arg("--verbose");
        }
        // SAFETY: prctl is async-signal-safe; the child dies with us.
        unsafe {
            cmd.pre_exec(|| {
                if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0 {
                    return Err(io::Error::last_os_error());
                }
                Ok(())
            });
        }
        let child = cmd.spawn()?;
        ours.set_read_timeout(Some(FINISH))?;
        Ok(Egress {
            child,
            control: ours,
            policy: policy.clone(),
        })
    }

    /// Gives the proxy its listener and the events file.
    pub fn hand_over(
        &self,
        listener: UnixListener,
        events: Option<&File>,
        since_start_ms: f64,
    ) -> io::Result<()> {
        let handover = Handover {
            policy: self.policy.clone(),
            since_start_ms,
            events: events.is_some(),
        };
        let payload = serde_json::to_vec(&handover).expect("handovers serialize");
        let mut fds = vec![listener.as_raw_fd()];
        fds.extend(events.map(|f| f.as_raw_fd()));
        send_fds(&self.control, &payload, &fds)
    }
}

impl Drop for Egress {
    /// Ends the proxy: it reads EOF on its control socket, writes its last
    /// event line and exits, which closes its end; we wait for that (at
    /// most [`FINISH`]). The run's main thread may not wait for or signal
    /// a process (its seccomp filter): a proxy that does not end dies with
    /// the run (`PR_SET_PDEATHSIG`), and init reaps it.
    fn drop(&mut self) {
        let _ = self.control.shutdown(std::net::Shutdown::Write);
        // read(2), not std's recv: the main thread's filter has read.
        let mut b = [0u8; 64];
        // SAFETY: reads into a buffer we own from a socket we own.
        while unsafe { libc::read(self.control.as_raw_fd(), b.as_mut_ptr().cast(), b.len()) } > 0 {}
    }
}

/// How long a run waits for its proxy to finish.
const FINISH: std::time::Duration = std::time::Duration::from_millis(500);

/// Why the proxy's process ended in error.
#[derive(Debug, thiserror::Error)]
#[error("egress proxy")]
pub struct ProxyFailed(#[source] pub io::Error);

/// `mcpvm egress`: the proxy's process. Reads its handover from stdin.
pub fn main(seccomp: vmm::SeccompMode) -> Result<(), ProxyFailed> {
    serve(seccomp).map_err(ProxyFailed)
}

fn serve(seccomp: vmm::SeccompMode) -> io::Result<()> {
    // SAFETY: fd 0 is the control socket the run gave us.
    let control = unsafe { UnixStream::from_raw_fd(0) };
    let (payload, fds) = recv_fds(&control)?;
    let handover: Handover = serde_json::from_slice(&payload)
        .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, format!("bad handover: {e}")))?;
    let mut fds = fds.into_iter();
    let listener = UnixListener::from(
        fds.next()
            .ok_or_else(|| io::Error::other("no listener handed over"))?,
    );
    let events = match handover.events {
        true => fds.next().map(File::from),
        false => None,
    };
    // The host's own addresses, read before the filter: where its local
    // services listen is as refused as its loopback.
    let policy = handover.policy.on_host(host_addresses());
    let fd_limit = super::proxy::raise_fd_limit();
    crate::host::seccomp::confine(crate::host::seccomp::HostThread::Egress, seccomp)
        .map_err(io::Error::other)?;
    let proxy = Arc::new(
        Proxy::new(policy, NetLog::new(events, handover.since_start_ms)).within_fd_limit(fd_limit),
    );
    let server = proxy.clone();
    std::thread::Builder::new()
        .name("egress".into())
        .spawn(move || server.serve(listener))?;
    // Until the run closes its end.
    let mut b = [0u8; 64];
    while matches!((&control).read(&mut b), Ok(n) if n > 0) {}
    proxy.log.finish();
    Ok(())
}

/// Addresses the host holds that stand for other hosts, comma-separated:
/// a lab that serves its stand-in for the internet from the host itself
/// (the testbed's network scenario does) says so here.
pub const NOT_HOST_ENV: &str = "MCPVM_EGRESS_NOT_HOST";

/// Every address the host's interfaces hold (getifaddrs), but those
/// [`NOT_HOST_ENV`] names; none if it cannot say (the refused ranges
/// still hold).
fn host_addresses() -> Vec<std::net::IpAddr> {
    let not_host: Vec<std::net::IpAddr> = std::env::var(NOT_HOST_ENV)
        .unwrap_or_default()
        .split(',')
        .filter_map(|a| a.trim().parse().ok())
        .collect();
    let mut all = interface_addresses();
    all.retain(|a| !not_host.contains(a));
    all
}

fn interface_addresses() -> Vec<std::net::IpAddr> {
    let mut list: *mut libc::ifaddrs = std::ptr::null_mut();
    // SAFETY: getifaddrs allocates a list we walk and free below.
    if unsafe { libc::getifaddrs(&mut list) } != 0 {
        log::warn!(
            "egress: cannot list the host's addresses: {}",
            io::Error::last_os_error()
        );
        return Vec::new();
    }
    let mut out = Vec::new();
    let mut at = list;
    while !at.is_null() {
        // SAFETY: a node of the list getifaddrs made; its address, when
        // not null, is a sockaddr of the family it says.
        unsafe {
            let a = (*at).ifa_addr;
            if !a.is_null() {
                match i32::from((*a).sa_family) {
                    libc::AF_INET => {
                        let sin = &*(a as *const libc::sockaddr_in);
                        out.push(std::net::IpAddr::from(
                            u32::from_be(sin.sin_addr.s_addr).to_be_bytes(),
                        ));
                    }
                    libc::AF_INET6 => {
                        let sin6 = &*(a as *const libc::sockaddr_in6);
                        out.push(std::net::IpAddr::from(sin6.sin6_addr.s6_addr));
                    }
                    _ => {}
                }
            }
            at = (*at).ifa_next;
        }
    }
    // SAFETY: the list getifaddrs gave, freed once.
    unsafe { libc::freeifaddrs(list) };
    out
}

fn send_fds(sock: &UnixStream, payload: &[u8], fds: &[RawFd]) -> io::Result<()> {
    let fd_bytes = std::mem::size_of_val(fds);
    // SAFETY: CMSG_SPACE is pure arithmetic.
    let space = unsafe { libc::CMSG_SPACE(fd_bytes as u32) } as usize;
    let mut control = vec![0u8; space];
    let mut iov = libc::iovec {
        iov_base: payload.as_ptr() as *mut libc::c_void,
        iov_len: payload.len(),
    };
    // SAFETY: msghdr is plain data; every pointer set below outlives the
    // sendmsg call, and the cmsg header is written inside `control`.
    unsafe {
        let mut msg: libc::msghdr = std::mem::zeroed();
        msg.msg_iov = &mut iov;
        msg.msg_iovlen = 1;
        msg.msg_control = control.as_mut_ptr().cast();
        msg.msg_controllen = space;
        let cmsg = libc::CMSG_FIRSTHDR(&msg);
        (*cmsg).cmsg_level = libc::SOL_SOCKET;
        (*cmsg).cmsg_type = libc::SCM_RIGHTS;
        (*cmsg).cmsg_len = libc::CMSG_LEN(fd_bytes as u32) as usize;
        std::ptr::copy_nonoverlapping(
            fds.as_ptr(),
            libc::CMSG_DATA(cmsg).cast::<RawFd>(),
            fds.len(),
        );
        if libc::sendmsg(sock.as_raw_fd(), &msg, 0) < 0 {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(())
}

fn recv_fds(sock: &UnixStream) -> io::Result<(Vec<u8>, Vec<OwnedFd>)> {
    let mut payload = vec![0u8; 1 << 20];
    // SAFETY: CMSG_SPACE is pure arithmetic.
    let space = unsafe { libc::CMSG_SPACE((4 * std::mem::size_of::<RawFd>()) as u32) } as usize;
    let mut control = vec![0u8; space];
    let mut iov = libc::iovec {
        iov_base: payload.as_mut_ptr().cast(),
        iov_len: payload.len(),
    };
    let mut fds = Vec::new();
    // SAFETY: the buffers outlive recvmsg; the kernel fills at most their
    // lengths; the cmsg walk stays inside `control` (CMSG_NXTHDR checks).
    let n = unsafe {
        let mut msg: libc::msghdr = std::mem::zeroed();
        msg.msg_iov = &mut iov;
        msg.msg_iovlen = 1;
        msg.msg_control = control.as_mut_ptr().cast();
        msg.msg_controllen = space;
        let n = libc::recvmsg(sock.as_raw_fd(), &mut msg, libc::MSG_CMSG_CLOEXEC);
        if n < 0 {
            return Err(io::Error::last_os_error());
        }
        let mut cmsg = libc::CMSG_FIRSTHDR(&msg);
        while !cmsg.is_null() {
            if (*cmsg).cmsg_level == libc::SOL_SOCKET && (*cmsg).cmsg_type == libc::SCM_RIGHTS {
                let count =
                    ((*cmsg).cmsg_len - libc::CMSG_LEN(0) as usize) / std::mem::size_of::<RawFd>();
                let data = libc::CMSG_DATA(cmsg).cast::<RawFd>();
                for i in 0..count {
                    fds.push(OwnedFd::from_raw_fd(*data.add(i)));
                }
            }
            cmsg = libc::CMSG_NXTHDR(&msg, cmsg);
        }
        n as usize
    };
    payload.truncate(n);
    Ok((payload, fds))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sockets_and_files_cross_with_their_handover() {
        let dir = tempfile::tempdir().unwrap();
        let (a, b) = UnixStream::pair().unwrap();
        let listener = UnixListener::bind(dir.path().join("l.sock")).unwrap();
        let file = File::create(dir.path().join("events")).unwrap();
        send_fds(&a, b"{\"x\":1}", &[listener.as_raw_fd(), file.as_raw_fd()]).unwrap();
        let (payload, fds) = recv_fds(&b).unwrap();
        assert_eq!(payload, b"{\"x\":1}");
        assert_eq!(fds.len(), 2);
        let got = UnixListener::from(fds.into_iter().next().unwrap());
        assert_eq!(
            got.local_addr().unwrap().as_pathname(),
            Some(dir.path().join("l.sock").as_path())
        );
    }
}

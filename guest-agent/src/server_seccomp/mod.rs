//! The server's system call policy, enforced by the kernel and watched by
//! the agent (seccomp(2), `SECCOMP_RET_USER_NOTIF`, Linux 5.5+).
//!
//! [`bpf::compile`] turns a [`Seccomp`] policy into a classic BPF filter.
//! Calls a rule denies with an errno, calls a rule denies only in spawned
//! processes (`execve` for "deny-exec"), and, in log mode, every call, are
//! sent to the agent as user notifications instead of being decided in
//! the kernel: [`supervisor::Supervisor`] answers each one (the errno, or
//! "continue") and counts it, so a report can say which call was denied,
//! how often, and with which errno. Kill rules end the process in the
//! kernel (`SECCOMP_RET_KILL_PROCESS`); their evidence is the SIGSYS exit.
//!
//! In log mode the counting itself is done in the kernel when it can
//! ([`trace`]): only denials and in-children rules are notified.
//!
//! The filter is installed in the forked child just before `execve`
//! ([`ChildSide::pre_exec`]), with `no_new_privs`. The listener fd the
//! kernel returns exists only in the child, so the child sends it to the
//! agent over a socketpair; that one `sendmsg` (on that fd) is exempt from
//! the filter, so a policy that denies `sendmsg` cannot deadlock the start.

pub mod bpf;
pub mod effects;
pub mod names;
pub mod supervisor;
pub mod trace;

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

use mcpvm_protocol::messages::{Counter, SyscallCount};
use mcpvm_protocol::withholding::{Resource, Rlimit, Seccomp};
use std::collections::BTreeMap;
use trace::{ChildTrace, SyscallTrace};

#[derive(Debug, thiserror::Error)]
pub enum SeccompError {
    #[error(transparent)]
    Compile(#[from] bpf::CompileError),
    #[error("Cannot create the socketpair that carries the seccomp listener")]
    Socketpair(#[source] io::Error),
}

/// Everything the child applies between fork and exec, prepared in the
/// parent: after fork only async-signal-safe calls are allowed, so
/// nothing here allocates in the child. Move it into the command's
/// `pre_exec` hook.
pub struct ChildSide {
    rlimits: Vec<Rlimit>,
    filter: Option<(Vec<libc::sock_filter>, OwnedFd)>,
    trace: Option<ChildTrace>,
    /// The user and group the server runs as; `None` keeps root.
    identity: Option<(libc::uid_t, libc::gid_t)>,
}

/// The agent's half: receives the listener once the child has exec'd.
pub struct ParentSide {
    listener: Option<OwnedFd>,
    /// The policy the filter enforces: the asked one, with `log` moved
    /// to the kernel's histogram when there is one.
    policy: Option<Seccomp>,
    trace: Option<SyscallTrace>,
}

/// Prepares both halves of a confinement. In log mode, `count` says
/// what counts the calls: [`Counter::KernelTrace`] arms the histogram
/// (global to the kernel: only the agent, PID 1 of its own VM, asks for
/// it) and falls back to notifications where the kernel has none.
pub fn prepare(
    rlimits: &[Rlimit],
    seccomp: Option<&Seccomp>,
    count: Counter,
) -> Result<(ChildSide, ParentSide), SeccompError> {
    let Some(asked) = seccomp else {
        let child = ChildSide {
            rlimits: rlimits.to_vec(),
            filter: None,
            trace: None,
            identity: None,
        };
        let parent = ParentSide {
            listener: None,
            policy: None,
            trace: None,
        };
        return Ok((child, parent));
    };
    let trace = if asked.log && count == Counter::KernelTrace {
        SyscallTrace::arm()
            .inspect_err(|e| {
                eprintln!(
                    "mcpvm-agent: counting system calls by notification: no kernel histogram ({e})"
                )
            })
            .ok()
    } else {
        None
    };
    let mut policy = asked.clone();
    policy.log &= trace.is_none();
    let (parent, child) = socketpair().map_err(SeccompError::Socketpair)?;
    let child_trace = trace.as_ref().map(SyscallTrace::child);
    let mut exempt = vec![(libc::SYS_sendmsg, child.as_raw_fd())];
    exempt.extend(child_trace.map(|t| (libc::SYS_write, t.trigger)));
    let prog = bpf::compile(&policy, &exempt)?;
    let child = ChildSide {
        rlimits: rlimits.to_vec(),
        filter: Some((prog, child)),
        trace: child_trace,
        identity: None,
    };
    let parent = ParentSide {
        listener: Some(parent),
        policy: Some(policy),
        trace,
    };
    Ok((child, parent))
}

impl ChildSide {
    /// The server runs as `uid`/`gid` with no supplementary groups.
    pub fn as_user(mut self, uid: libc::uid_t, gid: libc::gid_t) -> Self {
        self.identity = Some((uid, gid));
        self
    }

    /// Runs in the child after fork: the trace's pid, the user's
    /// identity, no_new_privs, the filter and its listener to the agent,
    /// then resource limits.
    ///
    /// # Safety
    /// Only async-signal-safe calls on memory prepared before the fork.
    pub unsafe fn pre_exec(&self) -> io::Result<()> {
        if let Some(t) = &self.trace {
            t.follow_me()?;
        }
        if let Some((uid, gid)) = self.identity {
            // A limit above today's hard one can be set only while root.
            for r in &self.rlimits {
                raise_hard(r)?;
            }
            drop_to(uid, gid)?;
        }
        // The identity first: a filter may deny the calls that change it.
        if let Some((prog, sock)) = &self.filter {
            install(prog, sock.as_raw_fd())?;
        }
        // Last: a low fd limit must not stop the listener's creation.
        for r in &self.rlimits {
            let lim = libc::rlimit {
                rlim_cur: r.value,
                rlim_max: r.value,
            };
            if libc::setrlimit(resource_id(r.resource), &lim) != 0 {
                return Err(io::Error::last_os_error());
            }
        }
        if let Some(t) = &self.trace {
            t.start()?;
        }
        Ok(())
    }
}

/// Raises `r`'s hard limit to its value when that is higher (root only).
///
/// # Safety
/// Async-signal-safe: getrlimit and setrlimit.
unsafe fn raise_hard(r: &Rlimit) -> io::Result<()> {
    let mut now = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    if libc::getrlimit(resource_id(r.resource), &mut now) != 0 {
        return Err(io::Error::last_os_error());
    }
    if r.value > now.rlim_max {
        now.rlim_max = r.value;
        if libc::setrlimit(resource_id(r.resource), &now) != 0 {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(())
}

/// Leaves root for `uid`/`gid`, with no supplementary groups. Raw
/// system calls: after fork the child has one thread, and glibc's
/// wrappers would signal threads that no longer exist.
///
/// # Safety
/// Async-signal-safe: three system calls.
unsafe fn drop_to(uid: libc::uid_t, gid: libc::gid_t) -> io::Result<()> {
    let check = |rc: libc::c_long| {
        if rc == 0 {
            Ok(())
        } else {
            Err(io::Error::last_os_error())
        }
    };
    check(libc::syscall(
        libc::SYS_setgroups,
        0,
        std::ptr::null::<libc::gid_t>(),
    ))?;
    check(libc::syscall(libc::SYS_setresgid, gid, gid, gid))?;
    check(libc::syscall(libc::SYS_setresuid, uid, uid, uid))?;
    Ok(())
}

/// no_new_privs, the filter, and its listener sent over `sock`.
unsafe fn install(prog: &[libc::sock_filter], sock: RawFd) -> io::Result<()> {
    if libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 {
        return Err(io::Error::last_os_error());
    }
    let fprog = libc::sock_fprog {
        len: prog.len() as u16,
        filter: prog.as_ptr() as *mut libc::sock_filter,
    };
    let listener = libc::syscall(
        libc::SYS_seccomp,
        libc::SECCOMP_SET_MODE_FILTER,
        libc::SECCOMP_FILTER_FLAG_NEW_LISTENER,
        &fprog as *const libc::sock_fprog,
    );
    if listener < 0 {
        return Err(io::Error::last_os_error());
    }
    send_fd(sock, listener as RawFd)
}

impl ParentSide {
    /// Starts the thread that answers the child's notifications. Call it
    /// before spawning: the child's `execve` may itself be a notified call,
    /// and `spawn` returns only once the exec is done. The thread first
    /// waits for the listener; if the child never sends one (it failed
    /// before its filter), it ends when the command, which holds the
    /// child's end of the socketpair, is dropped. None without a policy.
    /// Starts the supervisor; `recorder` records what a recording policy
    /// asks for.
    pub fn supervise(self, recorder: Option<effects::Recorder>) -> Option<Watch> {
        let (parent, policy) = (self.listener?, self.policy?);
        let recorder = recorder.filter(|_| policy.record);
        let supervisor =
            supervisor::Supervisor::start(&policy, move || recv_fd(parent.as_raw_fd()), recorder);
        Some(Watch {
            supervisor,
            trace: self.trace,
        })
    }
}

/// What watches a running server: the supervisor, and the kernel's
/// histogram when it counts.
pub struct Watch {
    supervisor: supervisor::Supervisor,
    trace: Option<SyscallTrace>,
}

/// The server's system calls when it has exited.
pub struct Tally {
    pub denied: Vec<SyscallCount>,
    pub used: Vec<SyscallCount>,
    pub counted_by: Counter,
}

impl Watch {
    /// Waits (bounded) for the supervisor, then reads the histogram and
    /// adds the denials (which never reach the tracepoint) to it.
    pub fn finish(mut self, within: std::time::Duration) -> Tally {
        let (denied, used) = self.supervisor.finish(within);
        tally(self.trace.as_mut(), denied, used)
    }

    /// The calls so far, the server still running ([`Watch::finish`]
    /// reads them again, whole, when it exits).
    pub fn so_far(&mut self) -> Tally {
        let (denied, used) = self.supervisor.report();
        tally(self.trace.as_mut(), denied, used)
    }
}

/// The histogram's counts, when the kernel counts, with the denials
/// added (they never reach the tracepoint); else the supervisor's own.
fn tally(
    trace: Option<&mut SyscallTrace>,
    denied: Vec<SyscallCount>,
    used: Vec<SyscallCount>,
) -> Tally {
    let Some(trace) = trace else {
        return Tally {
            denied,
            used,
            counted_by: Counter::Notification,
        };
    };
    let counts = trace.counts().unwrap_or_else(|e| {
        eprintln!("mcpvm-agent: cannot read the system call histogram: {e}");
        BTreeMap::new()
    });
    Tally {
        used: merge(&counts, &denied),
        denied,
        counted_by: Counter::KernelTrace,
    }
}

/// The calls made (by number, from the histogram) plus the ones denied,
/// by name, in the order of their numbers.
pub fn merge(made: &BTreeMap<u32, u64>, denied: &[SyscallCount]) -> Vec<SyscallCount> {
    let mut all: BTreeMap<u32, u64> = made.clone();
    let mut unnamed: BTreeMap<String, u64> = BTreeMap::new();
    for d in denied {
        match syscall_table::number(&d.syscall) {
            Some(nr) => *all.entry(nr).or_default() += d.count,
            None => *unnamed.entry(d.syscall.clone()).or_default() += d.count,
        }
    }
    all.into_iter()
        .map(|(nr, count)| (names::name(nr), count))
        .chain(unnamed)
        .map(|(syscall, count)| SyscallCount {
            syscall,
            errno: None,
            count,
        })
        .collect()
}

fn socketpair() -> io::Result<(OwnedFd, OwnedFd)> {
    let mut fds = [0; 2];
    // SAFETY: socketpair writes two fds into the array we pass.
    if unsafe {
        libc::socketpair(
            libc::AF_UNIX,
            libc::SOCK_SEQPACKET | libc::SOCK_CLOEXEC,
            0,
            fds.as_mut_ptr(),
        )
    } != 0
    {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: both fds were just created and are ours.
    Ok(unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) })
}

const CMSG_SPACE: usize = 24; // CMSG_SPACE(sizeof(int)) on x86_64

/// sendmsg with one fd as SCM_RIGHTS; async-signal-safe (stack only).
unsafe fn send_fd(sock: RawFd, fd: RawFd) -> io::Result<()> {
    let mut byte = [0u8; 1];
    let mut iov = libc::iovec {
        iov_base: byte.as_mut_ptr().cast(),
        iov_len: 1,
    };
    let mut cbuf = [0u64; CMSG_SPACE / 8];
    let mut msg: libc::msghdr = std::mem::zeroed();
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    msg.msg_control = cbuf.as_mut_ptr().cast();
    msg.msg_controllen = CMSG_SPACE;
    let c = libc::CMSG_FIRSTHDR(&msg);
    (*c).cmsg_level = libc::SOL_SOCKET;
    (*c).cmsg_type = libc::SCM_RIGHTS;
    (*c).cmsg_len = libc::CMSG_LEN(4) as usize;
    std::ptr::write_unaligned(libc::CMSG_DATA(c).cast::<RawFd>(), fd);
    if libc::sendmsg(sock, &msg, 0) != 1 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

fn recv_fd(sock: RawFd) -> io::Result<OwnedFd> {
    let mut byte = [0u8; 1];
    let mut iov = libc::iovec {
        iov_base: byte.as_mut_ptr().cast(),
        iov_len: 1,
    };
    let mut cbuf = [0u64; CMSG_SPACE / 8];
    // SAFETY: a zeroed msghdr pointing at buffers that outlive the call;
    // the control message is checked before its fd is taken.
    unsafe {
        let mut msg: libc::msghdr = std::mem::zeroed();
        msg.msg_iov = &mut iov;
        msg.msg_iovlen = 1;
        msg.msg_control = cbuf.as_mut_ptr().cast();
        msg.msg_controllen = CMSG_SPACE;
        let n = libc::recvmsg(sock, &mut msg, libc::MSG_CMSG_CLOEXEC);
        if n < 0 {
            return Err(io::Error::last_os_error());
        }
        let c = libc::CMSG_FIRSTHDR(&msg);
        if n == 0 || c.is_null() || (*c).cmsg_type != libc::SCM_RIGHTS {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                "the child exited before installing its filter",
            ));
        }
        let fd = std::ptr::read_unaligned(libc::CMSG_DATA(c).cast::<RawFd>());
        Ok(OwnedFd::from_raw_fd(fd))
    }
}

/// The kernel's number for a resource.
fn resource_id(r: Resource) -> libc::__rlimit_resource_t {
    match r {
        Resource::Nofile => libc::RLIMIT_NOFILE,
        Resource::Nproc => libc::RLIMIT_NPROC,
        Resource::Cpu => libc::RLIMIT_CPU,
        Resource::Fsize => libc::RLIMIT_FSIZE,
        Resource::As => libc::RLIMIT_AS,
    }
}

// The host seccomp allow-lists: which system calls each kind of VMM
// thread may make, and how a list becomes a filter. Shared with
// vmm/build.rs (by include!), which compiles every filter when the VMM is
// built, so this file holds plain items only (no inner attributes or
// `//!` docs, no `crate::` paths).

use seccompiler::{
    SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompFilter, SeccompRule,
    TargetArch,
};
use std::collections::BTreeMap;

/// The kinds of thread, each with its own list of system calls.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ThreadKind {
    /// The thread that builds the VM, waits for its end and tears it down.
    Main,
    /// Runs `KVM_RUN` and the MMIO/port handlers of every device.
    Vcpu,
    /// virtio-blk: reads and writes its disk image.
    Block,
    /// virtio-vsock: accepts host Unix sockets and moves packets; asks
    /// the connector for guest-initiated streams.
    Vsock,
    /// virtio-vsock's connector: connects to `<uds_path>_<port>` for the
    /// vsock thread and passes the socket back; reads nothing else.
    VsockConnector,
    /// virtio-rng: `getrandom`.
    Rng,
    /// An embedder's thread that copies between host sockets it was
    /// handed and the process's stdio.
    Relay,
    /// An embedder's thread that accepts the guest's connections on host
    /// sockets and starts a relay thread for each (which confines itself
    /// as [`ThreadKind::Relay`] on top of this filter): a relay's calls
    /// plus starting threads and installing their filters.
    Channels,
    /// An embedder's thread that sends a host directory to the guest over
    /// a socket and unpacks the guest's copy beside it: the one kind with
    /// host file access, and no other network than its socket.
    HostFiles,
    /// Forwards the process's signals to the VM (`crate::signals`).
    Signals,
    /// An embedder's thread that accepts the host's connections to a
    /// server in the guest (`mcpvm run --listen`) and, on a thread per
    /// connection, connects each to the VMM's vsock socket and copies:
    /// Unix sockets only, no files.
    Inbound,
    /// An embedder's process that connects to the network on the guest's
    /// behalf (mcpvm's egress proxy): stream sockets of the internet
    /// families, the host's resolver (its files, DNS over UDP, nscd's
    /// socket, netlink for address checks), threads; no file writes,
    /// no exec.
    Egress,
}

impl ThreadKind {
    pub fn name(self) -> &'static str {
        match self {
            ThreadKind::Main => "main",
            ThreadKind::Vcpu => "vcpu",
            ThreadKind::Block => "virtio-blk",
            ThreadKind::Vsock => "vsock",
            ThreadKind::VsockConnector => "vsock-connector",
            ThreadKind::Rng => "virtio-rng",
            ThreadKind::Relay => "relay",
            ThreadKind::Channels => "channels",
            ThreadKind::HostFiles => "host-files",
            ThreadKind::Signals => "signals",
            ThreadKind::Inbound => "inbound",
            ThreadKind::Egress => "egress",
        }
    }

    /// Its place in [`KINDS`] (and so in the compiled programs): a match,
    /// so that a new kind cannot be left without one.
    pub fn index(self) -> usize {
        match self {
            ThreadKind::Main => 0,
            ThreadKind::Vcpu => 1,
            ThreadKind::Block => 2,
            ThreadKind::Vsock => 3,
            ThreadKind::VsockConnector => 4,
            ThreadKind::Rng => 5,
            ThreadKind::Signals => 6,
            ThreadKind::Channels => 7,
            ThreadKind::Relay => 8,
            ThreadKind::HostFiles => 9,
            ThreadKind::Inbound => 10,
            ThreadKind::Egress => 11,
        }
    }
}

/// What every Rust thread needs: memory, locks and channels, signals
/// (the vCPU kick, abort: `tgkill`, to this process only, see
/// [`OWN_SIGNALS`]), time, logging to stderr, closing fds, exiting.
pub const COMMON: &[i64] = &[
    libc::SYS_brk,
    libc::SYS_mmap,
    libc::SYS_munmap,
    libc::SYS_mremap,
    libc::SYS_mprotect,
    libc::SYS_madvise,
    libc::SYS_futex,
    libc::SYS_sched_yield,
    libc::SYS_rt_sigreturn,
    libc::SYS_rt_sigprocmask,
    libc::SYS_sigaltstack,
    libc::SYS_restart_syscall,
    libc::SYS_clock_gettime,
    libc::SYS_clock_nanosleep,
    libc::SYS_nanosleep,
    libc::SYS_getrandom,
    libc::SYS_write,
    libc::SYS_writev,
    libc::SYS_close,
    libc::SYS_getpid,
    libc::SYS_gettid,
    libc::SYS_exit,
    libc::SYS_exit_group,
];

/// How the lists show `tgkill`: every thread may signal its own
/// process's threads (a vCPU kick, an abort), and no other process. No
/// other call that names a process (`kill`, `tkill`, `ptrace`, pidfds) is
/// allowed to any thread, so a compromised VMM cannot signal or inspect
/// the user's other processes.
pub const OWN_SIGNALS: &str = "tgkill(to this process)";

/// Waiting on eventfds and sockets with epoll, reading eventfds.
const EVENT_LOOP: &[i64] = &[
    libc::SYS_epoll_wait,
    libc::SYS_epoll_pwait,
    libc::SYS_epoll_ctl,
    libc::SYS_read,
];

/// Starting a thread that confines itself: glibc's pthread_create
/// (clone3, or clone on older kernels; the new thread's robust list and
/// rseq area, its arena), and in the new thread installing its own filter on top
/// (`prctl(PR_SET_NO_NEW_PRIVS)`, `seccomp`) and the SIGSYS handler.
const START_CONFINED_THREAD: &[i64] = &[
    libc::SYS_clone,
    libc::SYS_clone3,
    libc::SYS_set_robust_list,
    libc::SYS_rseq,
    libc::SYS_prctl,
    libc::SYS_seccomp,
    libc::SYS_rt_sigaction,
    // glibc counts CPUs when a new thread's first malloc makes an arena.
    libc::SYS_sched_getaffinity,
];

/// The host side of a socket: accepting it and copying through it.
const SOCKET_PEER: &[i64] = &[
    libc::SYS_read,
    libc::SYS_accept4,
    libc::SYS_recvfrom,
    libc::SYS_sendto,
    libc::SYS_shutdown,
    libc::SYS_fcntl,
];

/// A relay's copy between a pipe and a socket: splice, and waiting for
/// either end in poll (the relay never waits inside a splice).
const SPLICE: &[i64] = &[libc::SYS_splice, libc::SYS_poll, libc::SYS_ppoll];

/// Reading a directory tree and writing one: open, stat, list, create,
/// link, rename, remove, set modes and times.
const FILE_TREE: &[i64] = &[
    libc::SYS_openat,
    libc::SYS_fstat,
    libc::SYS_newfstatat,
    libc::SYS_statx,
    libc::SYS_lseek,
    libc::SYS_getdents64,
    libc::SYS_readlink,
    libc::SYS_readlinkat,
    libc::SYS_mkdir,
    libc::SYS_mkdirat,
    libc::SYS_symlink,
    libc::SYS_symlinkat,
    libc::SYS_linkat,
    libc::SYS_unlink,
    libc::SYS_unlinkat,
    libc::SYS_rmdir,
    libc::SYS_rename,
    libc::SYS_renameat,
    libc::SYS_renameat2,
    libc::SYS_chmod,
    libc::SYS_fchmod,
    libc::SYS_fchmodat,
    libc::SYS_utimensat,
    libc::SYS_ftruncate,
    libc::SYS_fsync,
];

pub fn calls(kind: ThreadKind) -> Vec<i64> {
    let own: &[&[i64]] = match kind {
        // Tearing down: unmapping guest memory, removing the vsock socket
        // and, for the embedder after the run, its result files and run
        // directory. Joining and kicking vCPUs is futex and tgkill.
        ThreadKind::Main => &[&[
            libc::SYS_read,
            libc::SYS_openat,
            libc::SYS_fcntl,
            libc::SYS_fstat,
            libc::SYS_newfstatat,
            libc::SYS_statx,
            libc::SYS_lseek,
            libc::SYS_getdents64,
            libc::SYS_unlink,
            libc::SYS_unlinkat,
            libc::SYS_rmdir,
            libc::SYS_fsync,
            libc::SYS_shutdown,
            libc::SYS_sched_getaffinity,
            // Writing a snapshot: a directory made beside the target,
            // renamed into place.
            libc::SYS_mkdir,
            libc::SYS_mkdirat,
            libc::SYS_rename,
            libc::SYS_renameat,
            libc::SYS_renameat2,
        ]],
        // ioctl is KVM_RUN and snapshot reads (checked below); activation builds a
        // device's epoll and eventfds, reset writes its kill eventfd.
        ThreadKind::Vcpu => &[&[
            libc::SYS_read,
            libc::SYS_eventfd2,
            libc::SYS_epoll_create1,
            libc::SYS_epoll_ctl,
            libc::SYS_dup,
            libc::SYS_fcntl,
        ]],
        ThreadKind::Block => &[
            EVENT_LOOP,
            &[
                libc::SYS_pread64,
                libc::SYS_preadv,
                libc::SYS_pwrite64,
                libc::SYS_pwritev,
                libc::SYS_fsync,
                libc::SYS_fdatasync,
                libc::SYS_lseek,
            ],
        ],
        // No socket() or connect(): the connector does that, with a path
        // of its own; the socket comes back with recvmsg (SCM_RIGHTS).
        ThreadKind::Vsock => &[
            EVENT_LOOP,
            SOCKET_PEER,
            &[libc::SYS_recvmsg, libc::SYS_sendmsg, libc::SYS_getsockopt],
        ],
        // socket() is limited to AF_UNIX below; the path it connects to
        // is `<uds_path>_<port>`, the port the one thing it is told.
        // fcntl: std checks a raw fd it takes ownership of (F_GETFD).
        ThreadKind::VsockConnector => &[&[
            libc::SYS_read,
            libc::SYS_recvfrom,
            libc::SYS_connect,
            libc::SYS_sendmsg,
            libc::SYS_fcntl,
        ]],
        ThreadKind::Rng => &[EVENT_LOOP],
        ThreadKind::Relay => &[SOCKET_PEER, SPLICE],
        ThreadKind::Channels => &[SOCKET_PEER, SPLICE, START_CONFINED_THREAD],
        ThreadKind::HostFiles => &[SOCKET_PEER, FILE_TREE],
        // Reads signal numbers from its pipe.
        ThreadKind::Signals => &[&[libc::SYS_read]],
        // socket() is limited to AF_UNIX below.
        ThreadKind::Inbound => &[
            SOCKET_PEER,
            START_CONFINED_THREAD,
            &[libc::SYS_connect, libc::SYS_setsockopt],
        ],
        // socket() is limited by family below.
        ThreadKind::Egress => &[
            SOCKET_PEER,
            START_CONFINED_THREAD,
            &[
                libc::SYS_connect,
                libc::SYS_bind,
                libc::SYS_getsockname,
                libc::SYS_getpeername,
                libc::SYS_setsockopt,
                libc::SYS_getsockopt,
                libc::SYS_recvmsg,
                libc::SYS_sendmsg,
                libc::SYS_sendmmsg,
                libc::SYS_poll,
                libc::SYS_ppoll,
                libc::SYS_fstat,
                libc::SYS_newfstatat,
                libc::SYS_statx,
                libc::SYS_lseek,
                libc::SYS_uname,
            ],
        ],
    };
    let mut all: Vec<i64> = COMMON
        .iter()
        .chain(own.iter().flat_map(|l| l.iter()))
        .copied()
        .collect();
    all.sort_unstable();
    all.dedup();
    all
}

/// Calls allowed only with a given argument: (call, argument index, value).
pub fn conditional(kind: ThreadKind) -> Vec<(i64, u8, u64)> {
    let ioctls = |list: &[u64]| -> Vec<(i64, u8, u64)> {
        list.iter().map(|&n| (libc::SYS_ioctl, 1, n)).collect()
    };
    match kind {
        // KVM_RUN, and reading its own state for a snapshot.
        ThreadKind::Vcpu => ioctls(&[KVM_RUN])
            .into_iter()
            .chain(ioctls(VCPU_SAVE))
            .collect(),
        // The terminal check of stderr, and reading the in-kernel devices
        // for a snapshot.
        ThreadKind::Main => ioctls(&[libc::TCGETS])
            .into_iter()
            .chain(ioctls(VM_SAVE))
            .collect(),
        // std's set_nonblocking is ioctl(FIONBIO).
        ThreadKind::Vsock => vec![(libc::SYS_ioctl, 1, libc::FIONBIO)],
        ThreadKind::VsockConnector | ThreadKind::Inbound => {
            vec![(libc::SYS_socket, 0, libc::AF_UNIX as u64)]
        }
        ThreadKind::Relay | ThreadKind::Channels => ioctls(&[libc::TCGETS]),
        // Its sockets, and FIONREAD (the resolver sizes a UDP answer).
        ThreadKind::Egress => [
            libc::AF_INET,
            libc::AF_INET6,
            libc::AF_UNIX,
            libc::AF_NETLINK,
        ]
        .iter()
        .map(|&f| (libc::SYS_socket, 0, f as u64))
        // Files only as the resolver opens them: read-only.
        .chain([(
            libc::SYS_openat,
            2,
            (libc::O_RDONLY | libc::O_CLOEXEC) as u64,
        )])
        .chain(ioctls(&[libc::FIONREAD, libc::FIONBIO, libc::TCGETS]))
        .collect(),
        _ => Vec::new(),
    }
}

/// `_IO(KVMIO, 0x80)`.
const KVM_RUN: u64 = 0xae80;

/// `_IOR(KVMIO, nr, T)` and `_IOWR(KVMIO, nr, T)` (asm-generic/ioctl.h).
const fn kvm_ior<T>(nr: u64) -> u64 {
    (2 << 30) | ((std::mem::size_of::<T>() as u64) << 16) | (0xae << 8) | nr
}
const fn kvm_iowr<T>(nr: u64) -> u64 {
    (3 << 30) | ((std::mem::size_of::<T>() as u64) << 16) | (0xae << 8) | nr
}

/// What a vCPU thread reads of itself when it pauses for a snapshot.
pub const VCPU_SAVE: &[u64] = {
    use kvm_bindings::*;
    &[
        kvm_ior::<kvm_regs>(0x81),        // KVM_GET_REGS
        kvm_ior::<kvm_sregs>(0x83),       // KVM_GET_SREGS
        kvm_iowr::<kvm_msrs>(0x88),       // KVM_GET_MSRS
        kvm_ior::<kvm_lapic_state>(0x8e), // KVM_GET_LAPIC
        kvm_ior::<kvm_mp_state>(0x98),    // KVM_GET_MP_STATE
        kvm_ior::<kvm_vcpu_events>(0x9f), // KVM_GET_VCPU_EVENTS
        kvm_ior::<kvm_debugregs>(0xa1),   // KVM_GET_DEBUGREGS
        kvm_ior::<kvm_xsave>(0xa4),       // KVM_GET_XSAVE
        kvm_ior::<kvm_xcrs>(0xa6),        // KVM_GET_XCRS
    ]
};

/// What the main thread reads of the VM for a snapshot.
pub const VM_SAVE: &[u64] = {
    use kvm_bindings::*;
    &[
        kvm_iowr::<kvm_irqchip>(0x62),   // KVM_GET_IRQCHIP
        kvm_ior::<kvm_pit_state2>(0x9f), // KVM_GET_PIT2
        kvm_ior::<kvm_clock_data>(0x7c), // KVM_GET_CLOCK
    ]
};

/// Every kind, in the order docs/security.md lists them.
pub const KINDS: [ThreadKind; 12] = [
    ThreadKind::Main,
    ThreadKind::Vcpu,
    ThreadKind::Block,
    ThreadKind::Vsock,
    ThreadKind::VsockConnector,
    ThreadKind::Rng,
    ThreadKind::Signals,
    ThreadKind::Channels,
    ThreadKind::Relay,
    ThreadKind::HostFiles,
    ThreadKind::Inbound,
    ThreadKind::Egress,
];

/// Stands for the process's own pid in the compiled filters (the one
/// argument only known at run time: `tgkill`'s target); above any pid
/// (`pid_max` is at most 2^22), and not a value any list compares with.
pub const PID_PLACEHOLDER: u32 = 0x7fff_fffe;

/// The filter for `kind`: its calls allowed, `tgkill` only to `pid`,
/// anything else met with `mismatch`. Used by build.rs, and by the test
/// that holds the compiled programs to the lists.
#[cfg_attr(not(test), allow(dead_code))]
pub fn filter(
    kind: ThreadKind,
    mismatch: SeccompAction,
    pid: u32,
) -> Result<SeccompFilter, String> {
    let err = |e: &dyn std::fmt::Display| format!("the {} filter: {e}", kind.name());
    let mut rules: BTreeMap<i64, Vec<SeccompRule>> =
        calls(kind).into_iter().map(|nr| (nr, Vec::new())).collect();
    for (nr, arg, value) in conditional(kind) {
        let cond = SeccompCondition::new(arg, SeccompCmpArgLen::Qword, SeccompCmpOp::Eq, value)
            .map_err(|e| err(&e))?;
        rules
            .entry(nr)
            .or_default()
            .push(SeccompRule::new(vec![cond]).map_err(|e| err(&e))?);
    }
    let to_own = SeccompCondition::new(0, SeccompCmpArgLen::Dword, SeccompCmpOp::Eq, pid.into())
        .map_err(|e| err(&e))?;
    rules
        .entry(libc::SYS_tgkill)
        .or_default()
        .push(SeccompRule::new(vec![to_own]).map_err(|e| err(&e))?);
    SeccompFilter::new(rules, mismatch, SeccompAction::Allow, TargetArch::x86_64)
        .map_err(|e| err(&e))
}

//! Host-side confinement: a seccomp filter per thread kind, installed by
//! each thread on itself before the guest runs.
//!
//! The guest drives the vCPU threads (every MMIO and port access) and the
//! device threads (every descriptor chain), so those are where a device
//! bug would be exploited; each kind may make only the system calls its
//! work needs (the lists below, documented in docs/security.md). A thread
//! inherits the filter of the thread that creates it, so device threads
//! are started when the VM is built, from the unconfined main thread, and
//! wait for activation (see `devices::virtio::DeviceThread`).
//!
//! Modes: `On` traps any other call, says which thread made which call and
//! ends the process with [`EXIT_BAD_SYSCALL`]; `Log` lets it through and
//! has the kernel log it (`audit: type=1326` in the kernel log, with
//! `syscall=N`); `Off` installs nothing.

use std::cell::Cell;
use std::collections::BTreeMap;
use std::str::FromStr;

use seccompiler::{
    BpfProgram, SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompFilter,
    SeccompRule, TargetArch,
};

/// The exit status after a trapped call: 128 + SIGSYS, as a shell shows a
/// process killed by that signal.
pub const EXIT_BAD_SYSCALL: i32 = 128 + libc::SIGSYS;

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum SeccompMode {
    Off,
    Log,
    #[default]
    On,
}

impl SeccompMode {
    pub fn as_str(self) -> &'static str {
        match self {
            SeccompMode::Off => "off",
            SeccompMode::Log => "log",
            SeccompMode::On => "on",
        }
    }
}

impl FromStr for SeccompMode {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "off" => Ok(SeccompMode::Off),
            "log" => Ok(SeccompMode::Log),
            "on" => Ok(SeccompMode::On),
            _ => Err(format!("'{s}' is not a seccomp mode; use off, log or on")),
        }
    }
}

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
}

/// What every Rust thread needs: memory, locks and channels, signals
/// (the vCPU kick, abort: `tgkill`, to this process only, see
/// [`OWN_SIGNALS`]), time, logging to stderr, closing fds, exiting.
const COMMON: &[i64] = &[
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

fn calls(kind: ThreadKind) -> Vec<i64> {
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
        ThreadKind::Relay => &[SOCKET_PEER],
        ThreadKind::Channels => &[SOCKET_PEER, START_CONFINED_THREAD],
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
fn conditional(kind: ThreadKind) -> Vec<(i64, u8, u64)> {
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
const VCPU_SAVE: &[u64] = {
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
const VM_SAVE: &[u64] = {
    use kvm_bindings::*;
    &[
        kvm_iowr::<kvm_irqchip>(0x62),   // KVM_GET_IRQCHIP
        kvm_ior::<kvm_pit_state2>(0x9f), // KVM_GET_PIT2
        kvm_ior::<kvm_clock_data>(0x7c), // KVM_GET_CLOCK
    ]
};

/// The names of the calls `kind` may make, for documentation and errors.
pub fn allowed_names(kind: ThreadKind) -> Vec<String> {
    let name = |nr: i64| syscall_table::name(nr as u32).unwrap_or("?").to_string();
    let mut names: Vec<String> = calls(kind).into_iter().map(name).collect();
    names.push(OWN_SIGNALS.to_string());
    for (nr, arg, value) in conditional(kind) {
        names.push(format!("{}(arg{arg} = {value:#x})", name(nr)));
    }
    names
}

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

/// The allow-lists as the Markdown table in docs/security.md (a test
/// keeps the two the same).
pub fn markdown_table() -> String {
    let name = |nr: &i64| syscall_table::name(*nr as u32).unwrap_or("?").to_string();
    let mut common: Vec<String> = COMMON.iter().map(name).collect();
    common.push(OWN_SIGNALS.to_string());
    let mut s = String::from("| thread | system calls allowed |\n|---|---|\n");
    s += &format!("| every kind | {} |\n", common.join(", "));
    for kind in KINDS {
        let own: Vec<String> = allowed_names(kind)
            .into_iter()
            .filter(|n| !common.contains(n))
            .collect();
        s += &format!("| {} | {} |\n", kind.name(), own.join(", "));
    }
    s
}

#[derive(Debug, thiserror::Error)]
pub enum SeccompError {
    #[error("Cannot build the seccomp filter for {0} threads: {1}")]
    Build(&'static str, String),
    #[error("Cannot install the seccomp filter on a {0} thread")]
    Install(&'static str, #[source] seccompiler::Error),
    #[error("Cannot install the SIGSYS handler")]
    Handler(#[source] std::io::Error),
    #[error("A thread ended before it could confine itself")]
    Thread,
}

/// The BPF program for `kind` in `mode` (None when `mode` is Off).
pub fn program(kind: ThreadKind, mode: SeccompMode) -> Result<Option<BpfProgram>, SeccompError> {
    let mismatch = match mode {
        SeccompMode::Off => return Ok(None),
        SeccompMode::Log => SeccompAction::Log,
        SeccompMode::On => SeccompAction::Trap,
    };
    let err = |e: &dyn std::fmt::Display| SeccompError::Build(kind.name(), e.to_string());
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
    // SAFETY: getpid has no preconditions.
    let own = unsafe { libc::getpid() } as u64;
    let to_own = SeccompCondition::new(0, SeccompCmpArgLen::Dword, SeccompCmpOp::Eq, own)
        .map_err(|e| err(&e))?;
    rules
        .entry(libc::SYS_tgkill)
        .or_default()
        .push(SeccompRule::new(vec![to_own]).map_err(|e| err(&e))?);
    let filter = SeccompFilter::new(rules, mismatch, SeccompAction::Allow, TargetArch::x86_64)
        .map_err(|e| err(&e))?;
    BpfProgram::try_from(filter).map(Some).map_err(|e| err(&e))
}

thread_local! {
    /// The calling thread's kind, for the SIGSYS message. A thread that
    /// never called `confine` but carries a filter was started by a
    /// confined thread (which none of ours does).
    static KIND: Cell<&'static str> = const { Cell::new("child-of-a-confined") };
}

/// Closes every file descriptor above stderr that this process inherited:
/// whatever its parent left open (an MCP client's other pipes, sockets)
/// is not the VM's business. Call first thing, before opening anything.
pub fn close_inherited_fds() -> std::io::Result<()> {
    // SAFETY: close_range only closes descriptors; nothing is open yet
    // that this process itself needs beyond stdio.
    let rc = unsafe { libc::syscall(libc::SYS_close_range, 3u32, u32::MAX, 0u32) };
    if rc == 0 {
        return Ok(());
    }
    // Kernels before 5.9: one by one, from /proc/self/fd.
    let fds: Vec<i32> = std::fs::read_dir("/proc/self/fd")?
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse().ok())
        .filter(|&fd| fd > 2)
        .collect();
    for fd in fds {
        // SAFETY: closing a descriptor number; the directory's own fd is
        // gone by now (EBADF is ignored).
        unsafe { libc::close(fd) };
    }
    Ok(())
}

/// Confines the calling thread (and the threads it creates later) to
/// `kind`'s calls. In `On` mode, also installs the SIGSYS handler that
/// reports a trapped call.
pub fn confine(kind: ThreadKind, mode: SeccompMode) -> Result<(), SeccompError> {
    let Some(prog) = program(kind, mode)? else {
        return Ok(());
    };
    if mode == SeccompMode::On {
        install_sigsys_handler().map_err(SeccompError::Handler)?;
    }
    keep_malloc_from_opening_files();
    KIND.with(|k| k.set(kind.name()));
    seccompiler::apply_filter(&prog).map_err(|e| SeccompError::Install(kind.name(), e))?;
    log::debug!("seccomp: {} thread confined ({mode:?})", kind.name());
    Ok(())
}

/// glibc malloc opens files in two places no confined thread may: the
/// first time it shrinks a thread arena's heap it reads
/// /proc/sys/vm/overcommit_memory (seen on a vsock thread after 64
/// streams closed), and once a process has more than eight arenas it
/// counts CPUs from /sys before making another (seen on a thread started
/// by a confined one, in a VM with two disks). A trim threshold no heap
/// reaches means it never shrinks one (wholly free heaps are still
/// unmapped, large blocks still munmapped); a fixed arena limit means it
/// never counts CPUs.
fn keep_malloc_from_opening_files() {
    #[cfg(target_env = "gnu")]
    // SAFETY: mallopt only sets malloc parameters; any thread may call it.
    unsafe {
        libc::mallopt(libc::M_TRIM_THRESHOLD, i32::MAX);
        libc::mallopt(libc::M_ARENA_MAX, 16);
    }
}

fn install_sigsys_handler() -> std::io::Result<()> {
    // SAFETY: sigaction with a zeroed struct, SA_SIGINFO and a handler
    // that only formats into a stack buffer, writes and exits.
    unsafe {
        let mut act: libc::sigaction = std::mem::zeroed();
        act.sa_sigaction = on_sigsys as *const () as usize;
        act.sa_flags = libc::SA_SIGINFO;
        libc::sigemptyset(&mut act.sa_mask);
        if libc::sigaction(libc::SIGSYS, &act, std::ptr::null_mut()) != 0 {
            return Err(std::io::Error::last_os_error());
        }
    }
    Ok(())
}

/// The system call number in a SIGSYS siginfo: `si_syscall`, after
/// `si_call_addr` in the union that starts at byte 16.
fn trapped_syscall(info: &libc::siginfo_t) -> i32 {
    // SAFETY: siginfo_t is 128 bytes; bytes 24..28 are si_syscall for
    // SIGSYS (include/uapi/asm-generic/siginfo.h).
    unsafe {
        std::ptr::read_unaligned(
            (info as *const libc::siginfo_t)
                .cast::<u8>()
                .add(24)
                .cast::<i32>(),
        )
    }
}

/// Says which thread made which call, then ends the process: only write
/// and exit_group, which every filter allows, and no allocation.
extern "C" fn on_sigsys(_: libc::c_int, info: *mut libc::siginfo_t, _: *mut libc::c_void) {
    // SAFETY: the kernel passes a valid siginfo to an SA_SIGINFO handler.
    let nr = unsafe { trapped_syscall(&*info) };
    let name = syscall_table::name(nr as u32).unwrap_or("unknown");
    let kind = KIND.with(Cell::get);
    let mut msg = Message::default();
    msg.push("mcpvm: seccomp: a ");
    msg.push(kind);
    msg.push(" thread made the system call ");
    msg.push(name);
    msg.push(" (");
    msg.push_number(nr);
    msg.push("), which its filter does not allow; the VMM stops. Run with --seccomp log to see every such call (kernel log), and report it.\n");
    // SAFETY: write and _exit are async-signal-safe.
    unsafe {
        libc::write(2, msg.buf.as_ptr().cast(), msg.len);
        libc::_exit(EXIT_BAD_SYSCALL);
    }
}

/// A fixed buffer a signal handler can format into.
struct Message {
    buf: [u8; 320],
    len: usize,
}

impl Default for Message {
    fn default() -> Self {
        Message {
            buf: [0; 320],
            len: 0,
        }
    }
}

impl Message {
    fn push(&mut self, s: &str) {
        let n = s.len().min(self.buf.len() - self.len);
        self.buf[self.len..self.len + n].copy_from_slice(&s.as_bytes()[..n]);
        self.len += n;
    }

    fn push_number(&mut self, n: i32) {
        let mut digits = [0u8; 12];
        let mut i = digits.len();
        let mut v = n.unsigned_abs();
        loop {
            i -= 1;
            digits[i] = b'0' + (v % 10) as u8;
            v /= 10;
            if v == 0 {
                break;
            }
        }
        if n < 0 {
            self.push("-");
        }
        // SAFETY-free: ASCII digits are valid UTF-8.
        self.push(std::str::from_utf8(&digits[i..]).unwrap_or("?"));
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_snapshot_ioctl_numbers_are_the_kernel_s() {
        // From <linux/kvm.h> on x86_64, as strace prints them.
        assert_eq!(
            VCPU_SAVE,
            &[
                0x8090ae81, 0x8138ae83, 0xc008ae88, 0x8400ae8e, 0x8004ae98, 0x8040ae9f, 0x8080aea1,
                0x9000aea4, 0x8188aea6
            ]
        );
        assert_eq!(VM_SAVE, &[0xc208ae62, 0x8070ae9f, 0x8030ae7c]);
    }

    use super::*;

    #[test]
    fn modes_parse_and_bad_ones_say_the_choices() {
        assert_eq!("on".parse::<SeccompMode>(), Ok(SeccompMode::On));
        assert_eq!("log".parse::<SeccompMode>(), Ok(SeccompMode::Log));
        assert_eq!("off".parse::<SeccompMode>(), Ok(SeccompMode::Off));
        let e = "strict".parse::<SeccompMode>().unwrap_err();
        assert!(e.contains("off, log or on"), "{e}");
    }

    #[test]
    fn docs_list_exactly_what_the_filters_allow() {
        let doc = include_str!("../../docs/security.md");
        let table = markdown_table();
        assert!(
            doc.contains(&table),
            "docs/security.md must carry this table:\n{table}"
        );
    }

    #[test]
    fn every_kind_compiles_and_off_compiles_to_nothing() {
        for kind in KINDS {
            assert!(program(kind, SeccompMode::On).unwrap().is_some());
            assert!(program(kind, SeccompMode::Log).unwrap().is_some());
            assert!(program(kind, SeccompMode::Off).unwrap().is_none());
        }
    }

    #[test]
    fn guest_facing_threads_cannot_open_files_or_spawn() {
        for kind in [
            ThreadKind::Vcpu,
            ThreadKind::Block,
            ThreadKind::Vsock,
            ThreadKind::Rng,
        ] {
            let c = calls(kind);
            for nr in [
                libc::SYS_openat,
                libc::SYS_open,
                libc::SYS_execve,
                libc::SYS_clone,
                libc::SYS_clone3,
                libc::SYS_fork,
                libc::SYS_ptrace,
                libc::SYS_mount,
            ] {
                assert!(!c.contains(&nr), "{kind:?} may call {nr}");
            }
            assert!(!c.contains(&libc::SYS_socket), "socket is conditional only");
            assert!(!c.contains(&libc::SYS_ioctl), "ioctl is conditional only");
        }
        assert!(allowed_names(ThreadKind::Vcpu).contains(&"ioctl(arg1 = 0xae80)".to_string()));
        // Only the channels thread starts threads (a new thread carries
        // its creator's filter, then stacks its own): no other kind of
        // the VMM's may (the egress proxy is a process of its own, with
        // no VM in it, and opens files read-only only), none may fork,
        // and what it starts, relays, must fit inside its own list, or
        // the stacked filters would refuse a relay's calls.
        assert!(!calls(ThreadKind::Egress).contains(&libc::SYS_openat));
        for kind in KINDS {
            for nr in [libc::SYS_fork, libc::SYS_vfork, libc::SYS_execve] {
                assert!(!calls(kind).contains(&nr), "{kind:?} may fork or exec");
            }
            if !matches!(
                kind,
                ThreadKind::Channels | ThreadKind::Egress | ThreadKind::Inbound
            ) {
                for nr in [libc::SYS_clone, libc::SYS_clone3] {
                    assert!(!calls(kind).contains(&nr), "{kind:?} may start threads");
                }
            }
        }
        let channels = calls(ThreadKind::Channels);
        assert!(calls(ThreadKind::Relay)
            .iter()
            .all(|nr| channels.contains(nr)));
        let channels_cond = conditional(ThreadKind::Channels);
        assert!(conditional(ThreadKind::Relay)
            .iter()
            .all(|c| channels_cond.contains(c)));
    }

    #[test]
    fn messages_format_numbers_without_allocating() {
        let mut m = Message::default();
        m.push("nr ");
        m.push_number(-41);
        m.push_number(0);
        assert_eq!(&m.buf[..m.len], b"nr -410");
        for _ in 0..100 {
            m.push("overflow ");
        }
        assert_eq!(m.len, m.buf.len());
    }
}

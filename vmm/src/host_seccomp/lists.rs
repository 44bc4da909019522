// The VMM's host seccomp allow-lists: which system calls each kind of
// VMM thread may make (an embedder lists its own threads: mcpvm's
// relays, channels, host files, inbound connections and egress proxy
// are in mcpvm/src/host/seccomp.rs). Shared with vmm/build.rs (by
// include!), which compiles every filter when the VMM is built, so this
// file holds plain items only (no inner attributes or `//!` docs, no
// `crate::` paths).

use seccomp_lists::{ioctls, List, EVENT_LOOP, SOCKET_PEER};

/// The kinds of VMM thread, each with its own list of system calls.
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
    /// Forwards the process's signals to the VM (`crate::signals`).
    Signals,
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
            ThreadKind::Signals => "signals",
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
        }
    }

    /// Its list: [`calls`] beyond every kind's, and [`conditional`].
    pub fn list(self) -> List {
        List::new(self.name(), calls(self), conditional(self))
    }
}

/// The calls `kind` may make beyond every kind's, in blocks.
fn calls(kind: ThreadKind) -> &'static [&'static [i64]] {
    match kind {
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
        // Reads signal numbers from its pipe.
        ThreadKind::Signals => &[&[libc::SYS_read]],
    }
}

/// Calls allowed only with a given argument: (call, argument index, value).
fn conditional(kind: ThreadKind) -> Vec<(i64, u8, u64)> {
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
        ThreadKind::VsockConnector => vec![(libc::SYS_socket, 0, libc::AF_UNIX as u64)],
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
pub const KINDS: [ThreadKind; 7] = [
    ThreadKind::Main,
    ThreadKind::Vcpu,
    ThreadKind::Block,
    ThreadKind::Vsock,
    ThreadKind::VsockConnector,
    ThreadKind::Rng,
    ThreadKind::Signals,
];

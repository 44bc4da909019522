// mcpvm's own kinds of host thread, beside the VMM's (vmm::host_seccomp):
// which system calls each may make. Shared with mcpvm/build.rs (by
// include!), which compiles every filter when mcpvm is built, so this
// file holds plain items only (no inner attributes or `//!` docs, no
// `crate::` paths).

use seccomp_lists::{ioctls, List, FILE_TREE, SOCKET_PEER, SPLICE, START_CONFINED_THREAD};

/// The kinds of mcpvm's own threads, each with its own list.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HostThread {
    /// Copies between host sockets it was handed and the process's stdio.
    Relay,
    /// Accepts the guest's connections on host sockets and starts a relay
    /// thread for each (which confines itself as [`HostThread::Relay`]
    /// on top of this filter): a relay's calls plus starting threads and
    /// installing their filters.
    Channels,
    /// Sends a host directory to the guest over a socket and unpacks the
    /// guest's copy beside it: the one kind with host file access, and
    /// no other network than its socket.
    HostFiles,
    /// Accepts the host's connections to a server in the guest (`mcpvm
    /// run --listen`) and, on a thread per connection, connects each to
    /// the VMM's vsock socket and copies: Unix sockets only, no files.
    Inbound,
    /// The process that connects to the network on the guest's behalf
    /// (the egress proxy): stream sockets of the internet families, the
    /// host's resolver (its files, DNS over UDP, nscd's socket, netlink
    /// for address checks), threads; no file writes, no exec.
    Egress,
}

impl HostThread {
    pub fn name(self) -> &'static str {
        match self {
            HostThread::Relay => "relay",
            HostThread::Channels => "channels",
            HostThread::HostFiles => "host-files",
            HostThread::Inbound => "inbound",
            HostThread::Egress => "egress",
        }
    }

    /// Its place in [`HOST_THREADS`] (and so in the compiled programs).
    pub fn index(self) -> usize {
        match self {
            HostThread::Channels => 0,
            HostThread::Relay => 1,
            HostThread::HostFiles => 2,
            HostThread::Inbound => 3,
            HostThread::Egress => 4,
        }
    }

    /// Its list: the calls it may make beyond every kind's, and those it
    /// may make only with a given argument.
    pub fn list(self) -> List {
        let conditional = match self {
            // The terminal check of stdio.
            HostThread::Relay | HostThread::Channels => ioctls(&[libc::TCGETS]),
            HostThread::HostFiles => Vec::new(),
            HostThread::Inbound => vec![(libc::SYS_socket, 0, libc::AF_UNIX as u64)],
            // Its sockets, files only as the resolver opens them
            // (read-only), and FIONREAD (the resolver sizes a UDP answer).
            HostThread::Egress => [
                libc::AF_INET,
                libc::AF_INET6,
                libc::AF_UNIX,
                libc::AF_NETLINK,
            ]
            .iter()
            .map(|&f| (libc::SYS_socket, 0, f as u64))
            .chain([(
                libc::SYS_openat,
                2,
                (libc::O_RDONLY | libc::O_CLOEXEC) as u64,
            )])
            .chain(ioctls(&[libc::FIONREAD, libc::FIONBIO, libc::TCGETS]))
            .collect(),
        };
        List::new(self.name(), calls(self), conditional)
    }
}

/// The calls `kind` may make beyond every kind's, in blocks.
fn calls(kind: HostThread) -> &'static [&'static [i64]] {
    match kind {
        HostThread::Relay => &[SOCKET_PEER, SPLICE],
        HostThread::Channels => &[SOCKET_PEER, SPLICE, START_CONFINED_THREAD],
        HostThread::HostFiles => &[SOCKET_PEER, FILE_TREE],
        // socket() is limited to AF_UNIX.
        HostThread::Inbound => &[
            SOCKET_PEER,
            START_CONFINED_THREAD,
            &[libc::SYS_connect, libc::SYS_setsockopt],
        ],
        // socket() is limited by family.
        HostThread::Egress => &[
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
    }
}

/// Every kind, in the order docs/security.md lists them (after the
/// VMM's).
pub const HOST_THREADS: [HostThread; 5] = [
    HostThread::Channels,
    HostThread::Relay,
    HostThread::HostFiles,
    HostThread::Inbound,
    HostThread::Egress,
];

//! The vsock addresses of a run. The agent connects to the host on these
//! ports; the VMM's hybrid vsock turns each into a connection to the
//! host's `<uds_path>_<port>` (`vmm::VsockConfig::port_path`).

/// The host, as the guest addresses it (VMADDR_CID_HOST).
pub const HOST_CID: u32 = 2;
/// The guest's CID: a VM has exactly one, so every run uses the same.
pub const GUEST_CID: u32 = 3;

/// Run spec in, events out (JSON lines).
pub const CONTROL_PORT: u32 = 1024;
/// The longest line either side sends on CONTROL (a run spec, an event:
/// a syscall report of every x86_64 call with counts is about 20 KiB);
/// a reader stops reading a line at this many bytes.
pub const MAX_CONTROL_LINE: usize = 1 << 20;
/// The server's stdin (host to guest) and stdout (guest to host).
pub const STDIO_PORT: u32 = 1025;
/// The server's stderr.
pub const STDERR_PORT: u32 = 1026;
/// The workspace's tar, each way (only when the run spec has one).
pub const WORKSPACE_PORT: u32 = 1027;

/// The guest's network: one stream per connection or DNS lookup (only
/// when the run spec has `network`; see `crate::egress`).
pub const EGRESS_PORT: u32 = 1028;

/// Where the agent listens for the host's connections to a server that
/// speaks HTTP (only when the run spec has `inbound`): each is forwarded
/// to the server's port on the guest's loopback.
pub const INBOUND_PORT: u32 = 1029;

/// Every port the agent may connect to, in the order it connects.
pub const ALL: [u32; 5] = [
    CONTROL_PORT,
    STDIO_PORT,
    STDERR_PORT,
    WORKSPACE_PORT,
    EGRESS_PORT,
];

/// Where the workspace appears in the guest.
pub const WORKSPACE_DIR: &str = "/workspace";

/// A user account in the guest image (guest-image/rootfs/build writes
/// the same in its /etc/passwd).
#[derive(Debug, Clone, Copy)]
pub struct GuestUser {
    pub name: &'static str,
    pub uid: u32,
    pub gid: u32,
    pub home: &'static str,
}

/// Who the server runs as unless its policy asks for root: an ordinary
/// user with a home of its own, as on a developer's machine.
pub const SERVER_USER: GuestUser = GuestUser {
    name: "mcp",
    uid: 1000,
    gid: 1000,
    home: "/home/mcp",
};

/// root, for policies that ask for it (and for setup lines).
pub const ROOT_USER: GuestUser = GuestUser {
    name: "root",
    uid: 0,
    gid: 0,
    home: "/root",
};

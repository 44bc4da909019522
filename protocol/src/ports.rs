//! The vsock addresses of a run. The agent connects to the host on these
//! ports; the VMM's hybrid vsock turns each into a connection to the
//! host's `<uds_path>_<port>` (`vmm::VsockConfig::port_path`).

/// The host, as the guest addresses it (VMADDR_CID_HOST).
pub const HOST_CID: u32 = 2;
/// The guest's CID: a VM has exactly one, so every run uses the same.
pub const GUEST_CID: u32 = 3;

/// Run spec in, events out (JSON lines).
pub const CONTROL_PORT: u32 = 1024;
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

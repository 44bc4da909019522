//! virtio-vsock (virtio 1.2, section 5.10), hybrid with host Unix sockets
//! the way Firecracker does it, so host tools written for Firecracker work.
//!
//! ```text
//! guest AF_VSOCK ⇄ TX/RX virtqueues ⇄ event_handler.rs (worker thread, epoll)
//!                                         ⇅
//!                                     muxer.rs ⇄ connection.rs ⇄ host UnixStream
//! ```
//!
//! - `device.rs`: the virtio device. On activation it starts one worker
//!   thread (`event_handler.rs`) that waits (epoll) on the queue
//!   notifications, the host listener, every host socket and a kill
//!   eventfd. TX chains are parsed into packets for the muxer; RX chains
//!   are filled with the muxer's packets. Malformed chains are returned
//!   to the guest unused and the device carries on.
//! - `muxer.rs`: connection setup both ways (host `CONNECT <port>\n` /
//!   `OK <port>\n`; guest connects to `<uds_path>_<port>` or gets RST),
//!   routing, shutdown, limits.
//! - `connection.rs`: one stream with credit-based flow control both ways
//!   (section 5.10.6.3): a slow reader stalls the writer; memory per
//!   connection is bounded by the credit we advertise.
//!
//! The event queue (the third queue) carries only transport-reset events:
//! a VM restored from a snapshot gets one, as its connections did not
//! survive (their host ends were the old process's).

pub mod connection;
pub mod connector;
pub mod device;
pub mod event_handler;
pub mod muxer;
pub mod packet;

/// The host's address, as the guest sees it.
pub const HOST_CID: u64 = 2;

/// The host socket a guest-initiated stream to `port` reaches:
/// `<uds_path>_<port>` (Firecracker's hybrid vsock convention).
pub fn port_path(uds_path: &std::path::Path, port: u32) -> std::path::PathBuf {
    let mut name = uds_path.as_os_str().to_owned();
    name.push(format!("_{port}"));
    name.into()
}
/// The device's queues: RX (device to guest), TX, event.
pub const QUEUE_SIZES: [u16; 3] = [256, 256, 16];
/// struct virtio_vsock_event's id for a transport reset.
pub const EVENT_TRANSPORT_RESET: u32 = 0;

/// Worker epoll tokens; host sockets get tokens from FIRST_CONN_TOKEN up.
pub const TOKEN_RX: u64 = 0;
pub const TOKEN_TX: u64 = 1;
pub const TOKEN_EVQ: u64 = 2;
pub const TOKEN_LISTENER: u64 = 3;
pub const TOKEN_KILL: u64 = 4;
pub const FIRST_CONN_TOKEN: u64 = 16;

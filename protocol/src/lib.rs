//! The contract between mcpvm's host side and its guest agent: both
//! depend on this crate, neither on the other.
//!
//! - [`ports`]: the vsock ports and the host's CID.
//! - [`boot_args`]: what the host puts on the guest kernel's command line
//!   for the agent (channel, root image, layers).
//! - [`messages`]: the run spec, the host's later messages and the agent's
//!   events, as JSON lines on CONTROL.
//! - [`withholding`]: what the agent withholds from the server.
//! - [`errors`]: how every process prints an error chain.
//! - [`text`]: what another party chose, made safe for a terminal or a
//!   page (one rule for every place such text meets a person).
//! - [`timings`]: the phase times `mcpvm run --timings` writes for the
//!   probe (a host-side contract between mcpvm's own processes).
//!
//! The channels. The
//! agent connects to the host (CID 2); the VMM turns each port P into a
//! connection to `<uds_path>_P` on the host.
//!
//! - CONTROL: the host sends one JSON line, the run spec; the agent sends
//!   JSON-line events back (see [`messages::Event`]).
//! - STDIO: the server's stdin (host to guest) and stdout (guest to host).
//! - STDERR: the server's stderr.
//! - EGRESS (only when the run spec has `network`): one stream per guest
//!   connection or DNS lookup; see [`egress`].
//! - WORKSPACE (only when the run spec asks for one): the host sends a tar
//!   of its directory; the agent unpacks it into /workspace before the
//!   server starts (to the tar's end). A read-only workspace's host then
//!   half-closes. For a writable one the agent sends a tar of /workspace
//!   back on the same stream after the server exits and half-closes, and
//!   the host ends the stream only once it has read that tar: the agent
//!   waits for that end before the VM powers off, so nothing still in
//!   flight is lost.
//!
//! Snapshots (docs/snapshots.md): when the run spec says `snapshot`, the
//! host may send [`messages::HostMessage::Snapshot`] on CONTROL; the agent answers
//! [`messages::Event::SnapshotReady`] and from then on takes the loss of its host
//! channels for a restore: the VM's vsock transport was reset. It connects
//! CONTROL again, says [`messages::Event::Resumed`], reads [`messages::HostMessage::Resume`]
//! (host time, entropy, identity), connects STDIO and STDERR again, and
//! the server's stdio goes on over them. The server never sees a break.
//!
//! Closing: when the server's stdout and stderr end, the agent shuts its
//! side of each stream and waits for the host to close its side, so the
//! host has every byte before the VM powers off.

pub mod boot_args;
pub mod egress;
pub mod errors;
pub mod messages;
pub mod ports;
pub mod text;
pub mod timings;
pub mod withholding;

//! The vsock ports between agent and host, and what flows on them. The
//! agent connects to the host (CID 2); the VMM turns each port P into a
//! connection to `<uds_path>_P` on the host.
//!
//! - CONTROL: the host sends one JSON line, the run spec; the agent sends
//!   JSON-line events back (see [`Event`]).
//! - STDIO: the server's stdin (host to guest) and stdout (guest to host).
//! - STDERR: the server's stderr.
//! - WORKSPACE (only when the run spec asks for one): the host sends a tar
//!   of its directory and half-closes; the agent unpacks it into
//!   /workspace before the server starts. For a writable workspace the
//!   agent sends a tar of /workspace back on the same stream after the
//!   server exits.
//!
//! Snapshots (docs/snapshots.md): when the run spec says `snapshot`, the
//! host may send [`HostMessage::Snapshot`] on CONTROL; the agent answers
//! [`Event::SnapshotReady`] and from then on takes the loss of its host
//! channels for a restore: the VM's vsock transport was reset. It connects
//! CONTROL again, says [`Event::Resumed`], reads [`HostMessage::Resume`]
//! (host time, entropy, identity), connects STDIO and STDERR again, and
//! the server's stdio goes on over them. The server never sees a break.
//!
//! Closing: when the server's stdout and stderr end, the agent shuts its
//! side of each stream and waits for the host to close its side, so the
//! host has every byte before the VM powers off.

use serde::{Deserialize, Serialize};

use crate::policy::Policy;
use crate::seccomp::supervisor::SyscallCount;

pub const HOST_CID: u32 = 2;
pub const CONTROL_PORT: u32 = 1024;
pub const STDIO_PORT: u32 = 1025;
pub const STDERR_PORT: u32 = 1026;
pub const WORKSPACE_PORT: u32 = 1027;
/// Where the workspace appears in the guest.
pub const WORKSPACE_DIR: &str = "/workspace";

/// What to run, and how.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct RunSpec {
    pub argv: Vec<String>,
    #[serde(default)]
    pub env: Vec<(String, String)>,
    #[serde(default)]
    pub cwd: Option<String>,
    #[serde(default)]
    pub workspace: Option<Workspace>,
    /// A shell line run before the server (with its environment, output
    /// to its stderr), outside the policy: scaffolding such as creating a
    /// repository, not part of what is audited.
    #[serde(default)]
    pub setup: Option<String>,
    /// What is withheld from the server (the guest half of a profile).
    #[serde(default)]
    pub policy: Policy,
    /// The host may snapshot this run: listen for [`HostMessage`]s.
    #[serde(default)]
    pub snapshot: bool,
}

/// Host to agent on CONTROL, one JSON object per line, after the run
/// spec (or, in a restored VM, instead of it).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
#[serde(tag = "op", rename_all = "snake_case")]
pub enum HostMessage {
    /// The VM is about to be paused and written to a snapshot.
    Snapshot,
    /// The first line to a restored VM: what must differ from the
    /// snapshot and from every other VM restored from it.
    Resume {
        /// Host wall-clock time (ns since the epoch): the guest's clock
        /// stood still while the snapshot waited.
        unix_ns: u64,
        /// 64 bytes from the host's CSPRNG, hex: mixed into the guest's
        /// pool and credited, then the guest's CRNG reseeds.
        entropy: String,
        /// The guest's new hostname.
        hostname: String,
    },
}

/// A host directory handed to the server at [`WORKSPACE_DIR`].
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct Workspace {
    /// Send it back after the server exits.
    pub writable: bool,
}

/// Agent to host, one JSON object per line.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
#[serde(tag = "event", rename_all = "snake_case")]
pub enum Event {
    /// The agent is up and connected (guest uptime, ms).
    AgentStart {
        uptime_ms: u64,
    },
    Spawned {
        pid: u32,
    },
    FirstStdoutByte,
    /// The server could not be started.
    SpawnFailed {
        error: String,
    },
    /// The guest kernel's OOM killer ended a process while the server ran.
    OomKilled,
    /// With a seccomp policy, when the server has exited: the calls it
    /// was denied (with the errno it saw) and, in log mode, every call it
    /// made, with counts.
    Syscalls {
        denied: Vec<SyscallCount>,
        used: Vec<SyscallCount>,
    },
    Exited {
        code: Option<i32>,
        signal: Option<i32>,
        status: u8,
    },
    /// Answer to [`HostMessage::Snapshot`]: the agent will reconnect.
    SnapshotReady,
    /// A restored VM's agent is connected again (guest uptime, ms).
    Resumed {
        uptime_ms: u64,
    },
}

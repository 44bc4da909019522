//! The host side of `mcpvm run`, in the parts the recipe in
//! `commands/run.rs` names:
//!
//! - [`options`]: the command line's VM options (`--mem`, `--server`,
//!   `--profile`, …), parsed onto
//! - [`request`]: the run asked for, checked, and handed to a child
//!   `mcpvm run` as a file;
//! - [`plan`]: options resolved into the VM and the agent's run spec;
//! - [`channels`]: the Unix sockets the guest's vsock connections arrive
//!   on, accepted in one place, each handed to the relay that owns it;
//! - [`console`]: the guest console's last lines, said when its kernel
//!   panics;
//! - [`pump`]: a relay's byte copy, spliced where the client's end is a
//!   pipe;
//! - [`events`]: the agent's events on CONTROL (log, `--events`, timings,
//!   the signal to snapshot);
//! - [`jail`]: what a jailed run may still reach on the host;
//! - [`template`]: the client that initializes a server before a snapshot;
//! - [`start`]: how the VM starts (booted, warm, restored), decided once.
//! - [`warm`]: the warm-start cache, keyed on a plan.
//!
//! An MCP byte from our stdin reaches the server as: stdin relay
//! ([`channels`]) → `<run dir>/vsock.sock_1025` → the VMM's vsock device →
//! the guest agent (`guest-agent/src/links.rs`) → the server's stdin pipe.

pub mod channels;
pub mod console;
pub mod disk_arg;
pub mod events;
pub mod inbound;
pub mod jail;
pub mod options;
pub mod plan;
pub mod pump;
pub mod request;
pub mod start;
pub mod template;
pub mod warm;

use std::io;
use std::path::PathBuf;

#[derive(Debug, thiserror::Error)]
pub enum RunError {
    #[error(transparent)]
    NoArtifact(#[from] crate::exe::ArtifactError),
    #[error("Cannot create the run directory")]
    RunDir(#[source] io::Error),
    #[error("Snapshot {dir} names {path} as a disk, which is not an image mcpvm built ({why}); a snapshot alone opens only EROFS images: name its disks with --disk PATH to restore it")]
    SnapshotDisk {
        dir: PathBuf,
        path: PathBuf,
        why: String,
    },
    #[error("--listen-fd {0} is not an open socket")]
    ListenFd(i32),
    #[error("Cannot listen on {path}")]
    Listen {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("Cannot write {path}")]
    File {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error(transparent)]
    Vmm(#[from] vmm::VmmError),
    #[error(transparent)]
    Snapshot(#[from] vmm::snapshot::SnapshotError),
    #[error("No snapshot written to {dir}: the VM ended first ({why}); see --console for what the server did")]
    NoSnapshot { dir: PathBuf, why: String },
    #[error("Cannot start the guest's egress proxy")]
    Egress(#[source] io::Error),
    #[error("Cannot key the warm-start cache on the VM's files")]
    Warm(#[source] io::Error),
    #[error("Cannot take the warm snapshot ({status}); the messages above say why")]
    WarmTake { status: std::process::ExitStatus },
    #[error(transparent)]
    Confine(#[from] vmm::host_seccomp::SeccompError),
    #[error(transparent)]
    Jail(vmm::jail::JailError),
    #[error(transparent)]
    Options(#[from] request::OptionsError),
    #[error(transparent)]
    Request(#[from] request::RequestError),
}

//! What an audit writes into its directory, and how it fails: every
//! file written whole through a temporary one (never half), every error
//! naming the path or the input that caused it.

use std::path::{Path, PathBuf};

#[derive(Debug, thiserror::Error)]
pub enum AuditError {
    #[error("Cannot create or write the audit directory {path}")]
    Out {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{path} holds an audit of other inputs ({what} changed); give a new --out directory, or delete it to start over (when only servers changed, --rerun-changed runs their cells again and keeps the rest)")]
    Changed { path: PathBuf, what: String },
    #[error("{path} holds an audit of other servers ({what}); resume it with the servers its audit.json names, or give a new --out directory")]
    OtherServers { path: PathBuf, what: String },
    #[error("{path} is not an audit directory (no audit.json)")]
    NotAudit { path: PathBuf },
    #[error("{path} names shard {index}/{count}, which is no split of this audit's {cells} cells: it was not written by `mcpvm audit --shard`")]
    NotASplit {
        path: PathBuf,
        index: usize,
        count: usize,
        cells: usize,
    },
    #[error("The shards differ: {what} ({a} vs {b}); merge only shards of one audit")]
    ShardsDiffer {
        what: String,
        a: PathBuf,
        b: PathBuf,
    },
    #[error("{path} cannot be merged: {why}; merge only the output of `mcpvm audit --shard`")]
    BadShard { path: PathBuf, why: String },
    #[error("/dev/kvm on this host is kvm_pvm, which cannot boot the audit's Linux guests; run the audit on a host with VMX/SVM, or inside the testbed (benches/audit.sh shows how)")]
    Pvm,
    #[error("This host cannot run the audit's microVMs")]
    Host(#[source] vmm::kvm::HostError),
    #[error("No servers to audit: the catalogue has none that run offline without credentials; name some with --servers")]
    NoServers,
    #[error("Give the shard directories to merge: mcpvm audit merge --out DIR SHARD_DIR...")]
    NoShards,
    #[error(
        "'{}' is the column of --security, not a profile: give --security instead",
        super::matrix::SECURITY
    )]
    SecurityIsAColumn,
    #[error(
        "'{}' is the column of --check-proposals, not a profile: give --check-proposals instead",
        super::matrix::PROPOSED
    )]
    ProposedIsAColumn,
    #[error("--check-proposals checks the allow-list a cell that logs system calls proposes, and none of --profiles ({0}) logs them: add one that does (baseline)")]
    NothingProposes(String),
    #[error(transparent)]
    Catalogue(#[from] mcpvm_images::catalogue::CatalogueError),
    #[error(transparent)]
    Server(#[from] mcpvm::server::ServerError),
    #[error(transparent)]
    Profile(#[from] mcpvm::withholding::profile::ProfileError),
    #[error(transparent)]
    Artifact(#[from] mcpvm::exe::ArtifactError),
    #[error(transparent)]
    Tools(std::io::Error),
    #[error(transparent)]
    Json(#[from] serde_json::Error),
    #[error("{0}")]
    Released(String),
    #[error("mcpvm audit needs --out DIR: where results and reports go")]
    NoOut,
    #[error("{0}")]
    Setup(String),
    #[error(transparent)]
    Pin(#[from] crate::pinning::PinError),
    #[error("Cannot read the audit's journal {path}")]
    Journal {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

pub fn out_err(path: &Path) -> impl FnOnce(std::io::Error) -> AuditError + '_ {
    move |source| AuditError::Out {
        path: path.to_path_buf(),
        source,
    }
}

/// Writes `text` to `path` through a temporary file: never half-written.
pub fn write_atomic(path: &Path, text: &str) -> Result<(), AuditError> {
    mcpvm::host::files::write_whole(path, text.as_bytes()).map_err(out_err(path))
}

/// `value` as pretty JSON in `path`, written as it is serialized.
pub fn write_json(path: &Path, value: &impl serde::Serialize) -> Result<(), AuditError> {
    mcpvm::host::files::write_whole_with(path, |w| {
        serde_json::to_writer_pretty(w, value).map_err(std::io::Error::other)
    })
    .map_err(out_err(path))
}

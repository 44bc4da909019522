//! Where a layer's install scripts (or a crate's build) run: a microVM
//! thrown away after, never the host. The builder describes the job; the
//! embedder (mcpvm-tools' `install::scripts`) runs it.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

/// The longest line of a sandbox's output kept (the scripts' and the
/// builder's progress lines): the embedder cuts there, and whoever reads
/// the builder's output reads at the same bound.
pub const MAX_OUTPUT_LINE: usize = 4096;

/// Where a layer's install scripts run: a microVM thrown away after
/// (mcpvm-tools' `install::scripts`), never the host.
pub trait ScriptSandbox {
    /// Runs `job`; what the scripts did when the job asked for it to be
    /// recorded, or on failure the end of what they printed.
    fn run(
        &self,
        job: &ScriptJob<'_>,
        progress: &mut dyn FnMut(&str),
    ) -> Result<Option<InstallRecord>, String>;
}

/// What a layer's install scripts did in their microVM, as the guest
/// agent recorded it (files, programs, connections): kept with the layer
/// in the store's index and judged again by every audit of it, as
/// evidence of an install that does more than install
/// (docs/security-audit.md, "What the install scripts did").
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct InstallRecord {
    /// Calls recorded, and how many past the recorder's bound were only
    /// counted (what they did is not known).
    pub calls: u64,
    #[serde(default)]
    pub dropped: u64,
    /// Programs run from outside the package's own directory (distinct,
    /// bounded).
    #[serde(default)]
    pub programs: Vec<String>,
    /// The calls that went beyond installing, each with the rule it
    /// broke (bounded per rule; the rest counted in `omitted`).
    #[serde(default)]
    pub beyond: Vec<Beyond>,
    #[serde(default)]
    pub omitted: u64,
}

/// One recorded call that went beyond installing.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Beyond {
    pub rule: String,
    /// The agent's `effect` event, as it came.
    pub effect: serde_json::Value,
}

/// Install scripts (or a crate's build) to run: `shell` in a guest on
/// `runtime` with `layers` over it, with `stage` (the server's
/// directory, or the build's sources) as its writable /workspace, what
/// comes back replacing it.
pub struct ScriptJob<'a> {
    pub server: &'a str,
    pub stage: &'a Path,
    pub runtime: &'a Path,
    pub layers: Vec<PathBuf>,
    /// Guest memory, when the job knows what it needs (a compiler).
    pub mem_mib: Option<u64>,
    pub env: &'a BTreeMap<String, String>,
    pub shell: String,
    /// Record what the scripts do ([`InstallRecord`]): a package's
    /// install scripts are; a crate's compile is not (every header a
    /// compiler opens would be a recorded call).
    pub record: bool,
}

//! Where a layer's install scripts (or a crate's build) run: a microVM
//! thrown away after, never the host. The builder describes the job; the
//! embedder (mcpvm's `image::install_scripts`) runs it.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// Where a layer's install scripts run: a microVM thrown away after
/// (mcpvm's `install_scripts`), never the host.
pub trait ScriptSandbox {
    /// Runs `job`; on failure, the end of what it printed.
    fn run(&self, job: &ScriptJob<'_>, progress: &mut dyn FnMut(&str)) -> Result<(), String>;
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
}

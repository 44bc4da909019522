//! The two binaries, installed side by side. `mcpvm` holds what runs for
//! the life of a VM — `run`, `boot` and the egress proxy — and nothing
//! else: one of it runs per VM, and its text pages are mapped in every
//! one (docs/benchmarks.md, "Density"). `mcpvm-tools` holds the probes,
//! audits, benchmarks and the image builder; `mcpvm` hands it every other
//! command, and it starts VMs by running `mcpvm`.

use std::io;
use std::path::{Path, PathBuf};

/// The binary a VM runs in.
pub const VM: &str = "mcpvm";
/// The binary of every other command.
pub const TOOLS: &str = "mcpvm-tools";

/// `name`, next to the running binary.
pub fn sibling(name: &str) -> io::Result<PathBuf> {
    let me = std::env::current_exe()?;
    let path = me.with_file_name(name);
    if path.is_file() {
        return Ok(path);
    }
    Err(io::Error::new(
        io::ErrorKind::NotFound,
        format!(
            "{} is not next to {}: mcpvm's two binaries, mcpvm and mcpvm-tools, are installed side by side (scripts/build puts both in target/mcpvm/bin)",
            path.display(),
            me.display()
        ),
    ))
}

/// The `mcpvm` binary, to start a VM with.
pub fn vm() -> io::Result<PathBuf> {
    sibling(VM)
}

/// The `mcpvm-tools` binary, to run a probe, audit, bench or image
/// command with.
pub fn tools() -> io::Result<PathBuf> {
    sibling(TOOLS)
}

/// A guest artifact (kernel, initrd) neither given nor found where
/// scripts/build puts it.
#[derive(Debug, thiserror::Error)]
#[error("No guest {what} given and none found at {path}; pass --{what} or run scripts/build")]
pub struct ArtifactError {
    pub what: &'static str,
    pub path: PathBuf,
}

/// `<dir of this binary>/../<rel>`: where scripts/build puts artifacts.
pub fn default_artifact(
    what: &'static str,
    given: Option<PathBuf>,
    rel: &str,
) -> Result<PathBuf, ArtifactError> {
    if let Some(p) = given {
        return Ok(p);
    }
    let exe = std::env::current_exe().unwrap_or_default();
    let path = exe
        .parent()
        .and_then(Path::parent)
        .map(|d| d.join(rel))
        .unwrap_or_default();
    if path.exists() {
        Ok(path)
    } else {
        Err(ArtifactError { what, path })
    }
}

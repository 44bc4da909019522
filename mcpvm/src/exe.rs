//! The two binaries, installed side by side. `mcpvm` holds what runs for
//! the life of a VM — `run`, `boot` and the egress proxy — and nothing
//! else: one of it runs per VM, and its text pages are mapped in every
//! one (docs/benchmarks.md, "Density"). `mcpvm-tools` holds the probes,
//! audits, benchmarks and the image builder; `mcpvm` hands it every other
//! command, and it starts VMs by running `mcpvm`.

use std::io;
use std::path::PathBuf;

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

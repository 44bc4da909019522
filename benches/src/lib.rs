//! Benchmarks: figures, not assertions. Each compares mcpvm with a peer
//! measured in the same run, since absolute times on shared or nested
//! machines are noisy (see docs/benchmarks.md).

pub mod boot;
pub mod command;
pub mod density;
pub mod first_response;
pub mod peer;
pub mod probe;
pub mod relay;
pub mod stats;

/// Takes a snapshot of the VM `vm` describes once it has answered
/// `initialize` (`mcpvm run --snapshot-to`); the error says how it failed.
pub fn take_snapshot(
    mcpvm: &std::path::Path,
    vm: &mcpvm::commands::run::RunRequest,
    to: &std::path::Path,
) -> Result<(), String> {
    let args = mcpvm::commands::run::RunRequest {
        snapshot_to: Some(to.to_path_buf()),
        ..vm.clone()
    };
    let status = std::process::Command::new(mcpvm)
        .arg("run")
        .args(args.to_args())
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .status()
        .map_err(|e| e.to_string())?;
    if status.success() {
        Ok(())
    } else {
        Err(status.to_string())
    }
}

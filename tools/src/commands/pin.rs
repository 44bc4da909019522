//! `mcpvm pin --out FILE [--server NAME | --package SPEC | -- COMMAND…]`:
//! a lock of what a server declares (every tool's, prompt's and
//! resource's definition, canonical JSON and its SHA-256) with the
//! package, version, layer and lock it came from (`probes::judge::pin`). A later
//! `mcpvm probe` or `mcpvm audit` with `--pinned FILE` reports every
//! change as a finding: a rug pull when the version did not change, drift
//! when it did, a re-deployment when the version is older than the pin.

use std::path::PathBuf;

use clap::Args;

use crate::request::ProbeRequest;
use mcpvm::commands::run::VmOptions;

#[derive(Args, Clone, Debug, PartialEq)]
pub struct PinArgs {
    /// The pin file: written whole; servers already in it are kept, this
    /// one's entry replaced.
    #[arg(long, value_name = "FILE")]
    pub out: PathBuf,
    /// Run the server command in a microVM (implied by --server and
    /// --package).
    #[arg(long)]
    pub vm: bool,
    /// Seconds allowed for the server to start and answer the handshake.
    #[arg(long, default_value_t = 120)]
    pub init_timeout: u64,
    #[command(flatten)]
    pub vm_options: VmOptions,
    /// The server command (none with --server or --package).
    #[arg(last = true, required_unless_present_any = ["server", "package"])]
    pub command: Vec<String>,
}

/// `mcpvm pin`: the probe's listing steps only (no tool is called), its
/// definitions written to the pin file.
pub fn run(a: PinArgs, json: bool) -> Result<u8, crate::commands::probe::ProbeCliError> {
    let req = ProbeRequest {
        only_given: true,
        in_vm: a.vm,
        init_timeout: a.init_timeout,
        vm: a.vm_options.into(),
        command: a.command,
        pin_out: Some(a.out),
        ..ProbeRequest::default()
    };
    crate::commands::probe::serve(req, json)
}

//! `mcpvm`: the binary a VM runs in (`mcpvm run`, `mcpvm boot` and a
//! run's egress proxy). Every other command, and help, is `mcpvm-tools`'s
//! (`crate::exe` says why there are two): this binary hands them over.

use mcpvm::cli::{self, VmCommand};
use mcpvm::{commands, exe, logger};

use std::process::ExitCode;
use std::time::Instant;

fn main() -> ExitCode {
    // Every timing the VMM reports is measured from here.
    let start = Instant::now();
    // Before any thread: one malloc arena for the whole VMM.
    vmm::host_seccomp::keep_malloc_from_opening_files();
    vmm::host_seccomp::set_trap_advice(mcpvm::cli::hints::SECCOMP_TRAP);
    let args: Vec<std::ffi::OsString> = std::env::args_os().collect();
    let Some((globals, command)) = cli::parse_vm_command(&args) else {
        return cli::hand_over(exe::TOOLS, &args);
    };
    logger::init(start, globals.verbose, globals.json);
    log::debug!("arguments parsed");
    match command {
        VmCommand::Run(a) => cli::exit(commands::run::run(a, start, globals.json)),
        VmCommand::Boot(a) => cli::exit(commands::boot::run(a, start, globals.json)),
        VmCommand::Egress(a) => cli::exit(mcpvm::egress::process::main(a.seccomp).map(|()| 0)),
    }
}

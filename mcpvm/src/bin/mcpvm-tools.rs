//! `mcpvm-tools`: the probes, audits, benchmarks and the image builder,
//! and the help of every command. Users run it as `mcpvm COMMAND` (the
//! `mcpvm` binary hands it every command that is not its own); a VM
//! command given here is handed back to `mcpvm`, so VMs always run in it.

use mcpvm::cli::{self, Cli, Command};
use mcpvm::{commands, exe, logger};

use std::process::ExitCode;
use std::time::Instant;

use clap::Parser;

fn main() -> ExitCode {
    let start = Instant::now();
    let args: Vec<std::ffi::OsString> = std::env::args_os().collect();
    let Cli { globals, command } = Cli::parse_from(&args);
    logger::init(start, globals.verbose, globals.json);
    cli::exit(match command {
        Command::Run(_) | Command::Boot(_) | Command::Egress(_) => {
            return cli::hand_over(exe::VM, &args);
        }
        Command::Probe(a) => commands::probe::run(a, globals.json),
        Command::Audit(a) => commands::audit::run(a, globals.json),
        Command::Bench(c) => commands::bench::run(c, globals.json),
        Command::Image(c) => commands::image::run(c, globals.json),
    })
}

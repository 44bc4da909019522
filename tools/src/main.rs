//! `mcpvm-tools`: the probes, audits, benchmarks and the image builder,
//! and the help of every command. Users run it as `mcpvm COMMAND` (the
//! `mcpvm` binary hands it every command that is not its own); a VM
//! command given here is handed back to `mcpvm`, so VMs always run in it.
//!
//! Its crate holds what only it runs (lib.rs), so that the crate of the
//! binary a VM runs in (`mcpvm`) depends on neither the probes nor the
//! benchmarks: `mcpvm-benches` builds on `mcpvm`, and this binary
//! composes both.

use std::process::ExitCode;
use std::time::Instant;

use clap::{Parser, Subcommand};
use mcpvm::cli::{self, EgressArgs, Globals, BOOT_ABOUT, RUN_ABOUT};
use mcpvm::commands::{boot, run};
use mcpvm::{exe, logger};
use mcpvm_benches::command as bench;
use mcpvm_tools::commands::{self, audit, client, image, pin, probe};

/// The full parser: its help lists every command of both binaries.
#[derive(Parser)]
#[command(
    name = "mcpvm",
    version,
    about = "Run an MCP server in its own microVM"
)]
pub struct Cli {
    #[command(flatten)]
    pub globals: Globals,
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Subcommand)]
pub enum Command {
    #[command(about = RUN_ABOUT)]
    Run(run::RunArgs),
    /// Talk to an MCP server as a client would and report every step.
    Probe(probe::ProbeArgs),
    /// Audit servers × withholding profiles in microVMs and report what breaks.
    Audit(audit::AuditArgs),
    /// Pin what a server declares (its tools, prompts and resources, hashed)
    /// with its version, for `--pinned` to hold later runs to.
    Pin(pin::PinArgs),
    #[command(about = BOOT_ABOUT)]
    Boot(boot::BootArgs),
    /// Guest images: the runtime image and catalogued servers' layers.
    #[command(subcommand)]
    Image(image::ImageCommand),
    /// MCP clients' configurations: add a sandboxed server to one.
    #[command(subcommand)]
    Client(client::ClientCommand),
    /// Benchmarks, side by side with a peer measured in the same run.
    #[command(subcommand)]
    Bench(bench::BenchCommand),
    /// The egress proxy of a run (`mcpvm run` starts it; docs/network.md).
    #[command(hide = true)]
    Egress(EgressArgs),
}

fn main() -> ExitCode {
    let start = Instant::now();
    let args: Vec<std::ffi::OsString> = std::env::args_os().collect();
    let Cli { globals, command } = Cli::parse_from(&args);
    logger::init(start, globals.verbose, globals.json);
    match command {
        Command::Run(_) | Command::Boot(_) | Command::Egress(_) => cli::hand_over(exe::VM, &args),
        Command::Probe(a) => cli::exit(commands::probe::run(a, globals.json)),
        Command::Audit(a) => cli::exit(commands::audit::run(a, globals.json)),
        Command::Pin(a) => cli::exit(commands::pin::run(a, globals.json)),
        Command::Bench(c) => cli::exit(bench::run(c, start, globals.json)),
        Command::Image(c) => cli::exit(commands::image::run(c, globals.json)),
        Command::Client(c) => cli::exit(commands::client::run(c, globals.json)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;
    use mcpvm::cli::{BootCli, EgressCli, RunCli};

    /// The small parser must say what the full one says: same help,
    /// same errors, for the commands it holds.
    #[test]
    fn the_small_parser_speaks_like_the_full_one() {
        for argv in [
            &["mcpvm", "run", "--help"][..],
            &["mcpvm", "boot", "--help"],
            &["mcpvm", "run", "--no-such-option"],
            &["mcpvm", "boot", "--mem", "lots", "--kernel", "k"],
            &["mcpvm", "boot"],
            &["mcpvm", "egress", "--seccomp", "sometimes"],
        ] {
            let full = Cli::try_parse_from(argv)
                .err()
                .map(|e| e.render().to_string());
            let small = match argv[1] {
                "run" => RunCli::try_parse_from(argv).err(),
                "boot" => BootCli::try_parse_from(argv).err(),
                "egress" => EgressCli::try_parse_from(argv).err(),
                _ => unreachable!(),
            }
            .map(|e| e.render().to_string());
            assert!(full.is_some(), "{argv:?} should not parse");
            assert_eq!(full, small, "{argv:?}");
        }
        let full = Cli::command();
        for (name, small) in [
            ("run", RunCli::command()),
            ("boot", BootCli::command()),
            ("egress", EgressCli::command()),
        ] {
            let f = full.find_subcommand(name).unwrap();
            let s = small.find_subcommand(name).unwrap();
            let ids = |c: &clap::Command| {
                c.get_arguments()
                    .map(|a| a.get_id().to_string())
                    .collect::<Vec<_>>()
            };
            assert_eq!(ids(f), ids(s), "{name}");
        }
    }
}

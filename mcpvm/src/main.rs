//! `mcpvm`: the one binary users run. Thin: it parses options and composes
//! the vmm (and, later, guest image and probe) crates.

use mcpvm::{commands, logger};

use std::process::ExitCode;
use std::time::Instant;

use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(
    name = "mcpvm",
    version,
    about = "Run an MCP server in its own microVM"
)]
struct Cli {
    /// Log what happens, with timestamps, to stderr.
    #[arg(long, short, global = true)]
    verbose: bool,
    /// Machine-readable output: a JSON result on stdout, JSON log lines.
    #[arg(long, global = true)]
    json: bool,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run a command (an MCP server) in its own microVM as a stdio server.
    Run(commands::run::RunArgs),
    /// Talk to an MCP server as a client would and report every step.
    Probe(commands::probe::ProbeArgs),
    /// Audit servers × withholding profiles in microVMs and report what breaks.
    Audit(commands::audit::AuditArgs),
    /// Boot a Linux kernel in a microVM and wait for it to stop.
    Boot(commands::boot::BootArgs),
    /// Guest images: the runtime image and catalogued servers' layers.
    #[command(subcommand)]
    Image(commands::image::ImageCommand),
    /// Benchmarks, side by side with a peer measured in the same run.
    #[command(subcommand)]
    Bench(commands::bench::BenchCommand),
    /// The egress proxy of a run (`mcpvm run` starts it; docs/network.md).
    #[command(hide = true)]
    Egress {
        #[arg(long, default_value = "on")]
        seccomp: vmm::SeccompMode,
    },
}

fn main() -> ExitCode {
    // Every timing the VMM reports is measured from here.
    let start = Instant::now();
    let cli = Cli::parse();
    logger::init(start, cli.verbose, cli.json);
    let result = match cli.command {
        Command::Run(args) => commands::run::run(args, start, cli.json),
        Command::Probe(args) => commands::probe::run(args, cli.json),
        Command::Audit(args) => commands::audit::run(args, cli.json),
        Command::Boot(args) => commands::boot::run(args, start, cli.json),
        Command::Bench(cmd) => commands::bench::run(cmd, cli.json),
        Command::Image(cmd) => commands::image::run(cmd, cli.json),
        Command::Egress { seccomp } => mcpvm::egress::process::main(seccomp)
            .map(|()| 0)
            .map_err(|e| format!("egress proxy: {e}").into()),
    };
    match result {
        Ok(code) => ExitCode::from(code),
        Err(e) => {
            eprintln!("mcpvm: {}", mcpvm::hints::explain(e.as_ref()));
            ExitCode::from(1)
        }
    }
}

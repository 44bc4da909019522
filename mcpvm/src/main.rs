//! `mcpvm`: the one binary users run. Thin: it parses options and composes
//! the vmm (and, later, guest image and probe) crates.

use mcpvm::{commands, logger};

use std::process::ExitCode;
use std::time::Instant;

use clap::{Args, Parser, Subcommand};

/// Options every command takes, before or after its name.
#[derive(Args)]
struct Globals {
    /// Log what happens, with timestamps, to stderr.
    #[arg(long, short, global = true)]
    verbose: bool,
    /// Machine-readable output: a JSON result on stdout, JSON log lines.
    #[arg(long, global = true)]
    json: bool,
}

#[derive(Parser)]
#[command(
    name = "mcpvm",
    version,
    about = "Run an MCP server in its own microVM"
)]
struct Cli {
    #[command(flatten)]
    globals: Globals,
    #[command(subcommand)]
    command: Command,
}

/// The commands on the way to a VM's first instruction, each parsed by a
/// parser that holds only it: clap builds every command's arguments
/// before it parses, and in the testbed (where the VMM's own code runs
/// under emulation, each first run of code translated) building the whole
/// tree took 75 ms of the 160 ms before kernel entry. Help, errors and
/// usage lines are the same as the full parser's: the commands are the
/// same `Args` types under the same name and about line.
#[derive(Parser)]
#[command(name = "mcpvm", version)]
struct RunCli {
    #[command(flatten)]
    globals: Globals,
    #[command(subcommand)]
    command: RunOnly,
}

#[derive(Subcommand)]
enum RunOnly {
    #[command(about = RUN_ABOUT)]
    Run(commands::run::RunArgs),
}

#[derive(Parser)]
#[command(name = "mcpvm", version)]
struct BootCli {
    #[command(flatten)]
    globals: Globals,
    #[command(subcommand)]
    command: BootOnly,
}

#[derive(Subcommand)]
enum BootOnly {
    #[command(about = BOOT_ABOUT)]
    Boot(commands::boot::BootArgs),
}

/// The command `args` name (the first word that is not a global flag).
fn command_name(args: &[std::ffi::OsString]) -> Option<&str> {
    args.iter()
        .skip(1)
        .find(|a| !matches!(a.to_str(), Some("-v" | "--verbose" | "--json")))
        .and_then(|a| a.to_str())
}

/// Parses `args` with the smallest parser that holds their command.
fn parse(args: &[std::ffi::OsString]) -> (Globals, Command) {
    match command_name(args) {
        Some("run") => {
            let RunCli {
                globals,
                command: RunOnly::Run(a),
            } = RunCli::parse_from(args);
            (globals, Command::Run(a))
        }
        Some("boot") => {
            let BootCli {
                globals,
                command: BootOnly::Boot(a),
            } = BootCli::parse_from(args);
            (globals, Command::Boot(a))
        }
        _ => {
            let cli = Cli::parse_from(args);
            (cli.globals, cli.command)
        }
    }
}

const RUN_ABOUT: &str = "Run a command (an MCP server) in its own microVM as a stdio server";
const BOOT_ABOUT: &str = "Boot a Linux kernel in a microVM and wait for it to stop";

#[derive(Subcommand)]
enum Command {
    #[command(about = RUN_ABOUT)]
    Run(commands::run::RunArgs),
    /// Talk to an MCP server as a client would and report every step.
    Probe(commands::probe::ProbeArgs),
    /// Audit servers × withholding profiles in microVMs and report what breaks.
    Audit(commands::audit::AuditArgs),
    #[command(about = BOOT_ABOUT)]
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
    let args: Vec<std::ffi::OsString> = std::env::args_os().collect();
    let (globals, command) = parse(&args);
    let cli = globals;
    logger::init(start, cli.verbose, cli.json);
    log::debug!("arguments parsed");
    let result = match command {
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

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    fn os(v: &[&str]) -> Vec<std::ffi::OsString> {
        v.iter().map(Into::into).collect()
    }

    #[test]
    fn the_command_is_the_first_word_after_the_global_flags() {
        assert_eq!(command_name(&os(&["mcpvm", "run", "--", "x"])), Some("run"));
        assert_eq!(
            command_name(&os(&["mcpvm", "--verbose", "--json", "boot"])),
            Some("boot")
        );
        assert_eq!(
            command_name(&os(&["mcpvm", "-v", "probe", "run"])),
            Some("probe")
        );
        assert_eq!(command_name(&os(&["mcpvm", "--help"])), Some("--help"));
        assert_eq!(command_name(&os(&["mcpvm"])), None);
    }

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
        ] {
            let full = Cli::try_parse_from(argv)
                .err()
                .map(|e| e.render().to_string());
            let small = match argv[1] {
                "run" => RunCli::try_parse_from(argv).err(),
                "boot" => BootCli::try_parse_from(argv).err(),
                _ => unreachable!(),
            }
            .map(|e| e.render().to_string());
            assert!(full.is_some(), "{argv:?} should not parse");
            assert_eq!(full, small, "{argv:?}");
        }
        let full = Cli::command();
        for (name, small) in [("run", RunCli::command()), ("boot", BootCli::command())] {
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

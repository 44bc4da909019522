//! The command line of the `mcpvm` binary (`crate::exe`): the small
//! parsers it parses its own commands with — each holds one command, so
//! the VM's binary links no other command's code — and how a command is
//! handed to the other binary. The full parser, whose help lists every
//! command, is `mcpvm-tools`'s (tools/src/main.rs). What a failed
//! command prints after its error, to say what to do, is [`hints`].

pub mod hints;

use std::ffi::OsString;
use std::os::unix::process::CommandExt;
use std::process::ExitCode;

use clap::{Args, Parser, Subcommand};

use crate::commands::{boot, run};

/// Options every command takes, before or after its name.
#[derive(Args)]
pub struct Globals {
    /// Log what happens, with timestamps, to stderr.
    #[arg(long, short, global = true)]
    pub verbose: bool,
    /// Machine-readable output: a JSON result on stdout, JSON log lines.
    #[arg(long, global = true)]
    pub json: bool,
}

/// The about lines of `mcpvm`'s commands, said alike by both parsers.
pub const RUN_ABOUT: &str = "Run a command (an MCP server) in its own microVM as a stdio server";
pub const BOOT_ABOUT: &str = "Boot a Linux kernel in a microVM and wait for it to stop";

#[derive(Args)]
pub struct EgressArgs {
    #[arg(long, default_value = "on")]
    pub seccomp: vmm::SeccompMode,
}

/// What `mcpvm` runs itself: the commands that live as long as a VM.
/// One per process, moved once: its size does not matter.
#[allow(clippy::large_enum_variant)]
pub enum VmCommand {
    Run(run::RunArgs),
    Boot(boot::BootArgs),
    Egress(EgressArgs),
}

/// One parser per command of `mcpvm`'s: clap builds every command's
/// arguments before it parses, and in the testbed (where the VMM's own
/// code runs under emulation, each first run of code translated) building
/// the whole tree took 75 ms of the 160 ms before kernel entry. Help,
/// errors and usage lines are the same as the full parser's: the commands
/// are the same `Args` types under the same name and about line.
macro_rules! one_command_parser {
    ($cli:ident, $only:ident, $variant:ident($args:ty), $($attr:tt)*) => {
        #[derive(Parser)]
        #[command(name = "mcpvm", version)]
        pub struct $cli {
            #[command(flatten)]
            pub globals: Globals,
            #[command(subcommand)]
            pub command: $only,
        }

        #[derive(Subcommand)]
        pub enum $only {
            #[command($($attr)*)]
            $variant($args),
        }

        impl $cli {
            /// `args` parsed (clap's usual exit on bad ones).
            pub fn parse_args(args: &[OsString]) -> (Globals, $args) {
                let $cli {
                    globals,
                    command: $only::$variant(a),
                } = <$cli as Parser>::parse_from(args);
                (globals, a)
            }
        }
    };
}

one_command_parser!(RunCli, RunOnly, Run(run::RunArgs), about = RUN_ABOUT);
one_command_parser!(BootCli, BootOnly, Boot(boot::BootArgs), about = BOOT_ABOUT);
one_command_parser!(EgressCli, EgressOnly, Egress(EgressArgs), hide = true);

/// The command `args` name (the first word that is not a global flag).
pub fn command_name(args: &[OsString]) -> Option<&str> {
    args.iter()
        .skip(1)
        .find(|a| !matches!(a.to_str(), Some("-v" | "--verbose" | "--json")))
        .and_then(|a| a.to_str())
}

/// `args` parsed, if their command is one of `mcpvm`'s own (help, version
/// and every other command are `mcpvm-tools`'s).
pub fn parse_vm_command(args: &[OsString]) -> Option<(Globals, VmCommand)> {
    Some(match command_name(args)? {
        "run" => map_command(RunCli::parse_args(args), VmCommand::Run),
        "boot" => map_command(BootCli::parse_args(args), VmCommand::Boot),
        "egress" => map_command(EgressCli::parse_args(args), VmCommand::Egress),
        _ => return None,
    })
}

/// A small parser's result as one of `mcpvm`'s commands.
fn map_command<A>((g, a): (Globals, A), f: fn(A) -> VmCommand) -> (Globals, VmCommand) {
    (g, f(a))
}

/// Runs the binary `name` (next to this one) in this process's place
/// with the same arguments, under the name users typed; returns only if
/// it cannot.
pub fn hand_over(name: &str, args: &[OsString]) -> ExitCode {
    let e = match crate::exe::sibling(name) {
        Ok(path) => std::process::Command::new(path)
            .arg0(args.first().map_or("mcpvm".into(), Clone::clone))
            .args(args.iter().skip(1))
            .exec(),
        Err(e) => e,
    };
    eprintln!("mcpvm: cannot run {name}: {e}");
    ExitCode::from(1)
}

/// A command's result as the process's exit: its code, or its error on
/// one line (with a hint where one applies) and 1. The one place a
/// command's typed error is erased, to be printed.
pub fn exit<E: Into<Box<dyn std::error::Error>>>(result: Result<u8, E>) -> ExitCode {
    match result {
        Ok(code) => ExitCode::from(code),
        Err(e) => {
            let e: Box<dyn std::error::Error> = e.into();
            // The one place every error meets the terminal: names and text
            // from catalogues, shards and servers are shown escaped.
            eprintln!(
                "mcpvm: {}",
                crate::logger::printable_lines(&hints::explain(e.as_ref()))
            );
            ExitCode::from(1)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn os(v: &[&str]) -> Vec<OsString> {
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

    #[test]
    fn only_the_vm_commands_are_parsed_by_the_vm_binary() {
        for argv in [
            &["mcpvm", "probe", "--", "x"][..],
            &["mcpvm", "--help"],
            &["mcpvm", "--version"],
            &["mcpvm", "-v"],
            &["mcpvm", "image", "build"],
            &["mcpvm", "--json", "bench", "boot"],
        ] {
            assert!(parse_vm_command(&os(argv)).is_none(), "{argv:?}");
        }
        let parsed = parse_vm_command(&os(&["mcpvm", "--json", "run", "--", "cat"]));
        assert!(matches!(parsed, Some((g, VmCommand::Run(_))) if g.json));
        let parsed = parse_vm_command(&os(&["mcpvm", "egress", "--seccomp", "off"]));
        assert!(matches!(parsed, Some((_, VmCommand::Egress(_)))));
    }
}

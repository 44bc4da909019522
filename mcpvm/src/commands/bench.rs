//! `mcpvm bench`: benchmarks that compare mcpvm with a peer in one run.

use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, Subcommand};
use mcpvm_benches::boot::BootBench;
use mcpvm_benches::first_response::FirstResponseBench;
use mcpvm_benches::relay;

#[derive(Subcommand)]
pub enum BenchCommand {
    /// Boot phases of our VMM beside QEMU microvm, same kernel and initrd.
    Boot(BootArgs),
    /// Spawn → initialize / tools/list: a server in a VM beside the bare process.
    FirstResponse(FirstResponseArgs),
    /// Round trips and throughput of the stdio relay: cat in a VM beside bare cat.
    Relay(RelayArgs),
}

#[derive(Args)]
pub struct RelayArgs {
    #[arg(long, default_value_t = 1000)]
    round_trips: usize,
    #[arg(long, default_value_t = 64)]
    bulk_mib: usize,
    /// The echoing command inside the guest.
    #[arg(long, default_value = "/bin/cat")]
    guest_cat: String,
}

#[derive(Args)]
pub struct FirstResponseArgs {
    #[arg(long, default_value_t = 20, value_parser = clap::value_parser!(u64).range(1..=10_000))]
    runs: u64,
    /// The server as a host command (the bare-process peer).
    #[arg(long, num_args = 1.., required = true)]
    host: Vec<String>,
    /// The server command inside the guest.
    #[arg(last = true, required = true)]
    guest: Vec<String>,
}

#[derive(Args)]
pub struct BootArgs {
    #[arg(long)]
    kernel: PathBuf,
    #[arg(long)]
    initrd: PathBuf,
    /// Runs per VMM (at least 1).
    #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u64).range(1..=10_000))]
    runs: u64,
    /// QEMU binary for the microvm comparison; omit to measure mcpvm only.
    #[arg(long)]
    qemu: Option<PathBuf>,
    #[arg(long, default_value_t = 256)]
    mem: u64,
    #[arg(long, default_value_t = 1)]
    vcpus: u8,
    /// Per-boot timeout in seconds.
    #[arg(long, default_value_t = 120)]
    timeout: u64,
}

/// Prints a report as JSON or as its Markdown table.
fn emit(
    report: &impl serde::Serialize,
    markdown: String,
    json: bool,
) -> Result<u8, Box<dyn std::error::Error>> {
    if json {
        println!("{}", serde_json::to_string(report)?);
    } else {
        print!("{markdown}");
    }
    Ok(0)
}

pub fn run(cmd: BenchCommand, json: bool) -> Result<u8, Box<dyn std::error::Error>> {
    match cmd {
        BenchCommand::Relay(a) => {
            let exe = std::env::current_exe()?.display().to_string();
            eprintln!("bench relay: VM");
            let vm = relay::measure(
                &[exe, "run".into(), "--".into(), a.guest_cat],
                a.round_trips,
                a.bulk_mib,
            )?;
            eprintln!("bench relay: bare process");
            let bare = relay::measure(&["cat".into()], a.round_trips, a.bulk_mib)?;
            let report = relay::RelayReport {
                round_trips: a.round_trips,
                bulk_mib: a.bulk_mib,
                vm,
                bare,
            };
            emit(&report, report.markdown(), json)
        }
        BenchCommand::FirstResponse(a) => {
            let bench = FirstResponseBench {
                mcpvm: std::env::current_exe()?,
                guest_command: a.guest,
                host_command: a.host,
                runs: a.runs as usize,
            };
            let report = bench.run(|msg| eprintln!("bench first-response: {msg}"))?;
            emit(&report, report.markdown(), json)
        }
        BenchCommand::Boot(a) => {
            let bench = BootBench {
                mcpvm: std::env::current_exe()?,
                qemu: a.qemu,
                kernel: a.kernel,
                initrd: a.initrd,
                runs: a.runs as usize,
                mem_mib: a.mem,
                vcpus: a.vcpus,
                timeout: Duration::from_secs(a.timeout),
            };
            let report = bench.run(|msg| eprintln!("bench boot: {msg}"))?;
            emit(&report, report.markdown(), json)
        }
    }
}

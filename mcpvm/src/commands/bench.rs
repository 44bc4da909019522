//! `mcpvm bench`: benchmarks that compare mcpvm with a peer in one run.

use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, Subcommand};
use mcpvm_benches::boot::BootBench;

#[derive(Subcommand)]
pub enum BenchCommand {
    /// Boot phases of our VMM beside QEMU microvm, same kernel and initrd.
    Boot(BootArgs),
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

pub fn run(cmd: BenchCommand, json: bool) -> Result<u8, Box<dyn std::error::Error>> {
    match cmd {
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
            if json {
                println!("{}", serde_json::to_string(&report)?);
            } else {
                print!("{}", report.markdown());
            }
            Ok(0)
        }
    }
}

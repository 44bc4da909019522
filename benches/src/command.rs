//! `mcpvm bench`: benchmarks that compare mcpvm with a peer in one run.
//! The VM runs are `mcpvm run` processes whose arguments are built from
//! `RunArgs` (`to_args`), so a bench says nothing `mcpvm run` would not
//! parse back.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use clap::{Args, Subcommand};
use mcpvm::commands::run::{RunArgs, RunRequest, VmRequest};
use mcpvm::exe;
use probes::ToolArgs;

use crate::boot::BootBench;
use crate::density::DensityBench;
use crate::first_response::FirstResponseBench;
use crate::probe::{BenchServer, ProbeBench};
use crate::relay;

/// One per process, moved once: its size does not matter.
#[allow(clippy::large_enum_variant)]
#[derive(Subcommand)]
pub enum BenchCommand {
    /// Boot phases of our VMM beside QEMU microvm, same kernel and initrd.
    Boot(BootArgs),
    /// Spawn → initialize / tools/list: a server in a VM beside the bare process.
    FirstResponse(FirstResponseArgs),
    /// Round trips and throughput of the stdio relay: cat in a VM beside bare cat.
    Relay(RelayArgs),
    /// The probe's own cost beside a minimal raw client, and the bare-process
    /// baselines of real MCP servers.
    Probe(ProbeBenchArgs),
    /// N VMs restored from one snapshot, each in an open MCP session:
    /// memory and threads per VM, restore time of the Nth, still answering.
    Density(DensityArgs),
    /// What `--firecracker` runs: `mcpvm run`'s plan booted under
    /// Firecracker, behind the same host side (`crate::peer`).
    #[command(hide = true)]
    PeerRun(PeerRunArgs),
}

#[derive(Args)]
pub struct PeerRunArgs {
    /// The Firecracker binary (a benchmark peer, ../shared/peers/).
    #[arg(long, value_name = "PATH")]
    firecracker: PathBuf,
    #[command(flatten)]
    run: RunArgs,
}

#[derive(Args)]
pub struct DensityArgs {
    /// VM counts to measure at, ascending (comma-separated).
    #[arg(long, value_delimiter = ',', default_value = "10,50,100,200")]
    counts: Vec<usize>,
    /// Stop starting VMs when the host has less than this available (MiB).
    #[arg(long, default_value_t = 512)]
    reserve_mib: u64,
    /// How long one VM may take to answer, in seconds.
    #[arg(long, default_value_t = 300)]
    answer_timeout: u64,
    /// Stop when one restore takes longer than this many seconds (the
    /// host is saturated).
    #[arg(long, default_value_t = 30)]
    saturated_after: u64,
    #[command(flatten)]
    vm: GuestArgs,
}

/// The VM a bench runs: a catalogued server or a guest command.
#[derive(Args)]
pub struct GuestArgs {
    /// A catalogued server instead of a guest command.
    #[arg(long)]
    server: Option<String>,
    /// The image store for --server.
    #[arg(long, requires = "server")]
    images: Option<PathBuf>,
    /// Guest memory in MiB.
    #[arg(long)]
    mem: Option<u64>,
    #[command(flatten)]
    catalogue: mcpvm::server::CatalogueArg,
    /// A host directory at /workspace in the guest, read-only (a browser
    /// server's site is served from it).
    #[arg(long, requires = "server", value_parser = mcpvm::workspace::parse_workspace)]
    workspace: Option<mcpvm::workspace::WorkspaceArg>,
    /// The server command inside the guest (for first-response, after
    /// `--host … --`).
    #[arg(
        trailing_var_arg = true,
        allow_hyphen_values = true,
        required_unless_present = "server"
    )]
    guest: Vec<String>,
}

#[derive(Args)]
pub struct ProbeBenchArgs {
    #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u64).range(1..=10_000))]
    runs: u64,
    /// The fixture server binary.
    #[arg(long)]
    fixture: PathBuf,
    /// Where probes/servers/install put the npm and PyPI servers.
    #[arg(long)]
    host_servers: PathBuf,
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
    /// Rounds, each running every peer once, in turn, after one warm-up
    /// round that is not reported.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u64).range(1..=100))]
    rounds: u64,
    /// Firecracker binary to run the same VM under, behind the same host
    /// side (a peer for benchmarks only, ../shared/peers/firecracker); a
    /// path that is not there is said and skipped.
    #[arg(long, value_name = "PATH")]
    firecracker: Option<PathBuf>,
}

#[derive(Args)]
pub struct FirstResponseArgs {
    #[arg(long, default_value_t = 20, value_parser = clap::value_parser!(u64).range(1..=10_000))]
    runs: u64,
    /// The server as a host command (the bare-process peer); its words
    /// may start with '-', so give it after the other options, ended by
    /// `--` when the guest command follows.
    #[arg(long, num_args = 1.., required = true, allow_hyphen_values = true, value_terminator = "--")]
    host: Vec<String>,
    /// Host seccomp mode of the VM runs (off|log|on), to measure its cost.
    #[arg(long)]
    seccomp: Option<vmm::SeccompMode>,
    /// Also measure the VM restored from a snapshot taken after
    /// `initialize` (docs/snapshots.md), taken once before the runs.
    #[arg(long)]
    warm: bool,
    /// Then call this tool, TOOL={"json":"arguments"}, in every run of
    /// every peer, and measure spawn → its answer (a browser server's
    /// first navigation starts its browser).
    #[arg(long, value_name = "TOOL=JSON", value_parser = parse_call)]
    call: Option<(String, serde_json::Map<String, serde_json::Value>)>,
    /// Firecracker binary to run the same VM under, behind the same host
    /// side (a peer for benchmarks only, ../shared/peers/firecracker); a
    /// path that is not there is said and skipped.
    #[arg(long, value_name = "PATH")]
    firecracker: Option<PathBuf>,
    /// Another build's `mcpvm` binary (an older checkout's), run beside
    /// ours in every run, the order alternating: before and after a
    /// change in one session.
    #[arg(long, value_name = "PATH")]
    other_mcpvm: Option<PathBuf>,
    #[command(flatten)]
    vm: GuestArgs,
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
    /// Firecracker binary to measure beside (a peer for benchmarks only,
    /// ../shared/peers/firecracker); a path that is not there is said and
    /// skipped.
    #[arg(long, value_name = "PATH")]
    firecracker: Option<PathBuf>,
    #[arg(long, default_value_t = 256)]
    mem: u64,
    #[arg(long, default_value_t = 1)]
    vcpus: u8,
    /// Per-boot timeout in seconds.
    #[arg(long, default_value_t = 120)]
    timeout: u64,
    /// Boot ours without the TSC-deadline timer (`mcpvm boot
    /// --no-tsc-deadline`).
    #[arg(long)]
    no_tsc_deadline: bool,
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

pub fn run(
    cmd: BenchCommand,
    start: Instant,
    json: bool,
) -> Result<u8, Box<dyn std::error::Error>> {
    match cmd {
        BenchCommand::PeerRun(a) => {
            // Signals keep their default action: Firecracker dies with us.
            let run = a.run.into_request()?;
            let plan = crate::peer::boot_plan(&run)?;
            let fc = crate::peer::check(&a.firecracker)?;
            let timeout = run.vm.timeout.map(Duration::from_secs);
            let console = run.vm.console.as_deref();
            Ok(crate::peer::run(
                plan,
                &fc,
                console,
                timeout,
                run.vm.seccomp,
                start,
            )?)
        }
        BenchCommand::Relay(a) => relay_bench(a, json),
        BenchCommand::Probe(a) => {
            let report = probe_bench(&a)?.run(|msg| eprintln!("bench probe: {msg}"))?;
            emit(&report, report.markdown(), json)
        }
        BenchCommand::FirstResponse(a) => {
            let bench = FirstResponseBench {
                mcpvm: exe::vm()?,
                tools: exe::tools()?,
                vm: run_request(a.vm, a.seccomp),
                host_command: a.host,
                runs: a.runs as usize,
                warm: a.warm,
                call: a.call,
                firecracker: peer_binary("first-response", a.firecracker),
                other: a.other_mcpvm,
            };
            let report = bench.run(|msg| eprintln!("bench first-response: {msg}"))?;
            emit(&report, report.markdown(), json)
        }
        BenchCommand::Density(a) => density_bench(a, json),
        BenchCommand::Boot(a) => {
            let firecracker = peer_binary("boot", a.firecracker);
            let bench = BootBench {
                mcpvm: exe::vm()?,
                qemu: a.qemu,
                firecracker,
                kernel: a.kernel,
                initrd: a.initrd,
                runs: a.runs as usize,
                mem_mib: a.mem,
                vcpus: a.vcpus,
                timeout: Duration::from_secs(a.timeout),
                tsc_deadline: !a.no_tsc_deadline,
            };
            let report = bench.run(|msg| eprintln!("bench boot: {msg}"))?;
            emit(&report, report.markdown(), json)
        }
    }
}

/// `mcpvm bench relay`: the VM, the Firecracker peer (when there is one)
/// and bare `cat`, round after round.
fn relay_bench(a: RelayArgs, json: bool) -> Result<u8, Box<dyn std::error::Error>> {
    let dir = tempfile::tempdir()?;
    let timings = dir.path().join("timings.json");
    let guest = RunRequest {
        command: vec![a.guest_cat.clone()],
        ..RunRequest::default()
    };
    let vm = relay::Peer {
        cmd: vm_run(&RunRequest {
            timings: Some(timings.clone()),
            ..guest.clone()
        })?,
        timings: Some(timings),
    };
    let firecracker = match peer_binary("relay", a.firecracker) {
        Some(fc) => Some(relay::Peer {
            cmd: peer_run(&fc, &guest)?,
            timings: None,
        }),
        None => None,
    };
    let bare = relay::Peer {
        cmd: vec!["cat".into()],
        timings: None,
    };
    // One warm-up round, not reported (page cache, first runs of
    // code), then each round starts with the next peer in turn.
    let mut peers: Vec<(&str, &relay::Peer, Vec<relay::RelayRun>)> = vec![("VM", &vm, Vec::new())];
    if let Some(fc) = &firecracker {
        peers.push(("Firecracker", fc, Vec::new()));
    }
    peers.push(("bare process", &bare, Vec::new()));
    let n = peers.len();
    for round in 0..=a.rounds as usize {
        for i in 0..n {
            let (name, peer, runs) = &mut peers[(round + i) % n];
            match round {
                0 => eprintln!("bench relay: warm-up round: {name}"),
                r => eprintln!("bench relay: round {r} of {}: {name}", a.rounds),
            }
            let run = relay::measure(peer, a.round_trips, a.bulk_mib)?;
            if round > 0 {
                runs.push(run);
            }
        }
    }
    let mut results = peers
        .into_iter()
        .map(|(_, _, runs)| relay::RelayResult::of(&runs));
    let ours = results.next().expect("the VM is measured");
    let theirs = firecracker.as_ref().and_then(|_| results.next());
    let cats = results.next().expect("bare cat is measured");
    let report = relay::RelayReport::new(
        a.round_trips,
        a.bulk_mib,
        a.rounds as usize,
        ours,
        theirs,
        cats,
    );
    emit(&report, report.markdown(), json)
}

/// `mcpvm bench density`: how many VMs restored from one snapshot answer.
fn density_bench(a: DensityArgs, json: bool) -> Result<u8, Box<dyn std::error::Error>> {
    let mut counts = a.counts.clone();
    counts.sort_unstable();
    counts.dedup();
    if counts.first() == Some(&0) || counts.is_empty() {
        return Err("--counts takes VM counts of at least 1, e.g. 10,50,100,200".into());
    }
    let vm = run_request(a.vm, None);
    let mcpvm = exe::vm()?;
    let dir = tempfile::Builder::new()
        .prefix("mcpvm-bench-density-")
        .tempdir()?;
    let snapshot = dir.path().join("snapshot");
    eprintln!("bench density: taking the snapshot");
    crate::take_snapshot(&mcpvm, &vm, &snapshot)
        .map_err(|e| format!("Cannot take the snapshot the VMs restore from ({e})"))?;
    let bench = DensityBench {
        mcpvm,
        snapshot,
        counts,
        reserve_mib: a.reserve_mib,
        answer_timeout: Duration::from_secs(a.answer_timeout),
        saturated_after: Duration::from_secs(a.saturated_after),
    };
    let report = bench.run(|msg| eprintln!("bench density: {msg}"))?;
    emit(&report, report.markdown(), json)
}

/// A peer's binary as an absolute path (a bare name would be looked up on
/// PATH), or None, said, where it is not there: the bench goes on without.
fn peer_binary(bench: &str, path: Option<PathBuf>) -> Option<PathBuf> {
    let p = path?;
    match std::fs::canonicalize(&p) {
        Ok(abs) if abs.is_file() => Some(abs),
        _ => {
            eprintln!(
                "bench {bench}: no Firecracker at {}: measuring without it",
                p.display()
            );
            None
        }
    }
}

/// The `mcpvm run` options a bench's VM runs take, and the guest command.
/// `TOOL={...}`: a tool and its arguments, a JSON object.
fn parse_call(s: &str) -> Result<(String, serde_json::Map<String, serde_json::Value>), String> {
    let (name, args) = s.split_once('=').unwrap_or((s, "{}"));
    if name.is_empty() {
        return Err(format!("'{s}' names no tool; use TOOL or TOOL={{...}}"));
    }
    match serde_json::from_str(args) {
        Ok(serde_json::Value::Object(m)) => Ok((name.to_string(), m)),
        _ => Err(format!(
            "the arguments of '{name}' must be a JSON object, got '{args}'"
        )),
    }
}

fn run_request(g: GuestArgs, seccomp: Option<vmm::SeccompMode>) -> RunRequest {
    let mut vm = VmRequest {
        mem: g.mem,
        server: g.server,
        images: g.images,
        catalogue: g.catalogue,
        workspace: g.workspace,
        ..VmRequest::default()
    };
    if let Some(m) = seccomp {
        vm.seccomp = m;
    }
    RunRequest {
        vm,
        command: g.guest,
        ..RunRequest::default()
    }
}

/// `mcpvm run` with `args`, as a command line.
pub fn vm_run(args: &RunRequest) -> Result<Vec<String>, std::io::Error> {
    let mut cmd = vec![exe::vm()?.display().to_string(), "run".into()];
    cmd.extend(args.to_args());
    Ok(cmd)
}

/// The same run under Firecracker (`mcpvm bench peer-run`), as a
/// command line.
pub fn peer_run(
    firecracker: &std::path::Path,
    args: &RunRequest,
) -> Result<Vec<String>, std::io::Error> {
    let mut cmd = vec![
        exe::tools()?.display().to_string(),
        "bench".into(),
        "peer-run".into(),
        format!("--firecracker={}", firecracker.display()),
    ];
    cmd.extend(args.to_args());
    Ok(cmd)
}

/// The fixture and the real servers of the probe tests, with the arguments
/// that keep a full probe run of each short and offline.
fn probe_bench(a: &ProbeBenchArgs) -> Result<ProbeBench, Box<dyn std::error::Error>> {
    let bin = |name: &str| -> Result<String, Box<dyn std::error::Error>> {
        let p = a.host_servers.join("bin").join(name);
        if !p.exists() {
            return Err(format!("{} is missing: run scripts/build", p.display()).into());
        }
        Ok(p.display().to_string())
    };
    let memory_file =
        std::env::temp_dir().join(format!("mcpvm-bench-memory-{}.jsonl", std::process::id()));
    let given = |pairs: &[(&str, Option<serde_json::Value>)]| {
        pairs
            .iter()
            .map(|(name, args)| {
                let a = match args {
                    Some(serde_json::Value::Object(m)) => ToolArgs::Given(m.clone()),
                    _ => ToolArgs::Dangerous,
                };
                (name.to_string(), a)
            })
            .collect()
    };
    Ok(ProbeBench {
        runs: a.runs as usize,
        servers: vec![
            BenchServer {
                label: "mcp-fixture".into(),
                command: vec![a.fixture.display().to_string()],
                calls: Default::default(),
            },
            BenchServer {
                label: "server-everything".into(),
                command: vec![bin("mcp-server-everything")?, "stdio".into()],
                calls: given(&[
                    (
                        "trigger-long-running-operation",
                        Some(serde_json::json!({"duration": 1, "steps": 4})),
                    ),
                    ("gzip-file-as-resource", None),
                    // These start timers that keep node alive after stdin
                    // closes: the wall time would be the exit grace.
                    ("toggle-simulated-logging", None),
                    ("toggle-subscriber-updates", None),
                ]),
            },
            BenchServer {
                label: "server-memory".into(),
                command: vec![
                    "env".into(),
                    format!("MEMORY_FILE_PATH={}", memory_file.display()),
                    bin("mcp-server-memory")?,
                ],
                calls: Default::default(),
            },
            BenchServer {
                label: "mcp-server-time".into(),
                command: vec![bin("mcp-server-time")?],
                calls: given(&[(
                    "get_current_time",
                    Some(serde_json::json!({"timezone": "UTC"})),
                )]),
            },
        ],
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_call_is_a_tool_and_a_json_object() {
        let (tool, args) =
            parse_call(r#"browser_navigate={"url":"http://127.0.0.1:8080/"}"#).unwrap();
        assert_eq!(tool, "browser_navigate");
        assert_eq!(args["url"], "http://127.0.0.1:8080/");
        assert!(parse_call("ping").unwrap().1.is_empty());
        assert!(parse_call("=x").unwrap_err().contains("names no tool"));
        assert!(parse_call("t=[1]").unwrap_err().contains("JSON object"));
    }
}

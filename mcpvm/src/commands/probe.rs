//! `mcpvm probe [--vm [run options]] -- <command…>`: connect to an MCP
//! server as a real client would (and, with `--robustness`, as a hostile
//! one) and report each step. With `--vm` the server runs in a microVM
//! through `mcpvm run`, and the VM's own phase times join the report.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use clap::{Args, ValueEnum};
use probes::{probe_process, LifecycleChoice, ProbeOptions, ToolArgs};

use crate::commands::run::VmOptions;
use crate::rundir::RunDir;

#[derive(Clone, Copy, ValueEnum)]
enum Lifecycle {
    /// server/discover first, initialize when the server does not speak 2026-07-28.
    Auto,
    Initialize,
    Stateless,
}

#[derive(Args)]
pub struct ProbeArgs {
    /// Call a tool with these arguments: NAME or NAME={"json":"arguments"} (repeatable).
    #[arg(long = "call", value_parser = parse_call)]
    call: Vec<(String, ToolArgs)>,
    /// Per-tool arguments from a JSON file: {"tool": {arguments} | "dangerous"}.
    #[arg(long)]
    calls: Option<PathBuf>,
    /// Never call this tool (repeatable).
    #[arg(long)]
    dangerous: Vec<String>,
    /// Call only the tools given by --call/--calls (default: every tool, with
    /// arguments generated from its input schema when none are given).
    #[arg(long)]
    only_given: bool,
    /// Also call tools annotated destructive (skipped by default).
    #[arg(long)]
    allow_destructive: bool,
    /// Also send the robustness probes (malformed and hostile input).
    #[arg(long)]
    robustness: bool,
    #[arg(long, value_enum, default_value = "auto")]
    lifecycle: Lifecycle,
    /// Seconds allowed for the server to start and answer the handshake.
    #[arg(long, default_value_t = 120)]
    init_timeout: u64,
    /// Seconds allowed for each later step.
    #[arg(long, default_value_t = 30)]
    step_timeout: u64,
    /// Seconds auto mode waits for an answer to server/discover before it
    /// starts the server again for initialize [default: 10; in a microVM,
    /// the init timeout, since the boot counts].
    #[arg(long)]
    discover_timeout: Option<u64>,
    /// Seconds a robustness probe waits for an answer.
    #[arg(long, default_value_t = 5)]
    answer_timeout: u64,
    /// Seconds the server may take to exit after its stdin closes before it
    /// is killed (a VM powers off in this time).
    #[arg(long, default_value_t = 5)]
    exit_grace: u64,
    /// Run the server in a microVM (`mcpvm run` with the options below;
    /// implied by --server).
    #[arg(long)]
    vm: bool,
    /// Start the microVM from the warm-start cache (`mcpvm run --warm`,
    /// docs/snapshots.md): restored after `initialize`, the snapshot taken
    /// on first use.
    #[arg(long)]
    warm: bool,
    /// The warm-start cache [default: ~/.cache/mcpvm/snapshots].
    #[arg(long, value_name = "DIR", requires = "warm")]
    snapshots: Option<PathBuf>,
    #[command(flatten)]
    vm_options: VmOptions,
    /// The server command (none with --server).
    #[arg(last = true, required_unless_present = "server")]
    command: Vec<String>,
}

#[derive(Debug, thiserror::Error)]
pub enum ProbeCliError {
    #[error("Cannot read the calls file {path}")]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("The calls file {path} is not valid: {why}; expected {{\"tool\": {{arguments}} or \"dangerous\"}}")]
    Format { path: PathBuf, why: String },
    #[error("Cannot find this program's own path to run `mcpvm run`")]
    Exe(#[source] std::io::Error),
    #[error("Cannot create the run directory")]
    RunDir(#[source] std::io::Error),
}

fn parse_call(s: &str) -> Result<(String, ToolArgs), String> {
    let (name, args) = s.split_once('=').unwrap_or((s, "{}"));
    if name.is_empty() {
        return Err(format!("'{s}' names no tool; use NAME or NAME={{...}}"));
    }
    match serde_json::from_str::<serde_json::Value>(args) {
        Ok(serde_json::Value::Object(arguments)) => {
            Ok((name.to_string(), ToolArgs::Given(arguments)))
        }
        _ => Err(format!(
            "arguments of '{name}' must be a JSON object, got '{args}'"
        )),
    }
}

fn read_calls(path: &Path) -> Result<BTreeMap<String, ToolArgs>, ProbeCliError> {
    let text = std::fs::read_to_string(path).map_err(|source| ProbeCliError::Read {
        path: path.to_path_buf(),
        source,
    })?;
    let bad = |why: String| ProbeCliError::Format {
        path: path.to_path_buf(),
        why,
    };
    let v: serde_json::Value = serde_json::from_str(&text).map_err(|e| bad(e.to_string()))?;
    let obj = v
        .as_object()
        .ok_or_else(|| bad("not a JSON object".into()))?;
    obj.iter()
        .map(|(name, a)| match a {
            serde_json::Value::Object(args) => Ok((name.clone(), ToolArgs::Given(args.clone()))),
            serde_json::Value::String(s) if s == "dangerous" => {
                Ok((name.clone(), ToolArgs::Dangerous))
            }
            other => Err(bad(format!("the entry for '{name}' is {other}"))),
        })
        .collect()
}

pub fn run(args: ProbeArgs, json: bool) -> Result<u8, Box<dyn std::error::Error>> {
    let mut calls = match &args.calls {
        Some(path) => read_calls(path)?,
        None => BTreeMap::new(),
    };
    calls.extend(args.call);
    for name in args.dangerous {
        calls.insert(name, ToolArgs::Dangerous);
    }
    let mut opts = ProbeOptions {
        init_timeout: Duration::from_secs(args.init_timeout),
        step_timeout: Duration::from_secs(args.step_timeout),
        discover_timeout: Duration::from_secs(args.discover_timeout.unwrap_or(
            if args.vm || args.vm_options.server().is_some() {
                args.init_timeout
            } else {
                10
            },
        )),
        answer_timeout: Duration::from_secs(args.answer_timeout),
        exit_grace: Duration::from_secs(args.exit_grace),
        lifecycle: match args.lifecycle {
            Lifecycle::Auto => LifecycleChoice::Auto,
            Lifecycle::Initialize => LifecycleChoice::Initialize,
            Lifecycle::Stateless => LifecycleChoice::Stateless,
        },
        calls,
        only_given: args.only_given,
        allow_destructive: args.allow_destructive,
        robustness: args.robustness,
        ..ProbeOptions::default()
    };
    // The run directory holds the VM's timings file and goes with this
    // process, whatever happens.
    let mut rundir = None;
    // A catalogued server always runs in a microVM.
    let in_vm = args.vm || args.vm_options.server().is_some();
    if args.warm && !in_vm {
        return Err("--warm starts a microVM from a snapshot: give --vm or --server".into());
    }
    let command = if in_vm {
        // `mcpvm run` would refuse these too, but once per spawn and
        // inside the probe's report: say it once, here.
        args.vm_options.check(!args.command.is_empty())?;
        let dir = RunDir::create().map_err(ProbeCliError::RunDir)?;
        let timings = dir.path().join("probe-timings.json");
        let exe = std::env::current_exe().map_err(ProbeCliError::Exe)?;
        let mut cmd = vec![exe.display().to_string(), "run".into()];
        let events = dir.path().join("probe-events.jsonl");
        cmd.push(format!("--timings={}", timings.display()));
        cmd.push(format!("--events={}", events.display()));
        opts.vm_events = Some(events);
        cmd.extend(args.vm_options.to_args());
        if args.warm {
            cmd.push("--warm".into());
        }
        if let Some(d) = &args.snapshots {
            cmd.push(format!("--snapshots={}", d.display()));
        }
        cmd.push("--".into());
        cmd.extend(args.command);
        opts.vm_timings = Some(timings);
        rundir = Some(dir);
        cmd
    } else {
        args.command
    };
    let result = probe_process(&command, &opts)?;
    drop(rundir);
    if json {
        println!("{}", serde_json::to_string(&result)?);
    } else {
        print!("{}", result.summary());
    }
    Ok(if !result.ok() {
        3
    } else if result.broken_by_hostile_input() {
        4
    } else {
        0
    })
}

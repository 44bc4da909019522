//! `mcpvm probe [--vm [run options]] -- <command…>`: connect to an MCP
//! server as a real client would (and, with `--robustness`, as a hostile
//! one) and report each step. With `--vm` the server runs in a microVM
//! through `mcpvm run`, and the VM's own phase times join the report.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use clap::{Args, ValueEnum};
use probes::{probe_process, LifecycleChoice, ProbeOptions, ToolArgs};

use crate::request::{ProbeRequest, ANSWER_TIMEOUT, EXIT_GRACE, INIT_TIMEOUT, STEP_TIMEOUT};
use mcpvm::commands::run::{RunRequest, VmOptions, VmRequest};
use mcpvm::host::rundir::RunDir;

#[derive(Clone, Copy, Debug, Default, PartialEq, ValueEnum)]
pub enum Lifecycle {
    /// server/discover first, initialize when the server does not speak 2026-07-28.
    #[default]
    Auto,
    Initialize,
    Stateless,
}

impl From<Lifecycle> for LifecycleChoice {
    fn from(l: Lifecycle) -> LifecycleChoice {
        match l {
            Lifecycle::Auto => LifecycleChoice::Auto,
            Lifecycle::Initialize => LifecycleChoice::Initialize,
            Lifecycle::Stateless => LifecycleChoice::Stateless,
        }
    }
}

#[derive(Args, Clone, Debug, PartialEq)]
pub struct ProbeArgs {
    /// Call a tool with these arguments: NAME or NAME={"json":"arguments"} (repeatable).
    #[arg(long = "call", value_parser = parse_call)]
    pub call: Vec<(String, ToolArgs)>,
    /// Per-tool arguments from a JSON file: {"tool": {arguments} | "dangerous"}.
    #[arg(long)]
    pub calls: Option<PathBuf>,
    /// Never call this tool (repeatable).
    #[arg(long)]
    pub dangerous: Vec<String>,
    /// Call only the tools given by --call/--calls (default: every tool, with
    /// arguments generated from its input schema when none are given).
    #[arg(long)]
    pub only_given: bool,
    /// Call none but these tools (comma-separated; the others are listed,
    /// not called), in this order, with the arguments --call/--calls give
    /// or generated.
    #[arg(long, value_delimiter = ',', value_name = "TOOL,...")]
    pub only_tools: Option<Vec<String>>,
    /// Make each generated call once: a call refused for its arguments is
    /// not tried again with the arguments the refusal asks for (an audit's
    /// cells judged against the baseline: a profile takes a tool away when
    /// the call that worked there fails, whatever another call would do).
    #[arg(long)]
    pub no_retries: bool,
    /// Also call each tool given by --call/--calls a second time with one
    /// value changed, as generated calls are, to show whether its answer
    /// depends on its input (made once by default: a second call of a
    /// tool that writes changes what the first one wrote).
    #[arg(long)]
    pub vary_given: bool,
    /// Also call tools annotated destructive (skipped by default).
    #[arg(long)]
    pub allow_destructive: bool,
    /// Also send the robustness probes (malformed and hostile input).
    #[arg(long)]
    pub robustness: bool,
    /// Attack every called tool: each string argument in turn gets each
    /// payload (command and argument injection, path traversal, SSRF),
    /// and what the server then does inside the VM is judged
    /// (docs/security-audit.md). Needs a microVM; adds `--profile observe`.
    #[arg(long)]
    pub security: bool,
    /// More payloads for --security, a file shaped like the built-in
    /// probes/src/steps/payloads.toml.
    #[arg(long, value_name = "FILE", requires = "security")]
    pub payloads: Option<PathBuf>,
    /// A path the server is meant to reach, in the guest (repeatable):
    /// --security judges traversal against these [default: the catalogue
    /// entry's roots, else the workspace].
    #[arg(long = "root", value_name = "PATH", requires = "security", value_parser = parse_root)]
    pub roots: Vec<String>,
    /// Also write the findings as SARIF 2.1.0 to FILE, for code-scanning
    /// dashboards (written whole, or not at all).
    #[arg(long, value_name = "FILE")]
    pub sarif: Option<PathBuf>,
    /// Exit with status 5 when a finding at or above this severity
    /// (low, medium, high, critical) exists: a CI pipeline's gate
    /// [default: none, findings alone do not change the exit status].
    #[arg(long, value_name = "SEVERITY")]
    pub fail_on: Option<probes::judge::gate::Severity>,
    /// Hold what the server lists to its pin in FILE (`mcpvm pin`): a
    /// definition that changed is a finding (a rug pull when the version
    /// did not change, drift when it did), and a version older than the
    /// pinned one is a re-deployment.
    #[arg(long, value_name = "FILE")]
    pub pinned: Option<PathBuf>,
    /// `mcpvm pin --out`: write the listed definitions to FILE.
    #[arg(long, value_name = "FILE", hide = true)]
    pub pin_out: Option<PathBuf>,
    #[arg(long, value_enum, default_value = "auto")]
    pub lifecycle: Lifecycle,
    /// Seconds allowed for the server to start and answer the handshake.
    #[arg(long, default_value_t = INIT_TIMEOUT)]
    pub init_timeout: u64,
    /// Seconds allowed for each later step.
    #[arg(long, default_value_t = STEP_TIMEOUT)]
    pub step_timeout: u64,
    /// Seconds auto mode waits for an answer to server/discover before it
    /// starts the server again for initialize [default: 10; in a microVM,
    /// the init timeout, since the boot counts].
    #[arg(long)]
    pub discover_timeout: Option<u64>,
    /// Seconds a robustness probe waits for an answer.
    #[arg(long, default_value_t = ANSWER_TIMEOUT)]
    pub answer_timeout: u64,
    /// Seconds the server may take to exit after its stdin closes before it
    /// is killed (a VM powers off in this time).
    #[arg(long, default_value_t = EXIT_GRACE)]
    pub exit_grace: u64,
    /// Run the server in a microVM (`mcpvm run` with the options below;
    /// implied by --server).
    #[arg(long)]
    pub vm: bool,
    /// Start the microVM from the warm-start cache (`mcpvm run --warm`,
    /// docs/snapshots.md): restored after `initialize`, the snapshot taken
    /// on first use.
    #[arg(long)]
    pub warm: bool,
    /// The warm-start cache [default: ~/.cache/mcpvm/snapshots].
    #[arg(long, value_name = "DIR", requires = "warm")]
    pub snapshots: Option<PathBuf>,
    #[command(flatten)]
    pub vm_options: VmOptions,
    /// The whole probe as a request file another mcpvm process wrote
    /// (an audit's cell): no other option goes with it.
    #[arg(long, hide = true, value_name = "FILE")]
    pub request: Option<PathBuf>,
    /// The server command (none with --server).
    #[arg(last = true, required_unless_present_any = ["server", "package", "request"])]
    pub command: Vec<String>,
}

impl ProbeArgs {
    /// The probe asked for: `--request`'s file, or these options.
    pub fn into_request(self) -> Result<ProbeRequest, mcpvm::run::request::RequestError> {
        let Some(path) = self.request.clone() else {
            return Ok(self.into());
        };
        // Nothing beside it, but for the kernel and initramfs that
        // MCPVM_KERNEL and MCPVM_INITRD give every parse.
        let mut others = ProbeRequest::from(self);
        others.vm.kernel = None;
        others.vm.initrd = None;
        match others == ProbeRequest::default() {
            true => ProbeRequest::read(&path),
            false => Err(mcpvm::run::request::RequestError::Alone("probe")),
        }
    }
}

impl From<ProbeArgs> for ProbeRequest {
    fn from(a: ProbeArgs) -> ProbeRequest {
        ProbeRequest {
            call: a.call,
            calls: a.calls,
            dangerous: a.dangerous,
            only_given: a.only_given,
            only_tools: a.only_tools,
            no_retries: a.no_retries,
            vary_given: a.vary_given,
            allow_destructive: a.allow_destructive,
            robustness: a.robustness,
            security: a.security,
            payloads: a.payloads,
            roots: a.roots,
            sarif: a.sarif,
            fail_on: a.fail_on,
            pinned: a.pinned,
            pin_out: a.pin_out,
            lifecycle: a.lifecycle.into(),
            init_timeout: a.init_timeout,
            step_timeout: a.step_timeout,
            discover_timeout: a.discover_timeout,
            answer_timeout: a.answer_timeout,
            exit_grace: a.exit_grace,
            in_vm: a.vm,
            warm: a.warm,
            snapshots: a.snapshots,
            vm: a.vm_options.into(),
            command: a.command,
        }
    }
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
    #[error("Cannot find the mcpvm binary to run `mcpvm run` with")]
    Exe(#[source] std::io::Error),
    #[error("Cannot create the run directory")]
    RunDir(#[source] std::io::Error),
    #[error("Cannot read the payloads file {path}")]
    ReadPayloads {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{0}")]
    Payloads(String),
    #[error("Cannot write the SARIF log {path}")]
    WriteSarif {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("--sarif {0}: its directory does not exist")]
    SarifDir(PathBuf),
    #[error("--security judges what the server does inside its microVM: give --vm or --server")]
    SecurityOutsideVm,
    #[error("--warm starts a microVM from a snapshot: give --vm or --server")]
    WarmOutsideVm,
    #[error(transparent)]
    Server(#[from] mcpvm::server::ServerError),
    #[error(transparent)]
    Options(#[from] mcpvm::run::request::OptionsError),
    #[error(transparent)]
    Request(#[from] mcpvm::run::request::RequestError),
    #[error(transparent)]
    Pin(#[from] crate::pinning::PinError),
    #[error(transparent)]
    Probe(#[from] probes::ProbeError),
    #[error(transparent)]
    Json(#[from] serde_json::Error),
}

/// The built-in payloads, and a user's file's after them.
fn payloads(extra: Option<&Path>) -> Result<Vec<probes::steps::attacks::Payload>, ProbeCliError> {
    use probes::steps::attacks::{parse, BUILT_IN};
    let mut all = parse(BUILT_IN, "the built-in payloads").map_err(ProbeCliError::Payloads)?;
    if let Some(path) = extra {
        let text = std::fs::read_to_string(path).map_err(|source| ProbeCliError::ReadPayloads {
            path: path.to_path_buf(),
            source,
        })?;
        all.extend(parse(&text, &path.display().to_string()).map_err(ProbeCliError::Payloads)?);
    }
    Ok(all)
}

fn parse_root(s: &str) -> Result<String, String> {
    if s.starts_with('/') && !s.split('/').any(|c| c == "." || c == "..") {
        Ok(s.to_string())
    } else {
        Err(format!(
            "'{s}' is not an absolute guest path without '.' or '..' (e.g. /workspace)"
        ))
    }
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

/// `mcpvm probe`: the probe its options or `--request` ask for.
pub fn run(args: ProbeArgs, json: bool) -> Result<u8, ProbeCliError> {
    serve(args.into_request()?, json)
}

/// The probe, from its request to its report and exit status.
pub fn serve(mut args: ProbeRequest, json: bool) -> Result<u8, ProbeCliError> {
    // A catalogued server always runs in a microVM.
    let in_vm = args.in_vm || args.vm.names_a_server();
    if args.security {
        if !in_vm {
            return Err(ProbeCliError::SecurityOutsideVm);
        }
        // Recording and canaries, on top of whatever else is withheld.
        args.vm.profile = Some(match args.vm.profile.take() {
            None => "observe".to_string(),
            Some(p) if p.split('+').any(|x| x == "observe") => p,
            Some(p) => format!("{p}+observe"),
        });
    }
    if args.warm && !in_vm {
        return Err(ProbeCliError::WarmOutsideVm);
    }
    // What the SARIF log names as probed, and where it goes.
    let server = args
        .vm
        .server()
        .or(args.vm.package.as_deref())
        .map(str::to_string)
        .unwrap_or_else(|| args.command.join(" "));
    let sarif = sarif_target(&args, &server)?;
    // The store's record of its install scripts (a server built there).
    let installed = mcpvm::server::stored(
        args.vm.server.as_deref(),
        args.vm.package.as_deref(),
        &args.vm.catalogue,
        &args.vm.images,
    )
    .and_then(|s| s.record?.install);
    let pin = args.pin_out.clone().map(|out| (out, args.clone()));
    let fail_on = args.fail_on;
    let mut opts = probe_options(&mut args, pin.is_some())?;
    // The run directory holds the VM's timings file and goes with this
    // process, whatever happens.
    let mut rundir = None;
    let command = if in_vm {
        let (cmd, dir) = vm_command(args.vm, args.command, args.warm, args.snapshots, &mut opts)?;
        rundir = Some(dir);
        cmd
    } else {
        // A bare process gets the same environment and redaction.
        let env = args.vm.environment()?;
        opts.secrets = probes::report::redact::Secrets::new(
            env.iter()
                .filter(|(k, _)| args.vm.secrets.contains(k))
                .cloned(),
        );
        opts.env = env;
        args.command
    };
    let mut result = probe_process(&command, &opts)?;
    drop(rundir);
    // What the server's install scripts did when its layer was built,
    // beyond installing: findings of what it declares, like the audit's.
    if let Some(rec) = installed {
        result
            .findings
            .extend(crate::install::record::findings(&rec));
    }
    if let Some((out, pin_args)) = &pin {
        let said = crate::pinning::write(out, &pin_args.vm, &pin_args.command, &result)?;
        if json {
            println!(
                "{}",
                serde_json::json!({"pinned": out, "definitions": result.definitions.len(), "summary": said})
            );
        } else {
            eprintln!("mcpvm pin: {said} in {}", out.display());
        }
        return Ok(0);
    }
    if let Some((path, artifact)) = &sarif {
        let log = probes::report::sarif::log(&result, &server, artifact);
        mcpvm::host::files::write_whole(path, serde_json::to_string_pretty(&log)?.as_bytes())
            .map_err(|source| ProbeCliError::WriteSarif {
                path: path.clone(),
                source,
            })?;
    }
    if json {
        println!("{}", serde_json::to_string(&result)?);
    } else {
        // The server chose its name, tools and stderr: shown escaped.
        print!("{}", mcpvm::logger::printable_lines(&result.summary()));
    }
    Ok(exit_code(fail_on, &result))
}

/// With `--sarif FILE`: the file, checked to be writable where it is,
/// and what the log names as the probed artifact.
fn sarif_target(
    args: &ProbeRequest,
    server: &str,
) -> Result<Option<(PathBuf, probes::report::sarif::Artifact)>, ProbeCliError> {
    let Some(path) = args.sarif.clone() else {
        return Ok(None);
    };
    let artifact = sarif_artifact(args, server)?;
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        if !dir.is_dir() {
            return Err(ProbeCliError::SarifDir(path));
        }
    }
    Ok(Some((path, artifact)))
}

/// The probe's options from its arguments: the calls (taken out of
/// `args`), the attacks and what they are judged against, the pin, the
/// timeouts. `keep_definitions`: a pin is to be written.
fn probe_options(
    args: &mut ProbeRequest,
    keep_definitions: bool,
) -> Result<ProbeOptions, ProbeCliError> {
    let payloads = match args.security {
        true => payloads(args.payloads.as_deref())?,
        false => Vec::new(),
    };
    let roots = match (args.security, args.vm.server()) {
        (false, _) => Vec::new(),
        (true, _) if !args.roots.is_empty() => args.roots.clone(),
        (true, Some(name)) => mcpvm::server::roots(name, &args.vm.catalogue)?,
        (true, None) => vec![mcpvm_protocol::ports::WORKSPACE_DIR.to_string()],
    };
    let (site, background_lookups) = match args.vm.server() {
        Some(name) => mcpvm::server::site_and_background(name, &args.vm.catalogue)?,
        None => (None, false),
    };
    // The site is the workspace served: none without one.
    let site = site.filter(|_| args.vm.workspace.is_some());
    // A pin to hold the listing to.
    let pinned = match &args.pinned {
        Some(path) => Some(crate::pinning::pinned_for(path, &args.vm, &args.command)?),
        None => None,
    };
    let mut calls = match &args.calls {
        Some(path) => read_calls(path)?,
        None => BTreeMap::new(),
    };
    // The order they were given in: --only-tools' (an audit's judged
    // cell repeats its baseline's order: a tool may read what an earlier
    // one wrote), then the file's (by name), then --call's.
    let mut call_order: Vec<String> = args.only_tools.clone().unwrap_or_default();
    call_order.extend(calls.keys().cloned());
    call_order.extend(args.call.iter().map(|(name, _)| name.clone()));
    calls.extend(std::mem::take(&mut args.call));
    for name in std::mem::take(&mut args.dangerous) {
        calls.insert(name, ToolArgs::Dangerous);
    }
    let in_vm = args.in_vm || args.vm.server().is_some();
    Ok(ProbeOptions {
        init_timeout: Duration::from_secs(args.init_timeout),
        step_timeout: Duration::from_secs(args.step_timeout),
        discover_timeout: Duration::from_secs(args.discover_timeout.unwrap_or(if in_vm {
            args.init_timeout
        } else {
            10
        })),
        answer_timeout: Duration::from_secs(args.answer_timeout),
        exit_grace: Duration::from_secs(args.exit_grace),
        lifecycle: args.lifecycle,
        calls,
        call_order,
        only_given: args.only_given,
        no_retries: args.no_retries,
        only_tools: args
            .only_tools
            .as_ref()
            .map(|t| t.iter().cloned().collect()),
        vary_given: args.vary_given,
        allow_destructive: args.allow_destructive,
        robustness: args.robustness,
        security: args.security,
        payloads,
        roots,
        // A VM given a workspace sees it here: path arguments point in it.
        workspace: args
            .vm
            .workspace
            .as_ref()
            .map(|_| mcpvm_protocol::ports::WORKSPACE_DIR.to_string()),
        site,
        background_lookups,
        keep_definitions,
        pinned,
        ..ProbeOptions::default()
    })
}

/// The `mcpvm run` command line that starts the server in its microVM,
/// and the run directory that holds its timings and events: `opts`
/// learns the environment, the secrets to redact, and where a server
/// that speaks HTTP is reached.
/// Whether every `mcpvm run` of these options starts from the same
/// state: nothing a run writes outlives its VM unless the workspace or a
/// disk is writable (`ProbeOptions::starts_fresh`).
fn starts_fresh(vm: &VmRequest) -> bool {
    !vm.workspace.as_ref().is_some_and(|w| w.writable)
        && vm.disks.iter().all(|d| d.config.read_only)
}

fn vm_command(
    mut vm_options: VmRequest,
    command: Vec<String>,
    warm: bool,
    snapshots: Option<PathBuf>,
    opts: &mut ProbeOptions,
) -> Result<(Vec<String>, RunDir), ProbeCliError> {
    // `mcpvm run` would refuse these too, but once per spawn and
    // inside the probe's report: say it once, here.
    let checked = vm_options.check(!command.is_empty())?;
    opts.starts_fresh = starts_fresh(&vm_options);
    // `mcpvm run` gets the names on its command line and the values
    // in its environment; its credentials and --secret's are
    // redacted from the result.
    opts.env = checked.env.clone();
    opts.secrets = probes::report::redact::Secrets::new(checked.secrets.clone());
    // A server that speaks HTTP (as catalogued, or a command given
    // `--guest-port`) is reached through --listen on a free loopback
    // port.
    let http_port = checked
        .server
        .as_ref()
        .and_then(|s| s.http_port)
        .or(vm_options.guest_port);
    if http_port.is_some() && vm_options.listen.is_none() {
        // Bound here and handed to `mcpvm run` as descriptor 3: the
        // port is ours from choice to use, no other process can take
        // it between.
        let l = std::net::TcpListener::bind("127.0.0.1:0").map_err(ProbeCliError::RunDir)?;
        vm_options.listen = Some(l.local_addr().map_err(ProbeCliError::RunDir)?);
        vm_options.listen_fd = Some(3);
        opts.fd3 = Some(std::sync::Arc::new(std::os::fd::OwnedFd::from(l)));
    }
    if let (Some(_), Some(addr)) = (http_port, vm_options.listen) {
        // The run's token, chosen here: in the child's environment,
        // and on every request.
        let token = mcpvm::run::inbound::fresh_token().map_err(ProbeCliError::RunDir)?;
        opts.env
            .push((mcpvm::run::inbound::TOKEN_ENV.to_string(), token.clone()));
        opts.http = Some(probes::transport::http::Endpoint {
            authority: addr.to_string(),
            path: "/mcp".into(),
            token: Some(token),
        });
    }
    let dir = RunDir::create().map_err(ProbeCliError::RunDir)?;
    let timings = dir.path().join("probe-timings.json");
    let exe = mcpvm::exe::vm().map_err(ProbeCliError::Exe)?;
    let events = dir.path().join("probe-events.jsonl");
    let run = RunRequest {
        vm: vm_options,
        timings: Some(timings.clone()),
        events: Some(events.clone()),
        warm,
        snapshots,
        command,
        ..RunRequest::default()
    };
    let request = run.write_in(dir.path()).map_err(ProbeCliError::RunDir)?;
    let cmd = vec![
        exe.display().to_string(),
        "run".into(),
        "--request".into(),
        request.display().to_string(),
    ];
    opts.vm_events = Some(events);
    opts.vm_timings = Some(timings);
    Ok((cmd, dir))
}

/// The probe's exit code: the gate's when findings reach it, 3 when a
/// step failed, 4 when hostile input broke the server, else 0.
fn exit_code(fail_on: Option<probes::judge::gate::Severity>, result: &probes::ProbeResult) -> u8 {
    let gate = fail_on.map(|at| (at, probes::judge::gate::reaching(&result.findings, at)));
    if let Some((at, n @ 1..)) = gate {
        eprintln!(
            "mcpvm probe: {n} finding(s) at or above {at} (--fail-on {at}): exit {}",
            probes::judge::gate::FINDINGS_EXIT
        );
        probes::judge::gate::FINDINGS_EXIT
    } else if !result.ok() {
        3
    } else if result.broken_by_hostile_input() {
        4
    } else {
        0
    }
}

/// Where SARIF locates the findings: the catalogue entry of a named
/// server, else the program probed.
fn sarif_artifact(
    args: &ProbeRequest,
    server: &str,
) -> Result<probes::report::sarif::Artifact, mcpvm::server::ServerError> {
    Ok(match args.vm.server() {
        Some(name) => match mcpvm::server::origin(name, &args.vm.catalogue)? {
            (Some(o), _) => probes::report::sarif::Artifact {
                path: o.file,
                line: Some(o.line),
            },
            (None, source) => probes::report::sarif::Artifact {
                path: source,
                line: None,
            },
        },
        None => probes::report::sarif::Artifact {
            path: args
                .command
                .first()
                .cloned()
                .unwrap_or_else(|| server.to_string()),
            line: None,
        },
    })
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use clap::Parser;

    /// `mcpvm probe`'s arguments alone, as clap parses them.
    #[derive(Parser)]
    pub(crate) struct Cli {
        #[command(flatten)]
        pub(crate) probe: ProbeArgs,
    }

    /// Nothing outlives a microVM unless its workspace or a disk is
    /// writable: only then is a second start (`reopen`) worth a boot.
    #[test]
    fn a_run_starts_fresh_unless_something_it_writes_outlives_it() {
        let mut vm = VmRequest::default();
        assert!(starts_fresh(&vm));
        vm.workspace = Some(mcpvm::workspace::parse_workspace("/tmp/w").unwrap());
        vm.disks = vec![mcpvm::run::disk_arg::parse_disk("/tmp/d.img").unwrap()];
        assert!(starts_fresh(&vm));
        vm.workspace = Some(mcpvm::workspace::parse_workspace("/tmp/w,rw").unwrap());
        assert!(!starts_fresh(&vm));
        vm.workspace = None;
        vm.disks
            .push(mcpvm::run::disk_arg::parse_disk("/tmp/e.img,rw").unwrap());
        assert!(!starts_fresh(&vm));
    }

    /// The tools --only-tools names are called in its order, given or
    /// generated, before those only --call names: an audit's judged cell
    /// repeats its baseline's order (a tool may read what one before it
    /// wrote).
    #[test]
    fn only_tools_sets_the_order_of_the_calls() {
        let mut given = serde_json::Map::new();
        given.insert("a".into(), serde_json::json!(2));
        let mut req = ProbeRequest {
            call: vec![("add".into(), ToolArgs::Given(given))],
            only_tools: Some(vec!["sub".into(), "add".into(), "mul".into()]),
            no_retries: true,
            ..ProbeRequest::default()
        };
        let opts = probe_options(&mut req, false).unwrap();
        let first: Vec<&str> = opts.call_order.iter().map(String::as_str).take(3).collect();
        assert_eq!(first, ["sub", "add", "mul"]);
        assert!(opts.no_retries);
        assert!(matches!(opts.calls.get("add"), Some(ToolArgs::Given(_))));
    }

    #[test]
    fn the_command_line_parses_onto_the_request_a_file_carries_alone() {
        let parse = |argv: &[&str]| {
            Cli::try_parse_from(std::iter::once("mcpvm").chain(argv.iter().copied()))
                .unwrap_or_else(|e| panic!("{argv:?}: {e}"))
                .probe
                .into_request()
        };
        let req = parse(&[
            "--call=add={\"a\":2}",
            "--dangerous=delete_all",
            "--only-given",
            "--only-tools=add,sub",
            "--no-retries",
            "--security",
            "--fail-on=medium",
            "--lifecycle=stateless",
            "--init-timeout=300",
            "--vm",
            "--server=memory",
            "--env=K=v",
            "--timeout=600",
        ])
        .unwrap();
        let mut given = serde_json::Map::new();
        given.insert("a".into(), serde_json::json!(2));
        assert_eq!(
            req,
            ProbeRequest {
                call: vec![("add".into(), ToolArgs::Given(given))],
                dangerous: vec!["delete_all".into()],
                only_given: true,
                only_tools: Some(vec!["add".into(), "sub".into()]),
                no_retries: true,
                security: true,
                fail_on: Some(probes::judge::gate::Severity::Medium),
                lifecycle: LifecycleChoice::Stateless,
                init_timeout: 300,
                in_vm: true,
                vm: VmRequest {
                    server: Some("memory".into()),
                    env: vec![("K".into(), Some("v".into()))],
                    timeout: Some(600),
                    ..VmRequest::default()
                },
                ..ProbeRequest::default()
            }
        );
        // No option but the command is the default request.
        assert_eq!(
            parse(&["--", "/bin/server"]).unwrap(),
            ProbeRequest {
                command: vec!["/bin/server".into()],
                ..ProbeRequest::default()
            }
        );
        // --request: the file's probe, and nothing beside it.
        let t = tempfile::tempdir().unwrap();
        let f = t.path().join("probe.json");
        req.write(&f).unwrap();
        let from_file = parse(&["--request", f.to_str().unwrap()]).unwrap();
        let by_name = ProbeRequest {
            vm: VmRequest {
                env: vec![("K".into(), None)],
                ..req.vm.clone()
            },
            ..req.clone()
        };
        assert_eq!(from_file, by_name, "values stay out of the file");
        let e = parse(&["--request", f.to_str().unwrap(), "--robustness"])
            .unwrap_err()
            .to_string();
        assert!(e.contains("no other option"), "{e}");
    }
}

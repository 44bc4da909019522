//! `mcpvm run -- <command> [args…]`: a drop-in stdio MCP server that runs
//! the command in its own microVM. Our stdin goes to the server's stdin,
//! its stdout to our stdout, byte for byte; its stderr to our stderr; its
//! exit status becomes ours.
//!
//! [`run`] is the recipe; its steps live in `crate::run` (the plan, the
//! channels and their relays, events, the snapshot's template client) and
//! `crate::warm` (the warm-start cache).

use std::fs::File;
use std::io::{self, Write};
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use clap::Args;
use vmm::{VmConfig, VmHandle};

use crate::run::channels::{FirstLine, HostChannels, Relays, Stdio, RELAY_DRAIN};
use crate::run::events::EventSink;
use crate::run::options::Args as ArgList;
pub use crate::run::options::{Checked, VmOptions};
use crate::run::plan::RunPlan;
use crate::run::template::{self, INITIALIZE_FILE};
use crate::run::RunError;
use crate::rundir::RunDir;

#[derive(Args, Clone, Debug, Default, PartialEq)]
pub struct RunArgs {
    #[command(flatten)]
    pub vm: VmOptions,
    /// Write the run's phase times (ms since start) to this JSON file.
    #[arg(long)]
    pub timings: Option<PathBuf>,
    /// Write the guest agent's events (JSON lines, each with `at_ms`):
    /// spawn, first output, OOM, denied and used system calls, exit.
    #[arg(long)]
    pub events: Option<PathBuf>,
    /// Once the server has answered an `initialize` from mcpvm itself,
    /// pause the VM and write it to this snapshot directory
    /// (docs/snapshots.md), then exit 0; `--from-snapshot DIR` starts it.
    #[arg(long, value_name = "DIR", conflicts_with = "workspace")]
    pub snapshot_to: Option<PathBuf>,
    /// Start the server from a snapshot `--snapshot-to` wrote, instead of
    /// booting and starting it: the VM, its devices and the server come
    /// from the snapshot.
    #[arg(long, value_name = "DIR", conflicts_with_all = [
        "command", "snapshot_to", "kernel", "initrd", "mem", "vcpus", "cwd", "env",
        "image", "read_only_root", "server", "package", "workspace", "profile", "no_rng",
    ])]
    pub from_snapshot: Option<PathBuf>,
    /// Start the server from the warm-start cache: restored from a
    /// snapshot of the same VM and server taken after `initialize`, taken
    /// now (one cold start) if there is none yet (docs/snapshots.md).
    #[arg(long, conflicts_with_all = ["snapshot_to", "from_snapshot", "workspace"])]
    pub warm: bool,
    /// The warm-start cache [default: ~/.cache/mcpvm/snapshots].
    #[arg(long, value_name = "DIR", requires = "warm")]
    pub snapshots: Option<PathBuf>,
    /// Benchmarks only: run the same plan under this Firecracker binary
    /// instead of our VMM, behind the same host side (`crate::run::peer`).
    #[arg(long, hide = true, value_name = "PATH", conflicts_with_all = [
        "snapshot_to", "from_snapshot", "warm", "workspace", "allow_net", "listen",
    ])]
    pub peer_firecracker: Option<PathBuf>,
    /// The server command and its arguments, as seen inside the guest.
    #[arg(last = true, required_unless_present_any = ["server", "package", "from_snapshot"])]
    pub command: Vec<String>,
}

impl RunArgs {
    /// These options as `mcpvm run` arguments (after `run`): parsing them
    /// gives these options back.
    pub fn to_args(&self) -> Vec<String> {
        let mut a = ArgList(self.vm.to_args());
        a.path("timings", &self.timings);
        a.path("events", &self.events);
        a.path("snapshot-to", &self.snapshot_to);
        a.path("from-snapshot", &self.from_snapshot);
        a.flag("warm", self.warm);
        a.path("snapshots", &self.snapshots);
        a.path("peer-firecracker", &self.peer_firecracker);
        if !self.command.is_empty() {
            a.push("--".into());
            a.0.extend(self.command.iter().cloned());
        }
        a.0
    }
}

/// The run, step by step.
pub fn run(
    mut args: RunArgs,
    start: Instant,
    json: bool,
) -> Result<u8, Box<dyn std::error::Error>> {
    // 1. Nothing inherited (but a --listen socket the caller bound for
    // us), and outputs that can be written.
    let mut inherited_listener = crate::run::inbound::adopt(args.vm.listen_fd)?;
    let keep = inherited_listener.as_ref().map(|fd| fd.as_raw_fd());
    if let Err(e) = vmm::host_seccomp::close_inherited_fds_except(keep) {
        log::warn!("cannot close inherited file descriptors: {e}");
    }
    check_writable(args.timings.as_deref())?;
    if let Some(dir) = &args.snapshot_to {
        // Refused now, not after a boot: only a new directory or an older
        // snapshot is written to.
        vmm::snapshot::check_target(dir)?;
    }
    if let Some(fc) = &args.peer_firecracker {
        // A benchmark peer: the same plan under Firecracker (signals keep
        // their default action; Firecracker dies with us).
        let (Some(plan), ..) = plan_or_snapshot(&args)? else {
            unreachable!("the parser refuses --peer-firecracker with --from-snapshot");
        };
        let fc = crate::run::peer::check(fc)?;
        let timeout = args.vm.timeout.map(Duration::from_secs);
        let console = args.vm.console.as_deref();
        return Ok(crate::run::peer::run(
            plan,
            &fc,
            console,
            timeout,
            args.vm.seccomp,
            start,
        )?);
    }
    let caught = vmm::signals::catch(args.snapshot_to.is_some()).map_err(vmm::VmmError::Signals)?;

    // 2. The plan: what the VM is and what runs in it, and the snapshot
    //    it comes from (3. a warm start's, taken now if there is none).
    let (mut plan, mut restore_from, snapshot_disks) = plan_or_snapshot(&args)?;

    // 4. The files the run writes, opened while the host's paths can be
    //    named; then the jail (while this process still has one thread).
    let console: Box<dyn Write + Send> = match &args.vm.console {
        Some(path) => Box::new(create(path)?),
        None => Box::new(io::sink()),
    };
    let events_file = args.events.as_deref().map(create).transpose()?;
    // (A jailed run could not name the timings file when it ends: it is
    // made now and filled then.)
    let timings_file = args.timings.as_deref().map(create).transpose()?;
    // The egress proxy, outside the jail: the guest's network, when the
    // plan gives it one (docs/network.md).
    let egress = match plan.as_ref().and_then(|p| p.network.as_ref()) {
        Some(policy) => Some(
            crate::egress::process::Egress::spawn(policy, args.vm.seccomp)
                .map_err(RunError::Egress)?,
        ),
        None => None,
    };
    // --listen: bound now, in the host's network namespace (or handed
    // to us bound), with the gate every connection passes.
    let inbound = match args.vm.listen {
        Some(addr) => Some(crate::run::inbound::bind(addr, inherited_listener.take())?),
        None => None,
    };
    let from_snapshot = args.from_snapshot.is_some();
    let mut disks: Vec<vmm::DiskConfig> = match from_snapshot {
        true => args.vm.disks.iter().map(|d| d.config.clone()).collect(),
        false => Vec::new(),
    };
    let jail = crate::run::jail::enter(
        args.vm.jail,
        crate::run::jail::RunPaths {
            plan: plan.as_mut(),
            restore_from: restore_from.as_mut(),
            disks: &mut disks,
            snapshot_disks: &snapshot_disks,
            snapshot_to: args.snapshot_to.as_mut(),
            workspace: args
                .vm
                .workspace
                .as_mut()
                .map(|w| (&mut w.path, w.writable)),
        },
    )?;

    // 5. The channels, where the guest's connections arrive.
    let dir = RunDir::create().map_err(RunError::RunDir)?;
    let mut channels = HostChannels::open(dir.path(), args.vm.workspace.is_some())?;
    if let Some(egress) = &egress {
        let path = channels
            .vsock()
            .port_path(mcpvm_protocol::ports::EGRESS_PORT);
        let listener = std::os::unix::net::UnixListener::bind(&path)
            .map_err(|source| RunError::Listen { path, source })?;
        egress
            .hand_over(
                listener,
                events_file.as_ref(),
                start.elapsed().as_secs_f64() * 1000.0,
            )
            .map_err(RunError::Egress)?;
    }
    let transfer = match (&args.vm.workspace, channels.take_workspace()) {
        (Some(ws), Some(listener)) => Some(crate::workspace::serve(
            listener,
            ws.clone(),
            args.vm.workspace_limit << 20,
            args.vm.seccomp,
        )),
        _ => None,
    };

    // 6. The VM.
    let first = match (&restore_from, &plan) {
        (None, Some(plan)) => FirstLine::Spec(plan.spec.clone()),
        _ => FirstLine::Resume,
    };
    let channels_uds = channels.vsock().uds_path;
    let mut config = vm_config(&args, plan, restore_from, channels.vsock(), console, start);
    if from_snapshot {
        config.disks = disks;
    }
    let vm = VmHandle::build(config)?;

    // 7. The relays, then the VM runs until it ends.
    let answer = template::Answer::default();
    let stdio = match args.snapshot_to {
        Some(_) => Stdio::Template(answer.clone()),
        None => Stdio::Relay,
    };
    let mut sink = EventSink::new(start, events_file, Some(vm.control()));
    sink.host(&jail);
    let relays = channels.serve(first, stdio, sink, args.vm.seccomp)?;
    if let Some((listener, gate)) = inbound {
        crate::run::inbound::serve(listener, channels_uds, gate, args.vm.seccomp);
    }
    let _forwarding = caught.forward_to(&vm)?;
    let outcome = vm.wait()?;
    relays.drain(Instant::now() + RELAY_DRAIN);
    drop(egress);

    // 8. What the run leaves: the workspace back, the snapshot's
    //    `initialize` answer, the timings, the exit status.
    if let Some(t) = transfer {
        match t.finish() {
            Some(Ok(Some(back))) if back.refused.is_empty() => {
                log::info!("workspace: the guest's copy is back in place ({back})")
            }
            Some(Ok(Some(back))) => eprintln!("mcpvm: workspace: {back}"),
            Some(Ok(None)) | None => {}
            // The server's status stays ours; the workspace problem is said.
            Some(Err(e)) => eprintln!("mcpvm: {}", crate::error_chain(&e)),
        }
    }
    if let Some(dir) = &args.snapshot_to {
        keep_initialize_answer(dir, &outcome.reason, &answer)?;
    }
    if let (Some(path), Some(file)) = (&args.timings, timings_file) {
        write_timings(path, file, &outcome, &relays)?;
    }
    Ok(report(&outcome.reason, json))
}

/// Says how the VM ended (when it was not the server's own exit) and
/// returns the exit status.
fn report(reason: &vmm::ExitReason, json: bool) -> u8 {
    log::debug!("{reason} (exit code {})", reason.exit_code());
    if json {
        eprintln!(
            "{}",
            serde_json::json!({"exit": reason.kind(), "code": reason.exit_code()})
        );
    }
    if !matches!(reason, vmm::ExitReason::PowerOff(_)) {
        eprintln!("mcpvm: {reason}");
    }
    reason.exit_code().clamp(0, 255) as u8
}

/// The plan of a booting run, and the snapshot a restored one comes from
/// (`--from-snapshot`, or `--warm`'s, taken now if there is none), with
/// the read-only disks a `--from-snapshot` restore opens by itself.
#[allow(clippy::type_complexity)]
fn plan_or_snapshot(
    args: &RunArgs,
) -> Result<(Option<RunPlan>, Option<PathBuf>, Vec<PathBuf>), Box<dyn std::error::Error>> {
    if let Some(dir) = &args.from_snapshot {
        // A bad snapshot is one clear error before anything exists.
        let loaded = vmm::snapshot::read(dir)?;
        // Unnamed by --disk, they may only be read-only (the restore
        // checks), and the jail holds them so; and only images of the
        // kind mcpvm's runs use (EROFS): a snapshot is a file people pass
        // around, and one that names ~/.ssh/id_rsa would hand it to its
        // guest.
        let disks = match args.vm.disks.is_empty() {
            true => loaded.body.disks(),
            false => Vec::new(),
        };
        only_images(dir, &disks)?;
        let read_only = disks.into_iter().filter(|(_, ro)| *ro).map(|(p, _)| p);
        return Ok((None, Some(dir.clone()), read_only.collect()));
    }
    let checked = args.vm.check(!args.command.is_empty())?;
    let plan = RunPlan::resolve(
        &args.vm,
        &checked,
        args.command.clone(),
        args.snapshot_to.is_some(),
    )?;
    let warm = match args.warm {
        true => Some(warm_snapshot(args, &plan, checked.server.is_some())?),
        false => None,
    };
    Ok((Some(plan), warm, Vec::new()))
}

/// A snapshot restored without --disk may name as disks only EROFS
/// images, the kind mcpvm's runs use.
fn only_images(dir: &Path, disks: &[(PathBuf, bool)]) -> Result<(), String> {
    for (path, _) in disks {
        crate::image::check_root_image(path).map_err(|e| {
            format!(
                "Snapshot {} names {} as a disk, which is not an image mcpvm built ({}); \
                 a snapshot alone opens only EROFS images: name its disks with --disk PATH \
                 to restore it",
                dir.display(),
                path.display(),
                crate::error_chain(&e)
            )
        })?;
    }
    Ok(())
}

/// The VM of a plan, or of the snapshot it is restored from.
fn vm_config(
    args: &RunArgs,
    plan: Option<RunPlan>,
    restore_from: Option<PathBuf>,
    vsock: vmm::VsockConfig,
    console: Box<dyn Write + Send>,
    start: Instant,
) -> VmConfig {
    let mut config = VmConfig {
        kernel: PathBuf::new(),
        initrd: None,
        cmdline: String::new(),
        mem_mib: 0,
        vcpus: 0,
        console: Some(console),
        timeout: args.vm.timeout.map(Duration::from_secs),
        allow_pvm: args.vm.allow_pvm,
        start,
        vsock: Some(vsock),
        disks: Vec::new(),
        rng: false,
        seccomp: args.vm.seccomp,
        snapshot: vmm::SnapshotConfig {
            save_to: args.snapshot_to.clone(),
            restore_from: restore_from.clone(),
        },
        tsc_deadline: true,
    };
    match (plan, restore_from) {
        // Booted: everything from the plan.
        (Some(p), None) => {
            config.kernel = p.kernel;
            config.initrd = Some(p.initrd);
            config.cmdline = p.cmdline;
            config.mem_mib = p.mem_mib;
            config.vcpus = p.vcpus;
            config.disks = p.disks;
            config.rng = p.rng;
        }
        // Restored: kernel, memory and devices come from the snapshot, but
        // its disks must be the ones named here (the plan's for a warm
        // start, the --disk options for --from-snapshot), or read-only.
        (Some(p), Some(_)) => config.disks = p.disks,
        (None, _) => config.disks = args.vm.disks.iter().map(|d| d.config.clone()).collect(),
    }
    config
}

/// The warm snapshot of `plan`: from the cache, or taken by a child
/// `mcpvm run --snapshot-to` of the same options.
fn warm_snapshot(args: &RunArgs, plan: &RunPlan, catalogued: bool) -> Result<PathBuf, RunError> {
    let inputs = crate::warm::Inputs::of(plan).map_err(RunError::Warm)?;
    let cache = args
        .snapshots
        .clone()
        .unwrap_or_else(crate::warm::default_dir);
    crate::warm::find_or_take(&cache, &inputs, |dir| {
        let take = RunArgs {
            vm: args.vm.clone(),
            snapshot_to: Some(dir.to_path_buf()),
            // A catalogued server's command comes from the catalogue; a
            // package's server takes only the arguments given to it.
            command: match (catalogued, args.vm.package.is_some()) {
                (true, true) => args.command.clone(),
                (true, false) => Vec::new(),
                (false, _) => plan.spec.argv.clone(),
            },
            ..RunArgs::default()
        };
        let exe = crate::exe::vm().map_err(RunError::Warm)?;
        let status = std::process::Command::new(exe)
            .arg("run")
            .args(take.to_args())
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .status()
            .map_err(RunError::Warm)?;
        match status.success() {
            true => Ok(()),
            false => Err(RunError::WarmTake { status }),
        }
    })
}

/// A file the run writes after the VM ends must be writable now, not
/// found wanting after the run.
fn check_writable(path: Option<&Path>) -> Result<(), RunError> {
    let Some(path) = path else { return Ok(()) };
    let dir = path.parent().filter(|d| !d.as_os_str().is_empty());
    if dir.is_some_and(|d| !d.is_dir()) {
        return Err(RunError::File {
            path: path.to_path_buf(),
            source: io::Error::new(io::ErrorKind::NotFound, "its directory does not exist"),
        });
    }
    Ok(())
}

fn create(path: &Path) -> Result<File, RunError> {
    File::create(path).map_err(|source| RunError::File {
        path: path.to_path_buf(),
        source,
    })
}

/// After a snapshot run: the server's answer to the template
/// `initialize`, beside the snapshot, for the person (and cache) using it.
fn keep_initialize_answer(
    dir: &Path,
    reason: &vmm::ExitReason,
    answer: &template::Answer,
) -> Result<(), RunError> {
    if !matches!(reason, vmm::ExitReason::Snapshot(_)) {
        return Err(RunError::NoSnapshot {
            dir: dir.to_path_buf(),
            why: reason.to_string(),
        });
    }
    let said = answer.lock().unwrap_or_else(|e| e.into_inner()).clone();
    if let Some(line) = said {
        crate::warm::write_private(&dir.join(INITIALIZE_FILE), line.as_bytes())?;
    }
    Ok(())
}

/// The VMM's phases and when each kind of agent event first came, as one
/// JSON object (ms since start).
fn write_timings(
    path: &Path,
    mut file: File,
    outcome: &vmm::RunOutcome,
    relays: &Relays,
) -> Result<(), RunError> {
    let t = &outcome.timings;
    let ms = |d: Option<Duration>| d.map(|d| d.as_secs_f64() * 1000.0);
    let mut all: serde_json::Map<String, serde_json::Value> = relays
        .first_seen
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .iter()
        .map(|(k, v)| (k.clone(), serde_json::json!(v)))
        .collect();
    for (k, v) in [
        ("kvm_ready", t.kvm_ready),
        ("kernel_entry", t.kernel_entry),
        ("boot_timer", t.boot_timer),
        ("exit", t.exit),
    ] {
        all.insert(k.into(), serde_json::json!(ms(v)));
    }
    // Every exit that reached the VMM over the whole run (the boot's and
    // every MMIO access after it, such as an interrupt's status read).
    let exits: u64 = outcome.exits.iter().map(|e| e.count).sum();
    all.insert("exits_to_vmm".into(), serde_json::json!(exits));
    file.write_all(serde_json::Value::Object(all).to_string().as_bytes())
        .map_err(|source| RunError::File {
            path: path.to_path_buf(),
            source,
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A snapshot is a file people pass around: alone, it may open only
    /// EROFS images as its disks, never a host file such as a key.
    #[test]
    fn a_snapshot_alone_opens_only_images() {
        let d = tempfile::tempdir().unwrap();
        let image = d.path().join("layer.erofs");
        let mut bytes = vec![0u8; 2048];
        bytes[1024..1028].copy_from_slice(&0xE0F5_E1E2u32.to_le_bytes());
        std::fs::write(&image, &bytes).unwrap();
        let key = d.path().join("id_ed25519");
        std::fs::write(&key, "-----BEGIN OPENSSH PRIVATE KEY-----").unwrap();
        let snap = d.path().join("snap");
        assert!(only_images(&snap, &[(image.clone(), true)]).is_ok());
        let e = only_images(&snap, &[(image, true), (key.clone(), true)]).unwrap_err();
        assert!(
            e.contains(&key.display().to_string()) && e.contains("--disk PATH"),
            "{e}"
        );
    }

    use clap::Parser;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        run: RunArgs,
    }

    #[test]
    fn run_arguments_survive_the_trip() {
        let cases = [
            RunArgs {
                vm: VmOptions {
                    mem: Some(512),
                    env: vec![("K".into(), None)],
                    ..VmOptions::default()
                },
                timings: Some("t.json".into()),
                events: Some("e.jsonl".into()),
                warm: true,
                snapshots: Some("cache".into()),
                command: vec!["/bin/server".into(), "--flag".into(), "-- x".into()],
                ..RunArgs::default()
            },
            RunArgs {
                snapshot_to: Some("snap".into()),
                command: vec!["/bin/mcp-fixture".into()],
                ..RunArgs::default()
            },
            RunArgs {
                from_snapshot: Some("snap".into()),
                ..RunArgs::default()
            },
            RunArgs {
                peer_firecracker: Some("/peers/firecracker".into()),
                command: vec!["/bin/mcp-fixture".into()],
                ..RunArgs::default()
            },
        ];
        for args in cases {
            let argv = std::iter::once("mcpvm".to_string()).chain(args.to_args());
            let back = Cli::try_parse_from(argv)
                .unwrap_or_else(|e| panic!("{:?}: {e}", args.to_args()))
                .run;
            assert_eq!(back, args);
        }
    }
}

//! `mcpvm run -- <command> [args…]`: a drop-in stdio MCP server that runs
//! the command in its own microVM. Our stdin goes to the server's stdin,
//! its stdout to our stdout, byte for byte; its stderr to our stderr; its
//! exit status becomes ours.
//!
//! The guest agent connects to three vsock ports (see
//! `guest_agent::channels`); the VMM turns them into connections to Unix
//! sockets in a per-run directory, where this command listens.

use std::fs::File;
use std::io::{self, BufRead, BufReader, Read, Write};
use std::os::unix::net::UnixListener;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use clap::Args;
use guest_agent::channels::{
    Event, HostMessage, RunSpec, Workspace, CONTROL_PORT, STDERR_PORT, STDIO_PORT, WORKSPACE_PORT,
};
use vmm::{VmConfig, VsockConfig};

use crate::disk_arg::{parse_disk, DiskArg};
use crate::rundir::RunDir;
use crate::server::ServerPlan;
use crate::withholding::profile::Profile;
use crate::withholding::Profiles;
use crate::workspace::{parse_workspace, WorkspaceArg};

const GUEST_CID: u64 = 3;

/// How the microVM is set up: shared by `run` and `probe --vm`.
#[derive(Args, Clone, Default)]
pub struct VmOptions {
    /// Guest kernel (default: the one `scripts/build` made, next to this binary).
    #[arg(long, env = "MCPVM_KERNEL")]
    kernel: Option<PathBuf>,
    /// Guest initramfs holding the agent and the server.
    #[arg(long, env = "MCPVM_INITRD")]
    initrd: Option<PathBuf>,
    /// Guest memory in MiB [default: 256].
    #[arg(long)]
    mem: Option<u64>,
    /// vCPUs [default: 1].
    #[arg(long)]
    vcpus: Option<u8>,
    /// Working directory of the server inside the guest.
    #[arg(long)]
    cwd: Option<String>,
    /// Environment for the server, KEY=VALUE (repeatable).
    #[arg(long = "env", value_parser = parse_env)]
    env: Vec<(String, String)>,
    /// Write the guest console (kernel and agent messages) to this file.
    #[arg(long)]
    console: Option<PathBuf>,
    /// Stop the VM after this many seconds.
    #[arg(long)]
    timeout: Option<u64>,
    /// Accept a kvm_pvm-backed /dev/kvm.
    #[arg(long)]
    allow_pvm: bool,
    /// A disk image: PATH[,rw][,cache=page|direct][,id=NAME]; read-only
    /// unless rw. Repeatable: /dev/vda, /dev/vdb, … in order.
    #[arg(long = "disk", value_parser = parse_disk)]
    disks: Vec<DiskArg>,
    /// Root filesystem image (EROFS, from guest-image/rootfs/build): the
    /// guest runs the server in it, read-only with a tmpfs overlay on top.
    #[arg(long)]
    image: Option<PathBuf>,
    /// No overlay on the root: it stays read-only.
    #[arg(long)]
    read_only_root: bool,
    /// Run a catalogued server (its image from `mcpvm image build`)
    /// instead of a command.
    #[arg(long, conflicts_with = "image")]
    server: Option<String>,
    /// Server catalogue (TOML) for --server [default: the built-in one].
    #[arg(long, requires = "server")]
    catalogue: Option<PathBuf>,
    /// The image store for --server [default: ~/.cache/mcpvm/images].
    #[arg(long, requires = "server")]
    images: Option<PathBuf>,
    /// A host directory at /workspace in the guest: DIR (read-only: the
    /// guest's changes are dropped) or DIR,rw (its copy comes back).
    #[arg(long, value_parser = parse_workspace)]
    workspace: Option<WorkspaceArg>,
    /// Withholding profile: a name, or several joined by '+'
    /// (docs/withholding.md). --mem and --vcpus, when given, win over it.
    #[arg(long)]
    profile: Option<String>,
    /// Profiles file (TOML) adding to the built-in profiles.
    #[arg(long, requires = "profile")]
    profiles: Option<PathBuf>,
    /// Withhold the virtio-rng entropy device.
    #[arg(long)]
    no_rng: bool,
    /// Host seccomp filters on the VMM's threads (docs/security.md): on
    /// stops the VMM at a call outside a thread's list, log lets it
    /// through and the kernel logs it, off installs none.
    #[arg(long, default_value = "on", value_name = "off|log|on")]
    seccomp: vmm::SeccompMode,
    /// Largest workspace the guest may send back, MiB.
    #[arg(long, default_value_t = 1024)]
    workspace_limit: u64,
}

/// What `VmOptions::check` resolved.
pub struct Checked {
    pub profile: Option<Profile>,
    pub server: Option<ServerPlan>,
    pub root_image: Option<PathBuf>,
}

impl VmOptions {
    /// Resolves and checks the profile, server, images and workspace
    /// before anything is created, so that bad input is one clear error
    /// that leaves nothing behind (`run`, and `probe` before it spawns
    /// `mcpvm run`). `has_command`: a guest command was given too.
    pub fn check(&self, has_command: bool) -> Result<Checked, Box<dyn std::error::Error>> {
        let profile = match &self.profile {
            Some(spec) => Some(Profiles::from_option(self.profiles.as_deref())?.resolve(spec)?),
            None => None,
        };
        let server = match &self.server {
            Some(name) if !has_command => {
                Some(crate::server::plan(name, &self.catalogue, &self.images)?)
            }
            Some(_) => return Err(crate::server::ServerError::Both.into()),
            None => None,
        };
        let root_image = server
            .as_ref()
            .map(|s| s.runtime.clone())
            .or(self.image.clone());
        if self.read_only_root && root_image.is_none() {
            return Err("--read-only-root needs --image or --server".into());
        }
        if let Some(img) = &root_image {
            crate::image::check_root_image(img)?;
        }
        if let Some(s) = &server {
            crate::image::check_root_image(&s.layer)?;
        }
        if let Some(ws) = &self.workspace {
            crate::workspace::check(ws)?;
        }
        Ok(Checked {
            profile,
            server,
            root_image,
        })
    }

    /// The catalogued server asked for, if any.
    pub fn server(&self) -> Option<&str> {
        self.server.as_deref()
    }

    /// The same options as `mcpvm run` arguments.
    pub fn to_run_args(&self) -> Vec<String> {
        let mut a = Vec::new();
        let mut opt = |name: &str, v: Option<String>| {
            if let Some(v) = v {
                a.push(format!("--{name}={v}"));
            }
        };
        opt(
            "kernel",
            self.kernel.as_ref().map(|p| p.display().to_string()),
        );
        opt(
            "initrd",
            self.initrd.as_ref().map(|p| p.display().to_string()),
        );
        opt("mem", self.mem.map(|m| m.to_string()));
        opt("vcpus", self.vcpus.map(|v| v.to_string()));
        opt("cwd", self.cwd.clone());
        opt(
            "console",
            self.console.as_ref().map(|p| p.display().to_string()),
        );
        opt("timeout", self.timeout.map(|t| t.to_string()));
        opt(
            "image",
            self.image.as_ref().map(|p| p.display().to_string()),
        );
        for (k, v) in &self.env {
            a.push(format!("--env={k}={v}"));
        }
        if self.allow_pvm {
            a.push("--allow-pvm".into());
        }
        for d in &self.disks {
            a.push(format!("--disk={}", d.text));
        }
        if self.read_only_root {
            a.push("--read-only-root".into());
        }
        if self.no_rng {
            a.push("--no-rng".into());
        }
        a.push(format!("--seccomp={}", self.seccomp.as_str()));
        a.push(format!("--workspace-limit={}", self.workspace_limit));
        for (name, v) in [
            ("workspace", self.workspace.as_ref().map(|w| w.text.clone())),
            ("server", self.server.clone()),
            (
                "catalogue",
                self.catalogue.as_ref().map(|p| p.display().to_string()),
            ),
            (
                "images",
                self.images.as_ref().map(|p| p.display().to_string()),
            ),
            ("profile", self.profile.clone()),
            (
                "profiles",
                self.profiles.as_ref().map(|p| p.display().to_string()),
            ),
        ] {
            if let Some(v) = v {
                a.push(format!("--{name}={v}"));
            }
        }
        a
    }
}

#[derive(Args)]
pub struct RunArgs {
    #[command(flatten)]
    vm: VmOptions,
    /// Write the run's phase times (ms since start) to this JSON file.
    #[arg(long)]
    timings: Option<PathBuf>,
    /// Write the guest agent's events (JSON lines, each with `at_ms`):
    /// spawn, first output, OOM, denied and used system calls, exit.
    #[arg(long)]
    events: Option<PathBuf>,
    /// Once the server has answered an `initialize` from mcpvm itself,
    /// pause the VM and write it to this snapshot directory
    /// (docs/snapshots.md), then exit 0; `--from-snapshot DIR` starts it.
    #[arg(long, value_name = "DIR", conflicts_with = "workspace")]
    snapshot_to: Option<PathBuf>,
    /// Start the server from a snapshot `--snapshot-to` wrote, instead of
    /// booting and starting it: the VM, its devices and the server come
    /// from the snapshot.
    #[arg(long, value_name = "DIR", conflicts_with_all = [
        "command", "snapshot_to", "kernel", "initrd", "mem", "vcpus", "cwd", "env",
        "disks", "image", "read_only_root", "server", "workspace", "profile", "no_rng",
    ])]
    from_snapshot: Option<PathBuf>,
    /// Start the server from the warm-start cache: restored from a
    /// snapshot of the same VM and server taken after `initialize`, taken
    /// now (one cold start) if there is none yet (docs/snapshots.md).
    #[arg(long, conflicts_with_all = ["snapshot_to", "from_snapshot", "workspace"])]
    warm: bool,
    /// The warm-start cache [default: ~/.cache/mcpvm/snapshots].
    #[arg(long, value_name = "DIR", requires = "warm")]
    snapshots: Option<PathBuf>,
    /// The server command and its arguments, as seen inside the guest.
    #[arg(last = true, required_unless_present_any = ["server", "from_snapshot"])]
    command: Vec<String>,
}

/// The ids of the `initialize` and `ping` mcpvm sends before a snapshot.
const TEMPLATE_ID: &str = "mcpvm-snapshot";
const TEMPLATE_PING_ID: &str = "mcpvm-snapshot-ping";

fn parse_env(s: &str) -> Result<(String, String), String> {
    match s.split_once('=') {
        Some((k, v)) if !k.is_empty() => Ok((k.to_string(), v.to_string())),
        _ => Err(format!("'{s}' is not KEY=VALUE")),
    }
}

#[derive(Debug, thiserror::Error)]
pub enum RunError {
    #[error("No guest {what} given and none found at {path}; pass --{what} or run scripts/build")]
    NoArtifact { what: &'static str, path: PathBuf },
    #[error("Cannot create the run directory")]
    RunDir(#[source] io::Error),
    #[error("Cannot listen on {path}")]
    Listen {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("Cannot write {path}")]
    File {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error(transparent)]
    Vmm(#[from] vmm::VmmError),
    #[error(transparent)]
    Snapshot(#[from] vmm::snapshot::SnapshotError),
    #[error("No snapshot written to {dir}: the VM ended first ({why}); see --console for what the server did")]
    NoSnapshot { dir: PathBuf, why: String },
    #[error("Cannot key the warm-start cache on the VM's files")]
    Warm(#[source] io::Error),
    #[error("Cannot take the warm snapshot ({status}); the messages above say why")]
    WarmTake { status: std::process::ExitStatus },
}

/// Beside a snapshot `run --snapshot-to` wrote: the server's answer to
/// the template `initialize`.
pub const INITIALIZE_FILE: &str = "initialize.json";

/// `<dir of this binary>/../<rel>`: where scripts/build puts artifacts.
pub fn default_artifact(
    what: &'static str,
    given: Option<PathBuf>,
    rel: &str,
) -> Result<PathBuf, RunError> {
    if let Some(p) = given {
        return Ok(p);
    }
    let exe = std::env::current_exe().unwrap_or_default();
    let path = exe
        .parent()
        .and_then(Path::parent)
        .map(|d| d.join(rel))
        .unwrap_or_default();
    if path.exists() {
        Ok(path)
    } else {
        Err(RunError::NoArtifact { what, path })
    }
}

fn listen(dir: &Path, port: u32) -> Result<UnixListener, RunError> {
    let path = dir.join(format!("vsock.sock_{port}"));
    UnixListener::bind(&path).map_err(|source| RunError::Listen { path, source })
}

fn copy(mut from: impl Read, mut to: impl Write) {
    let mut buf = vec![0u8; 64 * 1024];
    while let Ok(n) = from.read(&mut buf) {
        if n == 0 || to.write_all(&buf[..n]).is_err() || to.flush().is_err() {
            break;
        }
    }
}

pub fn run(args: RunArgs, start: Instant, json: bool) -> Result<u8, Box<dyn std::error::Error>> {
    if let Err(e) = vmm::seccomp::close_inherited_fds() {
        log::warn!("cannot close inherited file descriptors: {e}");
    }
    let RunArgs {
        vm: opts,
        timings,
        events,
        snapshot_to,
        from_snapshot,
        warm,
        snapshots,
        command,
    } = args;
    let Checked {
        profile,
        server,
        root_image,
    } = match &from_snapshot {
        // Everything the server had is in the snapshot.
        Some(_) => Checked {
            profile: None,
            server: None,
            root_image: None,
        },
        None => opts.check(!command.is_empty())?,
    };
    let (command, mut env) = match &server {
        Some(s) => (s.argv.clone(), s.env.clone()),
        None => (command, Vec::new()),
    };
    if let Some(p) = &profile {
        if p.clear_env {
            env.clear();
        }
        env.extend(p.env.iter().map(|(k, v)| (k.clone(), v.clone())));
    }
    env.extend(opts.env.iter().cloned());
    // Written after the VM ends: a path that cannot be written must fail
    // now, not after the run.
    if let Some(path) = &timings {
        let dir = path.parent().filter(|d| !d.as_os_str().is_empty());
        if dir.is_some_and(|d| !d.is_dir()) {
            return Err(RunError::File {
                path: path.clone(),
                source: io::Error::new(io::ErrorKind::NotFound, "its directory does not exist"),
            }
            .into());
        }
    }
    let (kernel, initrd) = match &from_snapshot {
        Some(dir) => {
            vmm::snapshot::read(dir)?;
            (PathBuf::new(), PathBuf::new())
        }
        None => (
            default_artifact("kernel", opts.kernel.clone(), "kernel/vmlinux")?,
            default_artifact("initrd", opts.initrd.clone(), "initramfs-test.cpio")?,
        ),
    };
    // The root image is the first disk (/dev/vda), then the user's.
    let mut cmdline = String::from("quiet mcpvm.channel=vsock");
    let mut disks = Vec::new();
    let read_only = |path: &PathBuf, id: &str| vmm::DiskConfig {
        path: path.clone(),
        read_only: true,
        cache: vmm::CacheMode::Page,
        id: id.into(),
    };
    if let Some(img) = &root_image {
        cmdline += " mcpvm.root=/dev/vda";
        if opts.read_only_root {
            cmdline += " mcpvm.overlay=none";
        }
        disks.push(read_only(img, "mcpvm-root"));
    }
    if let Some(s) = &server {
        cmdline += " mcpvm.layers=/dev/vdb";
        disks.push(read_only(&s.layer, "mcpvm-layer"));
    }
    disks.extend(opts.disks.iter().map(|d| d.config.clone()));
    let spec = RunSpec {
        argv: command,
        env,
        cwd: opts.cwd.clone(),
        workspace: opts.workspace.as_ref().map(|w| Workspace {
            writable: w.writable,
        }),
        setup: server.as_ref().and_then(|s| s.setup.clone()),
        policy: profile
            .as_ref()
            .map(|p| p.policy.clone())
            .unwrap_or_default(),
        snapshot: snapshot_to.is_some(),
    };
    let mem_mib = opts
        .mem
        .or(profile.as_ref().map(|p| p.mem_mib))
        .unwrap_or(256);
    let vcpus = opts
        .vcpus
        .or(profile.as_ref().map(|p| p.vcpus))
        .unwrap_or(1);
    let rng = !opts.no_rng && profile.as_ref().is_none_or(|p| p.rng);
    let mut from_snapshot = from_snapshot;
    if warm {
        let mut taken = spec.clone();
        taken.snapshot = true;
        let mut files = vec![&kernel, &initrd];
        files.extend(disks.iter().map(|d| &d.path));
        let inputs = crate::warm::Inputs {
            mcpvm: env!("CARGO_PKG_VERSION"),
            snapshot_format: vmm::snapshot::VERSION,
            files: files
                .into_iter()
                .map(|f| crate::warm::FileId::of(f))
                .collect::<Result<_, _>>()
                .map_err(RunError::Warm)?,
            mem_mib,
            vcpus,
            rng,
            cmdline: cmdline.clone(),
            spec: serde_json::to_value(&taken)?,
        };
        let cache = snapshots.unwrap_or_else(crate::warm::default_dir);
        from_snapshot = Some(warm_snapshot(
            &cache,
            &inputs,
            &opts,
            &spec.argv,
            server.is_some(),
        )?);
    }
    let dir = RunDir::create().map_err(RunError::RunDir)?;
    let control = listen(dir.path(), CONTROL_PORT)?;
    let stdio = listen(dir.path(), STDIO_PORT)?;
    let stderr = listen(dir.path(), STDERR_PORT)?;
    let transfer = match &opts.workspace {
        Some(ws) => Some(crate::workspace::serve(
            listen(dir.path(), WORKSPACE_PORT)?,
            ws.clone(),
            opts.workspace_limit << 20,
            opts.seccomp,
        )),
        None => None,
    };
    let console: Box<dyn Write + Send> = match &opts.console {
        Some(path) => Box::new(File::create(path).map_err(|source| RunError::File {
            path: path.clone(),
            source,
        })?),
        None => Box::new(io::sink()),
    };
    let events_file = match &events {
        Some(path) => Some(File::create(path).map_err(|source| RunError::File {
            path: path.clone(),
            source,
        })?),
        None => None,
    };

    // The host side of each channel, on its own thread: accept blocks until
    // the agent connects, and the VM may end before it does.
    // A booting VM's agent gets the run spec first; a restored one, what
    // must change after a restore (made when it connects).
    let first = match &from_snapshot {
        Some(_) => FirstLine::Resume,
        None => FirstLine::Spec(serde_json::to_string(&spec)? + "\n"),
    };
    let agent_times = Arc::new(std::sync::Mutex::new(serde_json::Map::new()));
    let times = agent_times.clone();
    let (confined_tx, confined) = std::sync::mpsc::channel();
    let relay = |body: Box<dyn FnOnce(&AtomicBool) + Send>| {
        spawn_relay(opts.seccomp, confined_tx.clone(), body)
    };
    // Before a snapshot, the template client's answer goes to the agent
    // on CONTROL: the control relay hands its stream over.
    let (control_tx, control_rx) = std::sync::mpsc::channel::<std::os::unix::net::UnixStream>();
    let control_relay = relay(Box::new(move |connected| {
        control_channel(
            control,
            connected,
            first,
            control_tx,
            start,
            times,
            events_file,
        )
    }));
    // Our stdin → server stdin on a relay of its own, started here and
    // handed the stream once the agent connects: a thread started by a
    // confined one would carry that one's filter, not its own.
    let (to_guest_tx, to_guest_rx) = std::sync::mpsc::channel::<std::os::unix::net::UnixStream>();
    let template = snapshot_to.is_some();
    let _stdin_relay = relay(Box::new(move |_| {
        if let Ok(mut to_guest) = to_guest_rx.recv() {
            if template {
                // The server is snapshotted ready: initialized once.
                let _ = to_guest.write_all(template_initialize().as_bytes());
                return;
            }
            copy(io::stdin().lock(), &to_guest);
            // EOF closes the server's stdin.
            let _ = to_guest.shutdown(std::net::Shutdown::Write);
        }
    }));
    let answer = Arc::new(std::sync::Mutex::new(None::<String>));
    let answered = answer.clone();
    let stdout_relay = relay(Box::new(move |connected| {
        if let Ok((s, _)) = stdio.accept() {
            connected.store(true, Ordering::SeqCst);
            if let Ok(to_guest) = s.try_clone() {
                let _ = to_guest_tx.send(to_guest);
            }
            if template {
                await_template_answer(&s, &answered, control_rx);
            } else {
                copy(&s, io::stdout().lock());
            }
            // Every byte is here: let the agent finish.
            let _ = s.shutdown(std::net::Shutdown::Both);
        }
    }));
    let stderr_relay = relay(Box::new(move |connected| {
        if let Ok((s, _)) = stderr.accept() {
            connected.store(true, Ordering::SeqCst);
            copy(&s, io::stderr().lock());
            let _ = s.shutdown(std::net::Shutdown::Both);
        }
    }));
    drop(confined_tx);
    if let Some(e) = confined.iter().take(4).find_map(Result::err) {
        return Err(e.into());
    }

    let config = VmConfig {
        kernel,
        initrd: Some(initrd).filter(|_| from_snapshot.is_none()),
        cmdline,
        mem_mib,
        vcpus,
        console: Some(console),
        timeout: opts.timeout.map(Duration::from_secs),
        allow_pvm: opts.allow_pvm,
        start,
        vsock: Some(VsockConfig {
            guest_cid: GUEST_CID,
            uds_path: dir.path().join("vsock.sock"),
        }),
        disks,
        rng,
        seccomp: opts.seccomp,
        snapshot: vmm::SnapshotConfig {
            save_to: snapshot_to.clone(),
            restore_from: from_snapshot.clone(),
        },
    };
    let outcome = vmm::run(config)?;
    // The VM is gone and its sockets closed: a connected relay sees EOF
    // and finishes its copy. One the agent never reached (a run stopped
    // during boot) would wait in accept forever, and is not waited for.
    let until = Instant::now() + RELAY_DRAIN;
    for r in [&stdout_relay, &stderr_relay, &control_relay] {
        r.drain(until);
    }
    if let Some(t) = transfer {
        match t.finish() {
            Some(Ok(true)) => log::info!("workspace: the guest's copy is back in place"),
            Some(Ok(false)) | None => {}
            // The server's status stays ours; the workspace problem is said.
            Some(Err(e)) => eprintln!("mcpvm: {}", crate::error_chain(&e)),
        }
    }
    log::debug!(
        "{} (exit code {})",
        outcome.reason,
        outcome.reason.exit_code()
    );
    if let Some(dir) = &snapshot_to {
        if !matches!(outcome.reason, vmm::ExitReason::Snapshot(_)) {
            return Err(RunError::NoSnapshot {
                dir: dir.clone(),
                why: outcome.reason.to_string(),
            }
            .into());
        }
        // What the server said it is, for the person (and cache) using it.
        let said = answer.lock().unwrap_or_else(|e| e.into_inner()).clone();
        if let Some(line) = said {
            let path = dir.join(INITIALIZE_FILE);
            std::fs::write(&path, line).map_err(|source| RunError::File { path, source })?;
        }
    }
    if let Some(path) = &timings {
        let ms = |d: Option<Duration>| d.map(|d| d.as_secs_f64() * 1000.0);
        let t = &outcome.timings;
        let mut all = agent_times
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        for (k, v) in [
            ("kvm_ready", t.kvm_ready),
            ("kernel_entry", t.kernel_entry),
            ("boot_timer", t.boot_timer),
            ("exit", t.exit),
        ] {
            all.insert(k.into(), serde_json::json!(ms(v)));
        }
        std::fs::write(path, serde_json::Value::Object(all).to_string()).map_err(|source| {
            RunError::File {
                path: path.clone(),
                source,
            }
        })?;
    }
    if json {
        eprintln!(
            "{}",
            serde_json::json!({"exit": outcome.reason.kind(), "code": outcome.reason.exit_code()})
        );
    }
    if !matches!(outcome.reason, vmm::ExitReason::PowerOff(_)) {
        eprintln!("mcpvm: {}", outcome.reason);
    }
    Ok(outcome.reason.exit_code().clamp(0, 255) as u8)
}

/// The warm snapshot for `inputs` in `cache`: found, or taken now by a
/// `mcpvm run --snapshot-to` of the same VM and server (a child process:
/// this one's VMM has yet to run its own VM).
fn warm_snapshot(
    cache: &Path,
    inputs: &crate::warm::Inputs,
    opts: &VmOptions,
    command: &[String],
    catalogued: bool,
) -> Result<PathBuf, Box<dyn std::error::Error>> {
    let key = inputs.key();
    if let Some(dir) = crate::warm::lookup(cache, &key) {
        log::info!("warm start from {}", dir.display());
        return Ok(dir);
    }
    let dir = cache.join(&key);
    eprintln!(
        "mcpvm: no warm snapshot of this server yet; taking one (a cold start) into {}",
        dir.display()
    );
    std::fs::create_dir_all(cache).map_err(|source| RunError::File {
        path: cache.to_path_buf(),
        source,
    })?;
    let mut child = std::process::Command::new(std::env::current_exe()?);
    child
        .arg("run")
        .args(opts.to_run_args())
        .arg(format!("--snapshot-to={}", dir.display()));
    if !catalogued {
        child.arg("--").args(command);
    }
    let status = child
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .status()?;
    if !status.success() {
        return Err(RunError::WarmTake { status }.into());
    }
    let path = dir.join("inputs.json");
    std::fs::write(&path, serde_json::to_string_pretty(&inputs.described())?)
        .map_err(|source| RunError::File { path, source })?;
    Ok(dir)
}

/// How long the relays get, all together, to pass on the last bytes once
/// the VM is gone.
const RELAY_DRAIN: Duration = Duration::from_secs(2);

/// The host side of one channel, on a thread of its own.
struct Relay {
    /// Set by the body once the agent connected.
    connected: Arc<AtomicBool>,
    done: std::sync::mpsc::Receiver<()>,
}

impl Relay {
    /// Waits, at most until `until`, for a connected relay to finish.
    fn drain(&self, until: Instant) {
        if self.connected.load(Ordering::SeqCst) {
            let _ = self
                .done
                .recv_timeout(until.saturating_duration_since(Instant::now()));
        }
    }
}

/// Runs `body` on a relay thread confined to the relay filter; the
/// confinement result goes to `confined`. `body` sets the flag it is
/// given when the agent connects.
fn spawn_relay(
    mode: vmm::SeccompMode,
    confined: std::sync::mpsc::Sender<Result<(), vmm::seccomp::SeccompError>>,
    body: Box<dyn FnOnce(&AtomicBool) + Send>,
) -> Relay {
    let (tx, done) = std::sync::mpsc::channel();
    let connected = Arc::new(AtomicBool::new(false));
    let flag = connected.clone();
    std::thread::spawn(move || {
        let result = vmm::seccomp::confine(vmm::ThreadKind::Relay, mode);
        let ok = result.is_ok();
        let _ = confined.send(result);
        if ok {
            body(&flag);
        }
        let _ = tx.send(());
    });
    Relay { connected, done }
}

/// What the host says first on CONTROL.
enum FirstLine {
    /// The run spec (a booting VM).
    Spec(String),
    /// A [`HostMessage::Resume`], made when the agent connects (a
    /// restored VM).
    Resume,
}

impl FirstLine {
    fn line(self) -> String {
        match self {
            FirstLine::Spec(line) => line,
            FirstLine::Resume => {
                let mut entropy = [0u8; 64];
                let mut random = [0u8; 4];
                fill_random(&mut entropy);
                fill_random(&mut random);
                let hex = |b: &[u8]| b.iter().map(|x| format!("{x:02x}")).collect::<String>();
                let msg = HostMessage::Resume {
                    unix_ns: std::time::SystemTime::now()
                        .duration_since(std::time::UNIX_EPOCH)
                        .map_or(0, |d| d.as_nanos() as u64),
                    entropy: hex(&entropy),
                    hostname: format!("mcpvm-{}", hex(&random)),
                };
                serde_json::to_string(&msg).expect("messages serialize") + "\n"
            }
        }
    }
}

/// Fills `buf` from the kernel's CSPRNG.
fn fill_random(buf: &mut [u8]) {
    let mut got = 0;
    while got < buf.len() {
        // SAFETY: getrandom writes at most the len bytes we pass.
        let n = unsafe { libc::getrandom(buf[got..].as_mut_ptr().cast(), buf.len() - got, 0) };
        if n > 0 {
            got += n as usize;
        } else if io::Error::last_os_error().kind() != io::ErrorKind::Interrupted {
            panic!("getrandom failed: {}", io::Error::last_os_error());
        }
    }
}

/// The `initialize` request of the template client.
fn template_initialize() -> String {
    serde_json::json!({
        "jsonrpc": "2.0",
        "id": TEMPLATE_ID,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-06-18",
            "capabilities": {},
            "clientInfo": {"name": "mcpvm-snapshot", "version": env!("CARGO_PKG_VERSION")},
        },
    })
    .to_string()
        + "\n"
}

/// Reads the server's stdout until it answers the template `initialize`
/// (the answer is kept), completes the handshake (`initialized`), and once
/// a `ping` is answered, the server being idle, asks the agent to get
/// ready for the snapshot. A caller's own `initialize` after a restore is
/// answered by the server's running session, as every MCP SDK does.
/// Anything else the server prints is logged. An error answer (or none)
/// leaves the VM without a snapshot: the server's stdin is closed, and
/// the run says no snapshot was written.
fn await_template_answer(
    s: &std::os::unix::net::UnixStream,
    answer: &std::sync::Mutex<Option<String>>,
    control: std::sync::mpsc::Receiver<std::os::unix::net::UnixStream>,
) {
    for line in BufReader::new(s).lines().map_while(Result::ok) {
        let v: serde_json::Value = serde_json::from_str(&line).unwrap_or_default();
        if v["id"] != TEMPLATE_ID && v["id"] != TEMPLATE_PING_ID {
            log::info!("server said before the snapshot: {line}");
            continue;
        }
        if v.get("result").is_none() {
            eprintln!("mcpvm: the server did not answer the template client, so there is no snapshot: {line}");
            let _ = s.shutdown(std::net::Shutdown::Write);
            continue;
        }
        if v["id"] == TEMPLATE_ID {
            log::info!("server initialized: {line}");
            *answer.lock().unwrap_or_else(|e| e.into_inner()) = Some(line);
            let next = serde_json::json!({"jsonrpc": "2.0", "method": "notifications/initialized"})
                .to_string()
                + "\n"
                + &serde_json::json!({"jsonrpc": "2.0", "id": TEMPLATE_PING_ID, "method": "ping"})
                    .to_string()
                + "\n";
            let _ = (&*s).write_all(next.as_bytes());
            continue;
        }
        if let Ok(mut c) = control.recv() {
            let msg = serde_json::to_string(&HostMessage::Snapshot).expect("messages serialize");
            let _ = c.write_all(format!("{msg}\n").as_bytes());
        }
    }
}

/// Sends the first line, then logs the agent's events as they arrive and
/// notes when each kind first arrived (ms since start). The agent's
/// [`Event::SnapshotReady`] starts the snapshot.
fn control_channel(
    listener: UnixListener,
    connected: &AtomicBool,
    first: FirstLine,
    handover: std::sync::mpsc::Sender<std::os::unix::net::UnixStream>,
    start: Instant,
    times: Arc<std::sync::Mutex<serde_json::Map<String, serde_json::Value>>>,
    mut events_file: Option<File>,
) {
    let Ok((mut s, _)) = listener.accept() else {
        return;
    };
    connected.store(true, Ordering::SeqCst);
    if s.write_all(first.line().as_bytes()).is_err() {
        return;
    }
    if let Ok(c) = s.try_clone() {
        let _ = handover.send(c);
    }
    let reader = BufReader::new(s.try_clone().expect("clone control socket"));
    for line in reader.lines().map_while(Result::ok) {
        let t = start.elapsed().as_secs_f64() * 1000.0;
        match serde_json::from_str::<Event>(&line) {
            Ok(e) => {
                log::debug!("agent event at {t:.3} ms: {e:?}");
                if let Some(f) = &mut events_file {
                    let mut v = serde_json::to_value(&e).unwrap_or_default();
                    v["at_ms"] = serde_json::json!(t);
                    let _ = writeln!(f, "{v}");
                }
                if let Event::Syscalls { denied, .. } = &e {
                    for d in denied {
                        log::info!(
                            "seccomp: {} denied {} times ({})",
                            d.syscall,
                            d.count,
                            d.errno.as_deref().unwrap_or("")
                        );
                    }
                }
                if e == Event::SnapshotReady {
                    vmm::signals::request_snapshot();
                }
                if e == Event::OomKilled {
                    eprintln!("mcpvm: the guest kernel's OOM killer ended a server process; give the VM more memory (--mem)");
                }
                let kind = serde_json::to_value(&e)
                    .ok()
                    .and_then(|v| v["event"].as_str().map(str::to_string));
                if let Some(kind) = kind {
                    times
                        .lock()
                        .unwrap_or_else(|p| p.into_inner())
                        .entry(kind)
                        .or_insert(serde_json::json!(t));
                }
            }
            Err(_) => log::warn!("agent sent an unreadable event: {line}"),
        }
    }
    let _ = s.shutdown(std::net::Shutdown::Both);
}

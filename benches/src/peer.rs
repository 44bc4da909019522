//! Firecracker as the VMM of a run, for benchmarks only (`mcpvm bench
//! peer-run --firecracker PATH RUN-OPTIONS -- COMMAND`, hidden): the same
//! plan, run directory, host channels and relays as `mcpvm run`, with a
//! Firecracker process in place of our VMM, so that `mcpvm bench
//! first-response --firecracker` measures the two VMMs behind one and the
//! same host side. Firecracker is a peer to measure beside, never shipped
//! (../shared/peers/); it lives here, outside the product's run path.
//!
//! It works because Firecracker's hybrid vsock is our protocol: a guest
//! connection to CID 2 port P arrives at `<uds_path>_P`, where
//! [`HostChannels`] listens. What differs, and so what this run lacks:
//! no power port (the agent falls back to a reset, which ends
//! Firecracker: the exit status is Firecracker's, not the server's), no
//! jail, no snapshots, workspace, network or listener ([`boot_plan`]
//! refuses them).

use std::fs::File;
use std::io;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio as ProcStdio};
use std::time::{Duration, Instant};

use mcpvm::commands::run::RunRequest;
use mcpvm::host::rundir::RunDir;
use mcpvm::run::channels::{FirstLine, HostChannels, Stdio, RELAY_DRAIN};
use mcpvm::run::events::EventSink;
use mcpvm::run::plan::RunPlan;
use mcpvm::run::start::Start;
use mcpvm::run::RunError;

#[derive(Debug, thiserror::Error)]
pub enum PeerError {
    #[error(transparent)]
    Run(#[from] RunError),
    #[error("Cannot run the peer VMM {path} (a benchmark peer: see ../shared/peers/)")]
    Start {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("The Firecracker peer boots a plan: it runs without {0}")]
    Unsupported(&'static str),
    #[error("Cannot plan the run")]
    Plan(#[source] mcpvm::run::RunError),
}

/// The plan `args` boot, where the peer can run it: no snapshot taken or
/// restored, no warm start, workspace, network or listener.
pub fn boot_plan(args: &RunRequest) -> Result<RunPlan, PeerError> {
    let refused = [
        (args.snapshot_to.is_some(), "--snapshot-to"),
        (args.from_snapshot.is_some(), "--from-snapshot"),
        (args.warm, "--warm"),
        (args.vm.workspace.is_some(), "--workspace"),
        (!args.vm.allow_net.is_empty(), "--allow-net"),
        (args.vm.listen.is_some(), "--listen"),
    ];
    if let Some((_, flag)) = refused.iter().find(|(given, _)| *given) {
        return Err(PeerError::Unsupported(flag));
    }
    match Start::decide(args).map_err(PeerError::Plan)? {
        Start::Boot(plan) => Ok(plan),
        _ => Err(PeerError::Unsupported("a snapshot")),
    }
}

/// Runs `plan` under the Firecracker binary `firecracker`; returns its
/// exit status (124 when `timeout` passed and it was killed).
pub fn run(
    plan: RunPlan,
    firecracker: &Path,
    console: Option<&Path>,
    timeout: Option<Duration>,
    seccomp: vmm::SeccompMode,
    start: Instant,
) -> Result<u8, PeerError> {
    let dir = RunDir::create().map_err(RunError::RunDir)?;
    let channels = HostChannels::open(dir.path(), false)?;
    let vsock = channels.vsock();
    let config_path = dir.path().join("firecracker.json");
    let config = config(&plan, &vsock.uds_path, console.is_some());
    std::fs::write(&config_path, config.to_string()).map_err(|source| RunError::File {
        path: config_path.clone(),
        source,
    })?;
    // Its serial console goes to its stdout, which is not ours: our stdout
    // is the server's.
    let out = match console {
        Some(path) => ProcStdio::from(File::create(path).map_err(|source| RunError::File {
            path: path.to_path_buf(),
            source,
        })?),
        None => ProcStdio::null(),
    };
    let sink = EventSink::new(start, None, None);
    let relays = channels.serve(FirstLine::Spec(plan.spec), Stdio::Relay, sink, seccomp)?;
    let mut command = Command::new(firecracker);
    command
        .args(["--no-api", "--level", "Error", "--config-file"])
        .arg(&config_path)
        .stdin(ProcStdio::null())
        .stdout(out)
        .stderr(ProcStdio::inherit());
    // SAFETY: prctl is async-signal-safe; it only sets this child's own
    // parent-death signal, so a killed run leaves no VM behind.
    unsafe {
        use std::os::unix::process::CommandExt;
        command.pre_exec(|| {
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) == 0 {
                Ok(())
            } else {
                Err(io::Error::last_os_error())
            }
        });
    }
    let mut child = command.spawn().map_err(|source| PeerError::Start {
        path: firecracker.to_path_buf(),
        source,
    })?;
    let status = wait(&mut child, timeout).map_err(|source| PeerError::Start {
        path: firecracker.to_path_buf(),
        source,
    })?;
    relays.drain(Instant::now() + RELAY_DRAIN);
    Ok(match status {
        None => 124,
        Some(s) => exit_code(s),
    })
}

/// Firecracker's configuration for `plan`: the same kernel, initrd,
/// command line (with what our VMM puts first), memory, vCPUs, disks in
/// guest order (each answering GET_ID with its id, as ours do), entropy
/// device and vsock. Firecracker adds the devices' `virtio_mmio.device=`.
pub fn config(plan: &RunPlan, uds_path: &Path, console: bool) -> serde_json::Value {
    let abs = |p: &Path| {
        std::fs::canonicalize(p)
            .unwrap_or_else(|_| p.to_path_buf())
            .display()
            .to_string()
    };
    let mut boot_args = vmm::cmdline::BASE.to_string();
    if console {
        boot_args += " console=ttyS0";
    }
    boot_args = format!("{boot_args} {}", plan.cmdline.trim());
    let drives: Vec<_> = plan
        .disks
        .iter()
        .map(|d| {
            serde_json::json!({
                "drive_id": d.id,
                "path_on_host": abs(&d.path),
                "is_root_device": false,
                "is_read_only": d.read_only,
            })
        })
        .collect();
    let mut config = serde_json::json!({
        "boot-source": {
            "kernel_image_path": abs(&plan.kernel),
            "initrd_path": abs(&plan.initrd),
            "boot_args": boot_args,
        },
        "drives": drives,
        "machine-config": {"vcpu_count": plan.vcpus, "mem_size_mib": plan.mem_mib},
        "vsock": {"guest_cid": mcpvm_protocol::ports::GUEST_CID, "uds_path": uds_path},
    });
    if plan.rng {
        config["entropy"] = serde_json::json!({});
    }
    config
}

/// Waits for `child`, killing it once `timeout` has passed: None then.
/// The child is reaped only here, so the pid it is killed by is its own.
fn wait(
    child: &mut std::process::Child,
    timeout: Option<Duration>,
) -> io::Result<Option<ExitStatus>> {
    let Some(timeout) = timeout else {
        return child.wait().map(Some);
    };
    let pid = child.id() as libc::id_t;
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        // SAFETY: a zeroed siginfo_t is valid for waitid to fill; WNOWAIT
        // leaves the child to be reaped by `child.wait()` below.
        let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
        let rc =
            unsafe { libc::waitid(libc::P_PID, pid, &mut info, libc::WEXITED | libc::WNOWAIT) };
        let _ = tx.send(rc);
    });
    match rx.recv_timeout(timeout) {
        Ok(_) => child.wait().map(Some),
        Err(_) => {
            child.kill()?;
            child.wait()?;
            Ok(None)
        }
    }
}

fn exit_code(s: ExitStatus) -> u8 {
    use std::os::unix::process::ExitStatusExt;
    match (s.code(), s.signal()) {
        (Some(c), _) => c.clamp(0, 255) as u8,
        (None, Some(sig)) => (128 + sig).clamp(0, 255) as u8,
        _ => 125,
    }
}

/// The path a peer run needs to start: absolute, so a bare name is not
/// looked up on PATH, and there.
pub fn check(path: &Path) -> Result<PathBuf, PeerError> {
    match std::fs::canonicalize(path) {
        Ok(abs) if abs.is_file() => Ok(abs),
        _ => Err(PeerError::Start {
            path: path.to_path_buf(),
            source: io::Error::new(io::ErrorKind::NotFound, "no such file"),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan() -> RunPlan {
        RunPlan {
            kernel: "/k/vmlinux".into(),
            initrd: "/k/initrd.cpio".into(),
            cmdline: "quiet mcpvm.channel=vsock".into(),
            mem_mib: 512,
            vcpus: 2,
            rng: true,
            disks: vec![
                vmm::DiskConfig {
                    path: "/i/runtime.erofs".into(),
                    read_only: true,
                    cache: vmm::CacheMode::Page,
                    id: "mcpvm-root".into(),
                },
                vmm::DiskConfig {
                    path: "/i/layer.erofs".into(),
                    read_only: true,
                    cache: vmm::CacheMode::Page,
                    id: "mcpvm-layer-0".into(),
                },
            ],
            spec: Default::default(),
            network: None,
        }
    }

    #[test]
    fn firecracker_gets_the_plans_vm_and_our_vmms_first_options() {
        let c = config(&plan(), Path::new("/run/x/vsock.sock"), false);
        assert_eq!(
            c["boot-source"]["boot_args"],
            "reboot=k panic=-1 quiet mcpvm.channel=vsock"
        );
        assert_eq!(c["boot-source"]["kernel_image_path"], "/k/vmlinux");
        assert_eq!(c["boot-source"]["initrd_path"], "/k/initrd.cpio");
        assert_eq!(c["machine-config"]["mem_size_mib"], 512);
        assert_eq!(c["machine-config"]["vcpu_count"], 2);
        let drives = c["drives"].as_array().unwrap();
        assert_eq!(drives.len(), 2);
        assert_eq!(drives[0]["drive_id"], "mcpvm-root");
        assert_eq!(drives[1]["path_on_host"], "/i/layer.erofs");
        assert_eq!(drives[1]["is_read_only"], true);
        assert_eq!(c["vsock"]["uds_path"], "/run/x/vsock.sock");
        assert_eq!(c["vsock"]["guest_cid"], 3);
        assert!(c.get("entropy").is_some());
        let with_console = config(&plan(), Path::new("/v"), true);
        assert!(with_console["boot-source"]["boot_args"]
            .as_str()
            .unwrap()
            .starts_with("reboot=k panic=-1 console=ttyS0 quiet"));
        let mut no_rng = plan();
        no_rng.rng = false;
        assert!(config(&no_rng, Path::new("/v"), false)
            .get("entropy")
            .is_none());
    }

    #[test]
    fn a_killed_peer_is_reported_as_timed_out_and_a_finished_one_by_status() {
        let mut sleeper = Command::new("sleep").arg("30").spawn().unwrap();
        let t = Instant::now();
        assert_eq!(
            wait(&mut sleeper, Some(Duration::from_millis(200))).unwrap(),
            None
        );
        assert!(t.elapsed() < Duration::from_secs(10));
        let mut quick = Command::new("sh").args(["-c", "exit 7"]).spawn().unwrap();
        let s = wait(&mut quick, Some(Duration::from_secs(30)))
            .unwrap()
            .unwrap();
        assert_eq!(exit_code(s), 7);
    }

    #[test]
    fn a_missing_binary_is_one_clear_error() {
        let e = check(Path::new("/nonexistent/firecracker")).unwrap_err();
        assert!(e.to_string().contains("/nonexistent/firecracker"), "{e}");
    }
}

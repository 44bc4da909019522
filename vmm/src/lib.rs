//! mcpvm's virtual machine monitor: boots a Linux guest on KVM with a
//! minimal device set. It knows nothing of MCP.
//!
//! The public API is [`VmConfig`] in, [`RunOutcome`] out: [`run`] builds
//! the VM ([`builder`]), runs one thread per vCPU, and returns when the
//! guest powers off, resets, crashes, times out or the VMM is signalled.

pub mod arch;
pub mod builder;
pub mod cmdline;
pub mod devices;
pub mod kvm;
pub mod outcome;
pub mod seccomp;
pub mod signals;
pub mod snapshot;

use std::io::Write;
use std::os::unix::thread::JoinHandleExt;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::RecvTimeoutError;
use std::sync::{mpsc, Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

pub use builder::BootError;
pub use devices::virtio::block::CacheMode;
use devices::VmEvent;
use kvm::vcpu::VcpuContext;
pub use outcome::{BootTimings, ExitReason, RunOutcome};
pub use seccomp::{SeccompMode, ThreadKind};

pub type GuestMemoryMmap = vm_memory::GuestMemoryMmap<()>;

/// How often the main loop looks at stop signals and the deadline while
/// no device event arrives. Device events themselves wake it at once.
const POLL: Duration = Duration::from_millis(20);
/// How long stopping vCPU threads may take before we give up on joining.
const STOP_GRACE: Duration = Duration::from_secs(2);

/// What to boot and with what.
pub struct VmConfig {
    pub kernel: PathBuf,
    pub initrd: Option<PathBuf>,
    /// Appended to the VMM's own command-line options.
    pub cmdline: String,
    pub mem_mib: u64,
    pub vcpus: u8,
    /// Where the serial console goes; None leaves the VM without a UART.
    pub console: Option<Box<dyn Write + Send>>,
    pub timeout: Option<Duration>,
    /// Accept a kvm_pvm-backed /dev/kvm (see `kvm::HostError::Pvm`).
    pub allow_pvm: bool,
    /// When the VMM process started: every timing is measured from here.
    pub start: Instant,
    /// A virtio-vsock device bridged to host Unix sockets.
    pub vsock: Option<VsockConfig>,
    /// virtio-blk disks, in order: the guest sees /dev/vda, /dev/vdb, …
    pub disks: Vec<DiskConfig>,
    /// A virtio-rng device feeding the guest's entropy pool.
    pub rng: bool,
    /// Host seccomp filters on the VMM's own threads (see [`seccomp`]).
    pub seccomp: SeccompMode,
    /// Taking or starting from a snapshot (see [`snapshot`]).
    pub snapshot: SnapshotConfig,
}

/// Snapshot options of a run.
#[derive(Clone, Debug, Default)]
pub struct SnapshotConfig {
    /// On SIGUSR1 the VM pauses, is written here and the run ends with
    /// [`ExitReason::Snapshot`].
    pub save_to: Option<PathBuf>,
    /// Start from this snapshot instead of booting: kernel, initrd,
    /// command line and memory size come from it.
    pub restore_from: Option<PathBuf>,
}

/// A disk image file given to the guest as a virtio-blk device.
#[derive(Clone, Debug)]
pub struct DiskConfig {
    pub path: PathBuf,
    pub read_only: bool,
    pub cache: CacheMode,
    /// What GET_ID answers (at most 20 bytes); the guest sees it in
    /// /sys/block/vdX/serial.
    pub id: String,
}

/// The guest's vsock address and the host socket that stands for it
/// (`uds_path` for host-initiated streams, `<uds_path>_<port>` for
/// guest-initiated ones; see `devices::virtio::vsock`).
#[derive(Clone, Debug)]
pub struct VsockConfig {
    pub guest_cid: u64,
    pub uds_path: PathBuf,
}

#[derive(Debug, thiserror::Error)]
pub enum VmmError {
    #[error(transparent)]
    Boot(#[from] BootError),
    #[error("Cannot install signal handlers")]
    Signals(#[source] std::io::Error),
    #[error("Cannot start a vCPU thread")]
    Thread(#[source] std::io::Error),
    #[error(transparent)]
    Seccomp(#[from] seccomp::SeccompError),
    #[error(transparent)]
    Snapshot(#[from] snapshot::SnapshotError),
}

/// Boots the VM and runs it to the end.
pub fn run(config: VmConfig) -> Result<RunOutcome, VmmError> {
    signals::install_handlers(config.snapshot.save_to.is_some()).map_err(VmmError::Signals)?;
    let save_to = config.snapshot.save_to.clone();
    let start = config.start;
    let deadline = config.timeout.map(|t| Instant::now() + t);
    let mut built = builder::build(config)?;
    let mut timings = BootTimings {
        kvm_ready: Some(start.elapsed()),
        ..Default::default()
    };

    let stop = Arc::new(AtomicBool::new(false));
    let pause = Arc::new(AtomicBool::new(false));
    let (saved_tx, saved) = mpsc::channel();
    let ctx = VcpuContext {
        pio: built.pio.clone(),
        mmio: built.mmio.clone(),
        events: built.events.clone(),
        stop: stop.clone(),
        pause: pause.clone(),
        saved: saved_tx,
        start,
    };
    // Each vCPU thread confines itself, then waits until every thread,
    // main included, is confined: no guest code runs before that.
    let mode = built.seccomp;
    let gate = Arc::new(Gate::default());
    let (confined_tx, confined) = mpsc::channel();
    let mut threads = Vec::new();
    let vcpu_count = built.vcpus.len();
    for vcpu in std::mem::take(&mut built.vcpus) {
        let (ctx, confined_tx) = (ctx.clone(), confined_tx.clone());
        let held = gate.clone();
        let name = format!("vcpu{}", vcpu.id);
        let spawned = std::thread::Builder::new().name(name).spawn(move || {
            let result = seccomp::confine(ThreadKind::Vcpu, mode);
            let ok = result.is_ok();
            let _ = confined_tx.send(result);
            if held.wait() && ok {
                vcpu.run(ctx);
            }
        });
        match spawned {
            Ok(t) => threads.push(t),
            Err(e) => {
                gate.open(false);
                stop_vcpus(&stop, threads);
                return Err(VmmError::Thread(e));
            }
        }
    }
    drop(confined_tx);
    // One report per thread (each keeps its sender while it runs).
    let mut failed = confined
        .iter()
        .take(threads.len())
        .find_map(Result::err)
        .map(VmmError::from);
    if failed.is_none() {
        failed = seccomp::confine(ThreadKind::Main, mode)
            .err()
            .map(VmmError::from);
    }
    gate.open(failed.is_none());
    if let Some(e) = failed {
        stop_vcpus(&stop, threads);
        return Err(e);
    }

    let ending = loop {
        let wait = deadline.map_or(POLL, |d| {
            d.saturating_duration_since(Instant::now()).min(POLL)
        });
        match built.event_rx.recv_timeout(wait) {
            Ok(VmEvent::KernelEntry(t)) => timings.kernel_entry = Some(t),
            Ok(VmEvent::BootComplete(t)) => timings.boot_timer = Some(t),
            Ok(VmEvent::Exit(reason)) => break Ending::Exit(reason),
            Err(RecvTimeoutError::Timeout | RecvTimeoutError::Disconnected) => {
                if let Some(sig) = signals::stop_requested() {
                    break Ending::Exit(ExitReason::Signal(sig));
                }
                if let Some(dir) = save_to
                    .as_ref()
                    .filter(|_| signals::take_snapshot_request())
                {
                    break Ending::Snapshot(dir.clone());
                }
                if deadline.is_some_and(|d| Instant::now() >= d) {
                    break Ending::Exit(ExitReason::Timeout);
                }
            }
        }
    };
    let mut reason = match ending {
        Ending::Exit(reason) => {
            timings.exit = Some(start.elapsed());
            stop_vcpus(&stop, threads);
            reason
        }
        Ending::Snapshot(dir) => {
            // Every vCPU saves itself and ends; the VM has nothing left
            // to run whether the snapshot is written or not.
            let paused = halt_vcpus(&pause, threads);
            stop.store(true, Ordering::Release);
            timings.exit = Some(start.elapsed());
            let vcpus: Result<Vec<_>, _> = saved.try_iter().collect();
            let mut vcpus = vcpus?;
            if !paused || vcpus.len() != vcpu_count {
                return Err(snapshot::SnapshotError::Pause(dir).into());
            }
            vcpus.sort_by_key(|v| v.id);
            builder::save(&built, vcpus, &dir)?;
            ExitReason::Snapshot(dir)
        }
    };
    if reason == ExitReason::Reset && built.panicked.load(Ordering::Relaxed) {
        reason = ExitReason::Panic;
    }
    if let Some(serial) = &built.serial {
        serial.lock().unwrap_or_else(|e| e.into_inner()).flush();
    }
    Ok(RunOutcome { reason, timings })
}

/// Why the main loop stopped waiting.
enum Ending {
    Exit(ExitReason),
    /// A snapshot was asked for (SIGUSR1): write it here.
    Snapshot(PathBuf),
}

/// Holds vCPU threads until main says whether they may run.
#[derive(Default)]
struct Gate {
    run: Mutex<Option<bool>>,
    opened: Condvar,
}

impl Gate {
    fn open(&self, run: bool) {
        *self.run.lock().unwrap_or_else(|e| e.into_inner()) = Some(run);
        self.opened.notify_all();
    }

    fn wait(&self) -> bool {
        let mut run = self.run.lock().unwrap_or_else(|e| e.into_inner());
        loop {
            match *run {
                Some(r) => return r,
                None => run = self.opened.wait(run).unwrap_or_else(|e| e.into_inner()),
            }
        }
    }
}

/// Sets the stop flag and kicks every vCPU thread out of `KVM_RUN` until it
/// returns. A kick that lands before the thread enters `KVM_RUN` is lost,
/// so kicks repeat until the thread ends or the grace period runs out.
fn stop_vcpus(stop: &AtomicBool, threads: Vec<JoinHandle<()>>) {
    let _ = halt_vcpus(stop, threads);
}

/// Sets `flag` and kicks the vCPU threads until each has ended (true) or
/// the grace period ran out (false).
fn halt_vcpus(flag: &AtomicBool, threads: Vec<JoinHandle<()>>) -> bool {
    flag.store(true, Ordering::Release);
    let mut all = true;
    let until = Instant::now() + STOP_GRACE;
    for t in threads {
        while !t.is_finished() && Instant::now() < until {
            // SAFETY: the pthread is alive (not yet joined); the kick
            // signal's handler is installed and does nothing.
            unsafe { libc::pthread_kill(t.as_pthread_t(), signals::kick_signal()) };
            std::thread::sleep(Duration::from_micros(200));
        }
        if t.is_finished() {
            let _ = t.join();
        } else {
            all = false;
        }
    }
    all
}

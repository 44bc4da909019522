//! A handle on one VM: built, then run to its end by [`VmHandle::wait`];
//! stopped or snapshotted from any thread through its [`VmControl`].
//!
//! Everything that can end or pause the VM arrives as a [`VmEvent`] on one
//! channel: the devices' (kernel entry, boot timer, power-off, reset,
//! crash), and the embedder's (stop, snapshot), so the main loop blocks on
//! that channel and wakes only when something happened or the deadline
//! passed. Process signals reach it the same way (`crate::signals`).

use std::os::unix::thread::JoinHandleExt;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, RecvTimeoutError};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::builder::{self, BuiltVm};
use crate::devices::{EventSender, VmEvent};
use crate::kvm::exits::ExitStats;
use crate::kvm::vcpu::VcpuContext;
use crate::signals::kick;
use crate::{host_seccomp as seccomp, snapshot};
use crate::{BootTimings, ExitReason, RunOutcome, ThreadKind, VmConfig, VmmError};

/// How long stopping vCPU threads may take before we give up on joining.
const STOP_GRACE: Duration = Duration::from_secs(2);

/// Stops a VM or asks for its snapshot; cheap to clone, usable from any
/// thread, harmless once the VM has ended.
#[derive(Clone)]
pub struct VmControl {
    events: EventSender,
}

impl VmControl {
    /// Ends the run with `reason` (e.g. [`ExitReason::Signal`]).
    pub fn stop(&self, reason: ExitReason) {
        let _ = self.events.send(VmEvent::Stop(reason));
    }

    /// Pauses the VM and writes it to the run's snapshot directory; the run
    /// ends with [`ExitReason::Snapshot`]. Ignored by a run that saves none.
    pub fn request_snapshot(&self) {
        let _ = self.events.send(VmEvent::Snapshot);
    }
}

/// A VM built and ready to run.
pub struct VmHandle {
    built: BuiltVm,
    save_to: Option<PathBuf>,
    start: Instant,
    deadline: Option<Instant>,
    timings: BootTimings,
}

impl VmHandle {
    /// Assembles the VM (memory, devices, kernel, vCPUs: [`builder`]) or
    /// restores it from a snapshot. No guest code runs yet.
    pub fn build(config: VmConfig) -> Result<VmHandle, VmmError> {
        let save_to = config.save_to.clone();
        let start = config.start;
        let deadline = config.timeout.map(|t| Instant::now() + t);
        let mut built = builder::build(config)?;
        let setup = std::mem::take(&mut built.phases);
        Ok(VmHandle {
            built,
            save_to,
            start,
            deadline,
            timings: BootTimings {
                kvm_ready: Some(start.elapsed()),
                setup,
                ..Default::default()
            },
        })
    }

    pub fn control(&self) -> VmControl {
        VmControl {
            events: self.built.events.clone(),
        }
    }

    /// The host seccomp mode of the VMM's threads.
    pub fn seccomp_mode(&self) -> crate::SeccompMode {
        self.built.seccomp
    }

    /// Whether a snapshot request would be honoured.
    pub fn saves_snapshots(&self) -> bool {
        self.save_to.is_some()
    }

    pub fn stop(&self, reason: ExitReason) {
        self.control().stop(reason);
    }

    pub fn request_snapshot(&self) {
        self.control().request_snapshot();
    }

    /// Runs the VM to its end on this thread, which confines itself as the
    /// VMM's main thread: one thread per vCPU, each confined before any
    /// guest code runs.
    pub fn wait(self) -> Result<RunOutcome, VmmError> {
        let VmHandle {
            mut built,
            save_to,
            start,
            deadline,
            mut timings,
        } = self;
        let stop = Arc::new(AtomicBool::new(false));
        let exits = ExitStats::default();
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
            exits: exits.clone(),
        };
        let vcpu_count = built.vcpus.len();
        let threads = start_vcpus(&mut built, ctx, &stop)?;
        timings.setup.push(("threads_confined", start.elapsed()));

        let ending = loop {
            let event = match deadline {
                Some(d) => built
                    .event_rx
                    .recv_timeout(d.saturating_duration_since(Instant::now())),
                // The handle's own sender keeps the channel open.
                None => built
                    .event_rx
                    .recv()
                    .map_err(|_| RecvTimeoutError::Disconnected),
            };
            match event {
                Ok(VmEvent::KernelEntry(t)) => timings.kernel_entry = Some(t),
                Ok(VmEvent::BootComplete(t)) => timings.boot_timer = Some(t),
                Ok(VmEvent::Exit(reason) | VmEvent::Stop(reason)) => break Ending::Exit(reason),
                Ok(VmEvent::Snapshot) => match &save_to {
                    Some(dir) => break Ending::Snapshot(dir.clone()),
                    None => log::warn!("snapshot asked for, but this run saves none"),
                },
                Err(RecvTimeoutError::Timeout | RecvTimeoutError::Disconnected) => {
                    break Ending::Exit(ExitReason::Timeout)
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
        Ok(RunOutcome {
            reason,
            timings,
            exits: exits.summary(),
        })
    }
}

/// Starts one thread per vCPU. Each confines itself, then waits until
/// every thread, this one included, is confined: no guest code runs
/// before that.
fn start_vcpus(
    built: &mut BuiltVm,
    ctx: VcpuContext,
    stop: &AtomicBool,
) -> Result<Vec<JoinHandle<()>>, VmmError> {
    kick::install_kick().map_err(VmmError::Signals)?;
    let mode = built.seccomp;
    let gate = Arc::new(Gate::default());
    let (confined_tx, confined) = mpsc::channel();
    let mut threads = Vec::new();
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
                stop_vcpus(stop, threads);
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
    match failed {
        Some(e) => {
            stop_vcpus(stop, threads);
            Err(e)
        }
        None => Ok(threads),
    }
}

/// Why the main loop stopped waiting.
enum Ending {
    Exit(ExitReason),
    /// A snapshot was asked for: write it here.
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
            unsafe { libc::pthread_kill(t.as_pthread_t(), kick::kick_signal()) };
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

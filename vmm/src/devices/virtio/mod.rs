//! virtio devices over the MMIO transport (virtio 1.2, section 4.2).
//!
//! A device implements [`VirtioDevice`]: what it offers (type, features,
//! queue sizes, config space) and what it does once the driver has set it
//! up ([`VirtioDevice::activate`], which hands it the queues, their notify
//! eventfds and the interrupt). [`mmio::MmioTransport`] owns the register
//! state machine and calls into the device.

pub mod block;
pub mod mmio;
pub mod persist;
pub mod queue_worker;
pub mod rng;
pub mod spec;
pub mod vsock;

pub use spec::DeviceSpec;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{mpsc, Arc};
use std::time::Duration;

use virtio_queue::Queue;
use vmm_sys_util::eventfd::EventFd;

use crate::host_seccomp::{self, SeccompError, SeccompMode, ThreadKind};
use crate::GuestMemoryMmap;

/// Device IDs (virtio 1.2, section 5).
pub const TYPE_BLOCK: u32 = 2;
pub const TYPE_RNG: u32 = 4;
pub const TYPE_VSOCK: u32 = 19;

/// Feature bits every device offers (virtio 1.2, section 6).
pub const VIRTIO_F_VERSION_1: u64 = 1 << 32;
/// used_event / avail_event notification suppression (section 2.7.10).
/// A device that offers it must re-arm each queue (`enable_notification`)
/// before it sleeps: without that the driver stops notifying.
pub const VIRTIO_RING_F_EVENT_IDX: u64 = 1 << 29;

/// InterruptStatus bits (section 4.2.2).
pub const INT_USED_RING: u32 = 1;
pub const INT_CONFIG_CHANGE: u32 = 2;

/// The device's interrupt line: the InterruptStatus register the driver
/// reads and acknowledges, and the irqfd that raises the IRQ in KVM.
pub struct Interrupt {
    status: AtomicU32,
    irq: EventFd,
}

impl Interrupt {
    pub fn new(irq: EventFd) -> Self {
        Self {
            status: AtomicU32::new(0),
            irq,
        }
    }

    /// Tells the driver that used buffers are ready.
    pub fn signal_used_queue(&self) {
        self.signal(INT_USED_RING);
    }

    pub fn signal(&self, bits: u32) {
        self.status.fetch_or(bits, Ordering::SeqCst);
        // A full eventfd counter still raises the IRQ; nothing to do on error.
        let _ = self.irq.write(1);
    }

    pub fn status(&self) -> u32 {
        self.status.load(Ordering::SeqCst)
    }

    /// The status as the driver reads it: returned and cleared at once.
    /// A bit set after this raises a new interrupt, which the driver will
    /// read, so nothing is lost; and the driver's acknowledgement has
    /// nothing left to clear (it goes to an ioeventfd in the kernel and
    /// costs no exit to the VMM: `MmioTransport::ack_evt`).
    pub fn take_status(&self) -> u32 {
        self.status.swap(0, Ordering::SeqCst)
    }

    pub fn ack(&self, bits: u32) {
        self.status.fetch_and(!bits, Ordering::SeqCst);
    }
}

/// What a device gets when the driver sets DRIVER_OK.
pub struct Activation {
    pub mem: GuestMemoryMmap,
    pub queues: Vec<Queue>,
    /// One per queue; written when the driver notifies that queue.
    pub queue_evts: Vec<EventFd>,
    pub interrupt: Arc<Interrupt>,
    /// The device's own thread, for its worker.
    pub thread: Arc<DeviceThread>,
    /// The driver set the device up in a VM this one was restored from
    /// (see `crate::snapshot`): the queues go on where they were, and
    /// the device's host-side state (connections) is gone.
    pub restored: bool,
}

#[derive(Debug, thiserror::Error)]
pub enum ActivateError {
    #[error("Device expected {expected} queues, the transport has {got}")]
    QueueCount { expected: usize, got: usize },
    #[error("Cannot start the device worker")]
    Worker(#[source] std::io::Error),
    #[error("The device lost its backend or its thread in an earlier failed start")]
    Lost,
    #[error(transparent)]
    Confine(#[from] SeccompError),
}

pub trait VirtioDevice: Send {
    fn device_type(&self) -> u32;
    /// Which seccomp filter confines the device's thread.
    fn thread_kind(&self) -> ThreadKind;
    /// Maximum size of each queue; its length is the number of queues.
    fn queue_max_sizes(&self) -> &[u16];
    /// Feature bits offered, VIRTIO_F_VERSION_1 included.
    fn features(&self) -> u64;
    /// The subset of [`Self::features`] the driver accepted.
    fn ack_features(&mut self, features: u64);
    /// Reads from the device-specific config space.
    fn read_config(&self, offset: u64, data: &mut [u8]);
    /// Writes to the config space; most devices ignore them.
    fn write_config(&mut self, _offset: u64, _data: &[u8]) {}
    /// Starts the device on its queues.
    fn activate(&mut self, activation: Activation) -> Result<(), ActivateError>;
    /// Stops the device (driver reset). Returns the device to its state
    /// before activation.
    fn reset(&mut self);
}

/// A device's thread, started when the VM is built and parked until the
/// driver activates the device. Activation happens on a vCPU thread, and a
/// thread inherits its creator's seccomp filter; started from the main
/// thread before any filter, a device thread is confined by its own
/// filter alone, which it installs before it waits.
pub struct DeviceThread {
    kind: ThreadKind,
    jobs: Option<mpsc::Sender<Job>>,
    handle: Option<std::thread::JoinHandle<()>>,
    /// Set when a worker did not stop within [`WORKER_STOP_GRACE`]: the
    /// thread is left behind, not joined.
    abandoned: Arc<AtomicBool>,
}

/// How long a stopped worker may take to hand back what it owned. The
/// VMM's own stop must not hang on a device: past this the worker is
/// left behind, said in the log, and the process ends without it.
pub const WORKER_STOP_GRACE: Duration = Duration::from_secs(5);

type Job = Box<dyn FnOnce() + Send>;

impl DeviceThread {
    /// Starts the thread for a device of `kind`, confined in `mode`.
    pub fn spawn(kind: ThreadKind, mode: SeccompMode) -> Result<Self, ActivateError> {
        let (jobs, rx) = mpsc::channel::<Job>();
        let (ready_tx, ready) = mpsc::channel();
        let handle = std::thread::Builder::new()
            .name(kind.name().into())
            .spawn(move || {
                let confined = host_seccomp::confine(kind, mode);
                let ok = confined.is_ok();
                let _ = ready_tx.send(confined);
                while let (true, Ok(job)) = (ok, rx.recv()) {
                    job();
                }
            })
            .map_err(ActivateError::Worker)?;
        match ready.recv() {
            Ok(Ok(())) => Ok(DeviceThread {
                kind,
                jobs: Some(jobs),
                handle: Some(handle),
                abandoned: Arc::new(AtomicBool::new(false)),
            }),
            Ok(Err(e)) => Err(ActivateError::Confine(e)),
            Err(_) => Err(ActivateError::Worker(std::io::Error::other(
                "the device thread ended before it was confined",
            ))),
        }
    }

    /// Runs `run` on this thread until `kill` (an eventfd it watches)
    /// fires; [`WorkerThread::stop`] hands back what it returns.
    pub fn start<T: Send + 'static>(
        &self,
        kill: EventFd,
        run: impl FnOnce() -> T + Send + 'static,
    ) -> Result<WorkerThread<T>, ActivateError> {
        let (done_tx, done) = mpsc::sync_channel(1);
        let job: Job = Box::new(move || {
            let _ = done_tx.send(run());
        });
        self.jobs
            .as_ref()
            .and_then(|j| j.send(job).ok())
            .ok_or(ActivateError::Lost)?;
        Ok(WorkerThread {
            kind: self.kind,
            kill,
            done,
            abandoned: self.abandoned.clone(),
        })
    }
}

impl Drop for DeviceThread {
    fn drop(&mut self) {
        drop(self.jobs.take());
        if let Some(h) = self.handle.take() {
            if !self.abandoned.load(Ordering::SeqCst) {
                let _ = h.join();
            }
        }
    }
}

/// A device's running worker: stopped on reset or drop through an
/// eventfd the worker polls. It hands back what it owned (the disk image,
/// the host listener), so a reset device can start again.
pub struct WorkerThread<T> {
    kind: ThreadKind,
    kill: EventFd,
    done: mpsc::Receiver<T>,
    abandoned: Arc<AtomicBool>,
}

impl<T> WorkerThread<T> {
    /// Stops the worker and returns what it owned: None if it panicked,
    /// or did not stop within [`WORKER_STOP_GRACE`] (then it is left
    /// behind).
    pub fn stop(self) -> Option<T> {
        let _ = self.kill.write(1);
        match self.done.recv_timeout(WORKER_STOP_GRACE) {
            Ok(owned) => Some(owned),
            Err(mpsc::RecvTimeoutError::Disconnected) => None,
            Err(mpsc::RecvTimeoutError::Timeout) => {
                log::error!(
                    "the {} worker did not stop within {:?}; left behind",
                    self.kind.name(),
                    WORKER_STOP_GRACE
                );
                self.abandoned.store(true, Ordering::SeqCst);
                None
            }
        }
    }
}

/// Copies `data.len()` bytes of `config` at `offset` (zeros past its end).
/// `VIRTQ_DESC_F_NEXT` and `VIRTQ_DESC_F_INDIRECT` (virtio 1.2, 2.7.5).
const DESC_F_NEXT: u16 = 1;
const DESC_F_INDIRECT: u16 = 4;

/// Whether the chain at `head` of `queue` points to an indirect table.
/// We never offer `VIRTIO_F_INDIRECT_DESC`, so a driver that uses one is
/// misbehaving; virtio-queue would follow the table anyway, so devices
/// check and drop such a chain. Walks at most the queue's size of
/// descriptors; one that cannot be read ends the walk.
pub fn uses_indirect(mem: &GuestMemoryMmap, queue: &impl virtio_queue::QueueT, head: u16) -> bool {
    use vm_memory::{Bytes, GuestAddress};
    let table = GuestAddress(queue.desc_table());
    let mut index = head;
    for _ in 0..queue.size() {
        if index >= queue.size() {
            return false;
        }
        let flags_at = table.0 + 16 * u64::from(index) + 12;
        let Ok(flags) = mem.read_obj::<u16>(GuestAddress(flags_at)) else {
            return false;
        };
        let flags = u16::from_le(flags);
        if flags & DESC_F_INDIRECT != 0 {
            return true;
        }
        if flags & DESC_F_NEXT == 0 {
            return false;
        }
        let Ok(next) = mem.read_obj::<u16>(GuestAddress(flags_at + 2)) else {
            return false;
        };
        index = u16::from_le(next);
    }
    false
}

pub fn read_config_bytes(config: &[u8], offset: u64, data: &mut [u8]) {
    data.fill(0);
    if let Ok(start) = usize::try_from(offset) {
        if start < config.len() {
            let n = data.len().min(config.len() - start);
            data[..n].copy_from_slice(&config[start..start + n]);
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A device thread without a filter, for device tests.
    pub fn unconfined_thread() -> Arc<DeviceThread> {
        Arc::new(DeviceThread::spawn(ThreadKind::Rng, SeccompMode::Off).unwrap())
    }

    #[test]
    fn config_reads_are_bounded() {
        let cfg = [1u8, 2, 3, 4];
        let mut d = [9u8; 4];
        read_config_bytes(&cfg, 2, &mut d);
        assert_eq!(d, [3, 4, 0, 0]);
        read_config_bytes(&cfg, u64::MAX, &mut d);
        assert_eq!(d, [0; 4]);
    }

    #[test]
    fn a_worker_that_stops_hands_back_what_it_owned() {
        let t = DeviceThread::spawn(ThreadKind::Rng, SeccompMode::Off).unwrap();
        let kill = EventFd::new(libc::EFD_NONBLOCK).unwrap();
        let seen = kill.try_clone().unwrap();
        let w = t
            .start(kill, move || {
                while seen.read().is_err() {
                    std::thread::sleep(Duration::from_millis(1));
                }
                42
            })
            .unwrap();
        assert_eq!(w.stop(), Some(42));
        drop(t); // joins the idle thread
    }

    #[test]
    fn a_worker_that_does_not_stop_is_left_behind_not_waited_for() {
        let t = DeviceThread::spawn(ThreadKind::Rng, SeccompMode::Off).unwrap();
        let (release, stuck) = mpsc::channel::<()>();
        let kill = EventFd::new(libc::EFD_NONBLOCK).unwrap();
        // Ignores its kill eventfd: blocked elsewhere.
        let w = t.start(kill, move || stuck.recv().ok()).unwrap();
        let t0 = std::time::Instant::now();
        assert_eq!(w.stop(), None);
        drop(t); // must not join the stuck thread
        let took = t0.elapsed();
        assert!(
            took >= WORKER_STOP_GRACE && took < WORKER_STOP_GRACE + Duration::from_secs(3),
            "{took:?}"
        );
        drop(release);
    }

    #[test]
    fn interrupt_status_is_set_and_acked() {
        let irq = Interrupt::new(EventFd::new(libc::EFD_NONBLOCK).unwrap());
        irq.signal_used_queue();
        assert_eq!(irq.status(), INT_USED_RING);
        assert_eq!(irq.irq.read().unwrap(), 1);
        irq.ack(INT_USED_RING);
        assert_eq!(irq.status(), 0);
    }
}

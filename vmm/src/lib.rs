//! mcpvm's virtual machine monitor: boots a Linux guest on KVM with a
//! minimal device set. It knows nothing of MCP.
//!
//! The public API is [`VmConfig`] in, [`RunOutcome`] out:
//! [`VmHandle::build`] assembles the VM ([`builder`]); the handle's
//! [`VmControl`] stops it or asks for a snapshot from any thread, and
//! [`VmHandle::wait`] runs one thread per vCPU and returns when the guest
//! powers off, resets, crashes, times out, or is stopped. [`run`] does
//! both with the process's signals forwarded ([`signals`]).

pub mod arch;
pub mod builder;
pub mod cmdline;
pub mod devices;
pub mod handle;
pub mod host_seccomp;
pub mod jail;
pub mod kvm;
pub mod outcome;
pub mod signals;
pub mod snapshot;

use std::io::Write;
use std::path::PathBuf;
use std::time::{Duration, Instant};

pub use builder::{restore, BootError};
pub use devices::virtio::block::CacheMode;
pub use handle::{VmControl, VmHandle};
pub use host_seccomp::{SeccompMode, ThreadKind};
pub use outcome::{BootTimings, ExitReason, RunOutcome};

pub type GuestMemoryMmap = vm_memory::GuestMemoryMmap<()>;

/// What a booted VM boots: everything a restored one takes from its
/// snapshot instead.
#[derive(Clone, Debug, Default)]
pub struct KernelBoot {
    pub kernel: PathBuf,
    pub initrd: Option<PathBuf>,
    /// Appended to the VMM's own command-line options.
    pub cmdline: String,
    pub mem_mib: u64,
    pub vcpus: u8,
    /// A virtio-rng device feeding the guest's entropy pool.
    pub rng: bool,
    /// Offer the TSC-deadline timer in CPUID where KVM emulates it (the
    /// guest then skips calibrating its LAPIC timer against the PIT: a
    /// tenth of a second of ticks, about 0.35 s of a testbed boot), as
    /// Firecracker and QEMU do.
    pub tsc_deadline: bool,
}

/// How a VM starts.
#[derive(Clone, Debug)]
pub enum Boot {
    /// Booted: this kernel, memory and vCPUs.
    Kernel(KernelBoot),
    /// Restored from this snapshot (see [`snapshot`]): kernel, memory,
    /// vCPUs and devices come from it; the disks and the vsock socket are
    /// the config's.
    Snapshot(PathBuf),
}

/// What to boot (or restore) and with what.
pub struct VmConfig {
    pub boot: Boot,
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
    /// Host seccomp filters on the VMM's own threads (see [`seccomp`]).
    pub seccomp: SeccompMode,
    /// On SIGUSR1 the VM pauses, is written here and the run ends with
    /// [`ExitReason::Snapshot`].
    pub save_to: Option<PathBuf>,
}

/// A disk image file given to the guest as a virtio-blk device.
#[derive(Clone, Debug, PartialEq, Eq)]
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

impl VsockConfig {
    /// Where a guest's connection to host port `port` arrives: listen
    /// here to accept it.
    pub fn port_path(&self, port: u32) -> PathBuf {
        devices::virtio::vsock::port_path(&self.uds_path, port)
    }
}

#[derive(Debug, thiserror::Error)]
pub enum VmmError {
    #[error(transparent)]
    Boot(#[from] BootError),
    #[error("Cannot forward signals to the VM")]
    Signals(#[source] std::io::Error),
    #[error("Cannot start a vCPU thread")]
    Thread(#[source] std::io::Error),
    #[error(transparent)]
    Seccomp(#[from] host_seccomp::SeccompError),
    #[error(transparent)]
    Snapshot(#[from] snapshot::SnapshotError),
}

/// Boots the VM and runs it to the end, with the process's stop signals
/// (and SIGUSR1 for a snapshot, when the run saves one) forwarded to it.
/// A program that needs to stop or snapshot the VM itself uses
/// [`VmHandle`] directly.
pub fn run(config: VmConfig) -> Result<RunOutcome, VmmError> {
    let caught = signals::catch(config.save_to.is_some()).map_err(VmmError::Signals)?;
    let vm = VmHandle::build(config)?;
    let _forwarding = caught.forward_to(&vm)?;
    vm.wait()
}

//! Why a VM could not be built: booted ([`BootError`]) or restored from a
//! snapshot ([`RestoreError`], which is one of them).

use std::path::PathBuf;

use linux_loader::loader;

use crate::arch::x86_64::boot_params::BootParamsError;
use crate::arch::x86_64::layout::*;
use crate::arch::x86_64::mptable::{self, MptableError};
use crate::devices::bus::BusError;
use crate::devices::virtio::block::disk::DiskError;
use crate::devices::virtio::vsock::device::VsockError;
use crate::kvm::vcpu::VcpuError;
use crate::kvm::vm::VmError;
use crate::kvm::HostError;
use crate::snapshot::SnapshotError;

/// An initrd beyond this is almost certainly a mistake (wrong file).
pub(crate) const MAX_INITRD_BYTES: u64 = 2 << 30;

#[derive(Debug, thiserror::Error)]
pub enum BootError {
    #[error(transparent)]
    Host(#[from] HostError),
    #[error(
        "Guest memory of {0} MiB is out of range: a VM has {MIN_MEM_MIB} to {MAX_MEM_MIB} MiB"
    )]
    MemorySize(u64),
    #[error("{0} vCPUs is out of range: a VM has 1 to {max}", max = mptable::MAX_CPUS)]
    VcpuCount(u8),
    #[error("Cannot open kernel image {path}")]
    OpenKernel {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("Kernel image {path} is neither an ELF vmlinux nor a bzImage")]
    KernelFormat { path: PathBuf },
    #[error(
        "bzImage {path} has no 64-bit entry point (XLF_KERNEL_64); build the kernel for x86_64"
    )]
    Kernel32 { path: PathBuf },
    #[error("Cannot load kernel image {path}; is it a complete x86_64 kernel that fits in guest memory?")]
    LoadKernel {
        path: PathBuf,
        #[source]
        source: loader::Error,
    },
    #[error("Cannot read initrd {path}")]
    OpenInitrd {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("Initrd {path} is {size} bytes, more than the {MAX_INITRD_BYTES}-byte limit")]
    InitrdSize { path: PathBuf, size: u64 },
    #[error(transparent)]
    BootParams(#[from] BootParamsError),
    #[error("Kernel command line is invalid or longer than {CMDLINE_MAX_SIZE} bytes: {0}")]
    Cmdline(linux_loader::cmdline::Error),
    #[error("Cannot write boot structures to guest memory")]
    Configure(#[source] linux_loader::configurator::Error),
    #[error("Cannot write to guest memory")]
    GuestMemory(#[source] vm_memory::GuestMemoryError),
    #[error(transparent)]
    Mptable(#[from] MptableError),
    #[error(transparent)]
    Vm(#[from] VmError),
    #[error(transparent)]
    Vcpu(#[from] VcpuError),
    #[error("Cannot set up device {what}")]
    Device {
        what: &'static str,
        #[source]
        source: std::io::Error,
    },
    #[error("Device layout conflict")]
    Bus(#[from] BusError),
    #[error(transparent)]
    Vsock(#[from] VsockError),
    #[error(transparent)]
    Disk(#[from] DiskError),
    #[error("{0} virtio devices asked for; a VM has at most {MAX_VIRTIO_DEVICES} (one IRQ each)")]
    TooManyDevices(usize),
    #[error("Cannot read the CPUID KVM supports")]
    Cpuid(#[source] kvm_ioctls::Error),
    #[error("Cannot read the list of MSRs KVM saves")]
    MsrList(#[source] kvm_ioctls::Error),
    #[error(transparent)]
    Snapshot(#[from] SnapshotError),
    #[error(transparent)]
    Restore(#[from] RestoreError),
}

/// Why a snapshot cannot be restored.
#[derive(Debug, thiserror::Error)]
pub enum RestoreError {
    #[error("Snapshot {dir} has {count} vCPUs; a VM has 1 to {max}", max = mptable::MAX_CPUS)]
    VcpuCount { dir: PathBuf, count: usize },
    #[error("Snapshot {dir} has {mib} MiB of memory; a VM has {MIN_MEM_MIB} to {MAX_MEM_MIB}")]
    MemorySize { dir: PathBuf, mib: u64 },
    #[error("Snapshot {dir} was taken {}; restore it {}",
        if *had { "with a vsock device" } else { "without a vsock device" },
        if *had { "with a vsock host socket" } else { "without a vsock host socket" })]
    Vsock { dir: PathBuf, had: bool },
    #[error("Snapshot {dir} is not usable here: {now} is not as it was ({was}); the snapshot needs the same disk images")]
    DeviceChanged {
        dir: PathBuf,
        now: String,
        was: String,
    },
    #[error("Snapshot {dir} names {path} as a disk, which is not a regular file")]
    DiskNotFile { dir: PathBuf, path: PathBuf },
    #[error("Snapshot {dir} opens {path} writable; a snapshot alone may open disks read-only only, so name its disks to allow that")]
    WritableDisk { dir: PathBuf, path: PathBuf },
    #[error("Snapshot {dir} has the disks {snapshot}, not the ones given ({given})")]
    DisksDiffer {
        dir: PathBuf,
        snapshot: String,
        given: String,
    },
    #[error("Snapshot {dir} is of a guest that uses the TSC-deadline timer, which this host's KVM does not emulate; restore it on a host whose KVM has KVM_CAP_TSC_DEADLINE_TIMER, or take it again here")]
    TscDeadline { dir: PathBuf },
    #[error("Snapshot {dir} is not usable: its {part}: {why}")]
    State {
        dir: PathBuf,
        part: &'static str,
        why: String,
    },
}

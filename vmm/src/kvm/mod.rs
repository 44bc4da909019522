//! The host's KVM: opening it, telling the user why it cannot be used, and
//! the VM and vCPU wrappers.

pub mod exits;
pub mod persist;
pub mod vcpu;
pub mod vm;

use std::io;
use std::path::Path;

use kvm_ioctls::{Cap, Kvm};

const KVM_PATH: &str = "/dev/kvm";
const PVM_MODULE: &str = "/sys/module/kvm_pvm";

#[derive(Debug, thiserror::Error)]
pub enum HostError {
    #[error("There is no {KVM_PATH} on this host: load kvm_intel or kvm_amd (on a VM, enable nested virtualization)")]
    NoKvm,
    #[error(
        "Permission denied opening {KVM_PATH}: add this user to the 'kvm' group or run as root"
    )]
    NoPermission,
    #[error("Cannot open {KVM_PATH}")]
    Open(#[source] io::Error),
    #[error("{KVM_PATH} speaks KVM API version {0}, this VMM needs 12")]
    ApiVersion(i32),
    #[error("{KVM_PATH} lacks the {0:?} capability this VMM needs")]
    MissingCap(Cap),
    #[error("{KVM_PATH} on this host is backed by kvm_pvm, which cannot run a stock Linux guest (it runs under instruction emulation, takes about 30 s to reach init, and user-mode syscalls fail); use a host with VMX/SVM")]
    Pvm,
}

/// What opening KVM reads on the host: the device and the marker of
/// what backs it (a jail must hold them).
pub fn host_paths() -> [&'static Path; 2] {
    [Path::new(KVM_PATH), Path::new(PVM_MODULE)]
}

/// True when `/dev/kvm` is provided by the kvm_pvm module (see design.md).
pub fn is_pvm() -> bool {
    Path::new(PVM_MODULE).exists()
}

/// Opens `/dev/kvm` and checks what booting Linux needs. `allow_pvm`
/// accepts a kvm_pvm-backed device (small hand-written guests run there).
pub fn open(allow_pvm: bool) -> Result<Kvm, HostError> {
    if !Path::new(KVM_PATH).exists() {
        return Err(HostError::NoKvm);
    }
    let kvm = Kvm::new().map_err(|e| match e.errno() {
        libc::EACCES | libc::EPERM => HostError::NoPermission,
        libc::ENOENT | libc::ENXIO | libc::ENODEV => HostError::NoKvm,
        _ => HostError::Open(io::Error::from_raw_os_error(e.errno())),
    })?;
    if kvm.get_api_version() != 12 {
        return Err(HostError::ApiVersion(kvm.get_api_version()));
    }
    for cap in [
        Cap::Irqchip,
        Cap::UserMemory,
        Cap::Pit2,
        Cap::Irqfd,
        Cap::ExtCpuid,
    ] {
        if !kvm.check_extension(cap) {
            return Err(HostError::MissingCap(cap));
        }
    }
    if is_pvm() && !allow_pvm {
        return Err(HostError::Pvm);
    }
    Ok(kvm)
}

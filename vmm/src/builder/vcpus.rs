//! The vCPUs of a VM, made the same way whether it boots or is restored.

use super::error::BootError;
use crate::kvm::vcpu::Vcpu;
use crate::kvm::vm::Vm;

/// What booting and restoring vCPUs share: each of `ids` made, given the
/// MSRs to save, and set up by `set_up` (its index in `ids`, and the CPUID
/// KVM supports here).
pub(crate) fn make_vcpus(
    kvm: &kvm_ioctls::Kvm,
    vm: &Vm,
    ids: &[u8],
    mut set_up: impl FnMut(&mut Vcpu, usize, &kvm_bindings::CpuId) -> Result<(), BootError>,
) -> Result<Vec<Vcpu>, BootError> {
    let supported = kvm
        .get_supported_cpuid(kvm_bindings::KVM_MAX_CPUID_ENTRIES)
        .map_err(BootError::Cpuid)?;
    let msrs = msr_list(kvm)?;
    let mut vcpus = Vec::with_capacity(ids.len());
    for (i, &id) in ids.iter().enumerate() {
        let mut vcpu = Vcpu::new(&vm.fd, id)?;
        vcpu.set_msr_list(msrs.clone());
        set_up(&mut vcpu, i, &supported)?;
        vcpus.push(vcpu);
    }
    Ok(vcpus)
}

/// The MSRs a snapshot saves: those KVM lists as saved and restored.
fn msr_list(kvm: &kvm_ioctls::Kvm) -> Result<Vec<u32>, BootError> {
    kvm.get_msr_index_list()
        .map(|l| l.as_slice().to_vec())
        .map_err(BootError::MsrList)
}

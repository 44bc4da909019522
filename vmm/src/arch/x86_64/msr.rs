//! Model-specific registers set before the first vCPU entry.

use kvm_bindings::{kvm_msr_entry, Msrs};

const MSR_IA32_SYSENTER_CS: u32 = 0x174;
const MSR_IA32_SYSENTER_ESP: u32 = 0x175;
const MSR_IA32_SYSENTER_EIP: u32 = 0x176;
const MSR_STAR: u32 = 0xc000_0081;
const MSR_LSTAR: u32 = 0xc000_0082;
const MSR_CSTAR: u32 = 0xc000_0083;
const MSR_SYSCALL_MASK: u32 = 0xc000_0084;
const MSR_KERNEL_GS_BASE: u32 = 0xc000_0102;
const MSR_IA32_TSC: u32 = 0x10;
const MSR_IA32_MISC_ENABLE: u32 = 0x1a0;
const MSR_MTRR_DEF_TYPE: u32 = 0x2ff;

const MISC_ENABLE_FAST_STRING: u64 = 1;
/// MTRRs enabled, default memory type write-back: without it guest RAM
/// would be uncached wherever KVM honours guest MTRRs.
const MTRR_ENABLE_WB: u64 = (1 << 11) | 6;

/// The boot MSR values: syscall entry points cleared (the kernel sets its
/// own), fast string operations on, write-back memory.
pub fn boot_msrs() -> Msrs {
    let entries: Vec<kvm_msr_entry> = [
        (MSR_IA32_SYSENTER_CS, 0),
        (MSR_IA32_SYSENTER_ESP, 0),
        (MSR_IA32_SYSENTER_EIP, 0),
        (MSR_STAR, 0),
        (MSR_CSTAR, 0),
        (MSR_KERNEL_GS_BASE, 0),
        (MSR_SYSCALL_MASK, 0),
        (MSR_LSTAR, 0),
        (MSR_IA32_TSC, 0),
        (MSR_IA32_MISC_ENABLE, MISC_ENABLE_FAST_STRING),
        (MSR_MTRR_DEF_TYPE, MTRR_ENABLE_WB),
    ]
    .into_iter()
    .map(|(index, data)| kvm_msr_entry {
        index,
        data,
        ..Default::default()
    })
    .collect();
    Msrs::from_entries(&entries).expect("boot MSR list fits the KVM maximum")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn misc_enable_and_mtrr_are_set() {
        let msrs = boot_msrs();
        let find = |i| msrs.as_slice().iter().find(|e| e.index == i).unwrap().data;
        assert_eq!(find(MSR_IA32_MISC_ENABLE), 1);
        assert_eq!(find(MSR_MTRR_DEF_TYPE) & (1 << 11), 1 << 11);
        assert_eq!(msrs.as_slice().len(), 11);
    }
}

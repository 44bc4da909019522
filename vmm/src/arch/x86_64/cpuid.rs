//! CPUID as each vCPU sees it: KVM's supported set, with the topology
//! fields rewritten so that every vCPU reports its own APIC ID and the
//! total count, the hypervisor bit set so the kernel uses paravirt
//! features (kvm-clock) instead of probing hardware, and the TSC-deadline
//! timer offered where KVM emulates it and the caller asks for it
//! (`VmConfig::tsc_deadline`: every command does unless told not to).
//!
//! `KVM_GET_SUPPORTED_CPUID` leaves TSC-deadline out because KVM emulates
//! it in its LAPIC rather than passing hardware through
//! (Documentation/virt/kvm/api.rst, KVM_CAP_TSC_DEADLINE_TIMER); a VMM
//! sets the bit itself. Without it the guest calibrates its LAPIC timer
//! against the PIT at boot (`calibrate_APIC_clock`, LAPIC_CAL_LOOPS = a
//! tenth of a second of ticks) and reprograms a one-shot timer instead.

use kvm_bindings::{kvm_cpuid_entry2, CpuId};

const LEAF_FEATURES: u32 = 0x1;
const LEAF_CACHE_TOPOLOGY: u32 = 0x4;
const LEAF_POWER: u32 = 0x6;
const LEAF_EXT_TOPOLOGY: u32 = 0xb;
const LEAF_EXT_TOPOLOGY_V2: u32 = 0x1f;

const ECX_HYPERVISOR: u32 = 1 << 31;
const ECX_TSC_DEADLINE: u32 = 1 << 24;
const EDX_HTT: u32 = 1 << 28;

/// What the host's KVM offers beyond its supported CPUID.
#[derive(Clone, Copy, Debug, Default)]
pub struct HostFeatures {
    /// KVM_CAP_TSC_DEADLINE_TIMER: the LAPIC emulates TSC-deadline mode.
    pub tsc_deadline: bool,
}

impl HostFeatures {
    pub fn of(kvm: &kvm_ioctls::Kvm) -> Self {
        HostFeatures {
            tsc_deadline: kvm.check_extension(kvm_ioctls::Cap::TscDeadlineTimer),
        }
    }
}

/// Rewrites `entries` (from `KVM_GET_SUPPORTED_CPUID`) for vCPU `id` of
/// `count`. One thread per core, one core per vCPU, one socket.
pub fn filter(entries: &mut [kvm_cpuid_entry2], id: u8, count: u8, host: HostFeatures) {
    for e in entries.iter_mut() {
        match e.function {
            LEAF_FEATURES => {
                // EBX[31:24] initial APIC ID, EBX[23:16] logical processors.
                e.ebx = (e.ebx & 0x0000_ffff) | (u32::from(id) << 24) | (u32::from(count) << 16);
                e.ecx |= ECX_HYPERVISOR;
                if host.tsc_deadline {
                    e.ecx |= ECX_TSC_DEADLINE;
                }
                if count > 1 {
                    e.edx |= EDX_HTT;
                } else {
                    e.edx &= !EDX_HTT;
                }
            }
            LEAF_CACHE_TOPOLOGY => {
                // EAX[31:26]: cores per package - 1.
                e.eax = (e.eax & 0x03ff_ffff) | (u32::from(count.saturating_sub(1)) << 26);
            }
            LEAF_POWER => {
                // No thermal or power management for the guest to poke.
                e.eax = 0;
                e.ecx = 0;
            }
            LEAF_EXT_TOPOLOGY | LEAF_EXT_TOPOLOGY_V2 => {
                e.edx = u32::from(id);
                // Subleaf 0: SMT level (1 thread per core); subleaf 1:
                // core level (count cores); anything further is invalid.
                match e.index {
                    0 => {
                        e.eax = 0;
                        e.ebx = 1;
                        e.ecx = 1 << 8;
                    }
                    1 => {
                        e.eax = bits_for(count);
                        e.ebx = u32::from(count);
                        e.ecx = (2 << 8) | 1;
                    }
                    n => {
                        e.eax = 0;
                        e.ebx = 0;
                        e.ecx = n;
                    }
                }
            }
            _ => {}
        }
    }
}

/// Bits needed to hold an APIC ID below `count` (the x2APIC shift).
fn bits_for(count: u8) -> u32 {
    u32::BITS - u32::from(count.max(1) - 1).leading_zeros()
}

/// Convenience over [`filter`] for a whole `CpuId`.
pub fn for_vcpu(supported: &CpuId, id: u8, count: u8, host: HostFeatures) -> CpuId {
    let mut cpuid = supported.clone();
    filter(cpuid.as_mut_slice(), id, count, host);
    cpuid
}

#[cfg(test)]
mod tests {
    use super::*;

    fn leaf(function: u32, index: u32) -> kvm_cpuid_entry2 {
        kvm_cpuid_entry2 {
            function,
            index,
            ebx: 0xdead_beef,
            ecx: 0x0000_0001,
            edx: 0xffff_ffff,
            eax: 0xffff_ffff,
            ..Default::default()
        }
    }

    #[test]
    fn leaf1_carries_apic_id_count_and_hypervisor_bit() {
        let mut e = [leaf(1, 0)];
        filter(&mut e, 3, 4, HostFeatures::default());
        assert_eq!(e[0].ebx >> 24, 3);
        assert_eq!((e[0].ebx >> 16) & 0xff, 4);
        assert_eq!(e[0].ebx & 0xffff, 0xbeef);
        assert_ne!(e[0].ecx & ECX_HYPERVISOR, 0);
        assert_ne!(e[0].edx & EDX_HTT, 0);
    }

    #[test]
    fn tsc_deadline_is_offered_only_where_kvm_emulates_it() {
        let mut e = [leaf(1, 0)];
        filter(&mut e, 0, 1, HostFeatures::default());
        assert_eq!(e[0].ecx & ECX_TSC_DEADLINE, 0);
        filter(&mut e, 0, 1, HostFeatures { tsc_deadline: true });
        assert_ne!(e[0].ecx & ECX_TSC_DEADLINE, 0);
        // Other leaves are not touched by it.
        let mut e = [leaf(4, 0)];
        filter(&mut e, 0, 1, HostFeatures { tsc_deadline: true });
        assert_eq!(e[0].ecx, 1);
    }

    #[test]
    fn single_vcpu_clears_htt() {
        let mut e = [leaf(1, 0)];
        filter(&mut e, 0, 1, HostFeatures::default());
        assert_eq!(e[0].edx & EDX_HTT, 0);
    }

    #[test]
    fn extended_topology_reports_x2apic_id_and_levels() {
        let mut e = [leaf(0xb, 0), leaf(0xb, 1), leaf(0xb, 2)];
        filter(&mut e, 5, 6, HostFeatures::default());
        assert!(e.iter().all(|l| l.edx == 5));
        assert_eq!(e[0].ebx, 1);
        assert_eq!(e[1].ebx, 6);
        assert_eq!(e[1].eax, 3); // 6 cores need 3 bits
        assert_eq!((e[1].ecx >> 8) & 0xff, 2);
        assert_eq!(e[2].ebx, 0);
    }

    #[test]
    fn cache_leaf_reports_cores_per_package() {
        let mut e = [leaf(4, 0)];
        filter(&mut e, 0, 2, HostFeatures::default());
        assert_eq!(e[0].eax >> 26, 1);
    }

    #[test]
    fn apic_id_bits() {
        assert_eq!(bits_for(1), 0);
        assert_eq!(bits_for(2), 1);
        assert_eq!(bits_for(4), 2);
        assert_eq!(bits_for(5), 3);
    }
}

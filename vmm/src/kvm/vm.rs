//! The KVM VM: guest memory slots and the in-kernel interrupt controllers.

use kvm_bindings::{kvm_pit_config, kvm_userspace_memory_region, KVM_PIT_SPEAKER_DUMMY};
use kvm_ioctls::{Kvm, VmFd};
use vm_memory::{Address, GuestAddress, GuestMemoryBackend, GuestMemoryRegion};

use crate::arch::x86_64::layout;
use crate::GuestMemoryMmap;

/// KVM on Intel needs three pages for the TSS below 4 GiB, out of RAM's way.
const TSS_ADDRESS: usize = 0xfffb_d000;

#[derive(Debug, thiserror::Error)]
pub enum VmError {
    #[error("Cannot create the KVM VM")]
    Create(#[source] kvm_ioctls::Error),
    #[error("Cannot set up the VM's {what}")]
    Setup {
        what: &'static str,
        #[source]
        source: kvm_ioctls::Error,
    },
    #[error("Cannot allocate {mib} MiB of guest memory; lower --mem")]
    Memory {
        mib: u64,
        #[source]
        source: vm_memory::mmap::FromRangesError,
    },
}

pub struct Vm {
    pub fd: VmFd,
    pub mem: GuestMemoryMmap,
}

impl Vm {
    /// Creates the VM with `mem_mib` MiB of RAM, an in-kernel IO-APIC, PIC
    /// and PIT, and registers the memory with KVM.
    pub fn new(kvm: &Kvm, mem_mib: u64) -> Result<Self, VmError> {
        let fd = kvm.create_vm().map_err(VmError::Create)?;
        let setup = |what| move |source| VmError::Setup { what, source };
        fd.set_tss_address(TSS_ADDRESS)
            .map_err(setup("TSS address"))?;
        fd.create_irq_chip()
            .map_err(setup("interrupt controller"))?;
        // The dummy speaker port keeps port 0x61 in the kernel: the guest's
        // PIT calibration polls it and each exit to userspace costs time.
        let pit = kvm_pit_config {
            flags: KVM_PIT_SPEAKER_DUMMY,
            ..Default::default()
        };
        fd.create_pit2(pit).map_err(setup("PIT"))?;

        let ranges: Vec<(GuestAddress, usize)> = layout::ram_regions(mem_mib << 20)
            .into_iter()
            .map(|(start, size)| (GuestAddress(start), size as usize))
            .collect();
        let mem = GuestMemoryMmap::from_ranges(&ranges).map_err(|source| VmError::Memory {
            mib: mem_mib,
            source,
        })?;
        for (slot, region) in mem.iter().enumerate() {
            let host = mem
                .get_host_address(region.start_addr())
                .expect("region start is inside guest memory");
            let slot_region = kvm_userspace_memory_region {
                slot: slot as u32,
                guest_phys_addr: region.start_addr().raw_value(),
                memory_size: region.len(),
                userspace_addr: host as u64,
                flags: 0,
            };
            // SAFETY: the region is mapped for the lifetime of `mem`, which
            // lives in the returned Vm alongside the VM fd.
            unsafe { fd.set_user_memory_region(slot_region) }.map_err(setup("memory slot"))?;
        }
        Ok(Self { fd, mem })
    }
}

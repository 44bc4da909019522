//! The KVM VM: guest memory slots and the in-kernel interrupt controllers.

use std::fs::File;

use kvm_bindings::{
    kvm_clock_data, kvm_irqchip, kvm_pit_config, kvm_userspace_memory_region, KVM_IRQCHIP_IOAPIC,
    KVM_IRQCHIP_PIC_MASTER, KVM_IRQCHIP_PIC_SLAVE, KVM_PIT_SPEAKER_DUMMY,
};
use kvm_ioctls::{Kvm, VmFd};
use vm_memory::mmap::MmapRegionBuilder;
use vm_memory::{
    Address, FileOffset, GuestAddress, GuestMemoryBackend, GuestMemoryRegion, GuestRegionMmap,
};

use super::persist::{Pod, VmState};
use crate::snapshot::SnapshotError;

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
    #[error("Cannot allocate {mib} MiB of guest memory")]
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
        Self::with_memory(kvm, mem_mib, None)
    }

    /// [`Self::new`], with RAM mapped copy-on-write from `file` (a
    /// snapshot's memory, its regions back to back) instead of zeroed.
    pub fn with_memory(kvm: &Kvm, mem_mib: u64, file: Option<&File>) -> Result<Self, VmError> {
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
        let mem = match file {
            None => GuestMemoryMmap::from_ranges(&ranges),
            Some(f) => map_private(f, &ranges),
        }
        .map_err(|source| VmError::Memory {
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

    /// The in-kernel PIC, IO-APIC, PIT and clock.
    pub fn save_state(&self) -> Result<VmState, SnapshotError> {
        let cap = |what: &'static str| {
            move |source| SnapshotError::Capture {
                what: what.into(),
                source,
            }
        };
        let chip = |id| {
            let mut c = kvm_irqchip {
                chip_id: id,
                ..Default::default()
            };
            self.fd
                .get_irqchip(&mut c)
                .map(|_| Pod::of(&c))
                .map_err(cap("interrupt controller"))
        };
        Ok(VmState {
            pic_master: chip(KVM_IRQCHIP_PIC_MASTER)?,
            pic_slave: chip(KVM_IRQCHIP_PIC_SLAVE)?,
            ioapic: chip(KVM_IRQCHIP_IOAPIC)?,
            pit: Pod::of(&self.fd.get_pit2().map_err(cap("PIT"))?),
            clock: Pod::of(&self.fd.get_clock().map_err(cap("KVM clock"))?),
        })
    }

    pub fn restore_state(&self, s: &VmState) -> Result<(), SnapshotError> {
        let bad = |why: String| SnapshotError::Invalid {
            path: Default::default(),
            why,
        };
        let set = |what: &'static str| {
            move |source| SnapshotError::Restore {
                what: what.into(),
                source,
            }
        };
        for (pod, what) in [
            (&s.pic_master, "PIC master"),
            (&s.pic_slave, "PIC slave"),
            (&s.ioapic, "IO-APIC"),
        ] {
            let c: kvm_irqchip = pod.get(what).map_err(bad)?;
            self.fd
                .set_irqchip(&c)
                .map_err(set("interrupt controller"))?;
        }
        self.fd
            .set_pit2(&s.pit.get("PIT").map_err(bad)?)
            .map_err(set("PIT"))?;
        let mut clock: kvm_clock_data = s.clock.get("KVM clock").map_err(bad)?;
        // Only the value is ours to set; the flags describe the host.
        clock.flags = 0;
        self.fd.set_clock(&clock).map_err(set("KVM clock"))
    }
}

/// Guest RAM as private, copy-on-write mappings of `file`, one per region
/// at the region's offset in the file.
fn map_private(
    file: &File,
    ranges: &[(GuestAddress, usize)],
) -> Result<GuestMemoryMmap, vm_memory::mmap::FromRangesError> {
    let mut offset = 0u64;
    let mut regions = Vec::with_capacity(ranges.len());
    for &(start, size) in ranges {
        let f = file.try_clone().map_err(|e| {
            vm_memory::mmap::FromRangesError::MmapRegion(vm_memory::mmap::MmapRegionError::Mmap(e))
        })?;
        let region = MmapRegionBuilder::new(size)
            .with_file_offset(FileOffset::new(f, offset))
            .with_mmap_prot(libc::PROT_READ | libc::PROT_WRITE)
            .with_mmap_flags(libc::MAP_NORESERVE | libc::MAP_PRIVATE)
            .build()
            .map_err(vm_memory::mmap::FromRangesError::MmapRegion)?;
        regions.push(
            GuestRegionMmap::new(region, start)
                .ok_or(vm_memory::mmap::FromRangesError::InvalidGuestRegion)?,
        );
        offset += size as u64;
    }
    GuestMemoryMmap::from_regions(regions).map_err(Into::into)
}

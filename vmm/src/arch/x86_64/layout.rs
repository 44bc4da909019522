//! Every guest-physical address and I/O port the VMM uses, in one place.
//!
//! Low memory follows the PC layout the Linux boot protocol expects (zero
//! page, command line and MP table below 1 MiB; kernel at 16 MiB). The
//! 32-bit MMIO gap sits below 4 GiB; RAM that does not fit below the gap
//! continues above 4 GiB.

/// GDT used to enter 64-bit or 32-bit (PVH) mode.
pub const BOOT_GDT_START: u64 = 0x500;
/// IDT left empty: the kernel installs its own before enabling interrupts.
pub const BOOT_IDT_START: u64 = 0x520;
/// PVH `hvm_start_info`.
pub const PVH_INFO_START: u64 = 0x6000;
/// PVH module list (the initrd).
pub const PVH_MODLIST_START: u64 = 0x6040;
/// PVH memory map.
pub const PVH_MEMMAP_START: u64 = 0x6100;
/// Linux zero page (`struct boot_params`).
pub const ZERO_PAGE_START: u64 = 0x7000;
/// Initial stack for the 64-bit entry.
pub const BOOT_STACK_POINTER: u64 = 0x8ff0;
/// Identity page tables for the 64-bit entry: PML4, PDPT, PD (2 MiB pages).
pub const PML4_START: u64 = 0x9000;
pub const PDPTE_START: u64 = 0xa000;
pub const PDE_START: u64 = 0xb000;
/// Kernel command line; x86 Linux reads at most 2048 bytes of it.
pub const CMDLINE_START: u64 = 0x20000;
pub const CMDLINE_MAX_SIZE: usize = 2048;
/// Start of the extended BIOS data area: the MP table lives here, where
/// Linux scans for it, and RAM below 1 MiB ends here.
pub const EBDA_START: u64 = 0x9fc00;
/// Start of high memory (1 MiB).
pub const HIMEM_START: u64 = 0x10_0000;

/// The 32-bit MMIO gap: [MMIO_GAP_START, 4 GiB). No RAM here.
pub const MMIO_GAP_START: u64 = 0xc000_0000;
pub const MMIO_GAP_END: u64 = 0x1_0000_0000;
/// Local APIC and IO-APIC, as the MP table announces them.
pub const APIC_START: u64 = 0xfee0_0000;
pub const IOAPIC_START: u64 = 0xfec0_0000;
/// virtio-mmio device windows are handed out from here, one per 4 KiB.
pub const MMIO_DEVICES_START: u64 = 0xd000_0000;
pub const MMIO_DEVICE_WINDOW: u64 = 0x1000;

/// Number of IO-APIC pins KVM's in-kernel IO-APIC offers.
pub const IOAPIC_PINS: u8 = 24;
/// Legacy IRQs: COM1.
pub const SERIAL_IRQ: u32 = 4;
/// First IRQ handed to virtio devices (after the legacy ISA ones we use).
pub const VIRTIO_IRQ_START: u32 = 5;
/// One IO-APIC pin each, from VIRTIO_IRQ_START to the last pin.
pub const MAX_VIRTIO_DEVICES: usize = IOAPIC_PINS as usize - VIRTIO_IRQ_START as usize;

/// I/O ports.
pub const SERIAL_PORT: u16 = 0x3f8;
pub const SERIAL_PORT_LEN: u16 = 8;
/// i8042 controller: only the command port matters (0xfe = reset).
pub const I8042_PORT: u16 = 0x60;
pub const I8042_PORT_LEN: u16 = 5;
/// Boot timer: the guest writes [`BOOT_TIMER_MAGIC`] here when userspace is up.
pub const BOOT_TIMER_PORT: u16 = 0x440;
/// Power-off with status: the guest writes its exit status (one byte) here.
pub const POWER_PORT: u16 = 0x441;

/// Upper bound for guest memory; well above what a microVM for one MCP
/// server needs, and low enough that a typo cannot ask for a terabyte.
pub const MAX_MEM_MIB: u64 = 64 * 1024;
/// Below this a Linux kernel with an initramfs cannot boot.
pub const MIN_MEM_MIB: u64 = 16;

/// RAM regions for `mem_size` bytes of guest memory: below the MMIO gap,
/// then above 4 GiB for whatever does not fit.
pub fn ram_regions(mem_size: u64) -> Vec<(u64, u64)> {
    if mem_size <= MMIO_GAP_START {
        vec![(0, mem_size)]
    } else {
        vec![
            (0, MMIO_GAP_START),
            (MMIO_GAP_END, mem_size - MMIO_GAP_START),
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn small_memory_is_one_region() {
        assert_eq!(ram_regions(128 << 20), vec![(0, 128 << 20)]);
    }

    #[test]
    fn memory_above_the_gap_moves_past_4g() {
        let regions = ram_regions(4 << 30);
        assert_eq!(
            regions,
            vec![(0, MMIO_GAP_START), (1 << 32, (4 << 30) - MMIO_GAP_START)]
        );
        let total: u64 = regions.iter().map(|r| r.1).sum();
        assert_eq!(total, 4 << 30);
    }

    #[test]
    fn fixed_structures_do_not_overlap() {
        let spans = [
            (BOOT_GDT_START, 0x20),
            (BOOT_IDT_START, 0x8),
            (PVH_INFO_START, 0x40),
            (PVH_MODLIST_START, 0x20),
            (PVH_MEMMAP_START, 0x100),
            (ZERO_PAGE_START, 0x1000),
            (PML4_START, 0x1000),
            (PDPTE_START, 0x1000),
            (PDE_START, 0x1000),
            (CMDLINE_START, CMDLINE_MAX_SIZE as u64),
        ];
        for (i, a) in spans.iter().enumerate() {
            for b in &spans[i + 1..] {
                assert!(
                    a.0 + a.1 <= b.0 || b.0 + b.1 <= a.0,
                    "{a:x?} overlaps {b:x?}"
                );
            }
            assert!(a.0 + a.1 <= EBDA_START);
        }
        assert!(BOOT_STACK_POINTER < PML4_START && BOOT_STACK_POINTER > ZERO_PAGE_START + 0x1000);
    }
}

//! Initial vCPU register state for the two boot entries we support.
//!
//! - Linux 64-bit boot protocol (Documentation/arch/x86/boot.rst, "64-bit
//!   boot protocol"): long mode, paging on with an identity map, `rsi`
//!   pointing at the zero page.
//! - PVH (xen/include/public/arch-x86/hvm/start_info.h): 32-bit protected
//!   mode, paging off, `rbx` pointing at `hvm_start_info`.

use kvm_bindings::{kvm_fpu, kvm_regs, kvm_sregs};
use vm_memory::{Bytes, GuestAddress};

use super::gdt;
use super::layout::*;
use crate::GuestMemoryMmap;

const X86_CR0_PE: u64 = 0x1;
const X86_CR0_ET: u64 = 0x10;
const X86_CR0_PG: u64 = 0x8000_0000;
const X86_CR4_PAE: u64 = 0x20;
const EFER_LME: u64 = 0x100;
const EFER_LMA: u64 = 0x400;

/// Where and how the boot vCPU enters the kernel.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BootEntry {
    /// 64-bit Linux boot protocol at this address.
    Linux64(u64),
    /// PVH 32-bit entry at this address.
    Pvh(u64),
}

impl BootEntry {
    pub fn address(self) -> u64 {
        match self {
            BootEntry::Linux64(a) | BootEntry::Pvh(a) => a,
        }
    }
}

/// General-purpose registers for the boot vCPU.
pub fn boot_regs(entry: BootEntry) -> kvm_regs {
    let mut regs = kvm_regs {
        rflags: 0x2, // bit 1 is reserved and must be set
        rip: entry.address(),
        ..Default::default()
    };
    match entry {
        BootEntry::Linux64(_) => {
            regs.rsp = BOOT_STACK_POINTER;
            regs.rbp = BOOT_STACK_POINTER;
            regs.rsi = ZERO_PAGE_START;
        }
        BootEntry::Pvh(_) => regs.rbx = PVH_INFO_START,
    }
    regs
}

/// Writes the boot GDT (and an empty IDT) to guest memory and returns the
/// special registers that use it. The 64-bit entry also needs the identity
/// page tables from [`write_page_tables`].
pub fn boot_sregs(
    mem: &GuestMemoryMmap,
    entry: BootEntry,
    mut sregs: kvm_sregs,
) -> Result<kvm_sregs, vm_memory::GuestMemoryError> {
    let table = match entry {
        BootEntry::Linux64(_) => gdt::table(gdt::CODE64, gdt::TSS64),
        BootEntry::Pvh(_) => gdt::table(gdt::CODE32, gdt::TSS32),
    };
    for (i, e) in table.iter().enumerate() {
        mem.write_obj(*e, GuestAddress(BOOT_GDT_START + (i as u64) * 8))?;
    }
    mem.write_obj(0u64, GuestAddress(BOOT_IDT_START))?;

    let code = gdt::segment(table[1], 1);
    let data = gdt::segment(table[2], 2);
    let tss = gdt::segment(table[3], 3);
    sregs.gdt.base = BOOT_GDT_START;
    sregs.gdt.limit = (std::mem::size_of_val(&table) - 1) as u16;
    sregs.idt.base = BOOT_IDT_START;
    sregs.idt.limit = 7;
    sregs.cs = code;
    sregs.ds = data;
    sregs.es = data;
    sregs.fs = data;
    sregs.gs = data;
    sregs.ss = data;
    sregs.tr = tss;

    match entry {
        BootEntry::Linux64(_) => {
            sregs.cr0 |= X86_CR0_PE | X86_CR0_PG;
            sregs.cr3 = PML4_START;
            sregs.cr4 |= X86_CR4_PAE;
            sregs.efer |= EFER_LME | EFER_LMA;
        }
        BootEntry::Pvh(_) => {
            sregs.cr0 = X86_CR0_PE | X86_CR0_ET;
            sregs.cr4 = 0;
            sregs.efer = 0;
        }
    }
    Ok(sregs)
}

/// Identity-maps the first 1 GiB with 2 MiB pages: enough for the kernel,
/// zero page and command line until the kernel builds its own tables.
pub fn write_page_tables(mem: &GuestMemoryMmap) -> Result<(), vm_memory::GuestMemoryError> {
    const PRESENT_RW: u64 = 0x3;
    const HUGE: u64 = 0x80;
    mem.write_obj(PDPTE_START | PRESENT_RW, GuestAddress(PML4_START))?;
    mem.write_obj(PDE_START | PRESENT_RW, GuestAddress(PDPTE_START))?;
    for i in 0..512u64 {
        mem.write_obj(
            (i << 21) | PRESENT_RW | HUGE,
            GuestAddress(PDE_START + i * 8),
        )?;
    }
    Ok(())
}

/// x87 and SSE control words as after reset (FNINIT, MXCSR default).
pub fn boot_fpu() -> kvm_fpu {
    kvm_fpu {
        fcw: 0x37f,
        mxcsr: 0x1f80,
        ..Default::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use vm_memory::GuestAddress;

    fn mem() -> GuestMemoryMmap {
        GuestMemoryMmap::from_ranges(&[(GuestAddress(0), 0x10_0000)]).unwrap()
    }

    #[test]
    fn linux64_entry_points_rsi_at_zero_page() {
        let regs = boot_regs(BootEntry::Linux64(0x100_0200));
        assert_eq!(regs.rip, 0x100_0200);
        assert_eq!(regs.rsi, ZERO_PAGE_START);
        assert_eq!(regs.rsp, BOOT_STACK_POINTER);
        assert_eq!(regs.rflags, 2);
    }

    #[test]
    fn pvh_entry_points_rbx_at_start_info() {
        let regs = boot_regs(BootEntry::Pvh(0x100_0000));
        assert_eq!(regs.rbx, PVH_INFO_START);
        assert_eq!(regs.rsi, 0);
    }

    #[test]
    fn linux64_sregs_enable_long_mode() {
        let m = mem();
        let s = boot_sregs(&m, BootEntry::Linux64(0), kvm_sregs::default()).unwrap();
        assert_eq!(s.cr3, PML4_START);
        assert_ne!(s.cr0 & X86_CR0_PG, 0);
        assert_ne!(s.efer & EFER_LMA, 0);
        assert_eq!(s.cs.l, 1);
        assert_eq!(s.cs.selector, 8);
        assert_eq!(s.ds.selector, 16);
        let gdt1: u64 = m.read_obj(GuestAddress(BOOT_GDT_START + 8)).unwrap();
        assert_eq!(gdt1, gdt::entry(gdt::CODE64, 0, 0xfffff));
    }

    #[test]
    fn pvh_sregs_are_protected_mode_without_paging() {
        let s = boot_sregs(&mem(), BootEntry::Pvh(0), kvm_sregs::default()).unwrap();
        assert_eq!(s.cr0 & X86_CR0_PG, 0);
        assert_ne!(s.cr0 & X86_CR0_PE, 0);
        assert_eq!(s.efer, 0);
        assert_eq!((s.cs.l, s.cs.db), (0, 1));
    }

    #[test]
    fn page_tables_identity_map_first_gib() {
        let m = mem();
        write_page_tables(&m).unwrap();
        let pml4: u64 = m.read_obj(GuestAddress(PML4_START)).unwrap();
        assert_eq!(pml4 & !0xfff, PDPTE_START);
        let pde5: u64 = m.read_obj(GuestAddress(PDE_START + 5 * 8)).unwrap();
        assert_eq!(pde5 & !0xfff, 5 << 21);
        assert_ne!(pde5 & 0x80, 0);
    }
}

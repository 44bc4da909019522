//! What the kernel reads at entry besides its registers: the memory map
//! (e820 for the Linux protocol, the PVH memmap otherwise), the command line
//! and the initrd location.

use linux_loader::loader::bootparam::{boot_e820_entry, boot_params, setup_header};
use linux_loader::loader::elf::start_info::{
    hvm_memmap_table_entry, hvm_modlist_entry, hvm_start_info,
};

use super::layout::*;

pub const E820_RAM: u32 = 1;
pub const E820_RESERVED: u32 = 2;

const KERNEL_BOOT_FLAG_MAGIC: u16 = 0xaa55;
const KERNEL_HDR_MAGIC: u32 = 0x5372_6448; // "HdrS"
const KERNEL_LOADER_OTHER: u8 = 0xff;
const KERNEL_MIN_ALIGNMENT: u32 = 0x0100_0000;
const XEN_HVM_START_MAGIC: u32 = 0x336e_c578;
const PAGE: u64 = 0x1000;

#[derive(Clone, Debug, thiserror::Error, PartialEq, Eq)]
pub enum BootParamsError {
    #[error("The initrd ({size} bytes) does not fit in guest memory between the kernel end {kernel_end:#x} and {limit:#x}; give the VM more memory or use a smaller initrd")]
    InitrdTooLarge {
        size: u64,
        kernel_end: u64,
        limit: u64,
    },
    #[error("The memory map has {0} entries; the zero page holds at most 128")]
    TooManyE820(usize),
}

/// A memory map entry: address, size, type (E820_RAM or E820_RESERVED).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MemoryRange {
    pub addr: u64,
    pub size: u64,
    pub kind: u32,
}

/// The guest's memory map for `mem_size` bytes of RAM: base memory up to
/// the EBDA (which holds the MP table), high memory from 1 MiB, and what
/// lies above the MMIO gap.
pub fn memory_map(mem_size: u64) -> Vec<MemoryRange> {
    let mut map = vec![MemoryRange {
        addr: 0,
        size: EBDA_START,
        kind: E820_RAM,
    }];
    for (start, size) in ram_regions(mem_size) {
        let (start, end) = (start.max(HIMEM_START), start + size);
        if end > start {
            map.push(MemoryRange {
                addr: start,
                size: end - start,
                kind: E820_RAM,
            });
        }
    }
    map
}

/// Where the initrd goes: as high as possible in low memory, page aligned,
/// above the kernel and below the kernel's `initrd_addr_max`.
pub fn initrd_address(
    mem_size: u64,
    kernel_end: u64,
    size: u64,
    addr_max: Option<u32>,
) -> Result<u64, BootParamsError> {
    let mut limit = mem_size.min(MMIO_GAP_START);
    if let Some(max) = addr_max.filter(|m| *m != 0) {
        limit = limit.min(u64::from(max) + 1);
    }
    let too_large = BootParamsError::InitrdTooLarge {
        size,
        kernel_end,
        limit,
    };
    let addr = limit.checked_sub(size).ok_or(too_large.clone())? & !(PAGE - 1);
    if addr < kernel_end {
        return Err(too_large);
    }
    Ok(addr)
}

/// The Linux zero page. `header` is the bzImage setup header when there is
/// one; an ELF kernel entered at its 64-bit entry gets a minimal one.
pub fn zero_page(
    header: Option<setup_header>,
    cmdline_size: usize,
    initrd: Option<(u64, u64)>,
    map: &[MemoryRange],
) -> Result<boot_params, BootParamsError> {
    let mut params = boot_params::default();
    params.hdr = header.unwrap_or_else(|| setup_header {
        boot_flag: KERNEL_BOOT_FLAG_MAGIC,
        header: KERNEL_HDR_MAGIC,
        kernel_alignment: KERNEL_MIN_ALIGNMENT,
        ..Default::default()
    });
    params.hdr.type_of_loader = KERNEL_LOADER_OTHER;
    params.hdr.cmd_line_ptr = CMDLINE_START as u32;
    params.hdr.cmdline_size = cmdline_size as u32;
    if let Some((addr, size)) = initrd {
        params.hdr.ramdisk_image = addr as u32;
        params.hdr.ramdisk_size = size as u32;
    }
    if map.len() > params.e820_table.len() {
        return Err(BootParamsError::TooManyE820(map.len()));
    }
    for (slot, range) in params.e820_table.iter_mut().zip(map) {
        *slot = boot_e820_entry {
            addr: range.addr,
            size: range.size,
            r#type: range.kind,
        };
    }
    params.e820_entries = map.len() as u8;
    Ok(params)
}

/// The PVH start info, its memory map and the initrd as its one module.
pub fn pvh_start_info(
    initrd: Option<(u64, u64)>,
    map: &[MemoryRange],
) -> (
    hvm_start_info,
    Vec<hvm_memmap_table_entry>,
    Option<hvm_modlist_entry>,
) {
    let memmap: Vec<_> = map
        .iter()
        .map(|r| hvm_memmap_table_entry {
            addr: r.addr,
            size: r.size,
            type_: r.kind,
            reserved: 0,
        })
        .collect();
    let module = initrd.map(|(paddr, size)| hvm_modlist_entry {
        paddr,
        size,
        ..Default::default()
    });
    let info = hvm_start_info {
        magic: XEN_HVM_START_MAGIC,
        version: 1,
        nr_modules: u32::from(module.is_some()),
        modlist_paddr: if module.is_some() {
            PVH_MODLIST_START
        } else {
            0
        },
        cmdline_paddr: CMDLINE_START,
        memmap_paddr: PVH_MEMMAP_START,
        memmap_entries: memmap.len() as u32,
        ..Default::default()
    };
    (info, memmap, module)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn memory_map_skips_the_bios_hole() {
        let map = memory_map(256 << 20);
        assert_eq!(map.len(), 2);
        assert_eq!(
            map[0],
            MemoryRange {
                addr: 0,
                size: EBDA_START,
                kind: E820_RAM
            }
        );
        assert_eq!(map[1].addr, HIMEM_START);
        assert_eq!(map[1].addr + map[1].size, 256 << 20);
    }

    #[test]
    fn memory_map_continues_above_4g() {
        let map = memory_map(5 << 30);
        assert_eq!(map.len(), 3);
        assert_eq!(map[1].addr + map[1].size, MMIO_GAP_START);
        assert_eq!(map[2].addr, MMIO_GAP_END);
        assert_eq!(map[2].size, (5 << 30) - MMIO_GAP_START);
    }

    #[test]
    fn initrd_goes_high_and_page_aligned() {
        let addr = initrd_address(128 << 20, 32 << 20, 10_000, None).unwrap();
        assert_eq!(addr % PAGE, 0);
        assert!(addr + 10_000 <= 128 << 20);
        assert!(addr > (127 << 20));
    }

    #[test]
    fn initrd_respects_addr_max() {
        let addr = initrd_address(8 << 30, 32 << 20, 4096, Some(0x7fff_ffff)).unwrap();
        assert!(addr + 4096 <= 0x8000_0000);
    }

    #[test]
    fn initrd_that_overlaps_kernel_is_refused() {
        let err = initrd_address(64 << 20, 40 << 20, 30 << 20, None).unwrap_err();
        assert!(matches!(err, BootParamsError::InitrdTooLarge { .. }));
        assert!(initrd_address(1 << 20, 0, 2 << 20, None).is_err());
    }

    #[test]
    fn zero_page_carries_cmdline_initrd_and_e820() {
        let map = memory_map(128 << 20);
        let p = zero_page(None, 42, Some((0x700_0000, 1234)), &map).unwrap();
        assert_eq!({ p.hdr.cmd_line_ptr }, CMDLINE_START as u32);
        assert_eq!({ p.hdr.cmdline_size }, 42);
        assert_eq!({ p.hdr.ramdisk_image }, 0x700_0000);
        assert_eq!({ p.hdr.ramdisk_size }, 1234);
        assert_eq!({ p.hdr.header }, KERNEL_HDR_MAGIC);
        assert_eq!(p.hdr.type_of_loader, KERNEL_LOADER_OTHER);
        assert_eq!(p.e820_entries, 2);
        assert_eq!({ p.e820_table[1].addr }, HIMEM_START);
    }

    #[test]
    fn zero_page_keeps_bzimage_header_fields() {
        let hdr = setup_header {
            header: KERNEL_HDR_MAGIC,
            version: 0x20f,
            loadflags: 1,
            ..Default::default()
        };
        let p = zero_page(Some(hdr), 1, None, &memory_map(64 << 20)).unwrap();
        assert_eq!({ p.hdr.version }, 0x20f);
        assert_eq!({ p.hdr.ramdisk_image }, 0);
    }

    #[test]
    fn pvh_info_lists_memmap_and_module() {
        let map = memory_map(128 << 20);
        let (info, memmap, module) = pvh_start_info(Some((0x100_0000, 77)), &map);
        assert_eq!(info.magic, XEN_HVM_START_MAGIC);
        assert_eq!(info.memmap_entries, 2);
        assert_eq!(memmap.len(), 2);
        assert_eq!(info.nr_modules, 1);
        assert_eq!(module.unwrap().size, 77);
        let (info, _, module) = pvh_start_info(None, &map);
        assert_eq!((info.nr_modules, info.modlist_paddr), (0, 0));
        assert!(module.is_none());
    }
}

//! The boot-parameter builders from any memory size, kernel end, initrd
//! size and limit, and any setup header a bzImage could carry (its bytes
//! come from the kernel file the user names): the initrd lands inside
//! RAM, above the kernel, below both its limit and the MMIO gap, or is
//! refused; the memory map never covers the MMIO gap; the zero page and
//! the PVH start info are built or refused, never a panic.
#![no_main]

use libfuzzer_sys::fuzz_target;
use mcpvm_fuzz::Input;
use vmm::arch::x86_64::boot_params::{initrd_address, memory_map, pvh_start_info, zero_page};
use vmm::arch::x86_64::layout::{MAX_MEM_MIB, MIN_MEM_MIB, MMIO_GAP_START};

fuzz_target!(|data: &[u8]| {
    let mut input = Input(data);
    let mib = MIN_MEM_MIB + u64::from(input.u32()) % (MAX_MEM_MIB - MIN_MEM_MIB + 1);
    let mem = mib << 20;
    let kernel_end = u64::from(input.u32());
    let size = u64::from(input.u32());
    let addr_max = match input.u8() {
        0 => None,
        _ => Some(input.u32()),
    };
    let map = memory_map(mem);
    for r in &map {
        let end = r.addr + r.size;
        assert!(
            end <= MMIO_GAP_START || r.addr >= 1 << 32,
            "RAM in the MMIO gap: {:#x}+{:#x}",
            r.addr,
            r.size
        );
    }
    let initrd = match initrd_address(mem, kernel_end, size, addr_max) {
        Ok(addr) => {
            assert!(addr >= kernel_end, "initrd below the kernel");
            assert!(addr + size <= mem.min(MMIO_GAP_START), "initrd past RAM");
            if let Some(max) = addr_max.filter(|m| *m != 0) {
                assert!(
                    addr + size <= u64::from(max) + 1,
                    "initrd past initrd_addr_max"
                );
            }
            Some((addr, size))
        }
        Err(_) => None,
    };
    let header_bytes = input.bytes(std::mem::size_of::<
        linux_loader::loader::bootparam::setup_header,
    >());
    let header = (header_bytes.len()
        == std::mem::size_of::<linux_loader::loader::bootparam::setup_header>())
    .then(|| {
        // SAFETY: setup_header is plain integers; any bytes are a value.
        unsafe { std::ptr::read_unaligned(header_bytes.as_ptr().cast()) }
    });
    let cmdline_size = usize::from(input.u16());
    if let Ok(p) = zero_page(header, cmdline_size, initrd, &map) {
        assert_eq!(usize::from(p.e820_entries), map.len());
    }
    let (_, memmap, module) = pvh_start_info(initrd, &map);
    assert_eq!(memmap.len(), map.len());
    assert_eq!(module.is_some(), initrd.is_some());
});

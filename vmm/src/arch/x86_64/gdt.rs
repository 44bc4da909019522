//! The boot GDT and its translation into KVM segment registers.
//!
//! The same table serves the 64-bit Linux entry and the 32-bit PVH entry;
//! only the code segment's flags differ (L bit vs D bit).

use kvm_bindings::kvm_segment;

/// Access/flags for a 64-bit code segment (present, ring 0, exec/read, L).
pub const CODE64: u16 = 0xa09b;
/// Access/flags for a 32-bit code segment (present, ring 0, exec/read, D, G).
pub const CODE32: u16 = 0xc09b;
/// Flat 4 GiB read/write data segment.
pub const DATA: u16 = 0xc093;
/// 64-bit TSS, busy.
pub const TSS64: u16 = 0x808b;
/// 32-bit TSS, busy.
pub const TSS32: u16 = 0x008b;

/// Encodes one GDT descriptor (Intel SDM vol. 3, 3.4.5).
pub fn entry(flags: u16, base: u32, limit: u32) -> u64 {
    let (flags, base, limit) = (flags as u64, base as u64, limit as u64);
    ((base & 0xff00_0000) << 32)
        | ((flags & 0xf0ff) << 40)
        | ((limit & 0x000f_0000) << 32)
        | ((base & 0x00ff_ffff) << 16)
        | (limit & 0x0000_ffff)
}

/// The boot GDT: null, code, data, TSS; `code` picks 64- or 32-bit code.
pub fn table(code: u16, tss: u16) -> [u64; 4] {
    [
        0,
        entry(code, 0, 0xfffff),
        entry(DATA, 0, 0xfffff),
        entry(tss, 0, 0xfffff),
    ]
}

/// The KVM segment register for GDT entry `index` of value `entry`.
pub fn segment(entry: u64, index: u8) -> kvm_segment {
    let field = |shift: u32, bits: u32| ((entry >> shift) & ((1u64 << bits) - 1)) as u8;
    let granular = field(55, 1) == 1;
    let raw_limit = ((entry & 0xffff) | ((entry >> 32) & 0xf_0000)) as u32;
    let present = field(47, 1);
    kvm_segment {
        base: ((entry >> 16) & 0xff_ffff) | ((entry >> 32) & 0xff00_0000),
        limit: if granular {
            (raw_limit << 12) | 0xfff
        } else {
            raw_limit
        },
        selector: u16::from(index) * 8,
        type_: field(40, 4),
        present,
        dpl: field(45, 2),
        db: field(54, 1),
        s: field(44, 1),
        l: field(53, 1),
        g: field(55, 1),
        avl: field(52, 1),
        unusable: u8::from(present == 0),
        padding: 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn code64_segment_decodes() {
        let seg = segment(entry(CODE64, 0, 0xfffff), 1);
        assert_eq!(seg.selector, 8);
        assert_eq!((seg.l, seg.db, seg.g, seg.present, seg.s), (1, 0, 1, 1, 1));
        assert_eq!(seg.type_, 0xb);
        assert_eq!(seg.limit, 0xffff_ffff);
        assert_eq!(seg.base, 0);
    }

    #[test]
    fn code32_segment_is_not_long() {
        let seg = segment(entry(CODE32, 0, 0xfffff), 1);
        assert_eq!((seg.l, seg.db), (0, 1));
    }

    #[test]
    fn base_and_limit_round_trip() {
        let seg = segment(entry(0x0093, 0x1234_5678, 0xabcde), 2);
        assert_eq!(seg.base, 0x1234_5678);
        assert_eq!(seg.limit, 0xabcde);
        assert_eq!(seg.g, 0);
        assert_eq!(seg.selector, 16);
    }

    #[test]
    fn null_entry_is_unusable() {
        assert_eq!(segment(0, 0).unusable, 1);
    }
}

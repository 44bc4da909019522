//! The Intel MultiProcessor Specification 1.4 table: how a guest without
//! ACPI learns its CPUs, the IO-APIC and how ISA IRQs are routed.
//!
//! Layout written at [`EBDA_START`]: the 16-byte floating pointer, then the
//! configuration table header, then its entries (processors, one ISA bus,
//! the IO-APIC, one I/O interrupt entry per IO-APIC pin, the two local
//! interrupt lines). Linux scans the last KiB of base memory for `_MP_`.

use vm_memory::{Bytes, GuestAddress};

use super::layout::{APIC_START, EBDA_START, IOAPIC_PINS, IOAPIC_START};
use crate::GuestMemoryMmap;

/// Most CPUs we describe: the table must stay inside the EBDA's first KiB
/// region the kernel scans, and the IO-APIC takes the ID after them.
pub const MAX_CPUS: u8 = 64;

const FLOATING_LEN: usize = 16;
const HEADER_LEN: usize = 44;
const PROCESSOR_LEN: usize = 20;
const SMALL_ENTRY_LEN: usize = 8;

const ENTRY_PROCESSOR: u8 = 0;
const ENTRY_BUS: u8 = 1;
const ENTRY_IOAPIC: u8 = 2;
const ENTRY_IO_INTERRUPT: u8 = 3;
const ENTRY_LOCAL_INTERRUPT: u8 = 4;

const CPU_ENABLED: u8 = 1;
const CPU_BOOTSTRAP: u8 = 2;
const APIC_VERSION: u8 = 0x14;
const IOAPIC_VERSION: u8 = 0x11;
const INT_TYPE_INT: u8 = 0;
const INT_TYPE_NMI: u8 = 1;
const INT_TYPE_EXTINT: u8 = 3;
/// CPU signature and feature flags as the spec suggests for modern CPUs
/// (stepping/model/family of a P6, FPU and APIC present).
const CPU_SIGNATURE: u32 = (6 << 8) | (1 << 4) | 1;
const CPU_FEATURES: u32 = (1 << 0) | (1 << 9);

#[derive(Debug, thiserror::Error)]
pub enum MptableError {
    #[error("An MP table describes at most {MAX_CPUS} vCPUs, {0} were asked for")]
    TooManyCpus(u8),
    #[error("Cannot write the MP table to guest memory")]
    Write(#[source] vm_memory::GuestMemoryError),
}

/// Size in bytes of the table for `cpus` vCPUs.
pub fn size(cpus: u8) -> usize {
    FLOATING_LEN
        + HEADER_LEN
        + PROCESSOR_LEN * cpus as usize
        + SMALL_ENTRY_LEN * (1 + 1 + IOAPIC_PINS as usize + 2)
}

/// Builds the table bytes for `cpus` vCPUs, as placed at `base`.
pub fn build(cpus: u8, base: u64) -> Result<Vec<u8>, MptableError> {
    if cpus == 0 || cpus > MAX_CPUS {
        return Err(MptableError::TooManyCpus(cpus));
    }
    let ioapic_id = cpus;
    let config_base = base + FLOATING_LEN as u64;

    let mut entries = Vec::new();
    for id in 0..cpus {
        let flags = CPU_ENABLED | if id == 0 { CPU_BOOTSTRAP } else { 0 };
        entries.extend_from_slice(&[ENTRY_PROCESSOR, id, APIC_VERSION, flags]);
        entries.extend_from_slice(&CPU_SIGNATURE.to_le_bytes());
        entries.extend_from_slice(&CPU_FEATURES.to_le_bytes());
        entries.extend_from_slice(&[0; 8]);
    }
    entries.extend_from_slice(&[ENTRY_BUS, 0]);
    entries.extend_from_slice(b"ISA   ");
    entries.extend_from_slice(&[ENTRY_IOAPIC, ioapic_id, IOAPIC_VERSION, 1]);
    entries.extend_from_slice(&(IOAPIC_START as u32).to_le_bytes());
    for pin in 0..IOAPIC_PINS {
        // Conforming polarity and trigger (flags 0): ISA defaults, edge high.
        entries.extend_from_slice(&[
            ENTRY_IO_INTERRUPT,
            INT_TYPE_INT,
            0,
            0,
            0,
            pin,
            ioapic_id,
            pin,
        ]);
    }
    // LINT0 takes the 8259's ExtINT, LINT1 takes NMI, on every local APIC.
    entries.extend_from_slice(&[ENTRY_LOCAL_INTERRUPT, INT_TYPE_EXTINT, 0, 0, 0, 0, 0xff, 0]);
    entries.extend_from_slice(&[ENTRY_LOCAL_INTERRUPT, INT_TYPE_NMI, 0, 0, 0, 0, 0xff, 1]);

    let entry_count = cpus as u16 + 1 + 1 + IOAPIC_PINS as u16 + 2;
    let table_len = (HEADER_LEN + entries.len()) as u16;
    let mut header = Vec::with_capacity(HEADER_LEN);
    header.extend_from_slice(b"PCMP");
    header.extend_from_slice(&table_len.to_le_bytes());
    header.push(4); // spec revision 1.4
    header.push(0); // checksum, below
    header.extend_from_slice(b"MCPVM   ");
    header.extend_from_slice(b"000000000000");
    header.extend_from_slice(&0u32.to_le_bytes()); // OEM table pointer
    header.extend_from_slice(&0u16.to_le_bytes()); // OEM table size
    header.extend_from_slice(&entry_count.to_le_bytes());
    header.extend_from_slice(&(APIC_START as u32).to_le_bytes());
    header.extend_from_slice(&0u32.to_le_bytes()); // extended table length, checksum, reserved
    header[7] = checksum(header.iter().chain(entries.iter()));

    let mut floating = Vec::with_capacity(FLOATING_LEN);
    floating.extend_from_slice(b"_MP_");
    floating.extend_from_slice(&(config_base as u32).to_le_bytes());
    floating.push(1); // length in 16-byte units
    floating.push(4); // spec revision 1.4
    floating.push(0); // checksum, below
    floating.extend_from_slice(&[0; 5]); // no default configuration, no IMCR
    floating[10] = checksum(floating.iter());

    let mut table = floating;
    table.extend_from_slice(&header);
    table.extend_from_slice(&entries);
    debug_assert_eq!(table.len(), size(cpus));
    Ok(table)
}

/// Writes the table for `cpus` vCPUs at [`EBDA_START`].
pub fn write(mem: &GuestMemoryMmap, cpus: u8) -> Result<(), MptableError> {
    let table = build(cpus, EBDA_START)?;
    mem.write_slice(&table, GuestAddress(EBDA_START))
        .map_err(MptableError::Write)
}

/// The byte that makes the covered bytes sum to zero (mod 256).
fn checksum<'a>(bytes: impl Iterator<Item = &'a u8>) -> u8 {
    bytes.fold(0u8, |s, b| s.wrapping_add(*b)).wrapping_neg()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sum(b: &[u8]) -> u8 {
        b.iter().fold(0u8, |s, x| s.wrapping_add(*x))
    }

    #[test]
    fn checksums_hold() {
        for cpus in [1, 2, 8, MAX_CPUS] {
            let t = build(cpus, EBDA_START).unwrap();
            assert_eq!(sum(&t[..FLOATING_LEN]), 0);
            assert_eq!(sum(&t[FLOATING_LEN..]), 0);
            assert_eq!(t.len(), size(cpus));
        }
    }

    #[test]
    fn floating_pointer_points_at_header() {
        let t = build(2, EBDA_START).unwrap();
        assert_eq!(&t[..4], b"_MP_");
        let ptr = u32::from_le_bytes(t[4..8].try_into().unwrap()) as u64;
        assert_eq!(ptr, EBDA_START + FLOATING_LEN as u64);
        assert_eq!(&t[16..20], b"PCMP");
        let len = u16::from_le_bytes(t[20..22].try_into().unwrap()) as usize;
        assert_eq!(len, t.len() - FLOATING_LEN);
    }

    #[test]
    fn processors_are_listed_with_one_bootstrap() {
        let t = build(4, EBDA_START).unwrap();
        let procs = &t[FLOATING_LEN + HEADER_LEN..][..4 * PROCESSOR_LEN];
        let flags: Vec<u8> = procs.chunks(PROCESSOR_LEN).map(|p| p[3]).collect();
        assert_eq!(flags, vec![3, 1, 1, 1]);
        let ids: Vec<u8> = procs.chunks(PROCESSOR_LEN).map(|p| p[1]).collect();
        assert_eq!(ids, vec![0, 1, 2, 3]);
    }

    #[test]
    fn ioapic_takes_the_id_after_the_cpus() {
        let t = build(3, EBDA_START).unwrap();
        let at = FLOATING_LEN + HEADER_LEN + 3 * PROCESSOR_LEN + SMALL_ENTRY_LEN;
        assert_eq!(t[at], ENTRY_IOAPIC);
        assert_eq!(t[at + 1], 3);
        assert_eq!(
            u32::from_le_bytes(t[at + 4..at + 8].try_into().unwrap()) as u64,
            IOAPIC_START
        );
    }

    #[test]
    fn too_many_or_zero_cpus_is_an_error() {
        assert!(build(0, EBDA_START).is_err());
        assert!(build(MAX_CPUS + 1, EBDA_START).is_err());
    }

    #[test]
    fn table_fits_below_one_mib() {
        assert!(EBDA_START + size(MAX_CPUS) as u64 <= 0x10_0000);
    }
}

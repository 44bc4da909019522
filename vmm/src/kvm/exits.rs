//! VM exits counted by reason and address: where a boot spends its trips
//! out of the guest. Every exit that reaches userspace costs a return from
//! `KVM_RUN`, a bus lookup and a re-entry (under nested emulation, a pair
//! of emulated world switches), so the ports and MMIO registers a guest
//! touches most are the first thing to look at when a boot is slow.
//!
//! Each vCPU thread counts in its own [`ExitCounter`] (no sharing on the
//! hot path) and adds it to the VM's [`ExitStats`] when it ends.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

/// What made the vCPU leave `KVM_RUN`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ExitKind {
    IoIn,
    IoOut,
    MmioRead,
    MmioWrite,
    /// A signal (our kick) interrupted `KVM_RUN`.
    Interrupted,
    /// Anything else (system events, halts, failures): the run ends.
    Other,
}

impl ExitKind {
    pub fn name(self) -> &'static str {
        match self {
            ExitKind::IoIn => "io_in",
            ExitKind::IoOut => "io_out",
            ExitKind::MmioRead => "mmio_read",
            ExitKind::MmioWrite => "mmio_write",
            ExitKind::Interrupted => "interrupted",
            ExitKind::Other => "other",
        }
    }
}

/// Distinct (kind, address) pairs one vCPU keeps apart. A guest chooses
/// the addresses it touches, so the table is bounded: exits at addresses
/// beyond it are counted together under [`OTHER_ADDRESSES`].
pub const MAX_ADDRESSES: usize = 256;
/// The address that stands for every address past [`MAX_ADDRESSES`].
pub const OTHER_ADDRESSES: u64 = u64::MAX;

/// One vCPU's counts: (kind, port or guest-physical address) → exits.
#[derive(Debug, Default)]
pub struct ExitCounter {
    counts: HashMap<(ExitKind, u64), u64>,
}

impl ExitCounter {
    pub fn count(&mut self, kind: ExitKind, addr: u64) {
        let key = if self.counts.len() < MAX_ADDRESSES || self.counts.contains_key(&(kind, addr)) {
            (kind, addr)
        } else {
            (kind, OTHER_ADDRESSES)
        };
        *self.counts.entry(key).or_default() += 1;
    }
}

/// One line of the summary: every exit of `kind` at `addr`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ExitCount {
    pub kind: ExitKind,
    pub addr: u64,
    pub count: u64,
}

/// The VM's exits, summed over its vCPUs as each ends.
#[derive(Clone, Debug, Default)]
pub struct ExitStats {
    inner: Arc<Mutex<HashMap<(ExitKind, u64), u64>>>,
}

impl ExitStats {
    /// Adds a finished vCPU's counts.
    pub fn add(&self, c: ExitCounter) {
        let mut all = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        for (key, n) in c.counts {
            *all.entry(key).or_default() += n;
        }
    }

    /// Every (kind, address) with its count, most exits first (ties by
    /// kind, then address, so the order is stable).
    pub fn summary(&self) -> Vec<ExitCount> {
        let all = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        let mut v: Vec<ExitCount> = all
            .iter()
            .map(|(&(kind, addr), &count)| ExitCount { kind, addr, count })
            .collect();
        v.sort_by(|a, b| {
            b.count
                .cmp(&a.count)
                .then(a.kind.cmp(&b.kind))
                .then(a.addr.cmp(&b.addr))
        });
        v
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_from_every_vcpu_are_summed_most_first() {
        let stats = ExitStats::default();
        let mut a = ExitCounter::default();
        for _ in 0..3 {
            a.count(ExitKind::IoOut, 0x3f8);
        }
        a.count(ExitKind::MmioWrite, 0xd000_0050);
        let mut b = ExitCounter::default();
        b.count(ExitKind::IoOut, 0x3f8);
        b.count(ExitKind::IoIn, 0x3fd);
        b.count(ExitKind::IoIn, 0x3fd);
        stats.add(a);
        stats.add(b);
        let s = stats.summary();
        assert_eq!(
            s,
            vec![
                ExitCount {
                    kind: ExitKind::IoOut,
                    addr: 0x3f8,
                    count: 4
                },
                ExitCount {
                    kind: ExitKind::IoIn,
                    addr: 0x3fd,
                    count: 2
                },
                ExitCount {
                    kind: ExitKind::MmioWrite,
                    addr: 0xd000_0050,
                    count: 1
                },
            ]
        );
    }

    #[test]
    fn a_guest_touching_endless_addresses_keeps_the_table_bounded() {
        let mut c = ExitCounter::default();
        for addr in 0..100_000u64 {
            c.count(ExitKind::MmioWrite, 0xd000_0000 + addr * 4);
        }
        // Kinds past the bound share one bucket each.
        c.count(ExitKind::IoIn, 0x3fd);
        assert!(c.counts.len() <= MAX_ADDRESSES + 2, "{}", c.counts.len());
        let stats = ExitStats::default();
        stats.add(c);
        let s = stats.summary();
        let total: u64 = s.iter().map(|e| e.count).sum();
        assert_eq!(total, 100_001, "every exit is still counted");
        assert_eq!(s[0].addr, OTHER_ADDRESSES);
        assert_eq!(s[0].count, 100_000 - (MAX_ADDRESSES as u64));
    }

    #[test]
    fn a_vm_that_never_ran_has_no_exits() {
        assert!(ExitStats::default().summary().is_empty());
    }
}

//! Address-range dispatch for port I/O and MMIO exits.
//!
//! A vCPU exit names an address; the bus finds the device whose range
//! holds it and hands over the offset inside that range. Unclaimed reads
//! see all ones, as on a PC bus with nothing attached; unclaimed writes are
//! dropped. The guest cannot add or move ranges.

use std::sync::{Arc, Mutex};

/// A device reachable through a bus range.
pub trait BusDevice: Send {
    fn read(&mut self, offset: u64, data: &mut [u8]);
    fn write(&mut self, offset: u64, data: &[u8]);
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum BusError {
    #[error("Device range {base:#x}+{len:#x} overlaps one already on the bus")]
    Overlap { base: u64, len: u64 },
    #[error("Device range {base:#x}+{len:#x} is empty or wraps around")]
    BadRange { base: u64, len: u64 },
}

struct Range {
    base: u64,
    len: u64,
    device: Arc<Mutex<dyn BusDevice>>,
}

#[derive(Default)]
pub struct Bus {
    ranges: Vec<Range>, // sorted by base, non-overlapping
}

impl Bus {
    pub fn new() -> Self {
        Self::default()
    }

    /// True when no device is attached.
    pub fn is_empty(&self) -> bool {
        self.ranges.is_empty()
    }

    pub fn insert(
        &mut self,
        device: Arc<Mutex<dyn BusDevice>>,
        base: u64,
        len: u64,
    ) -> Result<(), BusError> {
        if len == 0 || base.checked_add(len).is_none() {
            return Err(BusError::BadRange { base, len });
        }
        if self
            .ranges
            .iter()
            .any(|r| base < r.base + r.len && r.base < base + len)
        {
            return Err(BusError::Overlap { base, len });
        }
        let at = self.ranges.partition_point(|r| r.base < base);
        self.ranges.insert(at, Range { base, len, device });
        Ok(())
    }

    fn find(&self, addr: u64, size: usize) -> Option<(&Range, u64)> {
        let idx = self
            .ranges
            .partition_point(|r| r.base <= addr)
            .checked_sub(1)?;
        let r = &self.ranges[idx];
        let offset = addr - r.base;
        // The whole access must fall inside the range.
        (offset.checked_add(size as u64)? <= r.len).then_some((r, offset))
    }

    /// Returns false when no device claims the access.
    pub fn read(&self, addr: u64, data: &mut [u8]) -> bool {
        match self.find(addr, data.len()) {
            Some((r, offset)) => {
                lock(&r.device).read(offset, data);
                true
            }
            None => {
                data.fill(0xff);
                false
            }
        }
    }

    /// Returns false when no device claims the access.
    pub fn write(&self, addr: u64, data: &[u8]) -> bool {
        match self.find(addr, data.len()) {
            Some((r, offset)) => {
                lock(&r.device).write(offset, data);
                true
            }
            None => false,
        }
    }
}

/// A device mutex is only poisoned if a device panicked mid-access; its
/// state is then as good as any the guest could have produced, so carry on.
fn lock<'a>(
    m: &'a Mutex<dyn BusDevice + 'static>,
) -> std::sync::MutexGuard<'a, dyn BusDevice + 'static> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Default)]
    struct Recorder {
        writes: Vec<(u64, Vec<u8>)>,
    }

    impl BusDevice for Recorder {
        fn read(&mut self, offset: u64, data: &mut [u8]) {
            data.fill(offset as u8);
        }
        fn write(&mut self, offset: u64, data: &[u8]) {
            self.writes.push((offset, data.to_vec()));
        }
    }

    #[test]
    fn dispatches_by_range_with_offset() {
        let dev = Arc::new(Mutex::new(Recorder::default()));
        let mut bus = Bus::new();
        bus.insert(dev.clone(), 0x3f8, 8).unwrap();
        let mut b = [0u8; 1];
        assert!(bus.read(0x3fa, &mut b));
        assert_eq!(b, [2]);
        assert!(bus.write(0x3ff, &[7]));
        assert_eq!(dev.lock().unwrap().writes, vec![(7, vec![7])]);
    }

    #[test]
    fn unclaimed_reads_float_high() {
        let bus = Bus::new();
        let mut b = [0u8; 2];
        assert!(!bus.read(0x80, &mut b));
        assert_eq!(b, [0xff, 0xff]);
        assert!(!bus.write(0x80, &[1]));
    }

    #[test]
    fn access_straddling_the_end_is_unclaimed() {
        let mut bus = Bus::new();
        bus.insert(Arc::new(Mutex::new(Recorder::default())), 0x10, 4)
            .unwrap();
        let mut b = [0u8; 4];
        assert!(!bus.read(0x12, &mut b));
        assert!(bus.read(0x10, &mut b));
    }

    #[test]
    fn overlapping_and_empty_ranges_are_refused() {
        let mut bus = Bus::new();
        let d = || Arc::new(Mutex::new(Recorder::default()));
        bus.insert(d(), 0x100, 0x10).unwrap();
        assert_eq!(
            bus.insert(d(), 0x108, 0x10),
            Err(BusError::Overlap {
                base: 0x108,
                len: 0x10
            })
        );
        assert_eq!(
            bus.insert(d(), 0xf8, 0x9),
            Err(BusError::Overlap { base: 0xf8, len: 9 })
        );
        assert!(bus.insert(d(), 0xf0, 0x10).is_ok());
        assert!(matches!(
            bus.insert(d(), 0x200, 0),
            Err(BusError::BadRange { .. })
        ));
        assert!(matches!(
            bus.insert(d(), u64::MAX, 2),
            Err(BusError::BadRange { .. })
        ));
    }
}

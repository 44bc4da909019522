//! Boot timer: a one-port device the guest writes to when its userspace is
//! up, so boot time is measured by the VMM's own clock rather than parsed
//! from the console. Firecracker has the same device at an MMIO address;
//! ours is a port ([`BOOT_TIMER_PORT`]) because a PID 1 can reach a port
//! with `ioperm(2)` and no `/dev/mem`.
//!
//! [`BOOT_TIMER_PORT`]: crate::arch::x86_64::layout::BOOT_TIMER_PORT

use std::time::Instant;

use super::bus::BusDevice;
use super::{EventSender, VmEvent};

/// The byte the guest writes to mark "userspace is up".
pub const BOOT_TIMER_MAGIC: u8 = 123;

pub struct BootTimer {
    start: Instant,
    events: EventSender,
    fired: bool,
}

impl BootTimer {
    /// `start` is the instant the VMM process started.
    pub fn new(start: Instant, events: EventSender) -> Self {
        Self {
            start,
            events,
            fired: false,
        }
    }
}

impl BusDevice for BootTimer {
    fn read(&mut self, _offset: u64, data: &mut [u8]) {
        data.fill(0);
    }

    fn write(&mut self, offset: u64, data: &[u8]) {
        // Only the first magic write counts: a guest that keeps writing
        // cannot move the measurement or flood the VMM with events.
        if offset == 0 && data.first() == Some(&BOOT_TIMER_MAGIC) && !self.fired {
            self.fired = true;
            let _ = self
                .events
                .send(VmEvent::BootComplete(self.start.elapsed()));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::mpsc;

    #[test]
    fn magic_write_records_time_once() {
        let (tx, rx) = mpsc::channel();
        let start = Instant::now();
        let mut t = BootTimer::new(start, tx);
        t.write(0, &[1]);
        assert!(rx.try_recv().is_err());
        t.write(0, &[BOOT_TIMER_MAGIC]);
        match rx.try_recv().unwrap() {
            VmEvent::BootComplete(d) => assert!(d <= start.elapsed()),
            other => panic!("unexpected {other:?}"),
        }
        t.write(0, &[BOOT_TIMER_MAGIC]);
        assert!(rx.try_recv().is_err());
    }

    #[test]
    fn reads_are_zero() {
        let (tx, _rx) = mpsc::channel();
        let mut t = BootTimer::new(Instant::now(), tx);
        let mut b = [9u8; 4];
        t.read(0, &mut b);
        assert_eq!(b, [0; 4]);
    }
}

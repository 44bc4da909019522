//! Power-off with status: the guest writes one byte, its exit status, to
//! [`POWER_PORT`] and the VM stops with that status as the VMM's exit code.
//!
//! Without ACPI a Linux guest has no way to power off (its `poweroff` ends
//! in a halt loop), and a reset carries no status; this port gives the
//! guest agent both in one write, like QEMU's `isa-debug-exit` but without
//! mangling the value.
//!
//! [`POWER_PORT`]: crate::arch::x86_64::layout::POWER_PORT

use super::bus::BusDevice;
use super::{EventSender, VmEvent};
use crate::outcome::ExitReason;

pub struct PowerPort {
    events: EventSender,
}

impl PowerPort {
    pub fn new(events: EventSender) -> Self {
        Self { events }
    }
}

impl BusDevice for PowerPort {
    fn read(&mut self, _offset: u64, data: &mut [u8]) {
        data.fill(0);
    }

    fn write(&mut self, offset: u64, data: &[u8]) {
        if offset == 0 {
            if let Some(status) = data.first() {
                let _ = self
                    .events
                    .send(VmEvent::Exit(ExitReason::PowerOff(*status)));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::mpsc;

    #[test]
    fn write_powers_off_with_status() {
        let (tx, rx) = mpsc::channel();
        let mut p = PowerPort::new(tx);
        p.write(0, &[42]);
        assert_eq!(
            rx.try_recv().unwrap(),
            VmEvent::Exit(ExitReason::PowerOff(42))
        );
    }
}

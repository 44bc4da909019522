//! The i8042 keyboard controller, only for its CPU reset line: the guest
//! kernel booted with `reboot=k` writes 0xfe to port 0x64 to reboot, and
//! the VM stops. No keyboard is emulated; the kernel is built without the
//! i8042 driver, so it never probes one (probing costs boot time).

use vm_superio::{I8042Device, Trigger};

use crate::devices::bus::BusDevice;
use crate::devices::{EventSender, VmEvent};
use crate::outcome::ExitReason;

pub struct ResetTrigger(EventSender);

impl Trigger for ResetTrigger {
    type E = std::convert::Infallible;
    fn trigger(&self) -> Result<(), Self::E> {
        let _ = self.0.send(VmEvent::Exit(ExitReason::Reset));
        Ok(())
    }
}

pub struct I8042 {
    inner: I8042Device<ResetTrigger>,
}

impl I8042 {
    pub fn new(events: EventSender) -> Self {
        Self {
            inner: I8042Device::new(ResetTrigger(events)),
        }
    }
}

impl BusDevice for I8042 {
    fn read(&mut self, offset: u64, data: &mut [u8]) {
        // Status 0: input buffer empty, so the kernel's reset path does not
        // wait for a controller that will never drain.
        let v = u8::try_from(offset)
            .map(|o| self.inner.read(o))
            .unwrap_or(0);
        data.fill(v);
    }

    fn write(&mut self, offset: u64, data: &[u8]) {
        if let (Ok(off), Some(v)) = (u8::try_from(offset), data.first()) {
            let _ = self.inner.write(off, *v);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::mpsc;

    #[test]
    fn reset_command_stops_the_vm() {
        let (tx, rx) = mpsc::channel();
        let mut dev = I8042::new(tx);
        dev.write(4, &[0xaa]);
        assert!(rx.try_recv().is_err());
        dev.write(4, &[0xfe]);
        assert_eq!(rx.try_recv().unwrap(), VmEvent::Exit(ExitReason::Reset));
    }

    #[test]
    fn status_reads_idle() {
        let (tx, _rx) = mpsc::channel();
        let mut dev = I8042::new(tx);
        let mut b = [0xffu8];
        dev.read(4, &mut b);
        assert_eq!(b, [0]);
    }
}

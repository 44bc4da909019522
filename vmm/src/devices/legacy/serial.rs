//! The 8250 UART at COM1 (vm-superio's register model), wired to an irqfd
//! on IRQ 4 and to the chosen console output.
//!
//! The console output also watches for the kernel's panic line, so a panic
//! followed by `panic=-1`'s reset is reported as a panic, not a clean reset.

use std::io::{self, Write};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use vm_superio::serial::NoEvents;
use vm_superio::{Serial, Trigger};
use vmm_sys_util::eventfd::EventFd;

use serde::{Deserialize, Serialize};

use crate::devices::bus::BusDevice;

const PANIC_MARKER: &[u8] = b"Kernel panic - not syncing";
const LINE_LIMIT: usize = 512;

/// Raises the serial IRQ by writing to an eventfd registered as an irqfd.
pub struct IrqTrigger(pub EventFd);

impl Trigger for IrqTrigger {
    type E = io::Error;
    fn trigger(&self) -> io::Result<()> {
        self.0.write(1)
    }
}

/// Console bytes go to `out`; lines are checked for the panic marker.
pub struct ConsoleOut {
    out: Box<dyn Write + Send>,
    line: Vec<u8>,
    panicked: Arc<AtomicBool>,
}

impl ConsoleOut {
    pub fn new(out: Box<dyn Write + Send>, panicked: Arc<AtomicBool>) -> Self {
        Self {
            out,
            line: Vec::with_capacity(LINE_LIMIT),
            panicked,
        }
    }

    fn scan(&mut self, b: u8) {
        if b == b'\n' {
            self.line.clear();
            return;
        }
        if self.line.len() < LINE_LIMIT {
            self.line.push(b);
            if self.line.ends_with(PANIC_MARKER) {
                self.panicked.store(true, Ordering::Relaxed);
            }
        }
    }
}

impl Write for ConsoleOut {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        buf.iter().for_each(|b| self.scan(*b));
        // A console whose reader went away must not stop the guest.
        let _ = self.out.write_all(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        self.out.flush()
    }
}

pub struct SerialDevice {
    uart: Serial<IrqTrigger, NoEvents, ConsoleOut>,
}

impl SerialDevice {
    pub fn new(irq: EventFd, out: ConsoleOut) -> Self {
        Self {
            uart: Serial::new(IrqTrigger(irq), out),
        }
    }

    /// A UART with the registers and input of a saved one. Raises the
    /// interrupt again if one was pending.
    pub fn from_state(
        irq: EventFd,
        out: ConsoleOut,
        state: &vm_superio::serial::SerialState,
    ) -> Result<Self, String> {
        Serial::from_state(state, IrqTrigger(irq), NoEvents, out)
            .map(|uart| Self { uart })
            .map_err(|e| format!("{e:?}"))
    }

    pub fn state(&self) -> vm_superio::serial::SerialState {
        self.uart.state()
    }

    pub fn flush(&mut self) {
        let _ = self.uart.writer_mut().flush();
    }
}

impl BusDevice for SerialDevice {
    fn read(&mut self, offset: u64, data: &mut [u8]) {
        // The UART has byte-wide registers; wider accesses read as zeros.
        match (data.len(), u8::try_from(offset)) {
            (1, Ok(off)) => data[0] = self.uart.read(off),
            _ => data.fill(0),
        }
    }

    fn write(&mut self, offset: u64, data: &[u8]) {
        if let (1, Ok(off)) = (data.len(), u8::try_from(offset)) {
            // The only error is a failed IRQ trigger; the guest's driver
            // copes with a lost THRE interrupt by polling.
            let _ = self.uart.write(off, data[0]);
        }
    }
}

/// The 16550 UART's registers and receive buffer (vm-superio's state).
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
pub struct SerialState {
    pub registers: [u8; 9],
    pub in_buffer: Vec<u8>,
}

impl From<&vm_superio::serial::SerialState> for SerialState {
    fn from(s: &vm_superio::serial::SerialState) -> Self {
        SerialState {
            registers: [
                s.baud_divisor_low,
                s.baud_divisor_high,
                s.interrupt_enable,
                s.interrupt_identification,
                s.line_control,
                s.line_status,
                s.modem_control,
                s.modem_status,
                s.scratch,
            ],
            in_buffer: s.in_buffer.clone(),
        }
    }
}

impl From<&SerialState> for vm_superio::serial::SerialState {
    fn from(s: &SerialState) -> Self {
        let r = s.registers;
        vm_superio::serial::SerialState {
            baud_divisor_low: r[0],
            baud_divisor_high: r[1],
            interrupt_enable: r[2],
            interrupt_identification: r[3],
            line_control: r[4],
            line_status: r[5],
            modem_control: r[6],
            modem_status: r[7],
            scratch: r[8],
            in_buffer: s.in_buffer.clone(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Mutex;

    #[derive(Clone, Default)]
    struct Shared(Arc<Mutex<Vec<u8>>>);
    impl Write for Shared {
        fn write(&mut self, b: &[u8]) -> io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(b);
            Ok(b.len())
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    fn device() -> (SerialDevice, Shared, Arc<AtomicBool>, EventFd) {
        let sink = Shared::default();
        let flag = Arc::new(AtomicBool::new(false));
        let irq = EventFd::new(libc::EFD_NONBLOCK).unwrap();
        let dev = SerialDevice::new(
            irq.try_clone().unwrap(),
            ConsoleOut::new(Box::new(sink.clone()), flag.clone()),
        );
        (dev, sink, flag, irq)
    }

    #[test]
    fn transmit_register_writes_reach_the_console() {
        let (mut dev, sink, flag, _irq) = device();
        for b in b"hello\n" {
            dev.write(0, &[*b]);
        }
        assert_eq!(&*sink.0.lock().unwrap(), b"hello\n");
        assert!(!flag.load(Ordering::Relaxed));
    }

    #[test]
    fn panic_line_sets_the_flag() {
        let (mut dev, _sink, flag, _irq) = device();
        for b in b"[ 1.0] Kernel panic - not syncing: VFS\n" {
            dev.write(0, &[*b]);
        }
        assert!(flag.load(Ordering::Relaxed));
    }

    #[test]
    fn thre_interrupt_fires_when_enabled() {
        let (mut dev, _sink, _flag, irq) = device();
        dev.write(1, &[0x02]); // IER: transmitter holding register empty
        dev.write(0, &[b'x']);
        assert!(irq.read().unwrap() >= 1);
    }

    #[test]
    fn line_status_reports_transmitter_empty() {
        let (mut dev, _sink, _flag, _irq) = device();
        let mut lsr = [0u8];
        dev.read(5, &mut lsr);
        assert_ne!(lsr[0] & 0x20, 0);
    }

    #[test]
    fn wide_accesses_are_harmless() {
        let (mut dev, sink, _flag, _irq) = device();
        dev.write(0, &[1, 2, 3, 4]);
        let mut b = [7u8; 4];
        dev.read(0, &mut b);
        assert_eq!(b, [0; 4]);
        assert!(sink.0.lock().unwrap().is_empty());
    }
}

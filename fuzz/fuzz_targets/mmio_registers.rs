//! The virtio-mmio register file under any sequence of reads and writes
//! of any width and value, at any offset of the device window, with a
//! real device (virtio-rng) behind it so that DRIVER_OK activates it on
//! queues the sequence itself set up.
#![no_main]

use libfuzzer_sys::fuzz_target;
use mcpvm_fuzz::{memory, Input};
use vmm::devices::bus::BusDevice;
use vmm::devices::virtio::mmio::MmioTransport;
use vmm::devices::virtio::rng::Rng;
use vmm::host_seccomp::SeccompMode;
use vmm_sys_util::eventfd::EventFd;

fuzz_target!(|data: &[u8]| {
    let mut input = Input(data);
    let Ok(irq) = EventFd::new(libc::EFD_NONBLOCK) else {
        return;
    };
    let Ok(mut t) = MmioTransport::new(Box::new(Rng::new()), memory(), irq, SeccompMode::Off)
    else {
        return;
    };
    while !input.is_empty() {
        let op = input.u8();
        // Mostly the registers (0x000..0x100) and config space, sometimes
        // anywhere in the 4 KiB window.
        let offset = if op & 0x80 != 0 {
            u64::from(input.u16() & 0xfff)
        } else {
            u64::from(input.u8() & 0xfc)
        };
        let width = [1usize, 2, 4, 8][usize::from(op >> 1 & 3)];
        if op & 1 == 0 {
            let mut buf = [0u8; 8];
            t.read(offset, &mut buf[..width]);
        } else {
            let v = input.u64().to_le_bytes();
            t.write(offset, &v[..width]);
        }
    }
});

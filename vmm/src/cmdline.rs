//! The guest kernel command line: what the VMM itself depends on, the
//! devices it declares (there is no bus to discover virtio-mmio devices
//! on), then the user's options, in that order so the user's come last
//! and win where the kernel takes the last value.

use linux_loader::cmdline::{Cmdline, Error};

use crate::arch::x86_64::layout::{CMDLINE_MAX_SIZE, MMIO_DEVICE_WINDOW};

/// `reboot=k` makes a guest reboot reach our i8042 reset line; `panic=-1`
/// turns a panic into that reboot at once instead of a hang until the
/// timeout.
pub const BASE: &str = "reboot=k panic=-1";

/// Builds the command line. `virtio` lists (MMIO base, IRQ) per device.
pub fn compose(console: bool, virtio: &[(u64, u32)], user: &str) -> Result<Cmdline, Error> {
    let mut cl = Cmdline::new(CMDLINE_MAX_SIZE)?;
    cl.insert_str(BASE)?;
    if console {
        cl.insert_str("console=ttyS0")?;
    }
    for (base, irq) in virtio {
        cl.insert_str(format!(
            "virtio_mmio.device={}K@{base:#x}:{irq}",
            MMIO_DEVICE_WINDOW >> 10
        ))?;
    }
    if !user.trim().is_empty() {
        cl.insert_str(user.trim())?;
    }
    Ok(cl)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(cl: &Cmdline) -> String {
        cl.as_cstring().unwrap().into_string().unwrap()
    }

    #[test]
    fn base_console_devices_then_user() {
        let cl = compose(
            true,
            &[(0xd000_0000, 5), (0xd000_1000, 6)],
            " quiet -- /bin/sh ",
        )
        .unwrap();
        assert_eq!(
            s(&cl),
            "reboot=k panic=-1 console=ttyS0 virtio_mmio.device=4K@0xd0000000:5 \
             virtio_mmio.device=4K@0xd0001000:6 quiet -- /bin/sh"
        );
    }

    #[test]
    fn no_console_no_devices_no_user() {
        assert_eq!(s(&compose(false, &[], "  ").unwrap()), BASE);
    }

    #[test]
    fn too_long_is_an_error() {
        assert_eq!(
            compose(false, &[], &"x".repeat(CMDLINE_MAX_SIZE)).unwrap_err(),
            Error::TooLarge
        );
    }

    #[test]
    fn interior_nul_is_rejected() {
        assert!(compose(false, &[], "a\0b").is_err());
    }
}

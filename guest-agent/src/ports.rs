//! The two VMM ports the agent writes to (see vmm's
//! `arch::x86_64::layout`): the boot timer and the power-off-with-status
//! port. The agent runs as root in the guest, so `ioperm(2)` grants them.

use std::io;

/// Boot timer port and the value that marks "userspace is up".
pub const BOOT_TIMER_PORT: u16 = 0x440;
pub const BOOT_TIMER_MAGIC: u8 = 123;
/// Power-off port: the byte written is the VM's exit status.
pub const POWER_PORT: u16 = 0x441;

fn outb(port: u16, value: u8) -> io::Result<()> {
    // SAFETY: ioperm grants this process access to exactly one port; the
    // write has no effect on our memory.
    unsafe {
        if libc::ioperm(port.into(), 1, 1) != 0 {
            return Err(io::Error::last_os_error());
        }
        std::arch::asm!("out dx, al", in("dx") port, in("al") value, options(nomem, nostack, preserves_flags));
    }
    Ok(())
}

/// Tells the VMM that userspace is up.
pub fn signal_boot() -> io::Result<()> {
    outb(BOOT_TIMER_PORT, BOOT_TIMER_MAGIC)
}

/// Stops the VM with `status`. Returns only if the port write failed.
pub fn power_off(status: u8) -> io::Error {
    match outb(POWER_PORT, status) {
        // The VMM stops the vCPU on the write; if we ever get here it did
        // not, so fall back to a reset (reboot=k), which still ends the VM.
        Ok(()) => {
            // SAFETY: plain syscall; we are PID 1 and about to go away.
            unsafe { libc::reboot(libc::RB_AUTOBOOT) };
            io::Error::last_os_error()
        }
        Err(e) => e,
    }
}

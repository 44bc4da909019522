//! A vCPU: its boot-time configuration and the run loop that dispatches
//! exits to the port-I/O and MMIO buses.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Instant;

use kvm_bindings::{kvm_lapic_state, CpuId};
use kvm_ioctls::{VcpuExit, VcpuFd, VmFd};

use crate::arch::x86_64::{msr, regs};
use crate::devices::bus::Bus;
use crate::devices::{EventSender, VmEvent};
use crate::outcome::ExitReason;
use crate::GuestMemoryMmap;

/// Local APIC register offsets and delivery modes (Intel SDM vol. 3, 10.5.1).
const APIC_LVT0: usize = 0x350;
const APIC_LVT1: usize = 0x360;
const APIC_MODE_NMI: u32 = 0x4;
const APIC_MODE_EXTINT: u32 = 0x7;

#[derive(Debug, thiserror::Error)]
pub enum VcpuError {
    #[error("Cannot create vCPU {id}")]
    Create {
        id: u8,
        #[source]
        source: kvm_ioctls::Error,
    },
    #[error("Cannot set vCPU {id}'s {what}")]
    Configure {
        id: u8,
        what: &'static str,
        #[source]
        source: kvm_ioctls::Error,
    },
    #[error("Cannot write vCPU {id}'s boot structures to guest memory")]
    Memory {
        id: u8,
        #[source]
        source: vm_memory::GuestMemoryError,
    },
}

pub struct Vcpu {
    pub id: u8,
    fd: VcpuFd,
}

/// What a running vCPU needs from the VM.
#[derive(Clone)]
pub struct VcpuContext {
    pub pio: Arc<Bus>,
    pub mmio: Arc<Bus>,
    pub events: EventSender,
    pub stop: Arc<AtomicBool>,
    pub start: Instant,
}

impl Vcpu {
    pub fn new(vm: &VmFd, id: u8) -> Result<Self, VcpuError> {
        let fd = vm
            .create_vcpu(u64::from(id))
            .map_err(|source| VcpuError::Create { id, source })?;
        Ok(Self { id, fd })
    }

    /// The KVM vCPU, for callers that set up their own register state.
    pub fn fd(&self) -> &VcpuFd {
        &self.fd
    }

    /// CPUID, MSRs, FPU and LAPIC for every vCPU; registers and segments
    /// only for the boot vCPU (`entry` is Some). Application processors
    /// wait in KVM for INIT/SIPI from the boot vCPU.
    pub fn configure(
        &self,
        cpuid: &CpuId,
        mem: &GuestMemoryMmap,
        entry: Option<regs::BootEntry>,
    ) -> Result<(), VcpuError> {
        let id = self.id;
        let cfg = |what| move |source| VcpuError::Configure { id, what, source };
        self.fd.set_cpuid2(cpuid).map_err(cfg("CPUID"))?;
        self.fd.set_msrs(&msr::boot_msrs()).map_err(cfg("MSRs"))?;
        self.fd.set_fpu(&regs::boot_fpu()).map_err(cfg("FPU"))?;
        let mut lapic = self.fd.get_lapic().map_err(cfg("local APIC"))?;
        set_lint(&mut lapic);
        self.fd.set_lapic(&lapic).map_err(cfg("local APIC"))?;

        if let Some(entry) = entry {
            if let regs::BootEntry::Linux64(_) = entry {
                regs::write_page_tables(mem).map_err(|source| VcpuError::Memory { id, source })?;
            }
            let sregs = self.fd.get_sregs().map_err(cfg("special registers"))?;
            let sregs = regs::boot_sregs(mem, entry, sregs)
                .map_err(|source| VcpuError::Memory { id, source })?;
            self.fd
                .set_sregs(&sregs)
                .map_err(cfg("special registers"))?;
            self.fd
                .set_regs(&regs::boot_regs(entry))
                .map_err(cfg("registers"))?;
        }
        Ok(())
    }

    /// Runs the guest until it stops or `ctx.stop` is set. Exits that end
    /// the VM are reported on `ctx.events`.
    pub fn run(mut self, ctx: VcpuContext) {
        let mut first = true;
        while !ctx.stop.load(Ordering::Acquire) {
            if first && self.id == 0 {
                let _ = ctx.events.send(VmEvent::KernelEntry(ctx.start.elapsed()));
            }
            first = false;
            let exit = match self.fd.run() {
                Ok(exit) => exit,
                Err(e) if e.errno() == libc::EINTR || e.errno() == libc::EAGAIN => continue,
                Err(e) => {
                    let why = format!("KVM_RUN failed on vCPU {}: {e}", self.id);
                    let _ = ctx.events.send(VmEvent::Exit(ExitReason::Crash(why)));
                    return;
                }
            };
            let stop = match exit {
                VcpuExit::IoIn(port, data) => {
                    ctx.pio.read(u64::from(port), data);
                    None
                }
                VcpuExit::IoOut(port, data) => {
                    ctx.pio.write(u64::from(port), data);
                    None
                }
                VcpuExit::MmioRead(addr, data) => {
                    ctx.mmio.read(addr, data);
                    None
                }
                VcpuExit::MmioWrite(addr, data) => {
                    ctx.mmio.write(addr, data);
                    None
                }
                // With the in-kernel LAPIC, HLT only reaches us when the
                // guest halted for good (interrupts off).
                VcpuExit::Hlt => Some(ExitReason::Crash(format!("vCPU {} halted", self.id))),
                VcpuExit::Shutdown => Some(ExitReason::Crash(format!(
                    "vCPU {} triple-faulted (KVM_EXIT_SHUTDOWN)",
                    self.id
                ))),
                VcpuExit::SystemEvent(kind, _) => Some(match kind {
                    kvm_bindings::KVM_SYSTEM_EVENT_RESET => ExitReason::Reset,
                    kvm_bindings::KVM_SYSTEM_EVENT_SHUTDOWN => ExitReason::PowerOff(0),
                    other => ExitReason::Crash(format!("KVM system event {other}")),
                }),
                VcpuExit::FailEntry(reason, cpu) => Some(ExitReason::Crash(format!(
                    "VM entry failed on CPU {cpu}, hardware reason {reason:#x}"
                ))),
                VcpuExit::InternalError => Some(ExitReason::Crash(format!(
                    "KVM internal error on vCPU {}",
                    self.id
                ))),
                VcpuExit::Intr => None,
                other => Some(ExitReason::Crash(format!(
                    "unhandled exit {other:?} on vCPU {}",
                    self.id
                ))),
            };
            if let Some(reason) = stop {
                let _ = ctx.events.send(VmEvent::Exit(reason));
                return;
            }
        }
    }
}

/// Routes LINT0 to the 8259 (ExtINT) and LINT1 to NMI, as the MP table says.
fn set_lint(lapic: &mut kvm_lapic_state) {
    for (reg, mode) in [(APIC_LVT0, APIC_MODE_EXTINT), (APIC_LVT1, APIC_MODE_NMI)] {
        let bytes: Vec<u8> = lapic.regs[reg..reg + 4].iter().map(|b| *b as u8).collect();
        let v = u32::from_le_bytes(bytes.try_into().expect("4 bytes"));
        let v = (v & !0x700) | (mode << 8);
        for (dst, src) in lapic.regs[reg..reg + 4].iter_mut().zip(v.to_le_bytes()) {
            *dst = src as _;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lint_modes_are_set_and_other_bits_kept() {
        let mut lapic = kvm_lapic_state::default();
        lapic.regs[APIC_LVT0] = 0x12;
        lapic.regs[APIC_LVT0 + 1] = 0x05; // old mode bits
        set_lint(&mut lapic);
        let read = |r: usize| {
            u32::from_le_bytes([
                lapic.regs[r] as u8,
                lapic.regs[r + 1] as u8,
                lapic.regs[r + 2] as u8,
                lapic.regs[r + 3] as u8,
            ])
        };
        assert_eq!((read(APIC_LVT0) >> 8) & 7, APIC_MODE_EXTINT);
        assert_eq!(read(APIC_LVT0) & 0xff, 0x12);
        assert_eq!((read(APIC_LVT1) >> 8) & 7, APIC_MODE_NMI);
    }
}

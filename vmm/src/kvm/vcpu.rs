//! A vCPU: its boot-time configuration and the run loop that dispatches
//! exits to the port-I/O and MMIO buses.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};
use std::time::Instant;

use kvm_bindings::{kvm_lapic_state, kvm_sregs, CpuId, Msrs};
use kvm_ioctls::{VcpuExit, VcpuFd, VmFd};

use super::exits::{ExitCounter, ExitKind, ExitStats};
use super::persist::{Pod, VcpuState};
use crate::arch::x86_64::{msr, regs};
use crate::devices::bus::Bus;
use crate::devices::{EventSender, VmEvent};
use crate::outcome::ExitReason;
use crate::snapshot::SnapshotError;
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
    /// The MSRs a snapshot saves: every one KVM lists.
    msr_list: Vec<u32>,
}

/// What a running vCPU needs from the VM.
#[derive(Clone)]
pub struct VcpuContext {
    pub pio: Arc<Bus>,
    pub mmio: Arc<Bus>,
    pub events: EventSender,
    pub stop: Arc<AtomicBool>,
    /// Set to pause for a snapshot: the vCPU saves its state, sends it on
    /// `saved` and ends.
    pub pause: Arc<AtomicBool>,
    pub saved: mpsc::Sender<Result<VcpuState, SnapshotError>>,
    pub start: Instant,
    /// Where the vCPU adds its exit counts when it ends.
    pub exits: ExitStats,
}

impl Vcpu {
    pub fn new(vm: &VmFd, id: u8) -> Result<Self, VcpuError> {
        let fd = vm
            .create_vcpu(u64::from(id))
            .map_err(|source| VcpuError::Create { id, source })?;
        Ok(Self {
            id,
            fd,
            msr_list: Vec::new(),
        })
    }

    /// The MSRs [`Self::save_state`] reads (KVM_GET_MSR_INDEX_LIST).
    pub fn set_msr_list(&mut self, list: Vec<u32>) {
        self.msr_list = list;
    }

    /// Everything KVM holds for this vCPU. Call with the vCPU out of
    /// `KVM_RUN` and its last exit completed (see [`Self::run`]).
    pub fn save_state(&self) -> Result<VcpuState, SnapshotError> {
        let cap = |what: &str| {
            let what = format!("vCPU {}'s {what}", self.id);
            move |source| SnapshotError::Capture { what, source }
        };
        let fd = &self.fd;
        Ok(VcpuState {
            id: self.id,
            mp_state: Pod::of(&fd.get_mp_state().map_err(cap("MP state"))?),
            regs: Pod::of(&fd.get_regs().map_err(cap("registers"))?),
            sregs: Pod::of(&fd.get_sregs().map_err(cap("special registers"))?),
            xsave: Pod::of(&fd.get_xsave().map_err(cap("XSAVE area"))?),
            xcrs: Pod::of(&fd.get_xcrs().map_err(cap("XCRs"))?),
            debugregs: Pod::of(&fd.get_debug_regs().map_err(cap("debug registers"))?),
            lapic: Pod::of(&fd.get_lapic().map_err(cap("local APIC"))?),
            msrs: self.save_msrs().map_err(cap("MSRs"))?,
            vcpu_events: Pod::of(&fd.get_vcpu_events().map_err(cap("pending events"))?),
        })
    }

    /// Reads every listed MSR KVM gives. KVM_GET_MSRS stops at the first
    /// one it cannot read (some are listed but absent on this CPU): that
    /// one is skipped and the read goes on after it.
    fn save_msrs(&self) -> Result<Vec<(u32, u64)>, kvm_ioctls::Error> {
        let mut out = Vec::with_capacity(self.msr_list.len());
        let mut rest = &self.msr_list[..];
        while !rest.is_empty() {
            let chunk = &rest[..rest.len().min(kvm_bindings::KVM_MAX_MSR_ENTRIES)];
            let entries: Vec<kvm_bindings::kvm_msr_entry> = chunk
                .iter()
                .map(|&index| kvm_bindings::kvm_msr_entry {
                    index,
                    ..Default::default()
                })
                .collect();
            let mut msrs = Msrs::from_entries(&entries).expect("at most KVM_MAX_MSR_ENTRIES");
            let n = self.fd.get_msrs(&mut msrs)?;
            out.extend(msrs.as_slice()[..n].iter().map(|e| (e.index, e.data)));
            // Skip the one that failed, if any.
            rest = &rest[(n + usize::from(n < chunk.len())).min(rest.len())..];
        }
        Ok(out)
    }

    /// Puts a saved state back, in the order KVM needs: MP state before
    /// registers, the LAPIC before MSRs (the TSC deadline), pending
    /// events last. CPUID must be set already.
    pub fn restore_state(&self, s: &VcpuState) -> Result<(), SnapshotError> {
        let id = self.id;
        let bad = |why: String| SnapshotError::Invalid {
            path: PathBuf::new(),
            why,
        };
        let set = |what: &str| {
            let what = format!("vCPU {id}'s {what}");
            move |source| SnapshotError::Restore { what, source }
        };
        let fd = &self.fd;
        fd.set_mp_state(s.mp_state.get("MP state").map_err(bad)?)
            .map_err(set("MP state"))?;
        fd.set_regs(&s.regs.get("registers").map_err(bad)?)
            .map_err(set("registers"))?;
        let mut sregs: kvm_sregs = s.sregs.get("special registers").map_err(bad)?;
        available_tss_on_amd(&mut sregs);
        fd.set_sregs(&sregs).map_err(set("special registers"))?;
        let xsave: kvm_bindings::kvm_xsave = s.xsave.get("XSAVE area").map_err(bad)?;
        // SAFETY: a kvm_xsave of exactly the size KVM_GET_XSAVE gave, as
        // KVM_SET_XSAVE expects (no extra area).
        unsafe { fd.set_xsave(&xsave) }.map_err(set("XSAVE area"))?;
        fd.set_xcrs(&s.xcrs.get("XCRs").map_err(bad)?)
            .map_err(set("XCRs"))?;
        fd.set_debug_regs(&s.debugregs.get("debug registers").map_err(bad)?)
            .map_err(set("debug registers"))?;
        fd.set_lapic(&s.lapic.get("local APIC").map_err(bad)?)
            .map_err(set("local APIC"))?;
        for chunk in s.msrs.chunks(kvm_bindings::KVM_MAX_MSR_ENTRIES) {
            let entries: Vec<kvm_bindings::kvm_msr_entry> = chunk
                .iter()
                .map(|&(index, data)| kvm_bindings::kvm_msr_entry {
                    index,
                    data,
                    ..Default::default()
                })
                .collect();
            let msrs = Msrs::from_entries(&entries).expect("at most KVM_MAX_MSR_ENTRIES");
            let n = fd.set_msrs(&msrs).map_err(set("MSRs"))?;
            if n != entries.len() {
                return Err(bad(format!(
                    "MSR {:#x} of vCPU {id} cannot be set on this host",
                    entries[n].index
                )));
            }
        }
        fd.set_vcpu_events(&s.vcpu_events.get("pending events").map_err(bad)?)
            .map_err(set("pending events"))?;
        Ok(())
    }

    /// The KVM vCPU, for callers that set up their own register state.
    pub fn fd(&self) -> &VcpuFd {
        &self.fd
    }

    /// CPUID alone: what a restored vCPU needs before its saved state.
    pub fn set_cpuid(&self, cpuid: &CpuId) -> Result<(), VcpuError> {
        let id = self.id;
        self.fd
            .set_cpuid2(cpuid)
            .map_err(|source| VcpuError::Configure {
                id,
                what: "CPUID",
                source,
            })
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
        let mut exits = ExitCounter::default();
        self.run_counted(&ctx, &mut exits);
        ctx.exits.add(exits);
    }

    fn run_counted(&mut self, ctx: &VcpuContext, exits: &mut ExitCounter) {
        let mut first = true;
        while !ctx.stop.load(Ordering::Acquire) {
            if first && self.id == 0 {
                let _ = ctx.events.send(VmEvent::KernelEntry(ctx.start.elapsed()));
            }
            first = false;
            if ctx.pause.load(Ordering::Acquire) {
                // KVM completes the last exit's I/O on the next entry:
                // enter once with immediate_exit so the saved state has it.
                self.fd.set_kvm_immediate_exit(1);
                let _ = self.fd.run();
                self.fd.set_kvm_immediate_exit(0);
                let _ = ctx.saved.send(self.save_state());
                return;
            }
            let exit = match self.fd.run() {
                Ok(exit) => exit,
                Err(e) if e.errno() == libc::EINTR || e.errno() == libc::EAGAIN => {
                    exits.count(ExitKind::Interrupted, 0);
                    continue;
                }
                Err(e) => {
                    let why = format!("KVM_RUN failed on vCPU {}: {e}", self.id);
                    let _ = ctx.events.send(VmEvent::Exit(ExitReason::Crash(why)));
                    return;
                }
            };
            let stop = match exit {
                VcpuExit::IoIn(port, data) => {
                    exits.count(ExitKind::IoIn, u64::from(port));
                    ctx.pio.read(u64::from(port), data);
                    None
                }
                VcpuExit::IoOut(port, data) => {
                    exits.count(ExitKind::IoOut, u64::from(port));
                    ctx.pio.write(u64::from(port), data);
                    None
                }
                VcpuExit::MmioRead(addr, data) => {
                    exits.count(ExitKind::MmioRead, addr);
                    ctx.mmio.read(addr, data);
                    None
                }
                VcpuExit::MmioWrite(addr, data) => {
                    exits.count(ExitKind::MmioWrite, addr);
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
                VcpuExit::Intr => {
                    exits.count(ExitKind::Interrupted, 0);
                    None
                }
                other => Some(ExitReason::Crash(format!(
                    "unhandled exit {other:?} on vCPU {}",
                    self.id
                ))),
            };
            if let Some(reason) = stop {
                exits.count(ExitKind::Other, 0);
                let _ = ctx.events.send(VmEvent::Exit(reason));
                return;
            }
        }
    }
}

/// System segment types of a 64-bit TSS (Intel SDM vol. 3, 3.5).
const TSS_AVAILABLE: u8 = 9;
const TSS_BUSY: u8 = 11;

/// KVM on AMD reports the task register as a busy TSS whatever the
/// processor holds (svm_get_segment sets the bit). AMD processors ignore
/// the difference, but QEMU's SVM emulation (the testbed) then fails every
/// I/O permission bitmap check with #GP, so a restored guest's `ioperm`
/// ports fault. On AMD the register goes back as an available TSS, as the
/// guest's LTR left it; Intel's VM entry requires busy, and gets it.
fn available_tss_on_amd(sregs: &mut kvm_sregs) {
    let vendor = std::arch::x86_64::__cpuid(0);
    let amd = (vendor.ebx, vendor.edx, vendor.ecx) == (0x6874_7541, 0x6974_6e65, 0x444d_4163);
    if amd && sregs.tr.type_ == TSS_BUSY {
        sregs.tr.type_ = TSS_AVAILABLE;
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

//! Device models. Legacy PC devices sit on the port-I/O bus, virtio
//! devices on the MMIO bus. Devices tell the VMM about guest events (kernel
//! entry, boot complete, power off, reset, crash) through the [`VmEvent`]
//! channel, on which the embedder's stop and snapshot requests arrive too
//! (`crate::handle`).

pub mod boot_timer;
pub mod bus;
pub mod legacy;
pub mod power;
pub mod virtio;

use std::sync::mpsc;
use std::time::Duration;

use crate::outcome::ExitReason;

/// Something a device saw that the VMM's main loop must act on.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum VmEvent {
    /// The boot vCPU is about to enter the guest for the first time.
    KernelEntry(Duration),
    /// The guest wrote the boot-timer magic; time since VMM start.
    BootComplete(Duration),
    /// The guest asked to stop.
    Exit(ExitReason),
    /// The embedder (or a signal) asks the VM to stop.
    Stop(ExitReason),
    /// The embedder (or SIGUSR1) asks for a snapshot.
    Snapshot,
}

pub type EventSender = mpsc::Sender<VmEvent>;

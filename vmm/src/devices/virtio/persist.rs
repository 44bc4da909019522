//! What a snapshot keeps of each virtio device: what it is (its
//! [`DeviceSpec`], from which restore makes it again) and the registers
//! its virtio-mmio transport holds.

use serde::{Deserialize, Serialize};

use super::DeviceSpec;

/// A virtio device: what it is, so that restore can make it again, and
/// its transport registers. Queue positions are not saved: a stopped
/// worker holds no chain, so the next available and next used index are
/// both the used ring's index, in guest memory.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
pub struct VirtioState {
    pub device: DeviceSpec,
    pub transport: TransportState,
}

/// The virtio-mmio registers the driver set (virtio 1.2, section 4.2.2).
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct TransportState {
    pub status: u32,
    pub features_sel: u32,
    pub driver_features_sel: u32,
    pub driver_features: u64,
    pub queue_sel: u32,
    pub config_generation: u32,
    pub interrupt_status: u32,
    pub activated: bool,
    pub queues: Vec<QueueRegs>,
}

/// One queue as the driver configured it.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct QueueRegs {
    pub size: u16,
    pub ready: bool,
    pub desc: u64,
    pub avail: u64,
    pub used: u64,
}

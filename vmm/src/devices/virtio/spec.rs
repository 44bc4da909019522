//! What a virtio device is, as far as making it goes: the one list the
//! builder turns into devices when a VM boots (from its config) and when it
//! is restored (from its snapshot, where it is saved as is).

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

/// One virtio device to make.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum DeviceSpec {
    /// A disk image, reopened from the same path on restore.
    Block {
        path: PathBuf,
        read_only: bool,
        direct: bool,
        id: String,
        /// Its size when saved: the guest's page cache knows its content.
        bytes: u64,
    },
    /// vsock with this guest CID; its host socket is the restoring run's.
    Vsock {
        guest_cid: u64,
    },
    Rng,
}

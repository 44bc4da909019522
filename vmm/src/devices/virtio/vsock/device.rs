//! The virtio-vsock device: its features, configuration and activation,
//! which starts the worker of [`super::event_handler`].

use std::os::unix::net::UnixListener;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use vmm_sys_util::eventfd::EventFd;

use super::connector::Connector;
use super::event_handler::Worker;
use super::muxer::Muxer;
use super::*;
use crate::devices::virtio::{
    read_config_bytes, ActivateError, Activation, VirtioDevice, WorkerThread, TYPE_VSOCK,
    VIRTIO_F_VERSION_1, VIRTIO_RING_F_EVENT_IDX,
};
use crate::host_seccomp::{SeccompMode, ThreadKind};

#[derive(Debug, thiserror::Error)]
pub enum VsockError {
    #[error("Guest CID {0} is reserved; use 3 or above")]
    Cid(u64),
    #[error("Cannot listen on vsock socket {path}")]
    Listen {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

pub struct Vsock {
    cid: u64,
    uds_path: PathBuf,
    /// Shared by every activation's muxer; the thread ends with the device.
    connector: Arc<Connector>,
    listener: Option<UnixListener>,
    acked: u64,
    worker: Option<WorkerThread<UnixListener>>,
}

impl Vsock {
    /// Binds the host listener at `uds_path` (replacing a stale socket
    /// file) so that host programs can connect before the guest is up, and
    /// starts the connector thread (confined in `mode`) that alone may
    /// connect to `<uds_path>_<port>`.
    pub fn new(cid: u64, uds_path: &Path, mode: SeccompMode) -> Result<Self, VsockError> {
        if cid < 3 || cid > u64::from(u32::MAX) {
            return Err(VsockError::Cid(cid));
        }
        let listen_err = |source| VsockError::Listen {
            path: uds_path.to_path_buf(),
            source,
        };
        if uds_path.exists() {
            std::fs::remove_file(uds_path).map_err(listen_err)?;
        }
        let listener = UnixListener::bind(uds_path).map_err(listen_err)?;
        listener.set_nonblocking(true).map_err(listen_err)?;
        let connector = Connector::start(uds_path, mode).map_err(listen_err)?;
        Ok(Self {
            cid,
            uds_path: uds_path.to_path_buf(),
            connector: Arc::new(connector),
            listener: Some(listener),
            acked: 0,
            worker: None,
        })
    }

    fn stop_worker(&mut self) {
        if let Some(listener) = self.worker.take().and_then(WorkerThread::stop) {
            self.listener = Some(listener);
        }
    }
}

impl Drop for Vsock {
    fn drop(&mut self) {
        self.stop_worker();
        let _ = std::fs::remove_file(&self.uds_path);
    }
}

impl VirtioDevice for Vsock {
    fn thread_kind(&self) -> ThreadKind {
        ThreadKind::Vsock
    }

    fn device_type(&self) -> u32 {
        TYPE_VSOCK
    }

    fn queue_max_sizes(&self) -> &[u16] {
        &QUEUE_SIZES
    }

    fn features(&self) -> u64 {
        // EVENT_IDX: the guest kicks only when we asked to be woken, and we
        // interrupt only past the used index it waits for; without it every
        // packet costs a kick and every batch an interrupt, each of them
        // VM exits (measured in docs/benchmarks.md, "Relay").
        VIRTIO_F_VERSION_1 | VIRTIO_RING_F_EVENT_IDX
    }

    fn ack_features(&mut self, features: u64) {
        self.acked = features;
    }

    fn read_config(&self, offset: u64, data: &mut [u8]) {
        // struct virtio_vsock_config { le64 guest_cid; }
        read_config_bytes(&self.cid.to_le_bytes(), offset, data);
    }

    fn activate(&mut self, a: Activation) -> Result<(), ActivateError> {
        if a.queues.len() != QUEUE_SIZES.len() || a.queue_evts.len() != QUEUE_SIZES.len() {
            return Err(ActivateError::QueueCount {
                expected: QUEUE_SIZES.len(),
                got: a.queues.len(),
            });
        }
        let listener = self.listener.take().ok_or(ActivateError::Lost)?;
        let thread = a.thread.clone();
        let kill = EventFd::new(libc::EFD_NONBLOCK).map_err(ActivateError::Worker)?;
        let mut worker = Worker::new(
            a,
            Muxer::new(self.cid, self.connector.clone()),
            listener,
            kill.try_clone().map_err(ActivateError::Worker)?,
        )
        .map_err(ActivateError::Worker)?;
        self.worker = Some(thread.start(kill, move || {
            worker.run();
            worker.listener
        })?);
        Ok(())
    }

    fn reset(&mut self) {
        self.stop_worker();
    }
}

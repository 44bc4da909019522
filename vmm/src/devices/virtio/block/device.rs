//! The virtio-blk device and its worker thread.

use vmm_sys_util::eventfd::EventFd;

use super::disk::Disk;
use super::request::execute;
use super::*;
use crate::devices::virtio::queue_worker::QueueWorker;
use crate::devices::virtio::{
    read_config_bytes, ActivateError, Activation, VirtioDevice, WorkerThread, TYPE_BLOCK,
    VIRTIO_F_VERSION_1,
};
use crate::host_seccomp::ThreadKind;

pub struct Block {
    /// Home while the worker is stopped.
    disk: Option<Disk>,
    sectors: u64,
    read_only: bool,
    acked: u64,
    worker: Option<WorkerThread<Disk>>,
}

impl Block {
    pub fn new(disk: Disk) -> Self {
        Block {
            sectors: disk.sectors(),
            read_only: disk.read_only(),
            disk: Some(disk),
            acked: 0,
            worker: None,
        }
    }

    fn stop_worker(&mut self) {
        if let Some(disk) = self.worker.take().and_then(WorkerThread::stop) {
            self.disk = Some(disk);
        }
    }

    /// struct virtio_blk_config, up to blk_size (section 5.2.4).
    fn config(&self) -> [u8; 24] {
        let mut c = [0u8; 24];
        c[0..8].copy_from_slice(&self.sectors.to_le_bytes());
        // size_max (8..12) not offered; seg_max:
        c[12..16].copy_from_slice(&(u32::from(QUEUE_SIZE) - 2).to_le_bytes());
        // geometry (16..20) not offered; blk_size:
        c[20..24].copy_from_slice(&(SECTOR as u32).to_le_bytes());
        c
    }
}

impl Drop for Block {
    fn drop(&mut self) {
        self.stop_worker();
    }
}

impl VirtioDevice for Block {
    fn thread_kind(&self) -> ThreadKind {
        ThreadKind::Block
    }

    fn device_type(&self) -> u32 {
        TYPE_BLOCK
    }

    fn queue_max_sizes(&self) -> &[u16] {
        &QUEUE_SIZES
    }

    fn features(&self) -> u64 {
        let ro = if self.read_only { F_RO } else { 0 };
        VIRTIO_F_VERSION_1 | F_FLUSH | F_SEG_MAX | F_BLK_SIZE | ro
    }

    fn ack_features(&mut self, features: u64) {
        self.acked = features;
    }

    fn read_config(&self, offset: u64, data: &mut [u8]) {
        read_config_bytes(&self.config(), offset, data);
    }

    fn activate(&mut self, a: Activation) -> Result<(), ActivateError> {
        let thread = a.thread.clone();
        let kill = EventFd::new(libc::EFD_NONBLOCK).map_err(ActivateError::Worker)?;
        let mut worker = QueueWorker::new(a, &kill)?;
        let mut disk = self.disk.take().ok_or(ActivateError::Lost)?;
        self.worker = Some(thread.start(kill, move || {
            worker.run("virtio-blk", |mem, chain| execute(&mut disk, mem, chain));
            disk
        })?);
        Ok(())
    }

    fn reset(&mut self) {
        self.stop_worker();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::devices::virtio::block::request::tests::{disk, header, mem, DATA, HDR, STATUS};
    use crate::devices::virtio::block::request::HEADER_LEN;
    use crate::devices::virtio::Interrupt;
    use std::sync::Arc;
    use virtio_queue::desc::{split::Descriptor as SplitDescriptor, RawDescriptor};
    use virtio_queue::mock::MockSplitQueue;
    use vm_memory::{Bytes, GuestAddress};

    #[test]
    fn features_and_config_describe_the_disk() {
        let (d, _t) = disk(&vec![0u8; 10 * 512], true);
        let b = Block::new(d);
        assert_eq!(b.features() & F_RO, F_RO);
        assert_eq!(b.features() & F_FLUSH, F_FLUSH);
        let mut cap = [0u8; 8];
        b.read_config(0, &mut cap);
        assert_eq!(u64::from_le_bytes(cap), 10);
        let mut blk = [0u8; 4];
        b.read_config(20, &mut blk);
        assert_eq!(u32::from_le_bytes(blk), 512);
        let (d, _t) = disk(&vec![0u8; 512], false);
        assert_eq!(Block::new(d).features() & F_RO, 0);
    }

    #[test]
    fn the_worker_runs_every_queued_request_and_interrupts() {
        let (d, _t) = disk(
            &(0..4096).map(|i| (i % 256) as u8).collect::<Vec<_>>(),
            false,
        );
        let m = mem();
        let q = MockSplitQueue::create(&m, GuestAddress(0), 16);
        // Two reads of one sector each: sectors 1 and 2.
        let mut descs = Vec::new();
        for i in 0..2u64 {
            let hdr = HDR + i * 0x100;
            m.write_slice(&header(T_IN, i + 1), GuestAddress(hdr))
                .unwrap();
            let base = i as u16 * 3;
            descs.push(RawDescriptor::from(SplitDescriptor::new(
                hdr,
                HEADER_LEN as u32,
                1,
                base + 1,
            )));
            descs.push(RawDescriptor::from(SplitDescriptor::new(
                DATA + i * 0x1000,
                512,
                3,
                base + 2,
            )));
            descs.push(RawDescriptor::from(SplitDescriptor::new(
                STATUS + i,
                1,
                2,
                0,
            )));
        }
        q.add_desc_chains(&descs, 0).unwrap();
        let irq = EventFd::new(libc::EFD_NONBLOCK).unwrap();
        let a = Activation {
            mem: m.clone(),
            queues: vec![q.create_queue().unwrap()],
            queue_evts: vec![EventFd::new(libc::EFD_NONBLOCK).unwrap()],
            interrupt: Arc::new(Interrupt::new(irq.try_clone().unwrap())),
            thread: crate::devices::virtio::tests::unconfined_thread(),
            restored: false,
        };
        let kill = EventFd::new(libc::EFD_NONBLOCK).unwrap();
        let mut w = QueueWorker::new(a, &kill).unwrap();
        let mut d = d;
        w.process(|mem, chain| execute(&mut d, mem, chain));
        assert_eq!(irq.read().unwrap(), 1);
        for i in 0..2u64 {
            assert_eq!(m.read_obj::<u8>(GuestAddress(STATUS + i)).unwrap(), S_OK);
            let mut got = [0u8; 4];
            m.read_slice(&mut got, GuestAddress(DATA + i * 0x1000))
                .unwrap();
            // Sector i+1 starts with byte (512 * (i+1)) % 256 = 0.
            assert_eq!(got, [0, 1, 2, 3]);
        }
        assert_eq!(q.used().idx().load(), 2);
    }
}

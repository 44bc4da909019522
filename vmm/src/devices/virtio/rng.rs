//! virtio-rng, the entropy device (virtio 1.2, section 5.4): one queue of
//! device-writable buffers that the device fills from the host's
//! `getrandom(2)`. The guest kernel feeds what it reads into its own pool
//! (hw_random), so `/dev/random` and `getrandom()` in the guest do not
//! wait on boot-time entropy. Withholding it (`no-rng` profiles) leaves the
//! guest with its CPU jitter and RDRAND only.
//!
//! A chain gets at most [`MAX_PER_CHAIN`] bytes however large its buffers
//! claim to be, so a guest cannot make the device generate unbounded data
//! per request; a chain with no writable buffer is returned with length 0.

use vmm_sys_util::eventfd::EventFd;

use super::queue_worker::{Chain, QueueWorker};
use super::{ActivateError, Activation, VirtioDevice, WorkerThread, TYPE_RNG, VIRTIO_F_VERSION_1};
use crate::host_seccomp::ThreadKind;
use crate::GuestMemoryMmap;

pub const QUEUE_SIZES: [u16; 1] = [64];
/// The most bytes one request is given.
pub const MAX_PER_CHAIN: usize = 64 * 1024;

#[derive(Default)]
pub struct Rng {
    worker: Option<WorkerThread<()>>,
}

impl Rng {
    pub fn new() -> Self {
        Rng::default()
    }
}

impl Drop for Rng {
    fn drop(&mut self) {
        self.reset();
    }
}

impl VirtioDevice for Rng {
    fn thread_kind(&self) -> ThreadKind {
        ThreadKind::Rng
    }

    fn device_type(&self) -> u32 {
        TYPE_RNG
    }

    fn queue_max_sizes(&self) -> &[u16] {
        &QUEUE_SIZES
    }

    fn features(&self) -> u64 {
        VIRTIO_F_VERSION_1
    }

    fn ack_features(&mut self, _features: u64) {}

    /// No config space (section 5.4.4).
    fn read_config(&self, _offset: u64, data: &mut [u8]) {
        data.fill(0);
    }

    fn activate(&mut self, a: Activation) -> Result<(), ActivateError> {
        let thread = a.thread.clone();
        let kill = EventFd::new(libc::EFD_NONBLOCK).map_err(ActivateError::Worker)?;
        let mut worker = QueueWorker::new(a, &kill)?;
        self.worker = Some(thread.start(kill, move || {
            worker.run("virtio-rng", fill);
        })?);
        Ok(())
    }

    fn reset(&mut self) {
        if let Some(w) = self.worker.take() {
            w.stop();
        }
    }
}

/// Fills the chain's writable buffers with random bytes; returns how many.
pub fn fill(mem: &GuestMemoryMmap, chain: Chain<'_>) -> u32 {
    let Ok(mut writer) = chain.writer(mem) else {
        return 0;
    };
    let want = writer.available_bytes().min(MAX_PER_CHAIN);
    let mut bytes = vec![0u8; want];
    let mut got = 0;
    while got < want {
        // SAFETY: the pointer and length describe the unfilled tail of
        // `bytes`, which outlives the call.
        let n = unsafe { libc::getrandom(bytes[got..].as_mut_ptr().cast(), want - got, 0) };
        match n {
            n if n > 0 => got += n as usize,
            _ if std::io::Error::last_os_error().kind() == std::io::ErrorKind::Interrupted => {}
            _ => {
                log::error!(
                    "virtio-rng: getrandom failed: {}",
                    std::io::Error::last_os_error()
                );
                return 0;
            }
        }
    }
    match std::io::Write::write(&mut writer, &bytes) {
        Ok(n) => n as u32,
        Err(_) => 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::devices::virtio::Interrupt;
    use std::sync::Arc;
    use virtio_queue::desc::{split::Descriptor as SplitDescriptor, RawDescriptor};
    use virtio_queue::mock::MockSplitQueue;
    use vm_memory::{Bytes, GuestAddress};

    const WRITE: u16 = 2;
    const NEXT: u16 = 1;

    fn run(descs: &[RawDescriptor]) -> (GuestMemoryMmap, Vec<u32>) {
        let m = GuestMemoryMmap::from_ranges(&[(GuestAddress(0), 0x40_0000)]).unwrap();
        let q = MockSplitQueue::create(&m, GuestAddress(0), 16);
        q.add_desc_chains(descs, 0).unwrap();
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
        let mut lens = Vec::new();
        w.process(|mem, chain| {
            let n = fill(mem, chain);
            lens.push(n);
            n
        });
        (m, lens)
    }

    fn desc(addr: u64, len: u32, flags: u16, next: u16) -> RawDescriptor {
        RawDescriptor::from(SplitDescriptor::new(addr, len, flags, next))
    }

    #[test]
    fn fills_every_writable_buffer_of_a_chain() {
        let (m, lens) = run(&[
            desc(0x10_0000, 256, WRITE | NEXT, 1),
            desc(0x20_0000, 256, WRITE, 0),
        ]);
        assert_eq!(lens, [512]);
        let mut a = [0u8; 256];
        m.read_slice(&mut a, GuestAddress(0x10_0000)).unwrap();
        // 256 zero bytes from getrandom: about 2^-2048.
        assert!(a.iter().any(|&b| b != 0));
    }

    #[test]
    fn a_huge_buffer_gets_the_cap() {
        let (_, lens) = run(&[desc(0x10_0000, 0x20_0000, WRITE, 0)]);
        assert_eq!(lens, [MAX_PER_CHAIN as u32]);
    }

    #[test]
    fn read_only_or_outside_buffers_get_nothing() {
        let (_, lens) = run(&[
            desc(0x10_0000, 256, 0, 0),
            desc(0x7fff_0000_0000, 256, WRITE, 0),
        ]);
        assert_eq!(lens, [0, 0]);
    }

    #[test]
    fn a_chain_with_an_indirect_table_is_returned_unused() {
        // VIRTQ_DESC_F_INDIRECT: never offered, so never followed.
        const INDIRECT: u16 = 4;
        let (m, lens) = run(&[
            desc(0x10_0000, 16, INDIRECT, 0),
            desc(0x20_0000, 256, WRITE, 0),
        ]);
        // The first chain never reached the device; the second did.
        assert_eq!(lens, [256]);
        let mut a = [0u8; 16];
        m.read_slice(&mut a, GuestAddress(0x10_0000)).unwrap();
        assert_eq!(a, [0u8; 16], "the table was not written through");
    }
}

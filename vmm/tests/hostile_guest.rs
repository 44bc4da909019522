//! A hostile guest driver against the devices, through their real queue
//! loop: chains that loop, run past the queue size, point outside guest
//! memory or claim absurd lengths, available indexes the driver never
//! filled, and random values in every MMIO register. Each time the device
//! answers with an error or ignores the request, stops in bounded time,
//! and serves the next well-formed request.

use std::sync::Arc;

use virtio_queue::desc::{split::Descriptor as SplitDescriptor, RawDescriptor};
use virtio_queue::mock::MockSplitQueue;
use vm_memory::{Bytes, GuestAddress};
use vmm::devices::bus::BusDevice;
use vmm::devices::virtio::block::disk::Disk;
use vmm::devices::virtio::block::request::execute;
use vmm::devices::virtio::block::{S_IOERR, S_OK, T_IN};
use vmm::devices::virtio::mmio::{self, MmioTransport};
use vmm::devices::virtio::queue_worker::QueueWorker;
use vmm::devices::virtio::rng::{self, Rng};
use vmm::devices::virtio::{Activation, DeviceThread, Interrupt};
use vmm::{CacheMode, GuestMemoryMmap, SeccompMode, ThreadKind};
use vmm_sys_util::eventfd::EventFd;

const NEXT: u16 = 1;
const WRITE: u16 = 2;
const MEM: usize = 0x100_0000;
const HDR: u64 = 0x10_0000;
const DATA: u64 = 0x20_0000;
const STATUS: u64 = 0x30_0000;

fn mem() -> GuestMemoryMmap {
    GuestMemoryMmap::from_ranges(&[(GuestAddress(0), MEM)]).unwrap()
}

fn desc(addr: u64, len: u32, flags: u16, next: u16) -> RawDescriptor {
    RawDescriptor::from(SplitDescriptor::new(addr, len, flags, next))
}

fn evt() -> EventFd {
    EventFd::new(libc::EFD_NONBLOCK).unwrap()
}

/// A block device's queue worker over `q`, with a 64 KiB disk.
struct BlockRig {
    worker: QueueWorker,
    disk: Disk,
    irq: EventFd,
    _dir: tempfile::TempDir,
}

fn block_rig(m: &GuestMemoryMmap, q: &MockSplitQueue<'_, GuestMemoryMmap>) -> BlockRig {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("d.img");
    std::fs::write(&path, vec![0x5a; 64 * 1024]).unwrap();
    let disk = Disk::open(&path, false, CacheMode::Page, "hostile").unwrap();
    let irq = evt();
    let a = Activation {
        mem: m.clone(),
        queues: vec![q.create_queue().unwrap()],
        queue_evts: vec![evt()],
        interrupt: Arc::new(Interrupt::new(irq.try_clone().unwrap())),
        thread: Arc::new(DeviceThread::spawn(ThreadKind::Block, SeccompMode::Off).unwrap()),
        restored: false,
    };
    let worker = QueueWorker::new(a, &evt()).unwrap();
    BlockRig {
        worker,
        disk,
        irq,
        _dir: dir,
    }
}

impl BlockRig {
    /// One pass of the device loop; returns how many chains it used.
    fn process(&mut self) -> usize {
        let disk = &mut self.disk;
        let mut n = 0;
        self.worker.process(|mem, chain| {
            n += 1;
            execute(disk, mem, chain)
        });
        n
    }
}

fn read_request(m: &GuestMemoryMmap, sector: u64) -> [RawDescriptor; 3] {
    let mut h = [0u8; 16];
    h[0..4].copy_from_slice(&T_IN.to_le_bytes());
    h[8..16].copy_from_slice(&sector.to_le_bytes());
    m.write_slice(&h, GuestAddress(HDR)).unwrap();
    m.write_obj(0xffu8, GuestAddress(STATUS)).unwrap();
    [
        desc(HDR, 16, NEXT, 1),
        desc(DATA, 512, NEXT | WRITE, 2),
        desc(STATUS, 1, WRITE, 0),
    ]
}

fn status(m: &GuestMemoryMmap) -> u8 {
    m.read_obj(GuestAddress(STATUS)).unwrap()
}

/// After whatever came before, a well-formed read still works.
fn still_serves(
    rig: &mut BlockRig,
    m: &GuestMemoryMmap,
    q: &MockSplitQueue<'_, GuestMemoryMmap>,
    at: u16,
) {
    let d = read_request(m, 3);
    for (i, d) in d.iter().enumerate() {
        q.desc_table().store(at + i as u16, *d).unwrap();
    }
    // Re-point the chain at its new slots.
    q.desc_table()
        .store(at, desc(HDR, 16, NEXT, at + 1))
        .unwrap();
    q.desc_table()
        .store(at + 1, desc(DATA, 512, NEXT | WRITE, at + 2))
        .unwrap();
    let idx = q.avail().idx().load();
    q.avail()
        .ring()
        .ref_at(usize::from(idx % 16))
        .unwrap()
        .store(at);
    q.avail().idx().store(idx.wrapping_add(1));
    assert_eq!(rig.process(), 1);
    assert_eq!(status(m), S_OK, "a good request after hostile ones");
}

#[test]
fn looping_chains_end_and_the_device_keeps_serving() {
    let m = mem();
    let q = MockSplitQueue::create(&m, GuestAddress(0), 16);
    // A descriptor that names itself, and two that name each other.
    q.desc_table().store(0, desc(HDR, 16, NEXT, 0)).unwrap();
    q.desc_table().store(1, desc(HDR, 16, NEXT, 2)).unwrap();
    q.desc_table()
        .store(2, desc(DATA, 512, NEXT | WRITE, 1))
        .unwrap();
    for (slot, head) in [(0, 0u16), (1, 1)] {
        q.avail().ring().ref_at(slot).unwrap().store(head);
    }
    q.avail().idx().store(2);
    let mut rig = block_rig(&m, &q);
    assert_eq!(rig.process(), 2, "both chains are consumed, neither hangs");
    still_serves(&mut rig, &m, &q, 8);
}

#[test]
fn descriptors_outside_memory_or_absurdly_long_get_io_errors() {
    let m = mem();
    let q = MockSplitQueue::create(&m, GuestAddress(0), 16);
    let mut rig = block_rig(&m, &q);
    let cases = [
        // Data buffer past the end of guest memory.
        [
            desc(HDR, 16, NEXT, 1),
            desc(MEM as u64 + 0x1000, 512, NEXT | WRITE, 2),
            desc(STATUS, 1, WRITE, 0),
        ],
        // Data buffer claiming 4 GiB.
        [
            desc(HDR, 16, NEXT, 1),
            desc(DATA, u32::MAX, NEXT | WRITE, 2),
            desc(STATUS, 1, WRITE, 0),
        ],
        // A buffer that wraps the address space.
        [
            desc(HDR, 16, NEXT, 1),
            desc(u64::MAX - 8, 512, NEXT | WRITE, 2),
            desc(STATUS, 1, WRITE, 0),
        ],
    ];
    for (n, c) in cases.iter().enumerate() {
        read_request(&m, 1);
        for (i, d) in c.iter().enumerate() {
            q.desc_table().store(i as u16, *d).unwrap();
        }
        let idx = q.avail().idx().load();
        q.avail()
            .ring()
            .ref_at(usize::from(idx % 16))
            .unwrap()
            .store(0);
        q.avail().idx().store(idx + 1);
        let used = rig.process();
        assert_eq!(used, 1, "case {n}: the chain is returned");
        let s = status(&m);
        assert!(
            s == S_IOERR || s == 0xff,
            "case {n}: status {s:#x}, not a success"
        );
    }
    still_serves(&mut rig, &m, &q, 8);
}

#[test]
fn an_available_index_far_past_the_queue_is_not_trusted() {
    let m = mem();
    let q = MockSplitQueue::create(&m, GuestAddress(0), 16);
    let d = read_request(&m, 1);
    for (i, d) in d.iter().enumerate() {
        q.desc_table().store(i as u16, *d).unwrap();
    }
    // The driver claims 1000 new entries in a ring of 16.
    q.avail().idx().store(1000);
    let mut rig = block_rig(&m, &q);
    assert_eq!(rig.process(), 0, "nothing is processed from a lying index");
    // The driver comes back to its senses only after a reset in real
    // life; the device has not used a thing and has not hung.
    assert!(rig.irq.read().is_err(), "no interrupt for nothing");
}

#[test]
fn heads_beyond_the_table_and_chains_longer_than_the_queue_are_dropped() {
    let m = mem();
    let q = MockSplitQueue::create(&m, GuestAddress(0), 16);
    // Every descriptor chains to the next, through the whole table and
    // back round: longer than the queue.
    for i in 0..16u16 {
        q.desc_table()
            .store(
                i,
                desc(DATA + u64::from(i) * 512, 512, NEXT | WRITE, (i + 1) % 16),
            )
            .unwrap();
    }
    q.avail().ring().ref_at(0).unwrap().store(0);
    q.avail().ring().ref_at(1).unwrap().store(500);
    q.avail().idx().store(2);
    let mut rig = block_rig(&m, &q);
    rig.process();
    still_serves(&mut rig, &m, &q, 8);
}

#[test]
fn rng_caps_what_a_chain_of_huge_buffers_gets() {
    let m = mem();
    let q = MockSplitQueue::create(&m, GuestAddress(0), 16);
    // Fifteen writable 1 MiB buffers, all inside guest memory: 15 MiB asked.
    for i in 1..=15u16 {
        let flags = if i < 15 { NEXT | WRITE } else { WRITE };
        q.desc_table()
            .store(i, desc(u64::from(i) * 0x10_0000, 0x10_0000, flags, i + 1))
            .unwrap();
    }
    q.avail().ring().ref_at(0).unwrap().store(1);
    q.avail().idx().store(1);
    let mut queue: virtio_queue::Queue = q.create_queue().unwrap();
    let chain = virtio_queue::QueueT::pop_descriptor_chain(&mut queue, &m).expect("the chain");
    assert_eq!(rng::fill(&m, chain) as usize, rng::MAX_PER_CHAIN);
}

/// A small xorshift, so the register storm is the same every run.
fn xorshift(s: &mut u64) -> u64 {
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    *s
}

#[test]
fn random_values_in_every_mmio_register_leave_a_device_that_still_sets_up() {
    let m = mem();
    let mut t =
        MmioTransport::new(Box::new(Rng::new()), m.clone(), evt(), SeccompMode::Off).unwrap();
    let mut seed = 0x9e37_79b9_7f4a_7c15u64;
    for _ in 0..20_000 {
        let r = xorshift(&mut seed);
        let offset = ((r >> 8) % 0x200) & !3;
        let value = (xorshift(&mut seed) as u32).to_le_bytes();
        let width = [1usize, 2, 4][(r % 3) as usize];
        if r & 0x80 == 0 {
            t.write(offset, &value[..width]);
        } else {
            let mut b = [0u8; 4];
            t.read(offset, &mut b[..width]);
        }
    }
    // The driver resets and sets the device up properly.
    let w = |t: &mut MmioTransport, off: u64, v: u32| t.write(off, &v.to_le_bytes());
    w(&mut t, mmio::REG_STATUS, 0);
    assert_eq!(t.status(), 0, "reset clears the status");
    let q = MockSplitQueue::create(&m, GuestAddress(0x1000), 64);
    w(&mut t, mmio::REG_STATUS, 1 | 2);
    w(&mut t, mmio::REG_DRIVER_FEATURES_SEL, 1);
    w(&mut t, mmio::REG_DRIVER_FEATURES, 1);
    w(&mut t, mmio::REG_STATUS, 1 | 2 | 8);
    w(&mut t, mmio::REG_QUEUE_SEL, 0);
    w(&mut t, mmio::REG_QUEUE_NUM, 64);
    for (lo, addr) in [
        (mmio::REG_QUEUE_DESC_LOW, q.desc_table_addr()),
        (mmio::REG_QUEUE_DRIVER_LOW, q.avail_addr()),
        (mmio::REG_QUEUE_DEVICE_LOW, q.used_addr()),
    ] {
        w(&mut t, lo, addr.0 as u32);
        w(&mut t, lo + 4, (addr.0 >> 32) as u32);
    }
    w(&mut t, mmio::REG_QUEUE_READY, 1);
    w(&mut t, mmio::REG_STATUS, 1 | 2 | 8 | 4);
    assert_eq!(t.status(), 1 | 2 | 8 | 4, "DRIVER_OK without NEEDS_RESET");
}

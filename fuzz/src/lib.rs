//! What the fuzz targets share: reading structured values off the fuzzer's
//! bytes, and a guest whose memory and split virtqueue (descriptor table,
//! available ring) are whatever those bytes say, as a hostile driver
//! would leave them.

use virtio_queue::desc::{split::Descriptor as SplitDescriptor, RawDescriptor};
use virtio_queue::mock::MockSplitQueue;
use vm_memory::{Bytes, GuestAddress};

pub type GuestMemoryMmap = vmm::GuestMemoryMmap;

/// Guest memory size; descriptor addresses range over twice this, so
/// about half of them point outside guest memory.
pub const MEM_SIZE: u64 = 0x10_0000;
/// Where the data the descriptors point at starts (queues live below).
pub const DATA: u64 = 0x8_0000;

/// Reads little-endian values off the input; zeros once it runs out.
pub struct Input<'a>(pub &'a [u8]);

impl Input<'_> {
    pub fn bytes(&mut self, n: usize) -> &[u8] {
        let n = n.min(self.0.len());
        let (head, tail) = self.0.split_at(n);
        self.0 = tail;
        head
    }

    fn fixed<const N: usize>(&mut self) -> [u8; N] {
        let mut b = [0u8; N];
        let got = self.bytes(N);
        b[..got.len()].copy_from_slice(got);
        b
    }

    pub fn u8(&mut self) -> u8 {
        self.fixed::<1>()[0]
    }

    pub fn u16(&mut self) -> u16 {
        u16::from_le_bytes(self.fixed())
    }

    pub fn u32(&mut self) -> u32 {
        u32::from_le_bytes(self.fixed())
    }

    pub fn u64(&mut self) -> u64 {
        u64::from_le_bytes(self.fixed())
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

pub fn memory() -> GuestMemoryMmap {
    GuestMemoryMmap::from_ranges(&[(GuestAddress(0), MEM_SIZE as usize)]).expect("guest memory")
}

/// A queue of `size` at `base` whose descriptor table, available ring
/// and available index come from `input`: addresses anywhere in twice
/// guest memory, any length, any flags (next, write, indirect), any next
/// index, any head, an available index that may run past the queue size.
pub fn hostile_queue<'a>(
    mem: &'a GuestMemoryMmap,
    base: u64,
    size: u16,
    input: &mut Input<'_>,
) -> MockSplitQueue<'a, GuestMemoryMmap> {
    let q = MockSplitQueue::create(mem, GuestAddress(base), size);
    for i in 0..size {
        let addr = u64::from(input.u32()) % (2 * MEM_SIZE);
        let (len, flags, next) = (input.u32(), input.u16() & 0x7, input.u16() % (size + 2));
        let d = RawDescriptor::from(SplitDescriptor::new(addr, len, flags, next));
        let _ = q.desc_table().store(i, d);
    }
    let pending = u16::from(input.u8()) % (2 * size + 1);
    for i in 0..pending {
        if let Ok(slot) = q.avail().ring().ref_at(usize::from(i % size)) {
            slot.store(u16::from_le(input.u16() % (size + 2)));
        }
    }
    q.avail().idx().store(pending);
    q
}

/// Fills the data area with the rest of the input (headers, packets).
pub fn fill_data(mem: &GuestMemoryMmap, input: &mut Input<'_>) {
    let rest = input.bytes(usize::MAX);
    let n = rest.len().min((MEM_SIZE - DATA) as usize);
    let _ = mem.write_slice(&rest[..n], GuestAddress(DATA));
}

/// A scratch directory for targets that make files per input: on tmpfs
/// (/dev/shm) where the host has it, so that an input's fdatasync or
/// directory tree costs memory, not a disk's round trip (a block FLUSH
/// on ext4 cost milliseconds and most of the target's time); the code
/// under test is the same on either.
pub fn scratch() -> tempfile::TempDir {
    let shm = std::path::Path::new("/dev/shm");
    let in_shm = shm
        .is_dir()
        .then(|| tempfile::tempdir_in(shm).ok())
        .flatten();
    in_shm.unwrap_or_else(|| tempfile::tempdir().expect("temp dir"))
}

//! A guest driver that floods vsock's TX queue while it hardly ever posts
//! an RX buffer, for a minute, against the real device on its own thread:
//! every packet to a port with no connection earns a reset, every
//! connection request a response or a reset, and all of them wait for RX
//! buffers the guest does not give. The VMM's memory must stay bounded
//! (issue 14: under guest memory + 64 MiB), and the device must still
//! answer once the guest takes its packets.
//!
//! Its own test binary, so that the process's RSS is this flood's alone.

use std::os::unix::net::UnixListener;
use std::sync::Arc;
use std::time::{Duration, Instant};

use virtio_queue::{Queue, QueueT};
use vm_memory::{Bytes, GuestAddress};
use vmm::devices::virtio::vsock::device::Vsock;
use vmm::devices::virtio::vsock::muxer::MAX_PENDING_CONTROL;
use vmm::devices::virtio::vsock::packet::{
    Header, HDR_LEN, OP_REQUEST, OP_RESPONSE, OP_RST, OP_RW, TYPE_STREAM,
};
use vmm::devices::virtio::vsock::{HOST_CID, QUEUE_SIZES};
use vmm::devices::virtio::{Activation, DeviceThread, Interrupt, VirtioDevice};
use vmm::{GuestMemoryMmap, SeccompMode, ThreadKind};
use vmm_sys_util::eventfd::EventFd;

const GUEST_CID: u64 = 3;
const GUEST_MEM: usize = 64 << 20;
/// Where the guest's packet buffers start: one 4 KiB page per descriptor.
const TX_BUFS: u64 = 0x100_0000;
const RX_BUFS: u64 = 0x200_0000;
const FLOOD: Duration = Duration::from_secs(60);
/// The guest posts one RX buffer every this many rounds: the device keeps
/// taking TX as the backlog drains by one, for the whole minute.
const RX_EVERY: u64 = 8;

/// A split queue laid out and filled as a guest driver does, wrapping its
/// indexes. (virtio-queue's `MockSplitQueue` places the used ring inside
/// the available ring's entries for queues this size, and does not wrap
/// the available ring.)
struct Ring<'a> {
    mem: &'a GuestMemoryMmap,
    desc: u64,
    avail_ring: u64,
    used_ring: u64,
    size: u16,
    avail: u16,
}

impl<'a> Ring<'a> {
    fn new(mem: &'a GuestMemoryMmap, at: u64, size: u16) -> Self {
        let avail_ring = at + 16 * u64::from(size);
        // flags, idx, ring, used_event; the used ring is 4-aligned.
        let used_ring = (avail_ring + 6 + 2 * u64::from(size)).next_multiple_of(4);
        Ring {
            mem,
            desc: at,
            avail_ring,
            used_ring,
            size,
            avail: 0,
        }
    }

    /// The device's view of this queue, as the driver's set-up leaves it.
    fn queue(&self) -> Queue {
        let mut q = Queue::new(self.size).unwrap();
        q.set_size(self.size);
        q.set_desc_table_address(Some(self.desc as u32), Some((self.desc >> 32) as u32));
        q.set_avail_ring_address(
            Some(self.avail_ring as u32),
            Some((self.avail_ring >> 32) as u32),
        );
        q.set_used_ring_address(
            Some(self.used_ring as u32),
            Some((self.used_ring >> 32) as u32),
        );
        q.set_ready(true);
        q
    }

    fn used(&self) -> u16 {
        self.mem.read_obj(GuestAddress(self.used_ring + 2)).unwrap()
    }

    fn has_room(&self) -> bool {
        self.avail.wrapping_sub(self.used()) < self.size
    }

    /// Offers one single-descriptor chain at the next slot; returns the
    /// address of its buffer, which the caller fills.
    fn offer(&mut self, buf_base: u64, len: u32, flags: u16) -> u64 {
        let slot = self.avail % self.size;
        let addr = buf_base + u64::from(slot) * 0x1000;
        let d = self.desc + 16 * u64::from(slot);
        self.mem.write_obj(addr, GuestAddress(d)).unwrap();
        self.mem.write_obj(len, GuestAddress(d + 8)).unwrap();
        self.mem.write_obj(flags, GuestAddress(d + 12)).unwrap();
        self.mem.write_obj(0u16, GuestAddress(d + 14)).unwrap();
        let entry = self.avail_ring + 4 + 2 * u64::from(slot);
        self.mem.write_obj(slot, GuestAddress(entry)).unwrap();
        self.avail = self.avail.wrapping_add(1);
        self.mem
            .write_obj(self.avail, GuestAddress(self.avail_ring + 2))
            .unwrap();
        addr
    }
}

fn packet(op: u16, src_port: u32, dst_port: u32, payload: &[u8]) -> Vec<u8> {
    let h = Header {
        src_cid: GUEST_CID,
        dst_cid: HOST_CID,
        src_port,
        dst_port,
        len: payload.len() as u32,
        type_: TYPE_STREAM,
        op,
        flags: 0,
        buf_alloc: 64 * 1024,
        fwd_cnt: 0,
    };
    let mut bytes = h.to_bytes().to_vec();
    bytes.extend_from_slice(payload);
    bytes
}

fn rss_kib() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap()
}

#[test]
fn a_guest_that_floods_tx_and_starves_rx_for_a_minute_cannot_grow_the_vmm() {
    let mem = GuestMemoryMmap::from_ranges(&[(GuestAddress(0), GUEST_MEM)]).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let uds = dir.path().join("v.sock");
    // A host program that listens on port 1025 and never accepts: the
    // guest's requests fill its backlog, then are reset.
    let _deaf = UnixListener::bind(format!("{}_1025", uds.display())).unwrap();

    let mut rx = Ring::new(&mem, 0, QUEUE_SIZES[0]);
    let mut tx = Ring::new(&mem, 0x1_0000, QUEUE_SIZES[1]);
    let ev = Ring::new(&mem, 0x2_0000, QUEUE_SIZES[2]);
    let evts: Vec<EventFd> = (0..3)
        .map(|_| EventFd::new(libc::EFD_NONBLOCK).unwrap())
        .collect();
    let kick_tx = evts[1].try_clone().unwrap();
    let kick_rx = evts[0].try_clone().unwrap();
    let irq = EventFd::new(libc::EFD_NONBLOCK).unwrap();
    let raised = irq.try_clone().unwrap();
    // Held for the test, as the transport holds it: the last holder's drop
    // joins the thread.
    let thread = Arc::new(DeviceThread::spawn(ThreadKind::Vsock, SeccompMode::Off).unwrap());
    let mut dev = Vsock::new(GUEST_CID, &uds, SeccompMode::Off).unwrap();
    dev.activate(Activation {
        mem: mem.clone(),
        queues: vec![rx.queue(), tx.queue(), ev.queue()],
        queue_evts: evts,
        interrupt: Arc::new(Interrupt::new(irq)),
        thread: thread.clone(),
        restored: false,
    })
    .unwrap();

    let before = rss_kib();
    let mut peak = before;
    let mut sent = 0u64;
    let mut round = 0u64;
    let start = Instant::now();
    while start.elapsed() < FLOOD {
        round += 1;
        // As many packets as the TX ring has room for: data to ports
        // nobody is connected on, and requests to the deaf listener.
        while tx.has_room() {
            let p = match sent % 4 {
                0 => packet(OP_REQUEST, 10_000 + (sent % 50_000) as u32, 1025, &[]),
                _ => packet(OP_RW, 5000, 7000 + (sent % 1000) as u32, &[0x5a; 512]),
            };
            let addr = tx.offer(TX_BUFS, p.len() as u32, 0);
            mem.write_slice(&p, GuestAddress(addr)).unwrap();
            sent += 1;
        }
        kick_tx.write(1).unwrap();
        if round % RX_EVERY == 0 && rx.has_room() {
            rx.offer(RX_BUFS, 4096, 2);
            kick_rx.write(1).unwrap();
        }
        let _ = raised.read();
        peak = peak.max(rss_kib());
        std::thread::sleep(Duration::from_micros(200));
    }
    let grown_mib = peak.saturating_sub(before) / 1024;
    // (The used index wraps at 2^16; what is still offered does not.)
    let taken = sent - u64::from(tx.avail.wrapping_sub(tx.used()));
    eprintln!(
        "vsock flood: {sent} TX packets offered in {:?}, {} taken; RSS {} → peak {} KiB (+{grown_mib} MiB)",
        start.elapsed(),
        taken,
        before,
        peak
    );
    // The device filled its backlog, then took one TX packet for each RX
    // buffer it was given, and never more.
    let taken = taken as usize;
    assert!(
        taken > MAX_PENDING_CONTROL + 1000,
        "the flood ran: {sent} offered, {taken} taken"
    );
    assert!(
        peak < before + (64 << 10),
        "RSS grew by {grown_mib} MiB under the flood"
    );
    assert!(
        (peak as usize) < (GUEST_MEM >> 10) + (64 << 10) + before as usize,
        "under guest memory + 64 MiB"
    );

    // The guest takes its packets again: the device answers (resets and
    // responses) into them.
    let used_before = rx.used();
    for _ in 0..64 {
        if rx.has_room() {
            rx.offer(RX_BUFS, 4096, 2);
        }
    }
    kick_rx.write(1).unwrap();
    let waited = Instant::now();
    while rx.used() == used_before && waited.elapsed() < Duration::from_secs(10) {
        std::thread::sleep(Duration::from_millis(10));
    }
    let used = rx.used().wrapping_sub(used_before);
    assert!(used > 0, "the device answers once RX buffers come");
    // The last answer is a control packet (a reset or a response).
    let slot = rx.used().wrapping_sub(1) % rx.size;
    let mut h = [0u8; HDR_LEN];
    mem.read_slice(&mut h, GuestAddress(RX_BUFS + u64::from(slot) * 0x1000))
        .unwrap();
    let op = Header::from_bytes(&h).op;
    assert!(op == OP_RST || op == OP_RESPONSE, "op {op}");
    dev.reset();
    drop(dev);
    drop(thread);
}

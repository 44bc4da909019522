//! The vsock device's worker thread: its event loop (epoll on the queue
//! notifications, the host listener, every host socket and a kill
//! eventfd), kept apart from the device as Firecracker keeps its
//! devices' event handlers. TX chains are parsed into packets for the
//! muxer; RX chains are filled with the muxer's packets.

use std::io::{Read, Write};
use std::os::fd::AsRawFd;
use std::os::unix::net::UnixListener;
use std::sync::Arc;
use std::time::{Duration, Instant};

use virtio_queue::{Queue, QueueOwnedT, QueueT};
use vmm_sys_util::epoll::{ControlOperation, Epoll, EpollEvent, EventSet};
use vmm_sys_util::eventfd::EventFd;

use super::connection::MAX_PAYLOAD;
use super::muxer::{Muxer, Watch};
use super::packet::{Header, HDR_LEN};
use super::*;
use crate::devices::virtio::{Activation, Interrupt};
use crate::GuestMemoryMmap;

/// Rounds of [`Worker::process_some`] between two looks at the epoll.
const ROUNDS: usize = 16;

/// How long an interrupt for TX chains alone may wait for one the RX
/// queue needs anyway. The guest wants its TX buffers back only to free
/// them or when its ring runs full (then it is interrupted at once: see
/// [`Worker::tx_unsignalled`]); an interrupt costs a nested guest four
/// exits (injection, the driver's status read and acknowledgement, its
/// halt), and on a host with one CPU it takes that CPU from the threads
/// carrying the reply to the client (docs/benchmarks.md, "Relay").
const TX_IRQ_DEFER: Duration = Duration::from_millis(4);

/// The device side of the queues plus the muxer, driven by one epoll.
pub struct Worker {
    mem: GuestMemoryMmap,
    rxq: Queue,
    txq: Queue,
    evq: Queue,
    /// A transport reset the guest has yet to be told of (a restored VM:
    /// its connections are gone).
    reset_pending: bool,
    evts: Vec<EventFd>,
    interrupt: Arc<Interrupt>,
    muxer: Muxer,
    pub(super) listener: UnixListener,
    /// Kept open while the worker runs: it is registered in `epoll`.
    _kill: EventFd,
    epoll: Epoll,
    /// One TX packet's payload at a time, kept between packets.
    payload: Vec<u8>,
    /// The last RX round put a buffer back unfilled (nothing fit in it,
    /// or the host had nothing after all): another round now would do
    /// the same, so only a new event goes on.
    rx_stalled: bool,
    /// Since when an interrupt for used TX chains has been held back,
    /// waiting for one the RX queue needs ([`TX_IRQ_DEFER`]).
    tx_irq_owed: Option<Instant>,
    /// TX chains used since the guest was last interrupted: at half the
    /// ring it may be about to run out, and is interrupted at once.
    tx_unsignalled: usize,
}

impl Worker {
    pub fn new(
        a: Activation,
        muxer: Muxer,
        listener: UnixListener,
        kill: EventFd,
    ) -> std::io::Result<Self> {
        let mut queues = a.queues.into_iter();
        let (rxq, txq, evq) = (
            queues.next().expect("3 queues"),
            queues.next().expect("3 queues"),
            queues.next().expect("3 queues"),
        );
        let epoll = Epoll::new()?;
        let add = |fd, token| {
            epoll.ctl(
                ControlOperation::Add,
                fd,
                EpollEvent::new(EventSet::IN, token),
            )
        };
        add(a.queue_evts[0].as_raw_fd(), TOKEN_RX)?;
        add(a.queue_evts[1].as_raw_fd(), TOKEN_TX)?;
        add(a.queue_evts[2].as_raw_fd(), TOKEN_EVQ)?;
        add(listener.as_raw_fd(), TOKEN_LISTENER)?;
        add(kill.as_raw_fd(), TOKEN_KILL)?;
        Ok(Self {
            mem: a.mem,
            rxq,
            txq,
            evq,
            reset_pending: a.restored,
            evts: a.queue_evts,
            interrupt: a.interrupt,
            muxer,
            listener,
            _kill: kill,
            epoll,
            payload: Vec::new(),
            rx_stalled: false,
            tx_irq_owed: None,
            tx_unsignalled: 0,
        })
    }

    pub(super) fn run(&mut self) {
        self.serve();
        // However it ended (its kill, a failed epoll), no used buffer
        // goes unannounced.
        self.pay_owed_interrupt();
    }

    fn serve(&mut self) {
        let mut events = vec![EpollEvent::default(); 64];
        // Host connections that arrived before the guest driver was up.
        self.muxer.accept(&self.listener);
        self.apply_watch();
        // Ask for the guest's next notification on every queue (with
        // EVENT_IDX nothing comes until avail_event is written).
        for q in [&mut self.rxq, &mut self.txq, &mut self.evq] {
            let _ = q.enable_notification(&self.mem);
        }
        self.send_reset();
        let mut more = true;
        loop {
            // With work left over, only look whether anything (the kill
            // above all) is ready, and go on; with an interrupt held back,
            // sleep no longer than it may wait.
            let timeout = match (more, self.tx_irq_owed) {
                (true, _) => 0,
                (false, Some(since)) => {
                    let left = TX_IRQ_DEFER.saturating_sub(since.elapsed());
                    // Rounded up: waking before the deadline would spin.
                    left.as_micros().div_ceil(1000) as i32
                }
                (false, None) => -1,
            };
            let n = match self.epoll.wait(timeout, &mut events) {
                Ok(n) => n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(e) => {
                    log::error!("vsock worker: epoll failed: {e}");
                    return;
                }
            };
            for ev in &events[..n] {
                match ev.data() {
                    TOKEN_KILL => return,
                    TOKEN_RX => drop(self.evts[0].read()),
                    TOKEN_TX => drop(self.evts[1].read()),
                    TOKEN_EVQ => {
                        drop(self.evts[2].read());
                        self.send_reset();
                    }
                    TOKEN_LISTENER => self.muxer.accept(&self.listener),
                    token => {
                        let set = ev.event_set();
                        self.muxer.host_event(
                            token,
                            set.contains(EventSet::IN),
                            set.contains(EventSet::OUT),
                            set.intersects(
                                EventSet::HANG_UP | EventSet::READ_HANG_UP | EventSet::ERROR,
                            ),
                        );
                    }
                }
            }
            more = self.process_some();
        }
    }

    /// Moves packets both ways until neither side can make progress.
    pub fn process(&mut self) {
        while self.process_some() {}
    }

    /// Moves packets both ways for at most [`ROUNDS`] rounds; true if
    /// there may be more. A guest that keeps its queues full (a flood)
    /// would otherwise keep the worker from ever seeing its kill eventfd.
    fn process_some(&mut self) -> bool {
        let mut more = true;
        for _ in 0..ROUNDS {
            let tx = self.process_tx();
            let rx = self.process_rx();
            self.apply_watch();
            // One interrupt for both queues' used buffers (the driver reads
            // the status and serves both), and only if either wants one.
            // Both are asked: asking resets each queue's count of adds.
            let tx_irq = tx && self.txq.needs_notification(&self.mem).unwrap_or(true);
            let rx_irq = rx && self.rxq.needs_notification(&self.mem).unwrap_or(true);
            if rx_irq || (tx_irq && self.tx_unsignalled >= usize::from(self.txq.size()) / 2) {
                self.interrupt_now();
            } else if tx_irq {
                // TX alone: wait a little for an RX interrupt to carry it.
                self.tx_irq_owed.get_or_insert_with(Instant::now);
            }
            if !tx && !rx && !self.rearm() {
                more = false;
                break;
            }
        }
        if self
            .tx_irq_owed
            .is_some_and(|since| since.elapsed() >= TX_IRQ_DEFER)
        {
            self.interrupt_now();
        }
        more
    }

    /// Interrupts the guest for every used buffer so far.
    fn interrupt_now(&mut self) {
        self.interrupt.signal_used_queue();
        self.tx_irq_owed = None;
        self.tx_unsignalled = 0;
    }

    /// When the worker stops (a reset, a snapshot, the VM's end): a
    /// held-back interrupt is raised.
    fn pay_owed_interrupt(&mut self) {
        if self.tx_irq_owed.is_some() {
            self.interrupt_now();
        }
    }

    /// Before the worker sleeps: asks the guest to notify on its next
    /// buffer in either queue, and looks whether one came in between
    /// (then true: go on). RX buffers count only when there is something
    /// to put in them; TX chains only when the muxer takes packets.
    ///
    /// Only chains that can be taken count: a driver whose available
    /// index lies past the queue, or cannot be read, offers nothing, and
    /// an RX buffer just put back would be put back again. Counting them
    /// kept the worker spinning on one CPU for as long as the guest
    /// liked (found by the `vsock_queues` fuzz target).
    fn rearm(&mut self) -> bool {
        let tx = takeable(&mut self.txq, &self.mem);
        let rx = takeable(&mut self.rxq, &self.mem);
        (tx && !self.muxer.backlogged())
            || (rx && !self.rx_stalled && self.muxer.has_work_for_guest())
    }

    fn apply_watch(&mut self) {
        for w in self.muxer.take_watch() {
            let r = match w {
                Watch::Add(fd, token) => {
                    let set = EventSet::IN
                        | EventSet::OUT
                        | EventSet::READ_HANG_UP
                        | EventSet::EDGE_TRIGGERED;
                    self.epoll
                        .ctl(ControlOperation::Add, fd, EpollEvent::new(set, token))
                }
                Watch::Remove(stream) => self.epoll.ctl(
                    ControlOperation::Delete,
                    stream.as_raw_fd(),
                    EpollEvent::default(),
                ),
                Watch::Forget(fd) => {
                    self.epoll
                        .ctl(ControlOperation::Delete, fd, EpollEvent::default())
                }
            };
            if let Err(e) = r {
                log::debug!("vsock worker: epoll ctl: {e}");
            }
        }
    }

    /// Guest-to-host packets, at most a queue's worth (a guest refilling
    /// the queue as fast as we empty it must not keep the worker from its
    /// epoll), and none while the muxer is backlogged. Returns whether any
    /// chain was consumed.
    fn process_tx(&mut self) -> bool {
        let mut used = false;
        for _ in 0..self.txq.size() {
            if self.muxer.backlogged() {
                break;
            }
            let Some(chain) = self.txq.pop_descriptor_chain(&self.mem) else {
                break;
            };
            let head = chain.head_index();
            if super::super::uses_indirect(&self.mem, &self.txq, head) {
                log::debug!(
                    "vsock: TX chain {head} uses an indirect table, never offered; dropped"
                );
                let _ = self.txq.add_used(&self.mem, head, 0);
                self.tx_unsignalled += 1;
                used = true;
                continue;
            }
            match read_packet(&self.mem, chain, &mut self.payload) {
                Some(h) => self.muxer.handle_guest_packet(&h, &self.payload),
                None => log::debug!("vsock: malformed TX chain {head} dropped"),
            }
            let _ = self.txq.add_used(&self.mem, head, 0);
            self.tx_unsignalled += 1;
            used = true;
        }
        used
    }

    /// Host-to-guest packets into RX buffers, at most a queue's worth.
    /// Returns whether any was sent.
    fn process_rx(&mut self) -> bool {
        let mut used = false;
        self.rx_stalled = false;
        for _ in 0..self.rxq.size() {
            if !self.muxer.has_work_for_guest() {
                break;
            }
            let Some(chain) = self.rxq.pop_descriptor_chain(&self.mem) else {
                break;
            };
            let head = chain.head_index();
            if super::super::uses_indirect(&self.mem, &self.rxq, head) {
                let _ = self.rxq.add_used(&self.mem, head, 0);
                used = true;
                continue;
            }
            let Ok(mut writer) = chain.writer(&self.mem) else {
                let _ = self.rxq.add_used(&self.mem, head, 0);
                used = true;
                continue;
            };
            let room = writer.available_bytes();
            if room < HDR_LEN || (room == HDR_LEN && self.muxer.pending_control() == 0) {
                // Too small for even a header, or for any data when only
                // data waits: hand it back empty (kept, it would hold up
                // every buffer behind it).
                let _ = self.rxq.add_used(&self.mem, head, 0);
                used = true;
                continue;
            }
            let Some((h, payload)) = self.muxer.next_for_guest((room - HDR_LEN).min(MAX_PAYLOAD))
            else {
                // Nothing after all (e.g. the host socket had no data yet,
                // or the buffer holds a header and no data).
                self.rxq.go_to_previous_position();
                self.rx_stalled = true;
                break;
            };
            let ok = writer.write_all(&h.to_bytes()).is_ok() && writer.write_all(&payload).is_ok();
            let len = if ok {
                (HDR_LEN + payload.len()) as u32
            } else {
                0
            };
            let _ = self.rxq.add_used(&self.mem, head, len);
            used = true;
        }
        used
    }

    /// Tells the guest, if it has to be told, that every connection it
    /// had is gone (VIRTIO_VSOCK_EVENT_TRANSPORT_RESET, section 5.10.6.6):
    /// its driver resets them and reads the guest CID again. Waits for an
    /// event buffer if the guest has none posted.
    fn send_reset(&mut self) {
        if !self.reset_pending {
            return;
        }
        let Some(chain) = self.evq.pop_descriptor_chain(&self.mem) else {
            log::debug!("vsock: no event buffer yet for the transport reset");
            let _ = self.evq.enable_notification(&self.mem);
            return;
        };
        let head = chain.head_index();
        let written = chain
            .writer(&self.mem)
            .map(|mut w| w.write_all(&EVENT_TRANSPORT_RESET.to_le_bytes()).is_ok());
        let len = if matches!(written, Ok(true)) { 4 } else { 0 };
        let _ = self.evq.add_used(&self.mem, head, len);
        self.reset_pending = false;
        log::debug!("vsock: told the guest its connections are gone (transport reset)");
        if self.evq.needs_notification(&self.mem).unwrap_or(true) {
            // It serves a held-back TX interrupt too.
            self.interrupt_now();
        }
    }

    pub fn muxer(&self) -> &Muxer {
        &self.muxer
    }
}

/// Parses one TX chain: the header, then exactly `len` payload bytes
/// (into `payload`). None for anything short, oversized or unreadable.
/// Re-enables `q`'s notifications; true if the driver made chains
/// available meanwhile that popping would find.
fn takeable(q: &mut Queue, mem: &GuestMemoryMmap) -> bool {
    matches!(q.enable_notification(mem), Ok(true)) && q.iter(mem).is_ok()
}

fn read_packet(
    mem: &GuestMemoryMmap,
    chain: virtio_queue::DescriptorChain<&GuestMemoryMmap>,
    payload: &mut Vec<u8>,
) -> Option<Header> {
    let mut reader = chain.reader(mem).ok()?;
    let mut hdr = [0u8; HDR_LEN];
    reader.read_exact(&mut hdr).ok()?;
    let h = Header::from_bytes(&hdr);
    let len = h.len as usize;
    if len > MAX_PAYLOAD || len > reader.available_bytes() {
        return None;
    }
    payload.resize(len, 0);
    reader.read_exact(payload).ok()?;
    Some(h)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::devices::virtio::vsock::connection::CONN_BUF;
    use crate::devices::virtio::vsock::connector::Connector;
    use crate::devices::virtio::vsock::packet::*;
    use std::os::unix::net::UnixStream;
    use std::path::PathBuf;
    use virtio_queue::desc::{split::Descriptor as SplitDescriptor, RawDescriptor};
    use virtio_queue::mock::MockSplitQueue;
    use vm_memory::{Address, Bytes, GuestAddress};

    const CID: u64 = 3;
    /// The rig's RX and TX queue size.
    const RIG_QUEUE: u16 = 64;
    const F_WRITE: u16 = 2;

    struct Rig<'a> {
        mem: &'a GuestMemoryMmap,
        rx: MockSplitQueue<'a, GuestMemoryMmap>,
        tx: MockSplitQueue<'a, GuestMemoryMmap>,
        ev: MockSplitQueue<'a, GuestMemoryMmap>,
        worker: Worker,
        rx_next: u16,
        tx_next: u16,
        /// The device's interrupt line, as the guest would see it raised.
        irq: EventFd,
        /// Stops [`Worker::run`].
        kill: EventFd,
        buf: u64,
        uds: PathBuf,
        _dir: tempfile::TempDir,
    }

    fn mem() -> GuestMemoryMmap {
        GuestMemoryMmap::from_ranges(&[(GuestAddress(0), 0x100_0000)]).unwrap()
    }

    impl<'a> Rig<'a> {
        fn new(mem: &'a GuestMemoryMmap) -> Self {
            Self::activated(mem, false)
        }

        /// `restored`: as in a VM restored from a snapshot.
        fn activated(mem: &'a GuestMemoryMmap, restored: bool) -> Self {
            Self::build(mem, restored, false)
        }

        fn build(mem: &'a GuestMemoryMmap, restored: bool, event_idx: bool) -> Self {
            let dir = tempfile::tempdir().unwrap();
            let uds = dir.path().join("v.sock");
            let rx = MockSplitQueue::create(mem, GuestAddress(0), RIG_QUEUE);
            let tx = MockSplitQueue::create(mem, GuestAddress(0x10000), RIG_QUEUE);
            let ev = MockSplitQueue::create(mem, GuestAddress(0x20000), 16);
            let evts: Vec<EventFd> = (0..3)
                .map(|_| EventFd::new(libc::EFD_NONBLOCK).unwrap())
                .collect();
            let irq = EventFd::new(libc::EFD_NONBLOCK).unwrap();
            let raised = irq.try_clone().unwrap();
            let mut queues: Vec<Queue> = vec![
                rx.create_queue().unwrap(),
                tx.create_queue().unwrap(),
                ev.create_queue().unwrap(),
            ];
            for q in &mut queues {
                q.set_event_idx(event_idx);
            }
            let a = Activation {
                mem: mem.clone(),
                queues,
                queue_evts: evts,
                interrupt: Arc::new(Interrupt::new(irq)),
                thread: crate::devices::virtio::tests::unconfined_thread(),
                restored,
            };
            let listener = UnixListener::bind(&uds).unwrap();
            listener.set_nonblocking(true).unwrap();
            let kill = EventFd::new(libc::EFD_NONBLOCK).unwrap();
            let stop = kill.try_clone().unwrap();
            let direct = Arc::new(Connector::Direct(uds.clone()));
            let worker = Worker::new(a, Muxer::new(CID, direct), listener, kill).unwrap();
            Rig {
                mem,
                rx,
                tx,
                ev,
                worker,
                rx_next: 0,
                tx_next: 0,
                irq: raised,
                kill: stop,
                buf: 0x10_0000,
                uds,
                _dir: dir,
            }
        }

        /// The events the device put on the event queue (their ids).
        fn events(&self) -> Vec<u32> {
            let used = self.ev.used_addr();
            let idx: u16 = self.mem.read_obj(used.unchecked_add(2)).unwrap();
            (0..idx)
                .map(|i| {
                    let elem = used.unchecked_add(4 + 8 * u64::from(i));
                    let head: u32 = self.mem.read_obj(elem).unwrap();
                    let len: u32 = self.mem.read_obj(elem.unchecked_add(4)).unwrap();
                    assert_eq!(len, 4, "one le32 id");
                    let desc = self
                        .ev
                        .desc_table_addr()
                        .unchecked_add(16 * u64::from(head));
                    let addr: u64 = self.mem.read_obj(desc).unwrap();
                    self.mem.read_obj(GuestAddress(addr)).unwrap()
                })
                .collect()
        }

        fn alloc(&mut self, len: u64) -> u64 {
            let a = self.buf;
            self.buf += len.max(1).next_multiple_of(0x1000);
            a
        }

        /// Queues raw bytes as one TX chain (one descriptor).
        fn tx_raw(&mut self, bytes: &[u8]) {
            let addr = self.alloc(bytes.len() as u64);
            self.mem.write_slice(bytes, GuestAddress(addr)).unwrap();
            let d = RawDescriptor::from(SplitDescriptor::new(addr, bytes.len() as u32, 0, 0));
            self.tx.add_desc_chains(&[d], self.tx_next).unwrap();
            self.tx_next += 1;
        }

        fn send(
            &mut self,
            op: u16,
            src_port: u32,
            dst_port: u32,
            payload: &[u8],
            buf_alloc: u32,
            fwd_cnt: u32,
        ) {
            let h = Header {
                src_cid: CID,
                dst_cid: HOST_CID,
                src_port,
                dst_port,
                len: payload.len() as u32,
                type_: TYPE_STREAM,
                op,
                flags: 0,
                buf_alloc,
                fwd_cnt,
            };
            let mut bytes = h.to_bytes().to_vec();
            bytes.extend_from_slice(payload);
            self.tx_raw(&bytes);
        }

        /// Offers `n` writable RX buffers of `len` bytes each.
        fn rx_buffers(&mut self, n: usize, len: u32) {
            for _ in 0..n {
                let addr = self.alloc(u64::from(len));
                let d = RawDescriptor::from(SplitDescriptor::new(addr, len, F_WRITE, 0));
                self.rx.add_desc_chains(&[d], self.rx_next).unwrap();
                self.rx_next += 1;
            }
        }

        /// Used RX entries so far, as (header, payload).
        fn received(&self) -> Vec<(Header, Vec<u8>)> {
            let used = self.rx.used_addr();
            let idx: u16 = self.mem.read_obj(used.unchecked_add(2)).unwrap();
            (0..idx)
                .map(|i| {
                    let id: u32 = self
                        .mem
                        .read_obj(used.unchecked_add(4 + 8 * u64::from(i)))
                        .unwrap();
                    let len: u32 = self
                        .mem
                        .read_obj(used.unchecked_add(8 + 8 * u64::from(i)))
                        .unwrap();
                    let desc = self.rx.desc_table().load(id as u16).unwrap();
                    let addr = SplitDescriptor::from(desc).addr();
                    let mut bytes = vec![0u8; len as usize];
                    self.mem.read_slice(&mut bytes, addr).unwrap();
                    if bytes.len() < HDR_LEN {
                        return (Header::default(), bytes);
                    }
                    let h = Header::from_bytes(bytes[..HDR_LEN].try_into().unwrap());
                    (h, bytes[HDR_LEN..].to_vec())
                })
                .collect()
        }

        /// Payload bytes delivered to the guest so far (RW packets).
        fn data_received(&self) -> usize {
            self.received()
                .iter()
                .filter(|(h, _)| h.op == OP_RW)
                .map(|(_, d)| d.len())
                .sum()
        }

        /// How many times the interrupt was raised since last asked.
        fn interrupts(&self) -> u64 {
            self.irq.read().unwrap_or(0)
        }

        /// EVENT_IDX, the guest's side: interrupt me once the device's
        /// used index passes `idx` (virtq_avail.used_event).
        fn wait_for_used(&self, q: &MockSplitQueue<GuestMemoryMmap>, idx: u16) {
            let at = q.avail_addr().unchecked_add(4 + 2 * u64::from(RIG_QUEUE));
            self.mem.write_obj(idx, at).unwrap();
        }

        /// EVENT_IDX, the device's side: the avail index it wants a
        /// notification at (virtq_used.avail_event).
        fn avail_event(&self, q: &MockSplitQueue<GuestMemoryMmap>) -> u16 {
            let at = q.used_addr().unchecked_add(4 + 8 * u64::from(RIG_QUEUE));
            self.mem.read_obj(at).unwrap()
        }

        fn tx_used(&self) -> u16 {
            self.mem
                .read_obj(self.tx.used_addr().unchecked_add(2))
                .unwrap()
        }

        /// Guest connects to host `port` (listening), advertising
        /// `buf_alloc`; returns the host end once the device has answered.
        fn connect(&mut self, port: u32, buf_alloc: u32) -> UnixStream {
            let l = self.listen(port);
            self.rx_buffers(4, 4096);
            self.send(OP_REQUEST, 5000, port, &[], buf_alloc, 0);
            self.worker.process();
            l.accept().unwrap().0
        }

        fn listen(&self, port: u32) -> UnixListener {
            UnixListener::bind(format!("{}_{port}", self.uds.display())).unwrap()
        }
    }

    fn read_n(s: &mut UnixStream, n: usize) -> Vec<u8> {
        let mut b = vec![0u8; n];
        s.read_exact(&mut b).unwrap();
        b
    }

    #[test]
    fn guest_connects_and_data_flows_both_ways() {
        let m = mem();
        let mut r = Rig::new(&m);
        let mut host = r.connect(1000, CONN_BUF);
        let got = r.received();
        assert_eq!(got[0].0.op, OP_RESPONSE);
        assert_eq!(
            (got[0].0.src_port, got[0].0.dst_port, got[0].0.dst_cid),
            (1000, 5000, CID)
        );

        r.send(OP_RW, 5000, 1000, b"hello host", CONN_BUF, 0);
        r.worker.process();
        assert_eq!(read_n(&mut host, 10), b"hello host");
        assert_eq!(r.tx_used(), 2);

        host.write_all(b"hello guest").unwrap();
        r.worker
            .muxer
            .host_event(FIRST_CONN_TOKEN, true, false, false);
        r.worker.process();
        let got = r.received();
        assert_eq!(got[1].0.op, OP_RW);
        assert_eq!(got[1].1, b"hello guest");
        assert_eq!(
            got[1].0.fwd_cnt, 10,
            "our fwd_cnt counts bytes given to the host"
        );
    }

    #[test]
    fn connect_to_a_port_nobody_listens_on_is_reset() {
        let m = mem();
        let mut r = Rig::new(&m);
        r.rx_buffers(1, 4096);
        r.send(OP_REQUEST, 5000, 4242, &[], CONN_BUF, 0);
        r.worker.process();
        let got = r.received();
        assert_eq!(got.len(), 1);
        assert_eq!(got[0].0.op, OP_RST);
    }

    #[test]
    fn host_data_waits_for_guest_credit_then_resumes() {
        let m = mem();
        let mut r = Rig::new(&m);
        let mut host = r.connect(1000, 100); // guest buffer: 100 bytes
        r.rx_buffers(4, 4096);
        host.write_all(&[7u8; 300]).unwrap();
        r.worker
            .muxer
            .host_event(FIRST_CONN_TOKEN, true, false, false);
        r.worker.process();
        let data = r.data_received();
        assert_eq!(data, 100, "no more than the guest's credit");

        r.send(OP_CREDIT_UPDATE, 5000, 1000, &[], 100, 100); // guest consumed 100
        r.worker.process();
        let data = r.data_received();
        assert_eq!(data, 200);
    }

    #[test]
    fn malformed_chains_are_dropped_and_the_device_keeps_working() {
        let m = mem();
        let mut r = Rig::new(&m);
        let l = r.listen(1000);
        r.tx_raw(&[1, 2, 3]); // shorter than a header
        let mut h = Header {
            src_cid: CID,
            dst_cid: HOST_CID,
            type_: TYPE_STREAM,
            op: OP_RW,
            len: 1 << 30,
            ..Default::default()
        };
        r.tx_raw(&h.to_bytes()); // claims a payload it does not carry
        h.len = 0;
        h.op = 0xffff;
        r.tx_raw(&h.to_bytes()); // unknown op for an unknown connection
        r.rx_buffers(1, 10); // too small for a header
        r.rx_buffers(4, 4096);
        r.worker.process();
        assert_eq!(r.tx_used(), 3, "every chain returned");

        r.send(OP_REQUEST, 5000, 1000, &[], CONN_BUF, 0);
        r.worker.process();
        assert!(l.accept().is_ok());
        let got = r.received();
        assert_eq!(got[0].1.len(), 0, "small buffer returned empty");
        assert!(got.iter().any(|(h, _)| h.op == OP_RESPONSE));
    }

    #[test]
    fn guest_that_overruns_its_credit_is_reset() {
        let m = mem();
        let mut r = Rig::new(&m);
        let _host = r.connect(1000, CONN_BUF); // never reads
        r.rx_buffers(60, 4096);
        let chunk = vec![1u8; 60 * 1024];
        for _ in 0..20 {
            r.send(OP_RW, 5000, 1000, &chunk, CONN_BUF, 0);
            r.worker.process();
            r.tx_next %= 64;
        }
        assert!(r.received().iter().any(|(h, _)| h.op == OP_RST));
        assert_eq!(r.worker.muxer().connection_count(), 0);
    }

    #[test]
    fn a_guest_that_posts_no_rx_buffers_cannot_grow_the_backlog() {
        use super::super::muxer::MAX_PENDING_CONTROL;
        let m = mem();
        let mut r = Rig::new(&m);
        // Every packet to a port with no connection earns a reset; the
        // guest sends a queue's worth at a time and never takes one.
        let mut consumed_before = 0usize;
        let mut stalled = false;
        for round in 0..(2 * MAX_PENDING_CONTROL / 64) {
            for i in 0..64u32 {
                r.send(OP_RW, 5000 + i, 7000 + round as u32, b"x", CONN_BUF, 0);
            }
            r.worker.process();
            r.tx_next %= 64;
            // Consumed chains' buffers are free again (a stalled round's
            // stay where they are: the loop ends).
            r.buf = 0x10_0000;
            let pending = r.worker.muxer().pending_control();
            assert!(pending <= MAX_PENDING_CONTROL, "{pending} pending");
            let consumed = usize::from(r.tx_used());
            if consumed == consumed_before {
                stalled = true;
                break;
            }
            consumed_before = consumed;
        }
        assert!(stalled, "TX must stop being taken at the backlog limit");
        assert_eq!(r.worker.muxer().pending_control(), MAX_PENDING_CONTROL);
        // Once the guest takes packets, TX moves again.
        let before = r.tx_used();
        r.buf = 0x80_0000;
        r.rx_buffers(64, 4096);
        r.worker.process();
        assert_eq!(r.received().len(), 64);
        assert!(r.received().iter().all(|(h, _)| h.op == OP_RST));
        assert_ne!(r.tx_used(), before, "TX taken again");
    }

    /// A driver's available index far past its queue: nothing can be
    /// popped, so nothing is left to do (before, the worker saw "more
    /// available" on every round and never slept).
    #[test]
    fn an_available_index_past_the_queue_lets_the_worker_sleep() {
        let m = mem();
        let mut r = Rig::new(&m);
        r.send(OP_RW, 5000, 7000, b"x", CONN_BUF, 0);
        m.write_obj(1000u16, r.tx.avail_addr().unchecked_add(2))
            .unwrap();
        assert!(
            !r.worker.process_some(),
            "nothing to take: the worker sleeps"
        );
        assert!(!r.worker.process_some());
        assert_eq!(r.tx_used(), 0);
    }

    /// An RX buffer with room for a header and no data, while a
    /// connection has host data: handed back empty, and the data goes in
    /// the next buffer with room (before, the worker put it back and
    /// tried it again at once, forever).
    #[test]
    fn an_rx_buffer_too_small_for_data_is_handed_back_empty() {
        let m = mem();
        let mut r = Rig::new(&m);
        let mut host = r.connect(1000, CONN_BUF);
        r.worker.process();
        // Use up the buffers connect() posted.
        host.write_all(&[1u8; 3 * 4096]).unwrap();
        r.worker
            .muxer
            .host_event(FIRST_CONN_TOKEN, true, false, false);
        r.worker.process();
        let before = r.received().len();
        r.rx_buffers(1, HDR_LEN as u32);
        host.write_all(b"for the guest").unwrap();
        r.worker
            .muxer
            .host_event(FIRST_CONN_TOKEN, true, false, false);
        let rounds = (0..100).take_while(|_| r.worker.process_some()).count();
        assert!(rounds < 100, "the worker goes to sleep");
        let got = r.received();
        assert_eq!(got.len(), before + 1);
        assert!(got[before].1.is_empty(), "handed back empty");
        assert!(r.worker.muxer.has_work_for_guest(), "the data still waits");
        r.rx_buffers(1, 4096);
        r.worker.process();
        let got = r.received();
        assert_eq!(got.len(), before + 2);
        assert_eq!(got[before + 1].0.op, OP_RW);
        assert!(!got[before + 1].1.is_empty());
    }

    #[test]
    fn a_restored_device_tells_the_guest_its_connections_are_gone_once() {
        let m = mem();
        let mut r = Rig::activated(&m, true);
        // No event buffer yet: the reset waits for one.
        r.worker.send_reset();
        assert!(r.events().is_empty());
        let addr = r.alloc(4);
        let d = RawDescriptor::from(SplitDescriptor::new(addr, 4, F_WRITE, 0));
        r.ev.add_desc_chains(&[d], 0).unwrap();
        r.worker.send_reset();
        r.worker.send_reset();
        assert_eq!(r.events(), vec![EVENT_TRANSPORT_RESET]);

        let fresh = mem();
        let mut r = Rig::new(&fresh);
        let addr = r.alloc(4);
        let d = RawDescriptor::from(SplitDescriptor::new(addr, 4, F_WRITE, 0));
        r.ev.add_desc_chains(&[d], 0).unwrap();
        r.worker.send_reset();
        assert!(r.events().is_empty(), "a booted VM gets no reset");
    }

    #[test]
    fn with_event_idx_the_guest_is_asked_to_notify_and_interrupted_only_when_it_waits() {
        let m = mem();
        let mut r = Rig::build(&m, false, true);
        let mut host = r.connect(1000, CONN_BUF);
        // The REQUEST was taken and the RESPONSE put in an RX buffer in
        // one round: one interrupt for both queues.
        assert_eq!(r.received()[0].0.op, OP_RESPONSE);
        assert_eq!(r.interrupts(), 1);
        // Before it sleeps the device asks for the guest's next TX chain
        // and its next RX buffer (both at the next index it will read).
        assert_eq!((r.avail_event(&r.tx), r.avail_event(&r.rx)), (1, 1));

        // The guest is busy with earlier buffers: it asks to be
        // interrupted only past used index 10. Data flows, no interrupt.
        r.wait_for_used(&r.tx, 10);
        r.wait_for_used(&r.rx, 10);
        r.send(OP_RW, 5000, 1000, b"to host", CONN_BUF, 0);
        host.write_all(b"to guest").unwrap();
        r.worker
            .muxer
            .host_event(FIRST_CONN_TOKEN, true, false, false);
        r.worker.process();
        assert_eq!(read_n(&mut host, 7), b"to host");
        assert_eq!(r.received()[1].1, b"to guest");
        assert_eq!(r.interrupts(), 0, "the guest said it was not waiting");
        assert_eq!(r.avail_event(&r.tx), 2);

        // Now it waits for RX's next used buffer (index 2 is the third).
        r.wait_for_used(&r.rx, 2);
        host.write_all(b"more").unwrap();
        r.worker
            .muxer
            .host_event(FIRST_CONN_TOKEN, true, false, false);
        r.worker.process();
        assert_eq!(r.received()[2].1, b"more");
        assert_eq!(r.interrupts(), 1);
    }

    /// A guest that waits for its next used TX chain, on a connection to
    /// host port 1000 (the interrupt for its RESPONSE already taken).
    fn waiting_for_tx(m: &GuestMemoryMmap) -> (Rig<'_>, UnixStream) {
        let mut r = Rig::build(m, false, true);
        let host = r.connect(1000, CONN_BUF);
        let _ = r.interrupts();
        r.wait_for_used(&r.tx, r.tx_used());
        (r, host)
    }

    #[test]
    fn an_interrupt_for_tx_alone_waits_for_one_rx_needs() {
        let m = mem();
        let (mut r, mut host) = waiting_for_tx(&m);
        r.send(OP_RW, 5000, 1000, b"reply", CONN_BUF, 0);
        r.worker.process();
        assert_eq!(read_n(&mut host, 5), b"reply");
        assert_eq!(r.interrupts(), 0, "held back");

        // The host's next request: one interrupt serves both queues.
        r.wait_for_used(&r.rx, r.received().len() as u16);
        host.write_all(b"next").unwrap();
        r.worker
            .muxer
            .host_event(FIRST_CONN_TOKEN, true, false, false);
        r.worker.process();
        assert_eq!(r.received().last().unwrap().1, b"next");
        assert_eq!(r.interrupts(), 1);
        assert!(r.worker.tx_irq_owed.is_none(), "paid by the RX interrupt");

        // TX alone again, and nothing comes the other way: raised once
        // its time is up.
        r.wait_for_used(&r.tx, r.tx_used());
        r.send(OP_RW, 5000, 1000, b"late", CONN_BUF, 0);
        r.worker.process();
        assert_eq!(r.interrupts(), 0);
        std::thread::sleep(TX_IRQ_DEFER);
        r.worker.process();
        assert_eq!(r.interrupts(), 1);
    }

    #[test]
    fn a_guest_that_filled_half_its_tx_ring_is_interrupted_at_once() {
        // Without EVENT_IDX (the mock's used ring would overwrite a
        // used_event this far on): every used chain wants an interrupt.
        let m = mem();
        let mut r = Rig::new(&m);
        let mut host = r.connect(1000, CONN_BUF);
        let _ = r.interrupts();
        let half = RIG_QUEUE / 2;
        for _ in 1..half {
            r.send(OP_RW, 5000, 1000, b"x", CONN_BUF, 0);
        }
        r.worker.process();
        assert_eq!(r.interrupts(), 0, "{} chains: held back", half - 1);
        r.send(OP_RW, 5000, 1000, b"x", CONN_BUF, 0);
        r.worker.process();
        assert_eq!(r.interrupts(), 1, "{half} chains: at once");
        assert_eq!(
            read_n(&mut host, usize::from(half)).len(),
            usize::from(half)
        );
    }

    #[test]
    fn the_sleeping_worker_wakes_to_raise_a_held_back_interrupt() {
        let m = mem();
        let (mut r, mut host) = waiting_for_tx(&m);
        r.send(OP_RW, 5000, 1000, b"reply", CONN_BUF, 0);
        let (worker, irq, kill) = (&mut r.worker, &r.irq, &r.kill);
        let start = Instant::now();
        let raised_after = std::thread::scope(|s| {
            // Nothing else happens: the worker takes the chain, then
            // sleeps in its epoll until the interrupt is due.
            s.spawn(|| worker.run());
            while irq.read().is_err() {
                assert!(
                    start.elapsed() < Duration::from_secs(10),
                    "the held-back interrupt never came"
                );
                std::thread::sleep(Duration::from_millis(1));
            }
            let after = start.elapsed();
            kill.write(1).unwrap();
            after
        });
        assert_eq!(read_n(&mut host, 5), b"reply");
        assert!(
            raised_after >= TX_IRQ_DEFER,
            "raised after {raised_after:?}"
        );
    }
}

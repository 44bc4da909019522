//! The virtio-mmio transport, "version 2" register map (virtio 1.2,
//! section 4.2.2). Every register is 32 bits wide and naturally aligned;
//! other accesses outside the config space are ignored (reads see 0).
//!
//! Device status follows section 3.1.1: ACKNOWLEDGE, DRIVER, FEATURES_OK
//! (refused unless VERSION_1 was accepted), DRIVER_OK (activates the
//! device if every ready queue is valid in guest memory; otherwise the
//! transport sets DEVICE_NEEDS_RESET). Writing 0 resets device and queues.

use std::sync::Arc;

use virtio_queue::{Queue, QueueT};
use vmm_sys_util::eventfd::EventFd;

use super::persist::{QueueRegs, TransportState};
use super::{
    ActivateError, Activation, DeviceThread, Interrupt, VirtioDevice, INT_CONFIG_CHANGE,
    VIRTIO_F_VERSION_1, VIRTIO_RING_F_EVENT_IDX,
};
use crate::devices::bus::BusDevice;
use crate::host_seccomp::SeccompMode;
use crate::GuestMemoryMmap;

const MAGIC_VALUE: u32 = 0x7472_6976; // "virt"
const VERSION: u32 = 2;
const VENDOR_ID: u32 = 0x4d43_5056; // "VPCM"

pub const REG_MAGIC: u64 = 0x000;
pub const REG_VERSION: u64 = 0x004;
pub const REG_DEVICE_ID: u64 = 0x008;
pub const REG_VENDOR_ID: u64 = 0x00c;
pub const REG_DEVICE_FEATURES: u64 = 0x010;
pub const REG_DEVICE_FEATURES_SEL: u64 = 0x014;
pub const REG_DRIVER_FEATURES: u64 = 0x020;
pub const REG_DRIVER_FEATURES_SEL: u64 = 0x024;
pub const REG_QUEUE_SEL: u64 = 0x030;
pub const REG_QUEUE_NUM_MAX: u64 = 0x034;
pub const REG_QUEUE_NUM: u64 = 0x038;
pub const REG_QUEUE_READY: u64 = 0x044;
pub const REG_QUEUE_NOTIFY: u64 = 0x050;
pub const REG_INTERRUPT_STATUS: u64 = 0x060;
pub const REG_INTERRUPT_ACK: u64 = 0x064;
pub const REG_STATUS: u64 = 0x070;
pub const REG_QUEUE_DESC_LOW: u64 = 0x080;
pub const REG_QUEUE_DESC_HIGH: u64 = 0x084;
pub const REG_QUEUE_DRIVER_LOW: u64 = 0x090;
pub const REG_QUEUE_DRIVER_HIGH: u64 = 0x094;
pub const REG_QUEUE_DEVICE_LOW: u64 = 0x0a0;
pub const REG_QUEUE_DEVICE_HIGH: u64 = 0x0a4;
pub const REG_CONFIG_GENERATION: u64 = 0x0fc;
pub const CONFIG_SPACE: u64 = 0x100;

pub const STATUS_ACKNOWLEDGE: u32 = 1;
pub const STATUS_DRIVER: u32 = 2;
pub const STATUS_DRIVER_OK: u32 = 4;
pub const STATUS_FEATURES_OK: u32 = 8;
pub const STATUS_NEEDS_RESET: u32 = 64;
pub const STATUS_FAILED: u32 = 128;

pub struct MmioTransport {
    device: Box<dyn VirtioDevice>,
    mem: GuestMemoryMmap,
    interrupt: Arc<Interrupt>,
    thread: Arc<DeviceThread>,
    queues: Vec<Queue>,
    queue_evts: Vec<EventFd>,
    /// Written by KVM when the driver acknowledges an interrupt, for
    /// registration as an ioeventfd on InterruptACK; never read (the
    /// status was cleared when the driver read it).
    ack_evt: EventFd,
    queue_sel: u32,
    features_sel: u32,
    driver_features_sel: u32,
    driver_features: u64,
    status: u32,
    activated: bool,
    config_generation: u32,
}

#[derive(Debug, thiserror::Error)]
pub enum MmioError {
    #[error("Cannot create a queue of size {0}")]
    Queue(u16),
    #[error("Cannot create a queue notification eventfd")]
    EventFd(#[source] std::io::Error),
    #[error("Cannot start the device's thread")]
    Thread(#[from] ActivateError),
}

impl MmioTransport {
    pub fn new(
        device: Box<dyn VirtioDevice>,
        mem: GuestMemoryMmap,
        irq: EventFd,
        seccomp: SeccompMode,
    ) -> Result<Self, MmioError> {
        let thread = Arc::new(DeviceThread::spawn(device.thread_kind(), seccomp)?);
        let mut queues = Vec::new();
        let mut queue_evts = Vec::new();
        for &size in device.queue_max_sizes() {
            queues.push(Queue::new(size).map_err(|_| MmioError::Queue(size))?);
            queue_evts.push(EventFd::new(libc::EFD_NONBLOCK).map_err(MmioError::EventFd)?);
        }
        Ok(Self {
            device,
            mem,
            interrupt: Arc::new(Interrupt::new(irq)),
            thread,
            queues,
            queue_evts,
            ack_evt: EventFd::new(libc::EFD_NONBLOCK).map_err(MmioError::EventFd)?,
            queue_sel: 0,
            features_sel: 0,
            driver_features_sel: 0,
            driver_features: 0,
            status: 0,
            activated: false,
            config_generation: 0,
        })
    }

    /// The notify eventfd of each queue, for registration as ioeventfds on
    /// the QueueNotify register (datamatch = queue index).
    pub fn queue_evts(&self) -> &[EventFd] {
        &self.queue_evts
    }

    /// The eventfd to register on the InterruptACK register: the driver's
    /// acknowledgement then ends in the kernel instead of an exit to us
    /// (one per interrupt: the status read is the other).
    pub fn ack_evt(&self) -> &EventFd {
        &self.ack_evt
    }

    pub fn status(&self) -> u32 {
        self.status
    }

    fn selected(&mut self) -> Option<&mut Queue> {
        // Queue setup is only allowed before DRIVER_OK (section 4.2.3.2).
        if self.status & STATUS_DRIVER_OK != 0 {
            return None;
        }
        self.queues.get_mut(self.queue_sel as usize)
    }

    fn read_reg(&self, offset: u64) -> u32 {
        let q = self.queues.get(self.queue_sel as usize);
        match offset {
            REG_MAGIC => MAGIC_VALUE,
            REG_VERSION => VERSION,
            REG_DEVICE_ID => self.device.device_type(),
            REG_VENDOR_ID => VENDOR_ID,
            REG_DEVICE_FEATURES => match self.features_sel {
                0 => self.device.features() as u32,
                1 => (self.device.features() >> 32) as u32,
                _ => 0,
            },
            REG_QUEUE_NUM_MAX => q.map_or(0, |q| u32::from(q.max_size())),
            REG_QUEUE_READY => q.map_or(0, |q| u32::from(q.ready())),
            // Read-to-clear (`Interrupt::take_status`), so that the
            // acknowledgement needs no exit.
            REG_INTERRUPT_STATUS => self.interrupt.take_status(),
            REG_STATUS => self.status,
            REG_CONFIG_GENERATION => self.config_generation,
            _ => 0,
        }
    }

    fn write_reg(&mut self, offset: u64, v: u32) {
        match offset {
            REG_DEVICE_FEATURES_SEL => self.features_sel = v,
            REG_DRIVER_FEATURES_SEL => self.driver_features_sel = v,
            REG_DRIVER_FEATURES => {
                // Only while negotiating (section 3.1.1 step 5).
                if self.status & (STATUS_FEATURES_OK | STATUS_DRIVER_OK) == 0 {
                    match self.driver_features_sel {
                        0 => {
                            self.driver_features =
                                (self.driver_features & !0xffff_ffff) | u64::from(v)
                        }
                        1 => {
                            self.driver_features =
                                (self.driver_features & 0xffff_ffff) | (u64::from(v) << 32)
                        }
                        _ => {}
                    }
                }
            }
            REG_QUEUE_SEL => self.queue_sel = v,
            REG_QUEUE_NUM => {
                if let Some(q) = self.selected() {
                    // Sizes above the maximum or not a power of two are
                    // refused by the queue; the driver sees it as not valid.
                    q.set_size(v.min(u32::from(u16::MAX)) as u16);
                }
            }
            REG_QUEUE_READY => {
                if let Some(q) = self.selected() {
                    q.set_ready(v == 1);
                }
            }
            REG_QUEUE_DESC_LOW => self.set_addr(|q, v| q.set_desc_table_address(Some(v), None), v),
            REG_QUEUE_DESC_HIGH => self.set_addr(|q, v| q.set_desc_table_address(None, Some(v)), v),
            REG_QUEUE_DRIVER_LOW => {
                self.set_addr(|q, v| q.set_avail_ring_address(Some(v), None), v)
            }
            REG_QUEUE_DRIVER_HIGH => {
                self.set_addr(|q, v| q.set_avail_ring_address(None, Some(v)), v)
            }
            REG_QUEUE_DEVICE_LOW => self.set_addr(|q, v| q.set_used_ring_address(Some(v), None), v),
            REG_QUEUE_DEVICE_HIGH => {
                self.set_addr(|q, v| q.set_used_ring_address(None, Some(v)), v)
            }
            REG_QUEUE_NOTIFY => {
                // Reached only when no ioeventfd is registered for it.
                if let Some(evt) = self.queue_evts.get(v as usize) {
                    let _ = evt.write(1);
                }
            }
            // Reached only when no ioeventfd is registered for it.
            REG_INTERRUPT_ACK => self.interrupt.ack(v),
            REG_STATUS => self.set_status(v),
            _ => {}
        }
    }

    fn set_addr(&mut self, f: impl FnOnce(&mut Queue, u32), v: u32) {
        if let Some(q) = self.selected() {
            f(q, v);
        }
    }

    fn set_status(&mut self, v: u32) {
        if v == 0 {
            self.reset();
            return;
        }
        // The driver may only add bits (section 2.1.2), FAILED aside; once
        // the device runs, not even with FAILED: only a reset takes bits
        // away, so the transport never says "not running" (and accepts
        // new queue addresses) while a worker still uses the old ones.
        if v & self.status != self.status && (v & STATUS_FAILED == 0 || self.activated) {
            return;
        }
        let added = v & !self.status;
        if added & STATUS_FEATURES_OK != 0 {
            let accepted = self.driver_features & self.device.features();
            if accepted & VIRTIO_F_VERSION_1 == 0
                || self.driver_features & !self.device.features() != 0
            {
                // Legacy drivers or features we never offered: refuse by not
                // setting FEATURES_OK (the driver reads it back).
                self.status = v & !STATUS_FEATURES_OK;
                return;
            }
            self.device.ack_features(accepted);
        }
        if added & STATUS_DRIVER_OK != 0 && !self.activated {
            if v & STATUS_FEATURES_OK == 0 {
                return;
            }
            self.status = v;
            self.activate();
            return;
        }
        self.status = v;
    }

    fn activate(&mut self) {
        self.activate_with(false);
    }

    /// Activates the device on copies of the queues; `restored`: the
    /// queues were set up in the VM a snapshot was taken of.
    fn activate_with(&mut self, restored: bool) {
        let valid = self
            .queues
            .iter()
            .all(|q| !q.ready() || q.is_valid(&self.mem));
        let evts: Result<Vec<EventFd>, _> = self.queue_evts.iter().map(|e| e.try_clone()).collect();
        // The device gets its own copies; the transport keeps the registers
        // the driver may still read.
        let event_idx =
            self.driver_features & self.device.features() & VIRTIO_RING_F_EVENT_IDX != 0;
        let queues: Result<Vec<Queue>, _> = self
            .queues
            .iter()
            .map(|q| {
                let mut q = Queue::try_from(q.state())?;
                q.set_event_idx(event_idx);
                Ok::<_, virtio_queue::Error>(q)
            })
            .collect();
        let result = match (valid, evts, queues) {
            (true, Ok(queue_evts), Ok(queues)) => self
                .device
                .activate(Activation {
                    mem: self.mem.clone(),
                    queues,
                    queue_evts,
                    interrupt: self.interrupt.clone(),
                    thread: self.thread.clone(),
                    restored,
                })
                .map_err(|e| e.to_string()),
            (false, _, _) => Err("a ready queue is not valid in guest memory".to_string()),
            (_, Err(e), _) => Err(e.to_string()),
            (_, _, Err(e)) => Err(format!("{e:?}")),
        };
        match result {
            Ok(()) => self.activated = true,
            Err(e) => {
                log::warn!(
                    "virtio device type {} failed to activate: {e}",
                    self.device.device_type()
                );
                self.status |= STATUS_NEEDS_RESET;
                self.interrupt.signal(INT_CONFIG_CHANGE);
            }
        }
    }

    /// Stops the device for a snapshot and returns the registers. The
    /// device's worker hands back what it owned and holds no descriptor
    /// chain afterwards (every chain it took is on the used ring), which
    /// is what lets [`Self::restore`] take the queue positions from guest
    /// memory. The device does not run again in this VM.
    pub fn save(&mut self) -> TransportState {
        if self.activated {
            self.device.reset();
        }
        TransportState {
            status: self.status,
            features_sel: self.features_sel,
            driver_features_sel: self.driver_features_sel,
            driver_features: self.driver_features,
            queue_sel: self.queue_sel,
            config_generation: self.config_generation,
            interrupt_status: self.interrupt.status(),
            activated: self.activated,
            queues: self
                .queues
                .iter()
                .map(|q| QueueRegs {
                    size: q.size(),
                    ready: q.ready(),
                    desc: q.desc_table(),
                    avail: q.avail_ring(),
                    used: q.used_ring(),
                })
                .collect(),
        }
    }

    /// Sets the registers a snapshot saved (guest memory already holds
    /// the snapshot's), and starts the device again if it was running,
    /// each queue at its used ring's index. Errors say what does not fit.
    pub fn restore(&mut self, saved: &TransportState) -> Result<(), String> {
        if saved.queues.len() != self.queues.len() {
            return Err(format!(
                "a virtio device of type {} has {} queues, the snapshot {}",
                self.device.device_type(),
                self.queues.len(),
                saved.queues.len()
            ));
        }
        for (q, r) in self.queues.iter_mut().zip(&saved.queues) {
            q.set_size(r.size);
            q.set_desc_table_address(Some(r.desc as u32), Some((r.desc >> 32) as u32));
            q.set_avail_ring_address(Some(r.avail as u32), Some((r.avail >> 32) as u32));
            q.set_used_ring_address(Some(r.used as u32), Some((r.used >> 32) as u32));
            q.set_ready(r.ready);
            if r.ready && saved.activated {
                if !q.is_valid(&self.mem) {
                    return Err("a ready queue is not valid in guest memory".into());
                }
                let at = q
                    .used_idx(&self.mem, std::sync::atomic::Ordering::Acquire)
                    .map_err(|e| format!("cannot read a used ring: {e}"))?;
                q.set_next_avail(at.0);
                q.set_next_used(at.0);
                log::debug!(
                    "virtio device type {}: queue restored at {}",
                    self.device.device_type(),
                    at.0
                );
            }
        }
        self.status = saved.status;
        self.features_sel = saved.features_sel;
        self.driver_features_sel = saved.driver_features_sel;
        self.driver_features = saved.driver_features;
        self.queue_sel = saved.queue_sel;
        self.config_generation = saved.config_generation;
        if saved.status & STATUS_FEATURES_OK != 0 {
            self.device
                .ack_features(self.driver_features & self.device.features());
        }
        if saved.activated {
            self.activate_with(true);
            if !self.activated {
                return Err(format!(
                    "the virtio device of type {} did not start again",
                    self.device.device_type()
                ));
            }
        }
        // An interrupt the driver had not acknowledged is raised again
        // (the irqfd edge was the old VM's).
        if saved.interrupt_status != 0 {
            self.interrupt.signal(saved.interrupt_status);
        }
        Ok(())
    }

    fn reset(&mut self) {
        if self.activated {
            self.device.reset();
            self.activated = false;
        }
        for q in &mut self.queues {
            q.reset();
        }
        self.status = 0;
        self.queue_sel = 0;
        self.features_sel = 0;
        self.driver_features_sel = 0;
        self.driver_features = 0;
        self.interrupt.ack(u32::MAX);
        // Drain notifications from before the reset.
        for e in &self.queue_evts {
            let _ = e.read();
        }
    }
}

impl BusDevice for MmioTransport {
    fn read(&mut self, offset: u64, data: &mut [u8]) {
        if offset >= CONFIG_SPACE {
            self.device.read_config(offset - CONFIG_SPACE, data);
        } else if data.len() == 4 && offset % 4 == 0 {
            data.copy_from_slice(&self.read_reg(offset).to_le_bytes());
        } else {
            data.fill(0);
        }
    }

    fn write(&mut self, offset: u64, data: &[u8]) {
        if offset >= CONFIG_SPACE {
            self.device.write_config(offset - CONFIG_SPACE, data);
            self.config_generation = self.config_generation.wrapping_add(1);
        } else if let (4, 0) = (data.len(), offset % 4) {
            self.write_reg(
                offset,
                u32::from_le_bytes(data.try_into().expect("4 bytes")),
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Mutex;
    use vm_memory::GuestAddress;

    #[derive(Default)]
    struct Seen {
        acked: u64,
        activations: usize,
        resets: usize,
        queues: usize,
        /// Where each queue starts, and whether it came from a snapshot.
        next_avail: Vec<u16>,
        restored: bool,
    }

    struct Dummy(Arc<Mutex<Seen>>);

    impl VirtioDevice for Dummy {
        fn device_type(&self) -> u32 {
            42
        }
        fn thread_kind(&self) -> crate::host_seccomp::ThreadKind {
            crate::host_seccomp::ThreadKind::Rng
        }
        fn queue_max_sizes(&self) -> &[u16] {
            &[16, 16]
        }
        fn features(&self) -> u64 {
            VIRTIO_F_VERSION_1 | 1
        }
        fn ack_features(&mut self, f: u64) {
            self.0.lock().unwrap().acked = f;
        }
        fn read_config(&self, offset: u64, data: &mut [u8]) {
            super::super::read_config_bytes(&[0xaa, 0xbb, 0xcc, 0xdd], offset, data);
        }
        fn activate(&mut self, a: Activation) -> Result<(), super::super::ActivateError> {
            let mut s = self.0.lock().unwrap();
            s.activations += 1;
            s.queues = a.queues.len();
            s.next_avail = a.queues.iter().map(|q| q.next_avail()).collect();
            s.restored = a.restored;
            Ok(())
        }
        fn reset(&mut self) {
            self.0.lock().unwrap().resets += 1;
        }
    }

    fn transport() -> (MmioTransport, Arc<Mutex<Seen>>) {
        let mem = GuestMemoryMmap::from_ranges(&[(GuestAddress(0), 0x10_0000)]).unwrap();
        transport_on(mem)
    }

    fn transport_on(mem: GuestMemoryMmap) -> (MmioTransport, Arc<Mutex<Seen>>) {
        let seen = Arc::new(Mutex::new(Seen::default()));
        let t = MmioTransport::new(
            Box::new(Dummy(seen.clone())),
            mem,
            EventFd::new(libc::EFD_NONBLOCK).unwrap(),
            SeccompMode::Off,
        )
        .unwrap();
        (t, seen)
    }

    fn r(t: &mut MmioTransport, off: u64) -> u32 {
        let mut b = [0u8; 4];
        t.read(off, &mut b);
        u32::from_le_bytes(b)
    }

    fn w(t: &mut MmioTransport, off: u64, v: u32) {
        t.write(off, &v.to_le_bytes());
    }

    fn negotiate(t: &mut MmioTransport, features_hi: u32) {
        w(t, REG_STATUS, STATUS_ACKNOWLEDGE);
        w(t, REG_STATUS, STATUS_ACKNOWLEDGE | STATUS_DRIVER);
        w(t, REG_DRIVER_FEATURES_SEL, 0);
        w(t, REG_DRIVER_FEATURES, 1);
        w(t, REG_DRIVER_FEATURES_SEL, 1);
        w(t, REG_DRIVER_FEATURES, features_hi);
        w(
            t,
            REG_STATUS,
            STATUS_ACKNOWLEDGE | STATUS_DRIVER | STATUS_FEATURES_OK,
        );
    }

    fn setup_queue(t: &mut MmioTransport, sel: u32, base: u32) {
        w(t, REG_QUEUE_SEL, sel);
        w(t, REG_QUEUE_NUM, 16);
        w(t, REG_QUEUE_DESC_LOW, base);
        w(t, REG_QUEUE_DRIVER_LOW, base + 0x1000);
        w(t, REG_QUEUE_DEVICE_LOW, base + 0x2000);
        w(t, REG_QUEUE_READY, 1);
    }

    #[test]
    fn identity_registers() {
        let (mut t, _) = transport();
        assert_eq!(r(&mut t, REG_MAGIC), MAGIC_VALUE);
        assert_eq!(r(&mut t, REG_VERSION), 2);
        assert_eq!(r(&mut t, REG_DEVICE_ID), 42);
        w(&mut t, REG_DEVICE_FEATURES_SEL, 1);
        assert_eq!(r(&mut t, REG_DEVICE_FEATURES), 1);
        w(&mut t, REG_DEVICE_FEATURES_SEL, 0);
        assert_eq!(r(&mut t, REG_DEVICE_FEATURES), 1);
        w(&mut t, REG_QUEUE_SEL, 1);
        assert_eq!(r(&mut t, REG_QUEUE_NUM_MAX), 16);
        w(&mut t, REG_QUEUE_SEL, 7);
        assert_eq!(r(&mut t, REG_QUEUE_NUM_MAX), 0);
    }

    #[test]
    fn full_setup_activates_the_device() {
        let (mut t, seen) = transport();
        negotiate(&mut t, 1);
        assert_ne!(r(&mut t, REG_STATUS) & STATUS_FEATURES_OK, 0);
        assert_eq!(seen.lock().unwrap().acked, VIRTIO_F_VERSION_1 | 1);
        setup_queue(&mut t, 0, 0x1_0000);
        setup_queue(&mut t, 1, 0x2_0000);
        w(
            &mut t,
            REG_STATUS,
            STATUS_ACKNOWLEDGE | STATUS_DRIVER | STATUS_FEATURES_OK | STATUS_DRIVER_OK,
        );
        assert_eq!(seen.lock().unwrap().activations, 1);
        assert_eq!(seen.lock().unwrap().queues, 2);
        assert_eq!(r(&mut t, REG_STATUS) & STATUS_NEEDS_RESET, 0);
        // Queue registers are frozen after DRIVER_OK.
        w(&mut t, REG_QUEUE_SEL, 0);
        w(&mut t, REG_QUEUE_READY, 0);
        assert_eq!(r(&mut t, REG_QUEUE_READY), 1);
        // A running device's status only grows or resets: taking
        // DRIVER_OK away (even with FAILED) would unfreeze the queues
        // under a running worker.
        let running = r(&mut t, REG_STATUS);
        w(&mut t, REG_STATUS, STATUS_FAILED | STATUS_ACKNOWLEDGE);
        assert_eq!(r(&mut t, REG_STATUS), running);
        w(&mut t, REG_QUEUE_DESC_LOW, 0x9_0000);
        w(&mut t, REG_QUEUE_READY, 0);
        assert_eq!(r(&mut t, REG_QUEUE_READY), 1);
        w(&mut t, REG_STATUS, running | STATUS_FAILED);
        assert_eq!(r(&mut t, REG_STATUS), running | STATUS_FAILED);
        assert_eq!(seen.lock().unwrap().activations, 1);
    }

    #[test]
    fn reading_the_interrupt_status_clears_it_and_a_later_signal_sets_it_again() {
        let (mut t, _) = transport();
        t.interrupt.signal_used_queue();
        t.interrupt.signal(INT_CONFIG_CHANGE);
        let both = super::super::INT_USED_RING | INT_CONFIG_CHANGE;
        assert_eq!(
            r(&mut t, REG_INTERRUPT_STATUS),
            both,
            "the driver sees both causes"
        );
        // Its acknowledgement goes to KVM's ioeventfd and reaches no one:
        // nothing may be left for it to clear.
        assert_eq!(r(&mut t, REG_INTERRUPT_STATUS), 0, "cleared by the read");
        t.interrupt.signal_used_queue();
        assert_eq!(
            r(&mut t, REG_INTERRUPT_STATUS),
            super::super::INT_USED_RING,
            "a signal after the read is seen by the next one"
        );
        // Where no ioeventfd took it, the acknowledgement still clears.
        t.interrupt.signal_used_queue();
        w(&mut t, REG_INTERRUPT_ACK, super::super::INT_USED_RING);
        assert_eq!(t.interrupt.status(), 0);
    }

    #[test]
    fn a_saved_transport_restores_with_its_queues_where_the_used_rings_are() {
        use vm_memory::Bytes;
        let (mut t, seen) = transport();
        negotiate(&mut t, 1);
        setup_queue(&mut t, 0, 0x1_0000);
        setup_queue(&mut t, 1, 0x2_0000);
        w(
            &mut t,
            REG_STATUS,
            STATUS_ACKNOWLEDGE | STATUS_DRIVER | STATUS_FEATURES_OK | STATUS_DRIVER_OK,
        );
        // The device used 5 and 9 chains: the used rings' idx (offset 2).
        t.mem.write_obj(5u16, GuestAddress(0x1_2002)).unwrap();
        t.mem.write_obj(9u16, GuestAddress(0x2_2002)).unwrap();
        t.interrupt.signal_used_queue();
        let saved = t.save();
        assert_eq!(seen.lock().unwrap().resets, 1, "the worker stopped");
        assert!(saved.activated);
        assert_eq!(saved.queues[1].avail, 0x2_1000);

        // Another VM on the same memory (as a restore maps it).
        let (mut again, seen2) = transport_on(t.mem.clone());
        again.restore(&saved).unwrap();
        let s = seen2.lock().unwrap();
        assert_eq!((s.activations, s.restored), (1, true));
        assert_eq!(s.next_avail, vec![5, 9]);
        assert_eq!(s.acked, VIRTIO_F_VERSION_1 | 1);
        drop(s);
        assert_eq!(r(&mut again, REG_STATUS), saved.status);
        assert_eq!(
            r(&mut again, REG_INTERRUPT_STATUS),
            super::super::INT_USED_RING
        );
        w(&mut again, REG_QUEUE_SEL, 1);
        assert_eq!(r(&mut again, REG_QUEUE_READY), 1);
    }

    #[test]
    fn a_saved_queue_outside_memory_is_refused_on_restore() {
        let (mut t, _) = transport();
        negotiate(&mut t, 1);
        setup_queue(&mut t, 0, 0x1_0000);
        w(
            &mut t,
            REG_STATUS,
            STATUS_ACKNOWLEDGE | STATUS_DRIVER | STATUS_FEATURES_OK | STATUS_DRIVER_OK,
        );
        let mut saved = t.save();
        saved.queues[0].used = 0xfff0_0000;
        let (mut again, seen) = transport();
        let e = again.restore(&saved).unwrap_err();
        assert!(e.contains("not valid in guest memory"), "{e}");
        assert_eq!(seen.lock().unwrap().activations, 0);
        saved.queues.pop();
        let e = again.restore(&saved).unwrap_err();
        assert!(e.contains("has 2 queues, the snapshot 1"), "{e}");
    }

    #[test]
    fn legacy_driver_without_version_1_is_refused() {
        let (mut t, seen) = transport();
        negotiate(&mut t, 0);
        assert_eq!(r(&mut t, REG_STATUS) & STATUS_FEATURES_OK, 0);
        w(
            &mut t,
            REG_STATUS,
            STATUS_ACKNOWLEDGE | STATUS_DRIVER | STATUS_DRIVER_OK,
        );
        assert_eq!(seen.lock().unwrap().activations, 0);
    }

    #[test]
    fn features_never_offered_are_refused() {
        let (mut t, _) = transport();
        negotiate(&mut t, 1 | 2); // bit 33 is not offered
        assert_eq!(r(&mut t, REG_STATUS) & STATUS_FEATURES_OK, 0);
    }

    #[test]
    fn queue_outside_memory_sets_needs_reset() {
        let (mut t, seen) = transport();
        negotiate(&mut t, 1);
        setup_queue(&mut t, 0, 0xfff0_0000);
        w(
            &mut t,
            REG_STATUS,
            STATUS_ACKNOWLEDGE | STATUS_DRIVER | STATUS_FEATURES_OK | STATUS_DRIVER_OK,
        );
        assert_eq!(seen.lock().unwrap().activations, 0);
        assert_ne!(r(&mut t, REG_STATUS) & STATUS_NEEDS_RESET, 0);
        assert_ne!(r(&mut t, REG_INTERRUPT_STATUS) & INT_CONFIG_CHANGE, 0);
    }

    #[test]
    fn reset_clears_state_and_resets_the_device() {
        let (mut t, seen) = transport();
        negotiate(&mut t, 1);
        setup_queue(&mut t, 0, 0x1_0000);
        w(
            &mut t,
            REG_STATUS,
            STATUS_ACKNOWLEDGE | STATUS_DRIVER | STATUS_FEATURES_OK | STATUS_DRIVER_OK,
        );
        w(&mut t, REG_STATUS, 0);
        assert_eq!(seen.lock().unwrap().resets, 1);
        assert_eq!(r(&mut t, REG_STATUS), 0);
        w(&mut t, REG_QUEUE_SEL, 0);
        assert_eq!(r(&mut t, REG_QUEUE_READY), 0);
        // And it can be brought up again.
        negotiate(&mut t, 1);
        setup_queue(&mut t, 0, 0x1_0000);
        w(
            &mut t,
            REG_STATUS,
            STATUS_ACKNOWLEDGE | STATUS_DRIVER | STATUS_FEATURES_OK | STATUS_DRIVER_OK,
        );
        assert_eq!(seen.lock().unwrap().activations, 2);
    }

    #[test]
    fn notify_without_ioeventfd_signals_the_queue_event() {
        let (mut t, _) = transport();
        w(&mut t, REG_QUEUE_NOTIFY, 1);
        assert_eq!(t.queue_evts()[1].read().unwrap(), 1);
        w(&mut t, REG_QUEUE_NOTIFY, 99); // no such queue: ignored
    }

    #[test]
    fn odd_accesses_are_ignored_and_config_is_readable() {
        let (mut t, _) = transport();
        let mut b = [0xffu8; 2];
        t.read(REG_MAGIC, &mut b);
        assert_eq!(b, [0, 0]);
        t.write(REG_STATUS, &[1]);
        assert_eq!(r(&mut t, REG_STATUS), 0);
        let mut c = [0u8; 2];
        t.read(CONFIG_SPACE + 1, &mut c);
        assert_eq!(c, [0xbb, 0xcc]);
        // Random writes everywhere leave the transport readable.
        for off in (0..0x200).step_by(4) {
            w(&mut t, off, 0xdead_beef);
        }
        assert_eq!(r(&mut t, REG_MAGIC), MAGIC_VALUE);
    }
}

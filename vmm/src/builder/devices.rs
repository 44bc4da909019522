//! A VM's devices on their buses, and the VM they make ready to run:
//! what booting and restoring share (`super::build`, `super::restore`).

use std::path::PathBuf;
use std::sync::atomic::AtomicBool;
use std::sync::mpsc::{self, Receiver};
use std::sync::{Arc, Mutex};

use kvm_ioctls::{IoEventAddress, NoDatamatch};
use vmm_sys_util::eventfd::EventFd;

use super::error::{BootError, RestoreError};
use crate::arch::x86_64::layout::*;
use crate::devices::boot_timer::BootTimer;
use crate::devices::bus::Bus;
use crate::devices::legacy::i8042::I8042;
use crate::devices::legacy::serial::{ConsoleOut, SerialDevice};
use crate::devices::power::PowerPort;
use crate::devices::virtio::block::device::Block;
use crate::devices::virtio::block::disk::Disk;
use crate::devices::virtio::block::CacheMode;
use crate::devices::virtio::mmio::{self, MmioTransport};
use crate::devices::virtio::rng::Rng;
use crate::devices::virtio::vsock::device::Vsock;
use crate::devices::virtio::DeviceSpec;
use crate::devices::virtio::VirtioDevice;
use crate::devices::{EventSender, VmEvent};
use crate::host_seccomp::SeccompMode;
use crate::kvm::vcpu::Vcpu;
use crate::kvm::vm::Vm;
use crate::snapshot::SnapshotError;
use crate::{Boot, VmConfig};

/// A VM ready to run: everything `crate::run` needs.
pub struct BuiltVm {
    pub vm: Vm,
    pub vcpus: Vec<Vcpu>,
    pub pio: Arc<Bus>,
    pub mmio: Arc<Bus>,
    pub events: EventSender,
    pub event_rx: Receiver<VmEvent>,
    pub serial: Option<Arc<Mutex<SerialDevice>>>,
    pub panicked: Arc<AtomicBool>,
    /// The guest's kernel command line.
    pub cmdline: String,
    /// Whether the guest's CPUID offers the TSC-deadline timer (kept in a
    /// snapshot, which is restored with the same).
    pub tsc_deadline: bool,
    pub seccomp: SeccompMode,
    /// The virtio devices in bus order, with what each is (for snapshots).
    pub virtio: Vec<AttachedVirtio>,
    /// When each build step ended, since the VMM process started.
    pub phases: Vec<(&'static str, std::time::Duration)>,
}

/// A virtio device on the bus: what it is, and its transport.
pub type AttachedVirtio = (DeviceSpec, Arc<Mutex<MmioTransport>>);

/// A VM's devices, attached to their buses, and the channel they report
/// guest events on.
pub(crate) struct Devices {
    pio: Bus,
    mmio: Bus,
    events: EventSender,
    event_rx: Receiver<VmEvent>,
    pub serial: Option<SharedSerial>,
    panicked: Arc<AtomicBool>,
    pub virtio: Vec<AttachedVirtio>,
}

/// Attaches the legacy devices (with a UART when there is a console,
/// in `serial_state` when restored) and the virtio devices `specs` names.
pub(crate) fn attach_devices(
    vm: &Vm,
    console: Option<Box<dyn std::io::Write + Send>>,
    serial_state: Option<vm_superio::serial::SerialState>,
    specs: Vec<DeviceSpec>,
    config: &VmConfig,
) -> Result<Devices, BootError> {
    let (events, event_rx) = mpsc::channel();
    let panicked = Arc::new(AtomicBool::new(false));
    let (pio, serial) =
        legacy_devices(vm, console, serial_state, &events, &panicked, config.start)?;
    let mut mmio = Bus::new();
    let virtio = virtio_devices(vm, &mut mmio, specs, config)?;
    Ok(Devices {
        pio,
        mmio,
        events,
        event_rx,
        serial,
        panicked,
        virtio,
    })
}

impl BuiltVm {
    pub(crate) fn assemble(
        vm: Vm,
        vcpus: Vec<Vcpu>,
        d: Devices,
        cmdline: String,
        tsc_deadline: bool,
        seccomp: SeccompMode,
    ) -> BuiltVm {
        BuiltVm {
            vm,
            vcpus,
            pio: Arc::new(d.pio),
            mmio: Arc::new(d.mmio),
            events: d.events,
            event_rx: d.event_rx,
            serial: d.serial,
            panicked: d.panicked,
            cmdline,
            tsc_deadline,
            seccomp,
            virtio: d.virtio,
            phases: Vec::new(),
        }
    }
}

/// Where virtio device `i` sits: its MMIO window and IRQ.
pub(super) fn virtio_window(i: usize) -> (u64, u32) {
    (
        MMIO_DEVICES_START + i as u64 * MMIO_DEVICE_WINDOW,
        VIRTIO_IRQ_START + i as u32,
    )
}

/// Makes the virtio devices described by `wanted`, in order, and puts
/// each behind its transport on the MMIO bus. A block device's `bytes`
/// comes back filled in. The vsock host socket is the one `config` names.
fn virtio_devices(
    vm: &Vm,
    mmio: &mut Bus,
    wanted: Vec<DeviceSpec>,
    config: &VmConfig,
) -> Result<Vec<AttachedVirtio>, BootError> {
    if wanted.len() > MAX_VIRTIO_DEVICES {
        return Err(BootError::TooManyDevices(wanted.len()));
    }
    let mut attached = Vec::with_capacity(wanted.len());
    for (i, mut kind) in wanted.into_iter().enumerate() {
        let device: Box<dyn VirtioDevice> = match &mut kind {
            DeviceSpec::Block {
                path,
                read_only,
                direct,
                id,
                bytes,
            } => {
                let cache = if *direct {
                    CacheMode::Direct
                } else {
                    CacheMode::Page
                };
                let disk = Disk::open(path, *read_only, cache, id)?;
                *bytes = disk.sectors() * 512;
                Box::new(Block::new(disk))
            }
            DeviceSpec::Vsock { guest_cid } => {
                let uds = config
                    .vsock
                    .as_ref()
                    .map(|v| v.uds_path.clone())
                    .ok_or_else(|| RestoreError::Vsock {
                        dir: match &config.boot {
                            Boot::Snapshot(dir) => dir.clone(),
                            Boot::Kernel(_) => PathBuf::new(),
                        },
                        had: true,
                    })?;
                Box::new(Vsock::new(*guest_cid, &uds, config.seccomp)?)
            }
            DeviceSpec::Rng => Box::new(Rng::new()),
        };
        let (base, irq) = virtio_window(i);
        let transport = attach_virtio(vm, mmio, device, base, irq, config.seccomp)?;
        attached.push((kind, transport));
    }
    Ok(attached)
}

type SharedSerial = Arc<Mutex<SerialDevice>>;

/// The port-I/O devices: the serial port (when there is a console; from
/// `serial_state` when restoring), the i8042 (reset), the boot timer and
/// the power port.
fn legacy_devices(
    vm: &Vm,
    console: Option<Box<dyn std::io::Write + Send>>,
    serial_state: Option<vm_superio::serial::SerialState>,
    events: &EventSender,
    panicked: &Arc<AtomicBool>,
    start: std::time::Instant,
) -> Result<(Bus, Option<SharedSerial>), BootError> {
    let mut pio = Bus::new();
    let serial = match console {
        Some(out) => {
            let irq = EventFd::new(libc::EFD_NONBLOCK).map_err(|source| BootError::Device {
                what: "serial IRQ",
                source,
            })?;
            vm.fd
                .register_irqfd(&irq, SERIAL_IRQ)
                .map_err(|e| BootError::Device {
                    what: "serial IRQ",
                    source: std::io::Error::from_raw_os_error(e.errno()),
                })?;
            let out = ConsoleOut::new(out, panicked.clone());
            let dev = match serial_state {
                None => SerialDevice::new(irq, out),
                Some(state) => SerialDevice::from_state(irq, out, &state).map_err(|why| {
                    SnapshotError::Invalid {
                        path: PathBuf::new(),
                        why: format!("its serial port state: {why}"),
                    }
                })?,
            };
            let dev = Arc::new(Mutex::new(dev));
            pio.insert(
                dev.clone(),
                u64::from(SERIAL_PORT),
                u64::from(SERIAL_PORT_LEN),
            )?;
            Some(dev)
        }
        None => None,
    };
    pio.insert(
        Arc::new(Mutex::new(I8042::new(events.clone()))),
        u64::from(I8042_PORT),
        u64::from(I8042_PORT_LEN),
    )?;
    pio.insert(
        Arc::new(Mutex::new(BootTimer::new(start, events.clone()))),
        u64::from(BOOT_TIMER_PORT),
        1,
    )?;
    pio.insert(
        Arc::new(Mutex::new(PowerPort::new(events.clone()))),
        u64::from(POWER_PORT),
        1,
    )?;
    Ok((pio, serial))
}

/// Puts `device` behind an MMIO transport at `base`: the transport on the
/// MMIO bus, its interrupt on `irq` through an irqfd, and every queue's
/// notify register as an ioeventfd so that notifications do not exit to
/// userspace.
fn attach_virtio(
    vm: &Vm,
    mmio: &mut Bus,
    device: Box<dyn VirtioDevice>,
    base: u64,
    irq: u32,
    seccomp: SeccompMode,
) -> Result<Arc<Mutex<MmioTransport>>, BootError> {
    let io = |what| move |e: std::io::Error| BootError::Device { what, source: e };
    let kvm_io = |what| {
        move |e: kvm_ioctls::Error| BootError::Device {
            what,
            source: std::io::Error::from_raw_os_error(e.errno()),
        }
    };
    let irq_evt = EventFd::new(libc::EFD_NONBLOCK).map_err(io("virtio IRQ"))?;
    vm.fd
        .register_irqfd(&irq_evt, irq)
        .map_err(kvm_io("virtio IRQ"))?;
    let transport = MmioTransport::new(device, vm.mem.clone(), irq_evt, seccomp).map_err(|e| {
        BootError::Device {
            what: "virtio transport",
            source: std::io::Error::other(e),
        }
    })?;
    for (i, evt) in transport.queue_evts().iter().enumerate() {
        let addr = IoEventAddress::Mmio(base + mmio::REG_QUEUE_NOTIFY);
        vm.fd
            .register_ioevent(evt, &addr, i as u32)
            .map_err(kvm_io("virtio queue notification"))?;
    }
    let addr = IoEventAddress::Mmio(base + mmio::REG_INTERRUPT_ACK);
    vm.fd
        .register_ioevent(transport.ack_evt(), &addr, NoDatamatch)
        .map_err(kvm_io("virtio interrupt acknowledgement"))?;
    let transport = Arc::new(Mutex::new(transport));
    mmio.insert(transport.clone(), base, MMIO_DEVICE_WINDOW)?;
    Ok(transport)
}

//! Runs a few hand-written real-mode instructions on this host's /dev/kvm
//! through our vCPU run loop and buses: port I/O to the boot timer and the
//! power port, an MMIO write and read to a device outside RAM. This works
//! even where /dev/kvm is kvm_pvm, which cannot boot Linux.

use std::sync::atomic::AtomicBool;
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use kvm_bindings::kvm_userspace_memory_region;
use vm_memory::{Bytes, GuestAddress, GuestMemoryBackend};
use vmm::arch::x86_64::layout::{BOOT_TIMER_PORT, POWER_PORT};
use vmm::devices::boot_timer::BootTimer;
use vmm::devices::bus::{Bus, BusDevice};
use vmm::devices::power::PowerPort;
use vmm::devices::VmEvent;
use vmm::kvm::exits::{ExitCount, ExitKind, ExitStats};
use vmm::kvm::vcpu::{Vcpu, VcpuContext};
use vmm::{ExitReason, GuestMemoryMmap};

const CODE_AT: u64 = 0x1000;
const RAM: usize = 0x10000;
const MMIO_AT: u64 = 0x20000; // outside RAM: accesses exit to us

#[derive(Default)]
struct Recorder {
    writes: Vec<(u64, Vec<u8>)>,
}

impl BusDevice for Recorder {
    fn read(&mut self, _offset: u64, data: &mut [u8]) {
        data.fill(42);
    }
    fn write(&mut self, offset: u64, data: &[u8]) {
        self.writes.push((offset, data.to_vec()));
    }
}

#[test]
fn port_io_and_mmio_exits_reach_our_devices() {
    assert!(
        std::path::Path::new("/dev/kvm").exists(),
        "this test needs /dev/kvm (any KVM, kvm_pvm included); this host has none"
    );
    let kvm = vmm::kvm::open(true).expect("open /dev/kvm");
    let vm = kvm.create_vm().expect("create VM");
    let mem = GuestMemoryMmap::from_ranges(&[(GuestAddress(0), RAM)]).unwrap();
    let host = mem.get_host_address(GuestAddress(0)).unwrap();
    // SAFETY: `mem` outlives the VM in this test.
    unsafe {
        vm.set_user_memory_region(kvm_userspace_memory_region {
            slot: 0,
            guest_phys_addr: 0,
            memory_size: RAM as u64,
            userspace_addr: host as u64,
            flags: 0,
        })
    }
    .unwrap();

    #[rustfmt::skip]
    let code: &[u8] = &[
        0xba, BOOT_TIMER_PORT as u8, (BOOT_TIMER_PORT >> 8) as u8, // mov dx, BOOT_TIMER_PORT
        0xb0, 123,                                                  // mov al, 123
        0xee,                                                       // out dx, al
        0xb8, 0x00, 0x20,                                           // mov ax, 0x2000
        0x8e, 0xd8,                                                 // mov ds, ax (-> 0x20000)
        0xc6, 0x06, 0x00, 0x00, 0x5a,                               // mov byte [0], 0x5a
        0xa0, 0x01, 0x00,                                           // mov al, [1]
        0xba, POWER_PORT as u8, (POWER_PORT >> 8) as u8,            // mov dx, POWER_PORT
        0xee,                                                       // out dx, al
        0xf4,                                                       // hlt
    ];
    mem.write_slice(code, GuestAddress(CODE_AT)).unwrap();

    let vcpu = Vcpu::new(&vm, 0).unwrap();
    let mut sregs = vcpu.fd().get_sregs().unwrap();
    sregs.cs.base = 0;
    sregs.cs.selector = 0;
    vcpu.fd().set_sregs(&sregs).unwrap();
    let regs = kvm_bindings::kvm_regs {
        rip: CODE_AT,
        rflags: 2,
        ..Default::default()
    };
    vcpu.fd().set_regs(&regs).unwrap();

    let (tx, rx) = mpsc::channel();
    let start = Instant::now();
    let mut pio = Bus::new();
    pio.insert(
        Arc::new(Mutex::new(BootTimer::new(start, tx.clone()))),
        BOOT_TIMER_PORT.into(),
        1,
    )
    .unwrap();
    pio.insert(
        Arc::new(Mutex::new(PowerPort::new(tx.clone()))),
        POWER_PORT.into(),
        1,
    )
    .unwrap();
    let recorder = Arc::new(Mutex::new(Recorder::default()));
    let mut mmio = Bus::new();
    mmio.insert(recorder.clone(), MMIO_AT, 0x1000).unwrap();

    let exits = ExitStats::default();
    let ctx = VcpuContext {
        pio: Arc::new(pio),
        mmio: Arc::new(mmio),
        events: tx,
        stop: Arc::new(AtomicBool::new(false)),
        pause: Arc::new(AtomicBool::new(false)),
        saved: mpsc::channel().0,
        start,
        exits: exits.clone(),
    };
    let t = std::thread::spawn(move || vcpu.run(ctx));

    let mut events = Vec::new();
    while let Ok(e) = rx.recv_timeout(Duration::from_secs(30)) {
        let done = matches!(e, VmEvent::Exit(_));
        events.push(e);
        if done {
            break;
        }
    }
    t.join().unwrap();
    assert!(matches!(events[0], VmEvent::KernelEntry(_)), "{events:?}");
    assert!(matches!(events[1], VmEvent::BootComplete(_)), "{events:?}");
    assert_eq!(
        events[2],
        VmEvent::Exit(ExitReason::PowerOff(42)),
        "{events:?}"
    );
    assert_eq!(recorder.lock().unwrap().writes, vec![(0, vec![0x5a])]);
    // Each exit counted once, by kind and address: the boot-timer and
    // power-port writes, the MMIO write and read (the power-off itself
    // ends the run, counted as its own kind).
    let mut got = exits.summary();
    got.sort_by_key(|c| (c.kind, c.addr));
    let one = |kind, addr| ExitCount {
        kind,
        addr,
        count: 1,
    };
    assert_eq!(
        got,
        vec![
            one(ExitKind::IoOut, BOOT_TIMER_PORT.into()),
            one(ExitKind::IoOut, POWER_PORT.into()),
            one(ExitKind::MmioRead, MMIO_AT + 1),
            one(ExitKind::MmioWrite, MMIO_AT),
            one(ExitKind::Other, 0),
        ]
    );
}

//! The one place that assembles a VM, in boot order:
//!
//! 1. open KVM and check the host can run the guest;
//! 2. create the VM, its memory and in-kernel interrupt controllers;
//! 3. attach devices to the buses (serial, i8042, boot timer, power port);
//! 4. load the kernel and pick its entry (PVH or 64-bit Linux);
//! 5. load the initrd and the command line;
//! 6. write the boot parameters and the MP table;
//! 7. create and configure the vCPUs.
//!
//! `crate::run` then starts one thread per vCPU.

mod devices;
mod error;
pub mod restore;
mod vcpus;

use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};

use linux_loader::configurator::linux::LinuxBootConfigurator;
use linux_loader::configurator::pvh::PvhBootConfigurator;
use linux_loader::configurator::{BootConfigurator, BootParams};
use linux_loader::loader::elf::PvhBootCapability;
use linux_loader::loader::{self, load_cmdline, BzImage, Elf, KernelLoader};
use vm_memory::{Bytes, GuestAddress, GuestMemoryBackend, GuestMemoryRegion};

use crate::arch::x86_64::boot_params::{self};
use crate::arch::x86_64::layout::*;
use crate::arch::x86_64::mptable::{self};
use crate::arch::x86_64::{cpuid, regs::BootEntry};
use crate::devices::virtio::block::CacheMode;
use crate::devices::virtio::persist::VirtioState;
use crate::devices::virtio::DeviceSpec;
use crate::kvm::persist::VcpuState;
use crate::kvm::vcpu::Vcpu;
use crate::kvm::vm::Vm;
use crate::kvm::{self};
use crate::snapshot::{self, Body, SnapshotError};
use crate::VmConfig;
use crate::{Boot, KernelBoot};
use devices::{attach_devices, virtio_window};
pub use devices::{AttachedVirtio, BuiltVm};
pub use error::BootError;
use error::MAX_INITRD_BYTES;
use vcpus::make_vcpus;

/// The 64-bit entry point of a bzImage's protected-mode kernel
/// (Documentation/arch/x86/boot.rst, "64-bit boot protocol").
const BZIMAGE_64BIT_ENTRY_OFFSET: u64 = 0x200;
/// setup_header.xloadflags bit: the kernel has the 64-bit entry point.
const XLF_KERNEL_64: u16 = 1;

/// The build's steps timed as they end, logged with `--verbose` and
/// reported with the run's timings: where the time before the guest's
/// first instruction goes.
struct Phases {
    start: std::time::Instant,
    marks: Vec<(&'static str, std::time::Duration)>,
}

impl Phases {
    fn new(start: std::time::Instant) -> Self {
        Phases {
            start,
            marks: Vec::new(),
        }
    }

    fn mark(&mut self, name: &'static str) {
        let t = self.start.elapsed();
        log::debug!("build: {name} at {:.3} ms", t.as_secs_f64() * 1e3);
        self.marks.push((name, t));
    }

    fn done(self) -> Vec<(&'static str, std::time::Duration)> {
        self.marks
    }
}

/// Builds the VM `config` describes, in boot order (or restores it, when
/// it names a snapshot: [`restore`], which shares the devices' assembly
/// with the boot).
pub fn build(mut config: VmConfig) -> Result<BuiltVm, BootError> {
    let k = match &config.boot {
        Boot::Snapshot(dir) => {
            let dir = dir.clone();
            return restore::restore(config, &dir);
        }
        Boot::Kernel(k) => k.clone(),
    };
    let mut phases = Phases::new(config.start);
    phases.mark("build_entered");
    // 1. Host. Bad paths are the user's mistake, whatever the host:
    //    report them first.
    check_shape(k.mem_mib, k.vcpus)?;
    let kernel = open_image(&k.kernel, |path, source| BootError::OpenKernel {
        path,
        source,
    })?;
    let initrd_file = match &k.initrd {
        Some(path) => Some(open_image(path, |path, source| BootError::OpenInitrd {
            path,
            source,
        })?),
        None => None,
    };
    let kvm = kvm::open(config.allow_pvm)?;
    phases.mark("kvm_open");

    // 2. VM and memory.
    let vm = Vm::new(&kvm, k.mem_mib)?;
    let mem_size = k.mem_mib << 20;
    phases.mark("vm_memory");

    // 3. Devices: the legacy ones on the port bus, virtio on MMIO.
    let devices = attach_devices(
        &vm,
        config.console.take(),
        None,
        device_specs(&config, k.rng),
        &config,
    )?;
    phases.mark("devices");

    // 4. Kernel.
    let (entry, kernel_end, setup_header) = load_kernel(&vm, kernel, &k.kernel)?;
    phases.mark("kernel_loaded");

    // 5. Initrd and command line.
    let initrd = match (initrd_file, &k.initrd) {
        (Some(file), Some(path)) => {
            let addr_max = setup_header.map(|h| h.initrd_addr_max);
            Some(load_initrd(
                &vm, file, path, mem_size, kernel_end, addr_max,
            )?)
        }
        _ => None,
    };
    let cmdline = write_cmdline(&vm, devices.serial.is_some(), devices.virtio.len(), &k)?;
    phases.mark("initrd_cmdline");

    // 6. Boot parameters and MP table.
    let map = boot_params::memory_map(mem_size);
    write_boot_params(&vm, entry, setup_header, cmdline.len(), initrd, &map)?;
    mptable::write(&vm.mem, k.vcpus)?;
    phases.mark("boot_params");

    // 7. vCPUs.
    let host = cpuid::HostFeatures {
        tsc_deadline: k.tsc_deadline && cpuid::HostFeatures::of(&kvm).tsc_deadline,
    };
    let vcpus = create_vcpus(&kvm, &vm, k.vcpus, entry, host)?;
    phases.mark("vcpus");
    let mut built = BuiltVm::assemble(
        vm,
        vcpus,
        devices,
        cmdline,
        host.tsc_deadline,
        config.seccomp,
    );
    built.phases = phases.done();
    Ok(built)
}

fn check_shape(mem_mib: u64, vcpus: u8) -> Result<(), BootError> {
    if !(MIN_MEM_MIB..=MAX_MEM_MIB).contains(&mem_mib) {
        return Err(BootError::MemorySize(mem_mib));
    }
    if vcpus == 0 || vcpus > mptable::MAX_CPUS {
        return Err(BootError::VcpuCount(vcpus));
    }
    Ok(())
}

fn open_image(
    path: &Path,
    err: impl FnOnce(PathBuf, std::io::Error) -> BootError,
) -> Result<File, BootError> {
    File::open(path).map_err(|source| err(path.to_path_buf(), source))
}

/// The virtio devices a booting VM gets: disks first (so that the first
/// is /dev/vda), then vsock, then rng.
fn device_specs(config: &VmConfig, rng: bool) -> Vec<DeviceSpec> {
    let mut specs: Vec<DeviceSpec> = config
        .disks
        .iter()
        .map(|d| DeviceSpec::Block {
            path: d.path.clone(),
            read_only: d.read_only,
            direct: d.cache == CacheMode::Direct,
            id: d.id.clone(),
            bytes: 0,
        })
        .collect();
    if let Some(v) = &config.vsock {
        specs.push(DeviceSpec::Vsock {
            guest_cid: v.guest_cid,
        });
    }
    if rng {
        specs.push(DeviceSpec::Rng);
    }
    specs
}

/// Composes the command line (our devices' options, then the caller's),
/// writes it to guest memory, and returns it.
fn write_cmdline(
    vm: &Vm,
    serial: bool,
    virtio_count: usize,
    config: &KernelBoot,
) -> Result<String, BootError> {
    let windows: Vec<(u64, u32)> = (0..virtio_count).map(virtio_window).collect();
    let cl =
        crate::cmdline::compose(serial, &windows, &config.cmdline).map_err(BootError::Cmdline)?;
    let cmdline = cl
        .as_cstring()
        .map_err(BootError::Cmdline)?
        .into_string()
        .unwrap_or_default();
    load_cmdline(&vm.mem, GuestAddress(CMDLINE_START), &cl).map_err(|e| match e {
        loader::Error::CommandLineOverflow => {
            BootError::Cmdline(linux_loader::cmdline::Error::TooLarge)
        }
        other => BootError::LoadKernel {
            path: config.kernel.clone(),
            source: other,
        },
    })?;
    Ok(cmdline)
}

/// The boot protocol's parameters: PVH's start info and memory map, or
/// the Linux zero page.
fn write_boot_params(
    vm: &Vm,
    entry: BootEntry,
    setup_header: Option<linux_loader::loader::bootparam::setup_header>,
    cmdline_len: usize,
    initrd: Option<(u64, u64)>,
    map: &[boot_params::MemoryRange],
) -> Result<(), BootError> {
    match entry {
        BootEntry::Pvh(_) => {
            let (info, memmap, module) = boot_params::pvh_start_info(initrd, map);
            let mut params = BootParams::new(&info, GuestAddress(PVH_INFO_START));
            params.set_sections(&memmap, GuestAddress(PVH_MEMMAP_START));
            if let Some(m) = module {
                params.set_modules(&[m], GuestAddress(PVH_MODLIST_START));
            }
            PvhBootConfigurator::write_bootparams(&params, &vm.mem).map_err(BootError::Configure)
        }
        BootEntry::Linux64(_) => {
            let zero_page = boot_params::zero_page(setup_header, cmdline_len + 1, initrd, map)?;
            let params = BootParams::new(&zero_page, GuestAddress(ZERO_PAGE_START));
            LinuxBootConfigurator::write_bootparams(&params, &vm.mem).map_err(BootError::Configure)
        }
    }
}

/// The vCPUs, each with its CPUID and MSR list; the first enters at `entry`.
fn create_vcpus(
    kvm: &kvm_ioctls::Kvm,
    vm: &Vm,
    count: u8,
    entry: BootEntry,
    host: cpuid::HostFeatures,
) -> Result<Vec<Vcpu>, BootError> {
    let ids: Vec<u8> = (0..count).collect();
    make_vcpus(kvm, vm, &ids, |vcpu, i, supported| {
        let id = ids[i];
        let boot = (id == 0).then_some(entry);
        let cpuid = cpuid::for_vcpu(supported, id, count, host);
        Ok(vcpu.configure(&cpuid, &vm.mem, boot)?)
    })
}

/// Writes a paused VM to `dir`: its memory, the in-kernel devices, the
/// serial port, the vCPU states the vCPU threads saved, and the virtio
/// devices, whose workers stop first so that memory no longer changes.
pub fn save(built: &BuiltVm, vcpus: Vec<VcpuState>, dir: &Path) -> Result<(), SnapshotError> {
    let virtio = built
        .virtio
        .iter()
        .map(|(kind, transport)| VirtioState {
            device: kind.clone(),
            transport: transport.lock().unwrap_or_else(|e| e.into_inner()).save(),
        })
        .collect();
    let body = Body {
        mem_mib: built.vm.mem.iter().map(|r| r.len()).sum::<u64>() >> 20,
        cmdline: built.cmdline.clone(),
        tsc_deadline: built.tsc_deadline,
        vm: built.vm.save_state()?,
        vcpus,
        serial: built
            .serial
            .as_ref()
            .map(|s| (&s.lock().unwrap_or_else(|e| e.into_inner()).state()).into()),
        virtio,
    };
    snapshot::write(dir, &body, |file| {
        let mut written = 0u64;
        for region in built.vm.mem.iter() {
            let len = region.len() as usize;
            built
                .vm
                .mem
                .write_all_volatile_to(region.start_addr(), file, len)
                .map_err(std::io::Error::other)?;
            written += len as u64;
        }
        Ok(written)
    })
}

/// Loads an ELF vmlinux (PVH entry when the kernel has one, else its 64-bit
/// entry) or a bzImage (64-bit entry). Returns the entry, the end of the
/// loaded image and the bzImage setup header.
fn load_kernel(
    vm: &Vm,
    mut file: File,
    path: &Path,
) -> Result<(BootEntry, u64, Option<loader::bootparam::setup_header>), BootError> {
    let open_err = |source| BootError::OpenKernel {
        path: path.to_path_buf(),
        source,
    };
    let mut magic = [0u8; 4];
    let len = file.metadata().map_err(open_err)?.len();
    file.read_exact(&mut magic)
        .map_err(|_| BootError::KernelFormat {
            path: path.to_path_buf(),
        })?;
    file.seek(SeekFrom::Start(0)).map_err(open_err)?;
    let load_err = |source| BootError::LoadKernel {
        path: path.to_path_buf(),
        source,
    };

    if magic == *b"\x7fELF" {
        let r = Elf::load(&vm.mem, None, &mut file, Some(GuestAddress(HIMEM_START)))
            .map_err(load_err)?;
        let entry = match r.pvh_boot_cap {
            PvhBootCapability::PvhEntryPresent(addr) => BootEntry::Pvh(addr.0),
            _ => BootEntry::Linux64(r.kernel_load.0),
        };
        return Ok((entry, r.kernel_end, None));
    }
    if len < 0x206 || !has_bzimage_magic(&mut file).map_err(open_err)? {
        return Err(BootError::KernelFormat {
            path: path.to_path_buf(),
        });
    }
    let r = BzImage::load(&vm.mem, None, &mut file, Some(GuestAddress(HIMEM_START)))
        .map_err(load_err)?;
    let header = r
        .setup_header
        .expect("bzImage loader returns its setup header");
    if header.xloadflags & XLF_KERNEL_64 == 0 {
        return Err(BootError::Kernel32 {
            path: path.to_path_buf(),
        });
    }
    Ok((
        BootEntry::Linux64(r.kernel_load.0 + BZIMAGE_64BIT_ENTRY_OFFSET),
        r.kernel_end,
        Some(header),
    ))
}

fn has_bzimage_magic(file: &mut File) -> std::io::Result<bool> {
    let mut hdr = [0u8; 4];
    file.seek(SeekFrom::Start(0x202))?;
    file.read_exact(&mut hdr)?;
    file.seek(SeekFrom::Start(0))?;
    Ok(hdr == *b"HdrS")
}

fn load_initrd(
    vm: &Vm,
    mut file: File,
    path: &Path,
    mem_size: u64,
    kernel_end: u64,
    addr_max: Option<u32>,
) -> Result<(u64, u64), BootError> {
    let err = |source| BootError::OpenInitrd {
        path: path.to_path_buf(),
        source,
    };
    let size = file.metadata().map_err(err)?.len();
    if size > MAX_INITRD_BYTES {
        return Err(BootError::InitrdSize {
            path: path.to_path_buf(),
            size,
        });
    }
    let addr = boot_params::initrd_address(mem_size, kernel_end, size, addr_max)?;
    vm.mem
        .read_exact_volatile_from(GuestAddress(addr), &mut file, size as usize)
        .map_err(BootError::GuestMemory)?;
    Ok((addr, size))
}

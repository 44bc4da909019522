//! A VM built from a snapshot instead of booted: the same recipe as
//! `builder::build` where it can be (devices from their saved
//! `DeviceSpec`s, on the same buses), with state written back instead of
//! a kernel loaded. Everything read from the snapshot is checked first:
//! a snapshot is input, and a bad one is a [`RestoreError`].

use std::path::{Path, PathBuf};

use super::devices::{attach_devices, AttachedVirtio, BuiltVm};
use super::error::BootError;
pub use super::error::RestoreError;
use super::vcpus::make_vcpus;
use crate::arch::x86_64::layout::{MAX_MEM_MIB, MIN_MEM_MIB};
use crate::arch::x86_64::{cpuid, mptable};
use crate::devices::virtio::DeviceSpec;
use crate::kvm::{self, vcpu::Vcpu, vm::Vm};
use crate::snapshot::{self, SnapshotError};
use crate::VmConfig;

/// Builds a VM from the snapshot in `dir` instead of booting: memory
/// mapped copy-on-write from its file, the interrupt controllers, clock,
/// serial port and vCPUs as saved.
pub fn restore(mut config: VmConfig, dir: &Path) -> Result<BuiltVm, BootError> {
    // 1. The snapshot, checked before KVM is touched.
    let loaded = snapshot::read(dir)?;
    let body = &loaded.body;
    let count = check_shape(dir, body)?;
    let kvm = kvm::open(config.allow_pvm)?;

    // 2. The VM, its memory and in-kernel devices as saved.
    let vm = Vm::with_memory(&kvm, body.mem_mib, Some(&loaded.memory))?;
    vm.restore_state(&body.vm)
        .map_err(named(dir, "in-kernel device state"))?;

    // 3. The same devices at the same places; the host side is new. A
    //    guest that booted without a UART has no driver for one.
    check_vsock(body, &config, dir)?;
    check_disks(body, &config, dir)?;
    let console = config.console.take().filter(|_| body.serial.is_some());
    let specs = body.virtio.iter().map(|v| v.device.clone()).collect();
    let devices = attach_devices(
        &vm,
        console,
        body.serial.as_ref().map(Into::into),
        specs,
        &config,
    )
    .map_err(|e| match e {
        BootError::Snapshot(e) => named(dir, "serial port state")(e),
        other => other,
    })?;
    check_devices(body, &devices.virtio, dir)?;

    // 4. The vCPUs as saved, with the CPUID the guest booted with: a
    //    guest that programs its timer by TSC deadline would fault on
    //    the MSR without the bit.
    if body.tsc_deadline && !cpuid::HostFeatures::of(&kvm).tsc_deadline {
        return Err(RestoreError::TscDeadline {
            dir: dir.to_path_buf(),
        }
        .into());
    }
    let host = cpuid::HostFeatures {
        tsc_deadline: body.tsc_deadline,
    };
    let vcpus = restore_vcpus(&kvm, &vm, body, count, dir, host)?;

    // 5. The devices start last: an interrupt they raise at once (vsock's
    //    transport reset) must find the LAPICs restored, or it is lost to
    //    a vCPU that does not exist yet, or overwritten by its saved state.
    for ((_, transport), saved) in devices.virtio.iter().zip(&body.virtio) {
        transport
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .restore(&saved.transport)
            .map_err(|why| RestoreError::State {
                dir: dir.to_path_buf(),
                part: "virtio transport",
                why,
            })?;
    }
    let cmdline = body.cmdline.clone();
    Ok(BuiltVm::assemble(
        vm,
        vcpus,
        devices,
        cmdline,
        body.tsc_deadline,
        config.seccomp,
    ))
}

/// The state checks of `kvm::persist` know the structure, not the
/// directory: name it.
fn named<'a>(dir: &'a Path, part: &'static str) -> impl Fn(SnapshotError) -> BootError + 'a {
    move |e| match e {
        SnapshotError::Invalid { why, .. } => BootError::from(RestoreError::State {
            dir: dir.to_path_buf(),
            part,
            why,
        }),
        other => other.into(),
    }
}

/// The vCPU count, once it and the memory size are in range.
fn check_shape(dir: &Path, body: &snapshot::Body) -> Result<u8, RestoreError> {
    let count = u8::try_from(body.vcpus.len())
        .ok()
        .filter(|n| (1..=mptable::MAX_CPUS).contains(n))
        .ok_or_else(|| RestoreError::VcpuCount {
            dir: dir.to_path_buf(),
            count: body.vcpus.len(),
        })?;
    if !(MIN_MEM_MIB..=MAX_MEM_MIB).contains(&body.mem_mib) {
        return Err(RestoreError::MemorySize {
            dir: dir.to_path_buf(),
            mib: body.mem_mib,
        });
    }
    Ok(count)
}

/// The run gives a vsock socket exactly when the snapshot had a vsock
/// device.
fn check_vsock(body: &snapshot::Body, config: &VmConfig, dir: &Path) -> Result<(), RestoreError> {
    let had = body
        .virtio
        .iter()
        .any(|v| matches!(v.device, DeviceSpec::Vsock { .. }));
    match config.vsock.is_some() == had {
        true => Ok(()),
        false => Err(RestoreError::Vsock {
            dir: dir.to_path_buf(),
            had,
        }),
    }
}

/// A snapshot is input: the disks it names are opened only if they are
/// regular files and, when the run names its disks, exactly those (path
/// and writability, in order); when it does not, only read-only. A
/// tampered snapshot cannot open another host file for its guest to
/// write.
fn check_disks(body: &snapshot::Body, config: &VmConfig, dir: &Path) -> Result<(), RestoreError> {
    let blocks: Vec<(PathBuf, bool)> = body
        .virtio
        .iter()
        .filter_map(|v| match &v.device {
            DeviceSpec::Block {
                path, read_only, ..
            } => Some((path.clone(), *read_only)),
            _ => None,
        })
        .collect();
    for (path, _) in &blocks {
        if std::fs::metadata(path).is_ok_and(|m| !m.is_file()) {
            return Err(RestoreError::DiskNotFile {
                dir: dir.to_path_buf(),
                path: path.clone(),
            });
        }
    }
    let same = |p: &Path| std::fs::canonicalize(p).unwrap_or_else(|_| p.to_path_buf());
    let given: Vec<(PathBuf, bool)> = config
        .disks
        .iter()
        .map(|d| (d.path.clone(), d.read_only))
        .collect();
    let list = |l: &[(PathBuf, bool)]| {
        l.iter()
            .map(|(p, ro)| format!("{}{}", p.display(), if *ro { "" } else { " (rw)" }))
            .collect::<Vec<_>>()
            .join(", ")
    };
    if !given.is_empty() {
        let matches = given.len() == blocks.len()
            && given
                .iter()
                .zip(&blocks)
                .all(|((a, ra), (b, rb))| ra == rb && same(a) == same(b));
        if !matches {
            return Err(RestoreError::DisksDiffer {
                dir: dir.to_path_buf(),
                snapshot: list(&blocks),
                given: list(&given),
            });
        }
    } else if let Some((path, _)) = blocks.iter().find(|(_, ro)| !ro) {
        return Err(RestoreError::WritableDisk {
            dir: dir.to_path_buf(),
            path: path.clone(),
        });
    }
    Ok(())
}

/// Each device made again from its spec came out as it was (a disk of
/// the same size).
fn check_devices(
    body: &snapshot::Body,
    made: &[AttachedVirtio],
    dir: &Path,
) -> Result<(), RestoreError> {
    for ((kind, _), saved) in made.iter().zip(&body.virtio) {
        if *kind != saved.device {
            return Err(RestoreError::DeviceChanged {
                dir: dir.to_path_buf(),
                now: format!("{kind:?}"),
                was: format!("{:?}", saved.device),
            });
        }
    }
    Ok(())
}

fn restore_vcpus(
    kvm: &kvm_ioctls::Kvm,
    vm: &Vm,
    body: &snapshot::Body,
    count: u8,
    dir: &Path,
    host: cpuid::HostFeatures,
) -> Result<Vec<Vcpu>, BootError> {
    let ids: Vec<u8> = body.vcpus.iter().map(|s| s.id).collect();
    make_vcpus(kvm, vm, &ids, |vcpu, i, supported| {
        let state = &body.vcpus[i];
        vcpu.set_cpuid(&cpuid::for_vcpu(supported, state.id, count, host))?;
        vcpu.restore_state(state)
            .map_err(named(dir, "vCPU state"))?;
        Ok(())
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::devices::virtio::persist::{TransportState, VirtioState};
    use crate::kvm::persist::{Pod, VmState};

    fn body(disks: &[(&Path, bool)]) -> snapshot::Body {
        let pod = Pod::of(&kvm_bindings::kvm_clock_data::default());
        snapshot::Body {
            mem_mib: 16,
            cmdline: String::new(),
            tsc_deadline: false,
            vm: VmState {
                pic_master: pod.clone(),
                pic_slave: pod.clone(),
                ioapic: pod.clone(),
                pit: pod.clone(),
                clock: pod,
            },
            vcpus: Vec::new(),
            serial: None,
            virtio: disks
                .iter()
                .map(|(path, read_only)| VirtioState {
                    device: DeviceSpec::Block {
                        path: path.to_path_buf(),
                        read_only: *read_only,
                        direct: false,
                        id: String::new(),
                        bytes: 0,
                    },
                    transport: TransportState::default(),
                })
                .collect(),
        }
    }

    fn config(disks: &[(&Path, bool)]) -> VmConfig {
        VmConfig {
            boot: crate::Boot::Snapshot(PathBuf::from("snap")),
            console: None,
            timeout: None,
            allow_pvm: false,
            start: std::time::Instant::now(),
            vsock: None,
            disks: disks
                .iter()
                .map(|(path, read_only)| crate::DiskConfig {
                    path: path.to_path_buf(),
                    read_only: *read_only,
                    cache: crate::CacheMode::Page,
                    id: String::new(),
                })
                .collect(),
            seccomp: crate::SeccompMode::Off,
            save_to: None,
        }
    }

    #[test]
    fn a_snapshot_cannot_open_host_files_it_was_not_given() {
        let d = tempfile::tempdir().unwrap();
        let (root, secret) = (d.path().join("root.img"), d.path().join("secrets.db"));
        std::fs::write(&root, "img").unwrap();
        std::fs::write(&secret, "precious").unwrap();
        let dir = d.path();
        // Read-only disks alone: fine.
        assert!(check_disks(&body(&[(&root, true)]), &config(&[]), dir).is_ok());
        // A tampered snapshot that opens a host file writable: refused
        // unless the run names it so.
        let tampered = body(&[(&root, true), (&secret, false)]);
        let e = check_disks(&tampered, &config(&[]), dir).unwrap_err();
        assert!(matches!(e, RestoreError::WritableDisk { .. }), "{e}");
        let e = check_disks(&tampered, &config(&[(&root, true)]), dir).unwrap_err();
        assert!(matches!(e, RestoreError::DisksDiffer { .. }), "{e}");
        let e = check_disks(&tampered, &config(&[(&root, true), (&secret, true)]), dir);
        assert!(e.is_err(), "writability must match too");
        let named = config(&[(&root, true), (&secret, false)]);
        assert!(check_disks(&tampered, &named, dir).is_ok());
        // Not a regular file: refused whatever the run says.
        let dev = body(&[(Path::new("/dev/null"), true)]);
        let e = check_disks(&dev, &config(&[]), dir).unwrap_err();
        assert!(matches!(e, RestoreError::DiskNotFile { .. }), "{e}");
    }
}

//! How a run's VM starts, decided once from its options ([`Start::decide`]):
//! booted from a plan, restored from the warm cache's snapshot of that
//! plan, or restored from a snapshot the user names. Everything that
//! differs between the three — the disks, the first line the agent gets,
//! the files the jail holds, the VM's configuration — is answered here,
//! so the run's recipe (`commands/run.rs`) follows one path.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use vmm::{DiskConfig, VmConfig};

use super::channels::FirstLine;
use super::plan::RunPlan;
use super::request::RunRequest;
use super::RunError;

/// How the VM starts.
pub enum Start {
    /// Booted: everything from the plan.
    Boot(RunPlan),
    /// Restored from the warm cache's snapshot of `plan` (taken now if
    /// there was none): kernel, memory and devices from the snapshot, its
    /// disks the plan's.
    Warm { plan: RunPlan, snapshot: PathBuf },
    /// Restored from `--from-snapshot`: no plan; the disks `--disk` names,
    /// or (none named) the read-only images the snapshot recorded.
    Restore {
        snapshot: PathBuf,
        disks: Vec<DiskConfig>,
        recorded: Vec<PathBuf>,
    },
}

impl Start {
    /// Decides how the run starts; a bad snapshot, plan or option is one
    /// clear error before anything exists.
    pub fn decide(args: &RunRequest) -> Result<Start, RunError> {
        if let Some(dir) = &args.from_snapshot {
            let loaded = vmm::snapshot::read(dir)?;
            let disks: Vec<DiskConfig> = args.vm.disks.iter().map(|d| d.config.clone()).collect();
            // Unnamed by --disk, they may only be read-only (the restore
            // checks) and the jail holds them so; and only images of the
            // kind mcpvm's runs use (EROFS): a snapshot is a file people
            // pass around, and one that names ~/.ssh/id_rsa would hand it
            // to its guest.
            let recorded = match disks.is_empty() {
                true => loaded.body.disks(),
                false => Vec::new(),
            };
            only_images(dir, &recorded)?;
            return Ok(Start::Restore {
                snapshot: dir.clone(),
                disks,
                recorded: recorded
                    .into_iter()
                    .filter(|(_, ro)| *ro)
                    .map(|(p, _)| p)
                    .collect(),
            });
        }
        let checked = args.vm.check(!args.command.is_empty())?;
        let plan = RunPlan::resolve(
            &args.vm,
            &checked,
            args.command.clone(),
            args.snapshot_to.is_some(),
        )?;
        if !args.warm {
            return Ok(Start::Boot(plan));
        }
        let snapshot = super::warm::snapshot_for(args, &plan, checked.server.is_some())?;
        Ok(Start::Warm { plan, snapshot })
    }

    /// The plan, for a run that has one.
    pub fn plan(&self) -> Option<&RunPlan> {
        match self {
            Start::Boot(plan) | Start::Warm { plan, .. } => Some(plan),
            Start::Restore { .. } => None,
        }
    }

    /// What the agent is sent first: a booted one its run spec, a restored
    /// one a resume.
    pub fn first_line(&self) -> FirstLine {
        match self {
            Start::Boot(plan) => FirstLine::Spec(plan.spec.clone()),
            _ => FirstLine::Resume,
        }
    }

    /// Every host path the VM opens, for the jail to hold (and to make
    /// canonical: the jail holds each at its canonical place only), with
    /// whether the VM writes it.
    pub fn paths_mut(&mut self) -> Vec<(&mut PathBuf, bool)> {
        match self {
            Start::Boot(p) => {
                let mut v = vec![(&mut p.kernel, false), (&mut p.initrd, false)];
                v.extend(disks(&mut p.disks));
                v
            }
            Start::Warm { plan: p, snapshot } => {
                let mut v = vec![
                    (&mut p.kernel, false),
                    (&mut p.initrd, false),
                    (snapshot, false),
                ];
                v.extend(disks(&mut p.disks));
                v
            }
            Start::Restore {
                snapshot,
                disks: d,
                recorded,
            } => {
                let mut v = vec![(snapshot, false)];
                v.extend(disks(d));
                v.extend(recorded.iter_mut().map(|p| (p, false)));
                v
            }
        }
    }

    /// The VM's configuration, whole: a booted VM's kernel and shape from
    /// the plan, a restored one's snapshot (whose kernel, memory, vCPUs
    /// and devices come from it); the disks this start's (the plan's for
    /// a warm start, `--disk`'s for `--from-snapshot`).
    pub fn config(
        self,
        args: &RunRequest,
        vsock: vmm::VsockConfig,
        console: Box<dyn Write + Send>,
        start: Instant,
    ) -> VmConfig {
        let (boot, disks) = match self {
            Start::Boot(p) => (
                vmm::Boot::Kernel(vmm::KernelBoot {
                    kernel: p.kernel,
                    initrd: Some(p.initrd),
                    cmdline: p.cmdline,
                    mem_mib: p.mem_mib,
                    vcpus: p.vcpus,
                    rng: p.rng,
                    tsc_deadline: true,
                }),
                p.disks,
            ),
            Start::Warm { plan, snapshot } => (vmm::Boot::Snapshot(snapshot), plan.disks),
            Start::Restore {
                snapshot, disks, ..
            } => (vmm::Boot::Snapshot(snapshot), disks),
        };
        VmConfig {
            boot,
            console: Some(console),
            timeout: args.vm.timeout.map(Duration::from_secs),
            allow_pvm: args.vm.allow_pvm,
            start,
            vsock: Some(vsock),
            disks,
            seccomp: args.vm.seccomp,
            save_to: args.snapshot_to.clone(),
        }
    }
}

/// Each disk's path, and whether the VM writes it.
fn disks(d: &mut [DiskConfig]) -> Vec<(&mut PathBuf, bool)> {
    d.iter_mut()
        .map(|d| {
            let rw = !d.read_only;
            (&mut d.path, rw)
        })
        .collect()
}

/// A snapshot restored without --disk may name as disks only EROFS
/// images, the kind mcpvm's runs use.
fn only_images(dir: &Path, disks: &[(PathBuf, bool)]) -> Result<(), RunError> {
    for (path, _) in disks {
        crate::server::image::check_root_image(path).map_err(|e| RunError::SnapshotDisk {
            dir: dir.to_path_buf(),
            path: path.clone(),
            why: crate::error_chain(&e),
        })?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A snapshot is a file people pass around: alone, it may open only
    /// EROFS images as its disks, never a host file such as a key.
    #[test]
    fn a_snapshot_alone_opens_only_images() {
        let d = tempfile::tempdir().unwrap();
        let image = d.path().join("layer.erofs");
        let mut bytes = vec![0u8; 2048];
        bytes[1024..1028].copy_from_slice(&0xE0F5_E1E2u32.to_le_bytes());
        std::fs::write(&image, &bytes).unwrap();
        let key = d.path().join("id_ed25519");
        std::fs::write(&key, "-----BEGIN OPENSSH PRIVATE KEY-----").unwrap();
        let snap = d.path().join("snap");
        assert!(only_images(&snap, &[(image.clone(), true)]).is_ok());
        let e = only_images(&snap, &[(image, true), (key.clone(), true)])
            .unwrap_err()
            .to_string();
        assert!(
            e.contains(&key.display().to_string()) && e.contains("--disk PATH"),
            "{e}"
        );
    }
}

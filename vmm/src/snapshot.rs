//! Snapshots: the file a paused VM is written to and restored from
//! (docs/snapshots.md has the format). What each part saves is defined
//! beside its owner: `kvm::persist` (the VM's in-kernel devices, the
//! vCPUs), `devices::virtio::persist` (devices and their transports),
//! `devices::legacy::serial` (the UART); this file puts them together,
//! checks and writes them.
//!
//! DIR/state holds one JSON header line, then the JSON body it describes:
//!
//! ```text
//! {"format":"mcpvm-snapshot","version":1,"body_sha256":"…","memory_bytes":N}
//! {"mem_mib":…,"cmdline":…,"vm":{…},"vcpus":[…],"serial":{…}}
//! ```
//!
//! DIR/memory is guest RAM, its regions back to back; a restored VM maps
//! it copy-on-write (`MAP_PRIVATE`), so any number of VMs share one file
//! and pages load on first touch. KVM's own structures (registers, the
//! interrupt controllers, …) are kept as hex of their bytes: their layout
//! is the kernel ABI, and a size that does not match refuses the file.

use std::fs::File;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::devices::legacy::serial::SerialState;
use crate::devices::virtio::persist::VirtioState;
use crate::kvm::persist::{VcpuState, VmState};

pub const FORMAT: &str = "mcpvm-snapshot";
/// Bumped whenever the body changes meaning; older files are refused.
pub const VERSION: u32 = 3;
pub const STATE_FILE: &str = "state";
pub const MEMORY_FILE: &str = "memory";

#[derive(Debug, thiserror::Error)]
pub enum SnapshotError {
    #[error("Cannot read snapshot {path}")]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("Cannot write snapshot {path}")]
    Write {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{path} is not a usable snapshot: {why}")]
    Invalid { path: PathBuf, why: String },
    #[error("Snapshot {path} is format version {found}; this VMM reads version {VERSION}: take the snapshot again")]
    Version { path: PathBuf, found: u32 },
    #[error("Cannot capture the {what} for a snapshot")]
    Capture {
        what: String,
        #[source]
        source: kvm_ioctls::Error,
    },
    #[error("Cannot restore the {what} from the snapshot")]
    Restore {
        what: String,
        #[source]
        source: kvm_ioctls::Error,
    },
    #[error("{path} exists and is not a snapshot ({why}); write the snapshot to a new directory: a snapshot replaces only an older snapshot")]
    NotSnapshot { path: PathBuf, why: String },
    #[error("No snapshot written to {0}: a vCPU did not pause within 2 s")]
    Pause(PathBuf),
    #[error("Snapshot {path} was taken {what}; restore it {fix}")]
    Mismatch {
        path: PathBuf,
        what: &'static str,
        fix: &'static str,
    },
}

/// The first line of DIR/state.
#[derive(Debug, Serialize, Deserialize)]
struct Header {
    format: String,
    version: u32,
    body_sha256: String,
    memory_bytes: u64,
}

/// Everything but the memory.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
pub struct Body {
    pub mem_mib: u64,
    /// The guest's kernel command line (what it booted with).
    pub cmdline: String,
    /// Whether its CPUID offered the TSC-deadline timer (version 3).
    pub tsc_deadline: bool,
    pub vm: VmState,
    pub vcpus: Vec<VcpuState>,
    pub serial: Option<SerialState>,
    /// The virtio devices in bus order (/dev/vda first).
    pub virtio: Vec<VirtioState>,
}

impl Body {
    /// The disk images the snapshot's block devices open, with whether
    /// each is read-only (what a jail must hold to restore it).
    pub fn disks(&self) -> Vec<(PathBuf, bool)> {
        self.virtio
            .iter()
            .filter_map(|v| match &v.device {
                crate::devices::virtio::DeviceSpec::Block {
                    path, read_only, ..
                } => Some((path.clone(), *read_only)),
                _ => None,
            })
            .collect()
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Whether a snapshot may be written to `dir`: it does not exist, or it is
/// an older snapshot (its state file says so, and it holds nothing but a
/// snapshot's files: `state`, `memory`, and an embedder's `*.json`
/// beside them). Anything else is refused, never replaced.
pub fn check_target(dir: &Path) -> Result<(), SnapshotError> {
    let not = |why: &str| SnapshotError::NotSnapshot {
        path: dir.to_path_buf(),
        why: why.into(),
    };
    let meta = match std::fs::symlink_metadata(dir) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(source) => {
            return Err(SnapshotError::Read {
                path: dir.to_path_buf(),
                source,
            })
        }
        Ok(m) => m,
    };
    if !meta.is_dir() {
        return Err(not("it is not a directory"));
    }
    let entries = std::fs::read_dir(dir).map_err(|source| SnapshotError::Read {
        path: dir.to_path_buf(),
        source,
    })?;
    for e in entries.flatten() {
        let name = e.file_name().to_string_lossy().to_string();
        let is_file = e.file_type().is_ok_and(|t| t.is_file());
        if !(is_file && (name == STATE_FILE || name == MEMORY_FILE || name.ends_with(".json"))) {
            return Err(not(&format!("it holds {name}")));
        }
    }
    let first = std::fs::read_to_string(dir.join(STATE_FILE)).unwrap_or_default();
    let header = first.lines().next().unwrap_or_default();
    match serde_json::from_str::<Header>(header) {
        Ok(h) if h.format == FORMAT => Ok(()),
        _ => Err(not("it has no snapshot state file")),
    }
}

/// Writes DIR with `body` and the guest memory `memory` writes (it gets
/// the open memory file). Everything goes to a sibling directory first
/// (0700, its files 0600 and made anew: memory holds what the guest held,
/// credentials included), renamed into place at the end: a failed
/// snapshot leaves nothing. An older snapshot at DIR is replaced; anything
/// else there is refused ([`check_target`]).
pub fn write(
    dir: &Path,
    body: &Body,
    memory: impl FnOnce(&mut File) -> std::io::Result<u64>,
) -> Result<(), SnapshotError> {
    let name = dir
        .file_name()
        .map(|n| n.to_string_lossy().to_string())
        .unwrap_or_default();
    check_target(dir)?;
    let tmp = dir.with_file_name(format!(".{name}.partial-{}", std::process::id()));
    let result = (|| {
        use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
        let werr = |path: &Path| {
            let path = path.to_path_buf();
            move |source| SnapshotError::Write { path, source }
        };
        let create = |path: &Path| {
            std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(0o600)
                .open(path)
                .map_err(werr(path))
        };
        std::fs::DirBuilder::new()
            .mode(0o700)
            .create(&tmp)
            .map_err(werr(&tmp))?;
        let mem_path = tmp.join(MEMORY_FILE);
        let mut mem = create(&mem_path)?;
        let memory_bytes = memory(&mut mem).map_err(werr(&mem_path))?;
        let body_json = serde_json::to_string(body).expect("the body serialises");
        let header = Header {
            format: FORMAT.into(),
            version: VERSION,
            body_sha256: hex(&Sha256::digest(body_json.as_bytes())),
            memory_bytes,
        };
        let state_path = tmp.join(STATE_FILE);
        let mut state = create(&state_path)?;
        writeln!(
            state,
            "{}",
            serde_json::to_string(&header).expect("the header serialises")
        )
        .and_then(|_| writeln!(state, "{body_json}"))
        .map_err(werr(&state_path))?;
        if dir.exists() {
            remove_snapshot(dir).map_err(werr(dir))?;
        }
        std::fs::rename(&tmp, dir).map_err(werr(dir))
    })();
    if result.is_err() {
        let _ = std::fs::remove_dir_all(&tmp);
    }
    result
}

/// Removes an older snapshot ([`check_target`] said it is one): its files,
/// then the directory. Nothing else is removed.
fn remove_snapshot(dir: &Path) -> std::io::Result<()> {
    for e in std::fs::read_dir(dir)?.flatten() {
        let name = e.file_name().to_string_lossy().to_string();
        if name == STATE_FILE || name == MEMORY_FILE || name.ends_with(".json") {
            std::fs::remove_file(e.path())?;
        }
    }
    std::fs::remove_dir(dir)
}

/// A snapshot directory read and checked: the body, and the memory file
/// with its size.
pub struct Loaded {
    pub body: Body,
    pub memory: File,
    pub memory_bytes: u64,
}

/// Reads DIR/state, checks its format, version and checksum, and opens
/// DIR/memory, checking its size.
pub fn read(dir: &Path) -> Result<Loaded, SnapshotError> {
    let state_path = dir.join(STATE_FILE);
    let invalid = |why: String| SnapshotError::Invalid {
        path: dir.to_path_buf(),
        why,
    };
    let rerr = |path: &Path| {
        let path = path.to_path_buf();
        move |source| SnapshotError::Read { path, source }
    };
    let mut lines = BufReader::new(File::open(&state_path).map_err(rerr(&state_path))?).lines();
    let mut next = |what: &str| match lines.next() {
        Some(Ok(l)) => Ok(l),
        Some(Err(e)) => Err(rerr(&state_path)(e)),
        None => Err(invalid(format!("its state file has no {what} line"))),
    };
    let header_line = next("header")?;
    let header: Header = serde_json::from_str(&header_line)
        .map_err(|e| invalid(format!("its state header is unreadable ({e})")))?;
    if header.format != FORMAT {
        return Err(invalid(format!("its format is '{}'", header.format)));
    }
    if header.version != VERSION {
        return Err(SnapshotError::Version {
            path: dir.to_path_buf(),
            found: header.version,
        });
    }
    let body_line = next("body")?;
    if hex(&Sha256::digest(body_line.as_bytes())) != header.body_sha256 {
        return Err(invalid("its state does not match its checksum".into()));
    }
    let body: Body = serde_json::from_str(&body_line)
        .map_err(|e| invalid(format!("its state body is unreadable ({e})")))?;
    let mem_path = dir.join(MEMORY_FILE);
    let memory = File::open(&mem_path).map_err(rerr(&mem_path))?;
    let size = memory.metadata().map_err(rerr(&mem_path))?.len();
    if size != header.memory_bytes || size != body.mem_mib << 20 {
        return Err(invalid(format!(
            "its memory file is {size} bytes, the state says {} ({} MiB)",
            header.memory_bytes, body.mem_mib
        )));
    }
    Ok(Loaded {
        body,
        memory,
        memory_bytes: size,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::devices::virtio::persist::{QueueRegs, TransportState};
    use crate::devices::virtio::DeviceSpec;
    use crate::kvm::persist::Pod;

    fn body() -> Body {
        let regs = kvm_bindings::kvm_regs {
            rip: 0x1234,
            rflags: 2,
            ..Default::default()
        };
        let pod = Pod::of(&kvm_bindings::kvm_clock_data::default());
        Body {
            mem_mib: 1,
            cmdline: "console=ttyS0".into(),
            tsc_deadline: true,
            vm: VmState {
                pic_master: pod.clone(),
                pic_slave: pod.clone(),
                ioapic: pod.clone(),
                pit: pod.clone(),
                clock: pod.clone(),
            },
            vcpus: vec![VcpuState {
                id: 0,
                mp_state: pod.clone(),
                regs: Pod::of(&regs),
                sregs: pod.clone(),
                xsave: pod.clone(),
                xcrs: pod.clone(),
                debugregs: pod.clone(),
                lapic: pod.clone(),
                msrs: vec![(0x10, 99)],
                vcpu_events: pod,
            }],
            serial: Some(SerialState {
                registers: [1, 2, 3, 4, 5, 6, 7, 8, 9],
                in_buffer: b"in".to_vec(),
            }),
            virtio: vec![VirtioState {
                device: DeviceSpec::Vsock { guest_cid: 3 },
                transport: TransportState {
                    status: 15,
                    activated: true,
                    queues: vec![QueueRegs {
                        size: 256,
                        ready: true,
                        desc: 0x1000,
                        avail: 0x2000,
                        used: 0x3000,
                    }],
                    ..Default::default()
                },
            }],
        }
    }

    fn written() -> (tempfile::TempDir, PathBuf) {
        let d = tempfile::tempdir().unwrap();
        let dir = d.path().join("snap");
        write(&dir, &body(), |f| {
            f.write_all(&vec![7u8; 1 << 20])?;
            Ok(1 << 20)
        })
        .unwrap();
        (d, dir)
    }

    #[test]
    fn a_written_snapshot_reads_back_the_same() {
        let (_d, dir) = written();
        let loaded = read(&dir).unwrap();
        assert_eq!(loaded.body, body());
        assert_eq!(loaded.memory_bytes, 1 << 20);
        let regs: kvm_bindings::kvm_regs = loaded.body.vcpus[0].regs.get("regs").unwrap();
        assert_eq!((regs.rip, regs.rflags), (0x1234, 2));
    }

    fn state_lines(dir: &Path) -> (String, String) {
        let s = std::fs::read_to_string(dir.join(STATE_FILE)).unwrap();
        let mut l = s.lines();
        (l.next().unwrap().into(), l.next().unwrap().into())
    }

    #[test]
    fn a_changed_body_fails_its_checksum() {
        let (_d, dir) = written();
        let (h, b) = state_lines(&dir);
        let b = b.replace("console=ttyS0", "console=ttyS1");
        std::fs::write(dir.join(STATE_FILE), format!("{h}\n{b}\n")).unwrap();
        let e = read(&dir).err().unwrap().to_string();
        assert!(e.contains("does not match its checksum"), "{e}");
    }

    #[test]
    fn another_version_is_refused_and_says_what_to_do() {
        let (_d, dir) = written();
        let (h, b) = state_lines(&dir);
        let h = h.replace(&format!("\"version\":{VERSION}"), "\"version\":99");
        std::fs::write(dir.join(STATE_FILE), format!("{h}\n{b}\n")).unwrap();
        let e = read(&dir).err().unwrap().to_string();
        assert!(
            e.contains("version 99") && e.contains("take the snapshot again"),
            "{e}"
        );
    }

    #[test]
    fn a_truncated_memory_file_is_refused() {
        let (_d, dir) = written();
        let f = std::fs::OpenOptions::new()
            .write(true)
            .open(dir.join(MEMORY_FILE))
            .unwrap();
        f.set_len(4096).unwrap();
        let e = read(&dir).err().unwrap().to_string();
        assert!(e.contains("memory file is 4096 bytes"), "{e}");
    }

    #[test]
    fn a_failed_write_leaves_nothing() {
        let d = tempfile::tempdir().unwrap();
        let dir = d.path().join("snap");
        let r = write(&dir, &body(), |_| Err(std::io::Error::other("disk full")));
        assert!(r.is_err());
        assert_eq!(std::fs::read_dir(d.path()).unwrap().count(), 0);
    }

    #[test]
    fn not_a_snapshot_is_one_clear_error() {
        let d = tempfile::tempdir().unwrap();
        std::fs::write(d.path().join(STATE_FILE), "hello\n").unwrap();
        let e = read(d.path()).err().unwrap().to_string();
        assert!(e.contains("is not a usable snapshot"), "{e}");
        let e = read(&d.path().join("missing")).err().unwrap().to_string();
        assert!(e.contains("Cannot read snapshot"), "{e}");
    }

    #[test]
    fn a_snapshot_replaces_only_a_snapshot_and_keeps_its_memory_private() {
        use std::os::unix::fs::PermissionsExt;
        let (d, dir) = written();
        let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(&dir), 0o700);
        assert_eq!(mode(&dir.join(MEMORY_FILE)), 0o600);
        assert_eq!(mode(&dir.join(STATE_FILE)), 0o600);
        // An older snapshot (with an embedder's json beside it) is replaced.
        std::fs::write(dir.join("initialize.json"), "{}").unwrap();
        write(&dir, &body(), |f| {
            f.write_all(&vec![1u8; 1 << 20])?;
            Ok(1 << 20)
        })
        .unwrap();
        assert!(read(&dir).is_ok());
        assert!(
            !dir.join("initialize.json").exists(),
            "the old one's files went with it"
        );
        // A directory that is not one is refused and left as it was:
        // `--snapshot-to .` must not empty the current directory.
        let work = d.path().join("work");
        std::fs::create_dir(&work).unwrap();
        std::fs::write(work.join("notes.txt"), "mine").unwrap();
        let e = write(&work, &body(), |_| Ok(0)).err().unwrap().to_string();
        assert!(e.contains("is not a snapshot"), "{e}");
        assert_eq!(
            std::fs::read_to_string(work.join("notes.txt")).unwrap(),
            "mine"
        );
        // A snapshot with something else beside it: refused too.
        std::fs::write(dir.join("notes.txt"), "mine").unwrap();
        assert!(check_target(&dir).is_err());
        let file = d.path().join("file");
        std::fs::write(&file, "x").unwrap();
        assert!(check_target(&file).is_err());
        assert!(check_target(&d.path().join("new")).is_ok());
    }
}

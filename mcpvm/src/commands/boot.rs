//! `mcpvm boot`: boot a kernel (and initrd) with the VMM and report how
//! the guest ended and how long each boot phase took.

use std::fs::File;
use std::io::{self, LineWriter, Write};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use clap::{Args, ValueEnum};
use vmm::{RunOutcome, VmConfig};

use crate::run::disk_arg::{parse_disk, DiskArg};

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum SerialMode {
    /// The guest console goes to stdout.
    Stdout,
    /// The guest console goes to --serial-file.
    File,
    /// No UART at all (fewer exits, faster boot).
    Off,
}

#[derive(Args, Clone, Debug, PartialEq)]
pub struct BootArgs {
    /// Kernel image: ELF vmlinux (PVH entry) or bzImage (64-bit entry).
    #[arg(long, required_unless_present = "restore")]
    pub kernel: Option<PathBuf>,
    /// Initial ramdisk (cpio, optionally compressed).
    #[arg(long)]
    pub initrd: Option<PathBuf>,
    /// Extra kernel command-line options.
    #[arg(long, default_value = "")]
    pub cmdline: String,
    /// Guest memory in MiB.
    #[arg(long, default_value_t = 256)]
    pub mem: u64,
    /// Number of vCPUs.
    #[arg(long, default_value_t = 1)]
    pub vcpus: u8,
    /// Where the guest's serial console goes.
    #[arg(long, value_enum, default_value_t = SerialMode::Stdout)]
    pub serial: SerialMode,
    /// File for --serial file (created or truncated).
    #[arg(long)]
    pub serial_file: Option<PathBuf>,
    /// Stop the guest after this many seconds (exit code 124).
    #[arg(long, value_parser = parse_seconds)]
    pub timeout: Option<Duration>,
    /// Run even where /dev/kvm is kvm_pvm (Linux boots there take ~30 s).
    #[arg(long)]
    pub allow_pvm: bool,
    /// Host seccomp filters on the VMM's threads: off, log or on.
    #[arg(long, default_value = "on", value_name = "off|log|on")]
    pub seccomp: vmm::SeccompMode,
    /// Attach a virtio-vsock device (guest CID 3) bridged to this Unix
    /// socket path: host connects with `CONNECT <port>`, guest connects
    /// reach `<path>_<port>`.
    #[arg(long)]
    pub vsock_uds: Option<PathBuf>,
    /// A disk image: PATH[,rw][,cache=page|direct][,id=NAME]; read-only
    /// unless rw. Repeatable: /dev/vda, /dev/vdb, … in order.
    #[arg(long = "disk", value_parser = parse_disk)]
    pub disks: Vec<DiskArg>,
    /// Attach a virtio-rng entropy device.
    #[arg(long)]
    pub rng: bool,
    /// On SIGUSR1, pause the VM, write it to this snapshot directory
    /// (docs/snapshots.md) and end with exit 0.
    #[arg(long, value_name = "DIR")]
    pub snapshot_to: Option<PathBuf>,
    /// Do not offer the TSC-deadline timer in CPUID (offered by default
    /// where KVM emulates it, as Firecracker and QEMU do: the guest then
    /// skips calibrating its LAPIC timer against the PIT). A snapshot is
    /// restored with what its guest booted with.
    #[arg(long)]
    pub no_tsc_deadline: bool,
    /// Start from this snapshot directory instead of booting: memory,
    /// vCPUs, command line, disks and rng come from it (a vsock device
    /// needs --vsock-uds, a new host socket).
    #[arg(long, value_name = "DIR", conflicts_with_all = ["kernel", "initrd", "cmdline", "mem", "vcpus", "disks", "rng"])]
    pub restore: Option<PathBuf>,
}

/// What clap gives when no option is set.
impl Default for BootArgs {
    fn default() -> Self {
        BootArgs {
            kernel: None,
            initrd: None,
            cmdline: String::new(),
            mem: 256,
            vcpus: 1,
            serial: SerialMode::Stdout,
            serial_file: None,
            timeout: None,
            allow_pvm: false,
            seccomp: vmm::SeccompMode::On,
            vsock_uds: None,
            disks: Vec::new(),
            rng: false,
            snapshot_to: None,
            no_tsc_deadline: false,
            restore: None,
        }
    }
}

impl BootArgs {
    /// These options as `mcpvm boot` arguments (after `boot`): parsing
    /// them gives these options back (the benchmarks start boots so).
    pub fn to_args(&self) -> Vec<String> {
        let mut a = crate::run::options::Args(Vec::new());
        a.path("kernel", &self.kernel);
        a.path("initrd", &self.initrd);
        // What a snapshot fixes is written only where it differs from
        // the default: `--restore` refuses it.
        let d = BootArgs::default();
        a.value("cmdline", &Some(&self.cmdline).filter(|c| **c != d.cmdline));
        a.value("mem", &Some(self.mem).filter(|m| *m != d.mem));
        a.value("vcpus", &Some(self.vcpus).filter(|v| *v != d.vcpus));
        let serial = self
            .serial
            .to_possible_value()
            .map(|v| v.get_name().to_string());
        a.value("serial", &serial);
        a.path("serial-file", &self.serial_file);
        a.value("timeout", &self.timeout.map(|t| t.as_secs_f64()));
        a.flag("allow-pvm", self.allow_pvm);
        a.value("seccomp", &Some(self.seccomp.as_str()));
        a.path("vsock-uds", &self.vsock_uds);
        for d in &self.disks {
            a.push(format!("--disk={}", d.text));
        }
        a.flag("rng", self.rng);
        a.path("snapshot-to", &self.snapshot_to);
        a.flag("no-tsc-deadline", self.no_tsc_deadline);
        a.path("restore", &self.restore);
        a.0
    }
}

fn parse_seconds(s: &str) -> Result<Duration, String> {
    match s.parse::<f64>() {
        Ok(v) if v > 0.0 && v.is_finite() && v < 1e9 => Ok(Duration::from_secs_f64(v)),
        _ => Err(format!("'{s}' is not a positive number of seconds")),
    }
}

#[derive(Debug, thiserror::Error)]
pub enum BootCmdError {
    #[error("--serial file needs --serial-file PATH")]
    SerialFileMissing,
    #[error("--serial-file is only used with --serial file")]
    SerialFileUnused,
    #[error("Cannot create serial log {path}")]
    SerialFile {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error(transparent)]
    Vmm(#[from] vmm::VmmError),
    #[error(transparent)]
    Snapshot(#[from] vmm::snapshot::SnapshotError),
}

pub fn run(args: BootArgs, start: Instant, json: bool) -> Result<u8, BootCmdError> {
    if let Err(e) = vmm::host_seccomp::close_inherited_fds() {
        log::warn!("cannot close inherited file descriptors: {e}");
    }
    if let Some(dir) = &args.snapshot_to {
        vmm::snapshot::check_target(dir)?;
    }
    let mid_line = Arc::new(AtomicBool::new(false));
    let console: Option<Box<dyn Write + Send>> = match (args.serial, &args.serial_file) {
        (SerialMode::File, None) => return Err(BootCmdError::SerialFileMissing),
        (SerialMode::Stdout | SerialMode::Off, Some(_)) => {
            return Err(BootCmdError::SerialFileUnused)
        }
        (SerialMode::Stdout, None) => Some(Box::new(LineTracking {
            out: io::stdout(),
            mid_line: mid_line.clone(),
        })),
        (SerialMode::Off, None) => None,
        (SerialMode::File, Some(path)) => {
            let f = File::create(path).map_err(|source| BootCmdError::SerialFile {
                path: path.clone(),
                source,
            })?;
            Some(Box::new(LineWriter::new(f)))
        }
    };
    let boot = match args.restore {
        Some(dir) => vmm::Boot::Snapshot(dir),
        None => vmm::Boot::Kernel(vmm::KernelBoot {
            kernel: args.kernel.unwrap_or_default(),
            initrd: args.initrd,
            cmdline: args.cmdline,
            mem_mib: args.mem,
            vcpus: args.vcpus,
            rng: args.rng,
            tsc_deadline: !args.no_tsc_deadline,
        }),
    };
    match &boot {
        vmm::Boot::Snapshot(dir) => log::debug!("restoring {}", dir.display()),
        vmm::Boot::Kernel(k) => log::debug!(
            "booting {} with {} MiB, {} vCPUs",
            k.kernel.display(),
            k.mem_mib,
            k.vcpus
        ),
    }
    let config = VmConfig {
        boot,
        console,
        timeout: args.timeout,
        allow_pvm: args.allow_pvm,
        start,
        vsock: args.vsock_uds.map(|uds_path| vmm::VsockConfig {
            guest_cid: 3,
            uds_path,
        }),
        disks: args.disks.into_iter().map(|d| d.config).collect(),
        seccomp: args.seccomp,
        save_to: args.snapshot_to,
    };
    let outcome = vmm::run(config).map_err(BootCmdError::from)?;
    if mid_line.load(Ordering::Relaxed) {
        // The guest stopped mid-line: the report must not be glued to it.
        println!();
    }
    report(&outcome, json);
    Ok(outcome.reason.exit_code().clamp(0, 255) as u8)
}

/// The guest console, remembering whether its last line is unfinished: a
/// guest can power off (or be stopped) in the middle of a kernel message,
/// and the `--json` report after it on stdout must start a line.
struct LineTracking<W> {
    out: W,
    mid_line: Arc<AtomicBool>,
}

impl<W: Write> Write for LineTracking<W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let n = self.out.write(buf)?;
        if let Some(last) = buf[..n].last() {
            self.mid_line.store(*last != b'\n', Ordering::Relaxed);
        }
        Ok(n)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.out.flush()
    }
}

/// The exits that reached the VMM, most first, with the port or
/// guest-physical address in hex.
pub fn exit_counts(
    exits: &[vmm::kvm::exits::ExitCount],
) -> Vec<mcpvm_protocol::timings::ExitCount> {
    exits
        .iter()
        .map(|e| mcpvm_protocol::timings::ExitCount {
            kind: e.kind.name().to_string(),
            addr: format!("{:#x}", e.addr),
            count: e.count,
        })
        .collect()
}

/// The VMM's phases as every report gives them (ms since it started).
pub fn vm_phases(t: &vmm::BootTimings) -> mcpvm_protocol::timings::VmPhases {
    mcpvm_protocol::timings::VmPhases::from_durations(
        t.kvm_ready,
        t.kernel_entry,
        t.boot_timer,
        t.exit,
    )
}

fn report(outcome: &RunOutcome, json: bool) {
    let t = &outcome.timings;
    if json {
        use mcpvm_protocol::timings::{ms, BootExit, BootReport};
        let v = BootReport {
            exit: BootExit {
                reason: outcome.reason.kind().to_string(),
                detail: outcome.reason.to_string(),
                code: outcome.reason.exit_code(),
            },
            timings_ms: vm_phases(t),
            setup_ms: t
                .setup
                .iter()
                .filter_map(|(name, d)| Some((name.to_string(), ms(Some(*d))?)))
                .collect(),
            exits: exit_counts(&outcome.exits),
        };
        println!("{}", serde_json::to_string(&v).unwrap_or_default());
    } else {
        let total: u64 = outcome.exits.iter().map(|e| e.count).sum();
        let top: Vec<String> = outcome
            .exits
            .iter()
            .take(5)
            .map(|e| format!("{} {:#x}: {}", e.kind.name(), e.addr, e.count))
            .collect();
        log::debug!("{total} exits to the VMM; most: {}", top.join(", "));
        log::debug!("timings (ms since start): {:?}", vm_phases(t));
        if outcome.reason.exit_code() != 0 {
            eprintln!("mcpvm: {}", outcome.reason);
        } else {
            log::debug!("{}", outcome.reason);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(clap::Parser)]
    struct Cli {
        #[command(flatten)]
        boot: BootArgs,
    }

    #[test]
    fn options_written_back_as_arguments_parse_to_the_same_options() {
        use clap::Parser;
        let cases = [
            BootArgs {
                kernel: Some("vmlinux".into()),
                initrd: Some("initrd.cpio".into()),
                cmdline: "quiet".into(),
                mem: 512,
                vcpus: 2,
                timeout: Some(Duration::from_millis(1500)),
                no_tsc_deadline: true,
                seccomp: vmm::SeccompMode::Log,
                serial: SerialMode::File,
                serial_file: Some("serial.log".into()),
                disks: vec![parse_disk("root.erofs,id=r").unwrap()],
                rng: true,
                ..BootArgs::default()
            },
            BootArgs {
                restore: Some("snap".into()),
                vsock_uds: Some("v.sock".into()),
                ..BootArgs::default()
            },
        ];
        for args in cases {
            let argv = std::iter::once("boot".to_string()).chain(args.to_args());
            let back = Cli::try_parse_from(argv)
                .unwrap_or_else(|e| panic!("{:?}: {e}", args.to_args()))
                .boot;
            assert_eq!(back, args);
        }
    }

    #[test]
    fn a_console_cut_mid_line_is_known_to_be_unfinished() {
        let mid_line = Arc::new(AtomicBool::new(false));
        let mut console = LineTracking {
            out: Vec::new(),
            mid_line: mid_line.clone(),
        };
        console.write_all(b"[    2.1] reboot: Pow").unwrap();
        assert!(mid_line.load(Ordering::Relaxed));
        console.write_all(b"er down\n").unwrap();
        assert!(!mid_line.load(Ordering::Relaxed));
        console.write_all(b"").unwrap();
        assert!(
            !mid_line.load(Ordering::Relaxed),
            "an empty write changes nothing"
        );
        assert_eq!(console.out, b"[    2.1] reboot: Power down\n");
    }
}

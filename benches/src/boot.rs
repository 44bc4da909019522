//! Boot benchmark: our VMM against QEMU's `microvm` machine, same kernel,
//! same initrd, same guest agent, same host, same run.
//!
//! Per run of our VMM we record the VMM's own phase times (process start
//! to KVM ready, to kernel entry, to the boot-timer write from init, to
//! exit) and, for both VMMs, two times measured from outside: spawn to the
//! agent's "up" line on the console, and spawn to process exit. The
//! outside measurements are the fair comparison; the ratio is ours/QEMU's.

use mcpvm_protocol::timings::BootReport as VmBootReport;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde::Serialize;

use crate::stats::{summarize, Summary};

/// The line the guest agent prints once userspace is up.
const UP_MARKER: &str = "mcpvm-agent: up";

pub struct BootBench {
    /// The `mcpvm` binary to run (`mcpvm boot`).
    pub mcpvm: PathBuf,
    /// The QEMU binary (or wrapper) to compare with; None skips QEMU.
    pub qemu: Option<PathBuf>,
    /// A Firecracker binary to compare with (a benchmark peer only,
    /// ../shared/peers/firecracker); None skips it.
    pub firecracker: Option<PathBuf>,
    pub kernel: PathBuf,
    pub initrd: PathBuf,
    pub runs: usize,
    pub mem_mib: u64,
    pub vcpus: u8,
    pub timeout: Duration,
    /// Boot ours with the TSC-deadline timer (the default; false passes
    /// `--no-tsc-deadline`, see `mcpvm boot --help`).
    pub tsc_deadline: bool,
}

#[derive(Debug, thiserror::Error)]
pub enum BenchError {
    #[error("Cannot start {what}")]
    Spawn {
        what: String,
        #[source]
        source: std::io::Error,
    },
    #[error("{what} run {run} failed: {detail}")]
    Run {
        what: String,
        run: usize,
        detail: String,
    },
}

#[derive(Debug, Default, Serialize)]
pub struct BootReport {
    pub runs: usize,
    /// Our VMM's phases, ms since its process started.
    pub mcpvm_kvm_ready: Option<Summary>,
    pub mcpvm_kernel_entry: Option<Summary>,
    pub mcpvm_boot_timer: Option<Summary>,
    pub mcpvm_exit: Option<Summary>,
    /// Outside view, ms since spawn.
    pub mcpvm_spawn_to_init: Option<Summary>,
    pub mcpvm_spawn_to_exit: Option<Summary>,
    pub qemu_spawn_to_init: Option<Summary>,
    pub qemu_spawn_to_exit: Option<Summary>,
    pub firecracker_spawn_to_init: Option<Summary>,
    pub firecracker_spawn_to_exit: Option<Summary>,
    /// Median ratios, ours / QEMU microvm (below 1: we are faster).
    pub ratio_init: Option<f64>,
    pub ratio_exit: Option<f64>,
    /// Median ratios, ours / Firecracker.
    pub ratio_init_firecracker: Option<f64>,
    pub ratio_exit_firecracker: Option<f64>,
    /// Our VMM's steps before kernel entry, in order: ms since its
    /// process started when each ended (`mcpvm boot --json`'s `setup_ms`).
    pub mcpvm_setup: Vec<(String, Summary)>,
    /// Exits that reached our VMM per run, and the most frequent
    /// (kind and address) with their counts.
    pub mcpvm_exits: Option<Summary>,
    pub mcpvm_exits_top: Vec<(String, Summary)>,
    /// Each VMM alone: spawn → exit on a null kernel (its first
    /// instruction resets the VM), ms. What a VMM costs before and after
    /// any guest code, measured from outside the same way for all.
    pub mcpvm_null: Option<Summary>,
    pub qemu_null: Option<Summary>,
    pub firecracker_null: Option<Summary>,
    /// Median ratio, ours / Firecracker, on the null kernel.
    pub ratio_null_firecracker: Option<f64>,
}

/// One VMM's outside view over the runs: spawn → agent up, → exit (ms).
#[derive(Default)]
struct Samples {
    init: Vec<f64>,
    exit: Vec<f64>,
}

impl Samples {
    fn add(&mut self, t: &Timed) {
        self.init.extend(t.to_init);
        self.exit.push(t.to_exit);
    }
}

#[derive(Default)]
struct Runs {
    /// Our VMM's own phases: KVM ready, kernel entry, boot timer, exit.
    phases: [Vec<f64>; 4],
    /// Setup steps in the order the VMM reported them, with their times.
    setup: Vec<(String, Vec<f64>)>,
    /// Exits per run, and per kind-and-address over the runs.
    exits: Vec<f64>,
    exits_by: Vec<(String, Vec<f64>)>,
    ours: Samples,
    qemu: Samples,
    firecracker: Samples,
    /// Spawn → exit on the null kernel: each VMM's own start and stop.
    ours_null: Vec<f64>,
    qemu_null: Vec<f64>,
    firecracker_null: Vec<f64>,
}

struct Timed {
    to_init: Option<f64>,
    to_exit: f64,
    stdout: Vec<String>,
    success: bool,
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

/// Spawns `cmd`, timestamps the agent's "up" line and the exit.
fn timed(mut cmd: Command, what: &str, timeout: Duration) -> Result<Timed, BenchError> {
    cmd.stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .stdin(Stdio::null());
    let start = Instant::now();
    let mut child = cmd.spawn().map_err(|source| BenchError::Spawn {
        what: what.into(),
        source,
    })?;
    let stdout = child.stdout.take().expect("piped");
    let reader = std::thread::spawn(move || {
        let mut to_init = None;
        let mut lines = Vec::new();
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if to_init.is_none() && line.contains(UP_MARKER) {
                to_init = Some(ms(start.elapsed()));
            }
            lines.push(line);
        }
        (to_init, lines)
    });
    // Block in wait() with a watchdog for the timeout, rather than polling:
    // in the testbed the VMM under test has one CPU, and a poll every few
    // hundred microseconds took half of it from the VM being measured.
    let pid = child.id() as libc::pid_t;
    let (done_tx, done_rx) = std::sync::mpsc::channel::<()>();
    let watchdog = std::thread::spawn(move || {
        let timed_out = matches!(
            done_rx.recv_timeout(timeout),
            Err(std::sync::mpsc::RecvTimeoutError::Timeout)
        );
        if timed_out {
            // SAFETY: signals our child, which is not reaped before this
            // thread has ended (main waits with WNOWAIT first), so the pid
            // cannot have been reused.
            unsafe { libc::kill(pid, libc::SIGKILL) };
        }
        timed_out
    });
    // SAFETY: waits for our own child's exit without reaping it; `info` is
    // a plain struct the kernel fills.
    let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
    unsafe {
        libc::waitid(
            libc::P_PID,
            pid as libc::id_t,
            &mut info,
            libc::WEXITED | libc::WNOWAIT,
        )
    };
    let to_exit_at = start.elapsed();
    let _ = done_tx.send(());
    let timed_out = watchdog.join().unwrap_or(true);
    let waited = child.wait();
    let status = match waited {
        Ok(s) if !timed_out => Some(s),
        Ok(_) => None,
        Err(source) => {
            return Err(BenchError::Spawn {
                what: what.into(),
                source,
            })
        }
    };
    let to_exit = ms(to_exit_at);
    let (to_init, stdout) = reader.join().unwrap_or_default();
    Ok(Timed {
        to_init,
        to_exit,
        stdout,
        success: status.is_some(),
    })
}

impl Runs {
    /// One run's `setup_ms` and `exits` from `mcpvm boot --json`. A key
    /// missing from a run simply has fewer samples.
    fn add_setup(&mut self, v: &VmBootReport) {
        for (name, t) in &v.setup_ms {
            push_sample(&mut self.setup, name, *t);
        }
        let mut total = 0.0;
        for e in &v.exits {
            let n = e.count as f64;
            total += n;
            push_sample(&mut self.exits_by, &format!("{} {}", e.kind, e.addr), n);
        }
        self.exits.push(total);
    }
}

fn push_sample(list: &mut Vec<(String, Vec<f64>)>, key: &str, x: f64) {
    match list.iter_mut().find(|(k, _)| k == key) {
        Some((_, v)) => v.push(x),
        None => list.push((key.to_string(), vec![x])),
    }
}

fn summaries(list: Vec<(String, Vec<f64>)>) -> Vec<(String, Summary)> {
    list.into_iter()
        .filter_map(|(k, v)| summarize(&v).map(|s| (k, s)))
        .collect()
}

/// What a VMM boots: the real kernel and initrd, or the null kernel.
struct Guest<'a> {
    kernel: &'a Path,
    initrd: Option<&'a Path>,
}

/// The command line the peers get: what ours composes for the same
/// devices (`vmm::cmdline`: BASE, the console) and the bench's `quiet`.
const PEER_CMDLINE: &str = "console=ttyS0 reboot=k panic=-1 quiet";

/// The last `mcpvm boot --json` report in `stdout` (none read: the
/// default, whose exit code is no success's).
fn last_report(stdout: &[String]) -> VmBootReport {
    stdout
        .iter()
        .rev()
        .find(|l| l.starts_with('{'))
        .and_then(|l| serde_json::from_str(l).ok())
        .unwrap_or(VmBootReport {
            exit: mcpvm_protocol::timings::BootExit {
                code: -1,
                ..Default::default()
            },
            ..Default::default()
        })
}

fn failed(what: &str, run: usize, t: &Timed) -> BenchError {
    BenchError::Run {
        what: what.into(),
        run,
        detail: t.stdout.join("\n"),
    }
}

/// The null kernel: an ELF with a PVH entry note (Xen's
/// XEN_ELFNOTE_PHYS32_ENTRY, the entry every VMM here uses for a vmlinux)
/// whose code writes 0 to the power port 0x441 (ours powers off; QEMU's
/// isa-debug-exit, which the bench gives it there, exits), then the i8042
/// reset command (0xfe to port 0x64; Firecracker ends on it), and halts.
/// So spawn → exit is each VMM's own start-up and tear-down with a VM
/// exit or two between.
pub fn null_kernel() -> Vec<u8> {
    const LOAD: u64 = 0x10_0000;
    const CODE_OFFSET: u64 = 0x1000;
    const PT_LOAD: u32 = 1;
    const PT_NOTE: u32 = 4;
    const XEN_ELFNOTE_PHYS32_ENTRY: u32 = 18;
    #[rustfmt::skip]
    let code: &[u8] = &[
        0x66, 0xba, 0x41, 0x04, // mov dx, 0x441 (32-bit code: operand-size prefix)
        0xb0, 0x00,             // mov al, 0
        0xee,                   // out dx, al
        0xb0, 0xfe,             // mov al, 0xfe
        0xe6, 0x64,             // out 0x64, al
        0xf4,                   // hlt
        0xeb, 0xfd,             // jmp back to hlt
    ];
    let mut note = Vec::new();
    for w in [4u32, 4, XEN_ELFNOTE_PHYS32_ENTRY] {
        note.extend(w.to_le_bytes());
    }
    note.extend(b"Xen\0");
    note.extend((LOAD as u32).to_le_bytes());
    let phdr = |kind: u32, flags: u32, offset: u64, addr: u64, size: u64, align: u64| {
        let mut p = Vec::new();
        p.extend(kind.to_le_bytes());
        p.extend(flags.to_le_bytes());
        for x in [offset, addr, addr, size, size, align] {
            p.extend(x.to_le_bytes());
        }
        p
    };
    let mut elf = Vec::new();
    elf.extend(b"\x7fELF\x02\x01\x01\0");
    elf.extend([0u8; 8]);
    elf.extend(2u16.to_le_bytes()); // ET_EXEC
    elf.extend(62u16.to_le_bytes()); // EM_X86_64
    elf.extend(1u32.to_le_bytes()); // EV_CURRENT
    elf.extend(LOAD.to_le_bytes()); // e_entry
    elf.extend(64u64.to_le_bytes()); // e_phoff
    elf.extend(0u64.to_le_bytes()); // e_shoff
    elf.extend(0u32.to_le_bytes()); // e_flags
    for h in [64u16, 56, 2, 64, 0, 0] {
        // ehsize, phentsize, phnum, shentsize, shnum, shstrndx
        elf.extend(h.to_le_bytes());
    }
    let note_offset = 64 + 2 * 56;
    elf.extend(phdr(
        PT_LOAD,
        5,
        CODE_OFFSET,
        LOAD,
        code.len() as u64,
        0x1000,
    ));
    elf.extend(phdr(PT_NOTE, 4, note_offset, 0, note.len() as u64, 4));
    elf.extend(&note);
    elf.resize(CODE_OFFSET as usize, 0);
    elf.extend(code);
    elf
}

impl BootBench {
    fn mcpvm_cmd(&self, guest: &Guest) -> Command {
        let boot = mcpvm::commands::boot::BootArgs {
            kernel: Some(guest.kernel.to_path_buf()),
            initrd: guest.initrd.map(|i| i.to_path_buf()),
            cmdline: "quiet".into(),
            mem: self.mem_mib,
            vcpus: self.vcpus,
            timeout: Some(self.timeout),
            no_tsc_deadline: !self.tsc_deadline,
            ..Default::default()
        };
        let mut c = Command::new(&self.mcpvm);
        c.args(["boot", "--json"]).args(boot.to_args());
        c
    }

    fn qemu_cmd(&self, qemu: &PathBuf, guest: &Guest) -> Command {
        let mut c = Command::new(qemu);
        // The same guest contract as ours: 8250 console, reset via i8042,
        // the agent's power-off write to port 0x441 ends QEMU through
        // isa-debug-exit. x-option-roms=off is what makes the PVH vmlinux
        // entry work on microvm.
        c.args([
            "-M",
            "microvm,x-option-roms=off",
            "-accel",
            "kvm",
            "-cpu",
            "host",
        ])
        .args([
            "-m",
            &self.mem_mib.to_string(),
            "-smp",
            &self.vcpus.to_string(),
        ])
        .args([
            "-nodefaults",
            "-no-user-config",
            "-display",
            "none",
            "-no-reboot",
        ])
        .args([
            "-serial",
            "stdio",
            "-device",
            "isa-debug-exit,iobase=0x441,iosize=1",
        ])
        .arg("-kernel")
        .arg(guest.kernel);
        if let Some(initrd) = guest.initrd {
            c.arg("-initrd").arg(initrd);
        }
        c.args(["-append", PEER_CMDLINE]);
        c
    }

    /// The alternating runs: mcpvm, then each peer present, `runs` times;
    /// each round also starts every VMM once on the null kernel.
    fn alternate(
        &self,
        progress: &mut impl FnMut(&str),
        scratch: &Path,
    ) -> Result<Runs, BenchError> {
        let null_path = scratch.join("null-kernel.elf");
        std::fs::write(&null_path, null_kernel()).map_err(|source| BenchError::Spawn {
            what: format!("the null kernel ({})", null_path.display()),
            source,
        })?;
        let real = Guest {
            kernel: &self.kernel,
            initrd: Some(&self.initrd),
        };
        let null = Guest {
            kernel: &null_path,
            initrd: None,
        };
        // A VMM that does not end on the null kernel's first instructions
        // is not going to: fail fast.
        let null_timeout = self.timeout.min(Duration::from_secs(30));
        let mut r = Runs::default();
        for run in 1..=self.runs {
            progress(&format!("run {run}/{}: mcpvm", self.runs));
            let t = timed(
                self.mcpvm_cmd(&real),
                "mcpvm",
                self.timeout + Duration::from_secs(5),
            )?;
            let v = last_report(&t.stdout);
            if !t.success || v.exit.code != 0 || t.to_init.is_none() {
                return Err(failed("mcpvm", run, &t));
            }
            for (i, key) in ["kvm_ready", "kernel_entry", "boot_timer", "exit"]
                .iter()
                .enumerate()
            {
                if let Some(x) = v.timings_ms.get(key) {
                    r.phases[i].push(x);
                }
            }
            r.add_setup(&v);
            r.ours.add(&t);
            let t = timed(self.mcpvm_cmd(&null), "mcpvm", null_timeout)?;
            if !t.success || last_report(&t.stdout).exit.code != 0 {
                return Err(failed("mcpvm (null kernel)", run, &t));
            }
            r.ours_null.push(t.to_exit);

            if let Some(q) = &self.qemu {
                progress(&format!("run {run}/{}: qemu microvm", self.runs));
                let t = timed(self.qemu_cmd(q, &real), "qemu", self.timeout)?;
                if !t.success || t.to_init.is_none() {
                    return Err(failed("qemu", run, &t));
                }
                r.qemu.add(&t);
                let t = timed(self.qemu_cmd(q, &null), "qemu", null_timeout)?;
                if !t.success {
                    return Err(failed("qemu (null kernel)", run, &t));
                }
                r.qemu_null.push(t.to_exit);
            }
            if let Some(fc) = &self.firecracker {
                progress(&format!("run {run}/{}: firecracker", self.runs));
                let cmd = self.firecracker_cmd(fc, scratch, &real)?;
                let t = timed(cmd, "firecracker", self.timeout)?;
                if !t.success || t.to_init.is_none() {
                    return Err(failed("firecracker", run, &t));
                }
                r.firecracker.add(&t);
                let cmd = self.firecracker_cmd(fc, scratch, &null)?;
                let t = timed(cmd, "firecracker", null_timeout)?;
                if !t.success {
                    return Err(failed("firecracker (null kernel)", run, &t));
                }
                r.firecracker_null.push(t.to_exit);
            }
        }
        Ok(r)
    }

    /// Firecracker without its API socket, from a config file naming the
    /// same kernel, initrd, command line, memory and vCPUs; no devices.
    /// Its console is its stdout; the guest's reset (`reboot=k`) ends it.
    fn firecracker_cmd(
        &self,
        fc: &PathBuf,
        dir: &Path,
        guest: &Guest,
    ) -> Result<Command, BenchError> {
        let abs = |p: &Path| std::fs::canonicalize(p).unwrap_or(p.to_path_buf());
        let mut boot = serde_json::json!({
            "kernel_image_path": abs(guest.kernel),
            "boot_args": PEER_CMDLINE,
        });
        if let Some(initrd) = guest.initrd {
            boot["initrd_path"] = abs(initrd).display().to_string().into();
        }
        let config = serde_json::json!({
            "boot-source": boot,
            "drives": [],
            "machine-config": {"vcpu_count": self.vcpus, "mem_size_mib": self.mem_mib},
        });
        let path = dir.join("firecracker.json");
        std::fs::write(&path, config.to_string()).map_err(|source| BenchError::Spawn {
            what: format!("firecracker (writing {})", path.display()),
            source,
        })?;
        let mut c = Command::new(fc);
        c.args(["--no-api", "--level", "Error", "--config-file"])
            .arg(&path);
        Ok(c)
    }

    /// Runs our VMM and each peer alternately, `runs` times each, so that
    /// drift in the host's load affects all alike.
    pub fn run(&self, mut progress: impl FnMut(&str)) -> Result<BootReport, BenchError> {
        let scratch = std::env::temp_dir().join(format!("mcpvm-bench-boot-{}", std::process::id()));
        std::fs::create_dir_all(&scratch).map_err(|source| BenchError::Spawn {
            what: "the bench's scratch directory".into(),
            source,
        })?;
        let runs = self.alternate(&mut progress, &scratch);
        let _ = std::fs::remove_dir_all(&scratch);
        let Runs {
            phases,
            ours,
            qemu,
            firecracker,
            setup,
            exits,
            exits_by,
            ours_null,
            qemu_null,
            firecracker_null,
        } = runs?;
        let [ready, entry, boot, exit] = phases;
        let ratio = |a: &Option<Summary>, b: &Option<Summary>| match (a, b) {
            (Some(a), Some(b)) if b.median > 0.0 => Some(a.median / b.median),
            _ => None,
        };
        let mut r = BootReport {
            runs: self.runs,
            mcpvm_kvm_ready: summarize(&ready),
            mcpvm_kernel_entry: summarize(&entry),
            mcpvm_boot_timer: summarize(&boot),
            mcpvm_exit: summarize(&exit),
            mcpvm_spawn_to_init: summarize(&ours.init),
            mcpvm_spawn_to_exit: summarize(&ours.exit),
            qemu_spawn_to_init: summarize(&qemu.init),
            qemu_spawn_to_exit: summarize(&qemu.exit),
            firecracker_spawn_to_init: summarize(&firecracker.init),
            firecracker_spawn_to_exit: summarize(&firecracker.exit),
            mcpvm_null: summarize(&ours_null),
            qemu_null: summarize(&qemu_null),
            firecracker_null: summarize(&firecracker_null),
            mcpvm_setup: summaries(setup),
            mcpvm_exits: summarize(&exits),
            mcpvm_exits_top: {
                let mut top = summaries(exits_by);
                top.sort_by(|a, b| b.1.median.total_cmp(&a.1.median));
                top.truncate(8);
                top
            },
            ..Default::default()
        };
        r.ratio_init = ratio(&r.mcpvm_spawn_to_init, &r.qemu_spawn_to_init);
        r.ratio_exit = ratio(&r.mcpvm_spawn_to_exit, &r.qemu_spawn_to_exit);
        r.ratio_init_firecracker = ratio(&r.mcpvm_spawn_to_init, &r.firecracker_spawn_to_init);
        r.ratio_exit_firecracker = ratio(&r.mcpvm_spawn_to_exit, &r.firecracker_spawn_to_exit);
        r.ratio_null_firecracker = ratio(&r.mcpvm_null, &r.firecracker_null);
        Ok(r)
    }
}

impl BootReport {
    /// A Markdown table for docs/benchmarks.md.
    pub fn markdown(&self) -> String {
        let mut s = format!(
            "| measure ({} runs, ms) | min | median | p90 |\n|---|---:|---:|---:|\n",
            self.runs
        );
        let rows = [
            ("mcpvm: VMM start → KVM ready", &self.mcpvm_kvm_ready),
            ("mcpvm: VMM start → kernel entry", &self.mcpvm_kernel_entry),
            (
                "mcpvm: VMM start → boot-timer write from init",
                &self.mcpvm_boot_timer,
            ),
            ("mcpvm: VMM start → VM stopped", &self.mcpvm_exit),
            (
                "mcpvm: spawn → agent up (console)",
                &self.mcpvm_spawn_to_init,
            ),
            ("mcpvm: spawn → process exit", &self.mcpvm_spawn_to_exit),
            (
                "QEMU microvm: spawn → agent up (console)",
                &self.qemu_spawn_to_init,
            ),
            (
                "QEMU microvm: spawn → process exit",
                &self.qemu_spawn_to_exit,
            ),
            (
                "Firecracker: spawn → agent up (console)",
                &self.firecracker_spawn_to_init,
            ),
            (
                "Firecracker: spawn → process exit",
                &self.firecracker_spawn_to_exit,
            ),
            ("mcpvm alone (null kernel): spawn → exit", &self.mcpvm_null),
            (
                "QEMU microvm alone (null kernel): spawn → exit",
                &self.qemu_null,
            ),
            (
                "Firecracker alone (null kernel): spawn → exit",
                &self.firecracker_null,
            ),
        ];
        for (name, sum) in rows {
            if let Some(x) = sum {
                s += &format!(
                    "| {name} | {:.1} | {:.1} | {:.1} |\n",
                    x.min, x.median, x.p90
                );
            }
        }
        if let Some(n) = self.ratio_null_firecracker {
            s +=
                &format!("\nRatio mcpvm / Firecracker alone (null kernel, medians): **{n:.2}**.\n");
        }
        if !self.mcpvm_setup.is_empty() {
            s += "\n| mcpvm setup step, ended at (ms since VMM start) | min | median | p90 |\n|---|---:|---:|---:|\n";
            for (name, x) in &self.mcpvm_setup {
                s += &format!(
                    "| {name} | {:.1} | {:.1} | {:.1} |\n",
                    x.min, x.median, x.p90
                );
            }
        }
        if let Some(x) = &self.mcpvm_exits {
            s += &format!(
                "\nExits to the VMM per boot: median {:.0} (min {:.0}, max {:.0}); most frequent (median per boot):\n\n| exit | median | max |\n|---|---:|---:|\n",
                x.median, x.min, x.max
            );
            for (name, x) in &self.mcpvm_exits_top {
                s += &format!("| {name} | {:.0} | {:.0} |\n", x.median, x.max);
            }
        }
        if let (Some(i), Some(e)) = (self.ratio_init, self.ratio_exit) {
            s += &format!(
                "\nRatio mcpvm / QEMU microvm (medians): spawn → init **{i:.2}**, spawn → exit **{e:.2}** (below 1: mcpvm is faster).\n"
            );
        }
        if let (Some(i), Some(e)) = (self.ratio_init_firecracker, self.ratio_exit_firecracker) {
            s += &format!(
                "\nRatio mcpvm / Firecracker (medians): spawn → init **{i:.2}**, spawn → exit **{e:.2}** (below 1: mcpvm is faster).\n"
            );
        }
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_timed_command_is_waited_for_and_one_past_its_timeout_is_killed() {
        let mut echo = Command::new("sh");
        echo.args(["-c", "echo mcpvm-agent: up; exit 3"]);
        let t = timed(echo, "sh", Duration::from_secs(20)).unwrap();
        assert!(t.success);
        assert!(t.to_init.is_some());
        assert_eq!(t.stdout, vec!["mcpvm-agent: up".to_string()]);

        let mut sleeper = Command::new("sleep");
        sleeper.arg("30");
        let started = std::time::Instant::now();
        let t = timed(sleeper, "sleep", Duration::from_millis(300)).unwrap();
        assert!(!t.success, "a killed command did not succeed");
        assert!(
            t.to_exit >= 300.0 && started.elapsed() < Duration::from_secs(10),
            "{}",
            t.to_exit
        );
    }

    /// The null kernel is a real guest: our VMM loads it through the PVH
    /// note, and its one instruction of work is the reset that ends the
    /// run. Needs /dev/kvm; any KVM runs it (kvm_pvm included).
    #[test]
    fn the_null_kernel_ends_the_vm_at_its_first_instructions() {
        assert!(
            Path::new("/dev/kvm").exists(),
            "this test needs /dev/kvm (any KVM, kvm_pvm included); this host has none"
        );
        let dir = tempfile::tempdir().unwrap();
        let kernel = dir.path().join("null.elf");
        std::fs::write(&kernel, null_kernel()).unwrap();
        let config = vmm::VmConfig {
            boot: vmm::Boot::Kernel(vmm::KernelBoot {
                kernel,
                mem_mib: 64,
                vcpus: 1,
                ..Default::default()
            }),
            console: None,
            timeout: Some(Duration::from_secs(20)),
            allow_pvm: true,
            start: std::time::Instant::now(),
            vsock: None,
            disks: Vec::new(),
            seccomp: vmm::SeccompMode::Off,
            save_to: None,
        };
        let outcome = vmm::VmHandle::build(config).unwrap().wait().unwrap();
        assert_eq!(outcome.reason, vmm::ExitReason::PowerOff(0));
        let power_writes = outcome
            .exits
            .iter()
            .find(|e| e.kind == vmm::kvm::exits::ExitKind::IoOut && e.addr == 0x441)
            .map(|e| e.count);
        assert_eq!(power_writes, Some(1), "{:?}", outcome.exits);
    }
}

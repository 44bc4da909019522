//! Density: how many restored MCP servers one host holds, and what each
//! costs it. N VMs are restored from one snapshot (`mcpvm run
//! --from-snapshot`), each initialized by its own client and kept in an
//! open session; at each checkpoint (say N = 10, 50, 100, 200) the bench
//! reads every VMM's memory and threads from /proc and asks every VM for
//! one more answer.
//!
//! Per VM: RSS and PSS (smaps_rollup), threads (status), and the VMM's own
//! overhead: RSS less the guest's pages (the snapshot memory mapping's
//! RSS in smaps, which is what the guest touched). The restore time of a
//! VM is its spawn → the answer to its `initialize`, taken while every
//! earlier VM idles in its session.
//!
//! The bench stops early, and says why, when the host's MemAvailable falls
//! below a reserve or a VM does not answer in time.

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{self, Receiver, Sender};
use std::time::{Duration, Instant};

use serde::Serialize;

use crate::stats::{summarize, Summary};

pub const INITIALIZE: &str = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"mcpvm-bench-density","version":"1"}}}"#;
const INITIALIZED: &str = r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#;

pub struct DensityBench {
    /// The `mcpvm` binary (`mcpvm run --from-snapshot`).
    pub mcpvm: PathBuf,
    /// A snapshot of the server taken after `initialize`.
    pub snapshot: PathBuf,
    /// Checkpoints, ascending: VM counts at which to measure.
    pub counts: Vec<usize>,
    /// Stop before starting another VM when MemAvailable is below this.
    pub reserve_mib: u64,
    /// How long one VM may take to answer.
    pub answer_timeout: Duration,
    /// Stop when one restore takes longer than this: the host is
    /// saturated, and later figures would measure the queue, not a VM.
    pub saturated_after: Duration,
}

#[derive(Debug, thiserror::Error)]
pub enum DensityError {
    #[error("Cannot start {what}")]
    Spawn {
        what: String,
        #[source]
        source: std::io::Error,
    },
}

#[derive(Debug, Default, Serialize)]
pub struct DensityReport {
    pub checkpoints: Vec<Checkpoint>,
    /// Why the bench stopped before its last checkpoint, if it did.
    pub stopped: Option<String>,
    /// Guest memory of one VM (the snapshot's memory file), MiB.
    pub guest_mib: f64,
}

#[derive(Debug, Serialize)]
pub struct Checkpoint {
    pub vms: usize,
    /// Spawn → `initialize` answered, for the VMs started since the last
    /// checkpoint, and for the last one started (the Nth).
    pub restore_ms: Option<Summary>,
    pub nth_restore_ms: f64,
    /// Per VMM process, MiB.
    pub rss_mib: Option<Summary>,
    pub pss_mib: Option<Summary>,
    pub guest_touched_mib: Option<Summary>,
    /// RSS less the guest's pages: what the VMM itself maps, its
    /// binary's pages counted whole in every VMM though they are one
    /// copy in the page cache.
    pub vmm_own_mib: Option<Summary>,
    /// PSS less the guest's PSS: the VMM's own share of the host's
    /// memory (its binary's pages divided among the VMMs).
    pub vmm_own_pss_mib: Option<Summary>,
    /// The VMM's private pages outside the guest's: what one more VMM
    /// costs beyond its guest.
    pub vmm_private_mib: Option<Summary>,
    pub threads: Option<Summary>,
    /// Summed over the VMs, MiB.
    pub pss_total_mib: f64,
    pub rss_total_mib: f64,
    /// The host's MemAvailable after the VMs settled, MiB.
    pub host_available_mib: f64,
    /// How many VMs answered `tools/list` at this checkpoint.
    pub answered: usize,
}

/// One restored VM with its client ends.
struct Vm {
    child: Child,
    stdin: ChildStdin,
}

/// A line a VM printed: which VM, the request id it answers, when.
struct Line {
    vm: usize,
    id: Option<i64>,
    at: Instant,
}

fn reader(vm: usize, out: std::process::ChildStdout, tx: Sender<Line>) {
    std::thread::spawn(move || {
        // Whole lines: the bench drives the server it snapshotted itself,
        // whose answers (initialize, tools/list) are a few KiB.
        for line in BufReader::new(out).lines().map_while(Result::ok) {
            let id = serde_json::from_str::<serde_json::Value>(&line)
                .ok()
                .and_then(|v| v["id"].as_i64());
            if tx
                .send(Line {
                    vm,
                    id,
                    at: Instant::now(),
                })
                .is_err()
            {
                break;
            }
        }
    });
}

/// Waits until VM `vm` answers request `id`; other lines are kept in
/// `seen` for later waits.
fn wait_answer(
    rx: &Receiver<Line>,
    seen: &mut HashMap<(usize, i64), Instant>,
    vm: usize,
    id: i64,
    until: Instant,
) -> Option<Instant> {
    loop {
        if let Some(t) = seen.get(&(vm, id)) {
            return Some(*t);
        }
        let left = until.checked_duration_since(Instant::now())?;
        match rx.recv_timeout(left) {
            Ok(l) => {
                if let Some(i) = l.id {
                    seen.entry((l.vm, i)).or_insert(l.at);
                }
            }
            Err(_) => return None,
        }
    }
}

/// `MemAvailable` of /proc/meminfo, MiB.
pub fn mem_available_mib() -> f64 {
    std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|s| meminfo_field(&s, "MemAvailable:"))
        .unwrap_or(0.0)
}

/// A kB field of a /proc file, MiB.
fn meminfo_field(text: &str, key: &str) -> Option<f64> {
    probes::memory::kib_field(text, key).map(|kb| kb as f64 / 1024.0)
}

/// What /proc says of one VMM process, MiB (threads as a count).
#[derive(Debug, Default, PartialEq)]
pub struct ProcMemory {
    pub rss: f64,
    pub pss: f64,
    /// RSS of the mappings of `guest_file` (the guest's pages).
    pub guest: f64,
    /// PSS of those mappings: the guest's pages, each shared page
    /// divided among the VMs that map it.
    pub guest_pss: f64,
    /// Private pages outside them (heap, stacks, relocated data): the
    /// VMM's memory that no other VMM shares.
    pub own_private: f64,
    pub threads: f64,
}

/// Reads RSS, PSS and threads of `pid`, and the RSS of its mappings of
/// the file named `guest_file`.
pub fn proc_memory(pid: u32, guest_file: &Path) -> Option<ProcMemory> {
    let rollup = std::fs::read_to_string(format!("/proc/{pid}/smaps_rollup")).ok()?;
    let smaps = std::fs::read_to_string(format!("/proc/{pid}/smaps")).ok()?;
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    Some(ProcMemory {
        rss: meminfo_field(&rollup, "Rss:")?,
        pss: meminfo_field(&rollup, "Pss:")?,
        guest: mapping_sum(&smaps, guest_file, "Rss:", true),
        guest_pss: mapping_sum(&smaps, guest_file, "Pss:", true),
        own_private: mapping_sum(&smaps, guest_file, "Private_Clean:", false)
            + mapping_sum(&smaps, guest_file, "Private_Dirty:", false),
        threads: status
            .lines()
            .find_map(|l| l.strip_prefix("Threads:"))
            .and_then(|n| n.trim().parse().ok())?,
    })
}

/// Sums `field` (`Rss:`, `Pss:`, ...) over the smaps entries whose
/// mapping is `file` (`of_file`) or over all the others (`!of_file`), MiB.
fn mapping_sum(smaps: &str, file: &Path, field: &str, of_file: bool) -> f64 {
    let file = file.to_string_lossy();
    let mut inside = false;
    let mut kb = 0.0;
    for line in smaps.lines() {
        let first = line.split_whitespace().next().unwrap_or("");
        // A mapping header starts with "start-end" in hex.
        if first.contains('-') && first.chars().all(|c| c.is_ascii_hexdigit() || c == '-') {
            inside = line.trim_end().ends_with(&*file) == of_file;
        } else if inside {
            if let Some(v) = line.strip_prefix(field) {
                kb += v
                    .split_whitespace()
                    .next()
                    .and_then(|n| n.parse::<f64>().ok())
                    .unwrap_or(0.0);
            }
        }
    }
    kb / 1024.0
}

impl DensityBench {
    fn spawn(&self, i: usize, tx: &Sender<Line>) -> Result<Vm, DensityError> {
        let restore = mcpvm::commands::run::RunRequest {
            from_snapshot: Some(self.snapshot.clone()),
            ..Default::default()
        };
        let mut child = Command::new(&self.mcpvm)
            .arg("run")
            .args(restore.to_args())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|source| DensityError::Spawn {
                what: format!("restored VM {i}"),
                source,
            })?;
        let stdin = child.stdin.take().expect("piped");
        reader(i, child.stdout.take().expect("piped"), tx.clone());
        Ok(Vm { child, stdin })
    }

    pub fn run(&self, mut progress: impl FnMut(&str)) -> Result<DensityReport, DensityError> {
        let guest_file = std::fs::canonicalize(self.snapshot.join("memory"))
            .unwrap_or_else(|_| self.snapshot.join("memory"));
        let mut report = DensityReport {
            guest_mib: std::fs::metadata(&guest_file)
                .map(|m| m.len() as f64 / (1 << 20) as f64)
                .unwrap_or(0.0),
            ..Default::default()
        };
        let (tx, rx) = mpsc::channel();
        let mut seen = HashMap::new();
        let mut vms: Vec<Vm> = Vec::new();
        let mut restore = Vec::new();
        let result = self.grow(
            &tx,
            &rx,
            &mut seen,
            &mut vms,
            &mut restore,
            &guest_file,
            &mut report,
            &mut progress,
        );
        for vm in &mut vms {
            let _ = vm.child.kill();
        }
        for vm in &mut vms {
            let _ = vm.child.wait();
        }
        result.map(|_| report)
    }

    #[allow(clippy::too_many_arguments)]
    fn grow(
        &self,
        tx: &Sender<Line>,
        rx: &Receiver<Line>,
        seen: &mut HashMap<(usize, i64), Instant>,
        vms: &mut Vec<Vm>,
        restore: &mut Vec<f64>,
        guest_file: &Path,
        report: &mut DensityReport,
        progress: &mut impl FnMut(&str),
    ) -> Result<(), DensityError> {
        let max = self.counts.iter().copied().max().unwrap_or(0);
        for n in 1..=max {
            let avail = mem_available_mib();
            if avail < self.reserve_mib as f64 {
                report.stopped = Some(format!(
                    "before VM {n}: the host has {avail:.0} MiB available, under the {} MiB reserve",
                    self.reserve_mib
                ));
                return Ok(());
            }
            let i = vms.len();
            let spawned = Instant::now();
            vms.push(self.spawn(i, tx)?);
            let vm = vms.last_mut().expect("just pushed");
            let wrote = writeln!(vm.stdin, "{INITIALIZE}").is_ok();
            let answered =
                wrote && wait_answer(rx, seen, i, 1, spawned + self.answer_timeout).is_some();
            if !answered {
                report.stopped = Some(format!(
                    "VM {n} did not answer initialize within {} s",
                    self.answer_timeout.as_secs()
                ));
                return Ok(());
            }
            let _ = writeln!(vm.stdin, "{INITIALIZED}");
            let took = seen[&(i, 1)].duration_since(spawned);
            let t = took.as_secs_f64() * 1e3;
            restore.push(t);
            if took > self.saturated_after {
                report.stopped = Some(format!(
                    "at VM {n}: its restore took {:.1} s, over the {} s that says the host is saturated",
                    took.as_secs_f64(),
                    self.saturated_after.as_secs()
                ));
                return Ok(());
            }
            if n % 10 == 0 {
                progress(&format!("{n} VMs restored, the last in {t:.0} ms"));
            }
            if self.counts.contains(&n) {
                let cp = self.checkpoint(n, rx, seen, vms, restore, guest_file, progress);
                // Each row as it is measured: a run cut short keeps them.
                progress(&format!(
                    "checkpoint {}",
                    serde_json::to_string(&cp).unwrap_or_default()
                ));
                report.checkpoints.push(cp);
                restore.clear();
            }
        }
        Ok(())
    }

    /// Lets the VMs settle, reads /proc for each, and asks each for
    /// `tools/list` (request id `1000 + n`).
    #[allow(clippy::too_many_arguments)]
    fn checkpoint(
        &self,
        n: usize,
        rx: &Receiver<Line>,
        seen: &mut HashMap<(usize, i64), Instant>,
        vms: &mut [Vm],
        restore: &[f64],
        guest_file: &Path,
        progress: &mut impl FnMut(&str),
    ) -> Checkpoint {
        std::thread::sleep(Duration::from_secs(3));
        let mem: Vec<ProcMemory> = vms
            .iter()
            .filter_map(|vm| proc_memory(vm.child.id(), guest_file))
            .collect();
        let host_available_mib = mem_available_mib();
        let id = 1000 + n as i64;
        let request = format!(r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/list"}}"#);
        for vm in vms.iter_mut() {
            let _ = writeln!(vm.stdin, "{request}");
        }
        let until = Instant::now() + self.answer_timeout;
        let answered = (0..vms.len())
            .filter(|&i| wait_answer(rx, seen, i, id, until).is_some())
            .count();
        progress(&format!(
            "checkpoint {n}: {answered} of {n} answered tools/list"
        ));
        let col = |f: fn(&ProcMemory) -> f64| summarize(&mem.iter().map(f).collect::<Vec<_>>());
        Checkpoint {
            vms: n,
            restore_ms: summarize(restore),
            nth_restore_ms: restore.last().copied().unwrap_or(0.0),
            rss_mib: col(|m| m.rss),
            pss_mib: col(|m| m.pss),
            guest_touched_mib: col(|m| m.guest),
            vmm_own_mib: col(|m| m.rss - m.guest),
            vmm_own_pss_mib: col(|m| m.pss - m.guest_pss),
            vmm_private_mib: col(|m| m.own_private),
            threads: col(|m| m.threads),
            pss_total_mib: mem.iter().map(|m| m.pss).sum(),
            rss_total_mib: mem.iter().map(|m| m.rss).sum(),
            host_available_mib,
            answered,
        }
    }
}

impl DensityReport {
    pub fn markdown(&self) -> String {
        let med = |s: &Option<Summary>| s.map(|s| format!("{:.1}", s.median)).unwrap_or("–".into());
        let mut s = format!(
            "Guest memory per VM: {:.0} MiB (one snapshot, mapped copy-on-write by every VM).\n\n\
             | VMs | restore (median of the new, ms) | the Nth (ms) | RSS / VM (MiB) | PSS / VM | guest pages / VM | VMM own / VM (RSS) | VMM own / VM (PSS) | VMM private / VM | threads / VM | PSS all (MiB) | host available (MiB) | answered |\n\
             |---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n",
            self.guest_mib
        );
        for c in &self.checkpoints {
            s += &format!(
                "| {} | {} | {:.0} | {} | {} | {} | {} | {} | {} | {} | {:.0} | {:.0} | {} of {} |\n",
                c.vms,
                med(&c.restore_ms),
                c.nth_restore_ms,
                med(&c.rss_mib),
                med(&c.pss_mib),
                med(&c.guest_touched_mib),
                med(&c.vmm_own_mib),
                med(&c.vmm_own_pss_mib),
                med(&c.vmm_private_mib),
                med(&c.threads),
                c.pss_total_mib,
                c.host_available_mib,
                c.answered,
                c.vms
            );
        }
        if let Some(why) = &self.stopped {
            s += &format!("\nStopped {why}.\n");
        }
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SMAPS: &str = "\
55d0c0000000-55d0c0100000 r-xp 00000000 fd:01 123  /usr/bin/mcpvm
Rss:                 900 kB
Pss:                 100 kB
7f0000000000-7f0010000000 rw-p 00000000 fd:01 456  /run/snap/memory
Rss:               20480 kB
Pss:                2048 kB
7f0010000000-7f0020000000 rw-p 10000000 fd:01 456  /run/snap/memory
Rss:                1024 kB
7f0020000000-7f0020100000 rw-p 00000000 00:00 0 
Rss:                4096 kB
Private_Dirty:      4096 kB
";

    #[test]
    fn the_guest_pages_are_the_rss_of_the_snapshot_mappings() {
        let snap = Path::new("/run/snap/memory");
        assert_eq!(mapping_sum(SMAPS, snap, "Rss:", true), 21.0);
        assert_eq!(
            mapping_sum(SMAPS, Path::new("/elsewhere/memory"), "Rss:", true),
            0.0
        );
        assert_eq!(mapping_sum(SMAPS, snap, "Pss:", true), 2.0);
        // The binary and the anonymous mapping, not the guest's.
        assert_eq!(mapping_sum(SMAPS, snap, "Rss:", false), 4996.0 / 1024.0);
        assert_eq!(mapping_sum(SMAPS, snap, "Private_Dirty:", false), 4.0);
    }

    #[test]
    fn meminfo_fields_are_read_in_mib() {
        let text = "MemTotal:        4028512 kB\nMemAvailable:    2097152 kB\n";
        assert_eq!(meminfo_field(text, "MemAvailable:"), Some(2048.0));
        assert_eq!(meminfo_field(text, "Missing:"), None);
    }

    #[test]
    fn this_process_has_memory_and_threads_in_proc() {
        let m = proc_memory(std::process::id(), Path::new("/nonexistent")).unwrap();
        assert!(m.rss > 0.0 && m.pss > 0.0 && m.threads >= 1.0, "{m:?}");
        assert_eq!(m.guest, 0.0);
    }
}

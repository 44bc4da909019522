//! Relay: what the stdio path through a microVM costs once it is up.
//! A `cat` inside the VM (`mcpvm run -- /bin/cat`) against `cat` as a bare
//! process, and, where a Firecracker binary is given, the same VM under
//! Firecracker behind the same host side (`mcpvm bench peer-run`):
//! round trips of 1 KiB lines (like small JSON-RPC messages), then bulk
//! throughput, with a concurrent writer and reader. Rounds alternate the
//! peers so that a slow spell of the machine falls on each of them.

use std::io::{BufRead, BufReader, Read, Write};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::Instant;

use serde::Serialize;

use crate::stats::{summarize, Summary};

#[derive(Debug, thiserror::Error)]
pub enum RelayError {
    #[error("Cannot start {0}")]
    Spawn(String, #[source] std::io::Error),
    #[error("{0}: the echo did not come back ({1})")]
    Broken(String, String),
}

/// One run of one peer.
#[derive(Debug)]
pub struct RelayRun {
    pub round_trip_us: Vec<f64>,
    pub throughput_mib_s: f64,
    pub exits_to_vmm: Option<u64>,
}

/// One peer over every round.
#[derive(Debug, Serialize)]
pub struct RelayResult {
    /// Every round's round trips together.
    pub round_trip_us: Option<Summary>,
    /// The median of the rounds' bulk throughputs.
    pub throughput_mib_s: f64,
    /// Each round's, in order.
    pub throughput_rounds: Vec<f64>,
    /// For our VM: every exit that reached the VMM in a whole run, boot
    /// included (`mcpvm run --timings`' `exits_to_vmm`), the median over
    /// the rounds. Each interrupt the device raises costs the guest's
    /// driver two of them (its status read and acknowledgement), so this
    /// shows notification suppression.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub exits_to_vmm: Option<u64>,
}

impl RelayResult {
    pub fn of(runs: &[RelayRun]) -> RelayResult {
        let rtts: Vec<f64> = runs.iter().flat_map(|r| r.round_trip_us.clone()).collect();
        let throughput_rounds: Vec<f64> = runs.iter().map(|r| r.throughput_mib_s).collect();
        let mut exits: Vec<u64> = runs.iter().filter_map(|r| r.exits_to_vmm).collect();
        exits.sort_unstable();
        RelayResult {
            round_trip_us: summarize(&rtts),
            throughput_mib_s: summarize(&throughput_rounds).map_or(0.0, |s| s.median),
            throughput_rounds,
            exits_to_vmm: exits.get(exits.len() / 2).copied(),
        }
    }
}

#[derive(Debug, Serialize)]
pub struct RelayReport {
    pub round_trips: usize,
    pub bulk_mib: usize,
    pub rounds: usize,
    pub vm: RelayResult,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub firecracker: Option<RelayResult>,
    pub bare: RelayResult,
    /// Ours / bare cat's bulk throughput (medians).
    pub bulk_ratio_bare: f64,
    /// Ours / Firecracker's bulk throughput (medians): above 1 is faster.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bulk_ratio_firecracker: Option<f64>,
    /// Ours / Firecracker's median round trip: below 1 is faster.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub round_trip_ratio_firecracker: Option<f64>,
}

/// What a peer is run as.
pub struct Peer {
    pub cmd: Vec<String>,
    /// Where `cmd` writes `mcpvm run --timings`, for its exit count.
    pub timings: Option<PathBuf>,
}

/// A peer's process, killed and reaped however the measurement ends: a
/// VM left running would outlive the bench.
struct Reaped(std::process::Child);

impl Drop for Reaped {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Round trips and bulk through `peer`, whose command must echo its stdin.
pub fn measure(peer: &Peer, round_trips: usize, bulk_mib: usize) -> Result<RelayRun, RelayError> {
    let cmd = &peer.cmd;
    let name = cmd.join(" ");
    let spawn = || {
        Command::new(&cmd[0])
            .args(&cmd[1..])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| RelayError::Spawn(name.clone(), e))
    };
    let broken = |why: &str| RelayError::Broken(name.clone(), why.to_string());

    let mut child = Reaped(spawn()?);
    let mut stdin = child.0.stdin.take().expect("piped");
    let mut out = BufReader::new(child.0.stdout.take().expect("piped"));
    let mut line = "x".repeat(1023);
    line.push('\n');
    let mut back = String::new();
    // The first exchange waits for the VM to boot: not a round trip.
    let mut rtts = Vec::with_capacity(round_trips);
    for i in 0..=round_trips {
        let t = Instant::now();
        stdin
            .write_all(line.as_bytes())
            .map_err(|e| broken(&e.to_string()))?;
        stdin.flush().map_err(|e| broken(&e.to_string()))?;
        back.clear();
        out.read_line(&mut back)
            .map_err(|e| broken(&e.to_string()))?;
        if back != line {
            return Err(broken("wrong bytes"));
        }
        if i > 0 {
            rtts.push(t.elapsed().as_secs_f64() * 1e6);
        }
    }
    let bytes = bulk_mib << 20;
    let t = Instant::now();
    // The writer hands stdin back rather than closing it: the bulk is
    // measured while the VM is running, not across its shutdown (which
    // Firecracker ends without delivering what its vsock still holds).
    let writer = std::thread::spawn(move || {
        let chunk = vec![b'y'; 64 * 1024];
        for _ in 0..bytes / chunk.len() {
            if stdin.write_all(&chunk).is_err() {
                break;
            }
        }
        stdin
    });
    let mut got = 0usize;
    let mut buf = vec![0u8; 64 * 1024];
    while got < bytes {
        match out.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => got += n,
        }
    }
    let secs = t.elapsed().as_secs_f64();
    drop(writer.join());
    let _ = child.0.wait();
    if got != bytes {
        return Err(broken(&format!("{got} of {bytes} bulk bytes")));
    }
    let exits_to_vmm = peer
        .timings
        .as_ref()
        .and_then(|p| std::fs::read(p).ok())
        .and_then(|b| serde_json::from_slice::<serde_json::Value>(&b).ok())
        .and_then(|v| v["exits_to_vmm"].as_u64());
    Ok(RelayRun {
        round_trip_us: rtts,
        throughput_mib_s: bulk_mib as f64 / secs,
        exits_to_vmm,
    })
}

impl RelayReport {
    pub fn new(
        round_trips: usize,
        bulk_mib: usize,
        rounds: usize,
        vm: RelayResult,
        firecracker: Option<RelayResult>,
        bare: RelayResult,
    ) -> RelayReport {
        let median_rtt = |r: &RelayResult| r.round_trip_us.map(|s| s.median);
        let round_trip_ratio_firecracker = firecracker
            .as_ref()
            .and_then(|f| Some(median_rtt(&vm)? / median_rtt(f)?));
        RelayReport {
            round_trips,
            bulk_mib,
            rounds,
            bulk_ratio_bare: vm.throughput_mib_s / bare.throughput_mib_s,
            bulk_ratio_firecracker: firecracker
                .as_ref()
                .map(|f| vm.throughput_mib_s / f.throughput_mib_s),
            round_trip_ratio_firecracker,
            vm,
            firecracker,
            bare,
        }
    }

    fn peers(&self) -> Vec<(&'static str, &RelayResult)> {
        let mut p = vec![("VM (mcpvm run -- cat)", &self.vm)];
        if let Some(f) = &self.firecracker {
            p.push(("Firecracker, same VM and host side", f));
        }
        p.push(("bare cat", &self.bare));
        p
    }

    pub fn markdown(&self) -> String {
        let mut s = format!(
            "| {} round(s) | 1 KiB round trip: min (µs) | median | p90 | bulk {} MiB (MiB/s, median) | each round |\n|---|---:|---:|---:|---:|---|\n",
            self.rounds, self.bulk_mib
        );
        for (name, r) in self.peers() {
            let (min, median, p90) =
                r.round_trip_us
                    .map_or(("-".into(), "-".into(), "-".into()), |x| {
                        (
                            format!("{:.0}", x.min),
                            format!("{:.0}", x.median),
                            format!("{:.0}", x.p90),
                        )
                    });
            let each: Vec<String> = r
                .throughput_rounds
                .iter()
                .map(|t| format!("{t:.1}"))
                .collect();
            s += &format!(
                "| {name} | {min} | {median} | {p90} | {:.1} | {} |\n",
                r.throughput_mib_s,
                each.join(", ")
            );
        }
        s += &format!("\nBulk, ours / bare cat: {:.2}.", self.bulk_ratio_bare);
        if let (Some(b), Some(t)) = (
            self.bulk_ratio_firecracker,
            self.round_trip_ratio_firecracker,
        ) {
            s += &format!(
                " Ours / Firecracker: bulk throughput {b:.2} (above 1: faster), round trip {t:.2} (below 1: faster)."
            );
        }
        s.push('\n');
        if let Some(n) = self.vm.exits_to_vmm {
            s += &format!("Exits to our VMM over the VM's whole run (median): {n}.\n");
        }
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(rtt: f64, mib_s: f64, exits: Option<u64>) -> RelayRun {
        RelayRun {
            round_trip_us: vec![rtt, rtt * 2.0],
            throughput_mib_s: mib_s,
            exits_to_vmm: exits,
        }
    }

    #[test]
    fn rounds_pool_round_trips_and_take_the_median_throughput() {
        let r = RelayResult::of(&[
            run(100.0, 30.0, Some(9)),
            run(300.0, 10.0, Some(3)),
            run(200.0, 20.0, None),
        ]);
        let rtt = r.round_trip_us.unwrap();
        assert_eq!((rtt.runs, rtt.min, rtt.max), (6, 100.0, 600.0));
        assert_eq!(r.throughput_mib_s, 20.0);
        assert_eq!(r.throughput_rounds, vec![30.0, 10.0, 20.0]);
        assert_eq!(r.exits_to_vmm, Some(9));
    }

    #[test]
    fn ratios_are_ours_over_each_peer() {
        let vm = RelayResult::of(&[run(1000.0, 40.0, None)]);
        let fc = RelayResult::of(&[run(4000.0, 20.0, None)]);
        let bare = RelayResult::of(&[run(50.0, 200.0, None)]);
        let r = RelayReport::new(2, 64, 1, vm, Some(fc), bare);
        assert_eq!(r.bulk_ratio_bare, 0.2);
        assert_eq!(r.bulk_ratio_firecracker, Some(2.0));
        assert_eq!(r.round_trip_ratio_firecracker, Some(0.25));
        let md = r.markdown();
        assert!(
            md.contains(
                "| Firecracker, same VM and host side | 4000 | 6000 | 8000 | 20.0 | 20.0 |"
            ),
            "{md}"
        );
        assert!(md.contains("bulk throughput 2.00"), "{md}");
        let without = RelayReport::new(
            2,
            64,
            1,
            RelayResult::of(&[run(1.0, 1.0, None)]),
            None,
            RelayResult::of(&[run(1.0, 2.0, None)]),
        );
        assert!(
            without.bulk_ratio_firecracker.is_none() && !without.markdown().contains("Firecracker")
        );
    }
}

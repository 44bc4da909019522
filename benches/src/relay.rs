//! Relay: what the stdio path through a microVM costs once it is up.
//! A `cat` inside the VM (`mcpvm run -- /bin/cat`) against `cat` as a bare
//! process: round trips of 1 KiB lines (like small JSON-RPC messages), then
//! bulk throughput, with a concurrent writer and reader.

use std::io::{BufRead, BufReader, Read, Write};
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

#[derive(Debug, Serialize)]
pub struct RelayResult {
    pub round_trip_us: Option<Summary>,
    pub throughput_mib_s: f64,
    /// For the VM: every exit that reached the VMM in the whole run, boot
    /// included (`mcpvm run --timings`' `exits_to_vmm`). Each interrupt
    /// the device raises costs the guest's driver two of them (its status
    /// read and acknowledgement), so this shows notification suppression.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub exits_to_vmm: Option<u64>,
}

#[derive(Debug, Serialize)]
pub struct RelayReport {
    pub round_trips: usize,
    pub bulk_mib: usize,
    pub vm: RelayResult,
    pub bare: RelayResult,
}

/// Round trips and bulk through `cmd`, which must echo its stdin; where
/// `cmd` writes `mcpvm run --timings` to `timings`, its exit count is read.
pub fn measure(
    cmd: &[String],
    timings: Option<&std::path::Path>,
    round_trips: usize,
    bulk_mib: usize,
) -> Result<RelayResult, RelayError> {
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

    let mut child = spawn()?;
    let mut stdin = child.stdin.take().expect("piped");
    let mut out = BufReader::new(child.stdout.take().expect("piped"));
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
    let writer = std::thread::spawn(move || {
        let chunk = vec![b'y'; 64 * 1024];
        for _ in 0..bytes / chunk.len() {
            if stdin.write_all(&chunk).is_err() {
                break;
            }
        }
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
    let _ = writer.join();
    let _ = child.wait();
    if got != bytes {
        return Err(broken(&format!("{got} of {bytes} bulk bytes")));
    }
    let exits_to_vmm = timings
        .and_then(|p| std::fs::read(p).ok())
        .and_then(|b| serde_json::from_slice::<serde_json::Value>(&b).ok())
        .and_then(|v| v["exits_to_vmm"].as_u64());
    Ok(RelayResult {
        round_trip_us: summarize(&rtts),
        throughput_mib_s: bulk_mib as f64 / secs,
        exits_to_vmm,
    })
}

impl RelayReport {
    pub fn markdown(&self) -> String {
        let mut s = format!(
            "| 1 KiB round trip ({} runs, µs) | min | median | p90 |\n|---|---:|---:|---:|\n",
            self.round_trips
        );
        for (name, r) in [
            ("VM (mcpvm run -- cat)", &self.vm),
            ("bare cat", &self.bare),
        ] {
            if let Some(x) = &r.round_trip_us {
                s += &format!(
                    "| {name} | {:.0} | {:.0} | {:.0} |\n",
                    x.min, x.median, x.p90
                );
            }
        }
        s += &format!(
            "\nBulk {} MiB through cat: VM {:.1} MiB/s, bare {:.1} MiB/s (ratio {:.2}).\n",
            self.bulk_mib,
            self.vm.throughput_mib_s,
            self.bare.throughput_mib_s,
            self.vm.throughput_mib_s / self.bare.throughput_mib_s
        );
        if let Some(n) = self.vm.exits_to_vmm {
            s += &format!("Exits to the VMM over the VM's whole run: {n}.\n");
        }
        s
    }
}

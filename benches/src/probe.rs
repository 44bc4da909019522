//! Probe overhead and bare-process baselines: for each server, alternating
//! runs of
//! - a minimal raw client (spawn, handshake, `tools/list`, close: plain
//!   pipes and JSON lines, nothing else): the peer;
//! - the probe doing the same (rmcp client, recording wire);
//! - the probe's full default run (discovery, every safe tool, ping,
//!   cancel), wall time.
//!
//! The first two give the probe's own cost on the first-response path; the
//! raw client's numbers are the bare-process baseline that microVM runs are
//! compared with.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use probes::{probe_process, LifecycleChoice, ProbeOptions, ToolArgs};
use serde::Serialize;
use serde_json::json;

use crate::stats::{summarize, Summary};

pub struct BenchServer {
    pub label: String,
    pub command: Vec<String>,
    /// Arguments (or "dangerous") for the full run, where generated ones
    /// would make a tool slow or reach for the network.
    pub calls: BTreeMap<String, ToolArgs>,
}

pub struct ProbeBench {
    pub servers: Vec<BenchServer>,
    pub runs: usize,
}

#[derive(Debug, thiserror::Error)]
pub enum ProbeBenchError {
    #[error("Probe failed")]
    Probe(#[from] probes::ProbeError),
    #[error("{server}: {what}")]
    Server { server: String, what: String },
}

#[derive(Debug, Serialize)]
pub struct ServerReport {
    pub server: String,
    pub lifecycle: String,
    pub raw_handshake: Option<Summary>,
    pub raw_tools_list: Option<Summary>,
    pub probe_handshake: Option<Summary>,
    pub probe_tools_list: Option<Summary>,
    pub full_probe_wall: Option<Summary>,
    pub steps_in_full_probe: usize,
}

#[derive(Debug, Serialize)]
pub struct ProbeReport {
    pub runs: usize,
    pub servers: Vec<ServerReport>,
}

const WAIT: Duration = Duration::from_secs(120);

/// Spawn → handshake answer → tools/list answer, ms, with plain pipes.
fn raw_client(command: &[String], stateless: bool) -> Result<(f64, f64), String> {
    let t0 = Instant::now();
    let mut child = Command::new(&command[0])
        .args(&command[1..])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .map_err(|e| e.to_string())?;
    let mut stdin = child.stdin.take().ok_or("no stdin")?;
    let stdout = child.stdout.take().ok_or("no stdout")?;
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    let meta = json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {},
        "io.modelcontextprotocol/clientInfo": {"name": "raw", "version": "1"},
    });
    let mut send = |v: serde_json::Value| writeln!(stdin, "{v}").and_then(|_| stdin.flush());
    let wait_for = |id: u32| -> Result<f64, String> {
        loop {
            let line = rx
                .recv_timeout(WAIT)
                .map_err(|_| format!("no answer to request {id}"))?;
            let v: serde_json::Value = serde_json::from_str(&line).unwrap_or_default();
            if v["id"] == id {
                if v.get("error").is_some() {
                    return Err(format!("error answer: {line}"));
                }
                return Ok(t0.elapsed().as_secs_f64() * 1e3);
            }
        }
    };
    let result = (|| {
        if stateless {
            send(json!({"jsonrpc": "2.0", "id": 1, "method": "server/discover", "params": {"_meta": meta}}))
                .map_err(|e| e.to_string())?;
            let hs = wait_for(1)?;
            send(json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": {"_meta": meta}}))
                .map_err(|e| e.to_string())?;
            Ok((hs, wait_for(2)?))
        } else {
            send(
                json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
                "protocolVersion": "2025-11-25", "capabilities": {},
                "clientInfo": {"name": "raw", "version": "1"}}}),
            )
            .map_err(|e| e.to_string())?;
            let hs = wait_for(1)?;
            send(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}))
                .map_err(|e| e.to_string())?;
            send(json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}))
                .map_err(|e| e.to_string())?;
            Ok((hs, wait_for(2)?))
        }
    })();
    let _ = child.kill();
    let _ = child.wait();
    result
}

impl ProbeBench {
    pub fn run(&self, mut progress: impl FnMut(&str)) -> Result<ProbeReport, ProbeBenchError> {
        let mut servers = Vec::new();
        for BenchServer {
            label,
            command: cmd,
            calls,
        } in &self.servers
        {
            let full_opts = ProbeOptions {
                calls: calls.clone(),
                ..ProbeOptions::default()
            };
            let fail = |what: String| ProbeBenchError::Server {
                server: label.clone(),
                what,
            };
            // A first, unmeasured run finds the lifecycle (and warms caches).
            progress(&format!("{label}: warm-up"));
            let warm = probe_process(cmd, &full_opts)?;
            let lifecycle = warm.lifecycle.ok_or_else(|| fail(warm.summary()))?;
            let stateless = lifecycle == probes::report::result::Lifecycle::Stateless;
            let first = ProbeOptions {
                lifecycle: if stateless {
                    LifecycleChoice::Stateless
                } else {
                    LifecycleChoice::Initialize
                },
                only_given: true,
                ..ProbeOptions::default()
            };
            let (mut rh, mut rl, mut ph, mut pl, mut full) =
                (vec![], vec![], vec![], vec![], vec![]);
            let mut steps = 0;
            for run in 1..=self.runs {
                progress(&format!("{label}: run {run}/{}", self.runs));
                let (h, l) = raw_client(cmd, stateless).map_err(fail)?;
                rh.push(h);
                rl.push(l);
                let r = probe_process(cmd, &first)?;
                match (r.timings.handshake_ms, r.timings.tools_list_ms) {
                    (Some(h), Some(l)) => {
                        ph.push(h);
                        pl.push(l);
                    }
                    _ => return Err(fail(r.summary())),
                }
                let t0 = Instant::now();
                let r = probe_process(cmd, &full_opts)?;
                full.push(t0.elapsed().as_secs_f64() * 1e3);
                steps = r.steps.len();
            }
            servers.push(ServerReport {
                server: label.clone(),
                lifecycle: if stateless { "stateless" } else { "initialize" }.into(),
                raw_handshake: summarize(&rh),
                raw_tools_list: summarize(&rl),
                probe_handshake: summarize(&ph),
                probe_tools_list: summarize(&pl),
                full_probe_wall: summarize(&full),
                steps_in_full_probe: steps,
            });
        }
        Ok(ProbeReport {
            runs: self.runs,
            servers,
        })
    }
}

impl ProbeReport {
    pub fn markdown(&self) -> String {
        let med = |s: &Option<Summary>| s.map(|s| format!("{:.1}", s.median)).unwrap_or("-".into());
        let ratio = |a: &Option<Summary>, b: &Option<Summary>| match (a, b) {
            (Some(a), Some(b)) if b.median > 0.0 => format!("{:.2}", a.median / b.median),
            _ => "-".into(),
        };
        let mut s = format!(
            "Medians over {} alternating runs, ms since spawn.\n\n\
             | server | lifecycle | raw handshake | raw tools/list | probe handshake | probe tools/list | probe/raw (tools/list) | full probe wall (steps) |\n\
             |---|---|---|---|---|---|---|---|\n",
            self.runs
        );
        for r in &self.servers {
            s += &format!(
                "| {} | {} | {} | {} | {} | {} | {} | {} ({}) |\n",
                r.server,
                r.lifecycle,
                med(&r.raw_handshake),
                med(&r.raw_tools_list),
                med(&r.probe_handshake),
                med(&r.probe_tools_list),
                ratio(&r.probe_tools_list, &r.raw_tools_list),
                med(&r.full_probe_wall),
                r.steps_in_full_probe
            );
        }
        s
    }
}

//! First response: from starting a server to its `initialize` and
//! `tools/list` answers, for the server inside a microVM (`mcpvm run`)
//! and for the same server as a bare host process, alternating runs.
//! The VM runs are broken into phases from `mcpvm run --timings`. With
//! `warm`, a third peer: the same VM restored from a snapshot taken once
//! before the runs (`mcpvm run --from-snapshot`).

use std::path::PathBuf;
use std::time::Duration;

use mcpvm::commands::run::RunRequest;
use probes::{probe_process, LifecycleChoice, ProbeOptions, ToolArgs};
use serde::Serialize;

use crate::stats::{summarize, Summary};

pub struct FirstResponseBench {
    pub mcpvm: PathBuf,
    /// `mcpvm-tools`, which runs the Firecracker peer.
    pub tools: PathBuf,
    /// The VM runs' `mcpvm run` options: `-- /bin/mcp-fixture`, or
    /// `--server memory --images DIR` (each run adds `--timings FILE`).
    pub vm: RunRequest,
    /// The same server on the host.
    pub host_command: Vec<String>,
    pub runs: usize,
    /// Also measure restores from a snapshot of the VM.
    pub warm: bool,
    /// A tool to call after `tools/list` in every run, with its
    /// arguments: spawn → its answer is measured too.
    pub call: Option<(String, serde_json::Map<String, serde_json::Value>)>,
    /// Also run the same VM under this Firecracker binary, behind the same
    /// host side (`mcpvm bench peer-run`): a benchmark peer only.
    pub firecracker: Option<PathBuf>,
    /// Another build's `mcpvm` (an older checkout's), run the same way in
    /// every run, before ours in even runs and after it in odd ones: a
    /// change's before and after in one session.
    pub other: Option<PathBuf>,
}

#[derive(Debug, thiserror::Error)]
pub enum FirstResponseError {
    #[error("Probe failed")]
    Probe(#[from] probes::ProbeError),
    #[error("{what} run {run} did not answer: {detail}")]
    Failed {
        what: &'static str,
        run: usize,
        detail: String,
    },
    #[error("Cannot create a temporary file")]
    Temp(#[source] std::io::Error),
    #[error("Cannot take the snapshot for the warm runs ({0})")]
    Snapshot(String),
}

/// Phases, ms since the VMM process started.
pub const PHASES: [&str; 7] = [
    "kvm_ready",
    "kernel_entry",
    "boot_timer",
    "agent_start",
    "spawned",
    "first_stdout_byte",
    "exit",
];

#[derive(Debug, Default, Serialize)]
pub struct FirstResponseReport {
    pub runs: usize,
    pub vm_initialize: Option<Summary>,
    pub vm_tools_list: Option<Summary>,
    pub bare_initialize: Option<Summary>,
    pub bare_tools_list: Option<Summary>,
    pub vm_phases: Vec<(String, Option<Summary>)>,
    /// Median VM minus median bare, ms.
    pub vm_overhead_initialize: Option<f64>,
    pub warm_initialize: Option<Summary>,
    pub warm_tools_list: Option<Summary>,
    pub warm_phases: Vec<(String, Option<Summary>)>,
    pub firecracker_initialize: Option<Summary>,
    pub firecracker_tools_list: Option<Summary>,
    /// The tool called after `tools/list`, if any, and spawn → its answer.
    pub call: Option<String>,
    pub vm_call: Option<Summary>,
    pub bare_call: Option<Summary>,
    pub firecracker_call: Option<Summary>,
    pub warm_call: Option<Summary>,
    /// Median ratio, ours / Firecracker, spawn → handshake answer.
    pub ratio_initialize_firecracker: Option<f64>,
    /// What each peer's processes held once the last answer was in
    /// (PSS of the process tree, MiB: `ProbeResult::memory_pss_kib`).
    pub vm_memory_mib: Option<Summary>,
    pub bare_memory_mib: Option<Summary>,
    pub firecracker_memory_mib: Option<Summary>,
    pub warm_memory_mib: Option<Summary>,
    /// The other build's runs (`other`), its phases, and ours / its,
    /// spawn → handshake answer (medians).
    pub other_initialize: Option<Summary>,
    pub other_tools_list: Option<Summary>,
    pub other_phases: Vec<(String, Option<Summary>)>,
    pub ratio_initialize_other: Option<f64>,
    /// Spawn → the VMM's `main`, on the host's monotonic clock (a build
    /// that reports its start: `RunTimings::started_monotonic_ms`).
    pub vm_spawn_to_vmm: Option<Summary>,
    pub other_spawn_to_vmm: Option<Summary>,
    /// Spawn → handshake answer less VMM start → the server's first
    /// stdout byte: the time outside the VM's own phases (the spawn, the
    /// VMM's start, the answer's way to the probe), for any build.
    pub vm_outside_vm: Option<Summary>,
    pub other_outside_vm: Option<Summary>,
}

/// Phases of a restored VM, ms since the VMM process started.
pub const WARM_PHASES: [&str; 4] = ["kvm_ready", "resumed", "first_stdout_byte", "exit"];

impl FirstResponseBench {
    pub fn run(
        &self,
        mut progress: impl FnMut(&str),
    ) -> Result<FirstResponseReport, FirstResponseError> {
        // The handshake and tools/list only: the first-response path.
        // Auto lifecycle, as a current client: server/discover, then
        // initialize for older servers.
        // With a call: that tool alone, after tools/list.
        let calls = self
            .call
            .iter()
            .map(|(tool, args)| (tool.clone(), ToolArgs::Given(args.clone())))
            .collect();
        let bare_opts = ProbeOptions {
            init_timeout: Duration::from_secs(300),
            step_timeout: Duration::from_secs(300),
            lifecycle: LifecycleChoice::Auto,
            only_given: true,
            calls,
            measure_memory: true,
            ..ProbeOptions::default()
        };
        let tool = self.call.as_ref().map(|(t, _)| t.as_str());
        let dir = std::env::temp_dir().join(format!("mcpvm-bench-{}", std::process::id()));
        std::fs::create_dir_all(&dir).map_err(FirstResponseError::Temp)?;
        let timings = dir.join("timings.json");
        let snapshot = dir.join("snapshot");
        if self.warm {
            progress("taking the snapshot for the warm runs");
            crate::take_snapshot(&self.mcpvm, &self.vm, &snapshot)
                .map_err(FirstResponseError::Snapshot)?;
        }
        let mut warm = Samples::new("restored VM", &WARM_PHASES, tool);
        let mut firecracker = Samples::new("Firecracker", &[], tool);
        let mut vm = Samples::new("VM", &PHASES, tool);
        let mut bare = Samples::new("bare", &[], tool);
        let mut other = Samples::new("other build", &PHASES, tool);
        let run_with = |exe: &PathBuf, args: RunRequest| {
            let mut cmd = vec![exe.display().to_string(), "run".into()];
            cmd.extend(
                RunRequest {
                    timings: Some(timings.clone()),
                    ..args
                }
                .to_args(),
            );
            cmd
        };
        let mcpvm_run = |args: RunRequest| run_with(&self.mcpvm, args);
        let with_timings = ProbeOptions {
            vm_timings: Some(timings.clone()),
            ..bare_opts.clone()
        };
        // Round 0 warms the page cache and the testbed for every peer and is
        // not reported: without it the first peer to run pays for all.
        for run in 0..=self.runs {
            if run == 1 {
                for s in [&mut warm, &mut firecracker, &mut vm, &mut bare, &mut other] {
                    s.clear();
                }
            }
            if self.warm {
                progress(&format!("run {run}/{}: restored VM", self.runs));
                let cmd = mcpvm_run(RunRequest {
                    from_snapshot: Some(snapshot.clone()),
                    ..RunRequest::default()
                });
                warm.add(run, &probe_process(&cmd, &with_timings)?)?;
                let _ = std::fs::remove_file(&timings);
            }
            // The boot counts against the discover wait in a VM.
            let vm_opts = ProbeOptions {
                discover_timeout: bare_opts.init_timeout,
                ..with_timings.clone()
            };
            let builds: Vec<(&PathBuf, &mut Samples)> = match &self.other {
                Some(o) if run % 2 == 0 => vec![(o, &mut other), (&self.mcpvm, &mut vm)],
                Some(o) => vec![(&self.mcpvm, &mut vm), (o, &mut other)],
                None => vec![(&self.mcpvm, &mut vm)],
            };
            for (exe, samples) in builds {
                progress(&format!("run {run}/{}: {}", self.runs, samples.what));
                let cmd = run_with(exe, self.vm.clone());
                samples.add(run, &probe_process(&cmd, &vm_opts)?)?;
                let _ = std::fs::remove_file(&timings);
            }

            if let Some(fc) = &self.firecracker {
                progress(&format!("run {run}/{}: Firecracker", self.runs));
                let cmd = self.peer_command(fc);
                let fc_opts = ProbeOptions {
                    discover_timeout: bare_opts.init_timeout,
                    ..bare_opts.clone()
                };
                firecracker.add(run, &probe_process(&cmd, &fc_opts)?)?;
            }

            progress(&format!("run {run}/{}: bare process", self.runs));
            bare.add(run, &probe_process(&self.host_command, &bare_opts)?)?;
        }
        let _ = std::fs::remove_dir_all(&dir);
        let mut report = self.report(tool, &vm, &bare, &firecracker, &warm);
        if self.other.is_some() {
            report.other_initialize = summarize(&other.initialize);
            report.other_tools_list = summarize(&other.tools_list);
            report.other_phases = other.phases();
            report.other_spawn_to_vmm = summarize(&other.spawn_to_vmm);
            report.other_outside_vm = summarize(&other.outside_vm);
            if let (Some(v), Some(o)) = (&report.vm_initialize, &report.other_initialize) {
                report.ratio_initialize_other = Some(v.median / o.median);
            }
        }
        Ok(report)
    }

    /// The same VM under Firecracker, behind the same host side
    /// (`mcpvm bench peer-run`).
    fn peer_command(&self, firecracker: &std::path::Path) -> Vec<String> {
        let mut cmd = vec![
            self.tools.display().to_string(),
            "bench".into(),
            "peer-run".into(),
            format!("--firecracker={}", firecracker.display()),
        ];
        cmd.extend(self.vm.to_args());
        cmd
    }

    /// The peers' samples summarized, with the ratios between them.
    fn report(
        &self,
        tool: Option<&str>,
        vm: &Samples,
        bare: &Samples,
        firecracker: &Samples,
        warm: &Samples,
    ) -> FirstResponseReport {
        let mut rep = FirstResponseReport {
            runs: self.runs,
            vm_initialize: summarize(&vm.initialize),
            vm_tools_list: summarize(&vm.tools_list),
            bare_initialize: summarize(&bare.initialize),
            bare_tools_list: summarize(&bare.tools_list),
            vm_phases: vm.phases(),
            vm_spawn_to_vmm: summarize(&vm.spawn_to_vmm),
            vm_outside_vm: summarize(&vm.outside_vm),
            call: tool.map(str::to_string),
            vm_call: summarize(&vm.call),
            bare_call: summarize(&bare.call),
            vm_memory_mib: summarize(&vm.memory),
            bare_memory_mib: summarize(&bare.memory),
            ..Default::default()
        };
        if let (Some(v), Some(b)) = (&rep.vm_initialize, &rep.bare_initialize) {
            rep.vm_overhead_initialize = Some(v.median - b.median);
        }
        if self.firecracker.is_some() {
            rep.firecracker_initialize = summarize(&firecracker.initialize);
            rep.firecracker_tools_list = summarize(&firecracker.tools_list);
            rep.firecracker_call = summarize(&firecracker.call);
            rep.firecracker_memory_mib = summarize(&firecracker.memory);
            if let (Some(v), Some(f)) = (&rep.vm_initialize, &rep.firecracker_initialize) {
                rep.ratio_initialize_firecracker = Some(v.median / f.median);
            }
        }
        if self.warm {
            rep.warm_initialize = summarize(&warm.initialize);
            rep.warm_tools_list = summarize(&warm.tools_list);
            rep.warm_call = summarize(&warm.call);
            rep.warm_memory_mib = summarize(&warm.memory);
            rep.warm_phases = warm.phases();
        }
        rep
    }
}

/// One peer's measurements over the runs.
struct Samples<'a> {
    what: &'static str,
    initialize: Vec<f64>,
    tools_list: Vec<f64>,
    /// The tool called after tools/list, and spawn → its answer.
    tool: Option<&'a str>,
    call: Vec<f64>,
    /// PSS of the peer's process tree after its last answer, MiB.
    memory: Vec<f64>,
    phase_names: &'static [&'static str],
    phases: Vec<Vec<f64>>,
    spawn_to_vmm: Vec<f64>,
    outside_vm: Vec<f64>,
}

impl<'a> Samples<'a> {
    fn new(
        what: &'static str,
        phase_names: &'static [&'static str],
        tool: Option<&'a str>,
    ) -> Self {
        Samples {
            what,
            initialize: Vec::new(),
            tools_list: Vec::new(),
            tool,
            call: Vec::new(),
            memory: Vec::new(),
            phase_names,
            phases: vec![Vec::new(); phase_names.len()],
            spawn_to_vmm: Vec::new(),
            outside_vm: Vec::new(),
        }
    }

    /// Forgets the warm-up round.
    fn clear(&mut self) {
        *self = Samples::new(self.what, self.phase_names, self.tool);
    }

    /// Adds one run's probe result; a run without both answers fails.
    /// (The probe returns once `mcpvm run` has exited, so it has read the
    /// complete timings file.)
    fn add(&mut self, run: usize, r: &probes::ProbeResult) -> Result<(), FirstResponseError> {
        let (Some(i), Some(l)) = (r.timings.handshake_ms, r.timings.tools_list_ms) else {
            return Err(FirstResponseError::Failed {
                what: self.what,
                run,
                detail: r.summary(),
            });
        };
        if let Some(tool) = self.tool {
            // The call must have answered without an error: a failed
            // navigation measures nothing of the browser's start.
            let step = r
                .steps
                .iter()
                .find(|s| s.step == format!("tools/call:{tool}"));
            match step {
                Some(s) if s.outcome == probes::report::result::Outcome::Ok => {
                    self.call.push(s.at_ms)
                }
                _ => {
                    return Err(FirstResponseError::Failed {
                        what: self.what,
                        run,
                        detail: match step {
                            Some(s) => format!("{tool}: {:?}: {}", s.outcome, s.detail),
                            None => format!("{tool} was not called: {}", r.summary()),
                        },
                    })
                }
            }
        }
        self.initialize.push(i);
        self.tools_list.push(l);
        self.memory
            .extend(r.memory_pss_kib.map(|k| k as f64 / 1024.0));
        if let Some(v) = &r.timings.vm {
            for (i, p) in self.phase_names.iter().enumerate() {
                if let Some(x) = v.get(p) {
                    self.phases[i].push(x);
                }
            }
            if let (Some(vmm), Some(spawn)) =
                (v.started_monotonic_ms, r.timings.spawned_monotonic_ms)
            {
                self.spawn_to_vmm.push(vmm - spawn);
            }
            if let (Some(answer), Some(out)) = (r.timings.handshake_ms, v.get("first_stdout_byte"))
            {
                self.outside_vm.push(answer - out);
            }
        }
        Ok(())
    }

    fn phases(&self) -> Vec<(String, Option<Summary>)> {
        self.phase_names
            .iter()
            .zip(&self.phases)
            .map(|(p, v)| (p.to_string(), summarize(v)))
            .collect()
    }
}

impl FirstResponseReport {
    pub fn markdown(&self) -> String {
        let mut s = format!(
            "| measure ({} runs, ms) | min | median | p90 |\n|---|---:|---:|---:|\n",
            self.runs
        );
        let mut row = |name: &str, x: &Option<Summary>| {
            if let Some(x) = x {
                s += &format!(
                    "| {name} | {:.1} | {:.1} | {:.1} |\n",
                    x.min, x.median, x.p90
                );
            }
        };
        row("VM: spawn → handshake response", &self.vm_initialize);
        row("VM: spawn → tools/list response", &self.vm_tools_list);
        row(
            "bare process: spawn → handshake response",
            &self.bare_initialize,
        );
        row(
            "bare process: spawn → tools/list response",
            &self.bare_tools_list,
        );
        row(
            "Firecracker (same host side): spawn → handshake response",
            &self.firecracker_initialize,
        );
        row(
            "Firecracker (same host side): spawn → tools/list response",
            &self.firecracker_tools_list,
        );
        row(
            "restored VM: spawn → handshake response",
            &self.warm_initialize,
        );
        row(
            "restored VM: spawn → tools/list response",
            &self.warm_tools_list,
        );
        if let Some(t) = &self.call {
            for (who, x) in [
                ("VM", &self.vm_call),
                ("bare process", &self.bare_call),
                ("Firecracker (same host side)", &self.firecracker_call),
                ("restored VM", &self.warm_call),
            ] {
                row(&format!("{who}: spawn → {t} answer"), x);
            }
        }
        row(
            "other build: spawn → handshake response",
            &self.other_initialize,
        );
        row(
            "other build: spawn → tools/list response",
            &self.other_tools_list,
        );
        row("VM: spawn → VMM start", &self.vm_spawn_to_vmm);
        row(
            "VM: spawn → handshake response, less VMM start → first stdout byte",
            &self.vm_outside_vm,
        );
        row("other build: spawn → VMM start", &self.other_spawn_to_vmm);
        row(
            "other build: spawn → handshake response, less VMM start → first stdout byte",
            &self.other_outside_vm,
        );
        for (p, x) in &self.vm_phases {
            row(&format!("VM phase: VMM start → {p}"), x);
        }
        for (p, x) in &self.other_phases {
            row(&format!("other build phase: VMM start → {p}"), x);
        }
        for (p, x) in &self.warm_phases {
            row(&format!("restored VM phase: VMM start → {p}"), x);
        }
        s += &self.ratios();
        s += &self.memory_table();
        s
    }

    /// The ratios under the table: VM overhead, the call, Firecracker and
    /// the other build.
    fn ratios(&self) -> String {
        let mut s = String::new();
        if let Some(o) = self.vm_overhead_initialize {
            s += &format!(
                "\nVM overhead on the first response (median VM − median bare): **{o:.1} ms**.\n"
            );
        }
        if let (Some(t), Some(v), Some(b)) = (&self.call, &self.vm_call, &self.bare_call) {
            s += &format!(
                "\nVM / bare process, spawn → {t} answer (medians): **{:.2}×**.\n",
                v.median / b.median
            );
        }
        if let Some(r) = self.ratio_initialize_firecracker {
            s += &format!(
                "\nmcpvm / Firecracker, spawn → handshake response (medians): **{r:.2}×**.\n"
            );
        }
        if let Some(r) = self.ratio_initialize_other {
            s += &format!(
                "\nmcpvm / the other build, spawn → handshake response (medians): **{r:.2}×**.\n"
            );
            if let (Some(o), Some(f)) = (&self.other_initialize, &self.firecracker_initialize) {
                s += &format!(
                    "\nThe other build / Firecracker (medians): **{:.2}×**.\n",
                    o.median / f.median
                );
            }
        }
        s
    }

    /// The memory table, when memory was measured, and VM / bare.
    fn memory_table(&self) -> String {
        let mut s = String::new();
        let mut memory = String::new();
        for (who, x) in [
            (
                "VM (the VMM with the guest memory it touched)",
                &self.vm_memory_mib,
            ),
            (
                "bare process (the server and every program it started)",
                &self.bare_memory_mib,
            ),
            ("Firecracker (same host side)", &self.firecracker_memory_mib),
            ("restored VM", &self.warm_memory_mib),
        ] {
            if let Some(x) = x {
                memory += &format!(
                    "| {who} | {:.1} | {:.1} | {:.1} |\n",
                    x.min, x.median, x.p90
                );
            }
        }
        if !memory.is_empty() {
            let after = self.call.as_deref().unwrap_or("tools/list");
            s += &format!(
                "\n| memory after the {after} answer (PSS of the process tree, MiB) | min | median | p90 |\n|---|---:|---:|---:|\n{memory}"
            );
            if let (Some(v), Some(b)) = (&self.vm_memory_mib, &self.bare_memory_mib) {
                s += &format!(
                    "\nVM / bare process, memory (medians): **{:.2}×** ({:+.0} MiB).\n",
                    v.median / b.median,
                    v.median - b.median
                );
            }
        }
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn summary(median: f64) -> Option<Summary> {
        summarize(&[median])
    }

    #[test]
    fn a_called_tool_gets_its_rows_and_the_vm_to_bare_ratio() {
        let rep = FirstResponseReport {
            runs: 1,
            call: Some("browser_navigate".into()),
            vm_call: summary(9000.0),
            bare_call: summary(3000.0),
            ..Default::default()
        };
        let md = rep.markdown();
        assert!(
            md.contains("| VM: spawn → browser_navigate answer | 9000.0 |"),
            "{md}"
        );
        assert!(
            md.contains("| bare process: spawn → browser_navigate answer | 3000.0 |"),
            "{md}"
        );
        assert!(
            md.contains("spawn → browser_navigate answer (medians): **3.00×**"),
            "{md}"
        );
        // Without a call, no such rows.
        let plain = FirstResponseReport {
            runs: 1,
            vm_initialize: summary(10.0),
            ..Default::default()
        };
        assert!(!plain.markdown().contains("answer (medians)"));
        assert!(!plain.markdown().contains("memory"));
    }

    #[test]
    fn memory_gets_its_table_and_the_vm_to_bare_ratio() {
        let rep = FirstResponseReport {
            runs: 1,
            call: Some("browser_navigate".into()),
            vm_memory_mib: summary(900.0),
            bare_memory_mib: summary(600.0),
            ..Default::default()
        };
        let md = rep.markdown();
        assert!(
            md.contains(
                "| memory after the browser_navigate answer (PSS of the process tree, MiB) |"
            ),
            "{md}"
        );
        assert!(
            md.contains("| bare process (the server and every program it started) | 600.0 |"),
            "{md}"
        );
        assert!(
            md.contains("memory (medians): **1.50×** (+300 MiB)"),
            "{md}"
        );
    }

    /// A run's spawn → VMM start comes from the two processes' readings
    /// of the monotonic clock, and the time outside the VM from the
    /// handshake less the VM's first stdout byte; a build that reports
    /// no start (an older one) still gets the second.
    #[test]
    fn the_time_before_the_vmm_starts_is_split_out() {
        let result = |started: Option<f64>| {
            let mut r = probes::ProbeResult::new(&["mcpvm".into()], "vm");
            r.timings.handshake_ms = Some(1500.0);
            r.timings.tools_list_ms = Some(1530.0);
            r.timings.spawned_monotonic_ms = Some(10_000.0);
            r.timings.vm = Some(mcpvm_protocol::timings::RunTimings {
                started_monotonic_ms: started,
                first_event: [("first_stdout_byte".to_string(), 1420.0)].into(),
                ..Default::default()
            });
            r
        };
        let mut ours = Samples::new("VM", &PHASES, None);
        ours.add(1, &result(Some(10_012.5))).unwrap();
        let mut older = Samples::new("other build", &PHASES, None);
        older.add(1, &result(None)).unwrap();
        assert_eq!(ours.spawn_to_vmm, [12.5]);
        assert_eq!(ours.outside_vm, [80.0]);
        assert!(older.spawn_to_vmm.is_empty());
        assert_eq!(older.outside_vm, [80.0]);
        let rep = FirstResponseReport {
            runs: 1,
            vm_spawn_to_vmm: summarize(&ours.spawn_to_vmm),
            other_outside_vm: summarize(&older.outside_vm),
            ..Default::default()
        };
        let md = rep.markdown();
        assert!(md.contains("| VM: spawn → VMM start | 12.5 |"), "{md}");
        assert!(
            md.contains("| other build: spawn → handshake response, less VMM start → first stdout byte | 80.0 |"),
            "{md}"
        );
        // The warm-up round is forgotten.
        ours.clear();
        assert!(ours.spawn_to_vmm.is_empty() && ours.initialize.is_empty());
    }
}

//! What mcpvm's own processes report of a VM's phases, in ms since the
//! VMM process started, written and read through these types on both
//! sides: `mcpvm run --timings FILE` ([`RunTimings`], read by the probe and
//! so by the audit's records and the benchmarks) and `mcpvm boot --json`
//! ([`BootReport`], read by the boot benchmark).

use std::collections::BTreeMap;
use std::time::Duration;

use serde::{Deserialize, Serialize};

/// `mcpvm run --timings FILE`: the VM's phases and when each kind of
/// agent event first came, one flat JSON object.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct RunTimings {
    #[serde(flatten)]
    pub phases: VmPhases,
    /// VM exits that reached the VMM over the whole run (the boot's and
    /// every MMIO access after it).
    #[serde(default)]
    pub exits_to_vmm: u64,
    /// The VMM process's start on the host's monotonic clock
    /// ([`monotonic_ms`]): another process on the host compares its own
    /// readings with it (the first-response bench: spawn → VMM start).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub started_monotonic_ms: Option<f64>,
    /// When each kind of agent event first came (`agent_start`,
    /// `spawned`, `first_stdout_byte`, …), by its `event` name.
    #[serde(flatten)]
    pub first_event: BTreeMap<String, f64>,
}

/// An instant as ms on `CLOCK_MONOTONIC`, which every process on the host
/// reads alike (`Instant` is that clock on Linux, but it does not say its
/// value): now's reading less the time since.
pub fn monotonic_ms(at: std::time::Instant) -> f64 {
    let mut now = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: writes the current time into `now`, which it owns.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut now) };
    let now_ms = now.tv_sec as f64 * 1e3 + now.tv_nsec as f64 / 1e6;
    now_ms - at.elapsed().as_secs_f64() * 1e3
}

impl RunTimings {
    /// A phase by the name the file gives it: a VMM phase or an event's.
    pub fn get(&self, phase: &str) -> Option<f64> {
        self.phases
            .get(phase)
            .or_else(|| self.first_event.get(phase).copied())
    }
}

/// `mcpvm boot --json`: how the VM ended, when each phase happened, the
/// VMM's own set-up steps, and the exits that reached it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct BootReport {
    pub exit: BootExit,
    pub timings_ms: VmPhases,
    /// Each step of the VMM's set-up, by name, when it ended.
    #[serde(default)]
    pub setup_ms: BTreeMap<String, f64>,
    /// The exits that reached the VMM, most first.
    #[serde(default)]
    pub exits: Vec<ExitCount>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct BootExit {
    /// `power_off`, `reset`, `crash`, `timeout`, `signal`, …
    pub reason: String,
    pub detail: String,
    pub code: i32,
}

/// The VMM's four phases, in ms since its process started: the same in
/// a run's timings file and a boot's report.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct VmPhases {
    /// `/dev/kvm` opened and the VM made.
    pub kvm_ready: Option<f64>,
    /// The guest kernel's first instruction.
    pub kernel_entry: Option<f64>,
    /// The agent's write to the boot timer (init reached).
    pub boot_timer: Option<f64>,
    /// The VM ended.
    pub exit: Option<f64>,
}

impl VmPhases {
    /// From the times since the VMM started, as the VMM measures them.
    pub fn from_durations(
        kvm_ready: Option<Duration>,
        kernel_entry: Option<Duration>,
        boot_timer: Option<Duration>,
        exit: Option<Duration>,
    ) -> Self {
        VmPhases {
            kvm_ready: ms(kvm_ready),
            kernel_entry: ms(kernel_entry),
            boot_timer: ms(boot_timer),
            exit: ms(exit),
        }
    }

    /// A phase by its name in the file or the report.
    pub fn get(&self, phase: &str) -> Option<f64> {
        match phase {
            "kvm_ready" => self.kvm_ready,
            "kernel_entry" => self.kernel_entry,
            "boot_timer" => self.boot_timer,
            "exit" => self.exit,
            _ => None,
        }
    }
}

/// A time since the VMM started, in ms to the µs: how every report
/// gives it.
pub fn ms(d: Option<Duration>) -> Option<f64> {
    d.map(|d| (d.as_secs_f64() * 1e6).round() / 1e3)
}

/// Exits of one kind at one port or guest-physical address.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ExitCount {
    /// `pio_read`, `mmio_write`, …
    pub kind: String,
    /// The port or address, in hex (`0x3f8`).
    pub addr: String,
    pub count: u64,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_timings_file_reads_back_as_written_and_by_phase_name() {
        let t = RunTimings {
            phases: VmPhases {
                kvm_ready: Some(1.5),
                kernel_entry: Some(20.0),
                boot_timer: None,
                exit: Some(900.25),
            },
            exits_to_vmm: 3079,
            started_monotonic_ms: Some(123_456.75),
            first_event: [("agent_start".to_string(), 410.0)].into(),
        };
        let text = serde_json::to_string(&t).unwrap();
        // The file's shape: one flat object, a key per phase.
        let v: serde_json::Value = serde_json::from_str(&text).unwrap();
        assert_eq!(v["agent_start"], 410.0);
        assert_eq!(v["boot_timer"], serde_json::Value::Null);
        assert_eq!(v["exits_to_vmm"], 3079);
        assert_eq!(serde_json::from_str::<RunTimings>(&text).unwrap(), t);
        assert_eq!(t.get("agent_start"), Some(410.0));
        assert_eq!(t.get("kernel_entry"), Some(20.0));
        assert_eq!(t.get("nothing"), None);
    }

    /// Readings of one instant agree, and two instants differ by the
    /// time between them: what lets two processes compare theirs.
    #[test]
    fn an_instant_reads_on_the_monotonic_clock() {
        let before = std::time::Instant::now();
        let (a, b) = (monotonic_ms(before), monotonic_ms(before));
        assert!((a - b).abs() < 1.0, "{a} {b}");
        std::thread::sleep(std::time::Duration::from_millis(20));
        let after = std::time::Instant::now();
        let gap = monotonic_ms(after) - monotonic_ms(before);
        let elapsed = (after - before).as_secs_f64() * 1e3;
        assert!(
            (gap - elapsed).abs() < 1.0 && gap >= 20.0,
            "{gap} {elapsed}"
        );
    }

    #[test]
    fn a_boot_report_reads_back_as_written() {
        let r = BootReport {
            exit: BootExit {
                reason: "power_off".into(),
                detail: "the guest powered off with status 0".into(),
                code: 0,
            },
            timings_ms: VmPhases {
                kvm_ready: Some(2.0),
                kernel_entry: Some(30.0),
                boot_timer: Some(900.0),
                exit: Some(950.0),
            },
            setup_ms: [("memory".to_string(), 1.5)].into(),
            exits: vec![ExitCount {
                kind: "pio_write".into(),
                addr: "0x3f8".into(),
                count: 120,
            }],
        };
        let text = serde_json::to_string(&r).unwrap();
        let v: serde_json::Value = serde_json::from_str(&text).unwrap();
        assert_eq!(v["timings_ms"]["boot_timer"], 900.0);
        assert_eq!(v["exits"][0]["addr"], "0x3f8");
        assert_eq!(serde_json::from_str::<BootReport>(&text).unwrap(), r);
        assert_eq!(r.timings_ms.get("kernel_entry"), Some(30.0));
    }
}

//! `mcpvm run --timings FILE`: when each phase of a run happened, in ms
//! since the VMM process started. `mcpvm run` writes it when the run ends;
//! the probe reads it into its result (and so the audit's records and the
//! benchmarks read it from there), through this type on both sides.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct RunTimings {
    /// `/dev/kvm` opened and the VM made.
    pub kvm_ready: Option<f64>,
    /// The guest kernel's first instruction.
    pub kernel_entry: Option<f64>,
    /// The agent's write to the boot timer (init reached).
    pub boot_timer: Option<f64>,
    /// The VM ended.
    pub exit: Option<f64>,
    /// VM exits that reached the VMM over the whole run (the boot's and
    /// every MMIO access after it).
    #[serde(default)]
    pub exits_to_vmm: u64,
    /// When each kind of agent event first came (`agent_start`,
    /// `spawned`, `first_stdout_byte`, …), by its `event` name.
    #[serde(flatten)]
    pub first_event: BTreeMap<String, f64>,
}

impl RunTimings {
    /// A phase by the name the file gives it: a VMM phase or an event's.
    pub fn get(&self, phase: &str) -> Option<f64> {
        match phase {
            "kvm_ready" => self.kvm_ready,
            "kernel_entry" => self.kernel_entry,
            "boot_timer" => self.boot_timer,
            "exit" => self.exit,
            other => self.first_event.get(other).copied(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_timings_file_reads_back_as_written_and_by_phase_name() {
        let t = RunTimings {
            kvm_ready: Some(1.5),
            kernel_entry: Some(20.0),
            boot_timer: None,
            exit: Some(900.25),
            exits_to_vmm: 3079,
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
}

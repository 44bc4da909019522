//! How a VM run ends and what it measured on the way.

use std::time::Duration;

/// Why the VM stopped.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ExitReason {
    /// The guest wrote its exit status to the power port.
    PowerOff(u8),
    /// The guest reset itself (i8042 reset, `reboot=k`) without a panic.
    Reset,
    /// The guest kernel panicked (seen on the console, then reset).
    Panic,
    /// The vCPU hit a triple fault or another state KVM cannot continue from.
    Crash(String),
    /// The run outlived its `--timeout`.
    Timeout,
    /// The VMM was asked to stop by this signal.
    Signal(i32),
    /// The VM was paused and written to this snapshot directory.
    Snapshot(std::path::PathBuf),
}

impl ExitReason {
    /// The VMM's process exit code for this reason. A guest's own status
    /// passes through unchanged; the rest follow shell conventions
    /// (`timeout(1)` uses 124, 128+N for a signal).
    pub fn exit_code(&self) -> i32 {
        match self {
            ExitReason::PowerOff(status) => i32::from(*status),
            ExitReason::Reset | ExitReason::Snapshot(_) => 0,
            ExitReason::Timeout => 124,
            ExitReason::Panic | ExitReason::Crash(_) => 125,
            ExitReason::Signal(n) => 128 + n,
        }
    }

    /// A one-word name for logs and JSON.
    pub fn kind(&self) -> &'static str {
        match self {
            ExitReason::PowerOff(_) => "poweroff",
            ExitReason::Reset => "reset",
            ExitReason::Panic => "panic",
            ExitReason::Crash(_) => "crash",
            ExitReason::Timeout => "timeout",
            ExitReason::Signal(_) => "signal",
            ExitReason::Snapshot(_) => "snapshot",
        }
    }
}

impl std::fmt::Display for ExitReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ExitReason::PowerOff(s) => write!(f, "guest powered off with status {s}"),
            ExitReason::Reset => write!(f, "guest reset"),
            ExitReason::Panic => write!(f, "guest kernel panicked (see the serial console)"),
            ExitReason::Crash(why) => write!(f, "guest crashed: {why}"),
            ExitReason::Timeout => write!(f, "guest did not stop before the timeout"),
            ExitReason::Signal(n) => write!(f, "stopped by signal {n}"),
            ExitReason::Snapshot(dir) => write!(f, "snapshot written to {}", dir.display()),
        }
    }
}

/// Times since the VMM process started (the `start` instant of the config).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct BootTimings {
    /// VM, memory, devices and vCPUs are set up.
    pub kvm_ready: Option<Duration>,
    /// The boot vCPU enters the guest for the first time.
    pub kernel_entry: Option<Duration>,
    /// The guest wrote the boot-timer magic (userspace is up).
    pub boot_timer: Option<Duration>,
    /// The VM stopped.
    pub exit: Option<Duration>,
    /// The steps before kernel entry, each with the time it ended: the
    /// build's (`builder`), then the threads confined and let run.
    pub setup: Vec<(&'static str, Duration)>,
}

/// What a run returns.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RunOutcome {
    pub reason: ExitReason,
    pub timings: BootTimings,
    /// The exits that reached the VMM, by kind and address, most first
    /// (for a snapshot run, those before the pause).
    pub exits: Vec<crate::kvm::exits::ExitCount>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exit_codes_are_distinct_per_failure_kind() {
        assert_eq!(ExitReason::PowerOff(3).exit_code(), 3);
        assert_eq!(ExitReason::Reset.exit_code(), 0);
        assert_eq!(ExitReason::Timeout.exit_code(), 124);
        assert_eq!(ExitReason::Panic.exit_code(), 125);
        assert_eq!(ExitReason::Crash("x".into()).exit_code(), 125);
        assert_eq!(ExitReason::Signal(15).exit_code(), 143);
    }
}

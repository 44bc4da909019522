//! The guest agent's server-side seccomp (filter compiler, supervisor,
//! recorder) and the attribution of what it records to MCP requests, a
//! library so that host tests can run it on real programs
//! (`tests/server_seccomp.rs`). What the agent and the host agree on
//! is the `mcpvm-protocol` crate.

pub mod calls;
pub mod server_seccomp;

/// Guest uptime (CLOCK_BOOTTIME), ms.
pub fn uptime_ms() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes the struct we pass.
    unsafe { libc::clock_gettime(libc::CLOCK_BOOTTIME, &mut ts) };
    ts.tv_sec as u64 * 1000 + ts.tv_nsec as u64 / 1_000_000
}

//! The server's last output after it exited: how long the agent waits
//! for it to reach the host before the VM powers off.
//!
//! What the server wrote before exiting (at most its pipe's worth and
//! one relay buffer) must all arrive, however slowly the host's client
//! reads: a fixed wait cut it when the client paused or the testbed
//! stalled (seen: 16 MiB from the guest arriving short, and a client
//! that paused 6 s before the end losing the tail). So the agent waits
//! for as long as the host is taking the bytes, and gives up only on
//! what can go on forever: a pipe that a process the server left
//! behind holds open without writing, or a host that stopped reading.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{self, RecvTimeoutError};
use std::time::{Duration, Instant};

/// How long a relay may wait on the server's pipe with nothing coming
/// once the server has exited (its grandchildren may hold the pipe open
/// forever without writing).
pub const IDLE: Duration = Duration::from_secs(3);
/// The longest the tail may take in all, whatever moves: a host that
/// stopped reading, or a process left behind that writes forever.
pub const LIMIT: Duration = Duration::from_secs(120);
/// How often a wait looks at the relay's progress.
const TICK: Duration = Duration::from_millis(100);

/// What a relay has moved, and whether it waits on the host now.
#[derive(Default)]
pub struct Progress {
    moved: AtomicU64,
    writing: AtomicBool,
}

impl Progress {
    /// The relay is about to write a chunk to the host.
    pub fn writing(&self) {
        self.writing.store(true, Ordering::Relaxed);
    }

    /// The host took `n` bytes.
    pub fn wrote(&self, n: usize) {
        self.moved.fetch_add(n as u64, Ordering::Relaxed);
        self.writing.store(false, Ordering::Relaxed);
    }
}

/// Waits for a relay (`done` fires when it ends) after the server
/// exited, until `deadline` at the latest: while it writes to the host
/// or moves bytes, it goes on; waiting on the pipe with nothing moving
/// for [`IDLE`], it is given up. Returns true if it ended.
pub fn wait_relay(done: &mpsc::Receiver<()>, progress: &Progress, deadline: Instant) -> bool {
    let mut last = progress.moved.load(Ordering::Relaxed);
    let mut still = Duration::ZERO;
    loop {
        let tick = TICK.min(deadline.saturating_duration_since(Instant::now()));
        match done.recv_timeout(tick) {
            Err(RecvTimeoutError::Timeout) => {}
            _ => return true,
        }
        if Instant::now() >= deadline {
            return false;
        }
        let moved = progress.moved.load(Ordering::Relaxed);
        if moved != last || progress.writing.load(Ordering::Relaxed) {
            (last, still) = (moved, Duration::ZERO);
            continue;
        }
        still += tick;
        if still >= IDLE {
            return false;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    fn relay(f: impl FnOnce(&Progress) + Send + 'static) -> (mpsc::Receiver<()>, Arc<Progress>) {
        let p = Arc::new(Progress::default());
        let (tx, rx) = mpsc::channel();
        let p2 = p.clone();
        std::thread::spawn(move || {
            f(&p2);
            let _ = tx.send(());
        });
        (rx, p)
    }

    #[test]
    fn a_relay_blocked_on_a_slow_host_is_waited_for_past_idle() {
        // Writing to a host that takes IDLE + 1 s to read.
        let (done, p) = relay(|p| {
            p.writing();
            std::thread::sleep(IDLE + Duration::from_secs(1));
            p.wrote(10);
        });
        let t = Instant::now();
        assert!(wait_relay(&done, &p, t + LIMIT));
        assert!(t.elapsed() >= IDLE + Duration::from_secs(1));
    }

    #[test]
    fn a_pipe_held_open_in_silence_is_given_up_after_idle() {
        let (_keep, rx) = mpsc::channel::<()>();
        let p = Progress::default();
        let t = Instant::now();
        assert!(!wait_relay(&rx, &p, t + LIMIT));
        let waited = t.elapsed();
        assert!(waited >= IDLE && waited < IDLE * 2, "{waited:?}");
        drop(_keep);
    }

    #[test]
    fn a_relay_that_goes_on_forever_ends_at_the_deadline() {
        let (_keep, rx) = mpsc::channel::<()>();
        let p = Progress::default();
        p.writing();
        let t = Instant::now();
        assert!(!wait_relay(&rx, &p, t + Duration::from_millis(500)));
        let waited = t.elapsed();
        assert!(waited < Duration::from_secs(2), "{waited:?}");
    }
}

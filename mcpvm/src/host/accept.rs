//! What an accept loop (the egress proxy's, `--listen`'s) does after
//! `accept` fails. A failed accept is no reason to stop serving a run: a
//! descriptor limit (EMFILE, ENFILE), a memory shortage (ENOBUFS,
//! ENOMEM) or a client that gave up (ECONNABORTED) passes, after a pause
//! for the limits, so that the loop neither ends for the rest of the run
//! nor spins on the same error; only a listener that is gone ends it.

use std::io;
use std::time::Duration;

/// How long a loop rests after a limit was hit.
pub const PAUSE: Duration = Duration::from_millis(50);

#[derive(Debug, PartialEq, Eq)]
pub enum Next {
    /// Accept again.
    Retry,
    /// The listener is gone or was never one: stop.
    Stop,
}

/// Judges `e`, pausing first where accepting again at once would fail
/// again at once.
pub fn after_error(e: &io::Error) -> Next {
    match e.raw_os_error() {
        Some(libc::EBADF | libc::EINVAL | libc::ENOTSOCK | libc::EOPNOTSUPP) => Next::Stop,
        Some(libc::EINTR | libc::ECONNABORTED | libc::EPROTO | libc::EAGAIN) => Next::Retry,
        _ => {
            std::thread::sleep(PAUSE);
            Next::Retry
        }
    }
}

/// `incoming` until it ends or [`after_error`] says stop: the items that
/// were accepted.
pub fn accepted<T>(incoming: impl Iterator<Item = io::Result<T>>) -> impl Iterator<Item = T> {
    let mut stopped = false;
    incoming
        .map_while(move |r| match (stopped, r) {
            (true, _) => None,
            (false, Ok(c)) => Some(Some(c)),
            (false, Err(e)) => {
                log::info!("accept: {e}");
                match after_error(&e) {
                    Next::Retry => Some(None),
                    Next::Stop => {
                        stopped = true;
                        None
                    }
                }
            }
        })
        .flatten()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn err(code: i32) -> io::Result<u32> {
        Err(io::Error::from_raw_os_error(code))
    }

    #[test]
    fn limits_pass_after_a_pause_and_a_gone_listener_stops() {
        let t = std::time::Instant::now();
        let got: Vec<u32> = accepted(
            [
                Ok(1),
                err(libc::EMFILE),
                err(libc::ECONNABORTED),
                Ok(2),
                err(libc::ENFILE),
                Ok(3),
            ]
            .into_iter(),
        )
        .collect();
        assert_eq!(got, [1, 2, 3]);
        assert!(t.elapsed() >= 2 * PAUSE, "the limits were waited out");
        let got: Vec<u32> = accepted([Ok(1), err(libc::EBADF), Ok(2)].into_iter()).collect();
        assert_eq!(got, [1]);
    }
}

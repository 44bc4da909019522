//! How a process's end becomes the one byte the VM powers off with: its
//! exit code, or 128+N for signal N, as a shell reports it.

use std::os::unix::process::ExitStatusExt;
use std::process::ExitStatus;

/// A process's end, and the status byte it maps to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Exit {
    pub code: Option<i32>,
    pub signal: Option<i32>,
    pub status: u8,
}

impl Exit {
    pub fn of(status: ExitStatus) -> Exit {
        let (code, signal) = (status.code(), status.signal());
        let status = match (code, signal) {
            (Some(c), _) => c as u8,
            (None, Some(s)) => 128u8.wrapping_add(s as u8),
            (None, None) => 255,
        };
        Exit {
            code,
            signal,
            status,
        }
    }

    /// From a raw `waitpid` status.
    pub fn from_wait_status(raw: i32) -> Exit {
        Exit::of(ExitStatus::from_raw(raw))
    }

    pub fn byte(&self) -> u8 {
        self.status
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exit_status_maps_like_a_shell() {
        assert_eq!(Exit::from_wait_status(3 << 8).byte(), 3);
        let killed = Exit::from_wait_status(9);
        assert_eq!(
            (killed.byte(), killed.signal, killed.code),
            (137, Some(9), None)
        );
    }
}

//! The guest console's last lines, kept while the VM runs: when the
//! guest kernel panics, what it said is the only account of why, and a
//! run without `--console` would otherwise have thrown it away.

use std::collections::VecDeque;
use std::io::{self, Write};
use std::sync::{Arc, Mutex};

/// The most console bytes kept: a panic's message, its registers and a
/// call trace fit; the boot before them does not need to.
pub const KEPT_BYTES: usize = 8 * 1024;

/// The most lines said about a panic.
pub const SAID_LINES: usize = 40;

/// A console writer that passes every byte on to `out` and keeps the
/// last [`KEPT_BYTES`] of them, read through the [`Tail`] it was made
/// with.
pub struct Keeping {
    out: Box<dyn Write + Send>,
    kept: Arc<Mutex<VecDeque<u8>>>,
}

/// The bytes a [`Keeping`] console kept.
#[derive(Clone, Default)]
pub struct Tail(Arc<Mutex<VecDeque<u8>>>);

impl Keeping {
    pub fn new(out: Box<dyn Write + Send>) -> (Self, Tail) {
        let kept = Arc::new(Mutex::new(VecDeque::with_capacity(KEPT_BYTES)));
        (
            Keeping {
                out,
                kept: kept.clone(),
            },
            Tail(kept),
        )
    }
}

impl Write for Keeping {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        {
            let mut kept = self.kept.lock().unwrap_or_else(|e| e.into_inner());
            let cut = buf.len().saturating_sub(KEPT_BYTES);
            kept.extend(&buf[cut..]);
            let over = kept.len().saturating_sub(KEPT_BYTES);
            kept.drain(..over);
        }
        self.out.write_all(buf)?;
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        self.out.flush()
    }
}

impl Tail {
    /// The last [`SAID_LINES`] non-empty lines kept, each made
    /// printable (the guest's text drives no terminal). The first line
    /// is dropped when the bound cut into it.
    pub fn lines(&self) -> Vec<String> {
        let kept = self.0.lock().unwrap_or_else(|e| e.into_inner());
        let bytes: Vec<u8> = kept.iter().copied().collect();
        let text = String::from_utf8_lossy(&bytes);
        let mut lines: Vec<&str> = text.split(['\n', '\r']).collect();
        if bytes.len() >= KEPT_BYTES && !lines.is_empty() {
            lines.remove(0);
        }
        let lines: Vec<&str> = lines.into_iter().filter(|l| !l.trim().is_empty()).collect();
        let skip = lines.len().saturating_sub(SAID_LINES);
        lines[skip..]
            .iter()
            .map(|l| crate::logger::printable(l).into_owned())
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Shared(Arc<Mutex<Vec<u8>>>);
    impl Write for Shared {
        fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn every_byte_goes_on_and_the_last_lines_are_kept() {
        let out = Arc::new(Mutex::new(Vec::new()));
        let (mut console, tail) = Keeping::new(Box::new(Shared(out.clone())));
        // The UART writes a byte at a time.
        for b in b"[ 0.1] boot\r\n[ 2.3] Kernel panic - not syncing: Attempted to kill init!\r\n" {
            console.write_all(&[*b]).unwrap();
        }
        assert_eq!(
            tail.lines(),
            [
                "[ 0.1] boot",
                "[ 2.3] Kernel panic - not syncing: Attempted to kill init!"
            ]
        );
        assert!(out.lock().unwrap().ends_with(b"init!\r\n"));
    }

    #[test]
    fn what_is_kept_is_bounded_and_printable() {
        let (mut console, tail) = Keeping::new(Box::new(io::sink()));
        for i in 0..5000 {
            writeln!(console, "line {i} \x1b[2J").unwrap();
        }
        let lines = tail.lines();
        assert_eq!(lines.len(), SAID_LINES);
        assert_eq!(lines.last().unwrap(), "line 4999 \\u{1b}[2J");
        assert!(lines.iter().all(|l| !l.contains('\x1b')));
        // One write larger than the bound keeps only its end.
        let (mut console, tail) = Keeping::new(Box::new(io::sink()));
        let mut big = vec![b'x'; 3 * KEPT_BYTES];
        big.extend_from_slice(b"\nthe end\n");
        console.write_all(&big).unwrap();
        assert_eq!(tail.lines(), ["the end"]);
    }
}

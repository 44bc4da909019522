//! Files mcpvm writes for a user: whole or not at all.

use std::io::{BufWriter, Write};
use std::path::Path;

/// Writes `bytes` to `path` through a temporary file beside it, so that a
/// reader never sees half of it.
pub fn write_whole(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    write_whole_with(path, |w| w.write_all(bytes))
}

/// [`write_whole`] for what is written piece by piece (a report of
/// thousands of servers need not be held in memory whole first).
pub fn write_whole_with(
    path: &Path,
    write: impl FnOnce(&mut dyn Write) -> std::io::Result<()>,
) -> std::io::Result<()> {
    let tmp = path.with_extension(format!("tmp.{}", std::process::id()));
    let written = std::fs::File::create(&tmp).and_then(|f| {
        let mut w = BufWriter::new(f);
        write(&mut w)?;
        w.flush()
    });
    written
        .and_then(|()| std::fs::rename(&tmp, path))
        .inspect_err(|_| {
            let _ = std::fs::remove_file(&tmp);
        })
}

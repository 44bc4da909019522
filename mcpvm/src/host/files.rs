//! Files mcpvm writes for a user (whole or not at all), and files another
//! machine handed us (read as regular files, bounded, never changed).

use std::io::{BufWriter, Read, Write};
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::Path;

/// Writes `bytes` to `path` through a temporary file beside it, so that a
/// reader never sees half of it.
pub fn write_whole(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    write_whole_with(path, |w| w.write_all(bytes))
}

/// [`write_whole`] for what is written piece by piece (a report of
/// thousands of servers need not be held in memory whole first).
///
/// The temporary file is created exclusively under a random name
/// (`O_EXCL`): on an output directory others write to (a Slurm or
/// Kubernetes layout, where a pod's pid is often 1) no one can plant a
/// link at a name we would open. The rename replaces `path` itself, a
/// link there included, never what a link points at.
pub fn write_whole_with(
    path: &Path,
    write: impl FnOnce(&mut dyn Write) -> std::io::Result<()>,
) -> std::io::Result<()> {
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let tmp = tempfile::Builder::new()
        .prefix(&format!(".{name}."))
        .suffix(".tmp")
        .tempfile_in(dir)?;
    // Readable as a file the user made would be (tempfile makes 0600).
    tmp.as_file()
        .set_permissions(std::fs::Permissions::from_mode(0o644))?;
    let mut w = BufWriter::new(tmp.as_file());
    write(&mut w)?;
    w.flush()?;
    drop(w);
    // On error the temporary file is removed when `tmp` drops.
    tmp.persist(path).map(|_| ()).map_err(|e| e.error)
}

/// Opens `path` for reading only if it is a regular file, not through a
/// symbolic link (`O_NOFOLLOW`): a FIFO, a device or a link another
/// machine left in its output is refused, never read or written.
pub fn open_regular(path: &Path) -> std::io::Result<std::fs::File> {
    let f = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_CLOEXEC)
        .open(path)
        .map_err(|e| match e.raw_os_error() {
            Some(libc::ELOOP) => std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                "it is a symbolic link, and only regular files are read",
            ),
            _ => e,
        })?;
    if !f.metadata()?.file_type().is_file() {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            "it is not a regular file",
        ));
    }
    Ok(f)
}

/// The whole of a regular file of at most `max` bytes ([`open_regular`]).
pub fn read_regular(path: &Path, max: u64) -> std::io::Result<Vec<u8>> {
    let f = open_regular(path)?;
    let mut bytes = Vec::new();
    f.take(max + 1).read_to_end(&mut bytes)?;
    if bytes.len() as u64 > max {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            format!("it is larger than {} MiB", max >> 20),
        ));
    }
    Ok(bytes)
}

/// `dir`, made if missing, refused if it is anything but a directory of
/// its own (a link planted there would send our files elsewhere).
pub fn own_dir(dir: &Path) -> std::io::Result<()> {
    match std::fs::symlink_metadata(dir) {
        Ok(m) if m.file_type().is_dir() => Ok(()),
        Ok(_) => Err(std::io::Error::new(
            std::io::ErrorKind::AlreadyExists,
            "it exists and is not a directory (a symbolic link is not followed)",
        )),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => std::fs::create_dir(dir),
        Err(e) => Err(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::symlink;

    #[test]
    fn a_link_planted_at_any_name_is_replaced_not_followed() {
        let d = tempfile::tempdir().unwrap();
        let victim = d.path().join("victim");
        std::fs::write(&victim, "keep").unwrap();
        let out = d.path().join("report.md");
        // The names the old code would have opened (`report.tmp.<pid>`),
        // and the target itself, are links to the victim.
        symlink(
            &victim,
            d.path().join(format!("report.tmp.{}", std::process::id())),
        )
        .unwrap();
        symlink(&victim, d.path().join("report.tmp.1")).unwrap();
        symlink(&victim, &out).unwrap();
        write_whole(&out, b"new").unwrap();
        assert_eq!(std::fs::read_to_string(&victim).unwrap(), "keep");
        assert_eq!(std::fs::read_to_string(&out).unwrap(), "new");
        assert!(!std::fs::symlink_metadata(&out)
            .unwrap()
            .file_type()
            .is_symlink());
        let mode = std::fs::metadata(&out).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o644);
    }

    #[test]
    fn a_failed_write_leaves_neither_the_file_nor_a_temporary() {
        let d = tempfile::tempdir().unwrap();
        let out = d.path().join("x.json");
        let r = write_whole_with(&out, |w| {
            w.write_all(b"half")?;
            Err(std::io::Error::other("stop"))
        });
        assert!(r.is_err());
        assert_eq!(std::fs::read_dir(d.path()).unwrap().count(), 0);
    }

    #[test]
    fn only_regular_files_are_read_and_within_their_bound() {
        let d = tempfile::tempdir().unwrap();
        let file = d.path().join("f");
        std::fs::write(&file, "12345").unwrap();
        assert_eq!(read_regular(&file, 5).unwrap(), b"12345");
        assert!(read_regular(&file, 4).is_err());
        let link = d.path().join("l");
        symlink(&file, &link).unwrap();
        let e = read_regular(&link, 100).unwrap_err();
        assert!(e.to_string().contains("symbolic link"), "{e}");
        // A device and a FIFO: refused at once, not read until out of
        // memory, not waited on.
        assert!(read_regular(Path::new("/dev/zero"), 100).is_err());
        let fifo = d.path().join("fifo");
        let c = std::ffi::CString::new(fifo.as_os_str().as_encoded_bytes()).unwrap();
        // SAFETY: a valid path string.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        let e = read_regular(&fifo, 100).unwrap_err();
        assert!(e.to_string().contains("not a regular file"), "{e}");
    }

    #[test]
    fn an_own_dir_is_made_or_kept_and_a_link_refused() {
        let d = tempfile::tempdir().unwrap();
        own_dir(&d.path().join("new")).unwrap();
        own_dir(&d.path().join("new")).unwrap();
        symlink("/tmp", d.path().join("link")).unwrap();
        assert!(own_dir(&d.path().join("link")).is_err());
    }
}

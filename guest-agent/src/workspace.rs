//! The workspace: a host directory that arrives as a tar stream on the
//! WORKSPACE port, is unpacked into /workspace before the server starts,
//! and (when writable) goes back the same way after it exits. A stream
//! rather than a disk image: it needs no filesystem tools on the host, and
//! the server sees an ordinary directory on the guest's tmpfs overlay.

use std::fs::{self, File};
use std::io;

use mcpvm_protocol::ports::WORKSPACE_DIR;

/// Unpacks the host's tar stream into /workspace. It ends at the tar's
/// end, not the stream's: for a writable workspace the host keeps the
/// stream open until the copy sent back has all arrived.
pub fn receive(conn: &File) -> io::Result<()> {
    fs::create_dir_all(WORKSPACE_DIR)?;
    let mut archive = tar::Archive::new(conn);
    archive.set_preserve_permissions(true);
    archive.set_overwrite(true);
    archive.unpack(WORKSPACE_DIR)
}

/// Sends /workspace back as a tar stream (symlinks as symlinks).
pub fn send_back(conn: &File) -> io::Result<()> {
    let mut builder = tar::Builder::new(conn);
    builder.follow_symlinks(false);
    builder.append_dir_all(".", WORKSPACE_DIR)?;
    builder.finish()
}

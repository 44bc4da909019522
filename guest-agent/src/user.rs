//! Who the server runs as. By default the guest image's unprivileged user
//! (`SERVER_USER`, uid 1000, home /home/mcp), as on a developer's
//! machine: what the server may change is its home, the workspace, /tmp
//! and its own files, and a server that only works as root shows it. A
//! policy with `root` keeps uid 0 and /root.
//!
//! The agent stays root: it prepares the home, runs the setup line (the
//! machine's owner installing things), plants the canaries, then hands
//! the home, the workspace and the canary sibling to the user before the
//! server starts (`pre_exec` drops to the user, `server_seccomp`).

use std::fs;
use std::io;
use std::os::unix::fs::{lchown, DirBuilderExt};
use std::path::Path;

use mcpvm_protocol::ports::{GuestUser, ROOT_USER, SERVER_USER};
use mcpvm_protocol::withholding::Policy;

/// The account the policy runs the server as.
pub fn of(policy: &Policy) -> GuestUser {
    if policy.root {
        ROOT_USER
    } else {
        SERVER_USER
    }
}

/// Its home, its runtime directory (`XDG_RUNTIME_DIR`), and ports below
/// 1024 open to every user, as a server that listens on port 80 in a
/// container expects.
pub fn prepare(user: &GuestUser) -> io::Result<()> {
    fs::DirBuilder::new()
        .recursive(true)
        .mode(0o755)
        .create(user.home)?;
    if user.uid == 0 {
        return Ok(());
    }
    // A root without an overlay (`--read-only-root`) keeps the image's
    // home, root's: that is what a read-only root means.
    unless_read_only(lchown(user.home, Some(user.uid), Some(user.gid)))?;
    let run = runtime_dir(user);
    fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(&run)?;
    lchown(&run, Some(user.uid), Some(user.gid))?;
    // Absent on a kernel without IPv4 sysctls: nothing to open then.
    let _ = fs::write("/proc/sys/net/ipv4/ip_unprivileged_port_start", "0");
    Ok(())
}

/// `/run/user/<uid>`, as a login session makes it.
pub fn runtime_dir(user: &GuestUser) -> String {
    format!("/run/user/{}", user.uid)
}

/// The variables that name the account, as a login shell sets them.
pub fn env(user: &GuestUser) -> Vec<(&'static str, String)> {
    let mut vars = vec![
        ("HOME", user.home.to_string()),
        ("USER", user.name.to_string()),
        ("LOGNAME", user.name.to_string()),
    ];
    if user.uid != 0 {
        vars.push(("XDG_RUNTIME_DIR", runtime_dir(user)));
    }
    vars
}

/// Makes every file under each of `roots` the user's (links themselves,
/// never what they point to). Missing roots are skipped.
pub fn hand_over(user: &GuestUser, roots: &[&str]) -> io::Result<()> {
    if user.uid == 0 {
        return Ok(());
    }
    for root in roots {
        let root = Path::new(root);
        if root.symlink_metadata().is_ok() {
            unless_read_only(own_tree(root, user))?;
        }
    }
    Ok(())
}

fn own_tree(path: &Path, user: &GuestUser) -> io::Result<()> {
    lchown(path, Some(user.uid), Some(user.gid))?;
    if path.symlink_metadata()?.is_dir() {
        for entry in fs::read_dir(path)? {
            own_tree(&entry?.path(), user)?;
        }
    }
    Ok(())
}

/// `r`, with a read-only filesystem's refusal taken as done.
fn unless_read_only(r: io::Result<()>) -> io::Result<()> {
    match r {
        Err(e) if e.raw_os_error() == Some(libc::EROFS) => Ok(()),
        r => r,
    }
}

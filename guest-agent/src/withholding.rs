//! The filesystem half of a run's policy, applied by PID 1 before the
//! server starts (the system call and rlimit half is applied in the
//! server's own process: `guest_agent::server_seccomp`).

use std::io;

use mcpvm_protocol::withholding::Policy;

use crate::system::mount_fs;

/// Remounts the root (and, for `no_tmp`, /tmp) read-only. The workspace,
/// if any, is already in place and becomes read-only with the root.
pub fn apply_mounts(policy: &Policy) -> io::Result<()> {
    let ro = libc::MS_REMOUNT | libc::MS_BIND | libc::MS_RDONLY;
    if policy.read_only_root {
        mount_fs("none", "/", "", ro, "")
            .map_err(|e| io::Error::new(e.kind(), format!("cannot make / read-only: {e}")))?;
    }
    if policy.no_tmp {
        // Empty and read-only: nothing was written there before the server.
        mount_fs("none", "/tmp", "", ro, "")
            .map_err(|e| io::Error::new(e.kind(), format!("cannot make /tmp read-only: {e}")))?;
    }
    Ok(())
}

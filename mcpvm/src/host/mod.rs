//! What the host side reads, writes and accepts with care: files written
//! whole and read within bounds (`files`), lines cut at a limit
//! (`lines`), sockets accepted without blocking on a stalled peer
//! (`accept`), a run's private directory that goes with it
//! (`rundir`), and mcpvm's own threads confined to their system calls
//! (`seccomp`).

pub mod accept;
pub mod files;
pub mod lines;
pub mod rundir;
pub mod seccomp;
mod seccomp_lists;

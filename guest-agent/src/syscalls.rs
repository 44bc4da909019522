//! The system call table lives in its own crate so that the VMM (host
//! seccomp messages) can name calls too; the agent's users keep this path.
pub use syscall_table::*;

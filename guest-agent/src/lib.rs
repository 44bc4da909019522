//! The guest agent's protocol with the host, shared with the host side
//! (`mcpvm run`) so both speak from one definition.

pub mod channels;
pub mod policy;
pub mod seccomp;
pub mod syscalls;

//! The guest agent's server-side seccomp (filter compiler and
//! supervisor), a library so that host tests can run it on real
//! programs (`tests/server_seccomp.rs`). What the agent and the host agree on
//! is the `mcpvm-protocol` crate.

pub mod server_seccomp;

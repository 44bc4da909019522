//! Probes: how mcpvm sees an MCP server, as a real MCP client would and as
//! a hostile one might.
//!
//! A probe run starts the server as a child process speaking stdio (which
//! is also how a microVM is reached, since `mcpvm run` is a stdio server)
//! and records every line on the [`transport::wire`]. Then:
//! 1. [`steps::conformance`]: rmcp's client performs the handshake in the
//!    server's lifecycle (`initialize`, or the stateless 2026-07-28
//!    `server/discover`), discovery, a call of each tool with the user's
//!    or schema-generated [`calls::arguments`], ping and cancellation;
//! 2. [`steps::robustness`] (on request): raw, partly malformed input, each
//!    classified handled / ignored / hung / crashed.
//!
//! Every step has a timeout; a hung server never hangs the probe, and the
//! server's whole process group ends with the run.

pub mod calls;
pub mod judge;
pub mod memory;
pub mod options;
pub mod probe;
pub mod report;
pub mod steps;
pub mod transport;

pub use probe::{probe_process, LifecycleChoice, ProbeError, ProbeOptions, ToolArgs};
pub use report::result::{ProbeResult, StepResult};

//! Probes: how mcpvm sees an MCP server, as a real MCP client would.
//!
//! A probe run starts the server through a transport (today: a child
//! process speaking stdio, which is also how a microVM is reached, since
//! `mcpvm run` is a stdio server), performs the MCP steps in order, and
//! records for each its outcome and the time since the server was started.
//! A hung server never hangs the probe: every step has a timeout.

pub mod result;
pub mod run;

pub use result::{ProbeResult, StepResult};
pub use run::{probe_process, ProbeOptions, ToolCall};

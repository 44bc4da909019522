//! Probes: how mcpvm sees an MCP server, as a real MCP client would and as
//! a hostile one might.
//!
//! A probe run starts the server as a child process speaking stdio (which
//! is also how a microVM is reached, since `mcpvm run` is a stdio server)
//! and records every line on the [`wire`]. Then:
//! 1. [`conformance`]: rmcp's client performs the handshake in the
//!    server's lifecycle (`initialize`, or the stateless 2026-07-28
//!    `server/discover`), discovery, a call of each tool with the user's
//!    or schema-generated [`arguments`], ping and cancellation;
//! 2. [`robustness`] (on request): raw, partly malformed input, each
//!    classified handled / ignored / hung / crashed.
//!
//! Every step has a timeout; a hung server never hangs the probe, and the
//! server's whole process group ends with the run.

pub mod arguments;
pub mod attacks;
pub mod client;
pub mod conformance;
pub mod definitions;
pub mod effects;
pub mod exchange;
pub mod feedback;
pub mod findings;
pub mod gate;
pub mod http;
pub mod install;
pub mod memory;
pub mod names;
pub mod options;
pub mod pattern;
pub mod pin;
pub mod probe;
pub mod redact;
pub mod result;
pub mod robustness;
pub mod sarif;
pub mod telemetry;
pub mod upstream;
pub mod wire;

pub use probe::{probe_process, LifecycleChoice, ProbeError, ProbeOptions, ToolArgs};
pub use result::{ProbeResult, StepResult};

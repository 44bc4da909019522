//! What runs a VM, as a library: the `mcpvm` binary (main.rs; `exe` says
//! why there are two) is the command line over it, `mcpvm-tools` (the
//! probes, audits and image builder, tools/) builds on it, and the fuzz
//! targets (fuzz/) reach its parsers through it. It knows nothing of
//! MCP clients or reports: it depends on neither `probes` nor `maud`.

pub mod cli;
pub mod commands;
pub mod egress;
pub mod exe;
pub mod host;
pub mod logger;
pub mod run;
pub mod server;
pub mod workspace;

/// Profiles live in their own crate (the fuzz targets build it alone).
pub use withholding;

/// "Outer: inner: innermost", as the style guide asks.
pub use mcpvm_protocol::errors::chain as error_chain;

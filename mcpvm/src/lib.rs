//! mcpvm's commands and their parts, as a library: the `mcpvm` and
//! `mcpvm-tools` binaries (main.rs, bin/; `exe` says why two) are the
//! command line over it, and the fuzz targets (fuzz/) reach the parsers
//! of profiles and catalogues through it.

pub mod accept;
pub mod audit;
pub mod cli;
pub mod commands;
pub mod disk_arg;
pub mod egress;
pub mod exe;
pub mod files;
pub mod hints;
pub mod image;
pub mod lines;
pub mod logger;
pub mod package;
pub mod pinning;
pub mod run;
pub mod rundir;
pub mod server;
pub mod workspace;

/// Profiles live in their own crate (the fuzz targets build it alone).
pub use withholding;

/// "Outer: inner: innermost", as the style guide asks.
pub use mcpvm_protocol::errors::chain as error_chain;

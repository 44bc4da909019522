//! The commands beyond the VM, as a library: probes of a server, audits
//! of many, pins, MCP clients' files and the image builder's install
//! microVMs. The `mcpvm-tools` binary (main.rs) is the command line over
//! it; it starts every VM by running `mcpvm` (`mcpvm::exe`), whose crate
//! it builds on and never the other way: the binary a VM runs in carries
//! no MCP client, report renderer or image builder (docs/architecture.md).

pub mod audit;
pub mod commands;
pub mod install;
pub mod pinning;
pub mod request;
pub mod setup;

//! Guest images for real MCP servers.
//!
//! - [`apt`]: Debian packages a server needs, unpacked into its layer.
//! - [`cargo`]: a crate's binaries, built from crates.io in a microVM.
//! - [`install`]: one installer per ecosystem behind one trait:
//!   [`npm`], [`pip`], [`cargo`].
//! - [`catalogue`]: the TOML file naming each server, its package at an
//!   exact version, runtime, command and needs.
//! - [`build`]: the shared runtime image (Debian 12 with python and node,
//!   guest-image/rootfs/build) and one small layer per server (its
//!   npm/PyPI package under /opt/mcp/<name>), each EROFS, content-addressed
//!   and cached, so hundreds of servers share one runtime and an unchanged
//!   catalogue rebuilds in seconds.
//! - [`host_env`]: the cleared environment every host program of a build
//!   starts with (a catalogue never reaches it).
//! - [`key`]: layer keys (what makes a layer rebuild); [`erofs`]: the
//!   images, made reproducibly; [`process`]: host programs run and their
//!   failures told; [`sandbox`]: the install-scripts job the embedder runs
//!   in a microVM.
//! - [`grammar`]: package names and exact versions by each registry's
//!   own grammar (never an option, never a tag or a range).
//! - [`lock`]: each layer's resolved dependency tree, kept so that a
//!   rebuild installs the same one.
//! - [`package`]: a server named on the command line (`npm:NAME@VERSION`,
//!   `pypi:NAME==VERSION`, `cargo:NAME@VERSION`) as an entry of its own.
//! - [`registry`]: catalogue entries made from a registry's list of
//!   published servers, and a seeded stratified draw from it.
//! - [`store`]: the directory of built images and its index, which `mcpvm
//!   run --server` reads.

pub mod apt;
pub mod build;
pub mod cargo;
pub mod catalogue;
pub mod erofs;
pub mod grammar;
pub mod host_env;
pub mod install;
pub mod key;
pub mod lock;
pub mod needs;
pub mod npm;
pub mod package;
pub mod pip;
pub mod process;
pub mod registry;
pub mod sandbox;
pub mod store;
pub mod tools;

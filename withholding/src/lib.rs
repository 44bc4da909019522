//! Withholding profiles: named, composable sets of knobs for one run
//! (design.md, "Withholding model"). The VMM enforces the device and
//! resource knobs (memory, vCPUs, virtio-rng); the guest agent enforces
//! the rest (read-only root, /tmp, environment, rlimits, and a seccomp
//! policy whose every hit it counts) from the [`Policy`] in the run spec.
//!
//! A profile file has `[defaults]` and `[profile.<name>]` tables with the
//! fields of [`Knobs`]; a run names one profile or several joined by `+`,
//! applied in order on top of the defaults. Built-in profiles come from
//! `profiles.toml` beside this file; a user's file adds to or replaces
//! them by name.

pub mod network;
pub mod profile;

pub use profile::Profiles;

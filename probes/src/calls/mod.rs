//! What the probe sends a tool: arguments made from its schema
//! ([`arguments`], with [`pattern`] for strings that must match), read
//! again from what a refusal said ([`feedback`]), and how a call that
//! waits on a refused upstream is told apart ([`upstream`],
//! [`telemetry`]).

pub mod arguments;
pub mod feedback;
pub mod pattern;
pub mod telemetry;
pub mod upstream;

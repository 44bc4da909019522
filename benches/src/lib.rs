//! Benchmarks: figures, not assertions. Each compares mcpvm with a peer
//! measured in the same run, since absolute times on shared or nested
//! machines are noisy (see docs/benchmarks.md).

pub mod boot;
pub mod first_response;
pub mod probe;
pub mod relay;
pub mod stats;

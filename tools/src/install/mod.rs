//! A layer's install scripts in a microVM for the image builder
//! ([`scripts`], the builder's `ScriptSandbox`), and what they were seen
//! to do there ([`record`]).

pub mod record;
pub mod scripts;

//! The probe's output: the result ([`result`], docs/probe-result.md),
//! as SARIF ([`sarif`]), with secrets kept out of both ([`redact`]).

pub mod redact;
pub mod result;
pub mod sarif;

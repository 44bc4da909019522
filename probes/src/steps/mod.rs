//! The probe's steps: a real client's ([`conformance`]), a careless or
//! hostile client's raw input ([`robustness`]) and the attacks of
//! `--security` ([`attacks`]).

pub mod attacks;
pub mod conformance;
pub mod robustness;

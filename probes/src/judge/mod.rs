//! What the probe concludes from what it saw: findings judged by what
//! the server did in the VM ([`findings`], from the recorded
//! [`effects`]), by what it declares ([`definitions`], [`names`], its
//! MCP Apps' pages [`apps`]), by
//! what its install scripts did ([`install`]), by how its listing moved
//! ([`pin`]), and the CI gate on them ([`gate`]); and the roles each
//! tool was seen to play ([`roles`]).

pub mod apps;
pub mod definitions;
pub mod effects;
pub mod findings;
pub mod gate;
pub mod install;
pub mod names;
pub mod pin;
pub mod roles;
#[cfg(test)]
pub(crate) mod testing;

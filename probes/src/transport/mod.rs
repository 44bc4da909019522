//! How the probe reaches a server: the stdio wire ([`wire`]) or
//! Streamable HTTP ([`http`]), the raw exchange recorded on either
//! ([`exchange`]), and rmcp's client timed against it ([`client`]).

pub mod client;
pub mod exchange;
pub mod http;
pub mod wire;

//! The probe as an MCP client: rmcp's client with our identity, and how
//! each step is timed and recorded against the wire's exchange. Shared by
//! the real-client steps (`conformance`), the attacks and the robustness
//! probes.

use std::time::Instant;

use rmcp::model::{CallToolResult, ClientCapabilities, ClientConfig, Implementation};
use rmcp::service::{RoleClient, RunningService, ServiceError};
use rmcp::ClientHandler;
use serde_json::Value;

use crate::exchange::{ms_since, Direction};
use crate::result::{Outcome, StepResult};
use crate::wire::Wire;

pub const CLIENT_NAME: &str = "mcpvm-probe";

/// Our client's identity; it asks for no client capabilities, so a server
/// has no reason to send it requests (sampling, roots, elicitation).
#[derive(Clone)]
pub struct ProbeClient;

impl ClientHandler for ProbeClient {
    fn get_info(&self) -> ClientConfig {
        ClientConfig::new(
            ClientCapabilities::default(),
            Implementation::new(CLIENT_NAME, env!("CARGO_PKG_VERSION")),
        )
    }
}

pub type Client = RunningService<RoleClient, ProbeClient>;

/// One step being timed: its name, start and place in the exchange.
pub struct Started {
    name: String,
    t0: Instant,
    /// Where in the wire's exchange the step began.
    pub mark: usize,
}

pub fn begin(wire: &Wire, name: &str) -> Started {
    log::info!("step {name}");
    Started {
        name: name.to_string(),
        t0: Instant::now(),
        mark: wire.exchange.mark(),
    }
}

impl Started {
    pub fn end(self, wire: &Wire, outcome: Outcome, detail: Value) -> StepResult {
        log::info!("step {}: {outcome:?}", self.name);
        let exchange = wire.exchange.since(self.mark);
        let progress_notifications = exchange
            .iter()
            .filter(|e| {
                e.dir == Direction::Received && e.method() == Some("notifications/progress")
            })
            .count();
        StepResult {
            step: self.name,
            outcome,
            at_ms: ms_since(wire.start()),
            took_ms: (self.t0.elapsed().as_secs_f64() * 1e6).round() / 1e3,
            detail,
            progress_notifications,
            exchange,
            effects: None,
        }
    }
}

pub fn error_outcome(e: &ServiceError) -> Outcome {
    match e {
        ServiceError::McpError(_) => Outcome::Error,
        ServiceError::Timeout { .. } => Outcome::Timeout,
        _ => Outcome::Closed,
    }
}

/// A tool's answer: its outcome (`isError` is a tool error, an answer
/// all the same) and the text of its content.
pub fn answered(r: &CallToolResult) -> (Outcome, String) {
    let text = r
        .content
        .iter()
        .filter_map(|c| c.as_text().map(|t| t.text.to_string()))
        .collect();
    match r.is_error {
        Some(true) => (Outcome::ToolError, text),
        _ => (Outcome::Ok, text),
    }
}

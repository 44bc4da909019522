//! What the judges' tests share: a call step as the probe records it.

use serde_json::{json, Value};

use crate::report::result::{Outcome, StepResult};
use crate::transport::exchange::{Direction, Entry};

/// The step `name` (`tools/call:TOOL` or `attack:TOOL`): request `id`
/// with `args`, answered with `answer`.
pub fn step(name: &str, id: u64, args: Value, answer: Value) -> StepResult {
    let tool = name.split_once(':').map_or(name, |(_, t)| t);
    StepResult {
        step: name.into(),
        outcome: Outcome::Ok,
        at_ms: 0.0,
        took_ms: 0.0,
        detail: Value::Null,
        progress_notifications: 0,
        exchange: vec![
            Entry {
                at_ms: 0.0,
                dir: Direction::Sent,
                bytes: 0,
                message: Some(json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
                    "params": {"name": tool, "arguments": args}})),
                text: None,
            },
            Entry {
                at_ms: 1.0,
                dir: Direction::Received,
                bytes: 0,
                message: Some(json!({"jsonrpc": "2.0", "id": id, "result": answer})),
                text: None,
            },
        ],
        effects: None,
    }
}

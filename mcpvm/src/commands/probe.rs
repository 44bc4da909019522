//! `mcpvm probe -- <command…>`: connect to an MCP server as a real client
//! would and report each step. The command may itself be `mcpvm run -- …`
//! to probe a server inside a microVM.

use std::time::Duration;

use clap::Args;
use probes::{probe_process, ProbeOptions, ToolCall};

#[derive(Args)]
pub struct ProbeArgs {
    /// Call a tool: NAME or NAME={"json":"arguments"} (repeatable).
    #[arg(long = "call", value_parser = parse_call)]
    calls: Vec<ToolCall>,
    /// Seconds allowed for the server to start and answer initialize.
    #[arg(long, default_value_t = 120)]
    init_timeout: u64,
    /// Seconds allowed for each later step.
    #[arg(long, default_value_t = 30)]
    step_timeout: u64,
    /// The server command.
    #[arg(last = true, required = true)]
    command: Vec<String>,
}

fn parse_call(s: &str) -> Result<ToolCall, String> {
    let (name, args) = match s.split_once('=') {
        Some((n, a)) => (n, a),
        None => (s, "{}"),
    };
    if name.is_empty() {
        return Err(format!("'{s}' names no tool; use NAME or NAME={{...}}"));
    }
    match serde_json::from_str::<serde_json::Value>(args) {
        Ok(serde_json::Value::Object(arguments)) => Ok(ToolCall {
            name: name.to_string(),
            arguments,
        }),
        _ => Err(format!(
            "arguments of '{name}' must be a JSON object, got '{args}'"
        )),
    }
}

pub fn run(args: ProbeArgs, json: bool) -> Result<u8, Box<dyn std::error::Error>> {
    let opts = ProbeOptions {
        init_timeout: Duration::from_secs(args.init_timeout),
        step_timeout: Duration::from_secs(args.step_timeout),
        calls: args.calls,
    };
    let result = probe_process(&args.command, &opts)?;
    if json {
        println!("{}", serde_json::to_string(&result)?);
    } else {
        print!("{}", result.summary());
    }
    Ok(if result.ok() { 0 } else { 3 })
}

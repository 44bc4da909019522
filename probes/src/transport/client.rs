//! The probe as an MCP client: rmcp's client with our identity, and how
//! each step is timed and recorded against the wire's exchange. Shared by
//! the real-client steps (`conformance`), the attacks and the robustness
//! probes.

use std::sync::{Arc, Mutex};
use std::time::Instant;

// Sampling and roots are deprecated (SEP-2577), but servers of the
// earlier revisions still ask for them: the probe answers and records.
#[allow(deprecated)]
use rmcp::model::{
    CallToolResult, ClientCapabilities, ClientConfig, CreateMessageRequestParams,
    CreateMessageResult, ElicitRequestParams, ElicitResult, ElicitationAction, Implementation,
    ListRootsResult,
};
use rmcp::service::{RequestContext, RoleClient, RunningService, ServiceError};
use rmcp::{ClientHandler, ErrorData as McpError};
use serde_json::{json, Value};

use crate::report::result::{Outcome, StepResult};
use crate::transport::exchange::{ms_since, Direction};
use crate::transport::wire::Wire;

pub const CLIENT_NAME: &str = "mcpvm-probe";

/// Our client's identity; it asks for no client capabilities, so a server
/// has no reason to send it requests (sampling, roots, elicitation). One
/// that does anyway (a 2026-07-28 server answering `input_required`, or
/// a request of its own) is answered as a user who says no would answer
/// — elicitation declined, sampling refused, no roots — and what it
/// asked is kept ([`ProbeClient::take_asked`]) for the step's detail.
#[derive(Clone, Default)]
pub struct ProbeClient {
    asked: Arc<Mutex<Vec<Value>>>,
}

/// Requests kept per step, and characters of each text kept.
const MAX_ASKED: usize = 8;
const ASKED_TEXT: usize = 300;

impl ProbeClient {
    /// What the server asked of the client since the last take.
    pub fn take_asked(&self) -> Vec<Value> {
        std::mem::take(&mut *self.asked.lock().unwrap_or_else(|e| e.into_inner()))
    }

    fn note(&self, asked: Value) {
        let mut all = self.asked.lock().unwrap_or_else(|e| e.into_inner());
        if all.len() < MAX_ASKED {
            all.push(asked);
        }
    }
}

/// `text`'s first [`ASKED_TEXT`] characters.
fn cut(text: &str) -> String {
    match text.char_indices().nth(ASKED_TEXT) {
        Some((i, _)) => format!("{}…", &text[..i]),
        None => text.to_string(),
    }
}

#[allow(deprecated)]
impl ClientHandler for ProbeClient {
    fn get_info(&self) -> ClientConfig {
        ClientConfig::new(
            ClientCapabilities::default(),
            Implementation::new(CLIENT_NAME, env!("CARGO_PKG_VERSION")),
        )
    }

    fn create_elicitation(
        &self,
        request: ElicitRequestParams,
        _context: RequestContext<RoleClient>,
    ) -> impl std::future::Future<Output = Result<ElicitResult, McpError>> + Send + '_ {
        let v = serde_json::to_value(&request).unwrap_or_default();
        let fields: Vec<String> = v["requestedSchema"]["properties"]
            .as_object()
            .map(|p| p.keys().map(|k| cut(k)).collect())
            .unwrap_or_default();
        let mut asked = json!({
            "kind": "elicitation",
            "message": cut(v["message"].as_str().unwrap_or_default()),
        });
        if !fields.is_empty() {
            asked["fields"] = json!(fields);
        }
        if let Some(url) = v["url"].as_str() {
            asked["url"] = json!(cut(url));
        }
        self.note(asked);
        std::future::ready(Ok(ElicitResult::new(ElicitationAction::Decline)))
    }

    fn create_message(
        &self,
        params: CreateMessageRequestParams,
        _context: RequestContext<RoleClient>,
    ) -> impl std::future::Future<Output = Result<CreateMessageResult, McpError>> + Send + '_ {
        let v = serde_json::to_value(&params).unwrap_or_default();
        let texts: Vec<String> = v["messages"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|m| m["content"]["text"].as_str().map(cut))
            .take(MAX_ASKED)
            .collect();
        let mut asked = json!({"kind": "sampling", "messages": texts});
        if let Some(system) = v["systemPrompt"].as_str() {
            asked["system_prompt"] = json!(cut(system));
        }
        self.note(asked);
        std::future::ready(Err(McpError::method_not_found::<
            rmcp::model::CreateMessageRequestMethod,
        >()))
    }

    fn list_roots(
        &self,
        _context: RequestContext<RoleClient>,
    ) -> impl std::future::Future<Output = Result<ListRootsResult, McpError>> + Send + '_ {
        self.note(json!({"kind": "roots"}));
        std::future::ready(Ok(ListRootsResult::default()))
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

/// Image and audio parts a result holds, described rather than kept (a
/// screenshot is tens of kilobytes): type, MIME type as the server gave
/// it (bounded), decoded size, SHA-256 prefix, and a PNG's or JPEG's
/// width and height read from its header. At most [`MAX_MEDIA`]; data
/// that is not base64 says so.
pub fn media(r: &CallToolResult) -> Vec<serde_json::Value> {
    use base64::Engine;
    use rmcp::model::ContentBlock;
    use sha2::Digest;
    r.content
        .iter()
        .filter_map(|c| match c {
            ContentBlock::Image(i) => Some(("image", &i.data, &i.mime_type)),
            ContentBlock::Audio(a) => Some(("audio", &a.data, &a.mime_type)),
            _ => None,
        })
        .take(MAX_MEDIA)
        .map(|(kind, data, mime)| {
            let mime: String = mime.chars().take(64).collect();
            let engine = base64::engine::general_purpose::STANDARD;
            match engine.decode(data.trim()) {
                Ok(bytes) => {
                    let digest = sha2::Sha256::digest(&bytes);
                    let hex: String = digest[..8].iter().map(|b| format!("{b:02x}")).collect();
                    let mut v = serde_json::json!({"type": kind, "mime_type": mime,
                        "bytes": bytes.len(), "sha256": hex});
                    if let Some((w, h)) = dimensions(&bytes) {
                        v["width"] = w.into();
                        v["height"] = h.into();
                    }
                    v
                }
                Err(e) => serde_json::json!({"type": kind, "mime_type": mime,
                    "error": format!("not base64: {e}")}),
            }
        })
        .collect()
}

/// Media parts a step's detail describes.
pub const MAX_MEDIA: usize = 16;

/// A PNG's (IHDR) or a baseline/progressive JPEG's (SOF) width and
/// height, from its bytes; None for anything else.
pub fn dimensions(b: &[u8]) -> Option<(u32, u32)> {
    let be32 = |i: usize| Some(u32::from_be_bytes(b.get(i..i + 4)?.try_into().ok()?));
    let be16 = |i: usize| Some(u16::from_be_bytes(b.get(i..i + 2)?.try_into().ok()?) as u32);
    if b.starts_with(b"\x89PNG\r\n\x1a\n") && b.get(12..16) == Some(b"IHDR") {
        return Some((be32(16)?, be32(20)?));
    }
    if !b.starts_with(&[0xff, 0xd8]) {
        return None;
    }
    let mut i = 2;
    while i + 4 <= b.len() && b[i] == 0xff {
        let marker = b[i + 1];
        let len = be16(i + 2)? as usize;
        // SOF0..SOF15 but DHT (c4), JPG (c8) and DAC (cc).
        if (0xc0..=0xcf).contains(&marker) && ![0xc4, 0xc8, 0xcc].contains(&marker) {
            return Some((be16(i + 7)?, be16(i + 5)?));
        }
        i += 2 + len;
    }
    None
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

#[cfg(test)]
mod tests {
    use super::*;
    use base64::Engine;
    use rmcp::model::ContentBlock;

    /// A PNG's first bytes: signature, then the IHDR chunk.
    fn png(w: u32, h: u32) -> Vec<u8> {
        let mut b = b"\x89PNG\r\n\x1a\n\0\0\0\x0dIHDR".to_vec();
        b.extend_from_slice(&w.to_be_bytes());
        b.extend_from_slice(&h.to_be_bytes());
        b.extend_from_slice(&[8, 6, 0, 0, 0]);
        b
    }

    #[test]
    fn png_and_jpeg_headers_give_their_size_and_nothing_else_does() {
        assert_eq!(dimensions(&png(1280, 720)), Some((1280, 720)));
        // SOI, an APP0 of 4 bytes, then SOF0: height 600, width 800.
        let jpeg = [
            0xff, 0xd8, 0xff, 0xe0, 0, 4, 0, 0, 0xff, 0xc0, 0, 11, 8, 0x02, 0x58, 0x03, 0x20,
        ];
        assert_eq!(dimensions(&jpeg), Some((800, 600)));
        assert_eq!(dimensions(b"GIF89a"), None);
        assert_eq!(dimensions(&png(1, 1)[..18]), None, "cut short");
        // A segment length that points past the end.
        assert_eq!(dimensions(&[0xff, 0xd8, 0xff, 0xe0, 0xff, 0xff]), None);
    }

    #[test]
    fn image_parts_are_described_not_kept() {
        let b64 = base64::engine::general_purpose::STANDARD;
        let r = CallToolResult::success(vec![
            ContentBlock::text("Took a screenshot"),
            ContentBlock::image(b64.encode(png(640, 480)), "image/png"),
            ContentBlock::image("not base64!", "image/png"),
        ]);
        let m = media(&r);
        assert_eq!(m.len(), 2);
        assert_eq!(m[0]["mime_type"], "image/png");
        assert_eq!(m[0]["bytes"], 29);
        assert_eq!(
            (m[0]["width"].as_u64(), m[0]["height"].as_u64()),
            (Some(640), Some(480))
        );
        assert_eq!(m[0]["sha256"].as_str().unwrap().len(), 16);
        assert!(m[1]["error"].as_str().unwrap().starts_with("not base64"));
        assert!(m.iter().all(|p| p.get("data").is_none()));
    }
}

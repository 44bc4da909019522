//! Hosts a server sends telemetry, error reports or update checks to: a
//! server that cannot reach them works the same. The audit never names
//! them as what a server needs (`mcpvm`'s audit::calls), and a call is
//! not cut short for a refused try of one (`crate::calls::upstream`).

/// Hosts that receive telemetry, error reports or update checks: a
/// server that cannot reach them works the same, so they are never
/// given as what it needs (suffixes; seen in the corpus's deny-net run).
pub const TELEMETRY: &[&str] = &[
    "ingest.sentry.io",
    "ingest.us.sentry.io",
    "ingest.de.sentry.io",
    "api.segment.io",
    "posthog.com",
    "static.scarf.sh",
    "events.data.microsoft.com",
    "applicationinsights.azure.com",
    "dc.services.visualstudio.com",
    "browser-intake-datadoghq.com",
    "api.mixpanel.com",
    "api.amplitude.com",
    // Google's Clearcut log endpoint (chrome-devtools-mcp's usage statistics).
    "play.googleapis.com",
    // Chromium's own background services: component updates and network
    // time (clients2), device check-in and push messaging (android.clients),
    // Safe Browsing and update lists.
    "clients2.google.com",
    "android.clients.google.com",
    "update.googleapis.com",
    "safebrowsing.googleapis.com",
    "optimizationguide-pa.googleapis.com",
    "content-autofill.googleapis.com",
    "telemetry.",
];

/// Update checks: a server asks whether it is the newest release.
const UPDATE_CHECKS: &[&str] = &["pypi.org", "registry.npmjs.org"];

/// Whether a host only receives telemetry, error reports or update
/// checks.
pub fn is_telemetry(host: &str) -> bool {
    let h = host.trim_end_matches('.').to_ascii_lowercase();
    TELEMETRY.iter().any(|t| match t.strip_suffix('.') {
        Some(prefix) => h.starts_with(&format!("{prefix}.")),
        None => h == *t || h.ends_with(&format!(".{t}")),
    }) || UPDATE_CHECKS.contains(&h.as_str())
}

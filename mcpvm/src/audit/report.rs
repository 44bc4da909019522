//! The audit's reports, from `audit.json` and `results.jsonl`: a Markdown
//! matrix with the evidence per server, an HTML page with the matrix as a
//! coloured grid and the timing distributions (self-contained: inline CSS
//! and SVG, no CDN), and, from each baseline run that logged system
//! calls, a ready-to-use allow-list profile.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use super::meta::Meta;
use super::record::{Outcome, Record};
use super::text::{esc, md};
use super::verdict::{self, Effect, Spread, BASELINE};
use super::{network, security, SECURITY};

fn cell<'a>(
    records: &'a BTreeMap<(String, String), Record>,
    s: &str,
    p: &str,
) -> Option<&'a Record> {
    records.get(&(s.to_string(), p.to_string()))
}

/// What the profile did to the server of `r` (`verdict::judge`).
fn effect(records: &BTreeMap<(String, String), Record>, r: &Record) -> Effect {
    verdict::judge(cell(records, &r.server, BASELINE), r)
}

/// Per profile, what it did that the baseline did not have; then the
/// servers whose baseline itself fails. Lines of Markdown.
fn findings(meta: &Meta, records: &BTreeMap<(String, String), Record>) -> Vec<String> {
    let mut out = Vec::new();
    if !meta.profiles.iter().any(|p| p == BASELINE) {
        out.push(
            "No `baseline` column: cells are shown as they ended, not against a baseline.".into(),
        );
        return out;
    }
    for p in meta
        .profiles
        .iter()
        .filter(|p| *p != BASELINE && *p != SECURITY)
    {
        let mut hits = Vec::new();
        for s in meta.servers.keys() {
            let Some(r) = cell(records, s, p) else {
                continue;
            };
            match effect(records, r) {
                Effect::NewlyBroken => hits.push(format!(
                    "broke **{}** ({}{})",
                    md(s),
                    r.outcome.name(),
                    denied_part(r)
                )),
                Effect::NewFailures(new) => hits.push(format!(
                    "made **{}** fail {}{}",
                    md(s),
                    new.iter()
                        .map(|e| md(step_of(e)))
                        .collect::<Vec<_>>()
                        .join(", "),
                    denied_part(r)
                )),
                Effect::SlowerStart(c) => hits.push(format!(
                    "slowed **{}**'s first response to {:.2}× ({} against {}, no run overlapping){}",
                    md(s),
                    c.ratio,
                    c.cell.describe(),
                    c.baseline.describe(),
                    denied_part(r)
                )),
                _ => {}
            }
        }
        if hits.is_empty() {
            out.push(format!(
                "- **{}**: nothing the baseline did not have",
                md(p)
            ));
        } else {
            out.push(format!("- **{}**: {}", md(p), hits.join("; ")));
        }
    }
    let failing: Vec<String> = meta
        .servers
        .keys()
        .filter_map(|s| {
            let why = verdict::baseline_failure(cell(records, s, BASELINE)?)?;
            Some(format!("- **{}**: {}", md(s), md(&why)))
        })
        .collect();
    if !failing.is_empty() {
        out.push(String::new());
        out.push("Servers that fail under `baseline` itself (nothing withheld; these failures are not any profile's):".into());
        out.extend(failing);
    }
    out
}

/// `step: outcome: text` → `step`.
fn step_of(error: &str) -> &str {
    error.split(": ").next().unwrap_or(error)
}

fn denied_part(r: &Record) -> String {
    if r.evidence.denied.is_empty() {
        return String::new();
    }
    let d: Vec<String> = r
        .evidence
        .denied
        .iter()
        .map(|d| format!("{} ×{}", md(&d.syscall), d.count))
        .collect();
    format!("; denied {}", d.join(", "))
}

/// A cell's first response: the one run's, or the median and range of
/// its repeated runs; then, where repeated runs show one, the change
/// against the baseline.
fn first_response(records: &BTreeMap<(String, String), Record>, r: &Record) -> String {
    let own = Spread::of(&verdict::first_responses(r))
        .map(|s| s.describe())
        .unwrap_or_else(|| "–".into());
    let base = cell(records, &r.server, BASELINE).filter(|_| r.profile != BASELINE);
    match base.and_then(|b| verdict::start_change(b, r)) {
        Some(c) => format!("{own}, {:.2}× the baseline's", c.ratio),
        None => own,
    }
}

fn ms(v: Option<f64>) -> String {
    v.map(|v| format!("{v:.0} ms"))
        .unwrap_or_else(|| "–".into())
}

fn evidence_line(r: &Record) -> String {
    let mut parts = Vec::new();
    if let Some(step) = &r.failed_step {
        parts.push(format!("failed at {}", md(step)));
    }
    if !r.evidence.denied.is_empty() {
        let d: Vec<String> = r
            .evidence
            .denied
            .iter()
            .map(|d| {
                format!(
                    "{} ×{} ({})",
                    md(&d.syscall),
                    d.count,
                    md(d.errno.as_deref().unwrap_or(""))
                )
            })
            .collect();
        parts.push(format!("denied {}", d.join(", ")));
    }
    if r.evidence.oom {
        parts.push("OOM killer acted".into());
    }
    if let Some(sig) = r.evidence.exit["signal"].as_i64() {
        parts.push(format!("exit signal {sig}"));
    } else if let Some(code) = r.evidence.exit["code"].as_i64().filter(|&c| c != 0) {
        parts.push(format!("exit code {code}"));
    }
    parts.join("; ")
}

/// Distinct calls of a baseline run that logged them.
/// The system calls a run used, as far as they are x86_64 system call
/// names (the guest sends the names: anything else is not one, and must
/// not reach a profile the user is told to use).
fn used(r: &Record) -> Option<Vec<&str>> {
    r.syscalls_used.as_ref().map(|u| {
        u.iter()
            .map(|c| c.syscall.as_str())
            .filter(|n| syscall_table::number(n).is_some())
            .collect()
    })
}

/// What the timings of this audit can say.
/// Whether the runs' VMMs were jailed: a report read on another host must
/// not take an unjailed audit for a jailed one.
fn jail_note(records: &BTreeMap<(String, String), Record>) -> String {
    let said: Vec<bool> = records.values().filter_map(|r| r.jailed).collect();
    let not = said.iter().filter(|j| !**j).count();
    match (said.len(), not) {
        (0, _) => "No run said whether its VMM was jailed".into(),
        (n, 0) => format!("Every VMM ran jailed ({n} runs)"),
        (n, k) if k == n => {
            format!("No VMM ran jailed ({n} runs): the host refused a jail or it was turned off")
        }
        (n, k) => format!("{k} of {n} VMMs ran without a jail"),
    }
}

fn timing_note(meta: &Meta) -> String {
    match meta.repeat {
        0 | 1 => "Timings are one run per cell: a difference between columns is a hint, not a measurement; `--repeat 5` measures it".into(),
        n => format!(
            "Each cell ran {n} times in a row (the first run's outcome and evidence are shown); first responses are medians with their range, and a profile is judged to slow a server's start only when every one of its runs answered later than every baseline run, by at least {:.0} %, with runs enough that ranges this far apart by chance happen at most once in {:.0}",
            verdict::MIN_CHANGE * 100.0,
            1.0 / verdict::MAX_CHANCE
        ),
    }
}

/// `ok ×4, degraded ×1` when a cell's repeated runs did not all end alike.
fn varied_outcomes(r: &Record) -> Option<String> {
    let mut counts: BTreeMap<Outcome, usize> = BTreeMap::new();
    for s in &r.samples {
        *counts.entry(s.outcome).or_default() += 1;
    }
    (counts.len() > 1).then(|| {
        counts
            .iter()
            .map(|(o, n)| format!("{} ×{n}", o.name()))
            .collect::<Vec<_>>()
            .join(", ")
    })
}

pub fn markdown(meta: &Meta, records: &BTreeMap<(String, String), Record>) -> String {
    let servers: Vec<&String> = meta.servers.keys().collect();
    let total = servers.len() * meta.profiles.len();
    let done = records.len();
    let mut m = String::new();
    let _ = writeln!(m, "# mcpvm audit\n");
    let _ = writeln!(
        m,
        "{} servers × {} profiles: {done} of {total} runs recorded. mcpvm {}, kernel `{}` (sha256 {}), runtime image `{}`, catalogue {}.\n",
        servers.len(),
        meta.profiles.len(),
        meta.mcpvm_version,
        meta.kernel,
        meta.kernel_sha256,
        meta.runtime_image,
        meta.catalogue,
    );
    let _ = writeln!(
        m,
        "Run order: {}. {}. {}.\n",
        md(&meta.order),
        timing_note(meta),
        jail_note(records)
    );
    let _ = writeln!(m, "## What each profile did\n");
    for line in findings(meta, records) {
        let _ = writeln!(m, "{line}");
    }
    if meta.profiles.iter().any(|p| p == SECURITY) {
        let _ = writeln!(m, "\n{}", security::markdown(meta, records));
    }
    if let Some(section) = network::markdown(meta, records) {
        let _ = writeln!(m, "\n{section}");
    }
    let _ = writeln!(m, "\n## Matrix\n");
    let _ = write!(m, "| server |");
    for p in &meta.profiles {
        let _ = write!(m, " {p} |");
    }
    let _ = write!(m, "\n|---|");
    for _ in &meta.profiles {
        let _ = write!(m, ":-:|");
    }
    m.push('\n');
    for s in &servers {
        let _ = write!(m, "| {s} |");
        for p in &meta.profiles {
            let sym = match cell(records, s, p) {
                Some(r) if p == SECURITY => security::symbol(r),
                Some(r) => effect(records, r).symbol(r.outcome).to_string(),
                None => " ".into(),
            };
            let _ = write!(m, " {sym} |");
        }
        m.push('\n');
    }
    let legend: Vec<String> = Outcome::ALL
        .iter()
        .map(|o| format!("{} {}", o.symbol(), o.name()))
        .collect();
    let _ = writeln!(
        m,
        "\n`baseline` column: how the server ended with nothing withheld, {} (blank: not run yet). Other columns: what the profile did against that baseline: = nothing new · ◐ new failures · ✗ newly broken · ◷ slower start (repeated runs only).\n",
        legend.join(" · ")
    );
    if meta.profiles.iter().any(|p| p == SECURITY) {
        let _ = writeln!(
            m,
            "`security` column: ⚠N findings · ○ none found · ? not judged (no evidence recorded to judge by) (see Security findings).\n"
        );
    }
    let _ = writeln!(
        m,
        "## Profiles\n\n| profile | what is withheld |\n|---|---|"
    );
    for p in &meta.profiles {
        let d = meta
            .profile_definitions
            .get(p)
            .and_then(|d| d["description"].as_str())
            .unwrap_or("");
        let _ = writeln!(m, "| {p} | {d} |");
    }
    let _ = writeln!(m, "\n## Servers\n");
    for s in &servers {
        let sm = &meta.servers[*s];
        let _ = writeln!(
            m,
            "### {s}\n\n{} {} ({})\n",
            sm.package, sm.version, sm.runtime
        );
        for p in &meta.profiles {
            let Some(r) = cell(records, s, p) else {
                continue;
            };
            if p == SECURITY {
                let _ = writeln!(
                    m,
                    "- **{p}**: {} — first response {}",
                    md(&security::summary(r)),
                    ms(r.timings.handshake_ms)
                );
                continue;
            }
            let _ = write!(
                m,
                "- **{p}**: {} — first response {}, boot {}",
                effect(records, r).name(r.outcome),
                first_response(records, r),
                ms(r.timings.boot_ms)
            );
            if let Some(varied) = varied_outcomes(r) {
                let _ = write!(m, "; outcomes varied across runs: {varied}");
            }
            let e = evidence_line(r);
            if !e.is_empty() {
                let _ = write!(m, "; {e}");
            }
            if let Some(u) = used(r) {
                let _ = write!(
                    m,
                    "; {} distinct system calls (allow-list: `profiles/{s}-minimal.toml`)",
                    u.len()
                );
            }
            m.push('\n');
            for err in &r.evidence.errors {
                let _ = writeln!(m, "  - {}", md(err));
            }
            if r.outcome != Outcome::Ok && !r.evidence.stderr_tail.trim().is_empty() {
                let last: Vec<&str> = r
                    .evidence
                    .stderr_tail
                    .trim_end()
                    .lines()
                    .rev()
                    .take(3)
                    .collect();
                let last: Vec<&str> = last.into_iter().rev().collect();
                let _ = writeln!(m, "  - stderr: {}", md(&last.join(" ⏎ ")));
            }
        }
        m.push('\n');
    }
    m
}

fn colour(o: Outcome) -> &'static str {
    match o {
        Outcome::Ok => "#2e9d5b",
        Outcome::Degraded => "#e0b43a",
        Outcome::Broken => "#d2453b",
        Outcome::Timeout => "#8e5cc2",
        Outcome::Crash => "#7a1f1a",
        Outcome::Oom => "#3a6fd2",
        Outcome::Error => "#777777",
    }
}

/// An SVG histogram of `values` (ms) in `bins` equal bins.
/// An SVG histogram with its axes: runs (count over each bar, the y axis
/// from 0 to the tallest) against milliseconds (bin edges on the x axis).
fn histogram(title: &str, values: &[f64], bins: usize) -> String {
    let (w, h, left, bottom, top_pad) = (460.0, 180.0, 40.0, 34.0, 16.0);
    let mut svg = format!(
        "<figure><figcaption>{} ({} runs)</figcaption><svg width=\"{w}\" height=\"{h}\" role=\"img\" font-size=\"11\">",
        esc(title),
        values.len()
    );
    if values.is_empty() {
        svg += "<text x=\"10\" y=\"20\">no data yet</text></svg></figure>";
        return svg;
    }
    let max = values.iter().cloned().fold(f64::MIN, f64::max);
    let min = values.iter().cloned().fold(f64::MAX, f64::min);
    let span = (max - min).max(1.0);
    let mut counts = vec![0usize; bins];
    for v in values {
        let i = (((v - min) / span) * bins as f64).floor() as usize;
        counts[i.min(bins - 1)] += 1;
    }
    let tallest = *counts.iter().max().unwrap_or(&1) as f64;
    let (x0, y0) = (left, h - bottom);
    let plot_w = w - left - 10.0;
    let plot_h = y0 - top_pad;
    let bw = plot_w / bins as f64;
    // Axes, with the count scale and the time scale.
    let _ = write!(
        svg,
        "<line x1=\"{x0}\" y1=\"{y0}\" x2=\"{}\" y2=\"{y0}\" stroke=\"#444\"/>\
         <line x1=\"{x0}\" y1=\"{y0}\" x2=\"{x0}\" y2=\"{top_pad}\" stroke=\"#444\"/>\
         <text x=\"{}\" y=\"{y0}\" text-anchor=\"end\">0</text>\
         <text x=\"{}\" y=\"{}\" text-anchor=\"end\">{tallest}</text>\
         <text x=\"4\" y=\"{}\" transform=\"rotate(-90 10 {})\">runs</text>",
        x0 + plot_w,
        x0 - 4.0,
        x0 - 4.0,
        top_pad + 4.0,
        y0 / 2.0 + 10.0,
        y0 / 2.0
    );
    for (i, c) in counts.iter().enumerate() {
        let bh = (*c as f64 / tallest) * plot_h;
        let x = x0 + i as f64 * bw;
        let _ = write!(
            svg,
            "<rect x=\"{:.1}\" y=\"{:.1}\" width=\"{:.1}\" height=\"{bh:.1}\" fill=\"#4a7bd0\"><title>{c} runs</title></rect>",
            x + 1.0,
            y0 - bh,
            bw - 2.0
        );
        if *c > 0 {
            let _ = write!(
                svg,
                "<text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"middle\">{c}</text>",
                x + bw / 2.0,
                y0 - bh - 3.0
            );
        }
    }
    for (frac, anchor) in [(0.0, "start"), (0.5, "middle"), (1.0, "end")] {
        let _ = write!(
            svg,
            "<text x=\"{:.1}\" y=\"{}\" text-anchor=\"{anchor}\">{:.0} ms</text>",
            x0 + frac * plot_w,
            y0 + 14.0,
            min + frac * span
        );
    }
    svg += "</svg></figure>";
    svg
}

pub fn html(meta: &Meta, records: &BTreeMap<(String, String), Record>) -> String {
    let servers: Vec<&String> = meta.servers.keys().collect();
    let mut page = String::from(
        "<!doctype html><html><head><meta charset=\"utf-8\"><title>mcpvm audit</title><style>\
         body{font-family:system-ui,sans-serif;margin:2em;max-width:80em;color:#222}\
         table.grid{border-collapse:collapse}table.grid td,table.grid th{border:1px solid #ccc;padding:.3em .6em;text-align:center}\
         table.grid td.cell{color:#fff;font-weight:600}th.server{text-align:left}\
         .legend span{display:inline-block;padding:.1em .5em;margin-right:.4em;color:#fff;border-radius:3px}\
         figure{display:inline-block;margin:1em 2em 1em 0}figcaption{font-weight:600}\
         details{margin:.4em 0}pre{background:#f4f4f4;padding:.5em;white-space:pre-wrap}\
         </style></head><body><h1>mcpvm audit</h1>",
    );
    let _ = write!(
        page,
        "<p>{} servers × {} profiles: {} of {} runs recorded. mcpvm {}, kernel {} (sha256 {}), runtime image {}.</p>",
        servers.len(),
        meta.profiles.len(),
        records.len(),
        servers.len() * meta.profiles.len(),
        esc(&meta.mcpvm_version),
        esc(&meta.kernel),
        esc(&meta.kernel_sha256),
        esc(&meta.runtime_image)
    );
    let _ = write!(
        page,
        "<p>Run order: {}. {}. {}.</p>",
        esc(&meta.order),
        esc(&timing_note(meta).replace('`', "")),
        esc(&jail_note(records))
    );
    page += "<h2>What each profile did</h2>";
    let mut list = false;
    for line in findings(meta, records) {
        match line.strip_prefix("- ") {
            Some(item) => {
                if !list {
                    page += "<ul>";
                    list = true;
                }
                let _ = write!(page, "<li>{}</li>", esc(&item.replace("**", "")));
            }
            None => {
                if list {
                    page += "</ul>";
                    list = false;
                }
                if !line.is_empty() {
                    let _ = write!(page, "<p>{}</p>", esc(&line.replace('`', "")));
                }
            }
        }
    }
    if list {
        page += "</ul>";
    }
    page += "<h2>Matrix</h2><p>Baseline column: how each server ended with nothing withheld. Other columns: what the profile did against it (= nothing new).</p><p class=\"legend\">";
    for o in Outcome::ALL {
        let _ = write!(
            page,
            "<span style=\"background:{}\">{}</span>",
            colour(o),
            o.name()
        );
    }
    page += "</p><table class=\"grid\"><tr><th>server</th>";
    for p in &meta.profiles {
        let _ = write!(page, "<th>{}</th>", esc(p));
    }
    page += "</tr>";
    for s in &servers {
        let _ = write!(page, "<tr><th class=\"server\">{}</th>", esc(s));
        for p in &meta.profiles {
            match cell(records, s, p) {
                Some(r) if p == SECURITY => {
                    let found = r.security.as_ref().map_or(0, |x| x.findings.len());
                    let shade = match (&r.security, found) {
                        (None, _) => colour(r.outcome),
                        (Some(_), 0) => "#6a8",
                        _ => "#b03030",
                    };
                    let _ = write!(
                        page,
                        "<td class=\"cell\" style=\"background:{}\" title=\"{}\">{}</td>",
                        shade,
                        esc(&security::summary(r)),
                        esc(&security::symbol(r))
                    );
                }
                Some(r) => {
                    let tip = format!("{} × {}: {}. {}", s, p, r.outcome.name(), evidence_line(r));
                    let e = effect(records, r);
                    let shade = match e {
                        Effect::Same => "#6a8",
                        Effect::SlowerStart(_) => "#a8a040",
                        _ => colour(r.outcome),
                    };
                    let _ = write!(
                        page,
                        "<td class=\"cell\" style=\"background:{}\" title=\"{}\">{}</td>",
                        shade,
                        esc(&tip),
                        esc(&e.name(r.outcome))
                    );
                }
                None => page += "<td></td>",
            }
        }
        page += "</tr>";
    }
    page += "</table>";
    if meta.profiles.iter().any(|p| p == SECURITY) {
        page += &security::html(meta, records);
    }
    page += &network::html(meta, records).unwrap_or_default();
    page += "<h2>Timings</h2>";
    let all: Vec<&Record> = records.values().collect();
    let boot: Vec<f64> = all.iter().filter_map(|r| r.timings.boot_ms).collect();
    let first: Vec<f64> = all
        .iter()
        .flat_map(|r| verdict::first_responses(r))
        .collect();
    page += &histogram("Boot: mcpvm run to the guest agent (all runs)", &boot, 12);
    page += &histogram(
        "First response: spawn to the handshake answer (all runs)",
        &first,
        12,
    );
    // Slowest (baseline first response) and most fragile (non-ok cells).
    let mut slow: Vec<(&String, f64)> = servers
        .iter()
        .filter_map(|s| {
            let r = cell(records, s, meta.profiles.first()?)?;
            Some((*s, Spread::of(&verdict::first_responses(r))?.median))
        })
        .collect();
    slow.sort_by(|a, b| b.1.total_cmp(&a.1));
    let mut fragile: Vec<(&String, usize)> = servers
        .iter()
        .map(|s| {
            let n = meta
                .profiles
                .iter()
                .filter(|p| {
                    *p != SECURITY
                        && cell(records, s, p).is_some_and(|r| effect(records, r).profile_caused())
                })
                .count();
            (*s, n)
        })
        .filter(|(_, n)| *n > 0)
        .collect();
    fragile.sort_by_key(|f| std::cmp::Reverse(f.1));
    let _ = write!(
        page,
        "<h2>Slowest servers</h2><p>First response under the first profile ({}).</p><ol>",
        esc(meta.profiles.first().map(String::as_str).unwrap_or(""))
    );
    for (s, v) in slow.iter().take(5) {
        let _ = write!(page, "<li>{} — {v:.0} ms</li>", esc(s));
    }
    page += "</ol><h2>Most fragile servers</h2><ol>";
    for (s, n) in fragile.iter().take(5) {
        let _ = write!(
            page,
            "<li>{} — newly fails or breaks under {n} of {} profiles (against its baseline)</li>",
            esc(s),
            meta.profiles.len()
        );
    }
    page += "</ol><h2>Evidence</h2>";
    for s in &servers {
        let sm = &meta.servers[*s];
        let _ = write!(
            page,
            "<h3>{} <small>{} {}</small></h3>",
            esc(s),
            esc(&sm.package),
            esc(&sm.version)
        );
        for p in &meta.profiles {
            let Some(r) = cell(records, s, p) else {
                continue;
            };
            let _ = write!(
                page,
                "<details><summary><b>{}</b>: <span style=\"color:{}\">{}</span> — first response {}, boot {}</summary>",
                esc(p),
                colour(r.outcome),
                r.outcome.name(),
                esc(&first_response(records, r)),
                ms(r.timings.boot_ms)
            );
            if let Some(varied) = varied_outcomes(r) {
                let _ = write!(page, "<p>Outcomes varied across runs: {}</p>", esc(&varied));
            }
            let e = evidence_line(r);
            if !e.is_empty() {
                let _ = write!(page, "<p>{}</p>", esc(&e));
            }
            if !r.evidence.errors.is_empty() {
                page += "<ul>";
                for err in &r.evidence.errors {
                    let _ = write!(page, "<li>{}</li>", esc(err));
                }
                page += "</ul>";
            }
            if let Some(u) = used(r) {
                let _ = write!(
                    page,
                    "<p>{} distinct system calls: {}</p>",
                    u.len(),
                    esc(&u.join(" "))
                );
            }
            if !r.evidence.stderr_tail.trim().is_empty() {
                let _ = write!(
                    page,
                    "<pre>{}</pre>",
                    esc(r.evidence.stderr_tail.trim_end())
                );
            }
            page += "</details>";
        }
    }
    page += "</body></html>\n";
    page
}

/// From a server's logging run: a profile that allows only the calls it
/// made. None when no run of the server logged its calls.
pub fn proposal(
    meta: &Meta,
    records: &BTreeMap<(String, String), Record>,
    server: &str,
) -> Option<String> {
    let (profile, r) = meta.profiles.iter().find_map(|p| {
        cell(records, server, p)
            .filter(|r| r.syscalls_used.is_some())
            .map(|r| (p, r))
    })?;
    let calls = used(r)?;
    let sm = meta.servers.get(server)?;
    #[derive(serde::Serialize)]
    struct Proposed<'a> {
        description: String,
        allow: &'a [&'a str],
    }
    let mut profiles = BTreeMap::new();
    profiles.insert(
        format!("{server}-minimal"),
        Proposed {
            description: format!(
                "Only the {} system calls {server} made in its {profile} run",
                calls.len()
            ),
            allow: &calls,
        },
    );
    let mut doc = BTreeMap::new();
    doc.insert("profile", profiles);
    let body = toml::to_string_pretty(&doc).ok()?;
    let note = |s: &str| s.replace(['\n', '\r'], " ");
    Some(format!(
        "# Proposed by `mcpvm audit` from the {profile} run of {server} ({} {}):\n\
         # the {} system calls it made there. A call it makes only on paths that\n\
         # run did not take will fail with EPERM (and be reported): audit again\n\
         # with this profile to check it.\n\
         # Use: mcpvm run --server {server} --profiles THIS_FILE --profile {server}-minimal\n\n{body}",
        note(&sm.package),
        note(&sm.version),
        calls.len(),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::audit::matrix::Shard;
    use crate::audit::meta::ServerMeta;
    use crate::audit::record::{Evidence, Sample, Timings};
    use mcpvm_protocol::messages::SyscallCount;

    fn meta() -> Meta {
        let server = |p: &str| ServerMeta {
            package: p.into(),
            version: "1.0".into(),
            runtime: "python".into(),
            layer: "k".into(),
            lock: None,
            roots: vec![],
        };
        Meta {
            schema: 1,
            mcpvm_version: "0.1.0".into(),
            kernel: "vmlinux".into(),
            kernel_sha256: "abcd".into(),
            runtime_image: "runtime-1.erofs".into(),
            catalogue: "(built in)".into(),
            servers: [
                ("git".to_string(), server("mcp-server-git")),
                ("time".to_string(), server("mcp-server-time")),
            ]
            .into_iter()
            .collect(),
            profiles: vec!["baseline".into(), "deny-exec".into()],
            profile_definitions: [
                (
                    "baseline".to_string(),
                    serde_json::json!({"description": "nothing withheld"}),
                ),
                (
                    "deny-exec".to_string(),
                    serde_json::json!({"description": "no exec"}),
                ),
            ]
            .into_iter()
            .collect(),
            shard: Shard::ALL,
            started_at: 0,
            warm: false,
            order: super::super::matrix::ORDER.into(),
            repeat: 1,
        }
    }

    fn record(s: &str, p: &str, outcome: Outcome, handshake: f64) -> Record {
        Record {
            schema: 1,
            server: s.into(),
            profile: p.into(),
            outcome,
            failed_step: (outcome != Outcome::Ok).then(|| "tools/call:git_status".into()),
            lifecycle: Some("initialize".into()),
            tools_ok: vec![],
            tools_failed: vec![],
            timings: Timings {
                wall_ms: 1.0,
                boot_ms: Some(400.0),
                handshake_ms: Some(handshake),
                tools_list_ms: None,
            },
            evidence: Evidence {
                denied: if outcome == Outcome::Ok {
                    vec![]
                } else {
                    vec![SyscallCount {
                        syscall: "execve".into(),
                        errno: Some("EPERM".into()),
                        count: 2,
                    }]
                },
                errors: if outcome == Outcome::Ok {
                    vec![]
                } else {
                    vec!["tools/call:git_status: tool_error: <denied>".into()]
                },
                stderr_tail: "Traceback\nPermissionError: [Errno 1]\n".into(),
                exit: serde_json::json!({"code": 0}),
                oom: false,
            },
            syscalls_used: (p == "baseline").then(|| {
                vec![
                    SyscallCount {
                        syscall: "read".into(),
                        errno: None,
                        count: 9,
                    },
                    SyscallCount {
                        syscall: "execve".into(),
                        errno: None,
                        count: 1,
                    },
                ]
            }),
            samples: vec![],
            security: None,
            network: Vec::new(),
            jailed: Some(true),
            finished_at: 0,
        }
    }

    fn records() -> BTreeMap<(String, String), Record> {
        [
            record("git", "baseline", Outcome::Ok, 900.0),
            record("git", "deny-exec", Outcome::Degraded, 950.0),
            record("time", "baseline", Outcome::Ok, 1200.0),
        ]
        .into_iter()
        .map(|r| ((r.server.clone(), r.profile.clone()), r))
        .collect()
    }

    #[test]
    fn the_report_says_whether_the_vmms_ran_jailed() {
        let meta = meta();
        let mut rs = records();
        assert!(markdown(&meta, &rs).contains("Every VMM ran jailed (3 runs)"));
        rs.get_mut(&("git".into(), "deny-exec".into()))
            .unwrap()
            .jailed = Some(false);
        assert!(markdown(&meta, &rs).contains("1 of 3 VMMs ran without a jail"));
        assert!(html(&meta, &rs).contains("1 of 3 VMMs ran without a jail"));
        rs.values_mut().for_each(|r| r.jailed = None);
        assert!(markdown(&meta, &rs).contains("No run said whether its VMM was jailed"));
    }

    #[test]
    fn the_network_section_shows_what_each_server_tried_under_each_profile() {
        let meta = meta();
        let mut rs = records();
        assert!(
            !markdown(&meta, &rs).contains("## Network"),
            "no tries, no section"
        );
        let git = rs.get_mut(&("git".into(), "baseline".into())).unwrap();
        git.network = vec![
            "dns allowed.test allowed".into(),
            "connect allowed.test@198.51.100.7:80 allowed".into(),
        ];
        let denied = rs.get_mut(&("git".into(), "deny-exec".into())).unwrap();
        denied.network = vec!["dns allowed.test denied (allowed.test is not allowed)".into()];
        denied
            .network
            .extend((0..10).map(|i| format!("dns n{i}.test denied (<no>)")));
        let text = markdown(&meta, &rs);
        let row = text
            .lines()
            .find(|l| l.starts_with("| git |") && l.contains("dns allowed.test allowed"))
            .unwrap_or_else(|| panic!("{text}"));
        assert!(
            row.contains("connect allowed.test@198.51.100.7:80 allowed"),
            "{row}"
        );
        assert!(
            row.contains("dns allowed.test denied (allowed.test is not allowed)"),
            "{row}"
        );
        assert!(row.contains("and 3 more"), "{row}");
        let page = html(&meta, &rs);
        assert!(page.contains("<h2>Network</h2>"));
        assert!(
            page.contains("✗ dns n0.test denied (&lt;no&gt;)"),
            "escaped"
        );
        assert!(page.contains("✓ dns allowed.test allowed"));
    }

    #[test]
    fn a_security_column_shows_findings_with_evidence_and_how_to_reproduce_them() {
        use crate::audit::record::Security;
        use probes::findings::Finding;
        let mut meta = meta();
        meta.profiles.push(SECURITY.into());
        let mut rs = records();
        let mut git = record("git", SECURITY, Outcome::Ok, 950.0);
        git.security = Some(Security {
            attacks: 44,
            tools: vec!["git_diff".into(), "git_status".into()],
            roots: vec!["/workspace/repo".into()],
            findings: vec![Finding {
                class: "argument-injection".into(),
                rule: "marker-made".into(),
                severity: "high".into(),
                step: "attack:git_diff".into(),
                call: Some(r#"git_diff={"target":"--output=/tmp/m'1"}"#.into()),
                argument: Some("/target".into()),
                payload: Some("`touch /tmp/m`<b>".into()),
                attempts: 2,
                why: "the payload ran".into(),
                evidence: vec![serde_json::from_value(serde_json::json!({"event": "effect",
                    "uptime_ms": 1, "pid": 7, "call": "openat", "paths": ["/tmp/m"],
                    "access": "write+create", "exe": "/usr/bin/git", "during": {"phase": "start_up"}}))
                .unwrap()],
            }],
            not_judged: None,
        });
        rs.insert(("git".into(), SECURITY.into()), git);
        let mut time = record("time", SECURITY, Outcome::Ok, 800.0);
        time.security = Some(Security {
            attacks: 20,
            tools: vec!["get_current_time".into()],
            roots: vec!["/workspace".into()],
            findings: vec![],
            not_judged: None,
        });
        rs.insert(("time".into(), SECURITY.into()), time);
        let md = markdown(&meta, &rs);
        assert!(md.contains("| git | ✓ | ◐ | ⚠1 |"), "{md}");
        assert!(md.contains("| time | ✓ |   | ○ |"), "{md}");
        assert!(md.contains("- **git**: 1 finding in 44 attacks on 2 tools (git\\_diff, git\\_status), judged against the roots /workspace/repo"), "{md}");
        assert!(md.contains("**argument-injection** (marker-made, high) in git\\_diff, argument /target ← payload \"\\`touch /tmp/m\\`\\<b\\>\" and 1 more: the payload ran"), "{md}");
        assert!(
            md.contains("evidence: openat /tmp/m (write+create) by /usr/bin/git"),
            "{md}"
        );
        // The reproducing command is quoted for a shell.
        assert!(md.contains(r#"reproduce: mcpvm probe --server git --profile observe --only-given --call 'git\_diff={"target":"--output=/tmp/m'\\''1"}'"#), "{md}");
        assert!(md.contains("- **time**: no finding in 20 attacks"), "{md}");
        // Where nothing could be judged, the cell says so, never "none".
        let mut blind = rs.clone();
        let t = blind.get_mut(&("time".into(), SECURITY.into())).unwrap();
        t.security.as_mut().unwrap().not_judged = Some("the VM reported no canaries".into());
        let md_blind = markdown(&meta, &blind);
        assert!(md_blind.contains("| time | ✓ |   | ? |"), "{md_blind}");
        assert!(
            md_blind
                .contains("- **time**: not judged (20 attacks sent): the VM reported no canaries"),
            "{md_blind}"
        );
        // Not a withholding profile: nothing about it in what profiles did.
        assert!(!md.contains("- **security**: nothing the baseline"), "{md}");
        let page = html(&meta, &rs);
        assert!(page.contains("<h2>Security findings</h2>"));
        assert!(page.contains("&lt;b&gt;") && !page.contains("`touch /tmp/m`<b>"));
        assert!(page.contains(">⚠1</td>"), "{page}");
        let log = super::security::sarif(&meta, &rs);
        let runs = log["runs"].as_array().unwrap();
        assert_eq!(runs.len(), 2, "a run per server attacked");
        assert_eq!(runs[0]["results"][0]["ruleId"], "argument-injection");
        assert_eq!(runs[1]["results"], serde_json::json!([]));
    }

    #[test]
    fn the_markdown_matrix_has_a_symbol_per_cell_and_the_evidence() {
        let md = markdown(&meta(), &records());
        assert!(md.contains("| server | baseline | deny-exec |"), "{md}");
        assert!(md.contains("| git | ✓ | ◐ |"), "{md}");
        assert!(md.contains("| time | ✓ |   |"), "{md}");
        assert!(md.contains("3 of 4 runs recorded"), "{md}");
        assert!(md.contains("- **deny-exec**: degraded, 1 new failure — first response 950 ms, boot 400 ms; failed at tools/call:git\\_status; denied execve ×2 (EPERM)"), "{md}");
        // What each profile did comes first, against the baseline.
        let findings = md.find("## What each profile did").unwrap();
        assert!(findings < md.find("## Matrix").unwrap());
        assert!(
            md.contains(
                "- **deny-exec**: made **git** fail tools/call:git\\_status; denied execve ×2"
            ),
            "{md}"
        );
        assert!(
            md.contains("allow-list: `profiles/git-minimal.toml`"),
            "{md}"
        );
        assert!(
            md.contains(r"stderr: Traceback ⏎ PermissionError: \[Errno 1\]"),
            "{md}"
        );
    }

    #[test]
    fn repeated_runs_show_their_spread_and_a_slower_start_against_the_baseline() {
        let once = markdown(&meta(), &records());
        let mut meta = meta();
        meta.repeat = 5;
        let with_samples = |mut r: Record, firsts: [f64; 5], last: Outcome| {
            r.samples = firsts
                .iter()
                .enumerate()
                .map(|(i, &t)| Sample {
                    outcome: if i == 4 { last } else { r.outcome },
                    boot_ms: Some(400.0),
                    handshake_ms: Some(t),
                })
                .collect();
            r.timings.handshake_ms = Some(firsts[0]);
            r
        };
        let mut records = records();
        let base = with_samples(
            record("time", "baseline", Outcome::Ok, 0.0),
            [1200.0, 1100.0, 1300.0, 1250.0, 1150.0],
            Outcome::Ok,
        );
        let slow = with_samples(
            record("time", "deny-exec", Outcome::Ok, 0.0),
            [1700.0, 1800.0, 1650.0, 1750.0, 1900.0],
            Outcome::Degraded,
        );
        records.insert(("time".into(), "baseline".into()), base);
        records.insert(("time".into(), "deny-exec".into()), slow);
        let md = markdown(&meta, &records);
        assert!(md.contains("Each cell ran 5 times in a row"), "{md}");
        assert!(md.contains("| time | ✓ | ◷ |"), "{md}");
        assert!(
            md.contains("slowed **time**'s first response to 1.46× (1750 ms (1650–1900, 5 runs) against 1200 ms (1100–1300, 5 runs), no run overlapping)"),
            "{md}"
        );
        assert!(
            md.contains("first response 1750 ms (1650–1900, 5 runs), 1.46× the baseline's, boot 400 ms; outcomes varied across runs: ok ×4, degraded ×1"),
            "{md}"
        );
        // One run per cell: the report says timings are hints.
        assert!(once.contains("`--repeat 5` measures it"), "{once}");
        let h = html(&meta, &records);
        assert!(
            h.contains("Outcomes varied across runs: ok ×4, degraded ×1"),
            "{h}"
        );
        assert!(h.contains("(12 runs)"), "every run in the histogram: {h}");
        assert!(h.contains("Each cell ran 5 times in a row"), "{h}");
        assert!(h.contains("#a8a040"), "a slower start has its own shade");
    }

    #[test]
    fn the_html_page_is_self_contained_and_escapes_what_servers_said() {
        let h = html(&meta(), &records());
        assert!(
            !h.contains("http://") && !h.contains("https://"),
            "no external resources"
        );
        assert!(h.contains("&lt;denied&gt;") && !h.contains("<denied>"));
        assert!(h.contains("<svg"));
        assert!(h.contains("title=\"git × deny-exec: degraded."));
        assert!(h.contains("<li>time — 1200 ms</li>"), "slowest first");
        assert!(
            h.contains(
                "<li>git — newly fails or breaks under 1 of 2 profiles (against its baseline)</li>"
            ),
            "{h}"
        );
        assert!(h.find("What each profile did").unwrap() < h.find("<h2>Matrix").unwrap());
    }

    #[test]
    fn a_proposal_is_a_profile_the_profiles_parser_accepts() {
        let text = proposal(&meta(), &records(), "git").unwrap();
        let p = crate::withholding::Profiles::parse(&text, "proposal").unwrap();
        let r = p.resolve("git-minimal").unwrap();
        let allow = r.policy.seccomp.unwrap().allow.unwrap();
        assert_eq!(allow.syscalls, ["read", "execve"]);
        assert!(proposal(&meta(), &BTreeMap::new(), "git").is_none());
    }

    #[test]
    fn histograms_have_axes_and_counts() {
        let h = histogram("First response", &[100.0, 110.0, 120.0, 400.0], 4);
        assert!(h.contains("(4 runs)"), "{h}");
        assert_eq!(h.matches("<line").count(), 2, "two axes: {h}");
        assert!(
            h.contains(">runs</text>")
                && h.contains(">100 ms</text>")
                && h.contains(">400 ms</text>"),
            "{h}"
        );
        // The bar of the three fast runs says 3 on it.
        assert!(h.contains("text-anchor=\"middle\">3</text>"), "{h}");
    }

    #[test]
    fn a_server_that_fails_in_its_baseline_is_not_called_fragile() {
        // The eslint case: one tool fails on our arguments under every
        // profile, baseline included.
        let mut rs = records();
        let same = "tools/call:lint-files: tool_error: No files matching 'mcpvm-probe' were found";
        for p in ["baseline", "deny-exec"] {
            let r = rs.get_mut(&("git".into(), p.into())).unwrap();
            r.outcome = Outcome::Degraded;
            r.evidence.errors = vec![same.into()];
            r.evidence.denied.clear();
        }
        let md = markdown(&meta(), &rs);
        assert!(md.contains("| git | ◐ | = |"), "{md}");
        assert!(
            md.contains("- **deny-exec**: nothing the baseline did not have"),
            "{md}"
        );
        assert!(md.contains("fail under `baseline` itself"), "{md}");
        assert!(
            md.contains("- **git**: degraded: tools/call:lint-files"),
            "{md}"
        );
        let h = html(&meta(), &rs);
        assert!(
            !h.contains("newly fails or breaks under"),
            "not fragile: {h}"
        );
    }

    #[test]
    fn guest_text_cannot_write_a_profile_or_markup() {
        let mut rs = records();
        let git = rs.get_mut(&("git".into(), "baseline".into())).unwrap();
        let evil = "read\"]\n[profile.x]\nallow = [\"*";
        git.syscalls_used = Some(vec![
            SyscallCount {
                syscall: "execve".into(),
                errno: None,
                count: 1,
            },
            SyscallCount {
                syscall: evil.into(),
                errno: None,
                count: 1,
            },
        ]);
        git.evidence.errors =
            vec!["tools/call:x: error: <img src=x> | # [link](javascript:x)\n\u{1b}[2J".into()];
        let text = proposal(&meta(), &rs, "git").unwrap();
        let p = crate::withholding::Profiles::parse(&text, "proposal").unwrap();
        let allow = p
            .resolve("git-minimal")
            .unwrap()
            .policy
            .seccomp
            .unwrap()
            .allow
            .unwrap();
        assert_eq!(
            allow.syscalls,
            ["execve"],
            "not a system call name: left out"
        );
        assert!(p.resolve("x").is_err(), "no profile injected");
        let md = markdown(&meta(), &rs);
        let line = md.lines().find(|l| l.contains("img src")).unwrap();
        // Every markup character comes escaped, and the escape byte as text.
        for c in ['<', '>', '[', ']', '|', '#'] {
            let bare = line.replace(&format!("\\{c}"), "");
            assert!(!bare.contains(c), "{c} in {line}");
        }
        assert!(!line.contains('\u{1b}'), "{line}");
    }

    #[test]
    fn changed_inputs_are_named() {
        let (a, mut b) = (meta(), meta());
        assert!(a.same_inputs(&b).is_empty());
        b.kernel_sha256 = "ffff".into();
        b.profiles.push("ro-root".into());
        b.warm = true;
        b.repeat = 5;
        assert_eq!(
            a.same_inputs(&b),
            [
                "kernel",
                "profiles",
                "warm starts",
                "runs per cell (--repeat)"
            ]
        );
    }

    #[test]
    fn an_audit_written_before_warm_starts_reads_as_cold() {
        let mut v = serde_json::to_value(meta()).unwrap();
        v.as_object_mut().unwrap().remove("warm");
        v.as_object_mut().unwrap().remove("repeat");
        let m: Meta = serde_json::from_value(v).unwrap();
        assert!(!m.warm);
        assert_eq!(m.repeat, 1, "older audits ran each cell once");
    }
}

//! A large audit's report, in pages. One page for 10,000 servers is tens
//! of megabytes of HTML that no browser shows usefully (58 MB measured,
//! `benches/report-scale.sh`), so past [`PAGE`] servers `report.html`
//! and `report.md` are a summary — the counts over every server, the
//! worst servers first, an index of the pages, the timings — and
//! `pages/NNN.html` and `.md` each hold the whole report of [`PAGE`]
//! servers, as a small audit's report is. Each page is built, written
//! and dropped before the next, so memory holds one page at a time.

use std::collections::{BTreeMap, HashMap};
use std::path::Path;

use super::compat::{self, Compat, Verdict};
use super::document::{Block, Document, Item, Line};
use super::meta::Meta;
use super::output::{out_err, write_atomic, AuditError};
use super::record::Record;
use super::{render, report};

type Records = BTreeMap<(String, String), Record>;

/// Servers per page, and the most rows the summary's table shows.
pub const PAGE: usize = 250;
const WORST: usize = 200;
const DIR: &str = "pages";

/// Whether an audit of this size is reported in pages.
pub fn paged(meta: &Meta) -> bool {
    meta.servers.len() > PAGE
}

/// Writes `pages/NNN.{html,md}` and the summary as `report.{html,md}`.
pub fn write(
    out: &Path,
    meta: &Meta,
    records: &Records,
    verdicts: &[Compat],
) -> Result<(), AuditError> {
    let dir = out.join(DIR);
    mcpvm::host::files::own_dir(&dir).map_err(out_err(&dir))?;
    let names: Vec<&String> = meta.servers.keys().collect();
    let verdict_of: HashMap<&str, Verdict> = verdicts
        .iter()
        .map(|c| (c.server.as_str(), c.verdict))
        .collect();
    let pages = names.len().div_ceil(PAGE);
    let mut index = Vec::new();
    for (k, chunk) in names.chunks(PAGE).enumerate() {
        let stem = format!("{:03}", k + 1);
        let range = format!("{} to {}", chunk[0], chunk[chunk.len() - 1]);
        let (m, r) = subset(meta, records, chunk);
        let mut doc = report::document(&m, &r);
        doc.title = format!(
            "mcpvm audit: servers {} to {} of {}",
            k * PAGE + 1,
            k * PAGE + chunk.len(),
            names.len()
        );
        doc.blocks.insert(
            0,
            Block::Para(
                Line::default()
                    .page("The summary", "../report")
                    .and(format!(
                        ": every server counted, the worst first. Page {} of {pages}: {range}.",
                        k + 1
                    )),
            ),
        );
        write_atomic(&dir.join(format!("{stem}.md")), &render::markdown(&doc))?;
        write_atomic(&dir.join(format!("{stem}.html")), &render::html(&doc))?;
        let count = |v| {
            chunk
                .iter()
                .filter(|s| verdict_of.get(s.as_str()) == Some(&v))
                .count()
        };
        index.push(Item::of(
            Line::default()
                .page(format!("page {}", k + 1), format!("{DIR}/{stem}"))
                .and(format!(
                    ": {range} ({} fit, {} not fit, {} inconclusive)",
                    count(Verdict::Fit),
                    count(Verdict::NotFit),
                    count(Verdict::Inconclusive)
                )),
        ));
    }
    remove_beyond(&dir, pages);
    let doc = summary(meta, records, verdicts, index);
    write_atomic(&out.join("report.md"), &render::markdown(&doc))?;
    write_atomic(&out.join("report.html"), &render::html(&doc))?;
    Ok(())
}

/// The summary page: what ran, every verdict counted with the worst
/// rows, the pages, the profiles and the timings over every run.
fn summary(meta: &Meta, records: &Records, verdicts: &[Compat], index: Vec<Item>) -> Document {
    let mut blocks = report::header(meta, records);
    blocks.extend(compat::worst_section(
        verdicts,
        meta.servers.len(),
        WORST,
        "Every server's row, its matrix cells and its findings are on its page.",
    ));
    blocks.extend(super::allow::section(&report::checks(verdicts)));
    blocks.push(Block::Heading(2, "Pages".into()));
    blocks.push(Block::Para(Line::text(format!(
        "{PAGE} servers a page, in name order; findings.sarif and compat.json hold every server."
    ))));
    blocks.push(Block::List {
        ordered: false,
        items: index,
    });
    blocks.extend(report::profiles(meta));
    blocks.extend(report::timings(meta, records));
    Document {
        title: "mcpvm audit".into(),
        blocks,
    }
}

/// The audit of `servers` alone: their metadata and cells.
fn subset(meta: &Meta, records: &Records, servers: &[&String]) -> (Meta, Records) {
    let mut m = meta.clone_without_servers();
    let mut r = Records::new();
    for s in servers {
        if let Some(sm) = meta.servers.get(*s) {
            m.servers.insert((*s).clone(), sm.clone());
        }
        if let Some(o) = meta.origins.get(*s) {
            m.origins.insert((*s).clone(), o.clone());
        }
        for p in &meta.profiles {
            let key = ((*s).clone(), p.clone());
            if let Some(rec) = records.get(&key) {
                r.insert(key, rec.clone());
            }
        }
    }
    (m, r)
}

/// Pages an earlier report of more servers left (`NNN.html`, `.md`).
fn remove_beyond(dir: &Path, pages: usize) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        let name = e.file_name().to_string_lossy().to_string();
        let stem = name.trim_end_matches(".html").trim_end_matches(".md");
        if stem.len() == 3 && stem.parse::<usize>().is_ok_and(|n| n > pages) {
            let _ = std::fs::remove_file(e.path());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::audit::record::Outcome;
    use crate::audit::report::tests::{meta, record};

    /// An audit of PAGE × 2 + 1 servers: a summary and three pages, each
    /// holding its own servers only, linked both ways; every server is
    /// counted in the summary, and a later report of fewer servers
    /// leaves no page of the earlier one behind.
    #[test]
    fn a_large_audit_is_a_summary_and_pages_of_its_servers() {
        let mut m = meta();
        let template = m.servers["git"].clone();
        m.servers.clear();
        let mut records = Records::new();
        let n = PAGE * 2 + 1;
        for i in 0..n {
            let s = format!("s{i:04}");
            m.servers.insert(s.clone(), template.clone());
            for p in m.profiles.clone() {
                let outcome = if i % 10 == 0 {
                    Outcome::Crash
                } else {
                    Outcome::Ok
                };
                records.insert((s.clone(), p.clone()), record(&s, &p, outcome, 900.0));
            }
        }
        assert!(paged(&m));
        let out = tempfile::tempdir().unwrap();
        let verdicts = compat::all(&m, &records);
        write(out.path(), &m, &records, &verdicts).unwrap();
        let summary = std::fs::read_to_string(out.path().join("report.md")).unwrap();
        assert!(summary.contains(&format!("of {n} fit")), "{summary}");
        for (k, first, last) in [
            (1, 0, PAGE - 1),
            (2, PAGE, 2 * PAGE - 1),
            (3, 2 * PAGE, 2 * PAGE),
        ] {
            let range = format!("s{first:04} to s{last:04}");
            assert!(
                summary.contains(&format!("[page {k}](<pages/{k:03}.md>): {range}")),
                "{summary}"
            );
            let page =
                std::fs::read_to_string(out.path().join(format!("pages/{k:03}.md"))).unwrap();
            assert!(page.contains("[The summary](<../report.md>)"), "{page}");
            assert!(
                page.contains(&format!("### s{first:04}"))
                    && page.contains(&format!("### s{last:04}"))
            );
            let html =
                std::fs::read_to_string(out.path().join(format!("pages/{k:03}.html"))).unwrap();
            assert!(html.contains("href=\"../report.html\""));
            // Only its own servers.
            let others = page.matches("### s").count();
            assert_eq!(others, last - first + 1, "page {k}");
        }
        let html = std::fs::read_to_string(out.path().join("report.html")).unwrap();
        assert!(html.contains("href=\"pages/001.html\""));
        assert!(
            html.len() < 2 << 20,
            "the summary stays small: {} bytes",
            html.len()
        );
        // Fewer servers later: page 3 goes.
        let keep: Vec<String> = m.servers.keys().take(PAGE + 1).cloned().collect();
        m.servers.retain(|s, _| keep.contains(s));
        records.retain(|(s, _), _| keep.contains(s));
        let verdicts = compat::all(&m, &records);
        write(out.path(), &m, &records, &verdicts).unwrap();
        assert!(out.path().join("pages/002.md").exists());
        assert!(!out.path().join("pages/003.md").exists());
        assert!(!out.path().join("pages/003.html").exists());
    }
}

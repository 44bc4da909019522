//! The registry sample's population figures (docs/registry.md): the
//! table `benches/lib/registry-table.py` renders from the recorded draw
//! and audit in docs/registry/2026-12-06-sample holds what the page
//! publishes, a row for every drawn listing.

mod common;

const SAMPLE: &str = "docs/registry/2026-12-06-sample";

fn table() -> String {
    let dir = common::workspace().join(SAMPLE);
    let (sample, run922) = (dir.join("sample.json"), dir.join("automatelab-922.tsv"));
    common::bench_script(
        "benches/lib/registry-table.py",
        &[sample.as_os_str(), dir.as_os_str(), run922.as_os_str()],
    )
}

#[test]
fn every_drawn_listing_is_a_row_of_the_published_figures() {
    let t = table();
    let rows = t
        .lines()
        .filter(|l| l.starts_with("| npm-") || l.starts_with("| pypi-") || l.starts_with("| @"))
        .count();
    // 200 drawn: 199 entries and the one listed at `latest`.
    assert_eq!(rows, 200, "{t}");
    assert!(
        t.lines()
            .any(|l| l.starts_with("| @agent-infra/mcp-server-search |") && l.contains("`refused`")),
        "the refused listing is a row: {t}"
    );
    for line in PUBLISHED {
        assert!(
            t.contains(line),
            "docs/registry.md says {line:?}; the table:\n{t}"
        );
    }
    let page = std::fs::read_to_string(common::workspace().join("docs/registry.md")).unwrap();
    for line in PUBLISHED {
        assert!(page.contains(line), "docs/registry.md lacks {line:?}");
    }
}

/// The figures docs/registry.md gives, as the table renders them (all
/// 124 cells of the 62 servers that install and the 22 runs as
/// released, 2026-12-06).
const PUBLISHED: &[&str] = &[
    "| installs | 62/200 = 31.0 % (25.0–37.7) | 62/81 = 76.5 % (66.2–84.4) |",
    "| answers a handshake | 29/200 = 14.5 % (10.3–20.0) | 29/81 = 35.8 % (26.2–46.7) |",
    "| fit | 2/200 = 1.0 % (0.3–3.6) | 2/81 = 2.5 % (0.7–8.6) |",
    "| not fit | 26/200 = 13.0 % (9.0–18.4) | 26/81 = 32.1 % (22.9–42.9) |",
    "| `sibling-prefix` | high | 4/62 = 6.5 % (2.5–15.4) |",
    "| ours listed; theirs needs\\_env\\_var | 1 |",
    "| has a security finding | 8/200 = 4.0 % (2.0–7.7) | 8/81 = 9.9 % (5.1–18.3) |",
    "| dead on today's dependencies, answers as released | 15/200 = 7.5 % (4.6–12.0) | 15/81 = 18.5 % (11.6–28.3) |",
    "| theirs listed; not installable from here (not\\_served) | 83 |",
];

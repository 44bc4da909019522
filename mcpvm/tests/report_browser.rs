//! The ecosystem audit's report.html is what most people look at: it is
//! rendered again from the corpus run's records (docs/ecosystem/, by
//! `mcpvm audit merge`) and opened in a real browser, Debian's Chromium
//! headless (`scripts/setup --tests` installs it). It must load with no
//! script error and show every server's verdict; its screenshot is kept
//! for docs/ecosystem.md (`target/screenshots/ecosystem-report.png`).

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn chromium() -> PathBuf {
    for p in ["/usr/bin/chromium", "/usr/bin/chromium-browser"] {
        if Path::new(p).exists() {
            return p.into();
        }
    }
    panic!("Chromium is not installed: this test opens report.html in it. Run scripts/setup --tests (apt-get install chromium)");
}

/// Chromium headless on a file, as root in a container: no sandbox, no
/// GPU, its console on stderr; bounded by `timeout`.
fn browse(page: &Path, extra: &[&str]) -> (String, String) {
    let profile = tempfile::tempdir().unwrap();
    let out = Command::new("timeout")
        .arg("120")
        .arg(chromium())
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--no-first-run",
            "--enable-logging=stderr",
            "--v=0",
        ])
        .arg(format!("--user-data-dir={}", profile.path().display()))
        .args(extra)
        .arg(format!("file://{}", page.display()))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "chromium failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// The page's DOM once Chromium has loaded it, asserting no script error.
fn load(page: &Path) -> String {
    let (dom, console) = browse(page, &["--dump-dom"]);
    for line in console.lines() {
        assert!(
            !line.contains("Uncaught") && !(line.contains("CONSOLE") && line.contains("ERROR")),
            "a script error in {}: {line}",
            page.display()
        );
    }
    dom
}

/// A report of more servers than a page holds (600, made from the
/// corpus run's records by benches/lib/scale-records.py): the summary
/// and every page load, the summary links each page and each page the
/// summary, and a page shows its own servers.
#[test]
fn a_paged_report_loads_in_chromium_and_its_pages_link_both_ways() {
    let work = tempfile::tempdir().unwrap();
    let made = Command::new("python3")
        .arg(repo().join("benches/lib/scale-records.py"))
        .arg("--source")
        .arg(repo().join("docs/ecosystem"))
        .args(["--servers", "600", "--shards", "2", "--out"])
        .arg(work.path().join("in"))
        .output()
        .unwrap();
    assert!(
        made.status.success(),
        "{}",
        String::from_utf8_lossy(&made.stderr)
    );
    let out = work.path().join("out");
    let merged = Command::new(env!("CARGO_BIN_EXE_mcpvm"))
        .args(["audit", "merge", "--out"])
        .arg(&out)
        .arg(work.path().join("in/shard-0"))
        .arg(work.path().join("in/shard-1"))
        .output()
        .unwrap();
    assert!(
        merged.status.success(),
        "{}",
        String::from_utf8_lossy(&merged.stderr)
    );
    let summary = load(&out.join("report.html"));
    assert!(summary.contains("of 600 fit"), "{summary}");
    for k in 1..=3 {
        assert!(
            summary.contains(&format!("href=\"pages/{k:03}.html\"")),
            "{summary}"
        );
        let page = load(&out.join(format!("pages/{k:03}.html")));
        assert!(page.contains("href=\"../report.html\""), "page {k}");
        assert!(page.contains("Compatibility"), "page {k}");
    }
    assert!(!out.join("pages/004.html").exists());
    // Pages follow the servers' names: the second holds the 251st to
    // the 500th.
    let meta: serde_json::Value =
        serde_json::from_slice(&std::fs::read(out.join("audit.json")).unwrap()).unwrap();
    let names: Vec<&String> = meta["servers"].as_object().unwrap().keys().collect();
    let second = load(&out.join("pages/002.html"));
    let has = |i: usize| second.contains(&format!(">{}<", names[i]));
    assert!(
        has(250) && has(499),
        "{} and {} on page 2",
        names[250],
        names[499]
    );
    assert!(
        !has(249) && !has(500),
        "{} or {} on page 2",
        names[249],
        names[500]
    );
}

#[test]
fn the_corpus_report_loads_in_chromium_and_shows_every_server() {
    let data = repo().join("docs/ecosystem");
    let (out, said) = common::merge_corpus();
    // That pass ran every cell: the merge has no gap to name.
    assert!(!said.contains("partial"), "{said}");
    let page = out.path().join("report.html");
    let verdicts: Vec<serde_json::Value> =
        serde_json::from_slice(&std::fs::read(out.path().join("compat.json")).unwrap()).unwrap();
    let recorded: Vec<serde_json::Value> =
        serde_json::from_slice(&std::fs::read(data.join("compat.json")).unwrap()).unwrap();
    assert_eq!(verdicts, recorded, "the report renders the run's verdicts");
    assert_eq!(
        verdicts.len(),
        55,
        "every server of the corpus has a verdict"
    );

    let dom = load(&page);
    assert!(dom.contains("Compatibility"), "{dom}");
    for v in &verdicts {
        let server = v["server"].as_str().unwrap();
        let verdict = v["verdict"].as_str().unwrap();
        let row = dom
            .split("<tr>")
            .find(|r| r.contains(&format!(">{server}<")))
            .unwrap_or_else(|| panic!("no row for {server} in the page"));
        assert!(row.contains(verdict), "{server}: {verdict} not in {row}");
    }

    // Every row's evidence whole in a 1400-pixel window: nothing runs
    // off the right edge (a quoted JSON answer or URL has no spaces to
    // break at). The page measures itself once laid out.
    let measured = out.path().join("measured.html");
    let html = std::fs::read_to_string(&page).unwrap().replace(
        "</body>",
        "<script>document.body.setAttribute('data-overflow', document.documentElement.scrollWidth - document.documentElement.clientWidth)</script></body>",
    );
    std::fs::write(&measured, html).unwrap();
    let (dom, _) = browse(&measured, &["--window-size=1400,900", "--dump-dom"]);
    let overflow: i64 = dom
        .split("data-overflow=\"")
        .nth(1)
        .and_then(|r| r.split('"').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| {
            panic!(
                "the page did not measure itself: {}",
                &dom[..dom.len().min(400)]
            )
        });
    assert!(
        overflow <= 0,
        "the report is {overflow} px wider than a 1400 px window"
    );

    let shots = repo().join("target/screenshots");
    std::fs::create_dir_all(&shots).unwrap();
    let shot = shots.join("ecosystem-report.png");
    let _ = std::fs::remove_file(&shot);
    browse(
        &page,
        &[
            &format!("--screenshot={}", shot.display()),
            "--window-size=1400,2400",
            "--hide-scrollbars",
        ],
    );
    let png = std::fs::read(&shot).unwrap();
    assert!(
        png.starts_with(b"\x89PNG") && png.len() > 20_000,
        "a screenshot with something on it: {} bytes",
        png.len()
    );
}

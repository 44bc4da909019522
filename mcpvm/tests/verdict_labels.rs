//! The recorded corpus run (docs/ecosystem) re-judged with today's rules
//! by `mcpvm audit merge`, against the ground truth: the servers judged
//! by reading their released code (docs/ecosystem/labels). The figures
//! docs/ecosystem.md publishes are asserted here, so a rule change that
//! moves a labelled verdict shows up as a failing test, not as a stale
//! page.

mod common;

use std::path::PathBuf;

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// A verdict's class: `fit`, `not_fit`, or `inconclusive/<reason>`.
fn class(v: &serde_json::Value) -> String {
    match v["reason"].as_str() {
        Some(r) if v["verdict"] == "inconclusive" => format!("inconclusive/{r}"),
        _ => v["verdict"].as_str().unwrap_or("?").to_string(),
    }
}

#[test]
fn the_recorded_corpus_run_rejudged_agrees_with_the_labels() {
    let data = repo().join("docs/ecosystem");
    let (out, _) = common::merge_corpus();
    let verdicts: Vec<serde_json::Value> =
        serde_json::from_slice(&std::fs::read(out.path().join("compat.json")).unwrap()).unwrap();
    let mut labels: Vec<(String, serde_json::Value)> = std::fs::read_dir(data.join("labels"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "json"))
        .map(|p| {
            let name = p.file_stem().unwrap().to_string_lossy().into_owned();
            let label = serde_json::from_slice(&std::fs::read(&p).unwrap()).unwrap();
            (name, label)
        })
        .collect();
    labels.sort_by(|a, b| a.0.cmp(&b.0));
    assert!(labels.len() >= 25, "at least 25 servers labelled");

    let mut wrong = Vec::new();
    let mut false_fit = Vec::new();
    for (server, label) in &labels {
        let v = verdicts
            .iter()
            .find(|v| v["server"] == server.as_str())
            .unwrap_or_else(|| panic!("{server} is labelled but has no verdict"));
        let (want, got) = (class(label), class(v));
        if want != got {
            wrong.push(format!(
                "{server}: labelled {want}, judged {got}: {}",
                v["evidence"]
            ));
        }
        if got == "fit" && want != "fit" {
            false_fit.push(server.clone());
        }
    }
    eprintln!(
        "{} labelled; {} in the wrong class; {} false fit\n{}",
        labels.len(),
        wrong.len(),
        false_fit.len(),
        wrong.join("\n")
    );
    // docs/ecosystem.md, "How far the verdicts can be trusted".
    assert!(false_fit.is_empty(), "false fit: {false_fit:?}");
    assert!(wrong.len() <= WRONG_CLASS, "{}", wrong.join("\n"));
}

/// Labelled servers whose re-judged class differs from the label, as
/// docs/ecosystem.md publishes it.
const WRONG_CLASS: usize = 2;

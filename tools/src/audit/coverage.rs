//! Calls that reached the tools: the audit's equivalent of coverage. Of
//! the safe tools each server's first-profile cell called, how many got
//! an answer that is not a complaint about their arguments
//! (`probes::calls::feedback`), after the retries a refusal asked for. A
//! verdict on a tool whose call never got past its argument check is not
//! a verdict, so the report says per server which tools were not reached
//! and why, and how many attacks were refused for an argument they did
//! not touch.
//!
//! What was learnt is offered back: `learnt-calls.toml` holds, per
//! server, every generated call that reached its tool as a catalogue
//! `audit_calls` table, for a user to review and keep.

use std::collections::BTreeMap;

use serde_json::Value;

use super::document::{list, Block, Cell, Line, Row, Table};
use super::matrix::SECURITY;
use super::meta::Meta;
use super::record::Record;

type Records = BTreeMap<(String, String), Record>;

/// Not-reached tools listed per server; the rest are counted.
const LISTED: usize = 6;

/// The profile whose cells are judged: the first that is not the
/// security column (as the compatibility verdict does).
fn first_profile(meta: &Meta) -> Option<&String> {
    meta.profiles.iter().find(|p| *p != SECURITY)
}

fn percent(reached: usize, called: usize) -> String {
    match called {
        0 => "—".into(),
        _ => format!("{:.0} %", 100.0 * reached as f64 / called as f64),
    }
}

/// The section: the overall figure, then a row per server measured.
pub fn section(meta: &Meta, records: &Records) -> Vec<Block> {
    let Some(first) = first_profile(meta) else {
        return Vec::new();
    };
    let (mut called, mut reached, mut retried, mut retried_reached) = (0, 0, 0, 0);
    let mut first_reached = 0;
    let mut unmeasured = 0;
    let mut rows = Vec::new();
    for s in meta.servers.keys() {
        let Some(r) = records.get(&(s.clone(), first.clone())) else {
            continue;
        };
        let Some(reach) = &r.reach else {
            unmeasured += usize::from(r.lifecycle.is_some());
            continue;
        };
        called += reach.called;
        reached += reach.reached;
        retried += reach.retried;
        retried_reached += reach.retried_reached;
        first_reached += reach.first_reached;
        let mut missed: Vec<String> = reach.not_reached.iter().take(LISTED).cloned().collect();
        if reach.not_reached.len() > LISTED {
            missed.push(format!("and {} more", reach.not_reached.len() - LISTED));
        }
        let attacks = records
            .get(&(s.clone(), SECURITY.to_string()))
            .and_then(|r| r.reach.as_ref())
            .map_or(0, |r| r.attacks_not_reached);
        rows.push(Row {
            head: s.clone(),
            cells: vec![
                Cell::text(format!(
                    "{} of {} ({})",
                    reach.reached,
                    reach.called,
                    percent(reach.reached, reach.called)
                )),
                Cell::text(format!(
                    "{} ({} reached)",
                    reach.retried, reach.retried_reached
                )),
                Cell::text(format!(
                    "{} ({})",
                    reach.first_reached,
                    percent(reach.first_reached, reach.called)
                )),
                Cell::text(attacks.to_string()),
                Cell {
                    lines: missed,
                    ..Cell::default()
                },
            ],
        });
    }
    if rows.is_empty() && unmeasured == 0 {
        return Vec::new();
    }
    let mut para = format!(
        "Of {called} safe tools called with nothing withheld, {reached} reached their tool ({}): an answer that is not a complaint about the arguments. {retried} calls were tried again as a refusal asked ({retried_reached} of them then reached); on their first try alone {first_reached} reached ({}). A tool not reached says nothing of what the profiles withhold or what the attacks would find; each is listed with what it said.",
        percent(reached, called),
        percent(first_reached, called)
    );
    if unmeasured > 0 {
        para += &format!(" {unmeasured} servers' records predate the measure and are left out.");
    }
    let mut blocks = vec![
        Block::Heading(2, "Calls that reached the tools".into()),
        Block::Para(Line::text(para)),
    ];
    if !rows.is_empty() {
        blocks.push(Block::Table(Table {
            head: [
                "server",
                "reached",
                "tried again",
                "first try reached",
                "attacks not reached",
                "not reached",
            ]
            .map(String::from)
            .to_vec(),
            rows,
            grid: false,
        }));
    }
    if records.keys().any(|(_, p)| p == SECURITY) {
        blocks.push(list([Line::text(
            "An attack is not reached when the server refused it for an argument the payload was not in: it is not counted as a clean result.",
        )]));
    }
    blocks
}

/// `learnt-calls.toml`: per server, the generated calls of its
/// first-profile cell that reached their tool, as
/// `[servers.NAME.audit_calls]` tables of inline tables: a file that can
/// be appended to a catalogue whose entries have no `audit_calls` yet, or
/// copied from. None when there are none. A call whose arguments TOML
/// cannot hold (a null) is left out. Names and values are the server's:
/// written as TOML strings, quoted and escaped, never as syntax.
pub fn learnt_toml(meta: &Meta, records: &Records) -> Option<String> {
    let first = first_profile(meta)?;
    let mut out = String::new();
    for s in meta.servers.keys() {
        let Some(r) = records.get(&(s.clone(), first.clone())) else {
            continue;
        };
        let calls: Vec<String> = r
            .learnt_calls
            .iter()
            .filter_map(|(tool, args)| Some(format!("{} = {}\n", key(tool), to_toml(args)?)))
            .collect();
        if calls.is_empty() {
            continue;
        }
        out += &format!("\n[servers.{}.audit_calls]\n", key(s));
        out.extend(calls);
    }
    (!out.is_empty()).then(|| {
        format!(
            "# Tool arguments this audit learnt from the servers' own answers: every\n# call here reached its tool (docs/probe-result.md, \"Calls that reach the\n# tool\"). Review them, then keep a server's `audit_calls` in your catalogue:\n# a later audit calls exactly these.\n{out}"
        )
    })
}

/// A TOML key: bare when it can be, else a quoted string.
fn key(k: &str) -> String {
    let bare = !k.is_empty()
        && k.chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
    match bare {
        true => k.to_string(),
        false => toml::Value::String(k.to_string()).to_string(),
    }
}

/// A JSON value as an inline TOML value; None for what TOML has no
/// form for (null).
fn to_toml(v: &Value) -> Option<String> {
    Some(match v {
        Value::Null => return None,
        Value::Bool(b) => b.to_string(),
        Value::Number(n) => match n.as_i64() {
            Some(i) => i.to_string(),
            None => toml::Value::Float(n.as_f64()?).to_string(),
        },
        Value::String(s) => toml::Value::String(s.clone()).to_string(),
        Value::Array(a) => {
            let items: Option<Vec<String>> = a.iter().map(to_toml).collect();
            format!("[{}]", items?.join(", "))
        }
        Value::Object(m) if m.is_empty() => "{}".into(),
        Value::Object(m) => {
            let items: Option<Vec<String>> = m
                .iter()
                .map(|(k, v)| Some(format!("{} = {}", key(k), to_toml(v)?)))
                .collect();
            format!("{{ {} }}", items?.join(", "))
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::audit::meta::ServerMeta;

    fn meta() -> Meta {
        Meta {
            schema: 1,
            mcpvm_version: "t".into(),
            kernel: "k".into(),
            kernel_sha256: String::new(),
            runtime_image: "r".into(),
            catalogue: "c".into(),
            servers: [(
                "excel".to_string(),
                ServerMeta {
                    package: "excel-mcp-server".into(),
                    version: "2.2.2".into(),
                    runtime: "python".into(),
                    layer: "x".into(),
                    lock: None,
                    ..ServerMeta::default()
                },
            )]
            .into_iter()
            .collect(),
            profiles: vec!["baseline".into()],
            profile_definitions: BTreeMap::new(),
            shard: crate::audit::matrix::Shard::ALL,
            started_at: 0,
            warm: false,
            order: String::new(),
            repeat: 1,
            origins: BTreeMap::new(),
            gaps: Vec::new(),
        }
    }

    /// excel's record of a cell that ran (its fields set by each test).
    fn excel_record() -> super::super::record::Record {
        super::super::record::Record::failed(
            "excel",
            "baseline",
            super::super::record::Outcome::Ok,
            String::new(),
            0.0,
        )
    }

    #[test]
    fn the_section_gives_the_figure_and_each_tool_not_reached() {
        let meta = meta();
        let mut r = excel_record();
        r.lifecycle = Some("initialize".into());
        r.reach = Some(probes::report::result::Reach {
            called: 4,
            reached: 3,
            retried: 2,
            retried_reached: 1,
            first_reached: 2,
            not_reached: vec![
                "insert_image: the answer complains about the arguments: Image not found".into(),
            ],
            attacks_not_reached: 0,
        });
        let mut records = Records::new();
        records.insert(("excel".into(), "baseline".into()), r);
        let md = super::super::render::markdown(&super::super::document::Document {
            title: "t".into(),
            blocks: section(&meta, &records),
        });
        assert!(md.contains("## Calls that reached the tools"), "{md}");
        assert!(
            md.contains(
                "Of 4 safe tools called with nothing withheld, 3 reached their tool (75 %)"
            ),
            "{md}"
        );
        assert!(
            md.contains("3 of 4 (75 %)") && md.contains("2 (1 reached)"),
            "{md}"
        );
        assert!(md.contains("insert\\_image: the answer complains"), "{md}");
        // A record from before the measure is counted apart.
        records
            .get_mut(&("excel".into(), "baseline".into()))
            .unwrap()
            .reach = None;
        let md = super::super::render::markdown(&super::super::document::Document {
            title: "t".into(),
            blocks: section(&meta, &records),
        });
        assert!(
            md.contains("1 servers' records predate the measure"),
            "{md}"
        );
    }

    /// What was learnt reads back, through the catalogue's own parser, as
    /// the servers' `audit_calls`: what a later audit calls.
    #[test]
    fn learnt_calls_are_a_catalogue_a_later_audit_reads() {
        let meta = meta();
        let mut r = excel_record();
        r.learnt_calls.insert(
            "list_workbooks".into(),
            serde_json::json!({"path": "/workspace"}),
        );
        r.learnt_calls.insert(
            "odd \"name\"\n[servers.x]".into(),
            serde_json::json!({"cells": [["A1", 2, 1.5, true]], "opts": {}, "n": null}),
        );
        r.learnt_calls.insert(
            "read_data".into(),
            serde_json::json!({"filepath": "/workspace/book.xlsx", "sheet_name": "Sheet1"}),
        );
        let mut records = Records::new();
        records.insert(("excel".into(), "baseline".into()), r);
        let text = learnt_toml(&meta, &records).unwrap();
        assert!(text.contains("[servers.excel.audit_calls]"), "{text}");
        let catalogue = format!(
            "[servers.excel]\npackage = \"excel-mcp-server\"\nversion = \"2.2.2\"\nruntime = \"python\"\ncommand = \"excel-mcp-server\"\nargs = [\"stdio\"]\n{text}"
        );
        let c = mcpvm_images::catalogue::Catalogue::parse(&catalogue, "learnt")
            .unwrap_or_else(|e| panic!("{e}\n{catalogue}"));
        let calls = &c.get("excel").unwrap().audit_calls;
        assert_eq!(
            calls.len(),
            2,
            "the call holding a null is left out: {calls:?}"
        );
        assert_eq!(
            serde_json::to_value(&calls["read_data"]).unwrap(),
            serde_json::json!({"filepath": "/workspace/book.xlsx", "sheet_name": "Sheet1"})
        );
    }
}

//! The network section of an audit report: what each server tried to
//! reach under each profile, as the host's egress proxy saw it
//! (docs/network.md) — every lookup and connection, allowed or denied.

use std::collections::BTreeMap;

use super::document::{Block, Cell, Line, Row, Table};
use super::meta::Meta;
use super::record::Record;

type Records = BTreeMap<(String, String), Record>;

/// Items shown per cell; the rest are counted.
const SHOWN: usize = 8;

fn cells<'a>(
    meta: &'a Meta,
    records: &'a Records,
) -> impl Iterator<Item = (&'a str, Vec<Option<&'a Record>>)> {
    meta.servers.keys().map(move |s| {
        let row = meta
            .profiles
            .iter()
            .map(|p| records.get(&(s.clone(), p.clone())))
            .collect();
        (s.as_str(), row)
    })
}

fn any(records: &Records) -> bool {
    records.values().any(|r| !r.network.is_empty())
}

fn shown(r: &Record) -> (Vec<&str>, usize) {
    let items: Vec<&str> = r.network.iter().take(SHOWN).map(String::as_str).collect();
    (items, r.network.len().saturating_sub(SHOWN))
}

/// The section; nothing when no server tried the network. Each try is
/// marked ✓ allowed or ✗ denied.
pub fn section(meta: &Meta, records: &Records) -> Vec<Block> {
    if !any(records) {
        return Vec::new();
    }
    let mut head = vec!["server".to_string()];
    head.extend(meta.profiles.iter().cloned());
    let rows = cells(meta, records)
        .map(|(s, row)| Row {
            head: s.to_string(),
            cells: row
                .into_iter()
                .map(|r| {
                    let Some(r) = r else {
                        return Cell::default();
                    };
                    let (items, more) = shown(r);
                    let mut lines: Vec<String> = items
                        .iter()
                        .map(|i| {
                            let mark = if i.contains(" denied") { "✗" } else { "✓" };
                            format!("{mark} {i}")
                        })
                        .collect();
                    if more > 0 {
                        lines.push(format!("and {more} more"));
                    }
                    Cell {
                        lines,
                        ..Cell::default()
                    }
                })
                .collect(),
        })
        .collect();
    vec![
        Block::Heading(2, "Network".into()),
        Block::Para(Line::text("What each server tried to reach, as the host's egress proxy decided it (docs/network.md): every DNS lookup and connection, allowed or denied with why. An empty cell: the server had no network, or tried nothing.")),
        Block::Table(Table {
            head,
            rows,
            grid: false,
        }),
    ]
}

//! The network section of an audit report: what each server tried to
//! reach under each profile, as the host's egress proxy saw it
//! (docs/network.md) — every lookup and connection, allowed or denied.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use super::meta::Meta;
use super::record::Record;
use super::text::{esc, md};

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

/// The section for report.md; None when no server tried the network.
pub fn markdown(meta: &Meta, records: &Records) -> Option<String> {
    if !any(records) {
        return None;
    }
    let mut m = String::from("## Network\n\n");
    m += "What each server tried to reach, as the host's egress proxy decided it (docs/network.md): every DNS lookup and connection, allowed or denied with why. An empty cell: the server had no network, or tried nothing.\n\n| server |";
    for p in &meta.profiles {
        let _ = write!(m, " {} |", md(p));
    }
    m += "\n|---|";
    m += &"---|".repeat(meta.profiles.len());
    m += "\n";
    for (s, row) in cells(meta, records) {
        let _ = write!(m, "| {} |", md(s));
        for r in row {
            let cell = match r {
                Some(r) => {
                    let (items, more) = shown(r);
                    let mut c = items.iter().map(|i| md(i)).collect::<Vec<_>>().join("; ");
                    if more > 0 {
                        let _ = write!(c, "; and {more} more");
                    }
                    c
                }
                None => String::new(),
            };
            let _ = write!(m, " {cell} |");
        }
        m += "\n";
    }
    Some(m)
}

/// The same, for report.html.
pub fn html(meta: &Meta, records: &Records) -> Option<String> {
    if !any(records) {
        return None;
    }
    let mut page = String::from("<h2>Network</h2><p>What each server tried to reach, as the host's egress proxy decided it.</p><table class=\"grid\"><tr><th>server</th>");
    for p in &meta.profiles {
        let _ = write!(page, "<th>{}</th>", esc(p));
    }
    page += "</tr>";
    for (s, row) in cells(meta, records) {
        let _ = write!(page, "<tr><th>{}</th>", esc(s));
        for r in row {
            page += "<td>";
            if let Some(r) = r {
                let (items, more) = shown(r);
                for i in items {
                    let mark = if i.contains(" denied") { "✗" } else { "✓" };
                    let _ = write!(page, "{mark} {}<br>", esc(i));
                }
                if more > 0 {
                    let _ = write!(page, "and {more} more");
                }
            }
            page += "</td>";
        }
        page += "</tr>";
    }
    page += "</table>";
    Some(page)
}

//! What a layer's install scripts did, read from their microVM's events
//! (`--events` of the run [`super::scripts`] starts under the
//! `install-scripts` recording profile) into the store's
//! [`InstallRecord`]: the calls that went beyond installing
//! (`probes::judge::install::judge`), the programs run, and the counts.
//! The file is the guest's words: read line by line, bounded.

use std::io::BufRead;
use std::path::Path;

use mcpvm_images::build::{Beyond, InstallRecord};
use mcpvm_protocol::messages::{AnyEvent, Event, EventLine};

use mcpvm::host::lines::read_line_bounded;

/// The profile the scripts run under: nothing withheld, every file,
/// program and address recorded (no canaries: a link they plant in the
/// workspace would come back with the layer).
pub const PROFILE: &str = "[profile.install-scripts]\n\
    description = \"What a package's install scripts do, recorded (mcpvm image build)\"\n\
    record_effects = true\n";

/// Programs kept by name; calls kept per rule.
const KEPT_PROGRAMS: usize = 50;

/// The record of the events in `path` (None when there is no file).
pub fn read(path: &Path) -> Option<InstallRecord> {
    let file = std::fs::File::open(path).ok()?;
    Some(from_lines(std::io::BufReader::new(file)))
}

/// The record of a run's events, one JSON object per line.
pub fn from_lines(mut reader: impl BufRead) -> InstallRecord {
    let mut rec = InstallRecord::default();
    let mut line = Vec::new();
    let mut seen = 0u64;
    let mut counted = None;
    while read_line_bounded(&mut reader, &mut line, mcpvm::run::events::MAX_LINE) {
        let Ok(ev) = serde_json::from_slice::<EventLine>(&line) else {
            continue;
        };
        match ev.event {
            AnyEvent::Agent(Event::Effect(e)) => {
                seen += 1;
                if matches!(e.call.as_str(), "execve" | "execveat") {
                    if let Some(p) = e.paths.first() {
                        let own = p.starts_with("/workspace/");
                        if !own && !rec.programs.contains(p) && rec.programs.len() < KEPT_PROGRAMS {
                            rec.programs.push(p.clone());
                        }
                    }
                }
                let Some(rule) = probes::judge::install::judge(&e) else {
                    continue;
                };
                let kept = rec.beyond.iter().filter(|b| b.rule == rule).count();
                match kept < probes::judge::install::KEPT_PER_RULE {
                    true => rec.beyond.push(Beyond {
                        rule: rule.to_string(),
                        effect: serde_json::to_value(&e).unwrap_or_default(),
                    }),
                    false => rec.omitted += 1,
                }
            }
            AnyEvent::Agent(Event::Effects { counts, dropped }) => {
                counted = Some(counts.iter().map(|c| c.count).sum::<u64>());
                rec.dropped = dropped;
            }
            _ => {}
        }
    }
    rec.calls = counted.unwrap_or(seen).max(seen);
    rec
}

/// A line for a person: how much was recorded and what went beyond.
pub fn summary(rec: &InstallRecord) -> String {
    let mut rules: Vec<String> = Vec::new();
    for b in &rec.beyond {
        if !rules.contains(&b.rule) {
            rules.push(b.rule.clone());
        }
    }
    let beyond = match rules.is_empty() {
        true => "nothing beyond installing".to_string(),
        false => format!("beyond installing: {}", rules.join(", ")),
    };
    let cut = match rec.dropped {
        0 => String::new(),
        n => format!(" ({n} past the recorder's bound not seen)"),
    };
    format!(
        "install scripts recorded: {} calls{cut}, {} programs run; {beyond}",
        rec.calls,
        rec.programs.len()
    )
}

/// The findings of a store's record (the audit's `backdoor` class).
pub fn findings(rec: &InstallRecord) -> Vec<probes::report::result::Finding> {
    let beyond: Vec<(String, mcpvm_protocol::messages::Effect)> = rec
        .beyond
        .iter()
        .filter_map(|b| {
            Some((
                b.rule.clone(),
                serde_json::from_value(b.effect.clone()).ok()?,
            ))
        })
        .collect();
    probes::judge::install::findings(&beyond, rec.omitted)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_become_a_bounded_record() {
        let mut text = String::new();
        text += r#"{"event":"agent_start","uptime_ms":5,"at_ms":1.0}"#;
        text += "\n";
        text += "not json at all\n";
        for i in 0..30 {
            text += &format!(
                r#"{{"event":"effect","uptime_ms":{i},"pid":9,"exe":"/opt/node/bin/node","call":"connect","address":"inet 127.0.0.1:9","during":{{"phase":"start_up"}},"at_ms":2.0}}"#
            );
            text += "\n";
        }
        text += r#"{"event":"effect","uptime_ms":40,"pid":9,"exe":"/bin/sh","call":"execve","paths":["/opt/node/bin/node"],"argv":["node","postinstall.js"],"during":{"phase":"start_up"},"at_ms":3.0}"#;
        text += "\n";
        text += r#"{"event":"effect","uptime_ms":41,"pid":9,"exe":"/opt/node/bin/node","call":"openat","paths":["/workspace/x"],"access":"write+create","during":{"phase":"start_up"},"at_ms":3.0}"#;
        text += "\n";
        text += r#"{"event":"effects","counts":[{"syscall":"connect","count":30},{"syscall":"openat","count":900}],"dropped":3}"#;
        text += "\n";
        let rec = from_lines(text.as_bytes());
        assert_eq!((rec.calls, rec.dropped), (930, 3));
        assert_eq!(rec.programs, ["/opt/node/bin/node"]);
        assert_eq!(rec.beyond.len(), probes::judge::install::KEPT_PER_RULE);
        assert_eq!(
            rec.omitted,
            30 - probes::judge::install::KEPT_PER_RULE as u64
        );
        assert!(rec.beyond.iter().all(|b| b.rule == "install-network"));
        let found = findings(&rec);
        assert_eq!(found.len(), 1);
        assert_eq!(
            found[0].attempts,
            probes::judge::install::KEPT_PER_RULE as u32
        );
        assert!(
            found[0].why.ends_with("(and calls past what was kept)"),
            "{}",
            found[0].why
        );
        assert_eq!(
            summary(&rec),
            "install scripts recorded: 930 calls (3 past the recorder's bound not seen), 1 programs run; beyond installing: install-network"
        );
    }
}

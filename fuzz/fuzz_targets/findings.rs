//! What a hostile guest (its agent's `effect` and `canaries` events) and
//! server (its answers) hand the security judges: effects grouped by
//! step, findings judged, the SARIF log written; and what it declares
//! (any text as a tool's name and description, probes::judge::definitions;
//! any text as an MCP App's page, probes::judge::apps) and the roles its
//! tools were seen to play. No crash, bounded output, and every finding
//! keeps its evidence bound.
#![no_main]

use libfuzzer_sys::fuzz_target;
use mcpvm_protocol::messages::EventLine;
use probes::report::result::StepResult;

fuzz_target!(|data: &[u8]| {
    // What a server declares, judged as written: any text, no crash,
    // evidence bounded and free of control characters.
    let text = String::from_utf8_lossy(data);
    let declared = [probes::judge::definitions::Declared {
        kind: "tool",
        name: &text,
        texts: vec![&text, &text],
    }];
    for f in probes::judge::definitions::check(&declared) {
        for e in &f.evidence {
            let line = e.line();
            // 240 characters at most, each shown as up to 10 when escaped.
            assert!(
                line.chars().count() <= 2500 && !line.contains('\u{1b}'),
                "{line:?}"
            );
        }
        assert!(f.why.chars().count() <= 3000, "{}", f.why);
    }
    // Any text as an app's page: a few findings per rule, each quoting
    // a bounded, escaped excerpt.
    let page = probes::judge::apps::check("ui://fuzzed", &text);
    assert!(page.len() <= 4 * 3 + 1, "{}", page.len());
    for f in &page {
        for e in &f.evidence {
            let line = e.line();
            assert!(
                line.chars().count() <= 1700 && !line.contains('\u{1b}'),
                "{line:?}"
            );
        }
        assert!(
            !f.why.contains('\u{1b}') && f.why.chars().count() <= 1500,
            "{}",
            f.why
        );
    }
    let Ok(v) = serde_json::from_slice::<serde_json::Value>(data) else {
        return;
    };
    let (Ok(events), Ok(steps)) = (
        serde_json::from_value::<Vec<EventLine>>(v["events"].clone()),
        serde_json::from_value::<Vec<StepResult>>(v["steps"].clone()),
    ) else {
        return;
    };
    let sent: Vec<_> = steps
        .iter()
        .map(|s| probes::judge::effects::requests(&s.exchange))
        .collect();
    if let Some((per_step, _)) = probes::judge::effects::group(&events, &sent) {
        assert_eq!(per_step.len(), steps.len());
        for e in per_step.iter().flatten() {
            assert!(e.read.len() <= 50 && e.written.len() <= 50 && e.executed.len() <= 50);
            let _ = e.line();
        }
    }
    let observe = |background_lookups| {
        let mut roles = Vec::new();
        probes::judge::roles::observe(
            &mut roles,
            &steps,
            &events,
            &["/workspace".to_string()],
            background_lookups,
        );
        for t in &roles {
            assert!(t.observed.values().all(|seen| seen.evidence.len() <= 3));
        }
        roles
    };
    // The same events judged as a browser's server's too (its own
    // lookups are no call's).
    observe(true);
    let roles = observe(false);
    let judged = probes::judge::findings::judge(&steps, &events, &["/workspace".to_string()]);
    let mut r = probes::ProbeResult::new(&[], "vm");
    match judged {
        Ok(findings) => {
            for f in &findings {
                assert!(f.evidence.len() <= 10, "evidence is bounded");
            }
            r.findings = findings;
        }
        Err(why) => r.not_judged = Some(why),
    }
    r.steps = steps;
    r.roles = roles;
    let at = probes::report::sarif::Artifact {
        path: "fuzzed/catalogue.toml".into(),
        line: Some(1),
    };
    let _ = probes::report::sarif::log(&r, "fuzzed", &at);
    let _ = r.summary();
});

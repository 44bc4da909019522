//! The SARIF mcpvm writes validates against the OASIS SARIF 2.1.0 schema,
//! checked by a real validator (jsonschema, installed by the test with
//! the schema: tests/fixtures/sarif-validate); the Linux tests check the
//! logs of real probes and audits the same way.

mod common;

use probes::judge::findings::Finding;
use probes::report::result::{Evidence, ProbeResult};
use probes::report::sarif::Artifact;

fn finding(class: &str, argument: Option<&str>) -> Finding {
    Finding {
        class: class.into(),
        rule: "connect-to-payload".into(),
        severity: "high".into(),
        step: "attack:fetch".into(),
        call: Some(r#"fetch={"url":"http://169.254.169.254/"}"#.into()),
        argument: argument.map(String::from),
        payload: Some("http://169.254.169.254/".into()),
        attempts: 2,
        why: "it tried to reach inet 169.254.169.254:80".into(),
        evidence: vec![Evidence::Excerpt("connect inet 169.254.169.254:80".into())],
    }
}

#[test]
fn the_sarif_mcpvm_writes_is_valid_sarif_2_1_0() {
    let mut r = ProbeResult::new(&["mcp-server-fetch".into()], "vm");
    r.findings = vec![
        finding("ssrf", Some("/url")),
        finding("path-traversal", None),
        // A class no rule names still makes a valid result.
        finding("something-new", Some("/x")),
    ];
    let catalogued = Artifact {
        path: "guest-image/catalogue.toml".into(),
        line: Some(40),
    };
    let program = Artifact {
        path: "/usr/local/bin/my server".into(),
        line: None,
    };
    for (artifact, result) in [(&catalogued, &r), (&program, &ProbeResult::new(&[], "vm"))] {
        let log = probes::report::sarif::log(result, "fetch", artifact);
        let text = serde_json::to_string_pretty(&log).unwrap();
        assert_eq!(common::sarif_errors(&text), None, "{text}");
    }
    // And the validator does refuse what is not SARIF.
    let mut log = probes::report::sarif::log(&r, "fetch", &catalogued);
    log["runs"][0]["results"][0]["locations"][0]["physicalLocation"]["region"]["startLine"] =
        serde_json::json!(0);
    let errors = common::sarif_errors(&log.to_string()).expect("startLine 0 is refused");
    assert!(errors.contains("startLine"), "{errors}");
}

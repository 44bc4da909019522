//! Secrets kept out of what a probe prints, records and reports: the
//! values of the variables the user marked secret (`--secret`) and of a
//! catalogued server's credentials. A server may echo its key in an error,
//! print its environment on stderr, or return it from a tool; the result
//! that leaves the probe (JSON, summary, SARIF, and so an audit's
//! records and reports) holds `[redacted: NAME]` in its place.

use serde_json::Value;

/// Values shorter than this are not redacted: a `1` or `true` is no
/// secret, and replacing every occurrence would garble the whole result.
pub const MIN_SECRET_LEN: usize = 4;

/// The secrets of one run, by variable name.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Secrets(Vec<(String, String)>);

impl Secrets {
    /// `pairs` of name and value; values too short to be secret are
    /// dropped, longer ones first so that a secret containing another is
    /// replaced whole.
    pub fn new(pairs: impl IntoIterator<Item = (String, String)>) -> Secrets {
        let mut v: Vec<(String, String)> = pairs
            .into_iter()
            .filter(|(_, value)| value.len() >= MIN_SECRET_LEN)
            .collect();
        v.sort_by_key(|(_, value)| std::cmp::Reverse(value.len()));
        v.dedup_by(|a, b| a.1 == b.1);
        Secrets(v)
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// `text` with every secret value replaced by its name.
    pub fn text(&self, text: &str) -> String {
        let mut out = text.to_string();
        for (name, value) in &self.0 {
            if out.contains(value.as_str()) {
                out = out.replace(value.as_str(), &format!("[redacted: {name}]"));
            }
        }
        out
    }

    /// Every string in `v` (keys included) redacted in place.
    pub fn value(&self, v: &mut Value) {
        if self.is_empty() {
            return;
        }
        match v {
            Value::String(s) if self.0.iter().any(|(_, value)| s.contains(value.as_str())) => {
                *s = self.text(s);
            }
            Value::Array(a) => a.iter_mut().for_each(|x| self.value(x)),
            Value::Object(m) => {
                let hit = |k: &String| self.0.iter().any(|(_, value)| k.contains(value.as_str()));
                if m.keys().any(hit) {
                    let old = std::mem::take(m);
                    for (k, mut x) in old {
                        self.value(&mut x);
                        m.insert(self.text(&k), x);
                    }
                } else {
                    m.values_mut().for_each(|x| self.value(x));
                }
            }
            _ => {}
        }
    }

    /// Any serializable record, redacted: through its JSON and back. A
    /// record that does not come back is an error, never a record left
    /// unredacted.
    pub fn record<T>(&self, record: T) -> Result<T, serde_json::Error>
    where
        T: serde::Serialize + serde::de::DeserializeOwned,
    {
        if self.is_empty() {
            return Ok(record);
        }
        let mut v = serde_json::to_value(&record)?;
        self.value(&mut v);
        serde_json::from_value(v)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn values_are_replaced_by_their_names_wherever_they_stand() {
        let s = Secrets::new([
            ("GITHUB_TOKEN".to_string(), "ghp_abcdef123456".to_string()),
            ("SHORT".into(), "1".into()),
            ("PART".into(), "abcdef".into()),
        ]);
        let mut v = json!({
            "stderr": {"tail": "auth failed for ghp_abcdef123456\n"},
            "steps": [{"detail": {"text": "token=ghp_abcdef123456; id 1"}}],
            "ghp_abcdef123456": "as a key",
        });
        s.value(&mut v);
        let text = v.to_string();
        assert!(
            !text.contains("ghp_abcdef123456") && !text.contains("abcdef"),
            "{text}"
        );
        assert_eq!(
            v["stderr"]["tail"],
            "auth failed for [redacted: GITHUB_TOKEN]\n"
        );
        // Too short to be a secret: left alone.
        assert!(text.contains("id 1"));
        assert_eq!(v["[redacted: GITHUB_TOKEN]"], "as a key");
        assert_eq!(s.text("x abcdef y"), "x [redacted: PART] y");
    }

    #[test]
    fn a_result_goes_through_whole() {
        let s = Secrets::new([("K".to_string(), "s3cret-value".to_string())]);
        let r = crate::ProbeResult::new(&["srv".into(), "--key=s3cret-value".into()], "process");
        let r = s.record(r).unwrap();
        assert_eq!(r.command, ["srv", "--key=[redacted: K]"]);
    }
}

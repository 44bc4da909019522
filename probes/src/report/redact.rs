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

/// The secrets of one run, by variable name: each value in every form a
/// server might print it in (as it is, base64 at each of its three
/// alignments, URL-encoded, JSON-escaped), longest first.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Secrets(Vec<(String, String)>);

impl Secrets {
    /// `pairs` of name and value; values too short to be secret are
    /// dropped, longer forms first so that a secret containing another is
    /// replaced whole.
    pub fn new(pairs: impl IntoIterator<Item = (String, String)>) -> Secrets {
        let mut v: Vec<(String, String)> = pairs
            .into_iter()
            .filter(|(_, value)| value.len() >= MIN_SECRET_LEN)
            .flat_map(|(name, value)| {
                forms(&value)
                    .into_iter()
                    .filter(|f| f.len() >= MIN_SECRET_LEN)
                    .map(move |f| (name.clone(), f))
            })
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

    /// The last `keep` bytes of a stream's `window` (what was kept of its
    /// end), redacted before it is cut: every whole secret is replaced
    /// first, so the cut cannot split one; and where the window itself
    /// began inside a secret (`began_at_cut`: the stream was longer), the
    /// rest of that secret at its start is replaced too.
    pub fn tail(&self, window: &str, began_at_cut: bool, keep: usize) -> String {
        let mut text = self.text(window);
        if began_at_cut {
            text = self.without_leading_part(&text);
        }
        if text.len() <= keep {
            return text;
        }
        let mut from = text.len() - keep;
        while !text.is_char_boundary(from) {
            from += 1;
        }
        text[from..].to_string()
    }

    /// The first `keep` bytes of a stream's start (`window`: what was
    /// read of it, longer than `keep`), redacted before it is cut.
    pub fn head(&self, window: &str, keep: usize) -> String {
        let text = self.text(window);
        let mut to = keep.min(text.len());
        while !text.is_char_boundary(to) {
            to -= 1;
        }
        text[..to].to_string()
    }

    /// `text` whose start is the end of a secret cut short (its longest
    /// such part) with that part replaced by the secret's name.
    fn without_leading_part(&self, text: &str) -> String {
        let part = self
            .0
            .iter()
            .filter_map(|(name, value)| {
                (1..value.len())
                    .filter(|&i| value.is_char_boundary(i))
                    .map(|i| &value[i..])
                    .find(|rest| text.starts_with(rest))
                    .map(|rest| (name, rest.len()))
            })
            .max_by_key(|(_, len)| *len);
        match part {
            Some((name, len)) => format!("[redacted: {name}, cut]{}", &text[len..]),
            None => text.to_string(),
        }
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

/// The forms a value takes in what a server prints: as it is; base64
/// (standard and URL-safe) of it starting at each of the three byte
/// alignments inside a longer encoded text (an `Authorization: Basic`
/// header, a token inside a JSON blob), each cut to the characters that
/// depend on the value alone; percent-encoded; and JSON-escaped (as a
/// string's body, and with every character as `\uXXXX`).
fn forms(value: &str) -> Vec<String> {
    let mut out = vec![value.to_string()];
    for align in 0..3 {
        let mut bytes = vec![0u8; align];
        bytes.extend_from_slice(value.as_bytes());
        for alphabet in [STANDARD, URL_SAFE] {
            let encoded = base64(&bytes, alphabet);
            // Characters whose six bits all come from the value.
            let first = (align * 8).div_ceil(6);
            let last = (bytes.len() * 8) / 6;
            if last > first {
                out.push(encoded[first..last].to_string());
            }
        }
    }
    let percent: String = value
        .bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect();
    out.push(percent.clone());
    out.push(percent.to_lowercase_escapes());
    let json = serde_json::to_string(value).unwrap_or_default();
    out.push(json.trim_matches('"').to_string());
    let escaped: String = value
        .encode_utf16()
        .map(|u| format!("\\u{u:04x}"))
        .collect();
    out.push(escaped.clone());
    out.push(escaped.to_uppercase().replace("\\U", "\\u"));
    out.sort();
    out.dedup();
    out
}

const STANDARD: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
const URL_SAFE: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

/// `bytes` in base64 without padding.
fn base64(bytes: &[u8], alphabet: &[u8; 64]) -> String {
    let mut out = String::with_capacity(bytes.len() * 4 / 3 + 3);
    for chunk in bytes.chunks(3) {
        let n = chunk
            .iter()
            .enumerate()
            .fold(0u32, |n, (i, &b)| n | u32::from(b) << (16 - 8 * i));
        for i in 0..=chunk.len() {
            out.push(alphabet[(n >> (18 - 6 * i) & 63) as usize] as char);
        }
    }
    out
}

trait LowercaseEscapes {
    fn to_lowercase_escapes(&self) -> String;
}

impl LowercaseEscapes for String {
    /// `%2F` as `%2f`: both spellings are the same URL.
    fn to_lowercase_escapes(&self) -> String {
        let mut out = String::with_capacity(self.len());
        let mut chars = self.chars();
        while let Some(c) = chars.next() {
            out.push(c);
            if c == '%' {
                out.extend(chars.by_ref().take(2).map(|h| h.to_ascii_lowercase()));
            }
        }
        out
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

    /// The 8 KiB tail cut falling inside a secret: what is left of it at
    /// the tail's start is redacted too (the old tail kept it).
    #[test]
    fn a_tail_cut_inside_a_secret_keeps_none_of_it() {
        let secret = "sk-live-0123456789abcdefghij";
        let s = Secrets::new([("API_KEY".to_string(), secret.to_string())]);
        let stream = format!("{}{secret} failed\n", "x".repeat(100));
        // Every cut point: the window begins at each byte of the secret.
        for start in 100..100 + secret.len() {
            let window = &stream[start..];
            let t = s.tail(window, true, 8192);
            for n in 4..=secret.len() {
                for piece in secret.as_bytes().windows(n) {
                    let piece = std::str::from_utf8(piece).unwrap();
                    assert!(!t.contains(piece), "{start}: {piece} in {t}");
                }
            }
            assert!(t.ends_with(" failed\n"), "{t}");
        }
        // Cut to `keep` after redaction: never inside a secret.
        let long = format!("{secret}{}", "y".repeat(50));
        let t = s.tail(&long, false, 60);
        assert!(!t.contains("sk-live") && t.len() <= 60, "{t}");
        // Nothing to redact: the plain last bytes, at a char boundary.
        let none = Secrets::default();
        assert_eq!(none.tail("abcdef", true, 3), "def");
        assert_eq!(none.tail("aé", true, 1), "");
    }

    /// A server that prints its key base64-encoded (alone or inside a
    /// Basic credential), URL-encoded or JSON-escaped: each redacted.
    #[test]
    fn the_common_encodings_of_a_secret_are_redacted() {
        let secret = "p@ss/word+Ω key";
        let s = Secrets::new([("TOKEN".to_string(), secret.to_string())]);
        let b64 = |b: &[u8], a| base64(b, a);
        let printed = [
            b64(secret.as_bytes(), STANDARD),
            format!(
                "Basic {}",
                b64(format!("user:{secret}").as_bytes(), STANDARD)
            ),
            format!("Basic {}", b64(format!("us:{secret}").as_bytes(), STANDARD)),
            format!("Basic {}", b64(format!("u:{secret}").as_bytes(), URL_SAFE)),
            format!(
                "Basic {}",
                b64(format!("usr:{secret}").as_bytes(), STANDARD)
            ),
            "p%40ss%2Fword%2B%CE%A9%20key".to_string(),
            "p%40ss%2fword%2b%ce%a9%20key".to_string(),
            serde_json::to_string(secret).unwrap(),
            secret
                .encode_utf16()
                .map(|u| format!("\\u{u:04x}"))
                .collect(),
            secret
                .encode_utf16()
                .map(|u| format!("\\u{u:04X}"))
                .collect(),
        ];
        for p in printed {
            let t = s.text(&format!("header {p} end"));
            assert!(t.contains("[redacted: TOKEN]"), "{p} -> {t}");
            // At most the edge characters that mix in other bytes remain.
            let left = t.replace("[redacted: TOKEN]", "");
            assert!(left.len() <= "header Basic  end".len() + 10, "{p} -> {t}");
        }
        assert_eq!(base64(b"Man", STANDARD), "TWFu");
        assert_eq!(base64(b"Ma", STANDARD), "TWE");
        assert_eq!(base64(b"\xfb\xff", URL_SAFE), "-_8");
    }

    #[test]
    fn a_result_goes_through_whole() {
        let s = Secrets::new([("K".to_string(), "s3cret-value".to_string())]);
        let r = crate::ProbeResult::new(&["srv".into(), "--key=s3cret-value".into()], "process");
        let r = s.record(r).unwrap();
        assert_eq!(r.command, ["srv", "--key=[redacted: K]"]);
    }
}

//! Feedback-directed arguments: when a safe call is refused for its
//! arguments, read what the server said and try again with what it asked
//! for, within [`RETRIES`] more calls per tool. The same reading decides
//! whether a call *reached* the tool at all (an answer that is not a
//! complaint about its arguments): the audit's coverage figure, and
//! whether an attack got past the argument check to the code it aims at.
//!
//! What a refusal is read for, in order:
//! - the structured errors the SDKs emit: zod's issue list (TypeScript
//!   SDK: `invalid_type`, `invalid_enum_value`/`invalid_value` with the
//!   options, `invalid_string`/`invalid_format`, `unrecognized_keys`) and
//!   pydantic's validation errors (Python SDK: a location line, then
//!   `… [type=missing|literal_error|…`);
//! - free text: file extensions or file kinds it asks for ("must point to
//!   an Excel file (.xlsx, …)"), a property it names as missing or empty
//!   (optional ones included), one it calls a directory, a URL, a date, a
//!   number, or one of a listed set, and one whose value it could not
//!   find (a seen id, an existing file).
//!
//! The reference is the stateful REST API fuzzers (RESTler, EvoMaster):
//! learn from every response. Nothing here names a server.

use serde_json::{Map, Value};

use crate::calls::arguments::{self, Hints};

/// Calls a tool gets after its first, when each is refused for its
/// arguments and the refusal says what to change.
pub const RETRIES: usize = 3;
/// Changes one retry makes at most, whatever a refusal lists.
const MAX_CHANGES: usize = 8;
/// Bytes of an answer read for what it asks (a refusal is short; a huge
/// answer is not one).
const READ_BYTES: usize = 8 << 10;

/// What a refusal asks of one property.
#[derive(Debug, Clone, PartialEq)]
pub enum Want {
    /// A file of one of these types (extensions, lowercase, no dot).
    FileOfType(Vec<String>),
    /// A value: it is missing or empty.
    Present,
    /// A directory, not a file.
    Directory,
    /// A file, not a directory.
    File,
    Url,
    Date,
    Number,
    /// One of these values.
    OneOf(Vec<Value>),
    /// Not this property at all (unknown to the tool).
    Absent,
    /// Something that exists or is well formed: a value the server
    /// listed, an example its description gives, a real file.
    Existing,
    /// A string matching this regular expression.
    Pattern(String),
    /// JSON text.
    Json,
    /// The same path, absolute (in the workspace).
    Absolute,
}

/// One thing a refusal says is wrong.
#[derive(Debug, Clone, PartialEq)]
pub struct Complaint {
    /// The top-level property it is about, when it says which.
    pub property: Option<String>,
    pub want: Want,
}

/// The complaints about its arguments in a tool's refusal (`text`: the
/// tool error's text, or the JSON-RPC error's message), read against
/// the tool's schema and the arguments it was called with. Empty when the
/// answer is not about the arguments (a missing key, a refused upstream:
/// the call reached the tool's code).
pub fn read(text: &str, schema: &Map<String, Value>, args: &Map<String, Value>) -> Vec<Complaint> {
    let text = head(text);
    let props = arguments::property_names(schema);
    let mut out = zod_issues(text, &props);
    if out.is_empty() {
        out = pydantic_errors(text, &props);
    }
    if out.is_empty() {
        out = free_text(text, &props, args);
    }
    out
}

/// Whether an answer complains about the arguments: a call answered so
/// did not reach the tool's code.
pub fn complains(text: &str, schema: &Map<String, Value>, args: &Map<String, Value>) -> bool {
    let t = head(text).to_lowercase();
    // A refusal in plain words is about the arguments only where it can
    // be tied to one: a property it names or quotes, or the call's path
    // when it speaks of a file or a path. "Chrome failed to start … at
    // the configured executablePath … in the image" names a file kind,
    // and neither.
    let of_files = word_at(&t, "file").is_some() || word_at(&t, "path").is_some();
    let tied =
        |c: &Complaint| c.property.is_some() || of_files && path_property(schema, args).is_some();
    t.contains("-32602")
        || t.contains("invalid arguments")
        || t.contains("invalid params")
        || t.contains("validation error")
        || read(text, schema, args).iter().any(tied)
}

/// Whether an answer is the SDK's or the schema validator's refusal of
/// the arguments (an invalid-params error, zod's or pydantic's issue
/// list): an answer the tool's own code never saw. A refusal in the
/// tool's own words ("no such file") is not one.
pub fn refused_by_schema(text: &str, schema: &Map<String, Value>) -> bool {
    let text = head(text);
    let t = text.to_lowercase();
    let props = arguments::property_names(schema);
    t.contains("-32602")
        || t.contains("invalid arguments")
        || t.contains("invalid params")
        || t.contains("validation error")
        || !zod_issues(text, &props).is_empty()
        || !pydantic_errors(text, &props).is_empty()
}

/// The next arguments to try after `text` refused `args`, and why; None
/// when the refusal says nothing the probe can act on, or every change it
/// asks for was tried already.
pub fn retry(
    text: &str,
    schema: &Map<String, Value>,
    args: &Map<String, Value>,
    hints: &Hints,
    tried: &[Map<String, Value>],
) -> Option<(Map<String, Value>, String)> {
    let complaints = read(text, schema, args);
    let mut next = args.clone();
    let mut why = Vec::new();
    for c in complaints.iter().take(MAX_CHANGES) {
        if let Some((changed, said)) = apply(c, text, schema, &next, hints, tried) {
            // Each value is budgeted; together they are held to one call's.
            if serde_json::to_string(&changed).map_or(usize::MAX, |s| s.len())
                > arguments::MAX_BYTES
            {
                break;
            }
            next = changed;
            why.push(said);
        }
    }
    if why.is_empty() || next == *args || tried.contains(&next) {
        return None;
    }
    Some((next, why.join("; ")))
}

/// At most [`READ_BYTES`] of `text`, cut on a character boundary.
fn head(text: &str) -> &str {
    let mut end = text.len().min(READ_BYTES);
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    &text[..end]
}

/// `args` changed as `c` asks, and what was done; None when there is
/// nothing to change to that was not tried.
fn apply(
    c: &Complaint,
    said: &str,
    schema: &Map<String, Value>,
    args: &Map<String, Value>,
    hints: &Hints,
    tried: &[Map<String, Value>],
) -> Option<(Map<String, Value>, String)> {
    let prop = c.property.clone().or_else(|| path_property(schema, args))?;
    let current = args.get(&prop);
    if c.want == Want::Absent {
        let mut next = args.clone();
        next.remove(&prop)?;
        return Some((
            next,
            format!("left out '{prop}', which the tool does not know"),
        ));
    }
    let candidates = candidates(&c.want, &prop, current, said, schema, hints);
    let wants_list = matches!(current, Some(Value::Array(_)))
        || arguments::property_type(schema, &prop).as_deref() == Some("array");
    for (v, said) in candidates {
        let v = match (wants_list, &v) {
            (true, Value::String(_)) => Value::Array(vec![v]),
            _ => v,
        };
        if current == Some(&v) {
            continue;
        }
        let mut next = args.clone();
        next.insert(prop.clone(), v);
        if !tried.contains(&next) {
            return Some((next, format!("'{prop}': {said}")));
        }
    }
    None
}

/// The values that would give a call what `want` asks of `prop`, best
/// first, each with why.
fn candidates(
    want: &Want,
    prop: &str,
    current: Option<&Value>,
    said: &str,
    schema: &Map<String, Value>,
    hints: &Hints,
) -> Vec<(Value, String)> {
    match want {
        // `apply` leaves the property out instead.
        Want::Absent => Vec::new(),
        Want::FileOfType(exts) => exts
            .iter()
            .filter_map(|e| arguments::seed_for_extension(e))
            .map(|f| {
                (
                    in_workspace(f, hints, current),
                    format!("a .{} file, as it asked: the seeded {f}", ext_of(f)),
                )
            })
            .collect(),
        Want::Present => {
            let (v, reason) = arguments::property_value(schema, prop, hints);
            vec![(
                v,
                format!("filled '{prop}', which it said was missing ({reason})"),
            )]
        }
        Want::Directory => vec![(
            Value::String(hints.workspace.clone().unwrap_or_else(|| ".".into())),
            "a directory, as it asked: the seeded workspace".into(),
        )],
        Want::File | Want::Existing if is_path_like(prop, current) => {
            quoted_paths(said, hints, current)
                .into_iter()
                .chain(
                    [arguments::SEED_TEXT, arguments::SEED_JSON]
                        .iter()
                        .map(|f| {
                            (
                                in_workspace(f, hints, current),
                                format!("an existing file: the seeded {f}"),
                            )
                        }),
                )
                .collect()
        }
        Want::Existing | Want::File => existing_values(prop, said, schema, hints),
        Want::Pattern(p) => crate::calls::pattern::sample(p)
            .map(|v| {
                (
                    Value::String(v),
                    format!("made to match the pattern it quoted ({p})"),
                )
            })
            .into_iter()
            .collect(),
        Want::Absolute => match (&hints.workspace, current.and_then(Value::as_str)) {
            (Some(w), Some(rel)) => vec![(
                Value::String(format!("{w}/{}", rel.trim_start_matches("./"))),
                "the same path, absolute (in the workspace), as it asked".into(),
            )],
            _ => Vec::new(),
        },
        Want::Json => ["[]", "{}"]
            .iter()
            .map(|j| {
                (
                    Value::String(j.to_string()),
                    "JSON text, as it asked".into(),
                )
            })
            .collect(),
        Want::Url => url_values(prop, schema, hints),
        Want::Date => {
            // The second for "cannot be in the past": after any run's today.
            ["2026-01-01", "2030-01-01", "2030-01-01T00:00:00Z"]
                .iter()
                .map(|d| (Value::String(d.to_string()), "a date, as it asked".into()))
                .collect()
        }
        Want::Number => vec![(Value::from(1), "a number, as it asked".into())],
        Want::OneOf(values) => values
            .iter()
            .map(|v| (v.clone(), format!("one of the values it listed: {v}")))
            .collect(),
    }
}

/// Values for a property whose value was not found or not known: one
/// the server returned earlier, the examples its refusal and its
/// description give, the values its description quotes.
fn existing_values(
    prop: &str,
    said: &str,
    schema: &Map<String, Value>,
    hints: &Hints,
) -> Vec<(Value, String)> {
    let seen = seen_for(prop, hints).map(|v| {
        (
            v,
            format!("a value the server returned earlier for '{prop}'"),
        )
    });
    // Examples the refusal itself gives ("Use A1 notation such as
    // 'B2'"), then the description's.
    let given = examples(head(said)).into_iter().map(|e| {
        let why = format!("the example its refusal gives ({e})");
        (Value::String(e), why)
    });
    let examples = examples(&described(schema, prop, hints))
        .into_iter()
        .map(|e| {
            let said = format!("the example its description gives ({e})");
            (Value::String(e), said)
        });
    // Values the property's own description quotes ("local
    // branches ('local'), remote ('remote') or all ('all')").
    let own = arguments::property_description(schema, prop);
    let quoted_in = quoted(head(&own)).into_iter().map(|v| {
        let why = format!("a value its description quotes ({v})");
        (v, why)
    });
    seen.into_iter()
        .chain(given)
        .chain(examples)
        .chain(quoted_in)
        .collect()
}

/// URLs for a property that asked for one: those its description gives,
/// a local page, the loopback.
fn url_values(prop: &str, schema: &Map<String, Value>, hints: &Hints) -> Vec<(Value, String)> {
    let page = hints
        .workspace
        .as_ref()
        .map(|w| format!("file://{w}/{}", arguments::SEED_HTML));
    let given = urls(&described(schema, prop, hints));
    given
        .into_iter()
        .map(|u| (u, "a URL its description gives"))
        .chain(
            page.into_iter()
                .map(|u| (u, "a URL, as it asked: a local page")),
        )
        .chain([(
            "http://127.0.0.1/".to_string(),
            "a URL, as it asked: the loopback",
        )])
        .map(|(u, said)| (Value::String(u), said.to_string()))
        .collect()
}

/// What the schema says of a property, then what the tool says of
/// itself: where examples and URLs are found.
fn described(schema: &Map<String, Value>, prop: &str, hints: &Hints) -> String {
    let own = arguments::property_description(schema, prop);
    format!("{own}\n{}", hints.description)
}

/// Examples a description gives ("e.g. 2401.12345", "such as 'main'"),
/// in order, at most four.
fn examples(description: &str) -> Vec<String> {
    let d = head(description);
    let lower = d.to_lowercase();
    let mut out: Vec<String> = Vec::new();
    for marker in [
        "e.g.",
        "e.g",
        "eg.",
        "for example",
        "example:",
        "such as",
        "like ",
    ] {
        for (at, _) in lower.match_indices(marker) {
            let rest = &d[at + marker.len()..];
            let rest = rest.trim_start_matches([',', ':', ' ', '(']);
            let token = match rest.chars().next() {
                Some(q @ ('\'' | '"' | '`')) => rest[1..].split(q).next().unwrap_or(""),
                _ => rest
                    .split(char::is_whitespace)
                    .next()
                    .unwrap_or("")
                    .trim_end_matches([',', '.', ';', ':', ')']),
            };
            if !token.is_empty() && token.len() <= 128 && !out.iter().any(|o| o == token) {
                out.push(token.to_string());
            }
            if out.len() >= 4 {
                return out;
            }
        }
    }
    out
}

/// http(s) URLs a description gives, at most two.
fn urls(description: &str) -> Vec<String> {
    let d = head(description);
    d.match_indices("http")
        .filter_map(|(at, _)| {
            let u: String = d[at..]
                .chars()
                .take_while(|c| !c.is_whitespace() && !"'\"`<>()[]{},".contains(*c))
                .collect();
            let u = u.trim_end_matches(['.', ';', ':']).to_string();
            (u.starts_with("https://") || u.starts_with("http://")).then_some(u)
        })
        .filter(|u| u.len() > 10 && u.len() <= 256)
        .take(2)
        .collect()
}

fn ext_of(file: &str) -> &str {
    file.rsplit('.').next().unwrap_or(file)
}

/// `file` in the workspace, absolute: the server's working directory is
/// not the workspace, so a relative path would name another file.
fn in_workspace(file: &str, hints: &Hints, _current: Option<&Value>) -> Value {
    Value::String(match &hints.workspace {
        Some(w) => format!("{w}/{file}"),
        None => file.to_string(),
    })
}

/// Absolute paths a refusal quotes ("outside the allowed repository
/// '/workspace/repo'"), then the roots the server was given: where a
/// path it refused should be, by its own word first. At most four.
fn quoted_paths(said: &str, hints: &Hints, current: Option<&Value>) -> Vec<(Value, String)> {
    let mut out: Vec<(Value, String)> = Vec::new();
    let mut push = |p: &str, why: String| {
        let v = Value::String(p.to_string());
        if out.len() < 4 && Some(&v) != current && !out.iter().any(|(o, _)| *o == v) {
            out.push((v, why));
        }
    };
    for q in ['\'', '"', '`'] {
        let parts: Vec<&str> = head(said).split(q).collect();
        // The odd parts are the quoted ones.
        for p in parts.iter().skip(1).step_by(2).take(16) {
            if p.starts_with('/') && p.len() <= 1024 && !p.contains(char::is_whitespace) {
                push(p, format!("the path its refusal quoted ({q}{p}{q})"));
            }
        }
    }
    for r in &hints.roots {
        push(r, format!("a root the server was given ({r})"));
    }
    out
}

/// A value the server returned earlier under this property's name, or
/// under a name that ends the same way (`id`, `name`).
fn seen_for(prop: &str, hints: &Hints) -> Option<Value> {
    let p = prop.to_lowercase();
    if let Some(v) = hints.seen.get(&p) {
        return Some(v.clone());
    }
    let suffix = ["id", "name"].into_iter().find(|s| p.ends_with(s))?;
    hints
        .seen
        .iter()
        .find(|(k, _)| k.ends_with(suffix))
        .map(|(_, v)| v.clone())
}

fn is_path_like(prop: &str, current: Option<&Value>) -> bool {
    let p = prop.to_lowercase();
    ["path", "file", "dir", "folder"]
        .iter()
        .any(|w| p.contains(w))
        || current
            .and_then(Value::as_str)
            .is_some_and(|s| s.starts_with('/') || s.starts_with("./"))
}

/// The property a refusal about files is most likely about: the first
/// path-like one the call set, else the first path-like one declared.
fn path_property(schema: &Map<String, Value>, args: &Map<String, Value>) -> Option<String> {
    args.iter()
        .find(|(k, v)| is_path_like(k, Some(v)))
        .map(|(k, _)| k.clone())
        .or_else(|| {
            arguments::property_names(schema)
                .into_iter()
                .find(|k| is_path_like(k, None))
        })
}

/// zod's issue list, as the TypeScript SDK puts it in an invalid-params
/// error (zod 3 and 4 shapes).
fn zod_issues(text: &str, props: &[String]) -> Vec<Complaint> {
    let (Some(start), Some(end)) = (text.find('['), text.rfind(']')) else {
        return Vec::new();
    };
    if end <= start {
        return Vec::new();
    }
    let Ok(Value::Array(issues)) = serde_json::from_str::<Value>(&text[start..=end]) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for i in issues.iter().take(32) {
        let prop = i["path"][0].as_str().map(str::to_string);
        let code = i["code"].as_str().unwrap_or("");
        let message = i["message"].as_str().unwrap_or("").to_lowercase();
        let want = match code {
            "unrecognized_keys" => {
                for k in i["keys"].as_array().into_iter().flatten().take(8) {
                    if let Some(k) = k.as_str() {
                        out.push(Complaint {
                            property: Some(k.to_string()),
                            want: Want::Absent,
                        });
                    }
                }
                continue;
            }
            "invalid_enum_value" | "invalid_value" | "invalid_literal" => {
                let options = i
                    .get("options")
                    .or(i.get("values"))
                    .and_then(Value::as_array)
                    .cloned()
                    .or_else(|| i.get("expected").map(|e| vec![e.clone()]))
                    .unwrap_or_default();
                Want::OneOf(options)
            }
            "invalid_string" | "invalid_format" => {
                let format = i["validation"].as_str().or(i["format"].as_str());
                match format.unwrap_or("") {
                    "url" | "uri" => Want::Url,
                    "date" | "datetime" => Want::Date,
                    "regex" => match i["pattern"].as_str() {
                        Some(p) => Want::Pattern(p.to_string()),
                        None => Want::Existing,
                    },
                    _ => continue,
                }
            }
            "too_small" if message.contains("string") || i["type"] == "string" => Want::Present,
            "invalid_type" => match i["expected"].as_str().unwrap_or("") {
                _ if i["received"] == "undefined"
                    || message == "required"
                    || message.contains("received undefined") =>
                {
                    Want::Present
                }
                "number" | "integer" | "int" => Want::Number,
                _ => continue,
            },
            _ => continue,
        };
        if prop.as_ref().is_some_and(|p| props.contains(p)) || matches!(want, Want::OneOf(_)) {
            out.push(Complaint {
                property: prop,
                want,
            });
        }
    }
    out
}

/// pydantic's validation errors: `N validation error(s) for M`, then per
/// error a location line and an indented `message [type=T, …]` line.
fn pydantic_errors(text: &str, props: &[String]) -> Vec<Complaint> {
    if !text.contains("validation error") {
        return Vec::new();
    }
    let mut out = Vec::new();
    let mut location: Option<String> = None;
    for line in text.lines().take(64) {
        if !line.starts_with(' ') {
            // `path` or `arguments.path`: the last known property wins.
            location = line
                .trim()
                .split('.')
                .find(|p| props.iter().any(|k| k == p))
                .map(str::to_string);
            continue;
        }
        let Some(prop) = location.clone() else {
            continue;
        };
        let Some(at) = line.find("[type=") else {
            continue;
        };
        let kind: String = line[at + 6..]
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
            .collect();
        let message = line[..at].trim();
        let want = match kind.as_str() {
            "missing" | "string_too_short" => Want::Present,
            "literal_error" | "enum" => Want::OneOf(quoted(message)),
            "int_parsing" | "float_parsing" | "int_type" | "float_type" => Want::Number,
            "url_parsing" | "url_scheme" | "url_type" => Want::Url,
            "date_parsing" | "date_from_datetime_parsing" | "datetime_parsing" => Want::Date,
            "extra_forbidden" => Want::Absent,
            "string_pattern_mismatch" => match quoted(message).first() {
                Some(Value::String(p)) => Want::Pattern(p.clone()),
                _ => continue,
            },
            _ => continue,
        };
        out.push(Complaint {
            property: Some(prop),
            want,
        });
    }
    out
}

/// Values quoted with '…', "…" or `…` in `text`, in order, at most 16.
fn quoted(text: &str) -> Vec<Value> {
    let mut out = Vec::new();
    for q in ['\'', '"', '`'] {
        let parts: Vec<&str> = text.split(q).collect();
        for (i, p) in parts.iter().enumerate() {
            if i % 2 == 1 && i + 1 < parts.len() && !p.is_empty() && p.len() <= 64 {
                out.push(Value::String(p.to_string()));
            }
        }
        if !out.is_empty() {
            break;
        }
    }
    out.truncate(16);
    out
}

/// Words that say an answer is a refusal of what was given.
const REFUSING: &[&str] = &[
    "must",
    "should",
    "required",
    "missing",
    "invalid",
    "expected",
    "expects",
    "only",
    "not a valid",
    "not valid",
    "unsupported",
    "not supported",
    "cannot be",
    "can't be",
    "is not a",
    "not found",
    "does not exist",
    "doesn't exist",
    "no such",
    "unknown",
    "not allowed",
    "outside",
    "empty",
    "provide",
    "specify",
    "enoent",
    "eisdir",
    "enotdir",
];

/// Kinds of file a refusal may name by word, with the extension that
/// stands for each.
const FILE_KINDS: &[(&str, &str)] = &[
    ("excel", "xlsx"),
    ("workbook", "xlsx"),
    ("spreadsheet", "xlsx"),
    ("image", "png"),
    ("pdf", "pdf"),
    ("csv", "csv"),
    ("sqlite", "db"),
    ("database file", "db"),
    ("zip", "zip"),
    ("archive", "zip"),
];

/// What a refusal in plain words asks for.
fn free_text(text: &str, props: &[String], args: &Map<String, Value>) -> Vec<Complaint> {
    let t = text.to_lowercase();
    if !REFUSING.iter().any(|w| t.contains(w)) {
        return Vec::new();
    }
    let about = About::of(text, &t, props, args);
    let property = about.quoted_value.clone().or(about.named.clone());
    let mut out = file_complaints(&t, property.as_ref(), args);
    if let Some(values) = one_of(text) {
        out.push(Complaint {
            property: property.clone(),
            want: Want::OneOf(values),
        });
    }
    let said = |words: &[&str]| words.iter().any(|w| t.contains(w));
    let asks_for_it = said(&[
        "required",
        "missing",
        "empty",
        "must be provided",
        "must be specified",
        "provide",
        "specify",
        "must be a",
        "must be an",
        "must point",
        "is not set",
        "not given",
    ]);
    let Some(p) = about.named.or(about.quoted_value) else {
        // A refusal that asks for something without naming it, of a call
        // that left exactly one declared property out, is about that one.
        let left_out: Vec<&String> = props.iter().filter(|p| !args.contains_key(*p)).collect();
        if let ([only], true, true) = (&left_out[..], asks_for_it, out.is_empty()) {
            out.push(Complaint {
                property: Some(only.to_string()),
                want: Want::Present,
            });
        }
        return out;
    };
    let empty = |p: &str| match args.get(p) {
        None | Some(Value::Null) => true,
        Some(Value::String(s)) => s.trim().is_empty(),
        Some(Value::Array(a)) => a.is_empty(),
        _ => false,
    };
    if asks_for_it && about.mentioned.iter().any(|(_, m)| empty(m)) {
        // Every property it names that the call left out ("provide
        // projectSlug with branch"), in the order it names them.
        for (_, m) in about.mentioned.iter().filter(|(_, m)| empty(m)) {
            out.push(Complaint {
                property: Some(m.clone()),
                want: Want::Present,
            });
        }
    } else if empty(&p) && asks_for_it {
        out.push(Complaint {
            property: Some(p),
            want: Want::Present,
        });
    } else if let Some(want) = value_want(&t, out.is_empty()) {
        out.push(Complaint {
            property: Some(p),
            want,
        });
    }
    out
}

/// Which property a refusal in plain words is about.
struct About {
    /// One whose value it quotes.
    quoted_value: Option<String>,
    /// Those it names, where it first names each, in that order.
    mentioned: Vec<(usize, String)>,
    /// The first it names.
    named: Option<String>,
}

impl About {
    fn of(text: &str, t: &str, props: &[String], args: &Map<String, Value>) -> About {
        // A name is a word of its own: `path` in "file path", not in
        // "xpath". A value counts as quoted where it stands on its own:
        // `rows` in "insert_rows_or_columns" is not the value "rows".
        let quoted_value = args.iter().find_map(|(k, v)| {
            let s = v.as_str()?;
            (s.len() >= 3 && word_at(text, s).is_some()).then(|| k.clone())
        });
        let mut mentioned: Vec<(usize, String)> = props
            .iter()
            .filter_map(|p| mention(t, p).map(|at| (at, p.clone())))
            .collect();
        mentioned.sort();
        if mentioned.is_empty() {
            // "invalid arXiv ID" is about `paper_id`: a name's last word,
            // when only one property ends with it.
            let by_last: Vec<&String> = props.iter().filter(|p| last_word_in(t, p)).collect();
            if let [only] = by_last[..] {
                mentioned.push((0, only.clone()));
            }
        }
        let named = mentioned.first().map(|(_, p)| p.clone());
        About {
            quoted_value,
            mentioned,
            named,
        }
    }
}

/// What a refusal (lowercase) asks of a file or directory argument: an
/// absolute path, a type of file, a file rather than a directory or the
/// other way round.
fn file_complaints(
    t: &str,
    property: Option<&String>,
    args: &Map<String, Value>,
) -> Vec<Complaint> {
    let mut out = Vec::new();
    let current = property.and_then(|p| args.get(p)).and_then(Value::as_str);
    let current_ext = current
        .and_then(|s| s.rsplit_once('.'))
        .map(|(_, e)| e.to_lowercase());
    let mut exts: Vec<String> = extensions(t)
        .into_iter()
        .filter(|e| Some(e) != current_ext.as_ref())
        .collect();
    // Kinds as words of their own: "workbook" in a tool's name
    // (`list_workbooks`, which a refusal may quote) asks for nothing.
    for (word, ext) in FILE_KINDS {
        let named = word_at(t, word).is_some() || word_at(t, &format!("{word}s")).is_some();
        if named && Some(ext.to_string()) != current_ext && !exts.iter().any(|e| e == ext) {
            exts.push(ext.to_string());
        }
    }
    exts.retain(|e| arguments::seed_for_extension(e).is_some());
    let about_files = t.contains("file") || t.contains("path") || !extensions(t).is_empty();
    if t.contains("must be absolute") || t.contains("absolute path") {
        // Its example ("e.g. 'C:\\Reports\\q1.xlsx'") asks for no type.
        if current.is_some_and(|c| !c.starts_with('/')) {
            out.push(Complaint {
                property: property.cloned(),
                want: Want::Absolute,
            });
        }
    } else if !exts.is_empty() && about_files {
        out.push(Complaint {
            property: property.cloned(),
            want: Want::FileOfType(exts),
        });
    }
    if t.contains("is a directory") || t.contains("eisdir") {
        out.push(Complaint {
            property: property.cloned(),
            want: Want::File,
        });
    } else if t.contains("not a directory")
        || t.contains("enotdir")
        || t.contains("must be a directory")
    {
        out.push(Complaint {
            property: property.cloned(),
            want: Want::Directory,
        });
    }
    out
}

/// What a refusal (lowercase) that names a property with a value asks
/// that value to be; an existing thing only when nothing else was asked
/// (`nothing_yet`).
fn value_want(t: &str, nothing_yet: bool) -> Option<Want> {
    let said = |words: &[&str]| words.iter().any(|w| t.contains(w));
    if said(&["json"]) && said(&["invalid", "parse", "must be", "expected"]) {
        Some(Want::Json)
    } else if said(&["url", "uri"]) && said(&["invalid", "valid", "must", "scheme", "protocol"]) {
        Some(Want::Url)
    } else if said(&["date"])
        && said(&[
            "invalid", "format", "must", "expected", "cannot", "past", "future",
        ])
    {
        Some(Want::Date)
    } else if said(&[
        "must be a number",
        "must be an integer",
        "not a number",
        "expected number",
        "expected integer",
    ]) {
        Some(Want::Number)
    } else if nothing_yet
        && said(&[
            "not found",
            "does not exist",
            "doesn't exist",
            "no such",
            "unknown",
            "enoent",
            "could not find",
            "cannot find",
            "invalid",
            "should match",
            "must match",
            "not a valid",
            "not valid",
            "outside",
            "not allowed",
            "not permitted",
        ])
    {
        Some(Want::Existing)
    } else {
        None
    }
}

/// Where `t` (lowercase) first names the property `p` as a word, in any
/// of the spellings a message uses (`repo_path`, `repo path`, `repoPath`).
fn mention(t: &str, p: &str) -> Option<usize> {
    let snake = camel_to_words(p);
    let spaced = snake.replace('_', " ");
    [p.to_lowercase(), snake, spaced]
        .iter()
        .filter(|form| form.len() >= 2)
        .filter_map(|form| word_at(t, form))
        .min()
}

/// Whether the last word of a multi-word name stands alone in `t`.
fn last_word_in(t: &str, p: &str) -> bool {
    let snake = camel_to_words(p);
    match snake.rsplit_once('_') {
        Some((_, last)) if last.len() >= 2 => word_at(t, last).is_some(),
        _ => false,
    }
}

fn camel_to_words(p: &str) -> String {
    let mut out = String::new();
    for (i, c) in p.chars().enumerate() {
        if c.is_uppercase() && i > 0 {
            out.push('_');
        }
        out.extend(c.to_lowercase());
    }
    out
}

/// Where `w` first stands in `t` with no letter, digit or `_` either side.
fn word_at(t: &str, w: &str) -> Option<usize> {
    let is_word = |c: char| c.is_alphanumeric() || c == '_';
    t.match_indices(w).map(|(at, _)| at).find(|&at| {
        let before = t[..at].chars().next_back();
        let after = t[at + w.len()..].chars().next();
        !before.is_some_and(is_word) && !after.is_some_and(is_word)
    })
}

/// File extensions a text names (`.xlsx`), lowercase, in order, once.
fn extensions(t: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for (at, _) in t.match_indices('.') {
        let ext: String = t[at + 1..]
            .chars()
            .take_while(char::is_ascii_alphanumeric)
            .collect();
        // `.xlsx` standing alone or after a name (`q1.xlsx`); not `1.5`
        // or `e.g` (no letter, or too short).
        if (2..=5).contains(&ext.len())
            && ext.chars().any(|c| c.is_ascii_alphabetic())
            && arguments::seed_for_extension(&ext).is_some()
            && !out.contains(&ext)
        {
            out.push(ext);
        }
    }
    out
}

/// The values after "one of", "valid values are", "expected '…' | '…'",
/// "should be 'a' or 'b'" and the like.
fn one_of(text: &str) -> Option<Vec<Value>> {
    let t = text.to_lowercase();
    let at = [
        "one of",
        "valid values",
        "valid options",
        "allowed values",
        "possible values",
        "expected '",
        "expected \"",
        "should be '",
        "should be \"",
        "must be '",
        "must be \"",
    ]
    .iter()
    .filter_map(|m| {
        t.find(m)
            .map(|i| i + m.len() - usize::from(m.ends_with(['\'', '"'])))
    })
    .min()?;
    let rest = &text[at..];
    let end = rest.find(['\n', ';']).unwrap_or(rest.len());
    let rest = &rest[..end];
    let values = quoted(rest);
    if !values.is_empty() {
        return Some(values);
    }
    // Unquoted: `one of: a, b, c` or `one of [a, b]`.
    let list = rest.trim_start_matches([':', ' ', '[', '(']);
    let list = list.split([']', ')']).next().unwrap_or("");
    let list = list.trim_end_matches('.');
    let values: Vec<Value> = list
        .split([',', '|'])
        .map(|v| v.trim().trim_start_matches("or ").trim())
        .filter(|v| !v.is_empty() && v.len() <= 64 && !v.contains(' '))
        .take(16)
        .map(|v| Value::String(v.to_string()))
        .collect();
    (values.len() >= 2).then_some(values)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn obj(v: Value) -> Map<String, Value> {
        v.as_object().unwrap().clone()
    }

    fn hints() -> Hints {
        Hints {
            workspace: Some("/workspace".into()),
            ..Hints::default()
        }
    }

    /// excel-mcp-server 2.2.2's answers, as it gave them to the probe.
    #[test]
    fn an_excel_refusal_picks_the_seeded_workbook() {
        let schema = obj(json!({"type": "object",
            "properties": {"filepath": {"type": "string"}, "sheet_name": {"type": "string"}},
            "required": ["filepath", "sheet_name"]}));
        let args = obj(json!({"filepath": "/workspace/notes.txt", "sheet_name": "Sheet1"}));
        let said = "Error: Path '/workspace/notes.txt' must point to an Excel file (.xlsm, .xlsx, .xltm, .xltx)";
        let c = read(said, &schema, &args);
        assert_eq!(
            c[0],
            Complaint {
                property: Some("filepath".into()),
                want: Want::FileOfType(vec![
                    "xlsm".into(),
                    "xlsx".into(),
                    "xltm".into(),
                    "xltx".into()
                ]),
            }
        );
        let (next, why) =
            retry(said, &schema, &args, &hints(), std::slice::from_ref(&args)).unwrap();
        assert_eq!(next["filepath"], "/workspace/book.xlsx");
        assert_eq!(next["sheet_name"], "Sheet1", "the rest untouched");
        assert!(
            why.contains("filepath") && why.contains("book.xlsx"),
            "{why}"
        );
        assert!(complains(said, &schema, &args));
        // Tried already: nothing new to offer.
        assert!(retry(said, &schema, &args, &hints(), &[args.clone(), next]).is_none());
    }

    /// excel-mcp-server 2.2.2 as a host process (relative paths): its
    /// tool's own name in a refusal asks for nothing, a value is quoted
    /// only where it stands alone, and "must be absolute" is about the
    /// path, not about the type of its example.
    #[test]
    fn a_tools_name_or_an_example_in_a_refusal_is_not_what_it_asks() {
        let schema = obj(json!({"type": "object", "properties": {
            "directory": {"type": "string"}}}));
        let said =
            "Error executing tool list_workbooks: Path must be a non-empty file system path.";
        let h = Hints {
            tool: "list_workbooks".into(),
            ..hints()
        };
        let (next, _) = retry(said, &schema, &Map::new(), &h, &[]).unwrap();
        assert_eq!(
            next["directory"], "/workspace",
            "a directory, not the workbook"
        );
        let schema = obj(json!({"type": "object", "properties": {
            "axis": {"type": "string", "enum": ["rows", "columns"]},
            "path": {"type": "string"}}, "required": ["axis", "path"]}));
        let args = obj(json!({"axis": "rows", "path": "notes.txt"}));
        let said = "Error executing tool insert_rows_or_columns: Path 'notes.txt' must be absolute, e.g. 'C:\\Reports\\q1.xlsx' or '/home/me/q1.xlsx'.";
        let c = read(said, &schema, &args);
        assert_eq!(
            c,
            [Complaint {
                property: Some("path".into()),
                want: Want::Absolute
            }]
        );
        let (next, _) = retry(said, &schema, &args, &hints(), &[]).unwrap();
        assert_eq!(next["path"], "/workspace/notes.txt");
        assert_eq!(next["axis"], "rows");
        // `q1.xlsx` names a type where a refusal asks for one.
        let args = obj(json!({"axis": "rows", "path": "/workspace/notes.txt"}));
        let said = "Path '/workspace/notes.txt' must point to a workbook like q1.xlsx";
        let (next, _) = retry(said, &schema, &args, &hints(), &[]).unwrap();
        assert_eq!(next["path"], "/workspace/book.xlsx");
        // The refusal's own example: a cell in A1 notation.
        let schema = obj(json!({"type": "object", "properties": {
            "at": {"type": "string"}, "path": {"type": "string"}}, "required": ["at", "path"]}));
        let args = obj(json!({"at": "mcpvm-probe", "path": "/workspace/book.xlsx"}));
        let said = "Error executing tool insert_image: Invalid range 'mcpvm-probe'. Use A1 notation such as 'B2' or 'A1:C10'.";
        let (next, why) = retry(said, &schema, &args, &hints(), &[]).unwrap();
        assert_eq!(next["at"], "B2", "{why}");
    }

    /// mcp-server-git's git_branch: the refusal names no values, the
    /// property's description quotes them.
    #[test]
    fn values_the_description_quotes_are_tried_when_the_refusal_lists_none() {
        let schema = obj(json!({"type": "object", "properties": {
            "repo_path": {"type": "string"},
            "branch_type": {"type": "string", "description": "Whether to list local branches ('local'), remote branches ('remote') or all branches ('all')."}},
            "required": ["repo_path", "branch_type"]}));
        let args = obj(json!({"repo_path": "/workspace/repo", "branch_type": "mcpvm-probe"}));
        let said = "Error executing tool git_branch: Invalid branch type: mcpvm-probe";
        let (next, why) = retry(said, &schema, &args, &hints(), &[]).unwrap();
        assert_eq!(next["branch_type"], "local", "{why}");
        assert_eq!(next["repo_path"], "/workspace/repo");
    }

    #[test]
    fn an_optional_property_called_empty_is_filled() {
        // list_workbooks got {}: its `path` is optional.
        let schema = obj(json!({"type": "object",
            "properties": {"path": {"type": "string", "description": "Directory to search"}}}));
        let args = Map::new();
        let said = "Error: Path must be a non-empty file system path";
        let h = Hints {
            tool: "list_workbooks".into(),
            ..hints()
        };
        let (next, why) = retry(said, &schema, &args, &h, std::slice::from_ref(&args)).unwrap();
        assert_eq!(
            next["path"], "/workspace",
            "a listing tool's path is a directory"
        );
        assert!(why.contains("missing"), "{why}");
    }

    #[test]
    fn an_invalid_params_error_naming_a_missing_property_fills_it() {
        // The TypeScript SDK's (zod 3) message for a missing property.
        let schema = obj(json!({"type": "object",
            "properties": {"owner": {"type": "string"}, "limit": {"type": "integer"}},
            "required": ["owner"]}));
        let args = obj(json!({"owner": "mcpvm"}));
        let said = r#"MCP error -32602: Invalid arguments for tool list_repos: [
  {
    "code": "invalid_type",
    "expected": "number",
    "received": "undefined",
    "path": ["limit"],
    "message": "Required"
  }
]"#;
        let (next, why) =
            retry(said, &schema, &args, &hints(), std::slice::from_ref(&args)).unwrap();
        assert_eq!(next["limit"], 1);
        assert!(why.contains("'limit'"), "{why}");
        assert!(complains(said, &schema, &args));
    }

    #[test]
    fn an_enum_listed_in_an_error_is_taken_in_every_shape() {
        let schema = obj(json!({"type": "object",
            "properties": {"mode": {"type": "string"}}, "required": ["mode"]}));
        let args = obj(json!({"mode": "mcpvm"}));
        for said in [
            // zod 3
            r#"Invalid arguments: [{"code": "invalid_enum_value", "options": ["fast", "slow"], "path": ["mode"], "message": "Invalid enum value. Expected 'fast' | 'slow', received 'mcpvm'"}]"#,
            // pydantic
            "1 validation error for callArguments\nmode\n  Input should be 'fast' or 'slow' [type=literal_error, input_value='mcpvm', input_type=str]",
            // plain words
            "Invalid mode 'mcpvm': must be one of fast, slow",
        ] {
            let (next, _) = retry(said, &schema, &args, &hints(), std::slice::from_ref(&args))
                .unwrap_or_else(|| panic!("nothing read from {said}"));
            assert_eq!(next["mode"], "fast", "{said}");
        }
    }

    #[test]
    fn a_listed_value_feeds_an_id_the_server_did_not_know() {
        let schema = obj(json!({"type": "object",
            "properties": {"book_id": {"type": "string"}}, "required": ["book_id"]}));
        let args = obj(json!({"book_id": "1"}));
        let mut h = hints();
        h.seen.insert("book_id".into(), json!("bk-7f3a"));
        let said = "Unknown book_id '1': use an id from list_books";
        let (next, _) = retry(said, &schema, &args, &h, std::slice::from_ref(&args)).unwrap();
        assert_eq!(next["book_id"], "bk-7f3a");
    }

    #[test]
    fn answers_that_are_not_about_the_arguments_are_not_complaints() {
        let schema = obj(json!({"type": "object",
            "properties": {"query": {"type": "string"}}, "required": ["query"]}));
        let args = obj(json!({"query": "mcpvm"}));
        for said in [
            "BRAVE_API_KEY is not set",
            "Error: getaddrinfo EAI_AGAIN api.search.brave.com",
            "connect ECONNREFUSED 127.0.0.1:443",
            "No results for this query.",
            "[]",
        ] {
            assert!(!complains(said, &schema, &args), "{said}");
            assert!(
                retry(said, &schema, &args, &hints(), &[]).is_none(),
                "{said}"
            );
        }
        // chrome-devtools-mcp 1.11.0 with no browser in the image: it
        // names a file kind ("image") and a path, but its tools take no
        // path: the call reached the tool, which needs its environment.
        let said = "Chrome failed to start: Browser was not found at the configured executablePath (/usr/bin/chromium)\n\nchrome-devtools-mcp is running as root and Chrome does not start as root (https://crbug.com/638180). Run chrome-devtools-mcp as a non-root user; in a container, create an unprivileged user in the image";
        for (schema, args) in [
            (json!({"type": "object", "properties": {}}), json!({})),
            (
                json!({"type": "object", "properties": {"uid": {"type": "string"}, "dblClick": {"type": "boolean"}}}),
                json!({"uid": "1_2", "dblClick": false}),
            ),
            (
                json!({"type": "object", "properties": {"filePath": {"type": "string"}}}),
                json!({"filePath": "/workspace/shot.png"}),
            ),
        ] {
            let (schema, args) = (obj(schema), obj(args));
            assert!(!complains(said, &schema, &args), "{args:?}");
        }
        // Said of a file or a path, the call's path is what it is about.
        let schema = obj(json!({"type": "object", "properties": {"filePath": {"type": "string"}}}));
        let args = obj(json!({"filePath": "/workspace/notes.txt"}));
        assert!(complains(
            "The file must be an image (PNG or JPEG)",
            &schema,
            &args
        ));
    }

    #[test]
    fn directories_files_urls_and_unknown_keys() {
        let schema = obj(json!({"type": "object",
            "properties": {"path": {"type": "string"}, "url": {"type": "string"}},
            "required": ["path"]}));
        let dir = obj(json!({"path": "/workspace"}));
        let (next, _) = retry(
            "EISDIR: illegal operation on a directory, read",
            &schema,
            &dir,
            &hints(),
            std::slice::from_ref(&dir),
        )
        .unwrap();
        assert_eq!(next["path"], "/workspace/notes.txt");
        let file = obj(json!({"path": "/workspace/notes.txt"}));
        let (next, _) = retry(
            "ENOTDIR: not a directory, scandir '/workspace/notes.txt'",
            &schema,
            &file,
            &hints(),
            std::slice::from_ref(&file),
        )
        .unwrap();
        assert_eq!(next["path"], "/workspace");
        let url = obj(json!({"path": "/workspace", "url": "file:///workspace/page.html"}));
        let (next, _) = retry(
            "Invalid url: only http and https are supported",
            &schema,
            &url,
            &hints(),
            std::slice::from_ref(&url),
        )
        .unwrap();
        assert_eq!(next["url"], "http://127.0.0.1/");
        let extra = obj(json!({"path": "/workspace", "mcpvm_unexpected": 1}));
        let said = r#"[{"code": "unrecognized_keys", "keys": ["mcpvm_unexpected"], "path": [], "message": "Unrecognized key(s) in object: 'mcpvm_unexpected'"}]"#;
        let (next, _) = retry(
            said,
            &schema,
            &extra,
            &hints(),
            std::slice::from_ref(&extra),
        )
        .unwrap();
        assert_eq!(Value::Object(next), json!({"path": "/workspace"}));
    }

    /// Refusals the corpus audit's first pass recorded (docs/ecosystem/).
    #[test]
    fn refusals_seen_in_the_corpus_each_get_the_value_they_ask_for() {
        // mcp-atlassian: pydantic quotes the pattern the key must match.
        let schema = obj(json!({"type": "object",
            "properties": {"issue_key": {"type": "string"}}, "required": ["issue_key"]}));
        let args = obj(json!({"issue_key": "1"}));
        let said = "1 validation error for call[get_issue]\nissue_key\n  String should match pattern '^[A-Z][A-Z0-9_]+-\\d+(?:-\\d+)*$' [type=string_pattern_mismatch, input_value='1', input_type=str]\n    For further information visit https://errors.pydantic.dev/2.11/v/string_pattern_mismatch";
        let (next, why) =
            retry(said, &schema, &args, &hints(), std::slice::from_ref(&args)).unwrap();
        assert_eq!(next["issue_key"], "AA-1", "{why}");
        // CircleCI: two properties named as missing, optional both.
        let schema = obj(json!({"type": "object", "properties": {
            "workspaceRoot": {"type": "string"}, "projectSlug": {"type": "string"},
            "branch": {"type": "string"}, "projectURL": {"type": "string"}}}));
        let said = "Missing required inputs. Please provide either: 1) projectSlug with branch, 2) projectURL, or 3) workspaceRoot with gitRemoteURL and branch.";
        let (next, _) = retry(said, &schema, &Map::new(), &hints(), &[Map::new()]).unwrap();
        for p in ["projectSlug", "branch", "projectURL", "workspaceRoot"] {
            assert!(next.contains_key(p), "{p} filled: {next:?}");
        }
        let schema = obj(json!({"type": "object",
            "properties": {"csvFilePath": {"type": "string"}}}));
        let (next, _) = retry(
            "ERROR: csvFilePath is required.",
            &schema,
            &Map::new(),
            &hints(),
            &[],
        )
        .unwrap();
        assert_eq!(next["csvFilePath"], "/workspace/table.csv");
        // arxiv: "invalid arXiv ID" is about the one property ending in
        // `id`; its description gives an example.
        let schema = obj(
            json!({"type": "object", "properties": {"paper_id": {"type": "string",
            "description": "The arXiv ID of the paper (e.g. '2401.12345')"}}, "required": ["paper_id"]}),
        );
        let args = obj(json!({"paper_id": "1"}));
        let (next, _) = retry(
            r#"{"status": "error", "message": "invalid arXiv ID format"}"#,
            &schema,
            &args,
            &hints(),
            &[],
        )
        .unwrap();
        assert_eq!(next["paper_id"], "2401.12345");
        // aws-documentation: the description names the domain.
        let schema = obj(
            json!({"type": "object", "properties": {"url": {"type": "string",
            "description": "URL of the page, e.g. https://docs.aws.amazon.com/lambda/latest/dg/welcome.html"}},
            "required": ["url"]}),
        );
        let args = obj(json!({"url": "file:///workspace/page.html"}));
        let said =
            "Error executing tool read_documentation: URL must be from list of supported domains";
        let (next, _) = retry(said, &schema, &args, &hints(), &[]).unwrap();
        assert_eq!(
            next["url"],
            "https://docs.aws.amazon.com/lambda/latest/dg/welcome.html"
        );
        // Jira: a date in the past, and JSON text in a string.
        let schema = obj(json!({"type": "object", "properties": {
            "start_date": {"type": "string"}, "issues": {"type": "string"}}}));
        let args = obj(json!({"start_date": "2026-01-01", "issues": "hello from mcpvm"}));
        let (next, _) = retry(
            "Error calling tool 'create_sprint': Start date cannot be in the past.",
            &schema,
            &args,
            &hints(),
            &[],
        )
        .unwrap();
        assert_eq!(next["start_date"], "2030-01-01");
        let (next, _) = retry(
            "Error calling tool 'batch_create_issues': Invalid JSON in issues",
            &schema,
            &args,
            &hints(),
            &[],
        )
        .unwrap();
        assert_eq!(next["issues"], "[]");
        // drawio: a type the seed holds.
        let schema = obj(json!({"type": "object",
            "properties": {"file_path": {"type": "string"}}, "required": ["file_path"]}));
        let args = obj(json!({"file_path": "notes.txt"}));
        let (next, _) = retry(
            "Error: Only .drawio and .xml files are supported: notes.txt",
            &schema,
            &args,
            &hints(),
            &[],
        )
        .unwrap();
        assert_eq!(
            next["file_path"], "/workspace/diagram.drawio",
            "absolute: the server's working directory is not the workspace"
        );
    }

    #[test]
    fn upstream_and_environment_failures_in_the_corpus_are_not_complaints() {
        let schema = obj(json!({"type": "object", "properties": {
            "query": {"type": "string"}, "url": {"type": "string"}, "paper_id": {"type": "string"}}}));
        let args = obj(json!({"query": "mcpvm", "url": "http://127.0.0.1/", "paper_id": "1"}));
        for said in [
            "MCP error -32603: Failed to generate chart: getaddrinfo ENOTFOUND antv-studio.alipay.com",
            "request to https://api.datadoghq.com/api/v1/query?from=1&to=1&query=mcpvm failed, reason: getaddrinfo ENOTFOUND api.datadoghq.com",
            "Chrome failed to start: Browser was not found at the configured executablePath (/usr/bin/chromium)",
            "Error: No connection to browser extension. In order to proceed, you must first connect a tab by clicking the Browser MCP extension icon",
            "The browser connector is not available: listen EADDRNOTAVAIL: address not available 127.0.0.1:3025.",
            "Could not connect to arXiv after 3 attempts. Please check your network connection and retry shortly.",
            "Error: could not load the shape search index (fetch failed). Set DRAWIO_SHAPE_INDEX_URL to override the source.",
        ] {
            assert!(!complains(said, &schema, &args), "{said}");
        }
    }

    #[test]
    fn a_huge_or_hostile_answer_costs_a_bounded_read() {
        let schema = obj(json!({"type": "object",
            "properties": {"path": {"type": "string"}}, "required": ["path"]}));
        let args = obj(json!({"path": "/workspace/notes.txt"}));
        let huge = format!("must be {}", "[".repeat(1 << 20));
        assert!(retry(&huge, &schema, &args, &hints(), &[]).is_none());
        let many = format!("path must be one of {}", "'a', ".repeat(100_000));
        let (next, _) = retry(&many, &schema, &args, &hints(), &[]).unwrap();
        assert_eq!(next["path"], "a");
        // A multi-byte character across the read limit.
        let edge = format!("{}é path is required", "x".repeat(READ_BYTES - 1));
        let _ = read(&edge, &schema, &args);
    }
    #[test]
    fn a_path_refused_as_outside_its_root_is_tried_where_the_refusal_says() {
        // mcp-server-git started in `/` with --repository /workspace/repo.
        let schema = json!({"type": "object", "properties": {"repo_path": {"type": "string"}},
            "required": ["repo_path"]});
        let schema = schema.as_object().unwrap();
        let args = json!({"repo_path": "/workspace/notes.txt"})
            .as_object()
            .unwrap()
            .clone();
        let said = "Repository path '/workspace/notes.txt' is outside the allowed repository '/workspace/repo'";
        let (next, why) = retry(said, schema, &args, &hints(), &[args.clone()]).unwrap();
        assert_eq!(next["repo_path"], json!("/workspace/repo"), "{why}");
        assert!(why.contains("quoted"), "{why}");
        // Nothing quoted: the roots given come first.
        let h = Hints {
            roots: vec!["/workspace/repo".into()],
            ..hints()
        };
        let said = "repo_path: no such repository";
        let (next, why) = retry(said, schema, &args, &h, &[args.clone()]).unwrap();
        assert_eq!(next["repo_path"], json!("/workspace/repo"), "{why}");
        // A relative path is never generated while a workspace is known.
        let args = json!({"repo_path": "repo"}).as_object().unwrap().clone();
        let said = "Repository path 'repo' does not exist";
        let (next, _) = retry(said, schema, &args, &hints(), &[args.clone()]).unwrap();
        assert!(
            next["repo_path"].as_str().unwrap().starts_with('/'),
            "{next:?}"
        );
    }
}

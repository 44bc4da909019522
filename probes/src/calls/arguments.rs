//! Tool arguments generated from a tool's input schema (JSON Schema), for
//! calling tools the user gave no arguments for, and wrong-typed arguments
//! for the robustness probe.
//!
//! Only required properties are filled, and lists get one item (an empty
//! list is often a no-op): a small call that still exercises the tool. A
//! value is, in order of preference: `const`, the first `enum` member,
//! `default`, the first of `examples`, a value the server itself returned
//! earlier in the run under the same name (an id from a `list_*` call
//! feeding a `get_*` call), one the property's name or description asks
//! for (a path into the seeded workspace, a URL, a query, an id, a
//! timezone…), else one made from the type and its constraints (formats,
//! bounds, lengths, item counts). Every generated top-level value comes
//! with why it was chosen. `$ref`s into `$defs`/`definitions` (as
//! pydantic writes them) are followed, and `anyOf`/`oneOf` take their
//! first non-null branch.

use serde_json::{json, Map, Value};

/// Nesting deeper than this gets `null`: a recursive schema must not
/// recurse forever.
const MAX_DEPTH: usize = 16;
/// Values one call's arguments may hold, all nesting counted: a server's
/// schema (nested lists with `minItems`, self-references) could otherwise
/// ask for 64^15 of them. Past it, values are `null` and lists stop.
pub const MAX_VALUES: usize = 10_000;
/// Bytes one call's arguments may hold, as JSON, all counted: strings made
/// for `minLength`, property names, and every value copied from the
/// schema (`const`, `enum`, `default`, `examples`) or from the server's
/// earlier answers. A schema's 4 MiB `default` inside two lists of
/// `minItems: 64` once asked for 16 GiB of copies; a copy that does not
/// fit is `null` instead, and the argument's reason says so.
pub const MAX_BYTES: usize = 1 << 20;

/// What is left of one call's allowance.
struct Budget {
    values: usize,
    bytes: usize,
    /// Something was left out for want of room (said in the reason).
    capped: bool,
}

impl Budget {
    fn new() -> Budget {
        Budget {
            values: MAX_VALUES,
            bytes: MAX_BYTES,
            capped: false,
        }
    }

    /// Takes `bytes` of room; false (and nothing taken) when there is not
    /// that much left.
    fn take(&mut self, bytes: usize) -> bool {
        if bytes > self.bytes {
            self.capped = true;
            return false;
        }
        self.bytes -= bytes;
        true
    }

    /// A copy of `v` if it fits what is left (its JSON size and its
    /// values), else `null`. Measuring stops as soon as it is over, so a
    /// huge value costs no more to refuse than the room left.
    fn copy(&mut self, v: &Value) -> Value {
        let mut size = Size {
            bytes: 0,
            values: 0,
            room: (self.bytes, self.values),
        };
        if size.add(v) && self.values >= size.values && self.take(size.bytes) {
            self.values -= size.values;
            return v.clone();
        }
        self.capped = true;
        self.bytes = self.bytes.saturating_sub(5);
        Value::Null
    }
}

/// The JSON size of a value, counted up to a limit.
struct Size {
    bytes: usize,
    values: usize,
    room: (usize, usize),
}

impl Size {
    /// Adds `v`; false once over the room.
    fn add(&mut self, v: &Value) -> bool {
        self.values += 1;
        self.bytes += match v {
            Value::Null | Value::Bool(_) => 5,
            Value::Number(_) => 24,
            Value::String(s) => s.len() + 2,
            Value::Array(a) => 2 + a.len(),
            Value::Object(m) => 2 + m.keys().map(|k| k.len() + 4).sum::<usize>(),
        };
        if self.bytes > self.room.0 || self.values > self.room.1 {
            return false;
        }
        match v {
            Value::Array(a) => a.iter().all(|x| self.add(x)),
            Value::Object(m) => m.values().all(|x| self.add(x)),
            _ => true,
        }
    }
}

/// Where a top-level reason says the budget cut something.
fn with_cap_note(reason: String, budget: &Budget) -> String {
    match budget.capped {
        true => format!(
            "{reason}; cut to fit the {} KiB argument budget (null in its place)",
            MAX_BYTES >> 10
        ),
        false => reason,
    }
}

static NULL: Value = Value::Null;

/// `root[key]`, or null.
fn field<'a>(root: &'a Map<String, Value>, key: &str) -> &'a Value {
    root.get(key).unwrap_or(&NULL)
}

/// What a run offers argument generation beyond the schema.
#[derive(Debug, Clone, Default)]
pub struct Hints {
    /// The seeded workspace the server can see (`/workspace` in a VM
    /// given one), for path-like arguments.
    pub workspace: Option<String>,
    /// Values the server returned earlier, by property name (lowercase).
    pub seen: Map<String, Value>,
    /// The tool being called: its name says what a bare `path` is
    /// (`list_directory` wants a directory, `create_directory` a new one).
    pub tool: String,
    /// What the tool says of itself: where a retry looks for examples.
    pub description: String,
    /// The server's boundary as its catalogue entry or client gives it
    /// (guest paths): a path a refusal asks for is tried there first.
    pub roots: Vec<String>,
    /// Where the guest serves the workspace over HTTP, if it does (a
    /// server that drives a browser): URL arguments point at its page.
    pub site: Option<String>,
}

/// Files the seeded workspace holds (`mcpvm audit` writes them), by what
/// a property name asks for.
pub const SEED_TEXT: &str = "notes.txt";
pub const SEED_JSON: &str = "data.json";
pub const SEED_CSV: &str = "table.csv";
pub const SEED_MARKDOWN: &str = "README.md";
pub const SEED_HTML: &str = "page.html";
pub const SEED_PDF: &str = "paper.pdf";
/// A git repository with one commit.
pub const SEED_REPO: &str = "repo";
/// An Excel workbook with one sheet, `Sheet1`.
pub const SEED_XLSX: &str = "book.xlsx";
/// The sheet the workbook holds.
pub const SEED_SHEET: &str = "Sheet1";
/// A JavaScript file.
pub const SEED_JS: &str = "example.js";
/// A Python file.
pub const SEED_PY: &str = "example.py";
/// A PNG image (8×8 pixels).
pub const SEED_PNG: &str = "image.png";
/// An SQLite database with one table, `items`.
pub const SEED_SQLITE: &str = "data.db";
/// A zip archive holding two text files.
pub const SEED_ZIP: &str = "archive.zip";
/// A draw.io diagram (its XML) with one page.
pub const SEED_DRAWIO: &str = "diagram.drawio";

/// The seeded file for a file extension (lowercase, no dot), where the
/// workspace holds one of that type or one a reader of it also opens.
pub fn seed_for_extension(ext: &str) -> Option<&'static str> {
    Some(match ext {
        "xlsx" | "xlsm" | "xltx" | "xltm" | "xls" => SEED_XLSX,
        "csv" | "tsv" => SEED_CSV,
        "pdf" => SEED_PDF,
        "png" | "jpg" | "jpeg" | "gif" | "webp" | "bmp" | "image" => SEED_PNG,
        "db" | "sqlite" | "sqlite3" => SEED_SQLITE,
        "zip" | "archive" => SEED_ZIP,
        "json" => SEED_JSON,
        "md" | "markdown" => SEED_MARKDOWN,
        "html" | "htm" => SEED_HTML,
        "txt" | "text" | "log" => SEED_TEXT,
        "js" | "mjs" | "cjs" | "ts" | "jsx" | "tsx" => SEED_JS,
        "py" => SEED_PY,
        "drawio" | "xml" => SEED_DRAWIO,
        _ => return None,
    })
}

/// The value one property would get, optional or not: what a retry
/// fills in when the server says the property is missing.
pub fn property_value(schema: &Map<String, Value>, name: &str, hints: &Hints) -> (Value, String) {
    let mut budget = Budget::new();
    let prop = &field(schema, "properties")[name];
    let (v, reason) = top_value(schema, prop, name, hints, &mut budget);
    (v, with_cap_note(reason, &budget))
}

/// What a property's schema says of it (its `description`), or "".
pub fn property_description(schema: &Map<String, Value>, name: &str) -> String {
    let prop = resolve(schema, &field(schema, "properties")[name], 0);
    prop["description"].as_str().unwrap_or("").to_string()
}

/// A property's type (its first non-null one), `$ref`s followed.
pub fn property_type(schema: &Map<String, Value>, name: &str) -> Option<String> {
    primary_type(resolve(schema, &field(schema, "properties")[name], 0))
}

/// The names of a schema's properties, optional ones too.
pub fn property_names(schema: &Map<String, Value>) -> Vec<String> {
    field(schema, "properties")
        .as_object()
        .map(|m| m.keys().cloned().collect())
        .unwrap_or_default()
}

/// Arguments for a call with only the required properties.
pub fn generate(schema: &Map<String, Value>) -> Map<String, Value> {
    generate_with(schema, &Hints::default()).0
}

/// Arguments and, per generated property, why its value was chosen.
pub fn generate_with(
    schema: &Map<String, Value>,
    hints: &Hints,
) -> (Map<String, Value>, Map<String, Value>) {
    // The schema is borrowed, never copied: a server's schema can be as
    // large as its listing line.
    let root = schema;
    let mut budget = Budget::new();
    let mut args = Map::new();
    let mut why = Map::new();
    for name in required(field(root, "required")) {
        if budget.values == 0 || !budget.take(name.len() + 4) {
            break;
        }
        budget.capped = false;
        let prop = &field(root, "properties")[&name];
        let (v, reason) = top_value(root, prop, &name, hints, &mut budget);
        let reason = with_cap_note(reason, &budget);
        args.insert(name.clone(), v);
        why.insert(name, Value::String(reason));
    }
    (args, why)
}

/// A top-level property's value and why: the schema's own answer first,
/// then what the server said earlier, then what the name asks for, then
/// the type.
fn top_value(
    root: &Map<String, Value>,
    prop: &Value,
    name: &str,
    hints: &Hints,
    budget: &mut Budget,
) -> (Value, String) {
    let schema = resolve(root, prop, 0);
    if let Some(v) = schema.get("const") {
        return (budget.copy(v), "const".into());
    }
    if let Some(first) = schema["enum"].as_array().and_then(|e| e.first()) {
        return (budget.copy(first), "the first enum member".into());
    }
    if let Some(v) = schema.get("default") {
        return (budget.copy(v), "the schema's default".into());
    }
    if let Some(e) = schema["examples"].as_array().and_then(|e| e.first()) {
        return (budget.copy(e), "the schema's first example".into());
    }
    let ty = primary_type(schema);
    if let Some(v) = hints.seen.get(&name.to_lowercase()) {
        let fits = matches!(
            (ty.as_deref(), v),
            (Some("string"), Value::String(_))
                | (Some("integer" | "number"), Value::Number(_))
                | (None, _)
        );
        if fits {
            return (budget.copy(v), format!("{FROM_ANSWER} as '{name}'"));
        }
    }
    if let Some(v) = schema["pattern"]
        .as_str()
        .and_then(crate::calls::pattern::sample)
    {
        budget.values = budget.values.saturating_sub(1);
        let v = budget.copy(&Value::String(v));
        return (v, "made to match the schema's pattern".into());
    }
    let description = schema["description"].as_str().unwrap_or("");
    if ty.as_deref() == Some("string") && schema.get("format").is_none() {
        if let Some((v, reason)) = by_name(name, description, hints) {
            budget.values = budget.values.saturating_sub(1);
            let v = budget.copy(&Value::String(v));
            return (v, reason);
        }
    }
    // A list of plain strings named for what each is (`filePaths`,
    // `files`): one item, chosen by the singular name.
    let items = resolve(root, &schema["items"], 1);
    if ty.as_deref() == Some("array")
        && primary_type(items).as_deref() == Some("string")
        && items.get("format").is_none()
        && items.get("enum").is_none()
        && schema["minItems"].as_u64().unwrap_or(0) <= 1
        && schema["maxItems"].as_u64() != Some(0)
    {
        let one = name.strip_suffix('s').unwrap_or(name);
        if let Some((v, reason)) = by_name(one, description, hints) {
            budget.values = budget.values.saturating_sub(1);
            let v = budget.copy(&json!([v]));
            return (v, format!("{reason}, as a list of one"));
        }
    }
    let v = value_for(root, prop, 1, budget);
    let reason = match (ty.as_deref(), schema["format"].as_str()) {
        (_, Some(f)) => format!("made for format '{f}'"),
        (Some(t), None) => format!("made for type {t} and its bounds"),
        (None, None) => "no type given".into(),
    };
    (v, reason)
}

/// A string value a property's name (or description) asks for.
fn by_name(name: &str, description: &str, hints: &Hints) -> Option<(String, String)> {
    let n = name.to_lowercase();
    let d = description.to_lowercase();
    let has = |words: &[&str]| {
        words
            .iter()
            .any(|w| n == *w || n.ends_with(&format!("_{w}")) || n.ends_with(w))
    };
    let ws = hints.workspace.as_deref();
    // Absolute even where a description says "relative": relative to
    // what, the server's working directory, is not the workspace (a
    // server started in `/` refuses `repo` as outside `/workspace/repo`).
    let relative = ws.is_none();
    let in_ws = |file: &str| match ws {
        Some(w) => format!("{w}/{file}"),
        None => file.to_string(),
    };
    let reason = |what: &str| format!("the name '{name}' asks for {what}");
    if n.contains("repo") {
        return Some((
            in_ws(SEED_REPO),
            reason("a git repository (the seeded workspace's)"),
        ));
    }
    let tool = hints.tool.to_lowercase();
    let tool_has = |words: &[&str]| {
        tool.split(|c: char| !c.is_ascii_alphanumeric())
            .any(|w| words.contains(&w))
    };
    let path_like = has(&["path", "file", "filepath", "file_path"]);
    let dir_named = has(&["dir", "directory", "folder", "root", "cwd"]);
    let dir_tool = tool_has(&["directory", "directories", "dir", "folder", "tree", "mkdir"])
        || (path_like && !n.contains("file") && tool_has(&["list", "search", "find", "ls"]));
    if dir_named || (path_like && dir_tool) {
        let creates = tool_has(&["create", "make", "mkdir", "new"]);
        let v = match (ws, relative, creates) {
            (Some(w), false, true) => format!("{w}/new-directory"),
            (_, _, true) => "new-directory".to_string(),
            (Some(w), false, false) => w.to_string(),
            _ => ".".to_string(),
        };
        let what = match (creates, dir_named) {
            (true, _) => format!("a new directory (the tool '{}' makes one)", hints.tool),
            (false, true) => "a directory (the seeded workspace)".to_string(),
            (false, false) => format!(
                "a directory (the tool '{}' works on one): the seeded workspace",
                hints.tool
            ),
        };
        return Some((v, reason(&what)));
    }
    if has(&[
        "path",
        "file",
        "filename",
        "filepath",
        "file_path",
        "source",
        "input",
    ]) {
        let file = seed_file(&n, &d, &tool);
        return Some((in_ws(file), reason("a file (one in the seeded workspace)")));
    }
    if has(&["sheet", "sheet_name", "sheetname", "worksheet"]) {
        return Some((SEED_SHEET.into(), reason("a sheet (the seeded workbook's)")));
    }
    if has(&["range", "cell_range", "cells"]) || n == "cell" || n.ends_with("_cell") {
        let v = if n.contains("range") || n == "cells" {
            "A1:B2"
        } else {
            "A1"
        };
        return Some((v.into(), reason("cells in A1 notation")));
    }
    if has(&["url", "uri", "link", "href", "endpoint"]) {
        // The guest's own loopback: no network is reached, none is needed.
        let v = match (&hints.site, ws) {
            (Some(site), _) => format!("{}/{SEED_HTML}", site.trim_end_matches('/')),
            (None, Some(w)) => format!("file://{w}/{SEED_HTML}"),
            (None, None) => "http://127.0.0.1/".to_string(),
        };
        return Some((v, reason("a URL (a local page)")));
    }
    word_value(&n, &d, &has).map(|(v, what)| (v.to_string(), reason(what)))
}

/// The seeded file a file property asks for: its own name says the most
/// (`image_path` in a workbook tool is an image), then the description
/// (`d`) and the tool's name, all lowercase.
fn seed_file(n: &str, d: &str, tool: &str) -> &'static str {
    let about = |words: &[&str]| words.iter().any(|w| d.contains(w) || tool.contains(w));
    // The property's own name says the most (`image_path` in a
    // workbook tool is an image), then the description and the tool.
    let named = |words: &[&str]| words.iter().any(|w| n.contains(w));
    if named(&["image", "img", "picture", "photo", "logo", "icon"]) {
        SEED_PNG
    } else if named(&["sqlite", "database", "db_"]) || n == "db" {
        SEED_SQLITE
    } else if named(&["archive", "zip"]) {
        SEED_ZIP
    } else if named(&["csv"]) {
        SEED_CSV
    } else if named(&["drawio", "diagram"]) || about(&["drawio", "draw.io"]) {
        SEED_DRAWIO
    } else if about(&["excel", "xlsx", "workbook", "spreadsheet"]) {
        SEED_XLSX
    } else if about(&["javascript", "typescript", "eslint", "lint", ".js"]) {
        SEED_JS
    } else if d.contains("pdf") {
        SEED_PDF
    } else if about(&["sqlite", "database file"]) {
        SEED_SQLITE
    } else if about(&["python", ".py"]) {
        SEED_PY
    } else if d.contains("csv") {
        SEED_CSV
    } else if d.contains("json") {
        SEED_JSON
    } else if d.contains("markdown") || d.contains(".md") {
        SEED_MARKDOWN
    } else if d.contains("html") {
        SEED_HTML
    } else {
        SEED_TEXT
    }
}

/// A plain value a property's name (`n`) or description (`d`), both
/// lowercase, asks for, and what it is; `has` says whether the name is
/// or ends with one of the words.
fn word_value(
    n: &str,
    d: &str,
    has: &dyn Fn(&[&str]) -> bool,
) -> Option<(&'static str, &'static str)> {
    // A statement any SQL database runs and no table is needed for: it
    // reads nothing and writes nothing.
    if has(&["sql", "statement"]) || (n == "query" && d.contains("sql")) {
        return Some(("SELECT 1", "a SQL query (read-only, no table)"));
    }
    if has(&[
        "query", "search", "q", "keyword", "keywords", "term", "pattern", "topic", "subject",
    ]) {
        return Some(("mcpvm", "a search term"));
    }
    if d.contains("hh:mm") || n == "time" || n.ends_with("_time") {
        return Some(("12:00", "a time of day"));
    }
    if n == "date" || n.ends_with("_date") || d.contains("yyyy-mm-dd") {
        return Some(("2026-01-01", "a date"));
    }
    if has(&["timezone", "tz"]) {
        return Some(("UTC", "a timezone"));
    }
    if has(&["lang", "language", "locale"]) {
        return Some(("en", "a language"));
    }
    if has(&["email"]) {
        return Some(("probe@example.com", "an email address"));
    }
    if has(&[
        "content",
        "body",
        "message",
        "text",
        "prompt",
        "comment",
        "description",
        "title",
        "note",
    ]) {
        return Some(("hello from mcpvm", "some text"));
    }
    if ["revision", "rev", "ref", "commit", "sha", "target"].contains(&n)
        || n.ends_with("_sha")
        || n.ends_with("_ref")
    {
        return Some(("HEAD", "a git revision"));
    }
    if has(&["id", "uuid", "key"]) {
        return Some(("1", "an id (none seen earlier)"));
    }
    if has(&["name", "label", "tag", "entity"]) {
        return Some(("mcpvm", "a name"));
    }
    None
}

/// How a generated value taken from an earlier answer is explained.
const FROM_ANSWER: &str = "returned by the server earlier";

/// Whether generated arguments (their `why`, as [`generate_with`] gives
/// it) hold a value the server returned earlier (an id a listing gave):
/// another run of the server may return another.
pub fn uses_answers(why: &Value) -> bool {
    why.as_object().is_some_and(|w| {
        w.values()
            .any(|v| v.as_str().is_some_and(|t| t.starts_with(FROM_ANSWER)))
    })
}

/// Names and ids in a tool's answer (its text, when JSON), for later
/// calls: every string or number under a key that ends in `id` or
/// `name`, first seen wins. At most 256 kept, from at most 64 KiB.
pub fn remember(text: &str, seen: &mut Map<String, Value>) {
    const MAX: usize = 256;
    let Ok(v) = serde_json::from_str::<Value>(&text[..text.len().min(64 << 10)]) else {
        return;
    };
    let mut queue = std::collections::VecDeque::from([(String::new(), &v)]);
    while let Some((key, v)) = queue.pop_front() {
        if seen.len() >= MAX {
            return;
        }
        match v {
            Value::Object(m) => queue.extend(m.iter().map(|(k, v)| (k.to_lowercase(), v))),
            Value::Array(a) => queue.extend(a.iter().take(64).map(|v| (key.clone(), v))),
            Value::String(_) | Value::Number(_) if key.ends_with("id") || key.ends_with("name") => {
                seen.entry(key).or_insert_with(|| v.clone());
            }
            _ => {}
        }
    }
}

/// The suffix a varied string gets: a value no server holds.
pub const VARIED: &str = "-mcpvm-varied";

/// A varied call: its arguments, the property changed (a JSON pointer
/// below the top level: `entities/0/name`), and its value before and
/// after.
pub struct Varied {
    pub arguments: Map<String, Value>,
    pub property: String,
    pub was: Value,
    pub now: Value,
}

/// `args` with one value changed in a way the schema still accepts: the
/// input of a second call whose answer shows whether the tool's answer
/// depends on its input (a tool that answers the same whatever it is
/// given shows nothing of the server working). A top-level `enum`
/// property takes another member; a plain string gets [`VARIED`]
/// appended; a number moves by one within its bounds. Strings with a
/// `format` or `pattern`, and booleans, are not changed. When no
/// top-level value can be, the first string inside a list or an object
/// is (`entities/0/name`). None when nothing can be.
pub fn vary(args: &Map<String, Value>, schema: &Map<String, Value>) -> Option<Varied> {
    let props = field(schema, "properties");
    let prop_of = |k: &str| resolve(schema, &props[k], 0);
    // Members of an enum first: another member is always valid.
    let order = args
        .iter()
        .filter(|(k, _)| prop_of(k).get("enum").is_some())
        .chain(
            args.iter()
                .filter(|(k, _)| prop_of(k).get("enum").is_none()),
        );
    for (name, value) in order {
        let prop = prop_of(name);
        let changed = if let Some(members) = prop["enum"].as_array() {
            members.iter().find(|m| *m != value).cloned()
        } else {
            match value {
                Value::String(v)
                    if !v.is_empty()
                        && prop.get("format").is_none()
                        && prop.get("pattern").is_none()
                        && prop.get("const").is_none() =>
                {
                    let max = prop["maxLength"].as_u64().unwrap_or(u64::MAX) as usize;
                    (v.chars().count() + VARIED.len() <= max).then(|| json!(format!("{v}{VARIED}")))
                }
                Value::Number(n) if prop.get("const").is_none() => {
                    let max = prop["maximum"].as_f64().unwrap_or(f64::MAX);
                    let min = prop["minimum"].as_f64().unwrap_or(f64::MIN);
                    match (n.as_i64(), n.as_f64()) {
                        (Some(i), _) if (i + 1) as f64 <= max => Some(json!(i + 1)),
                        (Some(i), _) if (i - 1) as f64 >= min => Some(json!(i - 1)),
                        (None, Some(f)) if f + 1.0 <= max => Some(json!(f + 1.0)),
                        (None, Some(f)) if f - 1.0 >= min => Some(json!(f - 1.0)),
                        _ => None,
                    }
                }
                _ => None,
            }
        };
        if let Some(now) = changed {
            let mut arguments = args.clone();
            arguments.insert(name.clone(), now.clone());
            return Some(Varied {
                arguments,
                property: name.clone(),
                was: value.clone(),
                now,
            });
        }
    }
    // Inside lists and objects: the first non-empty string.
    let whole = Value::Object(args.clone());
    let at = first_string(&whole, String::new(), 0)?;
    let was = whole.pointer(&at)?.clone();
    let now = json!(format!("{}{VARIED}", was.as_str()?));
    let mut changed = whole;
    *changed.pointer_mut(&at)? = now.clone();
    let Value::Object(arguments) = changed else {
        return None;
    };
    Some(Varied {
        arguments,
        property: at.trim_start_matches('/').to_string(),
        was,
        now,
    })
}

/// The JSON pointer of the first non-empty string nested in `v` (not at
/// its top level), depth first, at most four levels down.
fn first_string(v: &Value, at: String, depth: usize) -> Option<String> {
    if depth > 4 {
        return None;
    }
    let children: Vec<(String, &Value)> = match v {
        Value::Object(m) => m
            .iter()
            .map(|(k, v)| (k.replace('~', "~0").replace('/', "~1"), v))
            .collect(),
        Value::Array(a) => a
            .iter()
            .enumerate()
            .map(|(i, v)| (i.to_string(), v))
            .collect(),
        _ => return None,
    };
    for (k, child) in children {
        let here = format!("{at}/{k}");
        match child {
            Value::String(s) if depth > 0 && !s.is_empty() => return Some(here),
            Value::Object(_) | Value::Array(_) => {
                if let Some(found) = first_string(child, here, depth + 1) {
                    return Some(found);
                }
            }
            _ => {}
        }
    }
    None
}

/// Whether two answers differ only where the changed value is repeated
/// back: `second` with the changed value put back as it was is `first`
/// ("Watching topic: x" and "Watching topic: x-mcpvm-varied"). Such an
/// answer depends on its input only by quoting it. Clock readings are
/// not told apart (`"last_checked": "2026-12-05T17:01:02"`, an epoch in
/// milliseconds: [`without_clocks`]); other numbers are ("Found 3" /
/// "Found 0"). A `second` cut short (ending in `…`) is compared with as
/// much of `first`.
pub fn only_echoes(first: &str, second: &str, was: &Value, now: &Value) -> bool {
    let text = |v: &Value| match v {
        Value::String(s) => s.clone(),
        v => v.to_string(),
    };
    let (was, now) = (text(was), text(now));
    if first == second || now.is_empty() || !second.contains(&now) {
        return false;
    }
    let back = without_clocks(&second.replace(&now, &was));
    let first = without_clocks(first);
    match back.strip_suffix('…') {
        Some(cut) => first.starts_with(cut),
        None => back == first,
    }
}

/// `text` with the digits of clock readings zeroed: a run of digits and
/// `:-.TZ+` holding a `:` and six digits or more (a time, a timestamp),
/// or ten digits or more in a row (an epoch).
pub fn without_clocks(text: &str) -> String {
    let clockish = |c: char| c.is_ascii_digit() || ":-.TZ+".contains(c);
    let mut out = String::with_capacity(text.len());
    let mut run = String::new();
    let flush = |run: &mut String, out: &mut String| {
        let digits = run.chars().filter(char::is_ascii_digit).count();
        let longest = run
            .split(|c: char| !c.is_ascii_digit())
            .map(str::len)
            .max()
            .unwrap_or(0);
        let clock = (digits >= 6 && run.contains(':')) || longest >= 10;
        out.extend(
            run.chars()
                .map(|c| if clock && c.is_ascii_digit() { '0' } else { c }),
        );
        run.clear();
    };
    for c in text.chars() {
        if clockish(c) {
            run.push(c);
        } else {
            flush(&mut run, &mut out);
            out.push(c);
        }
    }
    flush(&mut run, &mut out);
    out
}

/// Arguments where every required property has the wrong type.
pub fn wrong_types(schema: &Map<String, Value>) -> Map<String, Value> {
    let root = schema;
    let mut out = Map::new();
    let mut room = MAX_BYTES;
    for name in required(field(root, "required")) {
        // Property names are the server's: bounded like everything else.
        room = match room.checked_sub(name.len() + 32) {
            Some(r) => r,
            None => break,
        };
        let prop = resolve(root, &field(root, "properties")[&name], 0);
        let wrong = match primary_type(prop).as_deref() {
            Some("string") => json!(12345),
            Some("number" | "integer") => json!("not a number"),
            Some("boolean") => json!("not a boolean"),
            Some("array") => json!({"not": "an array"}),
            Some("object") => json!("not an object"),
            _ => json!([["unexpected"]]),
        };
        out.insert(name, wrong);
    }
    if out.is_empty() {
        // Nothing required: the arguments object itself has the wrong shape
        // only in JSON-RPC terms, so give an unexpected property instead.
        out.insert("mcpvm_unexpected".into(), json!([1, "two", null]));
    }
    out
}

/// The first string property, required ones first: where the robustness
/// probe puts its oversized argument.
pub fn first_string_property(schema: &Map<String, Value>) -> Option<String> {
    let root = schema;
    let props = field(root, "properties").as_object()?;
    let is_string = |n: &String| {
        primary_type(resolve(root, &props[n.as_str()], 0)).as_deref() == Some("string")
    };
    let req = required(field(root, "required"));
    req.iter()
        .find(|n| props.contains_key(n.as_str()) && is_string(n))
        .or_else(|| props.keys().find(|n| is_string(n)))
        .cloned()
}

/// The names a schema's `required` list holds (`list`: that list).
fn required(list: &Value) -> Vec<String> {
    list.as_array()
        .map(|a| {
            a.iter()
                .filter_map(|v| v.as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

/// Follows a local `$ref` (`#/$defs/X`, `#/definitions/X`).
fn resolve<'a>(root: &'a Map<String, Value>, schema: &'a Value, depth: usize) -> &'a Value {
    match schema["$ref"].as_str() {
        Some(r) if depth < MAX_DEPTH => {
            let target = r.strip_prefix('#').and_then(|p| pointer(root, p));
            resolve(root, target.unwrap_or(&NULL), depth + 1)
        }
        _ => schema,
    }
}

/// A JSON pointer (RFC 6901) into the schema object `root`; "" is the
/// schema itself, which a borrowed map cannot be: a `$ref` to `#` (a
/// whole-schema recursion) resolves to nothing, and gets `null`.
fn pointer<'a>(root: &'a Map<String, Value>, p: &str) -> Option<&'a Value> {
    let rest = p.strip_prefix('/')?;
    let (first, tail) = rest.split_once('/').unwrap_or((rest, ""));
    let first = first.replace("~1", "/").replace("~0", "~");
    let v = root.get(&first)?;
    match rest.contains('/') {
        true => v.pointer(&format!("/{tail}")),
        false => Some(v),
    }
}

/// The schema's type; for a list of types, the first that is not null.
fn primary_type(schema: &Value) -> Option<String> {
    match &schema["type"] {
        Value::String(t) => Some(t.clone()),
        Value::Array(ts) => ts
            .iter()
            .filter_map(Value::as_str)
            .find(|t| *t != "null")
            .map(str::to_string),
        _ if schema.get("properties").is_some() => Some("object".into()),
        _ if schema.get("items").is_some() => Some("array".into()),
        _ => None,
    }
}

fn value_for(
    root: &Map<String, Value>,
    schema: &Value,
    depth: usize,
    budget: &mut Budget,
) -> Value {
    if budget.values == 0 {
        return Value::Null;
    }
    // The null that ends a recursion is a value too: unbudgeted, a list
    // at the depth limit would hold 64 of them, at every branch.
    budget.values -= 1;
    if depth > MAX_DEPTH {
        return Value::Null;
    }
    let schema = resolve(root, schema, depth);
    if let Some(c) = schema.get("const") {
        return budget.copy(c);
    }
    if let Some(first) = schema["enum"].as_array().and_then(|e| e.first()) {
        return budget.copy(first);
    }
    if let Some(d) = schema.get("default") {
        return budget.copy(d);
    }
    if let Some(e) = schema["examples"].as_array().and_then(|e| e.first()) {
        return budget.copy(e);
    }
    for key in ["anyOf", "oneOf", "allOf"] {
        if let Some(branches) = schema[key].as_array() {
            let branch = branches
                .iter()
                .find(|b| resolve(root, b, depth)["type"] != "null")
                .or(branches.first());
            if let Some(b) = branch {
                return value_for(root, b, depth + 1, budget);
            }
        }
    }
    match primary_type(schema).as_deref() {
        Some("string") => {
            let s = string_for(schema, budget.bytes.saturating_sub(2));
            budget.take(s.as_str().map_or(0, str::len) + 2);
            s
        }
        Some("integer") if budget.take(24) => json!(number_for(schema).round() as i64),
        Some("number") if budget.take(24) => json!(number_for(schema)),
        Some("boolean") if budget.take(5) => json!(false),
        Some("integer" | "number" | "boolean" | "null") => Value::Null,
        Some("array") => {
            // One item where allowed: an empty list is often a no-op, and
            // the point is to exercise the tool.
            let max = schema["maxItems"].as_u64().unwrap_or(u64::MAX);
            let n = schema["minItems"]
                .as_u64()
                .unwrap_or(1)
                .max(1)
                .min(max)
                .min(64);
            let item = &schema["items"];
            let mut items = Vec::new();
            if !budget.take(2) {
                return Value::Null;
            }
            for _ in 0..n {
                if budget.values == 0 || !budget.take(1) {
                    break;
                }
                items.push(value_for(root, item, depth + 1, budget));
            }
            Value::Array(items)
        }
        Some("object") => {
            let mut m = Map::new();
            if !budget.take(2) {
                return Value::Null;
            }
            for name in required(&schema["required"]) {
                if budget.values == 0 || !budget.take(name.len() + 4) {
                    break;
                }
                let prop = &schema["properties"][&name];
                m.insert(name, value_for(root, prop, depth + 1, budget));
            }
            Value::Object(m)
        }
        _ if budget.take(13) => json!("mcpvm-probe"),
        _ => Value::Null,
    }
}

/// 1 where the bounds allow it (0 often means "none" to a tool),
/// otherwise the nearest bound.
fn number_for(schema: &Value) -> f64 {
    let mut n = 1.0;
    if let Some(min) = schema["minimum"].as_f64() {
        n = f64::max(n, min);
    }
    if let Some(min) = schema["exclusiveMinimum"].as_f64() {
        if n <= min {
            n = min + 1.0;
        }
    }
    if let Some(max) = schema["maximum"].as_f64() {
        n = f64::min(n, max);
    }
    if let Some(max) = schema["exclusiveMaximum"].as_f64() {
        if n >= max {
            n = max - 1.0;
        }
    }
    n
}

/// A string for `schema`, at most `room` bytes long however long
/// `minLength` asks.
fn string_for(schema: &Value, room: usize) -> Value {
    let by_format = match schema["format"].as_str() {
        Some("date-time") => "2026-01-01T00:00:00Z",
        Some("date") => "2026-01-01",
        Some("time") => "00:00:00",
        Some("email") => "probe@example.com",
        Some("uri" | "url" | "iri") => "https://example.com/",
        Some("uri-reference") => "/",
        Some("uuid") => "00000000-0000-4000-8000-000000000000",
        Some("hostname") => "example.com",
        Some("ipv4") => "127.0.0.1",
        Some("ipv6") => "::1",
        _ => "mcpvm-probe",
    };
    let by_pattern = schema["pattern"]
        .as_str()
        .and_then(crate::calls::pattern::sample);
    let mut s = by_pattern.unwrap_or_else(|| by_format.to_string());
    if let Some(min) = schema["minLength"].as_u64() {
        let want = (min.min(1 << 16) as usize).min(room);
        let have = s.chars().count();
        if have < want {
            s.extend(std::iter::repeat_n('x', want - have));
        }
    }
    if s.len() > room {
        s = s.chars().take(room).collect();
    }
    if let Some(max) = schema["maxLength"].as_u64() {
        s = s.chars().take(max as usize).collect();
    }
    Value::String(s)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn obj(v: Value) -> Map<String, Value> {
        v.as_object().unwrap().clone()
    }

    #[test]
    fn only_required_properties_with_typed_values() {
        let s = obj(json!({
            "type": "object",
            "properties": {
                "name": {"type": "string"},
                "count": {"type": "integer", "minimum": 5},
                "ratio": {"type": "number", "maximum": 0.5},
                "flag": {"type": "boolean"},
                "optional": {"type": "string"}
            },
            "required": ["name", "count", "ratio", "flag"]
        }));
        assert_eq!(
            Value::Object(generate(&s)),
            json!({"name": "mcpvm", "count": 5, "ratio": 0.5, "flag": false})
        );
    }

    #[test]
    fn const_enum_default_and_examples_win_in_that_order() {
        let s = obj(json!({
            "type": "object",
            "properties": {
                "a": {"type": "string", "const": "c", "enum": ["e"]},
                "b": {"type": "string", "enum": ["e1", "e2"], "default": "d"},
                "c": {"type": "integer", "default": 7, "examples": [9]},
                "d": {"type": "string", "examples": ["UTC"]}
            },
            "required": ["a", "b", "c", "d"]
        }));
        assert_eq!(
            Value::Object(generate(&s)),
            json!({"a": "c", "b": "e1", "c": 7, "d": "UTC"})
        );
    }

    #[test]
    fn formats_lengths_and_arrays() {
        let s = obj(json!({
            "type": "object",
            "properties": {
                "when": {"type": "string", "format": "date-time"},
                "site": {"type": "string", "format": "uri"},
                "id": {"type": "string", "format": "uuid"},
                "code": {"type": "string", "minLength": 15},
                "short": {"type": "string", "maxLength": 3},
                "tags": {"type": "array", "items": {"type": "string"}, "minItems": 2},
                "one": {"type": "array", "items": {"type": "integer"}},
                "none": {"type": "array", "items": {"type": "integer"}, "maxItems": 0}
            },
            "required": ["when", "site", "id", "code", "short", "tags", "one", "none"]
        }));
        let g = Value::Object(generate(&s));
        assert_eq!(g["when"], "2026-01-01T00:00:00Z");
        assert_eq!(g["site"], "https://example.com/");
        assert_eq!(g["id"], "00000000-0000-4000-8000-000000000000");
        assert_eq!(g["code"], "mcpvm-probexxxx");
        assert_eq!(g["short"], "mcp");
        assert_eq!(g["tags"], json!(["mcpvm-probe", "mcpvm-probe"]));
        assert_eq!(g["one"], json!([1]));
        assert_eq!(g["none"], json!([]));
    }

    #[test]
    fn refs_nullable_unions_and_nested_objects() {
        // The shape pydantic (Python MCP servers) emits.
        let s = obj(json!({
            "type": "object",
            "$defs": {
                "Entity": {
                    "type": "object",
                    "properties": {
                        "name": {"type": "string"},
                        "observations": {"type": "array", "items": {"type": "string"}, "minItems": 1}
                    },
                    "required": ["name", "observations"]
                }
            },
            "properties": {
                "entity": {"$ref": "#/$defs/Entity"},
                "limit": {"anyOf": [{"type": "null"}, {"type": "integer"}]},
                "mode": {"type": ["null", "string"]}
            },
            "required": ["entity", "limit", "mode"]
        }));
        assert_eq!(
            Value::Object(generate(&s)),
            json!({
                "entity": {"name": "mcpvm-probe", "observations": ["mcpvm-probe"]},
                "limit": 1,
                "mode": "mcpvm-probe"
            })
        );
    }

    #[test]
    fn recursive_and_broken_refs_end() {
        let s = obj(json!({
            "type": "object",
            "$defs": {"Node": {"type": "object", "properties": {"next": {"$ref": "#/$defs/Node"}}, "required": ["next"]}},
            "properties": {"root": {"$ref": "#/$defs/Node"}, "gone": {"$ref": "#/$defs/Missing"}},
            "required": ["root", "gone"]
        }));
        let g = Value::Object(generate(&s));
        assert!(g["root"]["next"]["next"].is_object());
        assert_eq!(g["gone"], "mcpvm-probe");
        assert!(generate(&obj(json!({}))).is_empty());
    }

    #[test]
    fn wrong_types_flip_every_required_property() {
        let s = obj(json!({
            "type": "object",
            "properties": {
                "a": {"type": "number"}, "b": {"type": "string"},
                "c": {"type": "boolean"}, "d": {"type": "array"}, "e": {"type": "object"}
            },
            "required": ["a", "b", "c", "d", "e"]
        }));
        let w = Value::Object(wrong_types(&s));
        assert!(w["a"].is_string() && w["b"].is_number() && w["c"].is_string());
        assert!(w["d"].is_object() && w["e"].is_string());
        assert!(wrong_types(&obj(json!({"type": "object"}))).contains_key("mcpvm_unexpected"));
    }

    #[test]
    fn first_string_property_prefers_required() {
        let s = obj(json!({
            "type": "object",
            "properties": {"a": {"type": "string"}, "n": {"type": "integer"}, "z": {"type": "string"}},
            "required": ["n", "z"]
        }));
        assert_eq!(first_string_property(&s).as_deref(), Some("z"));
        let none = obj(json!({"type": "object", "properties": {"n": {"type": "integer"}}}));
        assert_eq!(first_string_property(&none), None);
    }

    fn count(v: &Value) -> usize {
        1 + match v {
            Value::Array(a) => a.iter().map(count).sum(),
            Value::Object(m) => m.values().map(count).sum(),
            _ => 0,
        }
    }

    #[test]
    fn a_hostile_schema_gets_bounded_arguments() {
        // 64 items of 64 items of … fifteen deep, through a self-reference.
        let s = obj(json!({
            "type": "object",
            "$defs": {"deep": {"type": "array", "minItems": 64, "items": {"$ref": "#/$defs/deep"}}},
            "properties": {"a": {"$ref": "#/$defs/deep"}, "s": {"type": "string", "minLength": 65536}},
            "required": ["a", "s", "s2", "s3"],
        }));
        let mut many = s.clone();
        let props = many["properties"].as_object_mut().unwrap();
        for i in 0..40 {
            props.insert(
                format!("s{i}"),
                json!({"type": "string", "minLength": 65536}),
            );
        }
        many["required"] = json!((0..40).map(|i| format!("s{i}")).collect::<Vec<_>>());
        // Found by the fuzzer: lists of lists to past the depth limit,
        // whose ending nulls were not counted.
        let deep = obj(json!({
            "type": "object",
            "$defs": {"d": {"minItems": 80, "items": {"items": {"$ref": "#/$defs/d"}}}},
            "properties": {"a": {"$ref": "#/$defs/d"}},
            "required": ["a"],
        }));
        for schema in [s, many, deep] {
            let t = std::time::Instant::now();
            let args = Value::Object(generate(&schema));
            assert!(count(&args) <= MAX_VALUES + 1, "{}", count(&args));
            assert!(args.to_string().len() <= MAX_BYTES + 2);
            assert!(t.elapsed() < std::time::Duration::from_secs(5));
        }
    }

    /// The schema that drove `mcpvm probe` to 24 GB: a 4 MiB `default`
    /// inside two lists of `minItems: 64`, plus big `const`, `enum` and
    /// `examples` values and a server-returned value. Every copy counts
    /// against one byte budget; what does not fit is null, and the
    /// property's reason says so.
    #[test]
    fn copies_from_the_schema_count_against_one_byte_budget() {
        let big = "x".repeat(4 << 20);
        let s = obj(json!({
            "type": "object",
            "properties": {
                "bomb": {"type": "array", "minItems": 64, "items": {
                    "type": "array", "minItems": 64, "items": {"type": "string", "default": big}}},
                "small": {"type": "string", "default": "fits"},
                "c": {"const": {"k": big}},
                "e": {"enum": [big]},
                "x": {"type": "string", "examples": [big]},
                "seen_id": {"type": "string"},
            },
            "required": ["bomb", "small", "c", "e", "x", "seen_id"],
        }));
        let mut hints = Hints::default();
        hints
            .seen
            .insert("seen_id".into(), json!("y".repeat(2 << 20)));
        let t = std::time::Instant::now();
        let (args, why) = generate_with(&s, &hints);
        assert!(t.elapsed() < std::time::Duration::from_secs(2));
        let args = Value::Object(args);
        assert!(args.to_string().len() <= MAX_BYTES + 2);
        assert_eq!(args["small"], "fits");
        for cut in ["c", "e", "x", "seen_id"] {
            assert_eq!(args[cut], Value::Null, "{cut}");
            assert!(
                why[cut].as_str().unwrap().contains("argument budget"),
                "{cut}: {}",
                why[cut]
            );
        }
        // The lists are there, their items null: the call still goes out.
        assert!(args["bomb"].as_array().is_some_and(|a| !a.is_empty()));
        assert!(why["bomb"].as_str().unwrap().contains("argument budget"));
        assert!(!why["small"].as_str().unwrap().contains("budget"));
        // Names are the server's too, and robustness arguments bounded.
        let mut names = s.clone();
        names["required"] = json!((0..4000).map(|i| format!("{i:0>1000}")).collect::<Vec<_>>());
        assert!(Value::Object(wrong_types(&names)).to_string().len() <= 2 * MAX_BYTES);
        assert!(Value::Object(generate(&names)).to_string().len() <= MAX_BYTES + 2);
    }

    #[test]
    fn a_sql_property_gets_a_statement_every_database_runs() {
        let s = obj(json!({
            "type": "object",
            "properties": {
                "sql": {"type": "string", "description": "The SQL query to run"},
                "query": {"type": "string", "description": "A read-only SQL query"},
                "search": {"type": "string", "description": "Words to look for"}
            },
            "required": ["sql", "query", "search"]
        }));
        let (args, why) = generate_with(&s, &Hints::default());
        assert_eq!(args["sql"], "SELECT 1");
        assert_eq!(args["query"], "SELECT 1");
        // A query that is not SQL stays a search term.
        assert_eq!(args["search"], "mcpvm");
        assert!(why["sql"].as_str().unwrap().contains("SQL"), "{why:?}");
    }

    #[test]
    fn names_and_descriptions_pick_values_and_say_why() {
        let s = obj(json!({
            "type": "object",
            "properties": {
                "path": {"type": "string", "description": "Absolute path of the file to read"},
                "directory": {"type": "string"},
                "url": {"type": "string"},
                "query": {"type": "string"},
                "timezone": {"type": "string"},
                "entity_id": {"type": "string"},
                "mode": {"type": "string", "enum": ["fast", "slow"]},
                "count": {"type": "integer", "minimum": 3}
            },
            "required": ["path", "directory", "url", "query", "timezone", "entity_id", "mode", "count"]
        }));
        let hints = Hints {
            workspace: Some("/workspace".into()),
            ..Hints::default()
        };
        let (args, why) = generate_with(&s, &hints);
        assert_eq!(
            Value::Object(args),
            json!({
                "path": "/workspace/notes.txt", "directory": "/workspace",
                "url": "file:///workspace/page.html", "query": "mcpvm", "timezone": "UTC",
                "entity_id": "1", "mode": "fast", "count": 3
            })
        );
        assert!(
            why["path"].as_str().unwrap().contains("seeded workspace"),
            "{why:?}"
        );
        assert_eq!(why["mode"], "the first enum member");
        assert!(why["count"].as_str().unwrap().contains("integer"));
        // Without a workspace: no absolute guess. With one, absolute even
        // where the description says relative (to the server's working
        // directory, which is not the workspace).
        let (args, _) = generate_with(&s, &Hints::default());
        assert_eq!(args["path"], "notes.txt");
        // A guest that serves the workspace (a browser's server): its
        // page over HTTP, which a browser opens where it refuses file:.
        let served = Hints {
            workspace: Some("/workspace".into()),
            site: Some("http://127.0.0.1:8080".into()),
            ..Hints::default()
        };
        let (args, _) = generate_with(&s, &served);
        assert_eq!(args["url"], "http://127.0.0.1:8080/page.html");
        let rel = obj(
            json!({"type": "object", "properties": {"path": {"type": "string",
            "description": "Path relative to the project, a CSV file"}}, "required": ["path"]}),
        );
        assert_eq!(
            generate_with(&rel, &hints).0["path"],
            "/workspace/table.csv"
        );
        let t = obj(
            json!({"type": "object", "properties": {"time": {"type": "string",
            "description": "Time to convert in 24-hour format (HH:MM)"}}, "required": ["time"]}),
        );
        assert_eq!(generate_with(&t, &hints).0["time"], "12:00");
    }

    #[test]
    fn the_tool_says_what_a_bare_path_is() {
        let path = obj(
            json!({"type": "object", "properties": {"path": {"type": "string"}},
            "required": ["path"]}),
        );
        let on = |tool: &str| {
            let hints = Hints {
                workspace: Some("/workspace".into()),
                tool: tool.into(),
                ..Hints::default()
            };
            let (args, why) = generate_with(&path, &hints);
            (
                args["path"].as_str().unwrap().to_string(),
                why["path"].as_str().unwrap().to_string(),
            )
        };
        assert_eq!(on("read_file").0, "/workspace/notes.txt");
        assert_eq!(on("get_file_info").0, "/workspace/notes.txt");
        for tool in [
            "list_directory",
            "directory_tree",
            "search_files",
            "list_directory_with_sizes",
        ] {
            let (v, why) = on(tool);
            assert_eq!(v, "/workspace", "{tool}");
            assert!(why.contains(tool), "{why}");
        }
        assert_eq!(on("create_directory").0, "/workspace/new-directory");
        // A repository is the seeded one, wherever the name says so.
        let repo = obj(
            json!({"type": "object", "properties": {"repo_path": {"type": "string"},
            "revision": {"type": "string"}, "target": {"type": "string"}},
            "required": ["repo_path", "revision", "target"]}),
        );
        let hints = Hints {
            workspace: Some("/workspace".into()),
            tool: "git_show".into(),
            ..Hints::default()
        };
        let (args, why) = generate_with(&repo, &hints);
        assert_eq!(
            Value::Object(args),
            json!({"repo_path": "/workspace/repo", "revision": "HEAD", "target": "HEAD"})
        );
        assert!(why["repo_path"]
            .as_str()
            .unwrap()
            .contains("git repository"));
    }

    #[test]
    fn workbooks_sheets_ranges_and_lists_of_files() {
        let hints = |tool: &str| Hints {
            workspace: Some("/workspace".into()),
            tool: tool.into(),
            ..Hints::default()
        };
        let excel = obj(json!({"type": "object", "properties": {
            "filepath": {"type": "string", "description": "Path to Excel file"},
            "sheet_name": {"type": "string"}, "range": {"type": "string"}, "cell": {"type": "string"}},
            "required": ["filepath", "sheet_name", "range", "cell"]}));
        assert_eq!(
            Value::Object(generate_with(&excel, &hints("read_range")).0),
            json!({"filepath": "/workspace/book.xlsx", "sheet_name": "Sheet1", "range": "A1:B2", "cell": "A1"})
        );
        // A list of file paths gets one, of the kind the tool works on.
        let lint = obj(json!({"type": "object", "properties": {
            "filePaths": {"type": "array", "items": {"type": "string"}}},
            "required": ["filePaths"]}));
        let (args, why) = generate_with(&lint, &hints("lint-files"));
        assert_eq!(args["filePaths"], json!(["/workspace/example.js"]));
        assert!(why["filePaths"]
            .as_str()
            .unwrap()
            .ends_with("as a list of one"));
        // Lists of other things, or that must hold more, keep typed items.
        let other = obj(json!({"type": "object", "properties": {
            "numbers": {"type": "array", "items": {"type": "integer"}},
            "paths": {"type": "array", "items": {"type": "string"}, "minItems": 2}},
            "required": ["numbers", "paths"]}));
        let g = generate_with(&other, &hints("add")).0;
        assert_eq!(g["numbers"], json!([1]));
        assert_eq!(g["paths"].as_array().unwrap().len(), 2);
    }

    #[test]
    fn values_the_server_returned_feed_later_calls() {
        let mut seen = Map::new();
        remember(
            r#"{"items": [{"entity_id": "e-42", "name": "alpha"}, {"entity_id": "e-43"}]}"#,
            &mut seen,
        );
        remember("not json", &mut seen);
        assert_eq!(seen["entity_id"], "e-42");
        let s = obj(
            json!({"type": "object", "properties": {"entity_id": {"type": "string"},
            "name": {"type": "string"}}, "required": ["entity_id", "name"]}),
        );
        let (args, why) = generate_with(
            &s,
            &Hints {
                workspace: None,
                seen,
                ..Hints::default()
            },
        );
        assert_eq!(args["entity_id"], "e-42");
        assert_eq!(args["name"], "alpha");
        assert!(why["entity_id"]
            .as_str()
            .unwrap()
            .contains("returned by the server"));
    }
    #[test]
    fn a_varied_call_changes_one_value_the_schema_still_accepts() {
        let schema = json!({"type": "object", "properties": {
            "mode": {"type": "string", "enum": ["fast", "slow"]},
            "path": {"type": "string"},
            "when": {"type": "string", "format": "date"},
            "count": {"type": "integer", "maximum": 3},
        }});
        let schema = schema.as_object().unwrap();
        let args = |v: Value| v.as_object().unwrap().clone();
        // An enum takes another member, first.
        let v = vary(
            &args(json!({"mode": "fast", "path": "/workspace/a"})),
            schema,
        )
        .unwrap();
        assert_eq!(
            (
                v.property.as_str(),
                &v.arguments["mode"],
                &v.arguments["path"]
            ),
            ("mode", &json!("slow"), &json!("/workspace/a"))
        );
        assert_eq!((v.was, v.now), (json!("fast"), json!("slow")));
        // A plain string gets the suffix; a formatted one is left.
        let v = vary(
            &args(json!({"when": "2024-01-01", "path": "/workspace/a"})),
            schema,
        )
        .unwrap();
        assert_eq!(
            (
                v.property.as_str(),
                &v.arguments["path"],
                &v.arguments["when"]
            ),
            (
                "path",
                &json!("/workspace/a-mcpvm-varied"),
                &json!("2024-01-01")
            )
        );
        // A number at its maximum moves down.
        let v = vary(&args(json!({"count": 3})), schema).unwrap();
        assert_eq!(v.arguments["count"], json!(2));
        // A list of objects (server-memory's create_entities): the first
        // string inside it.
        let v = vary(
            &args(json!({"entities": [{"name": "mcpvm", "observations": ["x"]}]})),
            schema,
        )
        .unwrap();
        assert_eq!(v.property, "entities/0/name");
        assert_eq!(
            v.arguments["entities"][0]["name"],
            json!("mcpvm-mcpvm-varied")
        );
        // Nothing to change: no second call.
        assert!(vary(&args(json!({"when": "2024-01-01"})), schema).is_none());
        assert!(vary(&Map::new(), schema).is_none());
    }

    #[test]
    fn an_answer_that_only_quotes_its_changed_input_is_an_echo() {
        let (a, b) = (json!("mcpvm"), json!("mcpvm-mcpvm-varied"));
        assert!(only_echoes(
            "Watching topic: mcpvm",
            "Watching topic: mcpvm-mcpvm-varied",
            &a,
            &b
        ));
        assert!(!only_echoes(
            "Found 3 papers on mcpvm",
            "Found 0 papers on mcpvm-mcpvm-varied",
            &a,
            &b
        ));
        assert!(!only_echoes("same", "same", &a, &b));
        assert!(!only_echoes(
            "The sum of 1 and 1 is 2.",
            "The sum of 2 and 1 is 3.",
            &json!(1),
            &json!(2)
        ));
        // arxiv-mcp-server's watch_topic: the topic repeated back and a
        // clock, as recorded (the second answer cut).
        assert!(only_echoes(
            r#"{"status": "success", "topic": {"topic": "mcpvm", "last_checked": "2026-12-05T17:01:02.123"}}"#,
            r#"{"status": "success", "topic": {"topic": "mcpvm-mcpvm-varied", "last_checked": "2026-12-05T17:01:09.456…"#,
            &a,
            &b
        ));
        assert_eq!(
            without_clocks("at 12:00:01 on 2026-12-05, 3 items, id 1733412345678"),
            "at 00:00:00 on 2026-12-05, 3 items, id 0000000000000"
        );
    }
}

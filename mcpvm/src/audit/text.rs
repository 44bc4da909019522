//! Text that a server, a guest or a catalogue chose, made safe for the
//! reports: Markdown ([`md`]) and HTML ([`esc`]). Every section of
//! `report.md` and `report.html` passes such text through one of these.

/// Guest or server text for Markdown: one line, no control characters,
/// and nothing Markdown or HTML would read as markup.
pub fn md(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '\n' | '\r' | '\t' => out.push(' '),
            c if c.is_control() => out.push_str(&c.escape_unicode().to_string()),
            '\\' | '`' | '*' | '_' | '[' | ']' | '<' | '>' | '|' | '#' | '!' | '~' => {
                out.push('\\');
                out.push(c);
            }
            c => out.push(c),
        }
    }
    out
}

/// Text for HTML: the five characters that could end an element or an
/// attribute, escaped.
pub fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

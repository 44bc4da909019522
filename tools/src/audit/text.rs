//! Text that a server, a guest or a catalogue chose, made safe for
//! Markdown: as text ([`md`]) or in a code span ([`code`]). The Markdown
//! renderer (`render::markdown`) passes every span through one of these;
//! HTML is maud's, which escapes by construction.

use mcpvm_protocol::text::is_unsafe;

/// Guest or server text for Markdown: one line, no control characters
/// or bidirectional overrides,
/// and nothing Markdown or HTML would read as markup.
pub fn md(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '\n' | '\r' | '\t' => out.push(' '),
            c if is_unsafe(c) => out.push_str(&c.escape_unicode().to_string()),
            '\\' | '`' | '*' | '_' | '[' | ']' | '<' | '>' | '|' | '#' | '!' | '~' => {
                out.push('\\');
                out.push(c);
            }
            c => out.push(c),
        }
    }
    out
}

/// Text for a Markdown code span (a command, a file name): one line, no
/// control characters, no backtick to end the span early, no bar to end
/// a table cell.
pub fn code(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '\n' | '\r' | '\t' => out.push(' '),
            c if is_unsafe(c) => out.push_str(&c.escape_unicode().to_string()),
            '`' => out.push('\''),
            '|' => out.push_str("\\|"),
            c => out.push(c),
        }
    }
    out
}

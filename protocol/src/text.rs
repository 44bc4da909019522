//! Text that another party chose (a server, a guest, a shard from another
//! machine, a catalogue) on its way to a person: one rule for every place
//! it meets a terminal or a page. Control characters (C0, DEL, C1: ESC
//! starts the sequences that retitle a window, write the clipboard with
//! OSC 52 or move the cursor) and the bidirectional formatting characters
//! (which reorder what a reader sees, "Trojan Source") are shown as
//! `\u{…}` escapes, never passed on.

use std::borrow::Cow;

/// The bidirectional formatting characters of Unicode's UAX #9: the
/// embeddings and overrides (U+202A–U+202E), the isolates
/// (U+2066–U+2069) and the marks (U+200E, U+200F, U+061C).
pub fn is_bidi_control(c: char) -> bool {
    matches!(c, '\u{202A}'..='\u{202E}' | '\u{2066}'..='\u{2069}' | '\u{200E}' | '\u{200F}' | '\u{061C}')
}

/// A character that would drive a terminal or reorder a line.
pub fn is_unsafe(c: char) -> bool {
    c.is_control() || is_bidi_control(c)
}

/// `text` for one line: every unsafe character, line breaks included,
/// shown escaped.
pub fn printable(text: &str) -> Cow<'_, str> {
    escape(text, is_unsafe)
}

/// `text` over lines (an error's hint, a summary, a stderr tail): line
/// breaks and tabs kept, every other unsafe character shown escaped.
pub fn printable_lines(text: &str) -> Cow<'_, str> {
    escape(text, |c| c != '\n' && c != '\t' && is_unsafe(c))
}

fn escape(text: &str, unsafe_: impl Fn(char) -> bool) -> Cow<'_, str> {
    if !text.chars().any(&unsafe_) {
        return text.into();
    }
    let mut out = String::with_capacity(text.len() + 16);
    for c in text.chars() {
        if unsafe_(c) {
            out.extend(c.escape_unicode());
        } else {
            out.push(c);
        }
    }
    out.into()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn terminal_sequences_and_bidi_overrides_are_shown_escaped() {
        assert_eq!(printable("plain"), "plain");
        assert!(matches!(printable("plain"), Cow::Borrowed(_)));
        // OSC 52 (clipboard), OSC 0 (title), CSI (screen), C1 CSI.
        assert_eq!(
            printable("\u{1b}]52;c;aGk=\u{7}x"),
            "\\u{1b}]52;c;aGk=\\u{7}x"
        );
        assert_eq!(printable("a\u{9b}2Jb"), "a\\u{9b}2Jb");
        assert_eq!(printable("name\u{202e}txt.exe"), "name\\u{202e}txt.exe");
        assert_eq!(printable("\u{2067}x\u{2069}"), "\\u{2067}x\\u{2069}");
        assert_eq!(printable("a\nb\r"), "a\\u{a}b\\u{d}");
        assert_eq!(printable("\u{7f}"), "\\u{7f}");
        // Letters of right-to-left scripts are text, not controls.
        assert_eq!(printable("שלום"), "שלום");
    }

    #[test]
    fn lines_keep_their_breaks_and_lose_their_escapes() {
        assert_eq!(printable_lines("a\n\tb"), "a\n\tb");
        assert_eq!(
            printable_lines("a\u{1b}[2J\nb\r\u{202e}"),
            "a\\u{1b}[2J\nb\\u{d}\\u{202e}"
        );
    }
}

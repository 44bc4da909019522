//! A string that matches a schema's `pattern` (or a pattern a validation
//! error quotes: pydantic's "String should match pattern '…'"): one
//! short example, made by walking the regular expression and taking the
//! least each part allows (the first branch of an alternation, the first
//! member of a class, a quantifier's minimum, at least one for `+`).
//!
//! The ECMAScript/Python subset schemas use: literals, escapes (`\d`,
//! `\w`, `\s`, escaped punctuation), `.`, classes with ranges and
//! negation, groups (capturing, `(?:…)`, named; lookarounds produce
//! nothing), `|`, `* + ? {n} {n,} {n,m}` and their lazy forms, anchors.
//! Anything else (backreferences, unicode classes) gives None: the caller
//! falls back to what it would have sent. Bounded: patterns past
//! [`MAX_PATTERN`] characters, nesting past [`MAX_DEPTH`] and output past
//! [`MAX_OUTPUT`] bytes give None too.

const MAX_PATTERN: usize = 1024;
const MAX_DEPTH: usize = 32;
const MAX_OUTPUT: usize = 1024;
/// The most repetitions one quantifier's minimum is honoured to.
const MAX_REPEAT: usize = 64;

/// One string `pattern` matches, or None when it uses what this does not
/// read.
pub fn sample(pattern: &str) -> Option<String> {
    if pattern.chars().count() > MAX_PATTERN {
        return None;
    }
    let mut w = Walker {
        chars: pattern.chars().collect(),
        at: 0,
        depth: 0,
    };
    let out = w.alternation()?;
    (w.at == w.chars.len() && out.len() <= MAX_OUTPUT).then_some(out)
}

struct Walker {
    chars: Vec<char>,
    at: usize,
    depth: usize,
}

impl Walker {
    fn peek(&self) -> Option<char> {
        self.chars.get(self.at).copied()
    }

    fn next(&mut self) -> Option<char> {
        let c = self.peek()?;
        self.at += 1;
        Some(c)
    }

    /// Branches up to `)` or the end; the first one's string.
    fn alternation(&mut self) -> Option<String> {
        self.depth += 1;
        if self.depth > MAX_DEPTH {
            return None;
        }
        let first = self.sequence()?;
        while self.peek() == Some('|') {
            self.at += 1;
            self.sequence()?;
        }
        self.depth -= 1;
        Some(first)
    }

    fn sequence(&mut self) -> Option<String> {
        let mut out = String::new();
        while let Some(c) = self.peek() {
            if c == '|' || c == ')' {
                break;
            }
            let atom = self.atom()?;
            let times = self.quantifier()?;
            for _ in 0..times {
                out.push_str(&atom);
                if out.len() > MAX_OUTPUT {
                    return None;
                }
            }
        }
        Some(out)
    }

    /// One atom's least string.
    fn atom(&mut self) -> Option<String> {
        let c = self.next()?;
        Some(match c {
            '^' | '$' => String::new(),
            '.' => "a".into(),
            '\\' => self.escape(false)?,
            '[' => self.class()?.to_string(),
            '(' => {
                let mut produces = true;
                if self.peek() == Some('?') {
                    self.at += 1;
                    match self.next()? {
                        ':' => {}
                        '=' | '!' => produces = false,
                        '<' if matches!(self.peek(), Some('=' | '!')) => {
                            self.at += 1;
                            produces = false;
                        }
                        '<' | 'P' => {
                            // A named group: `(?<name>` or `(?P<name>`.
                            while self.next()? != '>' {}
                        }
                        _ => return None,
                    }
                }
                let inner = self.alternation()?;
                if self.next()? != ')' {
                    return None;
                }
                if produces {
                    inner
                } else {
                    String::new()
                }
            }
            '*' | '+' | '?' | '{' | ')' => return None,
            c => c.to_string(),
        })
    }

    /// After a `\`: what it stands for. Outside a class, `\b` and the
    /// anchors produce nothing; a letter this does not know is None.
    fn escape(&mut self, in_class: bool) -> Option<String> {
        Some(match self.next()? {
            'd' => "1".into(),
            'w' => "a".into(),
            's' => " ".into(),
            'D' | 'W' | 'S' => "-".into(),
            'n' => "\n".into(),
            't' => "\t".into(),
            'b' | 'B' | 'A' | 'Z' | 'z' if !in_class => String::new(),
            c if c.is_ascii_alphanumeric() => return None,
            c => c.to_string(),
        })
    }

    /// A class's first member (or, negated, a common character it leaves
    /// out).
    fn class(&mut self) -> Option<char> {
        let negated = self.peek() == Some('^');
        if negated {
            self.at += 1;
        }
        let mut members: Vec<(char, char)> = Vec::new();
        let mut first = true;
        loop {
            let c = self.next()?;
            if c == ']' && !first {
                break;
            }
            first = false;
            let lo = match c {
                '\\' => self.escape(true)?.chars().next()?,
                c => c,
            };
            if self.peek() == Some('-') && self.chars.get(self.at + 1).is_some_and(|c| *c != ']') {
                self.at += 1;
                let hi = match self.next()? {
                    '\\' => self.escape(true)?.chars().next()?,
                    h => h,
                };
                members.push((lo, hi));
            } else {
                members.push((lo, lo));
            }
        }
        if !negated {
            return members.first().map(|m| m.0);
        }
        ['a', 'A', '0', 'x', '_', '-']
            .into_iter()
            .find(|c| !members.iter().any(|(lo, hi)| lo <= c && c <= hi))
    }

    /// How many times the atom before it is taken: its minimum, at least
    /// one for `+`.
    fn quantifier(&mut self) -> Option<usize> {
        let n = match self.peek() {
            Some('*' | '?') => {
                self.at += 1;
                0
            }
            Some('+') => {
                self.at += 1;
                1
            }
            Some('{') => {
                let close = self.chars[self.at..].iter().position(|c| *c == '}')?;
                let inner: String = self.chars[self.at + 1..self.at + close].iter().collect();
                let min = inner.split(',').next()?.trim().parse::<usize>().ok()?;
                self.at += close + 1;
                min
            }
            _ => return Some(1),
        };
        // A lazy or possessive mark changes nothing here.
        if matches!(self.peek(), Some('?' | '+')) {
            self.at += 1;
        }
        (n <= MAX_REPEAT).then_some(n)
    }
}

#[cfg(test)]
mod tests {
    use super::sample;

    #[test]
    fn the_least_string_of_common_schema_patterns() {
        for (p, want) in [
            // Jira keys, as mcp-atlassian's schemas and errors give them.
            (r"^[A-Z][A-Z0-9_]+-\d+(?:-\d+)*$", "AA-1"),
            (r"^[A-Z][A-Z0-9_]+$", "AA"),
            (r"^\d{4}-\d{2}-\d{2}$", "1111-11-11"),
            (r"^(owner|member)/[a-z0-9._-]+$", "owner/a"),
            (r"^[^/\s]+$", "a"),
            (r"^v?\d+\.\d+(\.\d+)?$", "1.1"),
            (r"^(?P<org>[a-z]+)/(?<repo>\w+)$", "a/a"),
            (r"^(?=.*x)[a-z]{3,8}$", "aaa"),
            (r"^[\w.-]+@[\w-]+\.[a-z]{2,}$", "a@a.aa"),
            (r"[]a]", "]"),
        ] {
            assert_eq!(sample(p).as_deref(), Some(want), "{p}");
        }
    }

    #[test]
    fn what_it_cannot_read_or_would_be_huge_is_none() {
        for p in [
            r"(a)\1",
            r"\p{L}+",
            r"a{100000}",
            "(((((((((((((((((((((((((((((((((((a)))))))))))))))))))))))))))))))))",
            "[abc",
            "(abc",
            "a)",
            "*a",
        ] {
            assert_eq!(sample(p), None, "{p}");
        }
        assert_eq!(sample(&"a".repeat(2000)), None);
        assert_eq!(sample(&"a{64}".repeat(20)), None, "past the output bound");
    }
}

//! How every mcpvm process prints an error: the whole chain on one line,
//! "outer: inner: innermost", as the style guide asks. Shared so the
//! crates that test their messages check the text mcpvm prints.

/// "Outer: inner: innermost".
pub fn chain(e: &(dyn std::error::Error + 'static)) -> String {
    let mut s = e.to_string();
    let mut cur = e.source();
    while let Some(inner) = cur {
        s.push_str(": ");
        s.push_str(&inner.to_string());
        cur = inner.source();
    }
    s
}

#[cfg(test)]
mod tests {
    #[derive(Debug)]
    struct E(&'static str, Option<Box<E>>);
    impl std::fmt::Display for E {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str(self.0)
        }
    }
    impl std::error::Error for E {
        fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
            self.1.as_deref().map(|e| e as _)
        }
    }

    #[test]
    fn every_cause_is_printed_outermost_first() {
        let e = E(
            "reading x",
            Some(Box::new(E("open", Some(Box::new(E("denied", None)))))),
        );
        assert_eq!(super::chain(&e), "reading x: open: denied");
        assert_eq!(super::chain(&E("alone", None)), "alone");
    }
}

//! Package names and exact versions by each registry's own grammar.
//!
//! A name and a version from a catalogue (or `--package`) become
//! arguments of the host's npm, pip and uv, and lines of a requirements
//! file. Checked here, a name can never be read as an option
//! (`--index-url=…`, `--log=…`) and a version names one release, never a
//! tag (`latest`) or a range (`1`, `1.x`, `^1.2`) that the registry
//! resolves on the day: that would be the rug pull a pin is meant to
//! stop.

/// An npm package name (validate-npm-package-name's rules): `name` or
/// `@scope/name`, each part of URL-safe characters (letters, digits,
/// `-`, `.`, `_`, `~`), not starting with `.` or `_` (nor with `-`, which
/// npm's command line would read as an option), at most 214 in all.
/// Capitals are allowed for the old packages that have them.
pub fn is_npm_name(name: &str) -> bool {
    let part = |p: &str| {
        !p.is_empty()
            && !p.starts_with(['.', '_', '-'])
            && p.bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"-._~".contains(&b))
    };
    if name.is_empty() || name.len() > 214 {
        return false;
    }
    match name.strip_prefix('@') {
        Some(scoped) => {
            matches!(scoped.split_once('/'), Some((scope, n)) if part(scope) && part(n))
        }
        None => part(name) && name != "node_modules" && name != "favicon.ico",
    }
}

/// A Python distribution name (PEP 508): letters and digits, with `.`,
/// `_` and `-` inside, never first or last.
pub fn is_pypi_name(name: &str) -> bool {
    let b = name.as_bytes();
    !b.is_empty()
        && name.len() <= 200
        && b[0].is_ascii_alphanumeric()
        && b[b.len() - 1].is_ascii_alphanumeric()
        && b.iter()
            .all(|c| c.is_ascii_alphanumeric() || b"._-".contains(c))
}

/// A crate's name (crates.io): an ASCII letter, then letters, digits,
/// `-` and `_`, at most 64.
pub fn is_crate_name(name: &str) -> bool {
    name.len() <= 64
        && name.starts_with(|c: char| c.is_ascii_alphabetic())
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
}

/// A full semantic version (semver.org 2.0.0), as npm and crates.io
/// publish them: `MAJOR.MINOR.PATCH`, a `-pre.release` and a `+build` if
/// any. `1`, `1.x`, `^1.2.0` and `latest` are ranges or tags, not this.
pub fn is_semver(v: &str) -> bool {
    let (v, build) = match v.split_once('+') {
        Some((v, b)) => (v, Some(b)),
        None => (v, None),
    };
    let (core, pre) = match v.split_once('-') {
        Some((c, p)) => (c, Some(p)),
        None => (v, None),
    };
    let numeric = |s: &str| {
        !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit()) && (s == "0" || !s.starts_with('0'))
    };
    let ident =
        |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-');
    let core: Vec<&str> = core.split('.').collect();
    core.len() == 3
        && core.iter().all(|n| numeric(n))
        && pre.is_none_or(|p| {
            p.split('.')
                .all(|i| ident(i) && (!i.bytes().all(|b| b.is_ascii_digit()) || numeric(i)))
        })
        && build.is_none_or(|b| b.split('.').all(ident))
}

/// A PEP 440 version in its normal form: `[N!]N(.N)*[{a|b|rc}N][.postN]
/// [.devN][+local]`. `==` against it names one release (PEP 440 compares
/// `1` and `1.0` as the same one); `1.*`, `>=1` and `latest` are not
/// this.
pub fn is_pep440(v: &str) -> bool {
    let digits = |s: &str| s.bytes().take_while(u8::is_ascii_digit).count();
    let (v, local) = match v.split_once('+') {
        Some((v, l)) => (v, Some(l)),
        None => (v, None),
    };
    let local_ok = local.is_none_or(|l| {
        l.split('.').all(|p| {
            !p.is_empty()
                && p.bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit())
        })
    });
    let mut s = match v.split_once('!') {
        Some((epoch, rest)) if !epoch.is_empty() && digits(epoch) == epoch.len() => rest,
        Some(_) => return false,
        None => v,
    };
    // The release: numbers joined by dots.
    loop {
        let n = digits(s);
        if n == 0 {
            return false;
        }
        s = &s[n..];
        match s.strip_prefix('.') {
            Some(r) if digits(r) > 0 => s = r,
            _ => break,
        }
    }
    // Then at most one of each suffix, in this order, each with its number.
    for tag in ["a", "b", "rc", ".post", ".dev"] {
        if let Some(r) = s.strip_prefix(tag) {
            let n = digits(r);
            if n == 0 {
                return false;
            }
            s = &r[n..];
            // One pre-release kind at most.
            if matches!(tag, "a" | "b") && s.starts_with(['a', 'b', 'r']) {
                return false;
            }
        }
    }
    local_ok && s.is_empty()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn npm_names_by_npms_rules_and_never_an_option() {
        for ok in [
            "@modelcontextprotocol/server-memory",
            "chrome-devtools-mcp",
            "JSONStream",
            "lodash.merge",
            "@a/b~c",
        ] {
            assert!(is_npm_name(ok), "{ok}");
        }
        for bad in [
            "",
            "--log=/tmp/x",
            "-x",
            ".hidden",
            "_private",
            "@scope",
            "@scope/",
            "@/name",
            "a/b",
            "a b",
            "a@1",
            "node_modules",
            "with\"quote",
            "file:../x",
            "http://127.0.0.1/x.tgz",
        ] {
            assert!(!is_npm_name(bad), "{bad}");
        }
        assert!(!is_npm_name(&"a".repeat(215)));
    }

    #[test]
    fn pypi_names_by_pep_508() {
        for ok in [
            "mcp-server-time",
            "markitdown_mcp",
            "zope.interface",
            "a",
            "A1",
        ] {
            assert!(is_pypi_name(ok), "{ok}");
        }
        for bad in [
            "",
            "--log=/some/path",
            "--index-url=http://127.0.0.1:9/simple",
            "-e",
            "name-",
            ".name",
            "a b",
            "a==1",
            "a[x]",
            "git+https://x",
        ] {
            assert!(!is_pypi_name(bad), "{bad}");
        }
    }

    #[test]
    fn crate_names() {
        assert!(is_crate_name("serde_json") && is_crate_name("mcp-server"));
        for bad in ["", "-x", "1abc", "a/b", "a.b", &"a".repeat(65)] {
            assert!(!is_crate_name(bad), "{bad}");
        }
    }

    #[test]
    fn a_semver_version_is_exact_and_a_tag_or_range_is_not() {
        for ok in [
            "2026.8.31",
            "0.6.2",
            "1.0.0-rc.1",
            "1.0.0-alpha-beta.0.x",
            "1.0.0+build.5",
            "1.0.0-beta.11+sha.0a1b",
        ] {
            assert!(is_semver(ok), "{ok}");
        }
        for bad in [
            "",
            "latest",
            "next",
            "1",
            "1.x",
            "1.2",
            "^1.2.0",
            "~1.2.0",
            ">=1.0.0",
            "1.2.3 ||",
            "*",
            "01.2.3",
            "1.2.3-01",
            "1.2.3-",
            "1.2.3+",
            "1.2.3-a..b",
            "v1.2.3",
            "1.2.3.4",
            "1.2.x",
            "--tag=x",
        ] {
            assert!(!is_semver(bad), "{bad}");
        }
    }

    #[test]
    fn a_pep_440_release_is_exact_and_a_range_or_tag_is_not() {
        for ok in [
            "2025.4.25",
            "1",
            "1.0",
            "0.2.6",
            "1.0a1",
            "1.0b2",
            "1.0rc3",
            "1.0.post1",
            "1.0.dev4",
            "1.0rc1.post2.dev3",
            "1!2.0",
            "1.0+local.7",
        ] {
            assert!(is_pep440(ok), "{ok}");
        }
        for bad in [
            "",
            "latest",
            "1.*",
            "1.x",
            ">=1",
            "1.0,<2",
            "~=1.0",
            "1.0a",
            "1.0.post",
            "1..0",
            ".1",
            "1.",
            "v1.0",
            "1.0 ",
            "1.0+",
            "1.0+UPPER",
            "--index-url=x",
            "1.0;python_version>'3'",
            "1.0rc1a2",
        ] {
            assert!(!is_pep440(bad), "{bad}");
        }
    }
}

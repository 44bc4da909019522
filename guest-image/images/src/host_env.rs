//! The environment of every program the image builder starts on the host
//! (npm, pip, cargo, rustc, apt-get, the fetchers, the runtime image's
//! build): the host's own environment, cleared down to an allow-list.
//!
//! A catalogue is input that is passed around (the corpus, a colleague's
//! file), so nothing in it may reach a host installer's environment:
//! `NODE_OPTIONS=--require=…` runs JavaScript in the host's node before
//! `--ignore-scripts` matters, `PYTHONPATH` with a `sitecustomize.py` runs
//! Python in the host's pip, `PIP_ONLY_BINARY=:none:` makes pip build an
//! sdist on the host. An entry's `install_env` therefore goes only to the
//! install microVM (`ScriptJob::env`). The same variables in the user's
//! own environment would change what a host installer does behind the
//! catalogue's back, so they are dropped too: a host installer sees where
//! to find programs and caches, the locale, how to reach the registries
//! (proxies, CA bundles, index URLs) and mcpvm's own settings, nothing else.

use std::ffi::OsStr;
use std::process::Command;

/// Variables passed from the host's environment, by exact name.
const KEPT: &[&str] = &[
    // Where programs, caches and temporary files are.
    "PATH",
    "HOME",
    "USER",
    "LOGNAME",
    "TMPDIR",
    // The locale: error messages the build quotes.
    "LANG",
    "LC_ALL",
    "LC_CTYPE",
    "LC_MESSAGES",
    "TZ",
    // Reaching the registries from behind a proxy or a private CA.
    "http_proxy",
    "https_proxy",
    "no_proxy",
    "all_proxy",
    "HTTP_PROXY",
    "HTTPS_PROXY",
    "NO_PROXY",
    "ALL_PROXY",
    "SSL_CERT_FILE",
    "SSL_CERT_DIR",
    "NODE_EXTRA_CA_CERTS",
    "REQUESTS_CA_BUNDLE",
    "CURL_CA_BUNDLE",
    "PIP_CERT",
    "PIP_DEFAULT_TIMEOUT",
    "PIP_INDEX_URL",
    "PIP_EXTRA_INDEX_URL",
    "PIP_TRUSTED_HOST",
    "npm_config_registry",
    "NPM_CONFIG_REGISTRY",
    "npm_config_cafile",
    "NPM_CONFIG_CAFILE",
    "CARGO_HTTP_CAINFO",
    "CARGO_HTTP_PROXY",
    // Which Rust toolchain builds a crate's lock and vendors it.
    "RUSTUP_HOME",
    "RUSTUP_TOOLCHAIN",
];

/// Whether the host's `name` reaches a host installer.
pub fn kept(name: &OsStr) -> bool {
    let Some(name) = name.to_str() else {
        return false;
    };
    // mcpvm's own settings (MCPVM_CACHE, MCPVM_NPM_REGISTRY, …).
    KEPT.contains(&name) || name.starts_with("MCPVM_")
}

/// `program` with the allow-listed part of the host's environment only;
/// add what a step needs with `.env()` on the result.
pub fn command(program: impl AsRef<OsStr>) -> Command {
    let mut c = Command::new(program);
    c.env_clear()
        .envs(std::env::vars_os().filter(|(k, _)| kept(k)));
    c
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_allow_listed_names_pass() {
        for name in [
            "PATH",
            "HOME",
            "https_proxy",
            "SSL_CERT_FILE",
            "MCPVM_CACHE",
        ] {
            assert!(kept(OsStr::new(name)), "{name}");
        }
        for name in [
            "NODE_OPTIONS",
            "PYTHONPATH",
            "PYTHONSTARTUP",
            "PYTHONHOME",
            "PIP_ONLY_BINARY",
            "PIP_NO_BINARY",
            "PIP_CONFIG_FILE",
            "npm_config_ignore_scripts",
            "NPM_CONFIG_USERCONFIG",
            "LD_PRELOAD",
            "BASH_ENV",
            "RUSTC_WRAPPER",
            "CARGO_BUILD_RUSTC_WRAPPER",
            "GIT_CONFIG_GLOBAL",
        ] {
            assert!(!kept(OsStr::new(name)), "{name}");
        }
    }

    #[test]
    fn a_child_sees_only_the_allow_listed_environment_and_what_a_step_adds() {
        let out = command("/usr/bin/env").env("K", "v").output().unwrap();
        let names: Vec<String> = String::from_utf8_lossy(&out.stdout)
            .lines()
            .filter_map(|l| l.split_once('=').map(|(k, _)| k.to_string()))
            .collect();
        assert!(names.contains(&"K".to_string()), "{names:?}");
        assert!(
            names.iter().all(|k| k == "K" || kept(OsStr::new(k))),
            "{names:?}"
        );
    }
}

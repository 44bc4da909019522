//! What a server expects of the machine beyond its package, named once in
//! a catalogue entry (`needs = ["browser"]`) instead of spelt out in
//! every entry that drives a browser: Debian packages unpacked into its
//! layer, variables for the server and for its installer, and files in
//! the layer. The entry's own values win over a need's.

use serde::{Deserialize, Serialize};

/// A named need.
#[derive(Deserialize, Serialize, Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
#[serde(rename_all = "lowercase")]
pub enum Need {
    /// Debian's Chromium, headless-capable, where the browser-automation
    /// libraries look for a browser.
    Browser,
    /// Debian's PostgreSQL 15, started in the VM before the server with a
    /// small seeded database, for servers that are its clients.
    Postgres,
}

/// Where the browser is: Debian's launcher, which reads `/etc/chromium.d`.
pub const CHROMIUM: &str = "/usr/bin/chromium";

/// Where a server that needs a browser finds the workspace as a site: on
/// the guest's loopback, served by the runtime's python. Browsers refuse
/// `file:` pages (Playwright's MCP server blocks the scheme), and a page
/// served over HTTP is what a browser tool is for.
pub const SITE: &str = "http://127.0.0.1:8080";

/// The setup line that serves it: in the background, quiet, read-only
/// (a static file server), started before the server.
const SERVE_SITE: &str = "[ -d /workspace ] && (cd /workspace && exec python3 -m http.server 8080 --bind 127.0.0.1 >/dev/null 2>&1 &)";

/// The launcher's settings file the browser need adds. Chromium's
/// sandbox needs user namespaces, which the guest kernel leaves out (no
/// namespaces at all: docs/kernel.md), so without `--no-sandbox` it does
/// not start, as root or as the server's user: the microVM is the wall.
const CHROMIUM_FLAGS: &str = "\
# Added by mcpvm (needs = [\"browser\"]): Chromium starts without its
# own sandbox, which needs user namespaces the guest kernel leaves out;
# the microVM is the wall.
export CHROMIUM_FLAGS=\"$CHROMIUM_FLAGS --no-sandbox\"
# The browser's own background services (component updates, sync, field
# trials, DNS prefetching) stay quiet: what the egress log shows is what
# the server's pages asked for.
export CHROMIUM_FLAGS=\"$CHROMIUM_FLAGS --disable-component-update --disable-sync --disable-domain-reliability --dns-prefetch-disable --disable-field-trial-config --no-first-run\"
";

/// The PostgreSQL need's start script and seed, files in its layer.
const POSTGRES_START: &str = include_str!("needs/postgres-start.sh");
const POSTGRES_SEED: &str = include_str!("needs/postgres-seed.sql");

/// Where a server finds the seeded database: libpq's own variables (which
/// node-postgres and psycopg read too) and the URL most servers take.
pub const POSTGRES_URL: &str = "postgresql://postgres@127.0.0.1:5432/mcpvm";

impl Need {
    /// Debian 12 packages the need puts in the layer (with what they
    /// need): the browser, and fonts so that pages render text.
    pub fn apt(self) -> &'static [&'static str] {
        match self {
            Need::Browser => &["chromium", "fonts-liberation", "fonts-dejavu-core"],
            // Its maintainer scripts are not run (no cluster, no user):
            // the setup line makes both.
            Need::Postgres => &["postgresql-15"],
        }
    }

    /// Variables the server gets: where each automation library looks
    /// for a browser (Puppeteer, chrome-launcher/Lighthouse, Playwright's
    /// MCP server).
    pub fn env(self) -> &'static [(&'static str, &'static str)] {
        match self {
            Need::Browser => &[
                ("PUPPETEER_EXECUTABLE_PATH", CHROMIUM),
                ("CHROME_PATH", CHROMIUM),
                ("PLAYWRIGHT_MCP_EXECUTABLE_PATH", CHROMIUM),
            ],
            Need::Postgres => &[
                ("PGHOST", "127.0.0.1"),
                ("PGPORT", "5432"),
                ("PGUSER", "postgres"),
                ("PGDATABASE", "mcpvm"),
                ("DATABASE_URL", POSTGRES_URL),
            ],
        }
    }

    /// Variables the installer gets: the libraries' install scripts would
    /// download their own browser from a CDN that is not a registry.
    pub fn install_env(self) -> &'static [(&'static str, &'static str)] {
        match self {
            Need::Browser => &[
                ("PUPPETEER_SKIP_DOWNLOAD", "1"),
                ("PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD", "1"),
            ],
            Need::Postgres => &[],
        }
    }

    /// The memory a VM of the server gets at least, when neither the user
    /// (`--mem`) nor a profile that withholds memory says otherwise:
    /// Chromium's first page takes about 400 MiB beside node's.
    pub fn mem_mib(self) -> u64 {
        match self {
            Need::Browser => 1024,
            // The cluster on tmpfs (about 40 MiB) and its server beside
            // the MCP server's runtime.
            Need::Postgres => 512,
        }
    }

    /// Whether a program the need brings looks hosts up on its own, at
    /// any time: Chromium's background services, whatever its flags.
    pub fn background_lookups(self) -> bool {
        match self {
            Need::Browser => true,
            Need::Postgres => false,
        }
    }

    /// A shell line run in the guest before the server's own setup: a
    /// service it is a client of.
    pub fn setup(self) -> Option<&'static str> {
        match self {
            Need::Browser => Some(SERVE_SITE),
            Need::Postgres => Some("sh /usr/share/mcpvm/postgres-start.sh"),
        }
    }

    /// Where the need's service shows the workspace, for arguments that
    /// ask for a URL (`probes::calls::arguments::Hints::site`).
    pub fn site(self) -> Option<&'static str> {
        match self {
            Need::Browser => Some(SITE),
            Need::Postgres => None,
        }
    }

    /// Files the need writes into the layer: (path in the guest, text).
    pub fn files(self) -> &'static [(&'static str, &'static str)] {
        match self {
            Need::Browser => &[("etc/chromium.d/mcpvm", CHROMIUM_FLAGS)],
            Need::Postgres => &[
                ("usr/share/mcpvm/postgres-start.sh", POSTGRES_START),
                ("usr/share/mcpvm/postgres-seed.sql", POSTGRES_SEED),
            ],
        }
    }
}

/// Writes the needs' files under `root` (the layer's staging root).
pub fn write_files(needs: &[Need], root: &std::path::Path) -> std::io::Result<()> {
    for need in needs {
        for (path, text) in need.files() {
            write_in_layer(root, path, text, 0o644)?;
        }
    }
    Ok(())
}

/// Writes `text` at `path` (relative, plain names) under `root`, a
/// layer's staging tree, making the directories it lacks. Nothing on the
/// way may be a symbolic link: the tree holds unpacked packages, whose
/// links (absolute ones too) point at the guest's paths, and followed
/// here they would lead out of the tree onto the host's.
pub fn write_in_layer(
    root: &std::path::Path,
    path: &str,
    text: &str,
    mode: u32,
) -> std::io::Result<()> {
    use std::os::unix::fs::OpenOptionsExt;
    let names: Vec<&str> = path.split('/').filter(|c| !c.is_empty()).collect();
    let Some((file, dirs)) = names.split_last() else {
        return Err(std::io::Error::other(format!("'{path}' names no file")));
    };
    let mut at = root.to_path_buf();
    for name in dirs {
        at.push(name);
        match std::fs::symlink_metadata(&at) {
            Ok(m) if m.is_dir() => {}
            Ok(_) => {
                return Err(std::io::Error::other(format!(
                "{} is not a directory (a link or a file from a package): cannot put {path} there",
                at.display()
            )))
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => std::fs::create_dir(&at)?,
            Err(e) => return Err(e),
        }
    }
    at.push(file);
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(mode)
        .custom_flags(libc::O_NOFOLLOW)
        .open(&at)?;
    std::io::Write::write_all(&mut f, text.as_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_browser_need_writes_the_launcher_setting_into_the_layer() {
        let dir = tempfile::tempdir().unwrap();
        write_files(&[Need::Browser], dir.path()).unwrap();
        let text = std::fs::read_to_string(dir.path().join("etc/chromium.d/mcpvm")).unwrap();
        assert!(text.contains("--no-sandbox"), "{text}");
        // For every user: the sandbox would need user namespaces.
        assert!(!text.contains("id -u"), "{text}");
    }

    /// A package's absolute link (`/etc/x -> /tmp/elsewhere`), unpacked
    /// into the staging tree, would lead a write out of it onto the host.
    #[test]
    fn a_write_into_the_layer_never_follows_a_link() {
        let root = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        std::os::unix::fs::symlink(outside.path(), root.path().join("etc")).unwrap();
        let err = write_in_layer(root.path(), "etc/key.json", "mcpvm-dummy", 0o600).unwrap_err();
        assert!(err.to_string().contains("not a directory"), "{err}");
        std::fs::create_dir(root.path().join("usr")).unwrap();
        std::os::unix::fs::symlink(outside.path().join("f"), root.path().join("usr/key")).unwrap();
        assert!(write_in_layer(root.path(), "usr/key", "mcpvm-dummy", 0o600).is_err());
        assert_eq!(
            std::fs::read_dir(outside.path()).unwrap().count(),
            0,
            "nothing written outside"
        );
        write_in_layer(root.path(), "usr/share/x/key", "mcpvm-dummy", 0o600).unwrap();
        assert_eq!(
            std::fs::read_to_string(root.path().join("usr/share/x/key")).unwrap(),
            "mcpvm-dummy"
        );
    }

    #[test]
    fn the_postgres_need_brings_its_start_script_and_seed_and_runs_the_script() {
        let dir = tempfile::tempdir().unwrap();
        write_files(&[Need::Postgres], dir.path()).unwrap();
        let start = dir.path().join("usr/share/mcpvm/postgres-start.sh");
        let seed =
            std::fs::read_to_string(dir.path().join("usr/share/mcpvm/postgres-seed.sql")).unwrap();
        assert!(seed.contains("Grace Hopper"), "{seed}");
        let line = Need::Postgres.setup().unwrap();
        assert!(line.ends_with(start.strip_prefix(dir.path()).unwrap().to_str().unwrap()));
        // The URL the variables give names the database the script makes.
        let script = std::fs::read_to_string(&start).unwrap();
        assert!(script.contains("CREATE DATABASE mcpvm"), "{script}");
        assert!(POSTGRES_URL.ends_with("/mcpvm"));
        let env: Vec<_> = Need::Postgres.env().iter().map(|(k, _)| *k).collect();
        assert!(
            env.contains(&"DATABASE_URL") && env.contains(&"PGHOST"),
            "{env:?}"
        );
    }
}

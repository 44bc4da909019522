//! Catalogue entries made from a registry's list of published servers
//! (one JSON object a line: `registry`, `package`, `version`, `command`,
//! `args`, `required_env`, as `../shared/corpus/registry-2026-12.jsonl`
//! has them), without a person, and a seeded random draw from such a
//! list, stratified by registry (docs/registry.md).
//!
//! An entry runs what the source's own command line runs: the package at
//! the listed version, its own executable (no `command`: the build picks
//! it as npx and uvx do, [`crate::package::own_command`]), with the
//! source's arguments minus the launcher's own (`-y`, `--from`, the
//! package spec), a clearly named dummy for each required variable, and
//! no network (the audit refuses and records every lookup). A listing
//! whose fields cannot make an entry (not a package name, an exact
//! version, a variable name) is refused with why, and stays a row.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::catalogue::Entry;

/// One listed server, as the registry file has it; unknown fields are
/// kept out, absent ones empty.
#[derive(Debug, Clone, Deserialize, Serialize, PartialEq)]
pub struct Listing {
    /// `npm` or `pypi`.
    pub registry: String,
    pub package: String,
    pub version: String,
    /// The launcher the source starts it with (`npx`, `uvx`, `node`, …).
    pub command: String,
    #[serde(default)]
    pub args: Vec<String>,
    #[serde(default)]
    pub required_env: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub registry_name: Option<String>,
    #[serde(default)]
    pub sources: Vec<String>,
    /// The source registry's own check and the tools it counted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub toolsdk_validated: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub toolsdk_tools: Option<u32>,
    /// Variables whose real value the run takes from mcpvm's environment
    /// (a user's `--with-credentials`), not a dummy: the entry's
    /// `credentials`, redacted from everything reported.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub credentials: Vec<String>,
}

/// Bounds on what one listing may carry into a catalogue.
const MAX_ARGS: usize = 48;
const MAX_ARG_BYTES: usize = 1024;
const MAX_VARS: usize = 32;

/// The listings of a registry file, in file order; a line that is not a
/// listing is an error naming its line.
pub fn parse(text: &str) -> Result<Vec<Listing>, String> {
    text.lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
        .map(|(i, l)| {
            serde_json::from_str(l).map_err(|e| {
                format!(
                    "line {}: not a registry listing ({e}); each line is one JSON object with registry, package, version and command",
                    i + 1
                )
            })
        })
        .collect()
}

/// The catalogue entry for `l` and its name, or why none can be made.
pub fn entry(l: &Listing) -> Result<(String, Entry), String> {
    let spec = match l.registry.as_str() {
        "npm" => format!("npm:{}@{}", l.package, l.version),
        "pypi" => format!("pypi:{}=={}", l.package, l.version),
        other => return Err(format!("registry '{other}' is neither npm nor pypi")),
    };
    let (name, mut e) = crate::package::spec_entry(&spec)?;
    if l.args.len() > MAX_ARGS || l.args.iter().any(|a| a.len() > MAX_ARG_BYTES) {
        return Err(format!(
            "its arguments pass the bounds ({MAX_ARGS} of at most {MAX_ARG_BYTES} bytes)"
        ));
    }
    if l.args.iter().any(|a| a.contains('\0')) {
        return Err("an argument holds a NUL byte".into());
    }
    let Server {
        args,
        extras,
        dropped,
    } = server_args(l);
    e.args = args;
    e.extras = extras;
    if l.required_env.len() > MAX_VARS {
        return Err(format!("it requires over {MAX_VARS} variables"));
    }
    for key in &l.required_env {
        if !is_variable(key) {
            return Err(format!("'{}' is not a variable name", key.escape_debug()));
        }
        match l.credentials.contains(key) {
            true => e.credentials.push(key.clone()),
            false => {
                e.env.insert(key.clone(), dummy(key));
            }
        }
    }
    let mut notes = vec![format!(
        "generated from the registry listing `{} {}`",
        l.command,
        l.args.join(" ")
    )];
    if !dropped.is_empty() {
        notes.push(format!(
            "launcher arguments left out: {}",
            dropped.join(" ")
        ));
    }
    // What the entry ran from, kept in its notes (reviewable data).
    e.notes = Some(notes.join("; "));
    Ok((name, e))
}

/// A listing's command line as the server's own.
struct Server {
    args: Vec<String>,
    extras: Vec<String>,
    /// What the launcher took for itself (said in the entry's notes).
    dropped: Vec<String>,
}

/// The server's arguments: the source's, without the launcher's options
/// and every spelling of the package itself (`pkg`, `pkg@1.2.3`,
/// `pkg==1.2.3`, `pkg[extra]…`), wherever the source put it. Python's
/// `-m MODULE` is dropped too: the layer runs the package's executable.
fn server_args(l: &Listing) -> Server {
    let mut out = Server {
        args: Vec::new(),
        extras: Vec::new(),
        dropped: Vec::new(),
    };
    let mut it = l.args.iter().peekable();
    // Launcher options with a value of their own.
    let with_value: &[&str] = match l.command.as_str() {
        "npx" => &["-p", "--package"],
        "uvx" => &["--from", "--with", "--python", "-p"],
        "python" | "python3" => &["-m"],
        _ => &[],
    };
    let flags: &[&str] = match l.command.as_str() {
        "npx" => &["-y", "--yes", "-q", "--quiet"],
        "uvx" => &["-q", "--quiet"],
        _ => &[],
    };
    // bun's own verb (`bun PKG run start:stdio` runs a package script;
    // the package's executable is what a layer runs).
    let mut bun_run = false;
    while let Some(a) = it.next() {
        if flags.contains(&a.as_str()) {
            out.dropped.push(a.clone());
        } else if with_value.contains(&a.as_str()) {
            out.dropped.push(a.clone());
            if let Some(v) = it.next() {
                out.dropped.push(v.clone());
            }
        } else if let Some(extras) = names_package(a, &l.package) {
            out.dropped.push(a.clone());
            for x in extras {
                if !out.extras.contains(&x) {
                    out.extras.push(x);
                }
            }
        } else if l.command == "bun" && a == "run" && !bun_run {
            bun_run = true;
            out.dropped.push(a.clone());
            if let Some(v) = it.next() {
                out.dropped.push(v.clone());
            }
        } else {
            out.args.push(a.clone());
        }
    }
    out
}

/// Whether `arg` names `package` (any version, npm's or PyPI's way), and
/// the extras it asks for.
fn names_package(arg: &str, package: &str) -> Option<Vec<String>> {
    let rest = arg.strip_prefix(package).or_else(|| {
        // PyPI names compare normalised (case, '-', '_', '.').
        let n = arg
            .find(['[', '=', '@', '<', '>', '~', '!'])
            .unwrap_or(arg.len());
        (normal(&arg[..n]) == normal(package)).then(|| &arg[n..])
    })?;
    let (extras, rest) = match rest.strip_prefix('[') {
        Some(r) => {
            let (inside, after) = r.split_once(']')?;
            let list = inside
                .split(',')
                .map(|x| x.trim().to_string())
                .filter(|x| !x.is_empty())
                .collect();
            (list, after)
        }
        None => (Vec::new(), rest),
    };
    let versioned = rest.is_empty()
        || rest.starts_with('@')
        || rest.starts_with("==")
        || rest.starts_with(">=")
        || rest.starts_with("~=");
    versioned.then_some(extras)
}

fn normal(name: &str) -> String {
    name.to_ascii_lowercase().replace(['_', '.'], "-")
}

fn is_variable(key: &str) -> bool {
    let mut chars = key.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
        && key.len() <= 128
}

/// A dummy for a required variable, marked as one and shaped as its name
/// asks where a wrong shape would stop the server before it tries
/// anything: an address where it wants one (under `.invalid`, which no
/// resolver answers), a number for a port.
fn dummy(key: &str) -> String {
    let k = key.to_ascii_uppercase();
    let slug = key.to_ascii_lowercase().replace('_', "-");
    if k.ends_with("_URL") || k.ends_with("_URI") || k.ends_with("ENDPOINT") {
        format!("https://mcpvm-dummy-{slug}.invalid/")
    } else if k.ends_with("_HOST") || k.ends_with("HOSTNAME") {
        format!("mcpvm-dummy-{slug}.invalid")
    } else if k.ends_with("_PORT") {
        "1".into()
    } else {
        format!("mcpvm-dummy-{slug}")
    }
}

/// One drawn listing and what became of it: an entry's name, or why
/// none could be made.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Row {
    pub listing: Listing,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub refused: Option<String>,
}

/// The catalogue of the listings `chosen` (TOML, each entry checked as
/// the catalogue checks a hand-written one, and only the fields it sets),
/// and a row for each listing.
pub fn catalogue(listings: &[Listing], chosen: &[usize]) -> (String, Vec<Row>) {
    let mut text = String::from(
        "# Generated by `mcpvm image from-registry` from a registry's listings\n\
         # (docs/registry.md): review it as data; each entry's notes say what\n\
         # it was made from.\n",
    );
    let mut rows = Vec::new();
    let mut seen = std::collections::BTreeSet::new();
    for &i in chosen {
        let listing = listings[i].clone();
        let made = entry(&listing).and_then(|(name, e)| {
            if !seen.insert(name.clone()) {
                return Err(format!("listed twice (as {name})"));
            }
            let one = table(&name, &e)?;
            crate::catalogue::Catalogue::parse(&one, "the generated entry")
                .map_err(|err| err.to_string())?;
            Ok((name, one))
        });
        match made {
            Ok((name, one)) => {
                text.push('\n');
                text.push_str(&one);
                rows.push(Row {
                    listing,
                    name: Some(name),
                    refused: None,
                });
            }
            Err(why) => rows.push(Row {
                listing,
                name: None,
                refused: Some(why),
            }),
        }
    }
    (text, rows)
}

/// `[servers.NAME]` with the fields `e` sets (no empty lists, tables or
/// false flags), as TOML.
fn table(name: &str, e: &Entry) -> Result<String, String> {
    let mut v = toml::Table::try_from(e).map_err(|err| err.to_string())?;
    v.retain(|_, x| match x {
        toml::Value::Array(a) => !a.is_empty(),
        toml::Value::Table(t) => !t.is_empty(),
        toml::Value::Boolean(b) => *b,
        toml::Value::String(s) => !s.is_empty(),
        _ => true,
    });
    let mut servers = toml::Table::new();
    servers.insert(name.to_string(), toml::Value::Table(v));
    let mut doc = toml::Table::new();
    doc.insert("servers".into(), toml::Value::Table(servers));
    toml::to_string(&doc).map_err(|err| err.to_string())
}

/// A seeded draw of `n` listings, stratified by registry with each
/// registry's share of the list (largest remainders), each stratum drawn
/// without replacement from its listings in a fixed order (registry,
/// package, version), so that the same file and seed give the same draw.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Draw {
    pub seed: u64,
    pub size: usize,
    /// Registry → (listings, drawn).
    pub strata: BTreeMap<String, (usize, usize)>,
    /// Indices into the listings given, in draw order within each
    /// stratum, strata in name order.
    pub chosen: Vec<usize>,
}

pub fn draw(listings: &[Listing], n: usize, seed: u64) -> Draw {
    let mut by: BTreeMap<&str, Vec<usize>> = BTreeMap::new();
    for (i, l) in listings.iter().enumerate() {
        by.entry(l.registry.as_str()).or_default().push(i);
    }
    let total = listings.len();
    let n = n.min(total);
    // Each stratum's quota: the floor of its share, then the largest
    // remainders (ties to the name) until n is reached.
    let mut quota: Vec<(&str, usize, usize)> = by
        .iter()
        .map(|(r, ix)| (*r, ix.len() * n / total.max(1), ix.len() * n % total.max(1)))
        .collect();
    let mut left = n - quota.iter().map(|q| q.1).sum::<usize>();
    let mut order: Vec<usize> = (0..quota.len()).collect();
    order.sort_by(|&a, &b| quota[b].2.cmp(&quota[a].2).then(a.cmp(&b)));
    for &i in order.iter().cycle().take(quota.len() * 2) {
        if left == 0 {
            break;
        }
        if quota[i].1 < by[quota[i].0].len() {
            quota[i].1 += 1;
            left -= 1;
        }
    }
    let mut rng = SplitMix64(seed);
    let mut out = Draw {
        seed,
        size: n,
        strata: BTreeMap::new(),
        chosen: Vec::new(),
    };
    for (registry, k, _) in quota {
        let mut ix = by[registry].clone();
        ix.sort_by(|&a, &b| {
            let (x, y) = (&listings[a], &listings[b]);
            (&x.package, &x.version, a).cmp(&(&y.package, &y.version, b))
        });
        // A partial Fisher-Yates shuffle: the first k are the draw.
        for j in 0..k {
            let pick = j + (rng.next() % (ix.len() - j) as u64) as usize;
            ix.swap(j, pick);
        }
        out.strata.insert(registry.to_string(), (ix.len(), k));
        out.chosen.extend(&ix[..k]);
    }
    out
}

/// SplitMix64 (Steele, Lea and Flood 2014): small, fixed, and the same
/// on every machine, which a recorded draw needs.
struct SplitMix64(u64);

impl SplitMix64 {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
}

/// The 95 % Wilson score interval of `k` successes in `n` trials, as
/// fractions; (0, 1) for no trials.
pub fn wilson(k: usize, n: usize) -> (f64, f64) {
    if n == 0 {
        return (0.0, 1.0);
    }
    let (k, n, z) = (k as f64, n as f64, 1.959_963_984_540_054_f64);
    let p = k / n;
    let d = 1.0 + z * z / n;
    let centre = (p + z * z / (2.0 * n)) / d;
    let half = z / d * (p * (1.0 - p) / n + z * z / (4.0 * n * n)).sqrt();
    ((centre - half).max(0.0), (centre + half).min(1.0))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalogue::Runtime;

    fn listing(registry: &str, package: &str, command: &str, args: &[&str]) -> Listing {
        Listing {
            registry: registry.into(),
            package: package.into(),
            version: "1.2.3".into(),
            command: command.into(),
            args: args.iter().map(|a| a.to_string()).collect(),
            required_env: Vec::new(),
            registry_name: None,
            sources: Vec::new(),
            toolsdk_validated: None,
            toolsdk_tools: None,
            credentials: Vec::new(),
        }
    }

    /// A variable passed as a credential gets no dummy: the entry names it
    /// as a credential, its value taken from the environment at run time.
    #[test]
    fn a_credential_is_named_never_given_a_value() {
        let mut l = listing("npm", "srv", "npx", &["-y", "srv@1.2.3"]);
        l.required_env = vec!["API_KEY".into(), "REGION".into()];
        l.credentials = vec!["API_KEY".into()];
        let (_, e) = entry(&l).unwrap();
        assert_eq!(e.credentials, ["API_KEY"]);
        assert!(!e.env.contains_key("API_KEY"));
        assert!(e.env["REGION"].contains("mcpvm-dummy"), "{:?}", e.env);
    }

    /// An npm bin, npx's way: the launcher's `-y` and the package spec go,
    /// the server's own arguments stay, in order, wherever the spec was.
    #[test]
    fn an_npx_listing_runs_the_packages_own_executable_with_its_arguments() {
        let (name, e) = entry(&listing("npm", "mcp-x", "npx", &["-y", "mcp-x@1.2.3"])).unwrap();
        assert_eq!(name, "npm-mcp-x-1-2-3");
        assert_eq!((e.runtime, e.command.as_str()), (Runtime::Node, ""));
        assert!(e.args.is_empty() && e.network.is_empty());
        let (_, e) = entry(&listing(
            "npm",
            "firebase-tools",
            "npx",
            &["mcp", "firebase-tools@14.27.0"],
        ))
        .unwrap();
        assert_eq!(e.args, ["mcp"]);
        let (_, e) = entry(&listing(
            "npm",
            "@rnaga/wp-mcp",
            "npx",
            &["-y", "@rnaga/wp-mcp@1.0.6", "local", "start"],
        ))
        .unwrap();
        assert_eq!(e.package, "@rnaga/wp-mcp");
        assert_eq!(e.args, ["local", "start"]);
        assert!(e
            .notes
            .unwrap()
            .contains("left out: -y @rnaga/wp-mcp@1.0.6"));
    }

    /// A Python entry point, uvx's and python's ways: extras carried, the
    /// `-m MODULE` form left to the package's executable.
    #[test]
    fn a_pypi_listing_runs_its_entry_point() {
        let (name, e) = entry(&listing(
            "pypi",
            "realtimex-browser-use",
            "uvx",
            &["realtimex-browser-use[cli]@1.2.3", "--mcp"],
        ))
        .unwrap();
        assert_eq!(name, "pypi-realtimex-browser-use-1-2-3");
        assert_eq!(e.runtime, Runtime::Python);
        assert_eq!(
            (e.extras.as_slice(), e.args.as_slice()),
            (&["cli".to_string()][..], &["--mcp".to_string()][..])
        );
        let (_, e) = entry(&listing(
            "pypi",
            "mcp-dice-roller",
            "python",
            &["-m", "mcp_dice_roller", "mcp-dice-roller==1.2.3"],
        ))
        .unwrap();
        assert!(e.args.is_empty() && e.command.is_empty(), "{e:?}");
        // A normalised spelling of the name is the package too.
        let (_, e) = entry(&listing(
            "pypi",
            "Mac-letterhead",
            "python3",
            &["mac_letterhead==1.2.3", "mcp"],
        ))
        .unwrap();
        assert_eq!(e.args, ["mcp"]);
    }

    /// A scoped name, and a subcommand the source gives: kept as the
    /// server's arguments; bun's own `run SCRIPT` is not.
    #[test]
    fn a_scoped_package_keeps_its_subcommand() {
        let (name, e) = entry(&listing(
            "npm",
            "@azure/mcp",
            "npx",
            &["-y", "@azure/mcp@2.0.0-beta.6", "server", "start"],
        ))
        .unwrap();
        assert_eq!(name, "npm-azure-mcp-1-2-3");
        assert_eq!(e.args, ["server", "start"]);
        let (_, e) = entry(&listing(
            "npm",
            "@cyanheads/git-mcp-server",
            "bun",
            &["@cyanheads/git-mcp-server@2.5.8", "run", "start:stdio"],
        ))
        .unwrap();
        assert!(e.args.is_empty(), "{:?}", e.args);
        // Another package of the same prefix is an argument, not the package.
        let (_, e) = entry(&listing("npm", "mcp", "npx", &["mcp-other"])).unwrap();
        assert_eq!(e.args, ["mcp-other"]);
    }

    /// A library with no executable still makes an entry: its build says
    /// so (`has no executable to run as a server`), as a row; what cannot
    /// make an entry at all is refused with why.
    #[test]
    fn what_cannot_be_an_entry_is_refused_with_why() {
        let mut l = listing("npm", "left-pad", "npx", &["left-pad"]);
        assert!(entry(&l).is_ok());
        l.version = "latest".into();
        assert!(entry(&l).unwrap_err().contains("not an exact version"));
        let mut l = listing("npm", "--exec=x", "npx", &[]);
        assert!(entry(&l).unwrap_err().contains("not a package name"));
        l = listing("cargo", "x", "cargo", &[]);
        assert!(entry(&l).unwrap_err().contains("neither npm nor pypi"));
        let mut l = listing("npm", "x", "npx", &[]);
        l.required_env = vec!["A B".into()];
        assert!(entry(&l).unwrap_err().contains("not a variable name"));
        let l = listing("npm", "x", "npx", &["\0"]);
        assert!(entry(&l).is_err());
        let many: Vec<&str> = vec!["a"; MAX_ARGS + 1];
        assert!(entry(&listing("npm", "x", "npx", &many)).is_err());
    }

    /// Required variables get dummies that say so, shaped as their names ask.
    #[test]
    fn required_variables_get_marked_dummies() {
        let mut l = listing(
            "pypi",
            "adb-mysql-mcp-server",
            "uvx",
            &["adb-mysql-mcp-server"],
        );
        l.required_env = ["API_KEY", "DB_HOST", "DB_PORT", "BASE_URL"]
            .map(String::from)
            .to_vec();
        let (_, e) = entry(&l).unwrap();
        assert_eq!(e.env["API_KEY"], "mcpvm-dummy-api-key");
        assert_eq!(e.env["DB_HOST"], "mcpvm-dummy-db-host.invalid");
        assert_eq!(e.env["DB_PORT"], "1");
        assert_eq!(e.env["BASE_URL"], "https://mcpvm-dummy-base-url.invalid/");
    }

    /// The generated catalogue loads as a hand-written one does, holds
    /// only the fields its entries set, and each listing is a row: an
    /// entry, or why not.
    #[test]
    fn the_generated_catalogue_loads_and_every_listing_is_a_row() {
        let mut key = listing("npm", "mcp-x", "npx", &["-y", "mcp-x@1.2.3", "--stdio"]);
        key.required_env = vec!["X_TOKEN".into()];
        let ls = vec![
            key.clone(),
            listing("pypi", "mcp-y", "uvx", &["mcp-y==1.2.3"]),
            listing("npm", "mcp-z", "npx", &[]),
            key,
        ];
        let mut bad = ls[2].clone();
        bad.version = "^1".into();
        let ls = [ls, vec![bad]].concat();
        let (text, rows) = catalogue(&ls, &[0, 1, 3, 4]);
        let c = crate::catalogue::Catalogue::parse(&text, "t").unwrap();
        assert_eq!(c.servers.len(), 2);
        let x = &c.servers["npm-mcp-x-1-2-3"];
        assert_eq!(x.args, ["--stdio"]);
        assert_eq!(x.env["X_TOKEN"], "mcpvm-dummy-x-token");
        assert!(
            !text.contains("pins") && !text.contains("command"),
            "{text}"
        );
        assert_eq!(rows.len(), 4);
        assert_eq!(rows[1].name.as_deref(), Some("pypi-mcp-y-1-2-3"));
        assert!(rows[2].refused.as_deref().unwrap().contains("listed twice"));
        assert!(rows[3]
            .refused
            .as_deref()
            .unwrap()
            .contains("not an exact version"));
    }

    /// The registry file's lines; a bad line is named.
    #[test]
    fn a_registry_file_is_read_line_by_line() {
        let text = "{\"registry\":\"npm\",\"package\":\"a\",\"version\":\"1.0.0\",\"command\":\"npx\",\"args\":[\"-y\",\"a@1.0.0\"],\"toolsdk_validated\":true,\"toolsdk_tools\":3}\n\n{\"registry\":\"pypi\"}\n";
        let err = parse(text).unwrap_err();
        assert!(err.starts_with("line 3:"), "{err}");
        let ok = parse(&text.replace("{\"registry\":\"pypi\"}", "")).unwrap();
        assert_eq!(ok[0].toolsdk_tools, Some(3));
    }

    /// The draw: each registry's share (largest remainders), the same for
    /// the same seed whatever the file's order, another for another seed.
    #[test]
    fn the_draw_is_stratified_and_reproducible_from_its_seed() {
        let mut ls: Vec<Listing> = (0..886)
            .map(|i| listing("npm", &format!("n{i}"), "npx", &[]))
            .chain((0..265).map(|i| listing("pypi", &format!("p{i}"), "uvx", &[])))
            .collect();
        let d = draw(&ls, 200, 7);
        assert_eq!(d.strata["npm"], (886, 154));
        assert_eq!(d.strata["pypi"], (265, 46));
        assert_eq!(d.chosen.len(), 200);
        let set: std::collections::BTreeSet<_> = d.chosen.iter().collect();
        assert_eq!(set.len(), 200, "without replacement");
        let names = |d: &Draw, ls: &[Listing]| -> Vec<String> {
            d.chosen.iter().map(|&i| ls[i].package.clone()).collect()
        };
        let first = names(&d, &ls);
        ls.reverse();
        assert_eq!(names(&draw(&ls, 200, 7), &ls), first);
        assert_ne!(names(&draw(&ls, 200, 8), &ls), first);
        // The reference SplitMix64's first output for seed 0.
        assert_eq!(SplitMix64(0).next(), 0xe220_a839_7b1d_cdaf);
        let small = draw(&ls[..3], 10, 1);
        assert_eq!(small.size, 3);
    }

    /// Wilson intervals against values worked out from the formula
    /// (Wilson 1927) apart from this code, to four places.
    #[test]
    fn wilson_intervals_match_known_values() {
        let close = |(a, b): (f64, f64), (x, y): (f64, f64)| {
            assert!(
                (a - x).abs() < 5e-5 && (b - y).abs() < 5e-5,
                "({a}, {b}) vs ({x}, {y})"
            )
        };
        close(wilson(5, 10), (0.2366, 0.7634));
        close(wilson(0, 10), (0.0, 0.2775));
        close(wilson(10, 10), (0.7225, 1.0));
        close(wilson(81, 263), (0.2553, 0.3662));
        assert_eq!(wilson(0, 0), (0.0, 1.0));
    }
}

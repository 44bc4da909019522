//! A user's own setup: the servers an MCP client's configuration names
//! (the file `mcpvm client add` writes), each mapped to what mcpvm can
//! run in a microVM, or a row that says why not. Nothing a configuration
//! names is run on the host: `npx -y PKG@VER` and `uvx PKG==VER` become
//! registry listings, whose catalogue entries `mcpvm_images::registry`
//! makes as it does for a registry's (the launcher's own arguments
//! dropped, each variable the entry sets given a marked dummy, never its
//! value); an entry already wrapped in `mcpvm run --package SPEC` is that
//! package; a local script, a container image, a remote URL or a command
//! this cannot map is a row with why.

use mcpvm_images::registry::Listing;
use serde::Serialize;
use serde_json::Value;

/// Entries read from one configuration, at most.
const MAX_ENTRIES: usize = 256;

/// What one configured server maps to.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "snake_case", tag = "kind")]
pub enum Mapped {
    /// A published package, to build and audit.
    Package { listing: Listing },
    /// Not run, and why.
    NotRun { why: String },
}

/// One server of the configuration: its name there and what it maps to.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Configured {
    pub name: String,
    #[serde(flatten)]
    pub mapped: Mapped,
}

/// The servers of `config`'s object under `key` (`mcpServers`, or VS
/// Code's `servers`), in the file's order.
pub fn read(config: &Value, key: &str) -> Vec<Configured> {
    let Some(servers) = config.get(key).and_then(Value::as_object) else {
        return Vec::new();
    };
    servers
        .iter()
        .take(MAX_ENTRIES)
        .map(|(name, entry)| Configured {
            name: name.clone(),
            mapped: map(entry),
        })
        .collect()
}

fn not_run(why: impl Into<String>) -> Mapped {
    Mapped::NotRun { why: why.into() }
}

/// One entry's mapping.
fn map(entry: &Value) -> Mapped {
    if entry.get("url").is_some() || entry.get("serverUrl").is_some() {
        return not_run("a remote server (a URL): there is nothing to run in a microVM; its host's own controls apply");
    }
    let Some(command) = entry.get("command").and_then(Value::as_str) else {
        return not_run("no command: not a stdio server");
    };
    let args: Vec<String> = entry
        .get("args")
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(|x| x.as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default();
    let env: Vec<String> = entry
        .get("env")
        .and_then(Value::as_object)
        .map(|e| e.keys().cloned().collect())
        .unwrap_or_default();
    let program = command.rsplit('/').next().unwrap_or(command);
    match program {
        "npx" | "npx.cmd" | "bunx" | "pnpx" => package("npm", command, args, env),
        "uvx" | "uv" | "pipx" => package("pypi", command, args, env),
        "mcpvm" if args.first().map(String::as_str) == Some("run") => wrapped(&args, env),
        "docker" | "podman" | "nerdctl" => not_run(format!(
            "a container image ({program}): mcpvm runs published packages in microVMs, not container images"
        )),
        _ => not_run(format!(
            "a local command ({}): mcpvm runs published npm and PyPI packages, not programs or scripts on this machine",
            mcpvm_protocol::text::printable(command)
        )),
    }
}

/// `npx -y PKG@VER ARGS…` / `uvx PKG==VER ARGS…` (or `uvx --from
/// PKG==VER CMD`, `uv tool run …`): the package the launcher names,
/// pinned.
fn package(registry: &str, command: &str, args: Vec<String>, env: Vec<String>) -> Mapped {
    let mut rest = args.iter().map(String::as_str).peekable();
    let mut spec = None;
    while let Some(a) = rest.next() {
        match a {
            "tool" | "run" if registry == "pypi" && spec.is_none() => {}
            "--from" | "-p" | "--package" => {
                spec = rest.next();
                break;
            }
            a if a.starts_with('-') => {}
            a => {
                spec = Some(a);
                break;
            }
        }
    }
    let Some(spec) = spec else {
        return not_run("the launcher names no package");
    };
    let split = match registry {
        "npm" => spec
            .get(1..)
            .and_then(|r| r.rsplit_once('@'))
            .map(|(n, v)| (format!("{}{n}", &spec[..1]), v.to_string())),
        _ => spec
            .split_once("==")
            .or_else(|| spec.split_once('@'))
            .map(|(n, v)| (n.to_string(), v.to_string())),
    };
    let Some((package, version)) = split.filter(|(_, v)| !v.is_empty() && v != "latest") else {
        return not_run(format!(
            "{} is not pinned to a version: the client runs whatever is newest at each start; pin it ({}) to audit what runs",
            mcpvm_protocol::text::printable(spec),
            match registry {
                "npm" => "PKG@VERSION",
                _ => "PKG==VERSION",
            }
        ));
    };
    Mapped::Package {
        listing: Listing {
            registry: registry.to_string(),
            package,
            version,
            command: command.to_string(),
            args,
            required_env: env,
            registry_name: None,
            sources: vec!["client configuration".into()],
            toolsdk_validated: None,
            toolsdk_tools: None,
            credentials: Vec::new(),
        },
    }
}

/// `mcpvm run --package SPEC [-- ARGS]`: that package, as it runs.
fn wrapped(args: &[String], env: Vec<String>) -> Mapped {
    let mut it = args.iter().skip(1);
    let mut spec = None;
    while let Some(a) = it.next() {
        if a == "--package" {
            spec = it.next().cloned();
        } else if let Some(s) = a.strip_prefix("--package=") {
            spec = Some(s.to_string());
        } else if a == "--" {
            break;
        }
    }
    let Some(spec) = spec else {
        return not_run("already wrapped in `mcpvm run` without --package: audit its catalogued server with `mcpvm audit --servers NAME`");
    };
    let server_args: Vec<String> = args
        .iter()
        .skip_while(|a| *a != "--")
        .skip(1)
        .cloned()
        .collect();
    match spec.split_once(':') {
        Some(("npm", p)) => package(
            "npm",
            "npx",
            [p.to_string()].into_iter().chain(server_args).collect(),
            env,
        ),
        Some(("pypi", p)) => package(
            "pypi",
            "uvx",
            [p.to_string()].into_iter().chain(server_args).collect(),
            env,
        ),
        _ => not_run(format!(
            "wrapped in `mcpvm run --package {}`, a kind this audit does not map",
            mcpvm_protocol::text::printable(&spec)
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn mapped(entry: Value) -> Mapped {
        read(&json!({"mcpServers": {"s": entry}}), "mcpServers")
            .remove(0)
            .mapped
    }

    fn listing(m: Mapped) -> Listing {
        match m {
            Mapped::Package { listing } => listing,
            other => panic!("not a package: {other:?}"),
        }
    }

    #[test]
    fn launchers_of_published_packages_map_to_pinned_listings() {
        let fs = listing(mapped(
            json!({"command": "npx", "args": ["-y", "@modelcontextprotocol/server-filesystem@2026.1.14", "/home/u/project"], "env": {"DEBUG": "1"}}),
        ));
        assert_eq!(fs.registry, "npm");
        assert_eq!(fs.package, "@modelcontextprotocol/server-filesystem");
        assert_eq!(fs.version, "2026.1.14");
        assert_eq!(fs.required_env, ["DEBUG"], "names only, never values");
        // The catalogue entry keeps the server's own argument only.
        let (_, e) = mcpvm_images::registry::entry(&fs).unwrap();
        assert_eq!(e.args, ["/home/u/project"]);
        assert!(!serde_json::to_string(&e.env).unwrap().contains("\"1\""));
        let git = listing(mapped(
            json!({"command": "/usr/local/bin/uvx", "args": ["mcp-server-git==2026.1.14", "--repository", "."]}),
        ));
        assert_eq!(
            (
                git.registry.as_str(),
                git.package.as_str(),
                git.version.as_str()
            ),
            ("pypi", "mcp-server-git", "2026.1.14")
        );
        let from = listing(mapped(
            json!({"command": "uvx", "args": ["--from", "awslabs.aws-documentation-mcp-server@1.1.2", "awslabs.aws-documentation-mcp-server"]}),
        ));
        assert_eq!(from.version, "1.1.2");
        let wrapped = listing(mapped(
            json!({"command": "/opt/mcpvm/bin/mcpvm", "args": ["run", "--profile", "deny-net", "--package", "npm:@playwright/mcp@0.0.70", "--", "--headless"]}),
        ));
        assert_eq!(wrapped.package, "@playwright/mcp");
        assert_eq!(wrapped.version, "0.0.70");
    }

    #[test]
    fn what_cannot_be_run_is_a_row_that_says_why() {
        let why = |e: Value| match mapped(e) {
            Mapped::NotRun { why } => why,
            other => panic!("mapped: {other:?}"),
        };
        assert!(
            why(json!({"command": "node", "args": ["/home/u/my-server.js"]}))
                .contains("a local command")
        );
        assert!(
            why(json!({"command": "docker", "args": ["run", "-i", "mcp/github"]}))
                .contains("container image")
        );
        assert!(why(json!({"url": "https://mcp.example.com/sse"})).contains("remote server"));
        assert!(why(json!({"type": "http", "serverUrl": "https://x"})).contains("remote server"));
        assert!(why(
            json!({"command": "npx", "args": ["-y", "@modelcontextprotocol/server-memory"]})
        )
        .contains("not pinned"));
        assert!(
            why(json!({"command": "npx", "args": ["-y", "server-memory@latest"]}))
                .contains("not pinned")
        );
        assert!(
            why(json!({"command": "mcpvm", "args": ["run", "--server", "memory"]}))
                .contains("without --package")
        );
        assert!(why(json!({"args": []})).contains("no command"));
        // A hostile name is shown escaped, never run.
        assert!(!why(json!({"command": "evil\u{1b}[2J"})).contains('\u{1b}'));
    }

    #[test]
    fn vs_codes_key_and_a_file_without_servers() {
        let v =
            json!({"servers": {"a": {"command": "uvx", "args": ["mcp-server-time==2026.1.26"]}}});
        assert_eq!(read(&v, "servers").len(), 1);
        assert!(read(&v, "mcpServers").is_empty());
        assert!(read(&json!([1, 2]), "servers").is_empty());
    }
}

//! `mcpvm client add`: a sandboxed server written into an MCP client's
//! own configuration (Claude Code, Claude Desktop, Cursor, VS Code), so
//! that nobody copies JSON by hand. The entry runs `mcpvm run` from
//! where this mcpvm is installed (not a path nothing installs to), with
//! the run options given, which are checked as `mcpvm run` checks them.
//!
//! The client's file is the user's: it is edited, not rewritten. Every
//! other key keeps its place and its bytes; only the servers' object
//! gains (or, with `--force`, replaces) one entry; the file is replaced
//! whole (a temporary file renamed over it, its permissions kept), or not
//! at all.

use std::io::Write;
use std::path::{Path, PathBuf};

use clap::{Args, Subcommand, ValueEnum};
use serde::de::{Deserializer, MapAccess, Visitor};
use serde_json::value::RawValue;
use serde_json::{json, Value};

#[derive(Debug, Subcommand)]
pub enum ClientCommand {
    /// Add a sandboxed server to an MCP client's configuration.
    Add(AddArgs),
}

#[derive(Debug, Args)]
pub struct AddArgs {
    /// The client whose configuration gets the server.
    #[arg(value_enum)]
    pub client: Client,
    /// The server's name there.
    pub name: String,
    /// `project`: the client's file in this directory; `user`: the one in
    /// your home [default: project; Claude Desktop has only user].
    #[arg(long, value_enum)]
    pub scope: Option<Scope>,
    /// Edit this file instead of the client's own.
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// Replace an entry of the same name.
    #[arg(long)]
    pub force: bool,
    /// After `--`: what `mcpvm run` gets, e.g. `-- --server memory` or
    /// `-- --profile no-rng -- /bin/mcp-fixture`.
    #[arg(last = true, required = true, value_name = "RUN-ARGS")]
    pub run: Vec<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Client {
    ClaudeCode,
    ClaudeDesktop,
    Cursor,
    Vscode,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Scope {
    Project,
    User,
}

/// The largest client configuration read: a file the user hands us is
/// bounded like any other.
const MAX_CONFIG: u64 = 16 << 20;

#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    #[error("Claude Desktop has no project configuration: drop --scope project (its file is {0})")]
    NoProjectScope(String),
    #[error("Cannot tell where your home is ($HOME is not set): give the file with --config")]
    NoHome,
    #[error("These are not `mcpvm run` options: {0}")]
    RunArgs(String),
    #[error("Cannot read {path}")]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{path} is larger than {MAX_CONFIG} bytes: not a client configuration; give another with --config")]
    TooLarge { path: PathBuf },
    #[error("{path} is not a regular file (a device, a FIFO or a directory): not a client configuration; give another with --config")]
    NotFile { path: PathBuf },
    #[error("{dir} is a link to {target}, outside this project: the project's configuration would be written there; remove the link or give the file with --config")]
    OutOfProject { dir: PathBuf, target: PathBuf },
    #[error("{path} is not a JSON object ({why}): fix it or move it away, nothing was written")]
    NotObject { path: PathBuf, why: String },
    #[error("{path} already has a server named '{name}' (a different one): choose another name or give --force to replace it")]
    Exists { path: PathBuf, name: String },
    #[error("Cannot write {path}")]
    Write {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("Cannot find mcpvm's own binary to point the client at")]
    Exe(#[source] std::io::Error),
}

impl Client {
    /// The key of its servers' object.
    pub(crate) fn servers_key(self) -> &'static str {
        match self {
            Client::Vscode => "servers",
            _ => "mcpServers",
        }
    }

    /// Its file for `scope`, relative to the current directory (project)
    /// or `home` (user).
    pub(crate) fn file(self, scope: Scope, home: Option<&Path>) -> Result<PathBuf, ClientError> {
        let user = |rel: &str| home.map(|h| h.join(rel)).ok_or(ClientError::NoHome);
        match (self, scope) {
            (Client::ClaudeCode, Scope::Project) => Ok(".mcp.json".into()),
            (Client::ClaudeCode, Scope::User) => user(".claude.json"),
            (Client::ClaudeDesktop, Scope::User) => {
                user(".config/Claude/claude_desktop_config.json")
            }
            (Client::ClaudeDesktop, Scope::Project) => Err(ClientError::NoProjectScope(
                "~/.config/Claude/claude_desktop_config.json".into(),
            )),
            (Client::Cursor, Scope::Project) => Ok(".cursor/mcp.json".into()),
            (Client::Cursor, Scope::User) => user(".cursor/mcp.json"),
            (Client::Vscode, Scope::Project) => Ok(".vscode/mcp.json".into()),
            (Client::Vscode, Scope::User) => user(".config/Code/User/mcp.json"),
        }
    }

    /// The entry that starts `mcpvm run RUN-ARGS` on stdio.
    fn entry(self, mcpvm: &Path, run: &[String]) -> Value {
        let mut args = vec!["run".to_string()];
        args.extend(run.iter().cloned());
        let mut e = json!({"command": mcpvm.display().to_string(), "args": args});
        if matches!(self, Client::ClaudeCode | Client::Vscode) {
            e["type"] = json!("stdio");
        }
        e
    }
}

pub fn run(cmd: ClientCommand, json: bool) -> Result<u8, ClientError> {
    let ClientCommand::Add(a) = cmd;
    // The run options, checked now: a client that starts a broken
    // command shows the user nothing useful.
    let argv = ["mcpvm", "run"]
        .into_iter()
        .map(String::from)
        .chain(a.run.iter().cloned());
    if let Err(e) = <mcpvm::cli::RunCli as clap::Parser>::try_parse_from(argv) {
        let said = e.to_string();
        let first = said
            .lines()
            .next()
            .unwrap_or("")
            .trim_start_matches("error: ");
        return Err(ClientError::RunArgs(first.to_string()));
    }
    let scope = a.scope.unwrap_or(match a.client {
        Client::ClaudeDesktop => Scope::User,
        _ => Scope::Project,
    });
    let home = std::env::var_os("HOME").map(PathBuf::from);
    let path = match a.config {
        Some(p) => p,
        None => {
            let path = a.client.file(scope, home.as_deref())?;
            if path.is_relative() {
                // The project's own file: a `.vscode` or `.cursor` that
                // links elsewhere (a cloned repository can carry one)
                // would take the write there. A file named with
                // --config is where the user said.
                let here = std::env::current_dir().map_err(|source| ClientError::Read {
                    path: ".".into(),
                    source,
                })?;
                inside_project(&here, &path)?;
            }
            path
        }
    };
    let mcpvm = mcpvm::exe::vm()
        .and_then(|p| p.canonicalize())
        .map_err(ClientError::Exe)?;
    let entry = a.client.entry(&mcpvm, &a.run);
    let before = read_config(&path)?;
    let after = add_server(
        before.as_deref(),
        a.client.servers_key(),
        &a.name,
        &entry,
        a.force,
    )
    .map_err(|e| match e {
        Edit::NotObject(why) => ClientError::NotObject {
            path: path.clone(),
            why,
        },
        Edit::Exists => ClientError::Exists {
            path: path.clone(),
            name: a.name.clone(),
        },
    })?;
    if let Some(text) = after {
        write_whole(&path, &text)?;
    }
    if json {
        println!("{}", json!({"file": path, "name": a.name, "entry": entry}));
    } else {
        eprintln!(
            "mcpvm client: {} has '{}': {} {}",
            path.display(),
            mcpvm::logger::printable(&a.name),
            mcpvm.display(),
            entry["args"]
        );
    }
    Ok(0)
}

/// The configuration at `path`, if there is one: a regular file (what
/// it links to, for a configuration kept among dotfiles) of at most
/// `MAX_CONFIG` bytes, read with that bound (a FIFO is not waited on,
/// `/dev/zero` not read until memory runs out).
pub(crate) fn read_config(path: &Path) -> Result<Option<String>, ClientError> {
    use std::io::Read;
    use std::os::unix::fs::OpenOptionsExt;
    let read = |source| ClientError::Read {
        path: path.to_path_buf(),
        source,
    };
    let file = match std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_CLOEXEC)
        .open(path)
    {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(read(e)),
        Ok(f) => f,
    };
    if !file.metadata().map_err(read)?.file_type().is_file() {
        return Err(ClientError::NotFile {
            path: path.to_path_buf(),
        });
    }
    let mut text = String::new();
    file.take(MAX_CONFIG + 1)
        .read_to_string(&mut text)
        .map_err(read)?;
    if text.len() as u64 > MAX_CONFIG {
        return Err(ClientError::TooLarge {
            path: path.to_path_buf(),
        });
    }
    Ok(Some(text))
}

/// Each directory on the way to `rel` (a project's `.vscode/mcp.json`)
/// is in `project`, or a link that stays in it.
fn inside_project(project: &Path, rel: &Path) -> Result<(), ClientError> {
    let root = project
        .canonicalize()
        .unwrap_or_else(|_| project.to_path_buf());
    let mut dir = project.to_path_buf();
    let parents: Vec<_> = rel
        .parent()
        .into_iter()
        .flat_map(|p| p.components())
        .collect();
    for c in parents {
        dir.push(c);
        let Ok(m) = std::fs::symlink_metadata(&dir) else {
            // Not there yet: made as a directory of the project.
            return Ok(());
        };
        if m.file_type().is_symlink() {
            let target = dir
                .canonicalize()
                .unwrap_or_else(|_| std::fs::read_link(&dir).unwrap_or_default());
            if !target.starts_with(&root) {
                return Err(ClientError::OutOfProject {
                    dir: dir.strip_prefix(project).unwrap_or(&dir).to_path_buf(),
                    target,
                });
            }
        }
    }
    Ok(())
}

/// Replaces `path` with `text`: a temporary file beside it, with the old
/// file's permissions, renamed over it.
fn write_whole(path: &Path, text: &str) -> Result<(), ClientError> {
    let err = |source| ClientError::Write {
        path: path.to_path_buf(),
        source,
    };
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
        _ => PathBuf::from("."),
    };
    std::fs::create_dir_all(&dir).map_err(err)?;
    let mut tmp = tempfile::NamedTempFile::new_in(&dir).map_err(err)?;
    tmp.write_all(text.as_bytes()).map_err(err)?;
    if let Ok(m) = std::fs::metadata(path) {
        std::fs::set_permissions(tmp.path(), m.permissions()).map_err(err)?;
    }
    tmp.persist(path).map_err(|e| err(e.error))?;
    Ok(())
}

/// Why an edit could not be made.
#[derive(Debug, PartialEq)]
enum Edit {
    NotObject(String),
    Exists,
}

/// A JSON object's members in their order, each value as written.
struct Ordered(Vec<(String, Box<RawValue>)>);

impl<'de> serde::Deserialize<'de> for Ordered {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Ordered;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a JSON object")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut m: A) -> Result<Ordered, A::Error> {
                let mut members = Vec::new();
                while let Some(kv) = m.next_entry::<String, Box<RawValue>>()? {
                    members.push(kv);
                }
                Ok(Ordered(members))
            }
        }
        d.deserialize_map(V)
    }
}

impl Ordered {
    fn parse(text: &str) -> Result<Self, String> {
        serde_json::from_str(text).map_err(|e| e.to_string())
    }

    fn get(&self, key: &str) -> Option<&RawValue> {
        self.0.iter().find(|(k, _)| k == key).map(|(_, v)| &**v)
    }

    /// Sets `key` where it was (its first place; later duplicates go), or
    /// at the end.
    fn set(&mut self, key: &str, value: Box<RawValue>) {
        match self.0.iter().position(|(k, _)| k == key) {
            Some(i) => {
                self.0[i].1 = value;
                let mut seen = false;
                self.0
                    .retain(|(k, _)| k != key || !std::mem::replace(&mut seen, true));
            }
            None => self.0.push((key.to_string(), value)),
        }
    }

    fn text(&self, indent: usize) -> String {
        if self.0.is_empty() {
            return "{}".into();
        }
        let pad = " ".repeat(indent + 2);
        let members: Vec<String> = self
            .0
            .iter()
            .map(|(k, v)| format!("{pad}{}: {}", Value::String(k.clone()), v.get()))
            .collect();
        format!("{{\n{}\n{}}}", members.join(",\n"), " ".repeat(indent))
    }
}

/// `config` (None: no file yet) with `entry` as `servers_key.name`: the
/// new text, or None when it is there already, the same.
fn add_server(
    config: Option<&str>,
    servers_key: &str,
    name: &str,
    entry: &Value,
    force: bool,
) -> Result<Option<String>, Edit> {
    let mut top = match config {
        None => Ordered(Vec::new()),
        Some(t) if t.trim().is_empty() => Ordered(Vec::new()),
        Some(t) => Ordered::parse(t).map_err(Edit::NotObject)?,
    };
    let mut servers = match top.get(servers_key) {
        Some(raw) => Ordered::parse(raw.get()).map_err(|why| {
            Edit::NotObject(format!("its \"{servers_key}\" is not an object: {why}"))
        })?,
        None => Ordered(Vec::new()),
    };
    if let Some(old) = servers.get(name) {
        let same = serde_json::from_str::<Value>(old.get()).ok().as_ref() == Some(entry);
        if same {
            return Ok(None);
        }
        if !force {
            return Err(Edit::Exists);
        }
    }
    let pretty = |v: &Value, indent: usize| {
        let text = serde_json::to_string_pretty(v).expect("a Value serialises");
        let text = text.replace('\n', &format!("\n{}", " ".repeat(indent)));
        RawValue::from_string(text).expect("serde_json wrote JSON")
    };
    servers.set(name, pretty(entry, 4));
    let servers_text = servers.text(2);
    top.set(
        servers_key,
        RawValue::from_string(servers_text).expect("members are JSON"),
    );
    Ok(Some(top.text(0) + "\n"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry() -> Value {
        Client::Cursor.entry(
            Path::new("/opt/mcpvm/bin/mcpvm"),
            &["--server".into(), "memory".into()],
        )
    }

    #[test]
    fn a_new_file_gets_the_servers_object_with_the_entry() {
        let text = add_server(None, "mcpServers", "memory", &entry(), false)
            .unwrap()
            .unwrap();
        let v: Value = serde_json::from_str(&text).unwrap();
        assert_eq!(v["mcpServers"]["memory"], entry());
        assert_eq!(
            v["mcpServers"]["memory"]["args"],
            json!(["run", "--server", "memory"])
        );
    }

    #[test]
    fn every_other_key_keeps_its_place_and_its_bytes() {
        let before = r#"{
  "zeta": {"keep":   [1,2,3]},
  "mcpServers": {
    "other": {"command": "npx", "args": ["-y", "x"]}
  },
  "alpha": "last",
  "numbers": 1.50
}"#;
        let text = add_server(Some(before), "mcpServers", "memory", &entry(), false)
            .unwrap()
            .unwrap();
        let keys: Vec<usize> = ["\"zeta\"", "\"mcpServers\"", "\"alpha\"", "\"numbers\""]
            .iter()
            .map(|k| text.find(k).unwrap())
            .collect();
        assert!(keys.windows(2).all(|w| w[0] < w[1]), "{text}");
        assert!(text.contains(r#"{"keep":   [1,2,3]}"#), "{text}");
        assert!(text.contains("1.50"), "{text}");
        let v: Value = serde_json::from_str(&text).unwrap();
        assert_eq!(v["mcpServers"]["other"]["command"], "npx");
        assert_eq!(v["mcpServers"]["memory"], entry());
        assert!(text.find("\"other\"").unwrap() < text.find("\"memory\"").unwrap());
    }

    #[test]
    fn a_different_entry_of_the_same_name_needs_force_and_the_same_one_is_no_change() {
        let first = add_server(None, "servers", "memory", &entry(), false)
            .unwrap()
            .unwrap();
        assert_eq!(
            add_server(Some(&first), "servers", "memory", &entry(), false),
            Ok(None)
        );
        let other = json!({"command": "/bin/true", "args": []});
        assert_eq!(
            add_server(Some(&first), "servers", "memory", &other, false),
            Err(Edit::Exists)
        );
        let forced = add_server(Some(&first), "servers", "memory", &other, true)
            .unwrap()
            .unwrap();
        let v: Value = serde_json::from_str(&forced).unwrap();
        assert_eq!(v["servers"]["memory"], other);
        assert_eq!(v["servers"].as_object().unwrap().len(), 1);
    }

    #[test]
    fn what_is_not_a_config_object_is_refused() {
        for bad in ["[1,2]", "{\"mcpServers\": [1]}", "{not json", "\"text\""] {
            assert!(
                matches!(
                    add_server(Some(bad), "mcpServers", "m", &entry(), false),
                    Err(Edit::NotObject(_))
                ),
                "{bad}"
            );
        }
        // An empty file is an empty configuration.
        assert!(add_server(Some("  \n"), "mcpServers", "m", &entry(), false).is_ok());
    }

    /// A file the user hands us is read with its bound: a device or a
    /// FIFO is refused at once (the size check read `metadata().len()`,
    /// 0 for both, and then read until out of memory, or hung).
    #[test]
    fn a_configuration_that_is_no_regular_file_is_refused_at_once() {
        for dev in ["/dev/zero", "/dev/urandom"] {
            let e = read_config(Path::new(dev)).unwrap_err();
            assert!(matches!(e, ClientError::NotFile { .. }), "{e}");
        }
        let d = tempfile::tempdir().unwrap();
        let fifo = d.path().join("mcp.json");
        let c = std::ffi::CString::new(fifo.as_os_str().as_encoded_bytes()).unwrap();
        // SAFETY: a valid path string.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        let e = read_config(&fifo).unwrap_err();
        assert!(e.to_string().contains("not a regular file"), "{e}");
        let big = d.path().join("big.json");
        std::fs::write(&big, vec![b' '; MAX_CONFIG as usize + 1]).unwrap();
        assert!(matches!(
            read_config(&big),
            Err(ClientError::TooLarge { .. })
        ));
        let link = d.path().join("linked.json");
        std::fs::write(d.path().join("dotfile.json"), "{}").unwrap();
        std::os::unix::fs::symlink(d.path().join("dotfile.json"), &link).unwrap();
        assert_eq!(read_config(&link).unwrap().as_deref(), Some("{}"));
        assert_eq!(read_config(&d.path().join("none.json")).unwrap(), None);
    }

    /// A cloned project whose `.vscode` links to the user's own settings
    /// (or anywhere else): refused, since the write would land there.
    #[test]
    fn a_project_directory_that_links_out_of_the_project_is_refused() {
        let d = tempfile::tempdir().unwrap();
        let project = d.path().join("project");
        let elsewhere = d.path().join("home-config");
        std::fs::create_dir_all(&project).unwrap();
        std::fs::create_dir_all(&elsewhere).unwrap();
        std::os::unix::fs::symlink(&elsewhere, project.join(".vscode")).unwrap();
        let e = inside_project(&project, Path::new(".vscode/mcp.json")).unwrap_err();
        assert!(matches!(e, ClientError::OutOfProject { .. }), "{e}");
        assert!(e.to_string().contains("outside this project"), "{e}");
        // A link that stays inside, a real directory, none yet: fine.
        std::fs::create_dir_all(project.join("shared")).unwrap();
        std::os::unix::fs::symlink(project.join("shared"), project.join(".cursor")).unwrap();
        inside_project(&project, Path::new(".cursor/mcp.json")).unwrap();
        inside_project(&project, Path::new(".mcp.json")).unwrap();
        inside_project(&project, Path::new(".new/mcp.json")).unwrap();
        std::fs::remove_file(project.join(".vscode")).unwrap();
        std::fs::create_dir(project.join(".vscode")).unwrap();
        inside_project(&project, Path::new(".vscode/mcp.json")).unwrap();
    }

    #[test]
    fn each_client_has_its_file_and_its_shape() {
        let home = Path::new("/home/u");
        let f = |c: Client, s| c.file(s, Some(home)).unwrap();
        assert_eq!(
            f(Client::ClaudeCode, Scope::Project),
            Path::new(".mcp.json")
        );
        assert_eq!(
            f(Client::ClaudeCode, Scope::User),
            home.join(".claude.json")
        );
        assert_eq!(
            f(Client::ClaudeDesktop, Scope::User),
            home.join(".config/Claude/claude_desktop_config.json")
        );
        assert_eq!(
            f(Client::Cursor, Scope::Project),
            Path::new(".cursor/mcp.json")
        );
        assert_eq!(
            f(Client::Vscode, Scope::Project),
            Path::new(".vscode/mcp.json")
        );
        assert!(Client::ClaudeDesktop
            .file(Scope::Project, Some(home))
            .is_err());
        assert!(Client::Cursor.file(Scope::User, None).is_err());
        assert_eq!(Client::Vscode.servers_key(), "servers");
        let run = ["--server".to_string(), "time".to_string()];
        assert_eq!(Client::Vscode.entry(Path::new("/m"), &run)["type"], "stdio");
        assert!(Client::Cursor
            .entry(Path::new("/m"), &run)
            .get("type")
            .is_none());
    }
}

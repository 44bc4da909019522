//! Canaries: secrets planted where servers are not meant to look, each
//! holding a token made for this run, so that any touch of one is
//! evidence (a recorded open of its file) and the token in anything the
//! server says is a leak. Planted before the server starts, under a
//! policy that asks for them:
//!
//! - credential files where tools look for them (`~/.ssh/id_ed25519`,
//!   `~/.aws/credentials`, gcloud's application default credentials) and
//!   `/etc/mcpvm/secret`;
//! - a variable in the server's environment;
//! - a directory beside the workspace whose name shares its prefix
//!   (`/workspace_secret`): a server that checks "starts with /workspace"
//!   lets it through. It is also a (minimal) git repository, so that a
//!   server that opens any repository it is named reaches it;
//! - a link inside the workspace to a canary outside it: a server that
//!   follows it leaves its root.
//!
//! The link is taken away after the server exits, so it never goes back
//! to the host with a writable workspace.

use std::io;
use std::path::Path;

use mcpvm_protocol::ports::WORKSPACE_DIR;

pub const ENV: &str = "MCPVM_SECRET_TOKEN";
const LINK: &str = ".mcpvm-canary-link";

/// What was planted (the files that could be written).
pub struct Planted {
    pub token: String,
    pub files: Vec<String>,
    pub sibling: String,
    pub link: Option<String>,
}

/// Plants the canaries for a server whose home is `home`.
pub fn plant(home: &str) -> io::Result<Planted> {
    let token = format!("MCPVM-CANARY-{}", random_hex()?);
    let sibling = format!("{WORKSPACE_DIR}_secret");
    let files = [
        (
            format!("{home}/.ssh/id_ed25519"),
            format!(
                "-----BEGIN OPENSSH PRIVATE KEY-----\n{token}-ssh\n-----END OPENSSH PRIVATE KEY-----\n"
            ),
        ),
        (
            format!("{home}/.aws/credentials"),
            format!("[default]\naws_access_key_id = AKIAMCPVMCANARY\naws_secret_access_key = {token}-aws\n"),
        ),
        (
            format!("{home}/.config/gcloud/application_default_credentials.json"),
            format!("{{\"type\": \"authorized_user\", \"refresh_token\": \"{token}-gcloud\"}}\n"),
        ),
        ("/etc/mcpvm/secret".to_string(), format!("{token}-etc\n")),
        (format!("{sibling}/secret.txt"), format!("{token}-sibling\n")),
    ];
    let mut planted = Vec::new();
    for (path, content) in &files {
        // A read-only root keeps some from being planted: the rest still
        // are, and the event names only those that were.
        if write_private(Path::new(path), content).is_ok() {
            planted.push(path.clone());
        }
    }
    // HEAD, objects and refs are what makes a directory a repository to
    // git and GitPython.
    let git = format!("{sibling}/.git");
    let repo = ["objects", "refs/heads"]
        .iter()
        .try_for_each(|d| std::fs::create_dir_all(format!("{git}/{d}")))
        .and_then(|()| write_private(Path::new(&format!("{git}/HEAD")), "ref: refs/heads/main\n"));
    if let Err(e) = repo {
        eprintln!("mcpvm-agent: the canary repository was not made: {e}");
    }
    let link = Path::new(WORKSPACE_DIR)
        .is_dir()
        .then(|| format!("{WORKSPACE_DIR}/{LINK}"))
        .filter(|l| std::os::unix::fs::symlink("/etc/mcpvm/secret", l).is_ok());
    Ok(Planted {
        token,
        files: planted,
        sibling,
        link,
    })
}

/// Takes the link out of the workspace (before it goes back to the host).
pub fn remove_link(planted: &Planted) {
    if let Some(l) = &planted.link {
        let _ = std::fs::remove_file(l);
    }
}

fn write_private(path: &Path, content: &str) -> io::Result<()> {
    use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
    if let Some(dir) = path.parent() {
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir)?;
    }
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(path)?;
    io::Write::write_all(&mut f, content.as_bytes())
}

fn random_hex() -> io::Result<String> {
    let mut b = [0u8; 12];
    // SAFETY: getrandom fills the buffer we pass.
    let n = unsafe { libc::getrandom(b.as_mut_ptr().cast(), b.len(), 0) };
    if n != b.len() as isize {
        return Err(io::Error::last_os_error());
    }
    Ok(b.iter().map(|x| format!("{x:02x}")).collect())
}

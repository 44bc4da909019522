//! Canaries: secrets planted where servers are not meant to look, so that
//! any touch of one is evidence (a recorded open of its file) and its
//! token in anything the server says is a leak. Planted before the server
//! starts, under a policy that asks for them:
//!
//! - credential files where tools look for them (`~/.ssh/id_ed25519`,
//!   `~/.aws/credentials`, gcloud's application default credentials) and
//!   `/etc/secrets/service.key`;
//! - a variable in the server's environment (`SERVICE_API_TOKEN`);
//! - a directory beside the workspace whose name shares its prefix
//!   (`/workspace_secret`): a server that checks "starts with /workspace"
//!   lets it through. It is also a (minimal) git repository, so that a
//!   server that opens any repository it is named reaches it;
//! - a link inside the workspace to a canary outside it: a server that
//!   follows it leaves its root.
//!
//! Every canary holds its own random token, shaped like the secret it
//! stands for and sharing nothing with the others or with any name: a
//! server cannot tell a canary from a real secret by its content, and
//! cannot make up a file's token without reading that file (the variable
//! gives away only its own). The tokens go to the host in the `canaries`
//! event, which the server never sees.
//!
//! The link is taken away after the server exits, so it never goes back
//! to the host with a writable workspace.

use std::collections::BTreeMap;
use std::io;
use std::path::Path;

use mcpvm_protocol::ports::WORKSPACE_DIR;

pub const ENV: &str = "SERVICE_API_TOKEN";
const LINK: &str = ".credentials";
/// A canary outside every root, where the link leads.
const SYSTEM_SECRET: &str = "/etc/secrets/service.key";

/// What was planted (the files that could be written).
pub struct Planted {
    /// Each planted file with its own token.
    pub tokens: BTreeMap<String, String>,
    /// The variable's token.
    pub env_token: String,
    pub sibling: String,
    pub link: Option<String>,
}

const BASE64: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
const UPPER_DIGITS: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZ234567";
const HEX: &[u8] = b"0123456789abcdef";

/// Plants the canaries for a server whose home is `home`.
pub fn plant(home: &str) -> io::Result<Planted> {
    let sibling = format!("{WORKSPACE_DIR}_secret");
    let (ssh, aws, gcloud, system, beside) = (
        random(BASE64, 68)?,
        random(BASE64, 40)?,
        format!("1//0{}", random(BASE64, 96)?.replace(['+', '/'], "-")),
        random(HEX, 64)?,
        random(HEX, 40)?,
    );
    let files = [
        (
            format!("{home}/.ssh/id_ed25519"),
            format!(
                "-----BEGIN OPENSSH PRIVATE KEY-----\n{ssh}\n-----END OPENSSH PRIVATE KEY-----\n"
            ),
            ssh,
        ),
        (
            format!("{home}/.aws/credentials"),
            format!(
                "[default]\naws_access_key_id = AKIA{}\naws_secret_access_key = {aws}\n",
                random(UPPER_DIGITS, 16)?
            ),
            aws,
        ),
        (
            format!("{home}/.config/gcloud/application_default_credentials.json"),
            format!("{{\"type\": \"authorized_user\", \"refresh_token\": \"{gcloud}\"}}\n"),
            gcloud,
        ),
        (SYSTEM_SECRET.to_string(), format!("{system}\n"), system),
        (
            format!("{sibling}/secret.txt"),
            format!("{beside}\n"),
            beside,
        ),
    ];
    let mut tokens = BTreeMap::new();
    for (path, content, token) in files {
        // The system secret is left readable by every user, as a careless
        // machine leaves one: a server that reaches it can leak it. The
        // rest are the server user's own (`user::hand_over`).
        let shared = path == SYSTEM_SECRET;
        // A read-only root keeps some from being planted: the rest still
        // are, and the event names only those that were.
        if write_secret(Path::new(&path), &content, shared).is_ok() {
            tokens.insert(path, token);
        }
    }
    // HEAD, objects and refs are what makes a directory a repository to
    // git and GitPython.
    let git = format!("{sibling}/.git");
    let repo = ["objects", "refs/heads"]
        .iter()
        .try_for_each(|d| std::fs::create_dir_all(format!("{git}/{d}")))
        .and_then(|()| {
            write_secret(
                Path::new(&format!("{git}/HEAD")),
                "ref: refs/heads/main\n",
                false,
            )
        });
    if let Err(e) = repo {
        eprintln!("mcpvm-agent: the canary repository was not made: {e}");
    }
    let link = Path::new(WORKSPACE_DIR)
        .is_dir()
        .then(|| format!("{WORKSPACE_DIR}/{LINK}"))
        .filter(|l| std::os::unix::fs::symlink(SYSTEM_SECRET, l).is_ok());
    Ok(Planted {
        tokens,
        env_token: random(BASE64, 40)?.replace(['+', '/'], "_"),
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

/// Writes a secret private to its owner, or (`shared`) readable by all.
fn write_secret(path: &Path, content: &str, shared: bool) -> io::Result<()> {
    use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
    let (dir_mode, file_mode) = if shared {
        (0o755, 0o644)
    } else {
        (0o700, 0o600)
    };
    if let Some(dir) = path.parent() {
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(dir_mode)
            .create(dir)?;
    }
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(file_mode)
        .open(path)?;
    io::Write::write_all(&mut f, content.as_bytes())
}

/// `len` characters drawn from `alphabet` (whose length divides 256, so
/// that every character is as likely), from the kernel's entropy.
fn random(alphabet: &[u8], len: usize) -> io::Result<String> {
    debug_assert!(256 % alphabet.len() == 0);
    let mut b = vec![0u8; len];
    // SAFETY: getrandom fills the buffer we pass.
    let n = unsafe { libc::getrandom(b.as_mut_ptr().cast(), b.len(), 0) };
    if n != b.len() as isize {
        return Err(io::Error::last_os_error());
    }
    Ok(b.iter()
        .map(|x| alphabet[*x as usize % alphabet.len()] as char)
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_are_drawn_from_their_alphabet_and_differ() {
        let a = random(BASE64, 40).unwrap();
        let b = random(BASE64, 40).unwrap();
        assert_eq!(a.len(), 40);
        assert!(a.bytes().all(|c| BASE64.contains(&c)));
        assert_ne!(a, b);
        assert!(random(HEX, 64).unwrap().bytes().all(|c| HEX.contains(&c)));
    }
}

//! EROFS images of a staged tree, made reproducibly: the same tree gives
//! the same bytes.

use std::path::Path;

use sha2::{Digest, Sha256};

use crate::key::hex;
use crate::process::{run, BuildError};

/// `stage` as an EROFS image: the same tree gives the same bytes (fixed
/// times, owners, and a UUID from the image's name, not a random one).
pub fn erofs(stage: &Path, out: &Path) -> Result<(), BuildError> {
    let h = hex(&Sha256::digest(
        out.file_name().unwrap_or_default().as_encoded_bytes(),
    ));
    let uuid = format!(
        "{}-{}-{}-{}-{}",
        &h[0..8],
        &h[8..12],
        &h[12..16],
        &h[16..20],
        &h[20..32]
    );
    run(
        "mkfs.erofs",
        crate::host_env::command("mkfs.erofs")
            .args(["-zlz4hc", "-T0", "--all-root"])
            .arg(format!("-U{uuid}"))
            .arg(out)
            .arg(stage),
    )
    .map(drop)
}

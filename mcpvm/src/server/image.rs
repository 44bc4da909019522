//! Root images for the guest (built by guest-image/rootfs/build): checked
//! on the host before a VM boots, so a wrong or damaged file is one clear
//! error instead of a guest that cannot mount its root. (The microVM
//! that runs a layer's install scripts for the image builder is
//! mcpvm-tools' `install::scripts`.)

use std::io::Read;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

/// EROFS superblock magic, little-endian at byte 1024.
const EROFS_MAGIC: u32 = 0xE0F5_E1E2;
const EROFS_SB_OFFSET: u64 = 1024;

#[derive(Debug, thiserror::Error)]
pub enum ImageError {
    #[error("Cannot open image {path}")]
    Open {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{path} is not an EROFS root image ({why}); build one with guest-image/rootfs/build")]
    NotErofs { path: PathBuf, why: &'static str },
}

/// Checks that `path` starts like an EROFS image.
pub fn check_root_image(path: &Path) -> Result<(), ImageError> {
    let file = std::fs::File::open(path).map_err(|source| ImageError::Open {
        path: path.to_path_buf(),
        source,
    })?;
    let mut magic = [0u8; 4];
    let not = |why| ImageError::NotErofs {
        path: path.to_path_buf(),
        why,
    };
    match file.read_exact_at(&mut magic, EROFS_SB_OFFSET) {
        Ok(()) if u32::from_le_bytes(magic) == EROFS_MAGIC => Ok(()),
        Ok(()) => Err(not("no EROFS superblock")),
        Err(_) => {
            // Distinguish "too short" from other read errors for the message.
            let mut probe = [0u8; 1];
            let empty = (&file).read(&mut probe).map(|n| n == 0).unwrap_or(false);
            Err(not(if empty {
                "the file is empty"
            } else {
                "the file is too short"
            }))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_erofs_images_pass() {
        let dir = tempfile::tempdir().unwrap();
        let good = dir.path().join("good.erofs");
        let mut bytes = vec![0u8; 4096];
        bytes[1024..1028].copy_from_slice(&EROFS_MAGIC.to_le_bytes());
        std::fs::write(&good, &bytes).unwrap();
        check_root_image(&good).unwrap();

        let bad = dir.path().join("bad.img");
        std::fs::write(&bad, vec![0u8; 4096]).unwrap();
        let e = check_root_image(&bad).unwrap_err().to_string();
        assert!(
            e.contains("is not an EROFS root image (no EROFS superblock)"),
            "{e}"
        );
        std::fs::write(&bad, [1u8; 100]).unwrap();
        let e = check_root_image(&bad).unwrap_err().to_string();
        assert!(e.contains("too short"), "{e}");
        std::fs::write(&bad, []).unwrap();
        assert!(check_root_image(&bad)
            .unwrap_err()
            .to_string()
            .contains("empty"));
        let e = check_root_image(&dir.path().join("none"))
            .unwrap_err()
            .to_string();
        assert!(e.starts_with("Cannot open image"), "{e}");
    }
}

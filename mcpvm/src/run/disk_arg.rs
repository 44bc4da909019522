//! `--disk PATH[,rw][,cache=page|direct][,id=NAME]`: a disk image for the
//! guest, read-only unless `rw` is given (shared by `boot` and `run`).

use std::path::PathBuf;

use vmm::{CacheMode, DiskConfig};

/// A parsed `--disk`, with the text it came from (to pass it on: a
/// request carries the text, parsed again where it is read).
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct DiskArg {
    pub config: DiskConfig,
    pub text: String,
}

impl TryFrom<String> for DiskArg {
    type Error = String;
    fn try_from(s: String) -> Result<Self, String> {
        parse_disk(&s)
    }
}

impl From<DiskArg> for String {
    fn from(d: DiskArg) -> String {
        d.text
    }
}

pub fn parse_disk(s: &str) -> Result<DiskArg, String> {
    let mut parts = s.split(',');
    let path = parts.next().unwrap_or_default();
    if path.is_empty() {
        return Err(format!(
            "'{s}' names no image; use PATH[,rw][,cache=page|direct][,id=NAME]"
        ));
    }
    let mut config = DiskConfig {
        path: PathBuf::from(path),
        read_only: true,
        cache: CacheMode::Page,
        id: String::new(),
    };
    for opt in parts {
        match opt.split_once('=') {
            None if opt == "rw" => config.read_only = false,
            None if opt == "ro" => config.read_only = true,
            Some(("cache", "page")) => config.cache = CacheMode::Page,
            Some(("cache", "direct")) => config.cache = CacheMode::Direct,
            Some(("id", id)) if id.len() <= 20 && id.is_ascii() => config.id = id.to_string(),
            Some(("id", id)) => {
                return Err(format!("disk id '{id}' must be ASCII, at most 20 bytes"))
            }
            _ => {
                return Err(format!(
                    "unknown disk option '{opt}'; use rw, ro, cache=page, cache=direct or id=NAME"
                ))
            }
        }
    }
    Ok(DiskArg {
        config,
        text: s.to_string(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn read_only_page_cache_by_default_and_every_option() {
        let d = parse_disk("/img/root.erofs").unwrap().config;
        assert!(d.read_only && d.cache == CacheMode::Page && d.id.is_empty());
        let d = parse_disk("w.img,rw,cache=direct,id=workspace")
            .unwrap()
            .config;
        assert!(!d.read_only && d.cache == CacheMode::Direct);
        assert_eq!(d.id, "workspace");
        assert_eq!(d.path, PathBuf::from("w.img"));
    }

    #[test]
    fn bad_options_say_what_is_allowed() {
        assert!(parse_disk("").unwrap_err().contains("names no image"));
        assert!(parse_disk("a.img,wr").unwrap_err().contains("use rw, ro"));
        assert!(parse_disk("a.img,cache=none")
            .unwrap_err()
            .contains("unknown disk option 'cache=none'"));
        assert!(parse_disk(&format!("a.img,id={}", "x".repeat(21)))
            .unwrap_err()
            .contains("at most 20"));
    }
}

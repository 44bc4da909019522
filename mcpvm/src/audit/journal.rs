//! `results.jsonl`, append-only: each finished cell is one line, written
//! and synced before the next is reported, so an interrupted audit keeps
//! everything it measured and resumes with the cells it has not.

use std::collections::BTreeMap;
use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::path::{Path, PathBuf};

use super::record::Record;

pub struct Journal {
    path: PathBuf,
    file: File,
    /// The records so far, by (server, profile).
    pub records: BTreeMap<(String, String), Record>,
}

impl Journal {
    /// Opens (or creates) `path` and reads what is there. A last line cut
    /// short by a kill is dropped (it was never a finished cell); lines
    /// that are not records are an error, since this is not our file.
    pub fn open(path: &Path) -> io::Result<Self> {
        let text = match std::fs::read_to_string(path) {
            Ok(t) => t,
            Err(e) if e.kind() == io::ErrorKind::NotFound => String::new(),
            Err(e) => return Err(e),
        };
        let complete = match text.rfind('\n') {
            Some(i) => &text[..=i],
            None => "",
        };
        let mut records = BTreeMap::new();
        for (n, line) in complete.lines().enumerate() {
            if line.trim().is_empty() {
                continue;
            }
            let r: Record = serde_json::from_str(line).map_err(|e| {
                io::Error::new(
                    io::ErrorKind::InvalidData,
                    format!(
                        "{} line {}: not an audit record ({e})",
                        path.display(),
                        n + 1
                    ),
                )
            })?;
            records.insert((r.server.clone(), r.profile.clone()), r);
        }
        let file = OpenOptions::new().create(true).append(true).open(path)?;
        if complete.len() != text.len() {
            file.set_len(complete.len() as u64)?;
        }
        Ok(Journal {
            path: path.to_path_buf(),
            file,
            records,
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    pub fn has(&self, server: &str, profile: &str) -> bool {
        self.records
            .contains_key(&(server.to_string(), profile.to_string()))
    }

    /// Appends one record and syncs it to disk.
    pub fn append(&mut self, r: Record) -> io::Result<()> {
        let mut line = serde_json::to_string(&r).map_err(io::Error::other)?;
        line.push('\n');
        self.file.write_all(line.as_bytes())?;
        self.file.sync_data()?;
        self.records
            .insert((r.server.clone(), r.profile.clone()), r);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::audit::record::Outcome;

    fn rec(s: &str, p: &str) -> Record {
        Record::failed(s, p, Outcome::Error, "x".into(), 1.0)
    }

    #[test]
    fn records_survive_a_reopen_and_a_torn_last_line_is_dropped() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("results.jsonl");
        let mut j = Journal::open(&path).unwrap();
        j.append(rec("a", "baseline")).unwrap();
        j.append(rec("b", "baseline")).unwrap();
        drop(j);
        // A kill in the middle of a write.
        let mut f = OpenOptions::new().append(true).open(&path).unwrap();
        f.write_all(b"{\"schema\":1,\"server\":\"c\"").unwrap();
        drop(f);
        let mut j = Journal::open(&path).unwrap();
        assert!(j.has("a", "baseline") && j.has("b", "baseline"));
        assert!(!j.has("c", "baseline"));
        j.append(rec("c", "baseline")).unwrap();
        drop(j);
        let j = Journal::open(&path).unwrap();
        assert_eq!(j.records.len(), 3);
        let text = std::fs::read_to_string(&path).unwrap();
        assert_eq!(text.lines().count(), 3, "{text}");
    }

    #[test]
    fn a_foreign_file_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("results.jsonl");
        std::fs::write(&path, "hello\n").unwrap();
        let e = Journal::open(&path).err().unwrap();
        assert!(e.to_string().contains("line 1: not an audit record"), "{e}");
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "hello\n");
    }
}

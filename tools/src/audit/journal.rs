//! `results.jsonl`, append-only: each finished cell is one line, written
//! and synced before the next is reported, so an interrupted audit keeps
//! everything it measured and resumes with the cells it has not.

use std::collections::BTreeMap;
use std::fs::{File, OpenOptions};
use std::io::{self, BufRead, BufReader, Read, Write};
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
            let r = parse(path, n + 1, line.as_bytes())?;
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

    /// The records of another audit's journal (a shard's, in a merge):
    /// read only, as a regular file (`files::open_regular`: never through
    /// a link, never a FIFO or a device), one bounded line at a time,
    /// each record shown to `accept` before it is kept. A last line cut
    /// short is dropped, as [`Journal::open`] drops it.
    pub fn read(
        path: &Path,
        accept: impl Fn(&Record) -> Result<(), String>,
    ) -> io::Result<BTreeMap<(String, String), Record>> {
        let at = |e: io::Error| io::Error::new(e.kind(), format!("{}: {e}", path.display()));
        let mut r = BufReader::new(mcpvm::host::files::open_regular(path).map_err(at)?);
        let mut records = BTreeMap::new();
        let mut line = Vec::new();
        for n in 1.. {
            line.clear();
            let got = (&mut r).take(MAX_LINE + 1).read_until(b'\n', &mut line)?;
            if got == 0 {
                break;
            }
            if !line.ends_with(b"\n") {
                if got as u64 > MAX_LINE {
                    return Err(invalid(format!(
                        "{} line {n}: longer than {} MiB, which no audit record is",
                        path.display(),
                        MAX_LINE >> 20
                    )));
                }
                break;
            }
            if line.trim_ascii().is_empty() {
                continue;
            }
            let rec = parse(path, n, &line)?;
            accept(&rec).map_err(|why| invalid(format!("{} line {n}: {why}", path.display())))?;
            records.insert((rec.server.clone(), rec.profile.clone()), rec);
        }
        Ok(records)
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

/// Longest line of a journal a merge reads: a record is bounded far
/// below this (its excerpts and evidence are cut where they are made).
const MAX_LINE: u64 = 16 << 20;

fn invalid(what: String) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, what)
}

/// Line `n` of `path` as a record. What the parser says of it is cut
/// short: it quotes the line's own text, which another machine chose.
fn parse(path: &Path, n: usize, line: &[u8]) -> io::Result<Record> {
    serde_json::from_slice(line).map_err(|e| {
        let said: String = e.to_string().chars().take(160).collect();
        invalid(format!(
            "{} line {n}: not an audit record ({})",
            path.display(),
            mcpvm::logger::printable(&said)
        ))
    })
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
    fn a_shards_journal_is_read_without_being_opened_for_writing() {
        let dir = tempfile::tempdir().unwrap();
        let victim = dir.path().join("victim");
        std::fs::write(&victim, "precious\n").unwrap();
        // A journal that is a link to another file: the old merge opened
        // it to append and cut it to its last whole line (here: nothing).
        let link = dir.path().join("results.jsonl");
        std::os::unix::fs::symlink(&victim, &link).unwrap();
        let e = Journal::read(&link, |_| Ok(())).unwrap_err();
        assert!(e.to_string().contains("symbolic link"), "{e}");
        assert_eq!(std::fs::read_to_string(&victim).unwrap(), "precious\n");
        // A dangling one creates nothing.
        let dangling = dir.path().join("shard2.jsonl");
        std::os::unix::fs::symlink(dir.path().join("made"), &dangling).unwrap();
        assert!(Journal::read(&dangling, |_| Ok(())).is_err());
        assert!(!dir.path().join("made").exists());
        // A regular one with a torn last line: read, and left as it was.
        let path = dir.path().join("real.jsonl");
        let mut text = serde_json::to_string(&rec("a", "baseline")).unwrap();
        text.push_str("\n{\"schema\":1,\"ser");
        std::fs::write(&path, &text).unwrap();
        let records = Journal::read(&path, |_| Ok(())).unwrap();
        assert_eq!(records.len(), 1);
        assert_eq!(std::fs::read_to_string(&path).unwrap(), text);
        // A record the caller does not accept is an error naming its line.
        let e = Journal::read(&path, |r| Err(format!("{} is not audited", r.server))).unwrap_err();
        assert!(e.to_string().contains("line 1: a is not audited"), "{e}");
    }

    #[test]
    fn what_the_parser_quotes_of_a_bad_line_is_cut_and_escaped() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("results.jsonl");
        let mut r = serde_json::to_value(rec("a", "baseline")).unwrap();
        r["outcome"] = format!("\u{1b}]0;owned\u{7}{}", "x".repeat(5000)).into();
        std::fs::write(&path, format!("{r}\n")).unwrap();
        let e = Journal::read(&path, |_| Ok(())).unwrap_err().to_string();
        assert!(!e.contains('\u{1b}') && e.len() < 600, "{e}");
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

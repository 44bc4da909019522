//! The seeded workspace every audit cell gets at `/workspace` (read-only
//! to the host: the guest's changes are dropped): a real file of each
//! type servers commonly want (text, JSON, CSV, Markdown, HTML, PDF, an
//! Excel workbook, a PNG image, an SQLite database, a zip archive,
//! JavaScript and Python sources, a draw.io diagram), so that generated
//! path arguments, and the retries a refusal asks for
//! (`probes::calls::feedback`), point at something a tool can open; a local page
//! for URL arguments, and a git repository with one commit for repository
//! arguments. Each is written as its format says, by this code: nothing
//! on the host is run to make them. Written once per audit, in its
//! output directory.

use std::io;
use std::path::{Path, PathBuf};

use probes::calls::arguments::{
    SEED_CSV, SEED_DRAWIO, SEED_HTML, SEED_JS, SEED_JSON, SEED_MARKDOWN, SEED_PDF, SEED_PNG,
    SEED_PY, SEED_REPO, SEED_SHEET, SEED_SQLITE, SEED_TEXT, SEED_XLSX, SEED_ZIP,
};

mod png;
mod sqlite;
mod stored;
use sha1::{Digest, Sha1};
use stored::{crc32, zlib_stored};

/// A one-page PDF with one line of text (PDF 1.4; offsets computed).
fn pdf() -> Vec<u8> {
    let objects = [
        "<< /Type /Catalog /Pages 2 0 R >>",
        "<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
        "<< /Type /Page /Parent 2 0 R /MediaBox [0 0 300 144] /Contents 4 0 R /Resources << /Font << /F1 5 0 R >> >> >>",
        "<< /Length 44 >>\nstream\nBT /F1 18 Tf 20 60 Td (Hello from mcpvm) Tj ET\nendstream",
        "<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
    ];
    let mut out = b"%PDF-1.4\n".to_vec();
    let mut offsets = Vec::new();
    for (i, o) in objects.iter().enumerate() {
        offsets.push(out.len());
        out.extend_from_slice(format!("{} 0 obj\n{o}\nendobj\n", i + 1).as_bytes());
    }
    let xref = out.len();
    out.extend_from_slice(
        format!("xref\n0 {}\n0000000000 65535 f \n", objects.len() + 1).as_bytes(),
    );
    for o in offsets {
        out.extend_from_slice(format!("{o:010} 00000 n \n").as_bytes());
    }
    out.extend_from_slice(
        format!(
            "trailer\n<< /Size {} /Root 1 0 R >>\nstartxref\n{xref}\n%%EOF\n",
            objects.len() + 1
        )
        .as_bytes(),
    );
    out
}

/// A zip archive of `files`, stored (not compressed): what an Office
/// Open XML file is, without a compressor.
fn zip_stored(files: &[(&str, &[u8])]) -> Vec<u8> {
    let mut out = Vec::new();
    let mut central = Vec::new();
    for (name, data) in files {
        let (crc, size, offset) = (crc32(data), data.len() as u32, out.len() as u32);
        // version 2.0, no flags, stored, no time or date.
        let common = |h: &mut Vec<u8>| {
            for v in [20u16, 0, 0, 0, 0] {
                h.extend_from_slice(&v.to_le_bytes());
            }
            for v in [crc, size, size] {
                h.extend_from_slice(&v.to_le_bytes());
            }
            h.extend_from_slice(&(name.len() as u16).to_le_bytes());
            h.extend_from_slice(&0u16.to_le_bytes()); // extra field
        };
        out.extend_from_slice(&0x0403_4b50u32.to_le_bytes());
        common(&mut out);
        out.extend_from_slice(name.as_bytes());
        out.extend_from_slice(data);
        central.extend_from_slice(&0x0201_4b50u32.to_le_bytes());
        central.extend_from_slice(&20u16.to_le_bytes()); // made by
        common(&mut central);
        for v in [0u16, 0, 0] {
            central.extend_from_slice(&v.to_le_bytes()); // comment, disk, internal attributes
        }
        central.extend_from_slice(&0u32.to_le_bytes()); // external attributes
        central.extend_from_slice(&offset.to_le_bytes());
        central.extend_from_slice(name.as_bytes());
    }
    let (at, len) = (out.len() as u32, central.len() as u32);
    out.extend_from_slice(&central);
    out.extend_from_slice(&0x0605_4b50u32.to_le_bytes());
    let n = files.len() as u16;
    for v in [0u16, 0, n, n] {
        out.extend_from_slice(&v.to_le_bytes());
    }
    out.extend_from_slice(&len.to_le_bytes());
    out.extend_from_slice(&at.to_le_bytes());
    out.extend_from_slice(&0u16.to_le_bytes());
    out
}

/// An Excel workbook (Office Open XML) with one sheet: a header row and
/// two rows of numbers and names, as `table.csv` holds.
fn xlsx() -> Vec<u8> {
    let types = r#"<?xml version="1.0" encoding="UTF-8" standalone="yes"?>
<Types xmlns="http://schemas.openxmlformats.org/package/2006/content-types"><Default Extension="rels" ContentType="application/vnd.openxmlformats-package.relationships+xml"/><Default Extension="xml" ContentType="application/xml"/><Override PartName="/xl/workbook.xml" ContentType="application/vnd.openxmlformats-officedocument.spreadsheetml.sheet.main+xml"/><Override PartName="/xl/worksheets/sheet1.xml" ContentType="application/vnd.openxmlformats-officedocument.spreadsheetml.worksheet+xml"/></Types>"#;
    let rels = r#"<?xml version="1.0" encoding="UTF-8" standalone="yes"?>
<Relationships xmlns="http://schemas.openxmlformats.org/package/2006/relationships"><Relationship Id="rId1" Type="http://schemas.openxmlformats.org/officeDocument/2006/relationships/officeDocument" Target="xl/workbook.xml"/></Relationships>"#;
    let workbook = format!(
        r#"<?xml version="1.0" encoding="UTF-8" standalone="yes"?>
<workbook xmlns="http://schemas.openxmlformats.org/spreadsheetml/2006/main" xmlns:r="http://schemas.openxmlformats.org/officeDocument/2006/relationships"><sheets><sheet name="{SEED_SHEET}" sheetId="1" r:id="rId1"/></sheets></workbook>"#
    );
    let workbook_rels = r#"<?xml version="1.0" encoding="UTF-8" standalone="yes"?>
<Relationships xmlns="http://schemas.openxmlformats.org/package/2006/relationships"><Relationship Id="rId1" Type="http://schemas.openxmlformats.org/officeDocument/2006/relationships/worksheet" Target="worksheets/sheet1.xml"/></Relationships>"#;
    let row = |r: u32, cells: &[(&str, &str)]| {
        let mut x = format!(r#"<row r="{r}">"#);
        for (i, (kind, v)) in cells.iter().enumerate() {
            let col = (b'A' + i as u8) as char;
            match *kind {
                "n" => x += &format!(r#"<c r="{col}{r}"><v>{v}</v></c>"#),
                _ => x += &format!(r#"<c r="{col}{r}" t="inlineStr"><is><t>{v}</t></is></c>"#),
            }
        }
        x + "</row>"
    };
    let sheet = format!(
        r#"<?xml version="1.0" encoding="UTF-8" standalone="yes"?>
<worksheet xmlns="http://schemas.openxmlformats.org/spreadsheetml/2006/main"><sheetData>{}{}{}</sheetData></worksheet>"#,
        row(1, &[("s", "id"), ("s", "name"), ("s", "value")]),
        row(2, &[("n", "1"), ("s", "alpha"), ("n", "3.5")]),
        row(3, &[("n", "2"), ("s", "beta"), ("n", "7")]),
    );
    zip_stored(&[
        ("[Content_Types].xml", types.as_bytes()),
        ("_rels/.rels", rels.as_bytes()),
        ("xl/workbook.xml", workbook.as_bytes()),
        ("xl/_rels/workbook.xml.rels", workbook_rels.as_bytes()),
        ("xl/worksheets/sheet1.xml", sheet.as_bytes()),
    ])
}

/// Writes the seed into `out/workspace` (anew) and returns its path.
pub fn write(out: &Path) -> io::Result<PathBuf> {
    let dir = out.join("workspace");
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir)?;
    let files: [(&str, Vec<u8>); 14] = [
        (SEED_TEXT, b"Notes for an mcpvm audit.\nSecond line.\n".to_vec()),
        (SEED_JSON, br#"{"name": "mcpvm", "items": [{"id": 1, "title": "first"}, {"id": 2, "title": "second"}]}"#.to_vec()),
        (SEED_CSV, b"id,name,value\n1,alpha,3.5\n2,beta,7\n".to_vec()),
        (SEED_MARKDOWN, b"# Seeded workspace\n\nFiles an mcpvm audit gives every server.\n".to_vec()),
        (SEED_HTML, b"<!doctype html><title>mcpvm</title><h1>A local page</h1><p>Hello from mcpvm.</p>\n".to_vec()),
        (SEED_PDF, pdf()),
        (SEED_XLSX, xlsx()),
        (SEED_JS, b"// A file for linters and code tools.\nexport function add(a, b) {\n  return a + b;\n}\n".to_vec()),
        (SEED_PY, b"\"\"\"A file for code tools.\"\"\"\n\n\ndef add(a, b):\n    return a + b\n".to_vec()),
        (SEED_PNG, png::image()),
        (SEED_SQLITE, sqlite::database()),
        (SEED_ZIP, zip_stored(&[
            ("hello.txt", b"Hello from mcpvm.\n"),
            ("docs/second.txt", b"A second file, in a folder.\n"),
        ])),
        (SEED_DRAWIO, br#"<mxfile><diagram id="p1" name="Page-1"><mxGraphModel><root><mxCell id="0"/><mxCell id="1" parent="0"/><mxCell id="2" value="mcpvm" vertex="1" parent="1"><mxGeometry x="40" y="40" width="120" height="60" as="geometry"/></mxCell></root></mxGraphModel></diagram></mxfile>
"#.to_vec()),
        // ESLint (9 and later) refuses to lint without a config file.
        ("eslint.config.js", b"export default [{ rules: { \"no-unused-vars\": \"warn\" } }];\n".to_vec()),
    ];
    for (name, bytes) in files {
        std::fs::write(dir.join(name), bytes)?;
    }
    git_repository(&dir.join(SEED_REPO))?;
    Ok(dir)
}

/// Writes one loose object; returns its id.
fn object(git: &Path, kind: &str, body: &[u8]) -> io::Result<[u8; 20]> {
    let mut raw = format!("{kind} {}\0", body.len()).into_bytes();
    raw.extend_from_slice(body);
    let id: [u8; 20] = Sha1::digest(&raw).into();
    let hex = hex(&id);
    let dir = git.join("objects").join(&hex[..2]);
    std::fs::create_dir_all(&dir)?;
    std::fs::write(dir.join(&hex[2..]), zlib_stored(&raw))?;
    Ok(id)
}

fn hex(id: &[u8]) -> String {
    id.iter().map(|b| format!("{b:02x}")).collect()
}

/// A git index (version 2) of one file, so that the work tree reads as
/// the commit. Its stat fields are zero: git finds them stale and
/// compares the content instead.
fn index(name: &str, size: usize, blob: &[u8; 20]) -> Vec<u8> {
    let mut out = b"DIRC".to_vec();
    out.extend_from_slice(&2u32.to_be_bytes());
    out.extend_from_slice(&1u32.to_be_bytes());
    let start = out.len();
    out.extend_from_slice(&[0; 24]); // ctime, mtime, dev, ino
    out.extend_from_slice(&0o100644u32.to_be_bytes());
    out.extend_from_slice(&[0; 8]); // uid, gid
    out.extend_from_slice(&(size as u32).to_be_bytes());
    out.extend_from_slice(blob);
    out.extend_from_slice(&(name.len() as u16).to_be_bytes());
    out.extend_from_slice(name.as_bytes());
    // NUL-padded to a multiple of eight, at least one NUL.
    let len = out.len() - start;
    out.resize(start + (len + 8) / 8 * 8, 0);
    let sum: [u8; 20] = Sha1::digest(&out).into();
    out.extend_from_slice(&sum);
    out
}

/// A git repository with one commit of a README on `main`, written as
/// git's own files (no `git` on the host needed, none of its hooks or
/// config run).
fn git_repository(repo: &Path) -> io::Result<()> {
    let git = repo.join(".git");
    for d in ["refs/heads", "refs/tags", "objects/info", "objects/pack"] {
        std::fs::create_dir_all(git.join(d))?;
    }
    let readme = b"A repository seeded by an mcpvm audit.\n";
    std::fs::write(repo.join("README"), readme)?;
    let blob = object(&git, "blob", readme)?;
    let mut tree = b"100644 README\0".to_vec();
    tree.extend_from_slice(&blob);
    let tree = object(&git, "tree", &tree)?;
    let who = "mcpvm <audit@mcpvm.invalid> 1767225600 +0000";
    let commit = format!(
        "tree {}\nauthor {who}\ncommitter {who}\n\nSeeded by mcpvm\n",
        hex(&tree)
    );
    let commit = object(&git, "commit", commit.as_bytes())?;
    std::fs::write(git.join("refs/heads/main"), format!("{}\n", hex(&commit)))?;
    std::fs::write(git.join("HEAD"), "ref: refs/heads/main\n")?;
    std::fs::write(git.join("index"), index("README", readme.len(), &blob))?;
    std::fs::write(
        git.join("config"),
        "[core]\n\trepositoryformatversion = 0\n\tfilemode = true\n\tbare = false\n",
    )?;
    Ok(())
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_seed_holds_real_files_of_each_kind() {
        let t = tempfile::tempdir().unwrap();
        let dir = super::write(t.path()).unwrap();
        let json: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(dir.join("data.json")).unwrap()).unwrap();
        assert_eq!(json["items"][1]["id"], 2);
        let pdf = std::fs::read(dir.join("paper.pdf")).unwrap();
        assert!(pdf.starts_with(b"%PDF-1.4") && pdf.ends_with(b"%%EOF\n"));
        // The xref offsets point at the objects they name.
        let text = String::from_utf8_lossy(&pdf);
        let xref = text.find("xref\n").unwrap();
        let first = text[xref..].lines().nth(3).unwrap();
        let at: usize = first[..10].parse().unwrap();
        assert!(text[at..].starts_with("1 0 obj"));
        assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 15);
    }

    #[test]
    fn the_workbook_is_a_zip_every_reader_opens() {
        let t = tempfile::tempdir().unwrap();
        let dir = super::write(t.path()).unwrap();
        let book = dir.join("book.xlsx");
        assert!(std::fs::read(&book).unwrap().starts_with(b"PK\x03\x04"));
        // Python's zipfile checks every header and CRC; the sheet holds the rows.
        let check = std::process::Command::new("python3")
            .arg("-c")
            .arg("import sys, zipfile; z = zipfile.ZipFile(sys.argv[1]); assert z.testzip() is None; print(z.read('xl/worksheets/sheet1.xml').decode())")
            .arg(&book)
            .output()
            .expect("python3 is on every machine this builds on");
        assert!(check.status.success(), "{check:?}");
        let sheet = String::from_utf8_lossy(&check.stdout);
        assert!(
            sheet.contains("<t>alpha</t>") && sheet.contains(r#"<c r="C3"><v>7</v></c>"#),
            "{sheet}"
        );
    }

    /// The repository is one git itself reads: when the host has git, it
    /// checks every object and shows the commit.
    #[test]
    fn the_seeded_repository_is_one_git_reads() {
        let t = tempfile::tempdir().unwrap();
        let dir = super::write(t.path()).unwrap();
        let repo = dir.join("repo");
        assert!(repo.join(".git/HEAD").exists());
        let git = |args: &[&str]| {
            std::process::Command::new("git")
                .args(["-c", "safe.directory=*", "-C"])
                .arg(&repo)
                .args(args)
                .env("GIT_CONFIG_NOSYSTEM", "1")
                .env("HOME", t.path())
                .output()
        };
        let Ok(fsck) = git(&["fsck", "--strict"]) else {
            eprintln!("no git on this host: the repository's format is checked by the audit test in the testbed only");
            return;
        };
        assert!(fsck.status.success(), "{fsck:?}");
        let log = git(&["log", "--format=%an %s"]).unwrap();
        assert_eq!(
            String::from_utf8_lossy(&log.stdout),
            "mcpvm Seeded by mcpvm\n"
        );
        let status = git(&["status", "--porcelain"]).unwrap();
        assert_eq!(
            String::from_utf8_lossy(&status.stdout),
            "",
            "the work tree is the commit"
        );
    }
}

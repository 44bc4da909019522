//! The seeded workspace every audit cell gets at `/workspace` (read-only
//! to the host: the guest's changes are dropped): a few real files of
//! common types, so that generated path arguments point at something a
//! tool can open (`probes::arguments::Hints`), and a local page for URL
//! arguments. Written once per audit, in its output directory.

use std::io;
use std::path::{Path, PathBuf};

use probes::arguments::{SEED_CSV, SEED_HTML, SEED_JSON, SEED_MARKDOWN, SEED_PDF, SEED_TEXT};

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

/// Writes the seed into `out/workspace` (anew) and returns its path.
pub fn write(out: &Path) -> io::Result<PathBuf> {
    let dir = out.join("workspace");
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir)?;
    let files: [(&str, Vec<u8>); 6] = [
        (SEED_TEXT, b"Notes for an mcpvm audit.\nSecond line.\n".to_vec()),
        (SEED_JSON, br#"{"name": "mcpvm", "items": [{"id": 1, "title": "first"}, {"id": 2, "title": "second"}]}"#.to_vec()),
        (SEED_CSV, b"id,name,value\n1,alpha,3.5\n2,beta,7\n".to_vec()),
        (SEED_MARKDOWN, b"# Seeded workspace\n\nFiles an mcpvm audit gives every server.\n".to_vec()),
        (SEED_HTML, b"<!doctype html><title>mcpvm</title><h1>A local page</h1><p>Hello from mcpvm.</p>\n".to_vec()),
        (SEED_PDF, pdf()),
    ];
    for (name, bytes) in files {
        std::fs::write(dir.join(name), bytes)?;
    }
    Ok(dir)
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
        assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 6);
    }
}

//! An SQLite database file with one table, written as the file format
//! says (https://www.sqlite.org/fileformat2.html): no SQLite library on
//! the host. Two 4096-byte pages: page 1 holds the 100-byte header and
//! `sqlite_schema` (one row: the table's `CREATE TABLE`), page 2 the
//! table's rows, each a table b-tree leaf (§1.6, §2.1).

const PAGE: usize = 4096;

/// The table the database holds, as `table.csv` and the workbook do.
pub const TABLE: &str = "items";
const CREATE: &str = "CREATE TABLE items(id INTEGER PRIMARY KEY, name TEXT, value REAL)";
const ROWS: [(i64, &str, f64); 2] = [(1, "alpha", 3.5), (2, "beta", 7.0)];

/// A value of a record (§2.1): its serial type and its bytes.
enum Column<'a> {
    /// NULL: what an INTEGER PRIMARY KEY column stores (the rowid is it).
    Null,
    Int8(i8),
    Real(f64),
    Text(&'a str),
}

/// SQLite's variable-length integer (big-endian, 7 bits a byte), for the
/// values a record here needs (under 2^56).
fn varint(mut v: u64, out: &mut Vec<u8>) {
    let mut bytes = vec![(v & 0x7f) as u8];
    v >>= 7;
    while v > 0 {
        bytes.push((v & 0x7f) as u8 | 0x80);
        v >>= 7;
    }
    out.extend(bytes.iter().rev());
}

/// A record: its header (size, serial types), then the values.
fn record(columns: &[Column]) -> Vec<u8> {
    let mut types = Vec::new();
    let mut body = Vec::new();
    for c in columns {
        match c {
            Column::Null => varint(0, &mut types),
            Column::Int8(i) => {
                varint(1, &mut types);
                body.push(*i as u8);
            }
            Column::Real(r) => {
                varint(7, &mut types);
                body.extend_from_slice(&r.to_be_bytes());
            }
            Column::Text(t) => {
                varint(2 * t.len() as u64 + 13, &mut types);
                body.extend_from_slice(t.as_bytes());
            }
        }
    }
    // The header's size counts itself; one byte for any header here.
    let mut out = vec![(types.len() + 1) as u8];
    out.extend(types);
    out.extend(body);
    out
}

/// A table b-tree leaf page holding `rows` (rowid, record), whose b-tree
/// header starts at `at` (100 on page 1, after the file header).
fn leaf(page: &mut [u8], at: usize, rows: &[(i64, Vec<u8>)]) {
    let mut end = PAGE;
    let mut pointers = Vec::new();
    for (rowid, rec) in rows {
        let mut cell = Vec::new();
        varint(rec.len() as u64, &mut cell);
        varint(*rowid as u64, &mut cell);
        cell.extend_from_slice(rec);
        end -= cell.len();
        page[end..end + cell.len()].copy_from_slice(&cell);
        pointers.push(end as u16);
    }
    page[at] = 0x0d;
    page[at + 3..at + 5].copy_from_slice(&(rows.len() as u16).to_be_bytes());
    page[at + 5..at + 7].copy_from_slice(&(end as u16).to_be_bytes());
    for (i, p) in pointers.iter().enumerate() {
        let slot = at + 8 + 2 * i;
        page[slot..slot + 2].copy_from_slice(&p.to_be_bytes());
    }
}

/// The database file's bytes.
pub fn database() -> Vec<u8> {
    let mut file = vec![0u8; 2 * PAGE];
    let (page1, page2) = file.split_at_mut(PAGE);
    let header: [(usize, &[u8]); 10] = [
        (0, b"SQLite format 3\0"),
        (16, &(PAGE as u16).to_be_bytes()),
        // File format write and read versions 1 (rollback journal); no
        // reserved bytes; payload fractions 64, 32, 32 as required.
        (18, &[1, 1, 0, 64, 32, 32]),
        (24, &1u32.to_be_bytes()), // file change counter
        (28, &2u32.to_be_bytes()), // pages in the database
        (40, &1u32.to_be_bytes()), // schema cookie
        (44, &4u32.to_be_bytes()), // schema format 4
        (56, &1u32.to_be_bytes()), // text encoding: UTF-8
        (92, &1u32.to_be_bytes()), // version-valid-for: the change counter
        (96, &3_040_001u32.to_be_bytes()),
    ];
    for (at, bytes) in header {
        page1[at..at + bytes.len()].copy_from_slice(bytes);
    }
    let schema = record(&[
        Column::Text("table"),
        Column::Text(TABLE),
        Column::Text(TABLE),
        Column::Int8(2),
        Column::Text(CREATE),
    ]);
    leaf(page1, 100, &[(1, schema)]);
    let rows: Vec<(i64, Vec<u8>)> = ROWS
        .iter()
        .map(|(id, name, value)| {
            (
                *id,
                record(&[Column::Null, Column::Text(name), Column::Real(*value)]),
            )
        })
        .collect();
    leaf(page2, 0, &rows);
    file
}

#[cfg(test)]
mod tests {
    #[test]
    fn varints_are_sqlites() {
        let enc = |v| {
            let mut out = Vec::new();
            super::varint(v, &mut out);
            out
        };
        assert_eq!(enc(0), [0]);
        assert_eq!(enc(127), [0x7f]);
        assert_eq!(enc(145), [0x81, 0x11]);
        assert_eq!(enc(16384), [0x81, 0x80, 0x00]);
    }

    /// SQLite itself (Python's binding) opens it, finds it intact and
    /// reads the rows back.
    #[test]
    fn sqlite_reads_the_table_back() {
        let t = tempfile::tempdir().unwrap();
        let db = t.path().join("data.db");
        std::fs::write(&db, super::database()).unwrap();
        let check = std::process::Command::new("python3")
            .arg("-c")
            .arg("import sqlite3, sys; c = sqlite3.connect(sys.argv[1]); print(c.execute('pragma integrity_check').fetchone()[0]); print(c.execute('select id, name, value from items order by id').fetchall())")
            .arg(&db)
            .output()
            .expect("python3 is on every machine this builds on");
        assert!(check.status.success(), "{check:?}");
        assert_eq!(
            String::from_utf8_lossy(&check.stdout),
            "ok\n[(1, 'alpha', 3.5), (2, 'beta', 7.0)]\n"
        );
    }
}

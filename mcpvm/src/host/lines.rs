//! Lines read from something hostile (the guest agent's control channel,
//! a child's output) with a bound on how long one may be.

use std::io::BufRead;

/// Reads one line (without its newline) of at most `max` bytes into
/// `line`; the rest of a longer line is skipped. False at the end.
pub fn read_line_bounded(reader: &mut impl BufRead, line: &mut Vec<u8>, max: usize) -> bool {
    line.clear();
    let mut seen_any = false;
    loop {
        let (done, used) = match reader.fill_buf() {
            Ok([]) => return seen_any,
            Ok(buf) => {
                seen_any = true;
                let end = buf.iter().position(|&b| b == b'\n');
                let take = end.unwrap_or(buf.len());
                let room = max.saturating_sub(line.len());
                line.extend_from_slice(&buf[..take.min(room)]);
                (end.is_some(), end.map_or(buf.len(), |e| e + 1))
            }
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(_) => return seen_any,
        };
        reader.consume(used);
        if done {
            return true;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::BufReader;

    #[test]
    fn long_lines_are_cut_and_the_next_one_read() {
        let mut input = vec![b'x'; 5000];
        input.extend_from_slice(b"\nshort\nlast");
        let mut r = BufReader::with_capacity(64, &input[..]);
        let mut line = Vec::new();
        assert!(read_line_bounded(&mut r, &mut line, 100));
        assert_eq!(line.len(), 100);
        assert!(read_line_bounded(&mut r, &mut line, 100));
        assert_eq!(line, b"short");
        assert!(read_line_bounded(&mut r, &mut line, 100));
        assert_eq!(line, b"last");
        assert!(!read_line_bounded(&mut r, &mut line, 100));
    }
}

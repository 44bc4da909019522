//! A PNG image (an 8×8 RGB gradient), written as the PNG specification
//! says: signature, IHDR, one IDAT of stored zlib blocks, IEND, each
//! chunk with its CRC-32. No image library on the host.

const SIDE: u32 = 8;

fn chunk(kind: &[u8; 4], data: &[u8], out: &mut Vec<u8>) {
    out.extend_from_slice(&(data.len() as u32).to_be_bytes());
    let mut typed = kind.to_vec();
    typed.extend_from_slice(data);
    out.extend_from_slice(&typed);
    out.extend_from_slice(&super::stored::crc32(&typed).to_be_bytes());
}

/// The image file's bytes.
pub fn image() -> Vec<u8> {
    let mut out = b"\x89PNG\r\n\x1a\n".to_vec();
    let mut header = Vec::new();
    header.extend_from_slice(&SIDE.to_be_bytes());
    header.extend_from_slice(&SIDE.to_be_bytes());
    // 8 bits a sample, colour type 2 (RGB), deflate, filter 0, no interlace.
    header.extend_from_slice(&[8, 2, 0, 0, 0]);
    chunk(b"IHDR", &header, &mut out);
    let mut pixels = Vec::new();
    for y in 0..SIDE {
        pixels.push(0); // filter type None for the row
        for x in 0..SIDE {
            pixels.extend_from_slice(&[(x * 32) as u8, (y * 32) as u8, 160]);
        }
    }
    chunk(b"IDAT", &super::stored::zlib_stored(&pixels), &mut out);
    chunk(b"IEND", &[], &mut out);
    out
}

#[cfg(test)]
mod tests {
    /// Every chunk's CRC checks and the pixels inflate to 8 rows of a
    /// filter byte and 8 RGB pixels (Python's zlib and struct).
    #[test]
    fn the_image_is_a_png_a_reader_decodes() {
        let t = tempfile::tempdir().unwrap();
        let png = t.path().join("image.png");
        std::fs::write(&png, super::image()).unwrap();
        let check = std::process::Command::new("python3")
            .arg("-c")
            .arg(
                "import struct, sys, zlib
d = open(sys.argv[1], 'rb').read()
assert d[:8] == b'\\x89PNG\\r\\n\\x1a\\n'
i, chunks = 8, {}
while i < len(d):
    n, = struct.unpack('>I', d[i:i+4]); kind = d[i+4:i+8]; body = d[i+8:i+8+n]
    crc, = struct.unpack('>I', d[i+8+n:i+12+n])
    assert zlib.crc32(kind + body) == crc, kind
    chunks[kind] = body; i += 12 + n
w, h, depth, colour = struct.unpack('>IIBB', chunks[b'IHDR'][:10])
raw = zlib.decompress(chunks[b'IDAT'])
print(w, h, depth, colour, len(raw), sorted(chunks))",
            )
            .arg(&png)
            .output()
            .expect("python3 is on every machine this builds on");
        assert!(check.status.success(), "{check:?}");
        assert_eq!(
            String::from_utf8_lossy(&check.stdout),
            "8 8 8 2 200 [b'IDAT', b'IEND', b'IHDR']\n"
        );
    }
}

//! The checksums and stored (uncompressed) streams the seeded files'
//! formats wrap their bytes in — zip, PNG and git's loose objects — so
//! that each is a real file without a compressor.

/// CRC-32 (IEEE), as zip stores it.
pub fn crc32(data: &[u8]) -> u32 {
    let mut crc = !0u32;
    for &byte in data {
        crc ^= byte as u32;
        for _ in 0..8 {
            crc = (crc >> 1) ^ (0xedb8_8320 & (crc & 1).wrapping_neg());
        }
    }
    !crc
}

/// `data` as a zlib stream of stored (uncompressed) deflate blocks: what
/// git reads for a loose object, without a compressor.
pub fn zlib_stored(data: &[u8]) -> Vec<u8> {
    let mut out = vec![0x78, 0x01];
    let mut chunks = data.chunks(0xffff).peekable();
    if chunks.peek().is_none() {
        out.extend_from_slice(&[1, 0, 0, 0xff, 0xff]);
    }
    while let Some(chunk) = chunks.next() {
        out.push(chunks.peek().is_none() as u8);
        let len = chunk.len() as u16;
        out.extend_from_slice(&len.to_le_bytes());
        out.extend_from_slice(&(!len).to_le_bytes());
        out.extend_from_slice(chunk);
    }
    let (mut a, mut b) = (1u32, 0u32);
    for &byte in data {
        a = (a + byte as u32) % 65521;
        b = (b + a) % 65521;
    }
    out.extend_from_slice(&((b << 16) | a).to_be_bytes());
    out
}
#[cfg(test)]
mod tests {
    #[test]
    fn crc32_has_its_check_value() {
        assert_eq!(super::crc32(b"123456789"), 0xcbf4_3926, "the check value");
    }

    #[test]
    fn zlib_streams_have_their_checksum_and_any_length() {
        // zlib's own encoding of "abc" at level 0.
        assert_eq!(
            super::zlib_stored(b"abc"),
            [0x78, 0x01, 1, 3, 0, 0xfc, 0xff, b'a', b'b', b'c', 0x02, 0x4d, 0x01, 0x27]
        );
        let big = vec![7u8; 0x1_0000 + 5];
        let z = super::zlib_stored(&big);
        assert_eq!(z.len(), 2 + 5 + 0xffff + 5 + 6 + 4, "two blocks");
        assert_eq!(z[2], 0, "the first block is not the last");
        assert_eq!(z[2 + 5 + 0xffff], 1, "the second is");
    }
}

//! The byte-level encodings of the JFR format: compressed (LEB128-style)
//! integers, strings, and a byte buffer that events and pools are built in.
//!
//! JFR files (chunk format 2.x, JDK 11 and later) store integers as groups of
//! seven bits, low group first, with the high bit of each byte saying more
//! follow; the ninth byte, if reached, carries eight bits. Strings carry an
//! encoding byte first; oxprof writes UTF-8 (encoding 3) with a byte count.

/// String encoding byte: null.
pub const STRING_NULL: u8 = 0;
/// String encoding byte: the empty string.
pub const STRING_EMPTY: u8 = 1;
/// String encoding byte: UTF-8 bytes, preceded by their count.
pub const STRING_UTF8: u8 = 3;

/// A growable byte buffer with JFR's encodings.
#[derive(Clone, Debug, Default)]
pub struct Buf {
    pub bytes: Vec<u8>,
}

/// How many bytes [`Buf::varint`] takes for `v`.
pub fn varint_len(mut v: u64) -> usize {
    let mut n = 1;
    while v >= 0x80 && n < 9 {
        v >>= 7;
        n += 1;
    }
    n
}

impl Buf {
    pub fn new() -> Buf {
        Buf::default()
    }

    pub fn len(&self) -> usize {
        self.bytes.len()
    }

    pub fn is_empty(&self) -> bool {
        self.bytes.is_empty()
    }

    pub fn clear(&mut self) {
        self.bytes.clear();
    }

    pub fn u8(&mut self, v: u8) {
        self.bytes.push(v);
    }

    /// An unsigned compressed integer (at most nine bytes).
    pub fn varint(&mut self, mut v: u64) {
        for _ in 0..8 {
            if v < 0x80 {
                self.bytes.push(v as u8);
                return;
            }
            self.bytes.push((v as u8 & 0x7f) | 0x80);
            v >>= 7;
        }
        self.bytes.push(v as u8);
    }

    /// A signed long, written as its two's-complement bits.
    pub fn long(&mut self, v: i64) {
        self.varint(v as u64);
    }

    /// A signed int: readers take the low 32 bits of a long.
    pub fn int(&mut self, v: i32) {
        self.varint(v as i64 as u64);
    }

    /// A double: 8 bytes, big-endian, never compressed (as the JDK writes it).
    pub fn double(&mut self, v: f64) {
        self.bytes.extend_from_slice(&v.to_be_bytes());
    }

    pub fn boolean(&mut self, v: bool) {
        self.bytes.push(v as u8);
    }

    pub fn string(&mut self, s: &str) {
        if s.is_empty() {
            self.bytes.push(STRING_EMPTY);
        } else {
            self.bytes.push(STRING_UTF8);
            self.varint(s.len() as u64);
            self.bytes.extend_from_slice(s.as_bytes());
        }
    }

    pub fn null_string(&mut self) {
        self.bytes.push(STRING_NULL);
    }

    pub fn raw(&mut self, b: &[u8]) {
        self.bytes.extend_from_slice(b);
    }

    /// Appends `body` as one event: its total size (this size field
    /// included) first, then the body.
    pub fn event(&mut self, body: &[u8]) {
        let mut n = 1;
        while varint_len((body.len() + n) as u64) != n {
            n += 1;
        }
        self.varint((body.len() + n) as u64);
        self.bytes.extend_from_slice(body);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The decoding every JFR reader applies.
    fn read_varint(b: &[u8]) -> (u64, usize) {
        let mut v = 0u64;
        for (i, &byte) in b.iter().enumerate().take(9) {
            if i == 8 {
                return (v | (byte as u64) << 56, 9);
            }
            v |= ((byte & 0x7f) as u64) << (7 * i);
            if byte < 0x80 {
                return (v, i + 1);
            }
        }
        (v, b.len())
    }

    #[test]
    fn varints_round_trip_and_have_the_expected_length() {
        for v in [0u64, 1, 127, 128, 300, 1 << 20, (1 << 56) - 1, 1 << 56, u64::MAX, -1i64 as u64] {
            let mut b = Buf::new();
            b.varint(v);
            assert_eq!(b.len(), varint_len(v), "{v}");
            assert_eq!(read_varint(&b.bytes), (v, b.len()), "{v}");
        }
        let mut b = Buf::new();
        b.int(-1);
        assert_eq!(read_varint(&b.bytes).0 as i64 as i32, -1);
        assert_eq!(b.len(), 9);
    }

    #[test]
    fn event_size_counts_itself() {
        for body_len in [0usize, 1, 125, 126, 127, 128, 16_380, 16_381, 16_382, 16_383, 16_384] {
            let mut b = Buf::new();
            b.event(&vec![7u8; body_len]);
            let (size, _) = read_varint(&b.bytes);
            assert_eq!(size as usize, b.len(), "body {body_len}");
        }
    }

    #[test]
    fn strings() {
        let mut b = Buf::new();
        b.string("");
        b.string("héllo");
        b.null_string();
        assert_eq!(b.bytes[0], STRING_EMPTY);
        assert_eq!(&b.bytes[1..3], &[STRING_UTF8, 6]);
        assert_eq!(&b.bytes[3..9], "héllo".as_bytes());
        assert_eq!(b.bytes[9], STRING_NULL);
    }
}

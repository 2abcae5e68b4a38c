//! The primitive encodings of a JFR chunk: LEB128-style compressed integers
//! (or fixed big-endian ones in chunks without the compressed-integers flag),
//! floats, booleans and the five string encodings. Every read is bounds
//! checked and returns an error instead of panicking.

/// A read failure: what was being read and where.
pub type Result<T> = std::result::Result<T, String>;

/// Room reserved ahead for `n` elements whose count was read from the data:
/// at most 4096. [`Cursor::count`] bounds a count by the bytes left, not by
/// the bytes each element takes in memory (up to 72 for a metadata element,
/// at every nesting level at once); a vector grows past this as elements
/// are actually read, so a corrupt count costs no more than the bytes that
/// back it.
pub fn capacity(n: usize) -> usize {
    n.min(4096)
}

/// A string as stored in a chunk: inline, null, or a reference into the
/// `java.lang.String` constant pool.
#[derive(Clone, Debug, PartialEq)]
pub enum JfrString {
    Null,
    Inline(String),
    Pool(i64),
}

/// A cursor over one chunk's bytes.
pub struct Cursor<'a> {
    data: &'a [u8],
    pub pos: usize,
    /// Integers other than byte are varints (chunk flag bit 0).
    pub compressed: bool,
}

impl<'a> Cursor<'a> {
    pub fn new(data: &'a [u8], pos: usize, compressed: bool) -> Cursor<'a> {
        Cursor { data, pos, compressed }
    }

    pub fn remaining(&self) -> usize {
        self.data.len().saturating_sub(self.pos)
    }

    fn eof(&self, what: &str) -> String {
        format!("unexpected end of data reading {what} at byte {}", self.pos)
    }

    pub fn bytes(&mut self, n: usize) -> Result<&'a [u8]> {
        let end = self.pos.checked_add(n).filter(|&e| e <= self.data.len()).ok_or_else(|| self.eof("bytes"))?;
        let s = &self.data[self.pos..end];
        self.pos = end;
        Ok(s)
    }

    pub fn u8(&mut self) -> Result<u8> {
        let b = *self.data.get(self.pos).ok_or_else(|| self.eof("a byte"))?;
        self.pos += 1;
        Ok(b)
    }

    /// A JFR varint: 7 bits per byte for up to 8 bytes, then a full 9th byte.
    pub fn varint(&mut self) -> Result<u64> {
        let mut v = 0u64;
        for i in 0..8 {
            let b = self.u8()?;
            v |= ((b & 0x7f) as u64) << (7 * i);
            if b & 0x80 == 0 {
                return Ok(v);
            }
        }
        Ok(v | (self.u8()? as u64) << 56)
    }

    fn fixed<const N: usize>(&mut self) -> Result<[u8; N]> {
        let b = self.bytes(N)?;
        let mut a = [0u8; N];
        a.copy_from_slice(b);
        Ok(a)
    }

    pub fn i64(&mut self) -> Result<i64> {
        if self.compressed {
            self.varint().map(|v| v as i64)
        } else {
            self.fixed::<8>().map(i64::from_be_bytes)
        }
    }

    pub fn i32(&mut self) -> Result<i32> {
        if self.compressed {
            self.varint().map(|v| v as i32)
        } else {
            self.fixed::<4>().map(i32::from_be_bytes)
        }
    }

    pub fn i16(&mut self) -> Result<i16> {
        if self.compressed {
            self.varint().map(|v| v as i16)
        } else {
            self.fixed::<2>().map(i16::from_be_bytes)
        }
    }

    /// A count (array length, pool size): non-negative and no larger than
    /// the bytes left, so corrupt data cannot make us allocate wildly.
    pub fn count(&mut self, what: &str) -> Result<usize> {
        let n = self.i32()?;
        if n < 0 || n as usize > self.remaining() {
            return Err(format!("invalid {what} count {n} at byte {}", self.pos));
        }
        Ok(n as usize)
    }

    pub fn f32(&mut self) -> Result<f32> {
        self.fixed::<4>().map(f32::from_be_bytes)
    }

    pub fn f64(&mut self) -> Result<f64> {
        self.fixed::<8>().map(f64::from_be_bytes)
    }

    /// Big-endian fixed-size reads, used by the chunk header.
    pub fn raw_i64(&mut self) -> Result<i64> {
        self.fixed::<8>().map(i64::from_be_bytes)
    }

    pub fn raw_i32(&mut self) -> Result<i32> {
        self.fixed::<4>().map(i32::from_be_bytes)
    }

    pub fn raw_u16(&mut self) -> Result<u16> {
        self.fixed::<2>().map(u16::from_be_bytes)
    }

    /// A string in any of JFR's encodings: 0 null, 1 empty, 2 pool
    /// reference, 3 UTF-8, 4 UTF-16 chars as integers, 5 Latin-1.
    pub fn string(&mut self) -> Result<JfrString> {
        let at = self.pos;
        match self.u8()? {
            0 => Ok(JfrString::Null),
            1 => Ok(JfrString::Inline(String::new())),
            2 => Ok(JfrString::Pool(self.i64()?)),
            3 => {
                let n = self.count("string length")?;
                Ok(JfrString::Inline(utf8_or_modified(self.bytes(n)?)))
            }
            4 => {
                let n = self.count("string length")?;
                let mut units = Vec::with_capacity(capacity(n));
                for _ in 0..n {
                    units.push(self.i16()? as u16);
                }
                Ok(JfrString::Inline(String::from_utf16_lossy(&units)))
            }
            5 => {
                let n = self.count("string length")?;
                Ok(JfrString::Inline(self.bytes(n)?.iter().map(|&b| b as char).collect()))
            }
            e => Err(format!("unknown string encoding {e} at byte {at}")),
        }
    }
}

/// UTF-8 text as the JDK writes it: standard UTF-8 (the Java side), or
/// HotSpot's modified UTF-8 (symbols: class and method names), where a
/// supplementary character is a surrogate pair of two 3-byte sequences
/// and NUL is `C0 80`. Bytes that are neither become U+FFFD.
pub fn utf8_or_modified(bytes: &[u8]) -> String {
    if let Ok(s) = std::str::from_utf8(bytes) {
        return s.to_string();
    }
    let mut out = String::with_capacity(bytes.len());
    let mut i = 0;
    // A 3-byte sequence encoding a UTF-16 surrogate (ED A0..BF xx).
    let surrogate = |at: usize| -> Option<u16> {
        match bytes.get(at..at + 3)? {
            &[0xED, b1 @ 0xA0..=0xBF, b2 @ 0x80..=0xBF] => Some(0xD000 | (u16::from(b1 & 0x3F) << 6) | u16::from(b2 & 0x3F)),
            _ => None,
        }
    };
    while i < bytes.len() {
        if let Some(hi @ 0xD800..=0xDBFF) = surrogate(i) {
            if let Some(lo @ 0xDC00..=0xDFFF) = surrogate(i + 3) {
                let c = 0x10000 + ((u32::from(hi) - 0xD800) << 10) + (u32::from(lo) - 0xDC00);
                out.push(char::from_u32(c).unwrap_or(char::REPLACEMENT_CHARACTER));
                i += 6;
                continue;
            }
        }
        if bytes[i..].starts_with(&[0xC0, 0x80]) {
            out.push('\0');
            i += 2;
            continue;
        }
        // The longest valid UTF-8 run from here, else one replaced byte
        // (a lone surrogate is three).
        match std::str::from_utf8(&bytes[i..]) {
            Ok(s) => {
                out.push_str(s);
                break;
            }
            Err(e) if e.valid_up_to() > 0 => {
                // The first `valid_up_to` bytes are valid UTF-8.
                out.push_str(std::str::from_utf8(&bytes[i..i + e.valid_up_to()]).unwrap_or_default());
                i += e.valid_up_to();
            }
            Err(e) => {
                out.push(char::REPLACEMENT_CHARACTER);
                i += if surrogate(i).is_some() { 3 } else { e.error_len().unwrap_or(bytes.len() - i).max(1) };
            }
        }
    }
    out
}

impl Cursor<'_> {
    /// Moves past a string in any encoding without building it.
    pub fn skip_string(&mut self) -> Result<()> {
        let at = self.pos;
        match self.u8()? {
            0 | 1 => Ok(()),
            2 => self.i64().map(drop),
            3 | 5 => {
                let n = self.count("string length")?;
                self.bytes(n).map(drop)
            }
            4 => {
                let n = self.count("string length")?;
                for _ in 0..n {
                    self.i16()?;
                }
                Ok(())
            }
            e => Err(format!("unknown string encoding {e} at byte {at}")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn varints() {
        let mut c = Cursor::new(&[0x05, 0xac, 0x02, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff], 0, true);
        assert_eq!(c.varint(), Ok(5));
        assert_eq!(c.varint(), Ok(300));
        assert_eq!(c.i64(), Ok(-1));
        assert_eq!(c.remaining(), 0);
        assert!(c.varint().unwrap_err().contains("unexpected end"));
        // A varint cut short is an error, not a panic.
        assert!(Cursor::new(&[0x80, 0x80], 0, true).varint().is_err());
    }

    #[test]
    fn fixed_width_when_not_compressed() {
        let mut c = Cursor::new(&[0, 0, 1, 0, 0xff, 0xfe], 0, false);
        assert_eq!(c.i32(), Ok(256));
        assert_eq!(c.i16(), Ok(-2));
    }

    #[test]
    fn strings_in_every_encoding() {
        let data = [0, 1, 2, 7, 3, 2, b'h', b'i', 4, 2, 0x68, 0xe9, 0x01, 5, 2, b'o', 0xe9, 9];
        let mut c = Cursor::new(&data, 0, true);
        assert_eq!(c.string(), Ok(JfrString::Null));
        assert_eq!(c.string(), Ok(JfrString::Inline(String::new())));
        assert_eq!(c.string(), Ok(JfrString::Pool(7)));
        assert_eq!(c.string(), Ok(JfrString::Inline("hi".into())));
        assert_eq!(c.string(), Ok(JfrString::Inline("hé".into())));
        assert_eq!(c.string(), Ok(JfrString::Inline("oé".into())));
        assert!(c.string().unwrap_err().contains("unknown string encoding 9"));
        let mut c = Cursor::new(&data, 0, true);
        for _ in 0..6 {
            c.skip_string().unwrap();
        }
        assert_eq!(c.pos, data.len() - 1);
    }

    /// Tester's finding: a name with a supplementary character (U+1D465)
    /// in HotSpot's modified UTF-8 (a surrogate pair, 3 bytes each) came
    /// out as six replacement characters.
    #[test]
    fn modified_utf8_as_hotspot_writes_symbols() {
        // "Supp$𝑥Class" as a HotSpot symbol: U+1D465 is D835 DC65.
        let mut name = b"Supp$".to_vec();
        name.extend([0xED, 0xA0, 0xB5, 0xED, 0xB1, 0xA5]);
        name.extend(b"Class");
        assert_eq!(utf8_or_modified(&name), "Supp$\u{1D465}Class");
        // Standard UTF-8 of the same, NUL as C0 80, and what is neither.
        assert_eq!(utf8_or_modified("Supp$\u{1D465}Class".as_bytes()), "Supp$\u{1D465}Class");
        assert_eq!(utf8_or_modified(&[b'a', 0xC0, 0x80, b'b']), "a\0b");
        assert_eq!(utf8_or_modified(&[b'a', 0xED, 0xA0, 0xB5, b'b']), "a\u{FFFD}b");
        assert_eq!(utf8_or_modified(&[0xFF, b'x', 0xE9]), "\u{FFFD}x\u{FFFD}");
        assert_eq!(utf8_or_modified("é€".as_bytes()), "é€");
        // Through the cursor, as encoding 3.
        let mut data = vec![3, name.len() as u8];
        data.extend(&name);
        assert_eq!(Cursor::new(&data, 0, true).string(), Ok(JfrString::Inline("Supp$\u{1D465}Class".into())));
        // UTF-16 chars (encoding 4) with a surrogate pair, as varints.
        let data = [4, 3, 0x78, 0xb5, 0xb0, 0x03, 0xe5, 0xb8, 0x03];
        assert_eq!(Cursor::new(&data, 0, true).string(), Ok(JfrString::Inline("x\u{1D465}".into())));
    }

    #[test]
    fn counts_larger_than_the_data_are_rejected() {
        let mut c = Cursor::new(&[0xff, 0xff, 0xff, 0x7f, 1, 2], 0, true);
        assert!(c.count("array").unwrap_err().contains("invalid array count"));
        let mut c = Cursor::new(&[3, 50, b'x'], 0, true);
        assert!(c.string().is_err());
    }
}

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
                Ok(JfrString::Inline(String::from_utf8_lossy(self.bytes(n)?).into_owned()))
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

    #[test]
    fn counts_larger_than_the_data_are_rejected() {
        let mut c = Cursor::new(&[0xff, 0xff, 0xff, 0x7f, 1, 2], 0, true);
        assert!(c.count("array").unwrap_err().contains("invalid array count"));
        let mut c = Cursor::new(&[3, 50, b'x'], 0, true);
        assert!(c.string().is_err());
    }
}

//! signal-safe: Compiled-code debug information: which Java methods, at which bytecode
//! indices, a compiled frame stands for at one of its call sites, inlined
//! callees first.
//!
//! HotSpot keeps, for every call site of an nmethod, a `PcDesc` record
//! (`pc_offset`, `scope_decode_offset`, `obj_decode_offset`, `flags`; 16
//! bytes, sorted by `pc_offset`) in a table, and the scopes in a compressed
//! byte stream. A scope starts with three numbers: the offset of its
//! caller's scope (0 = none: the compiled method itself), the index of its
//! method in the nmethod's metadata table (1-based), and its bytecode index
//! plus one. This module finds the record of a return address and decodes
//! that chain. It reads the tables only through a [`Tables`] it is given:
//! slices ([`DebugInfo`]: memory the caller vouches for, and hand-built
//! streams in the unit tests) or the caller's checked reads (JDK 25 keeps
//! the tables on the C heap), so it cannot fault by itself.
//!
//! The numbers are "UNSIGNED5"-coded (one to five bytes, 64 values per
//! continuation byte). JDK 21 and later exclude the byte 0 (every byte is
//! one higher) and use 0 to start a run of zero values; earlier JDKs do not.
//! Which of the two this JVM writes is not in its structure table: the first
//! chain that decodes consistently under one of them (its outermost method is
//! the nmethod's own) settles it for the process.

use std::sync::atomic::{AtomicU8, Ordering};

/// HotSpot's `DebugInformationRecorder::serialized_null`.
const SERIALIZED_NULL: u32 = 0;
/// Inlining deeper than this is not believed (C2's MaxInlineLevel is 15).
pub const MAX_SCOPES: usize = 64;

/// One number coding.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Coding {
    /// JDK 11–20: byte values as they are.
    Legacy,
    /// JDK 21+: byte 0 excluded (values start at 1), 0 starts a zero run.
    Unsigned5,
}

impl Coding {
    fn excluded(self) -> u32 {
        match self {
            Coding::Legacy => 0,
            Coding::Unsigned5 => 1,
        }
    }
}

/// 0 = not settled yet, 1 = Legacy, 2 = Unsigned5.
static SETTLED: AtomicU8 = AtomicU8::new(0);

/// The coding this process settled on, if any.
pub fn settled() -> Option<Coding> {
    match SETTLED.load(Ordering::Relaxed) {
        1 => Some(Coding::Legacy),
        2 => Some(Coding::Unsigned5),
        _ => None,
    }
}

/// An nmethod's debug information, wherever it is kept. Every read is
/// bounded by the tables' lengths and may fail (`None`).
pub trait Tables {
    /// The number of PcDesc records.
    fn pcs_len(&self) -> usize;
    /// Record `i`'s `pc_offset` and `scope_decode_offset`.
    fn pc_desc(&self, i: usize) -> Option<(i32, i32)>;
    /// Byte `pos` of the scopes stream.
    fn data_byte(&self, pos: usize) -> Option<u8>;
    /// Entry `i` of the metadata table (0-based).
    fn metadata(&self, i: usize) -> Option<usize>;
    /// The nmethod's own `Method*`.
    fn root(&self) -> usize;
}

/// A reader over one scope's numbers.
struct Stream<'a, T: Tables> {
    data: &'a T,
    pos: usize,
    coding: Coding,
    zeros: u32,
}

impl<T: Tables> Stream<'_, T> {
    fn byte(&mut self) -> Option<u32> {
        let b = self.data.data_byte(self.pos)?;
        self.pos += 1;
        Some(b as u32)
    }

    /// One unsigned number, or `None` if the stream is malformed or ends.
    fn read(&mut self) -> Option<u32> {
        const LG_H: u32 = 6;
        if self.zeros > 0 {
            self.zeros -= 1;
            return Some(0);
        }
        let x = self.coding.excluded();
        let l = 256 - 64 - x;
        let b0 = self.byte()?;
        if b0 < x {
            // A run of zero values (the next byte counts them).
            let run = self.byte()?;
            if run == 0 {
                return None;
            }
            self.zeros = run - 1;
            return Some(0);
        }
        let mut sum = b0 - x;
        if sum < l {
            return Some(sum);
        }
        let mut shift = LG_H;
        for i in 1..5 {
            let b = self.byte()?;
            if b < x {
                return None;
            }
            sum = sum.wrapping_add((b - x) << shift);
            if b < x + l || i == 4 {
                return Some(sum);
            }
            shift += LG_H;
        }
        None
    }
}

/// The debug information of one nmethod, as slices of memory that stays
/// readable while they are used.
pub struct DebugInfo<'a> {
    /// The PcDesc table: `[pc_offset, scope_decode_offset, obj_decode_offset, flags]`.
    pub pcs: &'a [[i32; 4]],
    /// The scopes stream.
    pub data: &'a [u8],
    /// The metadata table (`Method*`s and `Klass*`s).
    pub metadata: &'a [usize],
    /// The nmethod's own `Method*`.
    pub root: usize,
}

impl Tables for DebugInfo<'_> {
    fn pcs_len(&self) -> usize {
        self.pcs.len()
    }
    fn pc_desc(&self, i: usize) -> Option<(i32, i32)> {
        self.pcs.get(i).map(|d| (d[0], d[1]))
    }
    fn data_byte(&self, pos: usize) -> Option<u8> {
        self.data.get(pos).copied()
    }
    fn metadata(&self, i: usize) -> Option<usize> {
        self.metadata.get(i).copied()
    }
    fn root(&self) -> usize {
        self.root
    }
}

/// The index of the first record whose `pc_offset` is above `pc_offset`
/// (records are sorted by it); `None` if a record cannot be read.
fn first_above(info: &impl Tables, pc_offset: i32) -> Option<usize> {
    let (mut low, mut high) = (0, info.pcs_len());
    while low < high {
        let mid = low + (high - low) / 2;
        if info.pc_desc(mid)?.0 <= pc_offset {
            low = mid + 1;
        } else {
            high = mid;
        }
    }
    Some(low)
}

/// The scope decode offset recorded for the call site whose return address
/// is `pc_offset` bytes into the nmethod's code, if there is one.
pub fn scope_at(info: &impl Tables, pc_offset: i32) -> Option<u32> {
    let i = first_above(info, pc_offset)?.checked_sub(1)?;
    let (pc, scope) = info.pc_desc(i)?;
    (pc == pc_offset).then_some(scope.max(0) as u32)
}

/// The scope decode offset of the first record after `pc_offset`: what
/// HotSpot's `pc_desc_near` gives AsyncGetCallTrace for an interrupted
/// compiled frame (its pc is rarely at a record); `None` past the last.
pub fn scope_after(info: &impl Tables, pc_offset: i32) -> Option<u32> {
    let i = first_above(info, pc_offset)?;
    info.pc_desc(i).map(|(_, scope)| scope.max(0) as u32)
}

/// Decodes the chain of scopes starting at `offset` into `out` as
/// (`Method*`, bci) pairs, innermost first, with `coding`. `None` unless the
/// chain ends at the nmethod's own method within `out`'s length.
fn chain(info: &impl Tables, offset: u32, coding: Coding, out: &mut [(usize, i32)]) -> Option<usize> {
    if offset == SERIALIZED_NULL {
        // No scope recorded: the compiled method at its entry.
        *out.first_mut()? = (info.root(), 0);
        return Some(1);
    }
    let mut at = offset;
    let mut n = 0;
    loop {
        let mut s = Stream { data: info, pos: at as usize, coding, zeros: 0 };
        let sender = s.read()?;
        let index = s.read()? as usize;
        // The stored value is bci + 1; -1 (synchronization at entry) reads as 0.
        let bci = s.read()?.checked_sub(1).map_or(0, |b| b as i32);
        let method = info.metadata(index.checked_sub(1)?)?;
        if method == 0 || bci > 0xffff {
            return None;
        }
        *out.get_mut(n)? = (method, bci);
        n += 1;
        if sender == SERIALIZED_NULL {
            return (method == info.root()).then_some(n);
        }
        // Callers' scopes are written before their callees'.
        if sender >= at {
            return None;
        }
        at = sender;
    }
}

/// The Java frames of the call site whose return address is `pc_offset`
/// bytes into the code: (`Method*`, bci) pairs written to `out`, innermost
/// (inlined) first, the nmethod's own method last. `None` if the site has no
/// record or its scopes do not decode consistently.
pub fn frames_at(info: &impl Tables, pc_offset: i32, out: &mut [(usize, i32)]) -> Option<usize> {
    decode(info, scope_at(info, pc_offset)?, out)
}

/// The Java frames of an interrupted compiled frame whose pc is
/// `pc_offset` bytes into the code, as [`frames_at`] gives them for a call
/// site, from the first record after the pc (see [`scope_after`]); with no
/// record after it, the compiled method alone at bci 0, as
/// AsyncGetCallTrace does.
pub fn frames_after(info: &impl Tables, pc_offset: i32, out: &mut [(usize, i32)]) -> Option<usize> {
    decode(info, scope_after(info, pc_offset).unwrap_or(SERIALIZED_NULL), out)
}

/// Decodes the chain of scopes at `offset` with the settled coding, or
/// settles it.
fn decode(info: &impl Tables, offset: u32, out: &mut [(usize, i32)]) -> Option<usize> {
    if let Some(coding) = settled() {
        return chain(info, offset, coding, out);
    }
    for (coding, code) in [(Coding::Legacy, 1), (Coding::Unsigned5, 2)] {
        if let Some(n) = chain(info, offset, coding, out) {
            // A chain of more than one scope is the evidence that settles
            // the coding: a lone scope decodes under both when its numbers
            // are small.
            if n > 1 {
                SETTLED.store(code, Ordering::Relaxed);
            }
            return Some(n);
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Encodes `v` as HotSpot's writers do.
    fn encode(v: u32, coding: Coding, out: &mut Vec<u8>) {
        let x = coding.excluded();
        let l = 256 - 64 - x;
        let mut sum = v;
        for i in 0..5 {
            if sum < l || i == 4 {
                out.push((sum + x) as u8);
                return;
            }
            sum -= l;
            out.push((l + x + (sum % 64)) as u8);
            sum /= 64;
        }
    }

    fn scope(sender: u32, method: u32, bci: i32, coding: Coding, out: &mut Vec<u8>) -> u32 {
        let at = out.len() as u32;
        for v in [sender, method, (bci + 1) as u32, 0, 0, 0] {
            encode(v, coding, out);
        }
        at
    }

    #[test]
    fn numbers_round_trip_in_both_codings() {
        for coding in [Coding::Legacy, Coding::Unsigned5] {
            for v in [0u32, 1, 190, 191, 192, 193, 255, 256, 1000, 12_345, 1 << 20, 123_456_789] {
                let mut buf = Vec::new();
                encode(v, coding, &mut buf);
                let info = DebugInfo { pcs: &[], data: &buf, metadata: &[], root: 0 };
                let mut s = Stream { data: &info, pos: 0, coding, zeros: 0 };
                assert_eq!(s.read(), Some(v), "{v} in {coding:?}");
                assert_eq!(s.pos, buf.len());
            }
        }
    }

    #[test]
    fn zero_runs() {
        // 0 starts a run: [0, 3] reads as three zeros, then 5 (coded as 6).
        let buf = [0u8, 3, 6];
        let info = DebugInfo { pcs: &[], data: &buf, metadata: &[], root: 0 };
        let mut s = Stream { data: &info, pos: 0, coding: Coding::Unsigned5, zeros: 0 };
        assert_eq!([s.read(), s.read(), s.read(), s.read()], [Some(0), Some(0), Some(0), Some(5)]);
        assert_eq!(s.read(), None);
    }

    #[test]
    fn decodes_an_inlining_chain_innermost_first() {
        for coding in [Coding::Legacy, Coding::Unsigned5] {
            // Offset 0 is the null scope, so real scopes start after a pad byte.
            let mut data = vec![0xff];
            let root = scope(0, 1, 17, coding, &mut data);
            let mid = scope(root, 2, 300, coding, &mut data);
            let leaf = scope(mid, 3, -1, coding, &mut data);
            let metadata = [0x1000, 0x2000, 0x3000];
            let pcs = [[-1, 0, 0, 0], [40, root as i32, 0, 0], [96, leaf as i32, 0, 0]];
            let info = DebugInfo { pcs: &pcs, data: &data, metadata: &metadata, root: 0x1000 };
            let mut out = [(0, 0); 8];
            assert_eq!(chain(&info, scope_at(&info, 96).unwrap(), coding, &mut out), Some(3));
            assert_eq!(&out[..3], &[(0x3000, 0), (0x2000, 300), (0x1000, 17)]);
            assert_eq!(chain(&info, scope_at(&info, 40).unwrap(), coding, &mut out), Some(1));
            assert_eq!(out[0], (0x1000, 17));
            // No record for a PC that is not a call site; a wrong root fails.
            assert_eq!(scope_at(&info, 41), None);
            let wrong = DebugInfo { root: 0x2000, ..info };
            assert_eq!(chain(&wrong, leaf, coding, &mut out), None);
            // Too small an output fails instead of truncating.
            assert_eq!(chain(&info, leaf, coding, &mut out[..2]), None);
        }
    }

    #[test]
    fn records_are_found_at_and_after_a_pc() {
        let pcs = [[-1, 0, 0, 0], [8, 1, 0, 0], [20, 2, 0, 0], [33, 3, 0, 0]];
        let info = DebugInfo { pcs: &pcs, data: &[], metadata: &[], root: 0 };
        let at: Vec<Option<u32>> = [-2, -1, 7, 8, 9, 20, 33, 34].iter().map(|&pc| scope_at(&info, pc)).collect();
        assert_eq!(at, [None, Some(0), None, Some(1), None, Some(2), Some(3), None]);
        let after: Vec<Option<u32>> = [-2, -1, 7, 8, 19, 32, 33].iter().map(|&pc| scope_after(&info, pc)).collect();
        assert_eq!(after, [Some(0), Some(1), Some(1), Some(2), Some(2), Some(3), None]);
        let empty = DebugInfo { pcs: &[], data: &[], metadata: &[], root: 0 };
        assert_eq!((scope_at(&empty, 0), scope_after(&empty, 0)), (None, None));
    }

    #[test]
    fn malformed_streams_fail() {
        let metadata = [0x1000];
        let pcs = [[8, 1, 0, 0]];
        // Runs off the end; index out of the table; a sender that does not go back.
        for data in [vec![0xff, 0xff], vec![0xff, 0, 9, 1], vec![0xff, 1, 1, 1]] {
            let info = DebugInfo { pcs: &pcs, data: &data, metadata: &metadata, root: 0x1000 };
            let mut out = [(0, 0); 4];
            assert_eq!(chain(&info, 1, Coding::Legacy, &mut out), None, "{data:?}");
        }
    }
}

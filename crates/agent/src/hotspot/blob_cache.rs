//! signal-safe: The code blobs of compiled Java methods found for PCs, cached by PC
//! for the stack walks (see `Layout::find_blob_cached`, which owns the
//! blob's fields: this module keeps six words and a compile id per PC).
//!
//! Finding the blob of a PC through the code heap's segment map is three
//! dependent memory reads (the map, the block header, the blob header) that
//! a sample milliseconds after the last one finds cold. A walk of a deep
//! stack does it for every compiled frame, one after the other, because the
//! blob's frame size leads to the next frame. The same return addresses
//! recur from sample to sample, so one cache line per PC, holding what the
//! walk needs of the blob, turns the three reads into one.
//!
//! A hit is checked against the code heap before it is used: the cached
//! blob must still be the nmethod it was, with the same `Method*` and
//! compile id (no later nmethod reuses a compile id). That read does not
//! lie on the walk's path, so it costs less than the reads it replaces.
//! Only nmethods are cached, and only where the JDK exports the compile id.
//!
//! Each entry is a sequence lock: a writer makes the sequence odd, writes,
//! and makes it even again; a reader keeps what it read only if the
//! sequence was even and unchanged around its reads. A writer that finds an
//! entry busy leaves it, so nobody waits.

use std::sync::atomic::{fence, AtomicU64, AtomicUsize, Ordering};

use crate::sampling::store::{direct_mapped_slot, prefault, prefetch};

/// Entries (a power of two): 256 KiB.
const ENTRIES: usize = 4096;

/// One cached blob: 64 bytes, one cache line. The six words are named
/// for what `Layout::find_blob_cached` keeps in them.
#[repr(C, align(64))]
struct Entry {
    /// Sequence number (low 32 bits; odd while written) and the nmethod's
    /// compile id (high 32 bits).
    seq: AtomicU64,
    pc: AtomicUsize,
    frame_bytes: AtomicUsize,
    frame_complete: AtomicUsize,
    code_begin: AtomicUsize,
    method: AtomicUsize,
    start: AtomicUsize,
    size: AtomicUsize,
}

static CACHE: [Entry; ENTRIES] = [const {
    Entry {
        seq: AtomicU64::new(0),
        pc: AtomicUsize::new(0),
        frame_bytes: AtomicUsize::new(0),
        frame_complete: AtomicUsize::new(0),
        code_begin: AtomicUsize::new(0),
        method: AtomicUsize::new(0),
        start: AtomicUsize::new(0),
        size: AtomicUsize::new(0),
    }
}; ENTRIES];

/// Backs the cache with memory before the walks use it (see [`prefault`]).
/// Off the signal path.
pub fn prepare() {
    prefault(&CACHE, |e| {
        let _ = e.seq.compare_exchange(0, 0, Ordering::Relaxed, Ordering::Relaxed);
    });
}

/// Starts loading the entry of `pc` (see `store::prefetch`).
pub fn prefetch_entry(pc: usize) {
    if let Some(e) = CACHE.get(direct_mapped_slot(pc, ENTRIES)) {
        prefetch(e);
    }
}

/// The blob's words cached for `pc` and its compile id, if the entry holds
/// `pc` and no writer changed it meanwhile (not yet checked against the
/// heap). The words are those given to [`put`].
pub fn get(pc: usize) -> Option<([usize; 6], i32)> {
    let e = CACHE.get(direct_mapped_slot(pc, ENTRIES))?;
    let before = e.seq.load(Ordering::Acquire);
    if before & 1 != 0 || e.pc.load(Ordering::Relaxed) != pc {
        return None;
    }
    let words = [
        e.frame_bytes.load(Ordering::Relaxed),
        e.frame_complete.load(Ordering::Relaxed),
        e.code_begin.load(Ordering::Relaxed),
        e.method.load(Ordering::Relaxed),
        e.start.load(Ordering::Relaxed),
        e.size.load(Ordering::Relaxed),
    ];
    fence(Ordering::Acquire);
    if e.seq.load(Ordering::Relaxed) != before || words.iter().all(|&w| w == 0) {
        return None;
    }
    Some((words, (before >> 32) as u32 as i32))
}

/// Remembers six words of an nmethod's blob (compile id `compile_id`) for
/// `pc`, unless another writer is at the entry.
pub fn put(pc: usize, words: [usize; 6], compile_id: i32) {
    let Some(e) = CACHE.get(direct_mapped_slot(pc, ENTRIES)) else { return };
    let seq = e.seq.load(Ordering::Relaxed);
    if seq & 1 != 0 || e.seq.compare_exchange(seq, seq | 1, Ordering::Acquire, Ordering::Relaxed).is_err() {
        return;
    }
    // Readers that see any of the stores below also see the odd sequence.
    fence(Ordering::Release);
    e.pc.store(pc, Ordering::Relaxed);
    for (slot, w) in [&e.frame_bytes, &e.frame_complete, &e.code_begin, &e.method, &e.start, &e.size].into_iter().zip(words) {
        slot.store(w, Ordering::Relaxed);
    }
    let next = ((seq as u32).wrapping_add(2) & !1) as u64;
    e.seq.store(((compile_id as u32 as u64) << 32) | next, Ordering::Release);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn blob(method: usize) -> [usize; 6] {
        [48, 0x1010, 0x1000, method, 0xf00, 0x400]
    }

    /// What was put is read back whole with its compile id; another pc, an
    /// entry being written, or one overwritten for another pc is a miss.
    #[test]
    fn entries_are_read_whole_or_not_at_all() {
        let pc = 0x7f00_0000_1234;
        assert_eq!(get(pc), None);
        put(pc, blob(0x5000), 77);
        assert_eq!(get(pc), Some((blob(0x5000), 77)));
        assert_eq!(get(pc + 1), None, "another pc");
        let e = &CACHE[direct_mapped_slot(pc, ENTRIES)];
        e.seq.fetch_or(1, Ordering::Relaxed);
        assert_eq!(get(pc), None, "a writer is at it");
        put(pc, blob(0x6000), 78);
        e.seq.fetch_add(1, Ordering::Relaxed);
        assert_eq!(get(pc), Some((blob(0x5000), 77)), "the busy entry was left as it was");
        put(pc, blob(0x6000), -3);
        assert_eq!(get(pc), Some((blob(0x6000), -3)));
        assert_eq!(std::mem::size_of::<Entry>(), 64);
    }
}

//! signal-safe: Closed trigger windows (safepoints under `ttsp`), kept in a
//! preallocated ring the trap handler appends to and the JFR stream and the
//! profile build read, plus running totals over every window since start.
//!
//! One writer at a time: windows close one after another (the trap cycle
//! lets a single hit through at a time). A cell is published with its
//! sequence number (odd while written, even when done), so a reader that
//! fell a whole ring behind sees the overwritten cells as lost, never torn.

use std::sync::atomic::{AtomicPtr, AtomicU64, Ordering};

/// One closed window. Times are CLOCK_MONOTONIC ns.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Record {
    /// Opened (`SafepointSynchronize::begin` entered).
    pub begin: u64,
    /// Closed (every thread stopped: `record_safepoint_synchronized`).
    pub sync: u64,
    /// Released (`SafepointSynchronize::end` entered), 0 when not timed.
    pub end: u64,
    /// HotSpot's safepoint counter after the threads stopped, 0 if unread.
    pub id: u64,
    /// The vtable pointer of the VM operation being run, 0 if unread.
    pub vtable: u64,
    /// Java threads at the time, 0 if unread.
    pub threads: u64,
    /// Samples kept while the window was open.
    pub samples: u64,
    /// The thread that opened the window (the VM thread under `ttsp`).
    pub tid: u64,
}

const FIELDS: usize = 8;

struct Cell {
    seq: AtomicU64,
    v: [AtomicU64; FIELDS],
}

struct Ring {
    cells: Box<[Cell]>,
    mask: u64,
    written: AtomicU64,
}

static RING: AtomicPtr<Ring> = AtomicPtr::new(std::ptr::null_mut());

/// Windows closed since the totals were reset, their summed and longest
/// open time (ns).
static COUNT: AtomicU64 = AtomicU64::new(0);
static SUM_NS: AtomicU64 = AtomicU64::new(0);
static MAX_NS: AtomicU64 = AtomicU64::new(0);

// signal-safe: off (allocates the ring once, before any trap is armed)
/// Makes the ring (`capacity` rounded up to a power of two) if there is
/// none yet; it lives for the process (a handler may still write to it
/// while a recording stops). Zeroed memory: pages are touched only as
/// cells are written.
pub fn init(capacity: usize) {
    if !RING.load(Ordering::SeqCst).is_null() {
        return;
    }
    let n = capacity.next_power_of_two().max(2);
    let cells: Box<[Cell]> = (0..n).map(|_| Cell { seq: AtomicU64::new(0), v: [const { AtomicU64::new(0) }; FIELDS] }).collect();
    let ring = Box::into_raw(Box::new(Ring { cells, mask: n as u64 - 1, written: AtomicU64::new(0) }));
    if RING.compare_exchange(std::ptr::null_mut(), ring, Ordering::SeqCst, Ordering::SeqCst).is_err() {
        // SAFETY: `ring` came from Box::into_raw above and was never shared.
        drop(unsafe { Box::from_raw(ring) });
    }
}

/// Forgets the totals (at the start of a recording). Cells stay; readers
/// start from [`written`].
pub fn reset_totals() {
    COUNT.store(0, Ordering::SeqCst);
    SUM_NS.store(0, Ordering::SeqCst);
    MAX_NS.store(0, Ordering::SeqCst);
}

/// (windows, summed open ns, longest open ns) since [`reset_totals`].
pub fn totals() -> (u64, u64, u64) {
    (COUNT.load(Ordering::SeqCst), SUM_NS.load(Ordering::SeqCst), MAX_NS.load(Ordering::SeqCst))
}

/// The number of records ever written (a reader's starting cursor).
pub fn written() -> u64 {
    ring().map(|r| r.written.load(Ordering::SeqCst)).unwrap_or(0)
}

/// Reads the records from `cursor` on into `out`; returns the next cursor
/// and how many were lost (overwritten before they were read).
pub fn read_from(cursor: u64, out: &mut Vec<Record>) -> (u64, u64) {
    let Some(r) = ring() else { return (cursor, 0) };
    let end = r.written.load(Ordering::SeqCst);
    let oldest = end.saturating_sub(r.mask + 1);
    let mut lost = oldest.saturating_sub(cursor);
    for i in cursor.max(oldest)..end {
        let Some(cell) = r.cells.get((i & r.mask) as usize) else { continue };
        let want = 2 * i + 2;
        if cell.seq.load(Ordering::Acquire) != want {
            lost += 1;
            continue;
        }
        let v: [u64; FIELDS] = std::array::from_fn(|k| cell.v[k].load(Ordering::Relaxed));
        if cell.seq.load(Ordering::Acquire) != want {
            lost += 1;
            continue;
        }
        out.push(Record { begin: v[0], sync: v[1], end: v[2], id: v[3], vtable: v[4], threads: v[5], samples: v[6], tid: v[7] });
    }
    (end, lost)
}
// signal-safe: on

fn ring() -> Option<&'static Ring> {
    let p = RING.load(Ordering::Acquire);
    // SAFETY: a non-null RING points to a leaked Ring that is never freed.
    (!p.is_null()).then(|| unsafe { &*p })
}

/// Appends a closed window and adds it to the totals. Async-signal-safe:
/// atomics only.
pub fn push(rec: &Record) {
    let open = rec.sync.saturating_sub(rec.begin);
    COUNT.fetch_add(1, Ordering::SeqCst);
    SUM_NS.fetch_add(open, Ordering::SeqCst);
    MAX_NS.fetch_max(open, Ordering::SeqCst);
    let Some(r) = ring() else { return };
    let i = r.written.load(Ordering::SeqCst);
    let Some(cell) = r.cells.get((i & r.mask) as usize) else { return };
    cell.seq.store(2 * i + 1, Ordering::SeqCst);
    let v = [rec.begin, rec.sync, rec.end, rec.id, rec.vtable, rec.threads, rec.samples, rec.tid];
    for (slot, value) in cell.v.iter().zip(v) {
        slot.store(value, Ordering::Relaxed);
    }
    cell.seq.store(2 * i + 2, Ordering::Release);
    r.written.store(i + 1, Ordering::SeqCst);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_reader_gets_what_was_pushed_and_counts_what_it_missed() {
        init(4);
        let start = written();
        for k in 0..6u64 {
            push(&Record { begin: k * 10, sync: k * 10 + 3, ..Record::default() });
        }
        let mut out = Vec::new();
        let (next, lost) = read_from(start, &mut out);
        assert_eq!(next, start + 6);
        assert_eq!(lost, 2, "a ring of 4 keeps the last 4 of 6");
        assert_eq!(out.iter().map(|r| r.begin).collect::<Vec<_>>(), vec![20, 30, 40, 50]);
        let mut again = Vec::new();
        assert_eq!(read_from(next, &mut again), (next, 0));
        assert!(again.is_empty());
    }
}

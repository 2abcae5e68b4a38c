//! signal-safe: `Method*` → `jmethodID` and the method's few facts a frame needs
//! (native or not, where its bytecodes lie), cached for oxprof's own stack
//! walks (the allocation walk in `allocstack` and the signal-time fallback
//! in `javawalk`). Signal-safe: a fixed table of atomics, no lock, no
//! allocation.
//!
//! Finding a method's jmethodID from scratch takes seven dependent reads
//! through class metadata (`Layout::jmethod_id`), and its facts three more,
//! each a `process_vm_readv` because the pointer may not be a `Method` at
//! all. The methods on sampled stacks recur, so one direct-mapped table of
//! confirmed entries turns most of those system calls into one plain read.
//!
//! An entry is several words written without a lock, guarded by a sequence
//! number (odd while a writer fills it): a reader keeps what it read only if
//! the number was even and unchanged around its reads, and a writer that
//! finds the entry being written leaves it. A hit is then confirmed by
//! reading the id back: only a slot that names `method` right now counts.

use std::sync::atomic::{fence, AtomicUsize, Ordering};

use crate::hotspot::frames::Layout;
use crate::hotspot::gate;
use crate::sampling::store::{direct_mapped_slot, prefault};

/// Entries in the table (a power of two); 512 KiB.
const CACHED: usize = 8192;

/// One cache line, so that a lookup reads one line, not two.
#[repr(C, align(64))]
struct Entry {
    seq: AtomicUsize,
    method: AtomicUsize,
    id: AtomicUsize,
    /// Bit 0: the native flag is known; bit 1: the method is native.
    flags: AtomicUsize,
    code_start: AtomicUsize,
    code_len: AtomicUsize,
}

impl Entry {
    const fn new() -> Entry {
        Entry {
            seq: AtomicUsize::new(0),
            method: AtomicUsize::new(0),
            id: AtomicUsize::new(0),
            flags: AtomicUsize::new(0),
            code_start: AtomicUsize::new(0),
            code_len: AtomicUsize::new(0),
        }
    }
}

static IDS: [Entry; CACHED] = [const { Entry::new() }; CACHED];

/// A live method's jmethodID and facts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Known {
    pub id: usize,
    /// Whether it is a Java `native` method, where the JDK says.
    pub native: Option<bool>,
    /// Its bytecodes: start address and length (0, 0 if unknown).
    pub code: (usize, usize),
}

impl Known {
    /// The bytecode index of `bcp` (an interpreted frame's bytecode
    /// pointer), or 0 if it is not inside the method's bytecodes.
    pub fn bci(&self, bcp: usize) -> i32 {
        let (start, len) = self.code;
        if bcp >= start && bcp < start.wrapping_add(len) {
            (bcp - start) as i32
        } else {
            0
        }
    }

    /// The `bci` stored for a compiled frame without scope decoding: 0, or
    /// the native-method marker for a JNI wrapper.
    pub fn compiled_bci(&self) -> i32 {
        if self.native == Some(true) {
            jvmti_sys::asgct::BCI_NATIVE_FRAME
        } else {
            0
        }
    }
}

/// Backs the table with memory before the walks use it (see
/// [`prefault`]). Off the signal path.
pub fn prepare() {
    prefault(&IDS, |e| {
        let _ = e.id.compare_exchange(0, 0, Ordering::Relaxed, Ordering::Relaxed);
    });
}

/// The `jmethodID` of `method` (read back to confirm), or `None` when
/// `method` is not a live `Method` with one. Async-signal-safe.
pub fn get(l: &Layout, method: usize) -> Option<usize> {
    lookup(l, method).map(|k| k.id)
}

/// `method`'s jmethodID (read back to confirm) and facts, or `None` when
/// `method` is not a live `Method` with one. Async-signal-safe.
pub fn lookup(l: &Layout, method: usize) -> Option<Known> {
    // From JDK 26 a jmethodID is a table key, not a slot to read back.
    if !gate::jmethodid_is_method_slot() {
        return None;
    }
    let e = IDS.get(direct_mapped_slot(method >> 3, CACHED))?;
    if let Some(k) = read(e, method) {
        // SAFETY: only ids that were read back through a safe read are ever
        // stored: each is a slot in a JNI method block, which HotSpot never
        // frees (an unloaded method's slot is cleared, failing the check).
        if unsafe { (k.id as *const usize).read_volatile() } == method {
            return Some(k);
        }
    }
    // Looked up through safe reads: `method` may not be a Method at all.
    let id = l.jmethod_id(method)?;
    let (native, code) = l.method_facts(method);
    let k = Known { id, native, code };
    write(e, method, &k);
    Some(k)
}

/// The entry's contents for `method`, if it holds `method` and no writer
/// changed it while it was read.
fn read(e: &Entry, method: usize) -> Option<Known> {
    let before = e.seq.load(Ordering::Acquire);
    if before & 1 != 0 || e.method.load(Ordering::Acquire) != method {
        return None;
    }
    let id = e.id.load(Ordering::Acquire);
    let flags = e.flags.load(Ordering::Acquire);
    let code = (e.code_start.load(Ordering::Acquire), e.code_len.load(Ordering::Acquire));
    fence(Ordering::Acquire);
    if e.seq.load(Ordering::Relaxed) != before || id == 0 {
        return None;
    }
    let native = (flags & 1 != 0).then_some(flags & 2 != 0);
    Some(Known { id, native, code })
}

/// Fills the entry unless another writer is at it.
fn write(e: &Entry, method: usize, k: &Known) {
    let seq = e.seq.load(Ordering::Relaxed);
    if seq & 1 != 0 || e.seq.compare_exchange(seq, seq.wrapping_add(1), Ordering::Acquire, Ordering::Relaxed).is_err() {
        return;
    }
    fence(Ordering::Release);
    let flags = match k.native {
        Some(native) => 1 | ((native as usize) << 1),
        None => 0,
    };
    e.method.store(method, Ordering::Relaxed);
    e.id.store(k.id, Ordering::Relaxed);
    e.flags.store(flags, Ordering::Relaxed);
    e.code_start.store(k.code.0, Ordering::Relaxed);
    e.code_len.store(k.code.1, Ordering::Relaxed);
    e.seq.store(seq.wrapping_add(2), Ordering::Release);
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What a writer stored is read back whole; an entry being written, or
    /// changed while read, or holding another method, is a miss.
    #[test]
    fn entries_are_read_whole_or_not_at_all() {
        let e = Entry::new();
        assert_eq!(read(&e, 0x1000), None);
        let k = Known { id: 0x2000, native: Some(false), code: (0x3000, 40) };
        write(&e, 0x1000, &k);
        assert_eq!(read(&e, 0x1000), Some(k));
        assert_eq!(read(&e, 0x1008), None, "another method");
        e.seq.fetch_add(1, Ordering::Relaxed);
        assert_eq!(read(&e, 0x1000), None, "a writer is at it");
        write(&e, 0x1010, &Known { id: 0x2010, native: None, code: (0, 0) });
        assert_eq!(read(&e, 0x1000), None, "the busy entry was left as it was");
        e.seq.fetch_add(1, Ordering::Relaxed);
        let native = Known { id: 0x2010, native: Some(true), code: (0, 0) };
        write(&e, 0x1010, &native);
        assert_eq!(read(&e, 0x1010), Some(native));
        assert_eq!(native.compiled_bci(), jvmti_sys::asgct::BCI_NATIVE_FRAME);
        assert_eq!((k.compiled_bci(), k.bci(0x3000 + 7), k.bci(0x3000 + 40), k.bci(0x10)), (0, 7, 0, 0));
    }
}

//! signal-safe: `Method*` → `jmethodID`, cached for oxprof's own stack walks (the
//! allocation walk in `allocstack` and the signal-time fallback in
//! `javawalk`). Signal-safe: a fixed table of atomics, no lock, no
//! allocation.
//!
//! Finding a method's jmethodID from scratch takes seven dependent reads
//! through class metadata (`Layout::jmethod_id`), each a `process_vm_readv`
//! because the pointer may not be a `Method` at all. The methods on sampled
//! stacks recur, so one direct-mapped table of confirmed pairs turns most
//! of those system calls into one plain read.

use std::sync::atomic::{AtomicUsize, Ordering};

use crate::hotspot::frames::Layout;
use crate::hotspot::gate;
use crate::sampling::store::{direct_mapped_slot, prefault};

/// Entries in the table (a power of two); 128 KiB.
const CACHED: usize = 8192;

struct Entry {
    method: AtomicUsize,
    id: AtomicUsize,
}

/// Entries are written without a lock, so a reader may see a method with
/// another method's id (or a stale one); every hit is confirmed by reading
/// the id back, and a failed check is a miss.
static IDS: [Entry; CACHED] = [const { Entry { method: AtomicUsize::new(0), id: AtomicUsize::new(0) } }; CACHED];

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
    // From JDK 26 a jmethodID is a table key, not a slot to read back.
    if !gate::jmethodid_is_method_slot() {
        return None;
    }
    let e = IDS.get(direct_mapped_slot(method >> 3, CACHED))?;
    if e.method.load(Ordering::Relaxed) == method {
        let id = e.id.load(Ordering::Relaxed);
        // SAFETY: only ids that were read back through a safe read are ever
        // stored: each is a slot in a JNI method block, which HotSpot never
        // frees (an unloaded method's slot is cleared, failing the check).
        if id != 0 && unsafe { (id as *const usize).read_volatile() } == method {
            return Some(id);
        }
    }
    // Looked up through safe reads: `method` may not be a Method at all.
    let id = l.jmethod_id(method)?;
    e.id.store(0, Ordering::Relaxed);
    e.method.store(method, Ordering::Relaxed);
    e.id.store(id, Ordering::Relaxed);
    Some(id)
}

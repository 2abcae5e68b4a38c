//! signal-safe: Each thread's wall-clock bookkeeping, shared by the wall sampler thread
//! and the signal handler: when the thread was last accounted for, its last
//! wall sample's stack (store slot) and its CPU time right after that
//! sample. The sampler claims a thread's entry before signalling it; the
//! handler takes its weight from the entry (the wall time since the thread
//! was last accounted for, swapped atomically, so a merged or late signal
//! loses no time and no span is counted twice) and leaves its slot and CPU
//! time; the sampler counts a thread whose CPU time has not moved since then
//! with that slot again instead of signalling it.
//!
//! A fixed table of atomics, direct-mapped by thread id: no allocation, no
//! locks. Two live threads mapping to one entry take turns owning it; the
//! one that lost it is signalled and weighed by the interval meanwhile.

use std::sync::atomic::{AtomicU64, Ordering};

use crate::sampling::store::direct_mapped_slot;

const ENTRIES: usize = 1 << 14;
/// `slot` of an entry with no sample yet.
pub const NO_SLOT: u32 = u32::MAX;
/// `slot` of a thread the JVM does not run Java on: never signalled again.
pub const NOT_JAVA: u32 = u32::MAX - 1;

struct Entry {
    /// `tid << 32 | slot`; 0 when free.
    key: AtomicU64,
    /// The thread's CPU time (ns) when its last sample ended.
    cpu_ns: AtomicU64,
    /// CLOCK_MONOTONIC ns up to which the thread's wall time is accounted.
    accounted_ns: AtomicU64,
}

struct Table([Entry; ENTRIES]);

static TABLE: Table = Table([const { Entry { key: AtomicU64::new(0), cpu_ns: AtomicU64::new(0), accounted_ns: AtomicU64::new(0) } }; ENTRIES]);

fn entry(tid: u32) -> Option<&'static Entry> {
    TABLE.0.get(direct_mapped_slot(tid as usize, ENTRIES))
}

fn key_tid(key: u64) -> u32 {
    (key >> 32) as u32
}

// signal-safe: off (set-up, on the sampler's side)
/// Empties the table and backs its pages (before the handler is armed).
pub fn clear() {
    for e in &TABLE.0 {
        e.key.store(0, Ordering::Relaxed);
        e.cpu_ns.store(0, Ordering::Relaxed);
        e.accounted_ns.store(0, Ordering::Relaxed);
    }
}

/// Forgets every thread's last sample slot (the store was emptied): each
/// thread is signalled at its next turn instead of counted again. A thread
/// owning its entry keeps it and its accounting.
pub fn forget_slots() {
    for e in &TABLE.0 {
        let key = e.key.load(Ordering::Acquire);
        if key != 0 && key as u32 != NOT_JAVA && key as u32 != NO_SLOT {
            let _ = e.key.compare_exchange(key, ((key_tid(key) as u64) << 32) | NO_SLOT as u64, Ordering::AcqRel, Ordering::Relaxed);
        }
    }
}
// signal-safe: on

/// The sampler takes `tid`'s entry, accounted from `since_ns`, unless the
/// thread owns it already. Returns whether it owns it now.
pub fn claim(tid: u32, since_ns: u64) -> bool {
    let Some(e) = entry(tid) else { return false };
    let key = e.key.load(Ordering::Acquire);
    if key != 0 && key_tid(key) == tid {
        return true;
    }
    e.key.store(0, Ordering::Release);
    e.cpu_ns.store(0, Ordering::Relaxed);
    e.accounted_ns.store(since_ns, Ordering::Relaxed);
    e.key.store((tid as u64) << 32 | NO_SLOT as u64, Ordering::Release);
    true
}

/// Forgets an ended thread.
pub fn release(tid: u32) {
    if let Some(e) = entry(tid) {
        let key = e.key.load(Ordering::Acquire);
        if key != 0 && key_tid(key) == tid {
            let _ = e.key.compare_exchange(key, 0, Ordering::AcqRel, Ordering::Relaxed);
        }
    }
}

/// The wall time of `tid` since it was last accounted for, up to `now_ns`,
/// which becomes the new mark; `None` when the thread does not own its
/// entry.
pub fn take_weight(tid: u32, now_ns: u64) -> Option<u64> {
    let e = entry(tid)?;
    let key = e.key.load(Ordering::Acquire);
    if key == 0 || key_tid(key) != tid {
        return None;
    }
    let before = e.accounted_ns.swap(now_ns, Ordering::AcqRel);
    Some(now_ns.saturating_sub(before))
}

/// Notes the thread's latest sample (`slot`, or [`NOT_JAVA`]) and its CPU
/// time after it.
pub fn finish(tid: u32, slot: u32, cpu_ns: u64) {
    let Some(e) = entry(tid) else { return };
    let key = e.key.load(Ordering::Acquire);
    if key == 0 || key_tid(key) != tid {
        return;
    }
    e.cpu_ns.store(cpu_ns, Ordering::Relaxed);
    e.key.store((tid as u64) << 32 | slot as u64, Ordering::Release);
}

/// `tid`'s latest sample slot and the CPU time after it, if it owns its
/// entry.
pub fn last(tid: u32) -> Option<(u32, u64)> {
    let e = entry(tid)?;
    let key = e.key.load(Ordering::Acquire);
    let cpu = e.cpu_ns.load(Ordering::Relaxed);
    (key != 0 && key_tid(key) == tid && e.key.load(Ordering::Acquire) == key).then_some((key as u32, cpu))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn weights_cover_each_span_once() {
        clear();
        assert!(claim(4242, 1_000));
        assert_eq!(last(4242), Some((NO_SLOT, 0)));
        assert_eq!(take_weight(4242, 51_000), Some(50_000));
        // A second, merged signal at the same moment adds nothing.
        assert_eq!(take_weight(4242, 51_000), Some(0));
        finish(4242, 7, 123);
        assert_eq!(last(4242), Some((7, 123)));
        // Claiming again keeps what the thread has.
        assert!(claim(4242, 99_999));
        assert_eq!(take_weight(4242, 101_000), Some(50_000));
        release(4242);
        assert_eq!(last(4242), None);
        assert_eq!(take_weight(4242, 1), None);
    }
}

//! What each sample store held at the end of the last interval (`loop=`),
//! so that a profile built now shows only what was recorded since. Stores
//! only ever add to a stack's counters while profiling runs; an interval's
//! count for a stack is its count now minus its count at the interval's
//! start. Reading the store and moving the baseline to what was read is one
//! step ([`read`] with `close`), so every sample is in exactly one interval:
//! none is lost between two reads and none is counted twice. Never used by
//! the signal handler.

use std::collections::HashMap;
use std::sync::Mutex;

use crate::sampling::store::{SampleStore, StoredTrace};

/// Per store (by address): the store's generation when the baseline was
/// taken, and per slot the counters (samples, total) read then.
type Baselines = HashMap<usize, (u64, Vec<(u64, u64)>)>;

static BASELINES: Mutex<Option<Baselines>> = Mutex::new(None);

/// The store's stacks with their counts since the last interval ended (all
/// of them when no interval ended yet, or the store was emptied since).
/// With `close`, the interval ends here: the counts just read become the
/// next interval's baseline. Stacks with no sample in the interval are left
/// out.
pub fn read(store: &SampleStore, close: bool) -> Vec<StoredTrace> {
    let mut all = BASELINES.lock().unwrap_or_else(|e| e.into_inner());
    let key = store as *const SampleStore as usize;
    let generation = store.generation();
    let baselines = all.get_or_insert_with(HashMap::new);
    let stale = baselines.get(&key).is_none_or(|(g, _)| *g != generation);
    if stale {
        baselines.remove(&key);
    }
    let base: &[(u64, u64)] = baselines.get(&key).map(|(_, b)| b.as_slice()).unwrap_or(&[]);
    // Stacks only gain counts: most of a long recording's stacks gained
    // none this interval, and only the counters of those are read (not
    // their frames).
    let used = store.slots_used();
    let mut out = Vec::new();
    let mut next: Vec<(u64, u64)> = if close { vec![(0, 0); used as usize] } else { Vec::new() };
    for n in 0..used {
        let Some(counts) = store.counts(n) else { continue };
        let (s0, t0) = base.get(n as usize).copied().unwrap_or((0, 0));
        if counts.0 <= s0 {
            if let Some(cell) = next.get_mut(n as usize) {
                *cell = counts;
            }
            continue;
        }
        let Some(mut t) = store.trace(n) else { continue };
        if let Some(cell) = next.get_mut(n as usize) {
            *cell = (t.samples, t.total);
        }
        t.samples = t.samples.saturating_sub(s0);
        t.total = t.total.saturating_sub(t0);
        if t.samples > 0 {
            out.push(t);
        }
    }
    if close {
        baselines.insert(key, (generation, next));
    }
    out
}

/// Forgets every baseline: profiles show everything recorded (a new
/// recording, or the end of continuous profiling).
pub fn forget() {
    *BASELINES.lock().unwrap_or_else(|e| e.into_inner()) = None;
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sampling::store::RawFrame;

    fn stack(m: usize) -> [RawFrame; 2] {
        [RawFrame { bci: 1, method: m }, RawFrame { bci: 2, method: 99 }]
    }

    fn counts(traces: &[StoredTrace]) -> Vec<(usize, u64, u64)> {
        let mut v: Vec<_> = traces.iter().map(|t| (t.frames[0].method, t.samples, t.total)).collect();
        v.sort();
        v
    }

    #[test]
    fn intervals_hold_each_sample_once() {
        let store = SampleStore::new(64, 256).unwrap();
        store.record(1, 0, &stack(1), 10);
        store.record(1, 0, &stack(1), 10);
        store.record(1, 0, &stack(2), 5);
        // A dump in the interval sees it so far and moves nothing.
        assert_eq!(counts(&read(&store, false)), vec![(1, 2, 20), (2, 1, 5)]);
        assert_eq!(counts(&read(&store, true)), vec![(1, 2, 20), (2, 1, 5)]);
        store.record(1, 0, &stack(2), 5);
        store.record(1, 0, &stack(3), 7);
        assert_eq!(counts(&read(&store, true)), vec![(2, 1, 5), (3, 1, 7)]);
        assert!(read(&store, true).is_empty());
        // An emptied store starts over.
        store.reset();
        store.record(1, 0, &stack(1), 10);
        assert_eq!(counts(&read(&store, true)), vec![(1, 1, 10)]);
    }

    #[test]
    fn concurrent_writers_lose_and_double_nothing() {
        let store: &'static SampleStore = Box::leak(Box::new(SampleStore::new(1024, 8192).unwrap()));
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let writers: Vec<_> = (0..2)
            .map(|w| {
                let stop = stop.clone();
                std::thread::spawn(move || {
                    let mut n = 0u64;
                    while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                        store.record(1, 0, &stack(w * 10 + (n % 7) as usize), 3);
                        n += 1;
                    }
                    n
                })
            })
            .collect();
        let mut seen = 0;
        for _ in 0..200 {
            seen += read(store, true).iter().map(|t| t.samples).sum::<u64>();
        }
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        let written: u64 = writers.into_iter().map(|h| h.join().unwrap()).sum();
        seen += read(store, true).iter().map(|t| t.samples).sum::<u64>();
        assert_eq!(seen, written);
    }
}

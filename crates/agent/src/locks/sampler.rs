//! The lock sampler: turns a measured wait (a contended monitor entry, a park
//! on a `java.util.concurrent` lock) into a sample, or not.
//!
//! Waits are sampled by duration as allocations are by size: with mean
//! interval `I` (option `lock=DURATION`), a wait of `d` ns is recorded with
//! probability `p = 1 - e^(-d/I)` and weighs `d / p`, so the expected
//! estimate of every site equals its true waiting time, for short and long
//! waits alike, while a recorded event costs a stack walk only once per `I`
//! of waiting on average. `lock=0` records every contended acquisition with
//! its exact duration. A recorded sample's stack is the waiting thread's
//! Java stack (the own walk from the thread's last Java frame, else JVMTI
//! `GetStackTrace`) under a leaf frame naming the lock's class.

use std::cell::Cell;
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Mutex, OnceLock};

use jvmti_sys::{jclass, jlong, jvmtiFrameInfo};

use crate::heap::allocstack;
use crate::jvmti::{Jni, Jvmti};
use crate::locks::owners::LockOwner;
use crate::sampling::store::{RawFrame, SampleStore};

/// `bci` of the leaf frame naming the class of a monitor waited for;
/// `method` holds the class id.
pub const MARK_LOCK_CLASS: i32 = 5;
/// The same for a `java.util.concurrent` lock a thread parked on.
pub const MARK_PARK_CLASS: i32 = 6;

/// The label naming the thread that held a lock when a recorded wait for
/// it began.
pub const OWNER_LABEL: &str = "lock_owner";

const STORE_SLOTS: usize = 1 << 16;
const STORE_FRAMES: usize = 1 << 21;

/// What kind of lock a wait was on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// A Java monitor (`synchronized`).
    Monitor = 0,
    /// A `java.util.concurrent` lock (a park with an `AbstractOwnableSynchronizer` blocker).
    Park = 1,
}

/// Counts for the summary line.
#[derive(Clone, Copy, Debug, Default)]
pub struct LockStats {
    /// Waits seen, and recorded, per [`Kind`].
    pub seen: [u64; 2],
    pub recorded: [u64; 2],
    /// Nanoseconds waited, per kind, over every wait seen (exact).
    pub waited_ns: [u64; 2],
    /// Mean CPU cost of recording one sample (stack, class), in ns.
    pub record_ns: u64,
    /// Mean time a park spent before waiting, reading the lock it waits
    /// for and that lock's owner (every park while profiling), in ns.
    pub park_lookup_ns: u64,
}

#[derive(Default)]
pub struct LockSampler {
    store: OnceLock<&'static SampleStore>,
    running: AtomicBool,
    interval_ns: AtomicU64,
    per_thread: AtomicBool,
    depth: AtomicUsize,
    classes: Mutex<(Vec<String>, HashMap<String, u32>)>,
    seen: [AtomicU64; 2],
    recorded: [AtomicU64; 2],
    waited_ns: [AtomicU64; 2],
    record_ns: AtomicU64,
    park_lookups: AtomicU64,
    park_lookup_ns: AtomicU64,
}

thread_local! {
    /// xorshift64* state for the sampling decision.
    static RANDOM: Cell<u64> = const { Cell::new(0) };
}

fn random_unit() -> f64 {
    let x = RANDOM
        .try_with(|r| {
            let mut x = r.get();
            if x == 0 {
                x = (crate::sampling::threads::current_tid() as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ crate::sampling::cputime::monotonic_ns() | 1;
            }
            x ^= x >> 12;
            x ^= x << 25;
            x ^= x >> 27;
            r.set(x);
            x.wrapping_mul(0x2545_F491_4F6C_DD1D)
        })
        .unwrap_or(0x8000_0000_0000_0000);
    (x >> 11) as f64 / (1u64 << 53) as f64
}

/// The weight of a recorded wait of `d` ns at mean interval `i`, or `None`
/// when it is not recorded (`u` is a uniform draw in [0, 1)).
pub fn decide(d: u64, i: u64, u: f64) -> Option<u64> {
    if i == 0 {
        return Some(d);
    }
    if d == 0 {
        return None;
    }
    let p = -(-(d as f64) / i as f64).exp_m1();
    (u < p).then(|| (d as f64 / p).round() as u64)
}

impl LockSampler {
    pub fn store(&self) -> Result<&'static SampleStore, String> {
        SampleStore::leaked(&self.store, STORE_SLOTS, STORE_FRAMES, "the lock sample store")
    }

    pub fn stored(&self) -> Option<&'static SampleStore> {
        self.store.get().copied()
    }

    pub fn interval_ns(&self) -> u64 {
        self.interval_ns.load(Ordering::Relaxed)
    }

    pub fn is_running(&self) -> bool {
        self.running.load(Ordering::Acquire)
    }

    pub fn start(&self, interval_ns: u64, per_thread: bool, depth: usize) -> Result<(), String> {
        let store = self.store()?;
        store.reset();
        self.interval_ns.store(interval_ns, Ordering::Relaxed);
        self.per_thread.store(per_thread, Ordering::Relaxed);
        self.depth.store(depth.max(1), Ordering::Relaxed);
        for a in self.seen.iter().chain(&self.recorded).chain(&self.waited_ns).chain([&self.record_ns, &self.park_lookups, &self.park_lookup_ns]) {
            a.store(0, Ordering::Relaxed);
        }
        self.running.store(true, Ordering::Release);
        Ok(())
    }

    pub fn stop(&self) {
        self.running.store(false, Ordering::Release);
    }

    /// Whether a wait of `d` ns is recorded, and with what weight. Counts it.
    pub fn should_record(&self, kind: Kind, d: u64) -> Option<u64> {
        if !self.is_running() {
            return None;
        }
        let k = kind as usize;
        if let (Some(seen), Some(waited)) = (self.seen.get(k), self.waited_ns.get(k)) {
            seen.fetch_add(1, Ordering::Relaxed);
            waited.fetch_add(d, Ordering::Relaxed);
        }
        decide(d, self.interval_ns(), random_unit())
    }

    /// The calling thread's Java stack into `frames[1..]` (slot 0 is left
    /// for the lock's class); returns how many frames. The own walk from
    /// the thread's last Java frame, else JVMTI `GetStackTrace`.
    pub fn take_stack(&self, jvmti: Jvmti, jni: Jni, frames: &mut Vec<RawFrame>) -> usize {
        let depth = self.depth.load(Ordering::Relaxed);
        if frames.len() != depth + 1 {
            frames.clear();
            frames.resize(depth + 1, RawFrame::default());
        }
        match frames.get_mut(1..).and_then(|f| allocstack::walk(jni.0 as usize, f)) {
            Some(n) => n,
            None => {
                // SAFETY: jvmtiFrameInfo is plain data; all-zero is valid.
                let mut info = vec![unsafe { std::mem::zeroed::<jvmtiFrameInfo>() }; depth];
                let n = jvmti.own_stack_trace(&mut info).unwrap_or(0);
                let bci = |l: jlong| if l < 0 { jvmti_sys::asgct::BCI_NATIVE_FRAME } else { l.min(0xffff) as i32 };
                for (slot, f) in frames.iter_mut().skip(1).zip(info.iter().take(n)) {
                    *slot = RawFrame { bci: bci(f.location), method: f.method as usize };
                }
                n.min(depth)
            }
        }
    }

    /// Records a wait of `weight` ns on a lock of class `class`, with the
    /// calling thread's stack.
    ///
    /// # Safety
    /// `class` must be a live local or global reference to a class; `jni` the
    /// calling thread's environment, in a JVMTI callback or a native method.
    pub unsafe fn record(&self, jvmti: Jvmti, jni: Jni, kind: Kind, class: jclass, weight: u64, owner: Option<&LockOwner>) {
        let t0 = crate::sampling::cputime::thread_cpu_ns();
        let mut frames = Vec::new();
        let n = self.take_stack(jvmti, jni, &mut frames);
        // SAFETY: as this function's contract.
        unsafe { self.record_stack(jvmti, kind, class, weight, &mut frames, n, owner) };
        self.record_ns.fetch_add(crate::sampling::cputime::thread_cpu_ns().saturating_sub(t0), Ordering::Relaxed);
    }

    /// Records a wait with a stack taken before (`frames[1..=n]`, see
    /// [`LockSampler::take_stack`]). The lock's owner when the wait began,
    /// where known, is the label [`OWNER_LABEL`] of the sample, added to the
    /// thread's own context labels, and (with its kernel id) the event's
    /// other thread in the JFR event log.
    ///
    /// # Safety
    /// `class` must be a live local or global reference to a class.
    #[allow(clippy::too_many_arguments)]
    pub unsafe fn record_stack(&self, jvmti: Jvmti, kind: Kind, class: jclass, weight: u64, frames: &mut [RawFrame], n: usize, owner: Option<&LockOwner>) {
        let Some(store) = self.stored() else { return };
        // SAFETY: `class` is live (this function's contract).
        let class_id = unsafe { self.class_id(jvmti, class) };
        if let Some(first) = frames.first_mut() {
            let bci = if kind == Kind::Park { MARK_PARK_CLASS } else { MARK_LOCK_CLASS };
            *first = RawFrame { bci, method: class_id as usize };
        }
        let current = crate::sampling::threads::current_tid();
        let tid = if self.per_thread.load(Ordering::Relaxed) { current } else { 0 };
        let mut labels = crate::sampling::label_slots::current(current);
        if let Some(owner) = owner.filter(|o| !o.name.is_empty()) {
            labels = crate::labels::intern(labels, &[(OWNER_LABEL.to_string(), owner.name.clone())]).unwrap_or(labels);
        }
        store.record_naming(tid, labels, frames.get(..n + 1).unwrap_or_default(), weight, owner.map_or(0, |o| o.tid));
        if let Some(r) = self.recorded.get(kind as usize) {
            r.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Adds the time one park took to find its lock and owner. Wall time:
    /// one over 50 µs was preempted (or met a safepoint) and is left out,
    /// or a few such would make the mean of a short run.
    pub fn add_park_lookup_ns(&self, ns: u64) {
        if ns > 50_000 {
            return;
        }
        self.park_lookups.fetch_add(1, Ordering::Relaxed);
        self.park_lookup_ns.fetch_add(ns, Ordering::Relaxed);
    }

    /// Adds the CPU time of taking a stack (outside `record`).
    pub fn add_record_ns(&self, ns: u64) {
        self.record_ns.fetch_add(ns, Ordering::Relaxed);
    }

    /// # Safety
    /// `class` must be a live reference to a class (or null: unknown).
    unsafe fn class_id(&self, jvmti: Jvmti, class: jclass) -> u32 {
        let name = if class.is_null() {
            "[unknown lock]".to_string()
        } else {
            // SAFETY: `class` is live (this function's contract).
            unsafe { jvmti.class_signature(class) }.map_or_else(|_| "[unknown lock]".to_string(), |s| crate::symbols::class_name_from_signature(&s))
        };
        let mut c = self.classes.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(&id) = c.1.get(&name) {
            return id;
        }
        let id = c.0.len() as u32;
        c.0.push(name.clone());
        c.1.insert(name, id);
        id
    }

    pub fn class_name(&self, id: usize) -> String {
        self.classes.lock().unwrap_or_else(|e| e.into_inner()).0.get(id).cloned().unwrap_or_else(|| "[unknown lock]".into())
    }

    pub fn stats(&self) -> LockStats {
        let get = |a: &[AtomicU64; 2]| [a[0].load(Ordering::Relaxed), a[1].load(Ordering::Relaxed)];
        let recorded = get(&self.recorded);
        LockStats {
            seen: get(&self.seen),
            recorded,
            waited_ns: get(&self.waited_ns),
            record_ns: self.record_ns.load(Ordering::Relaxed) / (recorded[0] + recorded[1]).max(1),
            park_lookup_ns: self.park_lookup_ns.load(Ordering::Relaxed) / self.park_lookups.load(Ordering::Relaxed).max(1),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The expected estimate of a wait equals its duration, short or long.
    #[test]
    fn duration_weights_are_unbiased() {
        let i = 1_000_000;
        for d in [1_000u64, 50_000, 1_000_000, 20_000_000] {
            let n = 200_000;
            let sum: u64 = (0..n).filter_map(|k| decide(d, i, (k as f64 + 0.5) / n as f64)).sum();
            let mean = sum as f64 / n as f64;
            assert!((mean / d as f64 - 1.0).abs() < 0.01, "d={d}: mean estimate {mean}");
        }
        assert_eq!(decide(1234, 0, 0.99), Some(1234));
        assert_eq!(decide(0, 1000, 0.0), None);
    }
}

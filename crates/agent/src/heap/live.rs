//! Live objects: the sampled allocations (see `alloc.rs`) that are still
//! reachable, tracked until they die, within a memory budget.
//!
//! This module owns the tracked set: one entry per sampled object (a JNI
//! weak global reference, its allocation site, weight, birth time and the GC
//! count at birth), the allocation sites (stack + class, reference-counted
//! and freed with their last object), each site's growth series, the
//! statistical thinning that keeps the set within its budget, and the
//! sweeper thread that drops dead entries after each GC.
//!
//! # Weak references, not tags + ObjectFree
//!
//! Both were measured with `bench/live/track_cost.sh` (a bare C agent doing
//! only the tracking, `LeakChurn 128`, 16 KiB interval, ~88k samples, G1):
//!
//! | JDK | weak ref in callback | SetTag in callback | ObjectFree delivered | sweep per entry | sweep done after GC |
//! |---|---|---|---|---|---|
//! | 11 | 105 ns | 127 ns | all 80k inside the GC pauses | 39.8 ns | 1.1 ms |
//! | 17 | 98 ns | 148 ns | all after the pause, mean 2.7 ms later | 34.2 ns | 0.7 ms |
//! | 21 | 98 ns | 149 ns | after, 2.3 ms later | 33.6 ns | 0.6 ms |
//! | 25 | 98 ns | 149 ns | after, 3.2 ms later | 33.9 ns | 1.3 ms |
//!
//! Both cost little next to the callback's 1-3 µs. Weak references win on
//! what matters for leak detection. (1) An exact cut per GC: a sweep sees
//! precisely the objects the last GC freed, so each growth-series point is
//! "live after GC n"; with tags, JDK 17+ posts ObjectFree milliseconds after
//! the pause, from another thread, interleaved with the next allocations and
//! possibly the next GC. (2) Nothing inside the GC pause: on JDK 11 every
//! ObjectFree runs in the pause (80k events in 13 pauses above), where only
//! raw monitors and memory are allowed, so deaths would need a lock-free
//! queue and still lengthen pauses. (3) No clash with the class tags the
//! allocation profiler sets in the same JVMTI environment. The price is that
//! a sweep visits every tracked entry (34-40 ns each: 14 ms for the ~400k
//! entries of a full 16 MiB budget), where ObjectFree costs per death; so
//! sweeps are spaced at least [`MIN_SWEEP_GAP`] and 20 times their own
//! duration apart, which bounds the sweeper to about 5% of one core
//! however often the JVM collects.
//!
//! # Thinning
//!
//! When the entries and sites would outgrow the budget, the effective
//! sampling interval doubles: every tracked entry is kept with probability
//! ½ and the survivors' weights double, and new samples are kept with
//! probability 2^-level and weighted by 2^level. Every estimate stays
//! unbiased, and long-lived objects keep their share, unlike a fixed cap
//! that drops whatever comes after it is full.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};
use std::thread::Thread;
use std::time::{Duration, Instant};

use jvmti_sys::*;
use oxprof_profile::leak::{push_point, Point, OLD_GCS};

use crate::jvmti::{self, Jni};
use crate::log;
use crate::sampling::store::{JavaFrameType, RawFrame};

/// Sweeps are at least this far apart, however often the JVM collects.
pub const MIN_SWEEP_GAP: Duration = Duration::from_millis(100);
/// Entries a sweep checks per hold of the lock.
const SWEEP_CHUNK: usize = 4096;

/// One tracked object.
struct Entry {
    /// JNI weak global reference to the object.
    weak: usize,
    site: u32,
    /// GCs finished before the object was allocated.
    gc: u32,
    size: u64,
    /// Bytes this sample stands for (unbiased, re-weighted by thinning).
    weight: f64,
    /// Allocation time, ns since tracking started.
    born_ns: u64,
}

/// Bytes of one entry, for the budget.
const ENTRY_BYTES: u64 = std::mem::size_of::<Entry>() as u64;
/// Bytes of one site besides its frames and growth series: map slot, Arc
/// header, slot. The series is counted as it grows (at most
/// `leak::MAX_SERIES_POINTS` points).
const SITE_BYTES: u64 = 96;
const POINT_BYTES: u64 = std::mem::size_of::<Point>() as u64;

struct SiteSlot {
    frames: Arc<[RawFrame]>,
    refs: u32,
    series: Vec<Point>,
}

fn site_bytes(frames: usize) -> u64 {
    SITE_BYTES + (frames * std::mem::size_of::<RawFrame>()) as u64
}

#[derive(Default)]
struct State {
    entries: Vec<Entry>,
    sites: Vec<Option<SiteSlot>>,
    free: Vec<u32>,
    ids: HashMap<Arc<[RawFrame]>, u32>,
    site_bytes: u64,
    budget: u64,
    interval: u64,
    thinnings: u32,
    started: Option<Instant>,
    last_sweep: Option<Instant>,
    swept_gcs: u64,
    gcs_at_start: u64,
    sweeps: u64,
    sweep_ns: u64,
    swept_entries: u64,
    last_sweep_ns: u64,
    /// Scratch for a site's key (its frames without frame types).
    key: Vec<RawFrame>,
}

/// One live site, as raw frames, for the report.
pub struct RawSite {
    pub frames: Arc<[RawFrame]>,
    pub live_bytes: f64,
    pub live_objects: f64,
    pub tracked: u64,
    pub mean_age_secs: f64,
    pub mean_gcs_survived: f64,
    pub old_share: f64,
    pub series: Vec<Point>,
    /// A local reference to one tracked instance, when asked for (null if
    /// it died meanwhile).
    pub instance: jobject,
}

/// What the tracker knows, for a report.
pub struct LiveSnapshot {
    pub sites: Vec<RawSite>,
    pub duration_secs: f64,
    pub gcs: u64,
    pub forced_gc: bool,
    pub interval: u64,
    pub effective_interval: u64,
    pub thinnings: u32,
    pub budget: u64,
    pub used: u64,
    pub tracked: u64,
    pub sweep_ns_per_entry: f64,
    /// Tracked objects allocated since the last GC, which no collector has
    /// judged yet, left out of the sites (their estimated bytes, and count).
    pub unjudged_bytes: f64,
    pub unjudged_tracked: u64,
}

/// Counters for status lines.
#[derive(Clone, Copy, Debug, Default)]
pub struct LiveStats {
    pub tracked: u64,
    pub sites: u64,
    pub used: u64,
    pub budget: u64,
    pub thinnings: u32,
    pub gcs: u64,
}

#[derive(Default)]
pub struct LiveTracker {
    enabled: AtomicBool,
    /// Thinning level: new samples are kept with probability 2^-level.
    level: AtomicU32,
    /// GarbageCollectionFinish events seen.
    gcs: AtomicU64,
    state: Mutex<State>,
    sweeper: OnceLock<Thread>,
    /// The JVM is exiting: the sweeper detaches and ends ([`LiveTracker::shut_down`]).
    exiting: AtomicBool,
    /// The sweeper has detached from the JVM and ended.
    sweeper_done: AtomicBool,
}

fn lock(m: &Mutex<State>) -> MutexGuard<'_, State> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// A uniform 64-bit random number (splitmix64 over a shared counter):
/// lock-free, good enough for coin flips.
fn random() -> u64 {
    static COUNTER: AtomicU64 = AtomicU64::new(0x2545_f491_4f6c_dd1d);
    let mut z = COUNTER.fetch_add(0x9e37_79b9_7f4a_7c15, Ordering::Relaxed);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// True with probability 2^-level.
fn keep(level: u32) -> bool {
    level == 0 || (level < 64 && random() & ((1u64 << level) - 1) == 0)
}

impl State {
    /// Whether the entry's object went through no GC yet, when the JVM has
    /// reported `gcs` GCs: such an object may well be garbage (most
    /// short-lived objects are), so it counts as live only once a collection
    /// has kept it. Without any GC reported since tracking started (Epsilon,
    /// a collector without GC events) every tracked object counts.
    fn unjudged(&self, e: &Entry, gcs: u64) -> bool {
        gcs > self.gcs_at_start && (gcs as u32).wrapping_sub(e.gc) == 0
    }

    fn over_budget(&self) -> bool {
        self.entries.len() as u64 * ENTRY_BYTES + self.site_bytes > self.budget
    }

    fn used(&self) -> u64 {
        self.entries.capacity() as u64 * ENTRY_BYTES + self.site_bytes + self.free.capacity() as u64 * 4
    }

    /// The site of `frames`. A site is where objects were allocated, so
    /// frames that differ only in how they ran (interpreted, then compiled)
    /// are one site: frame types are left out of its key.
    fn intern(&mut self, frames: &[RawFrame]) -> u32 {
        let mut key = std::mem::take(&mut self.key);
        key.clear();
        key.extend(frames.iter().map(|f| {
            let mut f = *f;
            f.set_type(JavaFrameType::Unknown);
            f
        }));
        let id = self.intern_key(&key);
        self.key = key;
        id
    }

    fn intern_key(&mut self, frames: &[RawFrame]) -> u32 {
        if let Some(&id) = self.ids.get(frames) {
            if let Some(Some(s)) = self.sites.get_mut(id as usize) {
                s.refs += 1;
            }
            return id;
        }
        let frames: Arc<[RawFrame]> = frames.into();
        self.site_bytes += site_bytes(frames.len());
        let slot = SiteSlot { frames: frames.clone(), refs: 1, series: Vec::new() };
        let id = match self.free.pop() {
            Some(id) => {
                self.sites[id as usize] = Some(slot);
                id
            }
            None => {
                self.sites.push(Some(slot));
                (self.sites.len() - 1) as u32
            }
        };
        self.ids.insert(frames, id);
        id
    }

    fn release(&mut self, site: u32) {
        let Some(slot_ref) = self.sites.get_mut(site as usize) else { return };
        let Some(slot) = slot_ref.as_mut() else { return };
        slot.refs = slot.refs.saturating_sub(1);
        if slot.refs == 0 {
            if let Some(s) = slot_ref.take() {
                let series = s.series.capacity() as u64 * POINT_BYTES;
                self.site_bytes = self.site_bytes.saturating_sub(site_bytes(s.frames.len()) + series);
                self.ids.remove(&s.frames);
            }
            self.free.push(site);
        }
    }

    /// Deletes all entries (a new recording starts).
    fn clear(&mut self, jni: Jni) {
        for e in self.entries.drain(..) {
            // SAFETY: an entry's `weak` is the weak global reference track
            // made, deleted only when its entry goes (as here).
            unsafe { jni.delete_weak_global(e.weak as jweak) };
        }
        self.entries.shrink_to_fit();
        self.sites.clear();
        self.free.clear();
        self.ids.clear();
        self.site_bytes = 0;
    }
}

impl LiveTracker {
    pub fn enabled(&self) -> bool {
        self.enabled.load(Ordering::Acquire)
    }

    /// Starts tracking (forgetting what an earlier recording tracked) and
    /// the sweeper thread, once.
    pub fn start(&'static self, vm: *mut JavaVM, jni: Jni, interval: u64, budget: u64) -> Result<(), String> {
        {
            let mut st = lock(&self.state);
            st.clear(jni);
            let gcs = self.gcs.load(Ordering::Acquire);
            *st = State { budget, interval, started: Some(Instant::now()), swept_gcs: gcs, gcs_at_start: gcs, ..State::default() };
        }
        self.level.store(0, Ordering::Release);
        if self.sweeper.get().is_none() {
            let vm = vm as usize;
            let handle = std::thread::Builder::new()
                .name("oxprof-live".into())
                .spawn(move || self.sweeper_loop(vm as *mut JavaVM))
                .map_err(|e| format!("cannot start the live-object sweeper thread: {e}"))?;
            let _ = self.sweeper.set(handle.thread().clone());
        }
        self.enabled.store(true, Ordering::Release);
        Ok(())
    }

    /// At JVM exit (VMDeath, after the last report): ends the sweeper
    /// thread, detached from the JVM, and waits up to a second for it. A
    /// thread attached to the JVM and idle in native code makes HotSpot's
    /// exit wait for it (`VM_Exit` gives such threads 300 ms to stop),
    /// which every short-lived JVM paid.
    pub fn shut_down(&self) {
        let Some(t) = self.sweeper.get() else { return };
        self.exiting.store(true, Ordering::SeqCst);
        t.unpark();
        let until = Instant::now() + Duration::from_secs(1);
        while !self.sweeper_done.load(Ordering::SeqCst) && Instant::now() < until {
            std::thread::sleep(Duration::from_millis(1));
        }
    }

    /// Stops tracking new samples; what is tracked stays for the report.
    pub fn stop(&self) {
        self.enabled.store(false, Ordering::Release);
    }

    /// GarbageCollectionFinish: runs inside the GC pause, where no JNI and
    /// almost no JVMTI is allowed. It only counts and wakes the sweeper
    /// (an atomic store and a futex wake: no allocation, no lock).
    pub fn on_gc_finish(&self) {
        self.gcs.fetch_add(1, Ordering::AcqRel);
        if self.enabled() {
            if let Some(t) = self.sweeper.get() {
                t.unpark();
            }
        }
    }

    /// Tracks one sampled object (from the SampledObjectAlloc callback).
    /// `weight` is the unbiased bytes the sample stands for.
    ///
    /// # Safety
    /// `object` must be null or a live JNI reference.
    pub unsafe fn track(&self, jni: Jni, object: jobject, frames: &[RawFrame], size: u64, weight: f64) {
        if !self.enabled() || object.is_null() {
            return;
        }
        let level = self.level.load(Ordering::Acquire);
        if !keep(level) {
            return;
        }
        let mut st = lock(&self.state);
        // Thinned meanwhile: flip for the levels added since.
        let now_level = self.level.load(Ordering::Acquire);
        if now_level > level && !keep(now_level - level) {
            return;
        }
        // SAFETY: `object` is live (this function's contract).
        let weak = unsafe { jni.new_weak_global(object) };
        if weak.is_null() {
            return;
        }
        let born_ns = st.started.map(|s| s.elapsed().as_nanos() as u64).unwrap_or(0);
        let gc = self.gcs.load(Ordering::Acquire) as u32;
        let site = st.intern(frames);
        let max_entries = (st.budget.saturating_sub(st.site_bytes) / ENTRY_BYTES) as usize;
        if st.entries.len() == st.entries.capacity() {
            let more = st.entries.len().max(1024).min(max_entries.saturating_sub(st.entries.len()).max(1));
            st.entries.reserve_exact(more);
        }
        st.entries.push(Entry { weak: weak as usize, site, gc, size, weight: weight * (1u64 << now_level.min(63)) as f64, born_ns });
        if st.over_budget() {
            self.thin(&mut st, jni);
        }
    }

    /// Halves the tracked set until it fits the budget (see the module doc).
    fn thin(&self, st: &mut State, jni: Jni) {
        while st.over_budget() && !st.entries.is_empty() {
            let mut entries = std::mem::take(&mut st.entries);
            entries.retain_mut(|e| {
                if random() & 1 == 0 {
                    e.weight *= 2.0;
                    true
                } else {
                    // SAFETY: as in State::clear: the entry goes.
                    unsafe { jni.delete_weak_global(e.weak as jweak) };
                    st.release(e.site);
                    false
                }
            });
            entries.shrink_to_fit();
            st.entries = entries;
            st.thinnings += 1;
            self.level.fetch_add(1, Ordering::AcqRel);
        }
        log::debug(&format!("live: thinned to {} tracked samples (level {})", st.entries.len(), self.level.load(Ordering::Relaxed)));
    }

    /// Drops entries whose objects died, then records each live site's
    /// bytes in its growth series. Works in chunks of [`SWEEP_CHUNK`]
    /// entries, releasing the lock between them, so allocating threads
    /// whose samples arrive meanwhile wait at most one chunk (~0.15 ms).
    /// Entries added or thinned between chunks are fine: every index left
    /// holds a valid entry, and one missed now is swept next time.
    pub fn sweep(&self, jni: Jni) {
        let t0 = Instant::now();
        // The growth point is "live after the last GC": objects allocated
        // since (during the sweep's chunks too) are not counted in it.
        let gcs = self.gcs.load(Ordering::Acquire);
        let mut checked = 0u64;
        let mut i = 0usize;
        loop {
            let mut st = lock(&self.state);
            let mut limit = (i + SWEEP_CHUNK).min(st.entries.len());
            while i < limit {
                let (weak, site) = (st.entries[i].weak, st.entries[i].site);
                checked += 1;
                // SAFETY: `weak` is the entry's weak global reference, alive
                // while the entry is (see State::clear), and the lock is held.
                if unsafe { jni.is_same(weak as jobject, std::ptr::null_mut()) } {
                    // SAFETY: as above; the entry goes.
                    unsafe { jni.delete_weak_global(weak as jweak) };
                    st.release(site);
                    st.entries.swap_remove(i);
                    limit = limit.min(st.entries.len());
                } else {
                    i += 1;
                }
            }
            if i < st.entries.len() {
                continue;
            }
            let mut bytes: HashMap<u32, f64> = HashMap::new();
            for e in st.entries.iter().filter(|e| !st.unjudged(e, gcs)) {
                *bytes.entry(e.site).or_default() += e.weight;
            }
            let secs = st.started.map(|s| s.elapsed().as_secs_f64()).unwrap_or(0.0);
            let mut grown = 0u64;
            for (site, b) in bytes {
                if let Some(Some(slot)) = st.sites.get_mut(site as usize) {
                    let before = slot.series.capacity();
                    push_point(&mut slot.series, Point { secs, bytes: b });
                    grown += (slot.series.capacity().saturating_sub(before)) as u64 * POINT_BYTES;
                }
            }
            st.site_bytes += grown;
            if st.over_budget() {
                self.thin(&mut st, jni);
            }
            st.sweeps += 1;
            st.last_sweep_ns = t0.elapsed().as_nanos() as u64;
            st.sweep_ns += st.last_sweep_ns;
            st.swept_entries += checked;
            st.last_sweep = Some(Instant::now());
            st.swept_gcs = self.gcs.load(Ordering::Acquire);
            return;
        }
    }

    fn sweeper_loop(&self, vm: *mut JavaVM) {
        // SAFETY: `vm` is the agent's JavaVM (`Agent::vm`, through start).
        let Some(jni) = (unsafe { jvmti::attach_daemon(vm, c"oxprof-live") }) else {
            log::warn("live: the sweeper thread cannot attach to the JVM; dead objects are only dropped at reports");
            return;
        };
        loop {
            std::thread::park_timeout(Duration::from_secs(1));
            if self.exiting.load(Ordering::SeqCst) {
                // SAFETY: `vm` is the agent's JavaVM; this thread attached
                // itself above and holds no JNI reference any more.
                unsafe { jvmti::detach(vm) };
                self.sweeper_done.store(true, Ordering::SeqCst);
                return;
            }
            if !self.enabled() {
                continue;
            }
            let (swept_gcs, last, took) = {
                let st = lock(&self.state);
                (st.swept_gcs, st.last_sweep, st.last_sweep_ns)
            };
            if self.gcs.load(Ordering::Acquire) == swept_gcs {
                continue;
            }
            let gap = MIN_SWEEP_GAP.max(Duration::from_nanos(took.saturating_mul(20)));
            if let Some(wait) = last.and_then(|l| gap.checked_sub(l.elapsed())) {
                std::thread::sleep(wait);
            }
            if jni.push_frame(16) {
                self.sweep(jni);
                jni.pop_frame();
            }
        }
    }

    /// Adds the methods of the live sites' stacks to `out`.
    pub fn methods(&self, out: &mut std::collections::HashSet<usize>) {
        let st = lock(&self.state);
        out.extend(st.ids.keys().flat_map(|frames| frames.iter().map(|f| f.method)));
    }

    pub fn stats(&self) -> LiveStats {
        let st = lock(&self.state);
        LiveStats {
            tracked: st.entries.len() as u64,
            sites: st.ids.len() as u64,
            used: st.used(),
            budget: st.budget,
            thinnings: st.thinnings,
            gcs: self.gcs.load(Ordering::Acquire).saturating_sub(st.gcs_at_start),
        }
    }

    /// Forces a full GC when asked (so garbage is not reported as live),
    /// sweeps, and aggregates the tracked objects per site. Each site
    /// carries a local reference to one instance, for paths to GC roots.
    pub fn snapshot(&self, jvmti: crate::jvmti::Jvmti, jni: Jni, force_gc: bool, with_instances: bool) -> LiveSnapshot {
        let forced_gc = force_gc && {
            match jvmti.force_gc() {
                Ok(()) => true,
                Err(e) => {
                    log::warn(&format!("live: cannot force a GC before the report ({e}); live may include garbage"));
                    false
                }
            }
        };
        self.sweep(jni);
        let st = lock(&self.state);
        let now_ns = st.started.map(|s| s.elapsed().as_nanos() as u64).unwrap_or(0);
        let gcs_now = self.gcs.load(Ordering::Acquire);
        #[derive(Default)]
        struct Acc {
            bytes: f64,
            objects: f64,
            n: u64,
            age_ns: f64,
            gcs: f64,
            old: u64,
            weak: usize,
        }
        let mut acc: HashMap<u32, Acc> = HashMap::new();
        let (mut unjudged_bytes, mut unjudged_tracked) = (0.0, 0u64);
        for e in &st.entries {
            if st.unjudged(e, gcs_now) {
                unjudged_bytes += e.weight;
                unjudged_tracked += 1;
                continue;
            }
            let a = acc.entry(e.site).or_default();
            a.bytes += e.weight;
            a.objects += if e.size > 0 { e.weight / e.size as f64 } else { 0.0 };
            a.n += 1;
            a.age_ns += now_ns.saturating_sub(e.born_ns) as f64;
            let survived = (gcs_now as u32).wrapping_sub(e.gc) as f64;
            a.gcs += survived;
            if survived >= OLD_GCS {
                a.old += 1;
            }
            a.weak = e.weak;
        }
        let mut sites = Vec::with_capacity(acc.len());
        for (site, a) in acc {
            let Some(Some(slot)) = st.sites.get(site as usize) else { continue };
            let n = a.n.max(1) as f64;
            sites.push(RawSite {
                frames: slot.frames.clone(),
                live_bytes: a.bytes,
                live_objects: a.objects,
                tracked: a.n,
                mean_age_secs: a.age_ns / n / 1e9,
                mean_gcs_survived: a.gcs / n,
                old_share: a.old as f64 / n,
                series: slot.series.clone(),
                // SAFETY: `a.weak` is an entry's weak global reference (see
                // State::clear), not deleted while `st` is locked.
                instance: if with_instances { unsafe { jni.new_local(a.weak as jobject) } } else { std::ptr::null_mut() },
            });
        }
        let level = self.level.load(Ordering::Acquire).min(40);
        LiveSnapshot {
            sites,
            duration_secs: now_ns as f64 / 1e9,
            gcs: gcs_now.saturating_sub(st.gcs_at_start),
            forced_gc,
            interval: st.interval,
            effective_interval: st.interval.saturating_mul(1 << level),
            thinnings: st.thinnings,
            budget: st.budget,
            used: st.used(),
            tracked: st.entries.len() as u64 - unjudged_tracked,
            sweep_ns_per_entry: st.sweep_ns as f64 / st.swept_entries.max(1) as f64,
            unjudged_bytes,
            unjudged_tracked,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn coin_flips_have_the_right_odds() {
        let n = 200_000;
        for level in [1u32, 2, 3] {
            let kept = (0..n).filter(|_| keep(level)).count() as f64;
            let expected = n as f64 / (1u64 << level) as f64;
            assert!((kept - expected).abs() < 0.05 * expected, "level {level}: {kept} vs {expected}");
        }
        assert!(keep(0));
    }

    #[test]
    fn sites_are_refcounted_and_freed() {
        let mut st = State { budget: 1 << 20, ..State::default() };
        let a = [RawFrame { bci: 3, method: 1 }, RawFrame { bci: 5, method: 77 }];
        let b = [RawFrame { bci: 3, method: 2 }];
        let x = st.intern(&a);
        assert_eq!(st.intern(&a), x);
        let y = st.intern(&b);
        assert_ne!(x, y);
        let bytes = st.site_bytes;
        assert_eq!(bytes, site_bytes(2) + site_bytes(1));
        st.release(x);
        assert_eq!(st.ids.len(), 2, "still one reference to a");
        st.release(x);
        st.release(y);
        assert_eq!((st.ids.len(), st.site_bytes), (0, 0));
        // A freed slot is reused.
        let z = st.intern(&b);
        assert!(z == x || z == y);
        assert_eq!(st.sites.len(), 2);
    }

    #[test]
    fn a_site_run_interpreted_then_compiled_is_one_site() {
        let mut st = State { budget: 1 << 20, ..State::default() };
        let interpreted = [RawFrame::java(1, 3, JavaFrameType::Interpreted), RawFrame::java(2, 9, JavaFrameType::Interpreted)];
        let compiled = [RawFrame::java(1, 3, JavaFrameType::Inlined), RawFrame::java(2, 9, JavaFrameType::Compiled)];
        let moved = [RawFrame::java(1, 4, JavaFrameType::Inlined), RawFrame::java(2, 9, JavaFrameType::Compiled)];
        assert_eq!(st.intern(&interpreted), st.intern(&compiled));
        assert_ne!(st.intern(&interpreted), st.intern(&moved));
    }
}

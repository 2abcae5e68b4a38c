//! Allocation profiling with JEP 331: the JVMTI `SampledObjectAlloc` event.
//!
//! HotSpot samples an allocation every `interval` bytes on average (the gap
//! is drawn from an exponential distribution; oxprof adds no bias of its
//! own). The callback runs on the allocating Java thread, outside any signal
//! handler: it takes the stack with `GetStackTrace`, puts the allocated class
//! on top as an allocation frame, and records the sample in its own
//! lock-free [`SampleStore`] with an unbiased weight (see [`estimated_bytes`]).
//! A sample the store cannot take (full: more distinct stacks than it holds)
//! keeps its weight: it is counted by [`Accuracy::drop_sample`] and shown
//! under a one-frame `[dropped]` stack, so totals stay right.
//!
//! [`Accuracy::drop_sample`]: crate::heap::accuracy::Accuracy::drop_sample
//!
//! Per-thread control (`alloc_threads=GLOB`) enables the event only on the
//! matching threads, so the others pay nothing.

use std::cell::RefCell;
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Mutex, MutexGuard, OnceLock};

use jvmti_sys::*;

use crate::heap::allocstack;
use crate::jvmti::{Jni, Jvmti};
use crate::sampling::store::{RawFrame, SampleStore};

/// `bci` of the synthetic leaf frame naming the allocated class; its
/// `method` field holds the class id.
pub const MARK_ALLOC_CLASS: i32 = 3;

/// The one frame of the stack that holds the samples the full store turned
/// away (in the profile and in a streamed JFR recording).
pub const DROPPED_FRAME: &str = "[dropped]";

/// Tags oxprof puts on class objects carry this bit, then the class id.
const CLASS_TAG: jlong = 1 << 62;

/// The store's size, as the CPU store's: 196,608 distinct stacks (3/4 of
/// the index), 8M frames. Its 1 MiB index is resident from the start; slots
/// and frames are mapped without reserve and take memory as they fill.
/// `OXPROF_ALLOC_STORE_STACKS=N` sizes the index for N instead (tests, to
/// fill it quickly).
const STORE_SLOTS: usize = 1 << 18;
const STORE_FRAMES: usize = 1 << 23;

/// Unbiased estimate of the bytes one sample stands for. An object of size
/// `s` is sampled with probability `p = 1 - e^(-s/I)` at mean interval `I`, so
/// weighting it by `s / p` makes the expected estimate equal the true bytes,
/// for tiny and huge objects alike. With `I = 0` every allocation is sampled.
pub fn estimated_bytes(size: u64, interval: u64) -> f64 {
    if interval == 0 || size == 0 {
        return size as f64;
    }
    let p = -(-(size as f64) / interval as f64).exp_m1();
    size as f64 / p
}

/// Matches `*` (any run) and `?` (one character) against a whole name.
pub fn glob_match(pattern: &str, name: &str) -> bool {
    let (p, n): (Vec<char>, Vec<char>) = (pattern.chars().collect(), name.chars().collect());
    let (mut pi, mut ni, mut star, mut mark) = (0, 0, None, 0);
    while ni < n.len() {
        if pi < p.len() && (p[pi] == '?' || p[pi] == n[ni]) {
            pi += 1;
            ni += 1;
        } else if pi < p.len() && p[pi] == '*' {
            star = Some(pi);
            mark = ni;
            pi += 1;
        } else if let Some(s) = star {
            pi = s + 1;
            mark += 1;
            ni = mark;
        } else {
            return false;
        }
    }
    p[pi..].iter().all(|&c| c == '*')
}

#[derive(Default)]
struct Classes {
    names: Vec<String>,
    ids: HashMap<String, u32>,
}

struct Filter {
    pattern: String,
    /// Threads the event is enabled on (global references).
    enabled: Vec<jthread>,
    /// The JVM ignores per-thread enabling of this event (JDK 11 delivers
    /// nothing then): the event is enabled for all threads and the callback
    /// drops samples of threads that do not match.
    in_callback: bool,
}

/// JDKs before this one do not deliver SampledObjectAlloc enabled per thread.
const FIRST_JDK_WITH_THREAD_FILTER: u32 = 17;

/// Bumped at each start, so per-thread filter decisions are made afresh.
static FILTER_GENERATION: AtomicU64 = AtomicU64::new(0);

// SAFETY: the jthreads held are JNI global references, valid on any thread.
unsafe impl Send for Filter {}

/// Counts for the log's summary line.
#[derive(Clone, Copy, Debug, Default)]
pub struct AllocStats {
    pub samples: u64,
    pub estimated_bytes: u64,
    pub dropped: u64,
    /// Mean time of one SampledObjectAlloc callback, in nanoseconds.
    pub callback_ns: u64,
    /// Median time of one callback (to within a quarter octave, ±9%).
    pub callback_median_ns: u64,
    /// Stacks taken by oxprof's own walk, and by `GetStackTrace`.
    pub own_walks: u64,
    pub jvmti_walks: u64,
    /// Under `OXPROF_CHECK_ALLOC_WALK=1`: stacks compared, and how many differed.
    pub checked: u64,
    pub mismatched: u64,
}

#[derive(Default)]
pub struct AllocSampler {
    store: OnceLock<&'static SampleStore>,
    running: AtomicBool,
    interval: AtomicU64,
    started_once: AtomicBool,
    depth: AtomicUsize,
    per_thread: AtomicBool,
    tagging: AtomicBool,
    classes: Mutex<Classes>,
    filter: Mutex<Option<Filter>>,
    /// Time spent in the callback and how many callbacks, for the summary.
    callback_ns: AtomicU64,
    callbacks: AtomicU64,
    /// Callback durations in quarter octaves (see [`duration_bucket`]), for
    /// the median: the mean includes the rare callback that lost the CPU to
    /// another thread part-way.
    callback_hist: Histogram,
    own_walks: AtomicU64,
    jvmti_walks: AtomicU64,
    checked: AtomicU64,
    mismatched: AtomicU64,
    /// Live-object tracking of the sampled objects (`live`).
    pub live: crate::heap::live::LiveTracker,
    /// Each sample's allocation path and the threads' exact byte counts.
    pub accuracy: crate::heap::accuracy::Accuracy,
}

/// Counts per [`duration_bucket`].
struct Histogram([AtomicU64; 128]);

impl Default for Histogram {
    fn default() -> Self {
        Histogram([const { AtomicU64::new(0) }; 128])
    }
}

struct ThreadBuffers {
    info: Vec<jvmtiFrameInfo>,
    raw: Vec<RawFrame>,
}

thread_local! {
    /// (filter generation, whether this thread's allocations are sampled).
    static SELECTED: std::cell::Cell<(u64, bool)> = const { std::cell::Cell::new((0, false)) };
    static BUFFERS: RefCell<ThreadBuffers> = const { RefCell::new(ThreadBuffers { info: Vec::new(), raw: Vec::new() }) };
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl AllocSampler {
    pub fn store(&self) -> Result<&'static SampleStore, String> {
        let slots = std::env::var("OXPROF_ALLOC_STORE_STACKS").ok().and_then(|v| v.parse().ok()).filter(|&n: &usize| n > 0).unwrap_or(STORE_SLOTS);
        SampleStore::leaked(&self.store, slots.min(STORE_SLOTS), STORE_FRAMES, "the allocation sample store")
    }

    pub fn stored(&self) -> Option<&'static SampleStore> {
        self.store.get().copied()
    }

    pub fn interval(&self) -> u64 {
        self.interval.load(Ordering::Relaxed)
    }

    /// The interval of the last recording started in this JVM, if any.
    pub fn last_interval(&self) -> Option<u64> {
        self.started_once.load(Ordering::Relaxed).then(|| self.interval())
    }

    /// Starts sampling. `can_tag` says whether class objects may be tagged
    /// (a fast class lookup); without it the class signature is read each time.
    pub fn start(
        &self,
        (jvmti, jni): (Jvmti, Jni),
        interval: u64,
        depth: usize,
        per_thread: bool,
        filter: Option<&str>,
        can_tag: bool,
    ) -> Result<String, String> {
        let store = self.store()?;
        let bytes = jint::try_from(interval).map_err(|_| format!("alloc={interval}: the interval must be below 2 GiB"))?;
        jvmti
            .set_heap_sampling_interval(bytes)
            .map_err(|e| format!("this JVM cannot sample allocations ({e}); allocation profiling (JEP 331) needs JDK 11 or later"))?;
        store.reset();
        self.accuracy.start(jvmti.major_version());
        self.interval.store(interval, Ordering::Relaxed);
        let started_before = self.started_once.swap(true, Ordering::Relaxed);
        self.depth.store(depth.max(1), Ordering::Relaxed);
        self.per_thread.store(per_thread, Ordering::Relaxed);
        self.tagging.store(can_tag, Ordering::Relaxed);
        self.callback_ns.store(0, Ordering::Relaxed);
        self.callbacks.store(0, Ordering::Relaxed);
        // Walk counts are per recording, like the samples they describe.
        for c in [&self.own_walks, &self.jvmti_walks, &self.checked, &self.mismatched] {
            c.store(0, Ordering::Relaxed);
        }
        self.callback_hist.0.iter().for_each(|b| b.store(0, Ordering::Relaxed));
        self.running.store(true, Ordering::Release);
        let scope = match filter {
            None => {
                let tlab_before = crate::hotspot::tlab::current(jni.0 as usize).map(|t| t.start);
                jvmti.set_event(true, JVMTI_EVENT_SAMPLED_OBJECT_ALLOC).map_err(|e| format!("cannot enable SampledObjectAlloc: {e}"))?;
                if !started_before {
                    arm_current_tlab(jni, tlab_before);
                }
                "all threads".to_string()
            }
            Some(pattern) if jvmti.major_version() < FIRST_JDK_WITH_THREAD_FILTER => {
                FILTER_GENERATION.fetch_add(1, Ordering::SeqCst);
                *lock(&self.filter) = Some(Filter { pattern: pattern.to_string(), enabled: Vec::new(), in_callback: true });
                jvmti.set_event(true, JVMTI_EVENT_SAMPLED_OBJECT_ALLOC).map_err(|e| format!("cannot enable SampledObjectAlloc: {e}"))?;
                format!("threads matching '{pattern}' (filtered in the callback: this JVM ignores per-thread enabling)")
            }
            Some(pattern) => {
                *lock(&self.filter) = Some(Filter { pattern: pattern.to_string(), enabled: Vec::new(), in_callback: false });
                let mut n = 0;
                let all = jvmti.all_threads().unwrap_or_default();
                jni.ensure_local_capacity(all.len());
                for t in all {
                    // SAFETY: `t` is a local reference GetAllThreads returned
                    // in this frame, deleted only after its last use.
                    unsafe {
                        if self.thread_started(jvmti, jni, t, &jvmti.thread_name(t)) {
                            n += 1;
                        }
                        jni.delete_local(t);
                    }
                }
                format!("threads matching '{pattern}' ({n} now)")
            }
        };
        Ok(format!("started allocation profiling: mean interval {interval} bytes, {scope}"))
    }

    /// Enables the event on a new thread if the filter selects it. Returns
    /// whether it did.
    ///
    /// # Safety
    /// `thread` must be a live JNI reference to a `java.lang.Thread`.
    pub unsafe fn thread_started(&self, jvmti: Jvmti, jni: Jni, thread: jthread, name: &str) -> bool {
        if !self.running.load(Ordering::Acquire) {
            return false;
        }
        let mut filter = lock(&self.filter);
        let Some(f) = filter.as_mut() else { return false };
        // SAFETY: `thread` is live (this function's contract); `enabled`
        // holds global references, deleted only when removed from it.
        if f.in_callback || !glob_match(&f.pattern, name) || f.enabled.iter().any(|&g| unsafe { jni.is_same(g, thread) }) {
            return false;
        }
        // SAFETY: `thread` is live (this function's contract).
        if unsafe { jvmti.set_thread_event(true, JVMTI_EVENT_SAMPLED_OBJECT_ALLOC, thread) }.is_err() {
            return false;
        }
        // SAFETY: as above.
        f.enabled.push(unsafe { jni.new_global(thread) });
        true
    }

    /// Forgets an ending thread.
    ///
    /// # Safety
    /// `thread` must be a live JNI reference to a `java.lang.Thread`.
    pub unsafe fn thread_ended(&self, jni: Jni, thread: jthread) {
        if let Some(f) = lock(&self.filter).as_mut() {
            f.enabled.retain(|&g| {
                // SAFETY: `thread` is live (this function's contract), `g` a
                // global reference of `enabled`.
                let same = unsafe { jni.is_same(g, thread) };
                if same {
                    // SAFETY: `g` leaves `enabled` (retain drops it).
                    unsafe { jni.delete_global(g) };
                }
                !same
            });
        }
    }

    pub fn stop(&self, jvmti: Jvmti, jni: Jni) {
        if !self.running.swap(false, Ordering::AcqRel) {
            return;
        }
        let _ = jvmti.set_event(false, JVMTI_EVENT_SAMPLED_OBJECT_ALLOC);
        if let Some(f) = lock(&self.filter).take() {
            for g in f.enabled {
                // SAFETY: `g` is a global reference of `enabled`, taken out of
                // it here and deleted after its last use.
                unsafe {
                    let _ = jvmti.set_thread_event(false, JVMTI_EVENT_SAMPLED_OBJECT_ALLOC, g);
                    jni.delete_global(g);
                }
            }
        }
    }

    /// Whether the callback must drop this thread's samples (filter applied
    /// in the callback); decided once per thread and recording.
    ///
    /// # Safety
    /// `thread` must be a live JNI reference to a `java.lang.Thread`.
    unsafe fn filtered_out(&self, jvmti: Jvmti, thread: jthread) -> bool {
        let generation = FILTER_GENERATION.load(Ordering::Relaxed);
        let cached = SELECTED.try_with(|c| c.get()).ok().filter(|(g, _)| *g == generation);
        let selected = match cached {
            Some((_, selected)) => selected,
            None => {
                let pattern = match lock(&self.filter).as_ref() {
                    Some(f) if f.in_callback => f.pattern.clone(),
                    _ => return false,
                };
                // SAFETY: `thread` is live (this function's contract).
                let selected = glob_match(&pattern, &unsafe { jvmti.thread_name(thread) });
                let _ = SELECTED.try_with(|c| c.set((generation, selected)));
                selected
            }
        };
        !selected
    }

    /// The SampledObjectAlloc callback's work, timed.
    ///
    /// # Safety
    /// `thread`, `object` and `class` must be live JNI references: the
    /// callback's thread, the sampled object and its class.
    #[allow(clippy::too_many_arguments)] // the JVMTI callback's own parameters
    pub unsafe fn on_sample(&self, jvmti: Jvmti, jni: Jni, thread: jthread, object: jobject, class: jclass, size: jlong, tid: u32) {
        if !self.running.load(Ordering::Acquire) {
            return;
        }
        // SAFETY: `thread` is live (this function's contract).
        if FILTER_GENERATION.load(Ordering::Relaxed) != 0 && unsafe { self.filtered_out(jvmti, thread) } {
            return;
        }
        let t0 = std::time::Instant::now();
        // SAFETY: `object` and `class` are live (this function's contract).
        unsafe { self.sample(jvmti, jni, object, class, size, tid) };
        let ns = t0.elapsed().as_nanos() as u64;
        self.callback_ns.fetch_add(ns, Ordering::Relaxed);
        self.callbacks.fetch_add(1, Ordering::Relaxed);
        if let Some(b) = self.callback_hist.0.get(duration_bucket(ns)) {
            b.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// # Safety
    /// `object` and `class` must be live JNI references, `class` to a class.
    unsafe fn sample(&self, jvmti: Jvmti, jni: Jni, object: jobject, class: jclass, size: jlong, tid: u32) {
        let Some(store) = self.store.get() else { return };
        let size = size.max(0) as u64;
        let exact_weight = estimated_bytes(size, self.interval.load(Ordering::Relaxed));
        let weight = exact_weight.round() as u64;
        // SAFETY: `object` is live and `jni` is this callback's environment.
        unsafe { self.accuracy.observe(jni.0 as usize, object, weight) };
        // SAFETY: `class` is live (this function's contract).
        let Some(class_id) = (unsafe { self.class_id(jvmti, class) }) else {
            store.count_dropped();
            self.accuracy.drop_sample(weight);
            return;
        };
        let depth = self.depth.load(Ordering::Relaxed);
        let tid_key = if self.per_thread.load(Ordering::Relaxed) { tid } else { 0 };
        let recorded = BUFFERS.try_with(|b| {
            let mut b = b.borrow_mut();
            let ThreadBuffers { info, raw } = &mut *b;
            // Kept at its full size: refilling 2049 frames per sample would
            // cost more than the walk.
            if raw.len() != depth + 1 {
                raw.clear();
                raw.resize(depth + 1, RawFrame::default());
            }
            if let Some(first) = raw.first_mut() {
                *first = RawFrame { bci: MARK_ALLOC_CLASS, method: class_id as usize };
            }
            let own = raw.get_mut(1..).and_then(|frames| allocstack::walk(jni.0 as usize, frames));
            let n = match own {
                Some(n) => {
                    self.own_walks.fetch_add(1, Ordering::Relaxed);
                    if allocstack::checking() {
                        self.check_walk(jvmti, info, raw.get(1..n + 1).unwrap_or_default(), depth);
                    }
                    n
                }
                None => {
                    self.jvmti_walks.fetch_add(1, Ordering::Relaxed);
                    let slots = raw.get_mut(1..).unwrap_or_default();
                    slots.iter_mut().zip(jvmti_stack(jvmti, info, depth)).map(|(slot, f)| *slot = f).count()
                }
            };
            let frames = raw.get(..n + 1).unwrap_or_default();
            if !store.record(tid_key, crate::sampling::label_slots::current(tid), frames, weight) {
                // Counted as dropped by the store; its bytes go to `[dropped]`,
                // in a streamed recording too.
                self.accuracy.drop_sample(weight);
                store.log_dropped(weight, class_id);
            }
            // The live site is stack + class, without the thread.
            // SAFETY: `object` is live (this function's contract).
            unsafe { self.live.track(jni, object, frames, size, exact_weight) };
        });
        if recorded.is_err() {
            store.count_dropped();
            self.accuracy.drop_sample(weight);
            store.log_dropped(weight, class_id);
        }
    }

    /// Compares an own walk with `GetStackTrace` (method and bytecode index
    /// per frame) and counts the difference; the first few are logged.
    fn check_walk(&self, jvmti: Jvmti, info: &mut Vec<jvmtiFrameInfo>, own: &[RawFrame], depth: usize) {
        let theirs: Vec<RawFrame> = jvmti_stack(jvmti, info, depth).collect();
        self.checked.fetch_add(1, Ordering::Relaxed);
        let same = theirs.len() == own.len() && theirs.iter().zip(own).all(|(a, b)| a.method == b.method && a.java_bci() == b.java_bci());
        if !same && self.mismatched.fetch_add(1, Ordering::Relaxed) < 5 {
            let show = |f: &[RawFrame]| f.iter().map(|f| format!("{:#x}@{}", f.method, f.java_bci())).collect::<Vec<_>>().join(" ");
            crate::log::warn(&format!("own allocation stack differs from GetStackTrace:\n  own:  {}\n  jvmti: {}", show(own), show(&theirs)));
        }
    }

    /// A small stable id for the class (tagged on the class object when the
    /// capability is there, so later samples skip reading its signature).
    ///
    /// # Safety
    /// `class` must be a live JNI reference to a class.
    unsafe fn class_id(&self, jvmti: Jvmti, class: jclass) -> Option<u32> {
        let tagging = self.tagging.load(Ordering::Relaxed);
        if tagging {
            // SAFETY: `class` is live (this function's contract).
            if let Ok(tag) = unsafe { jvmti.get_tag(class) } {
                if tag & CLASS_TAG != 0 {
                    return Some((tag & !CLASS_TAG) as u32);
                }
            }
        }
        // SAFETY: as above.
        let sig = unsafe { jvmti.class_signature(class) }.ok()?;
        let name = crate::symbols::class_name_from_signature(&sig);
        let id = {
            let mut classes = lock(&self.classes);
            match classes.ids.get(&name) {
                Some(&id) => id,
                None => {
                    let id = classes.names.len() as u32;
                    classes.names.push(name.clone());
                    classes.ids.insert(name, id);
                    id
                }
            }
        };
        if tagging {
            // SAFETY: as above.
            let _ = unsafe { jvmti.set_tag(class, CLASS_TAG | id as jlong) };
        }
        Some(id)
    }

    pub fn class_name(&self, id: usize) -> String {
        lock(&self.classes).names.get(id).cloned().unwrap_or_else(|| "[unknown class]".into())
    }

    /// Walk counts: (own walks, GetStackTrace walks, checked, mismatched).
    pub fn walk_counts(&self) -> (u64, u64, u64, u64) {
        let get = |a: &AtomicU64| a.load(Ordering::Relaxed);
        (get(&self.own_walks), get(&self.jvmti_walks), get(&self.checked), get(&self.mismatched))
    }

    /// Mean time of one SampledObjectAlloc callback so far, in nanoseconds.
    pub fn callback_ns_mean(&self) -> u64 {
        self.callback_ns.load(Ordering::Relaxed) / self.callbacks.load(Ordering::Relaxed).max(1)
    }

    /// The median callback time, to within a quarter octave (±9%); 0
    /// before any.
    pub fn callback_ns_median(&self) -> u64 {
        let counts: Vec<u64> = self.callback_hist.0.iter().map(|b| b.load(Ordering::Relaxed)).collect();
        histogram_median(&counts)
    }
}

/// The histogram bucket of a duration: 4 per power of two (bucket 4k + j
/// holds [2^k · (1 + j/4), 2^k · (1 + (j+1)/4)) ns).
fn duration_bucket(ns: u64) -> usize {
    let ns = ns.max(4);
    let k = ns.ilog2();
    (4 * k + ((ns >> (k - 2)) & 3) as u32) as usize
}

/// The median of a [`duration_bucket`] histogram, as its bucket's middle.
fn histogram_median(counts: &[u64]) -> u64 {
    let total: u64 = counts.iter().sum();
    let mut seen = 0;
    for (b, &c) in counts.iter().enumerate() {
        seen += c;
        if c > 0 && seen * 2 >= total {
            let (k, j) = (b / 4, (b % 4) as f64);
            return ((1u64 << k) as f64 * (1.0 + (j + 0.5) / 4.0)) as u64;
        }
    }
    0
}

/// The current thread's stack through JVMTI `GetStackTrace`, as stored
/// frames (type unknown).
fn jvmti_stack(jvmti: Jvmti, info: &mut Vec<jvmtiFrameInfo>, depth: usize) -> impl Iterator<Item = RawFrame> + '_ {
    // SAFETY: jvmtiFrameInfo is plain data; all-zero is valid.
    info.resize(depth, unsafe { std::mem::zeroed() });
    let n = jvmti.own_stack_trace(info).unwrap_or(0);
    // GetStackTrace marks native methods with -1, AsyncGetCallTrace (and so
    // the stored encoding) with -3.
    let bci = |l: jlong| if l < 0 { jvmti_sys::asgct::BCI_NATIVE_FRAME } else { l.min(0xffff) as i32 };
    info.iter().take(n).map(move |f| RawFrame { bci: bci(f.location), method: f.method as usize })
}

/// On HotSpot 12–24 a TLAB taken before SampledObjectAlloc was enabled is
/// never armed: allocation in it runs to its end without a sample, and its
/// bytes are never counted (up to one TLAB, several MiB with a large young
/// generation: a cache the main thread fills first read 0.77 of its size).
/// JDK 11 arms it when the event is enabled at load (see `init` in lib.rs);
/// JDK 25 samples it. Here the calling thread's TLAB, still the one it had
/// before the event was enabled (`tlab_before`, its start unchanged), is
/// filled with one unreachable `long[]`, so its next allocation takes a new,
/// armed TLAB. At most 24 bytes are left over, too few for any object; the
/// filler is garbage at the next GC.
fn arm_current_tlab(jni: Jni, tlab_before: Option<usize>) {
    if !crate::hotspot::vmstructs::feature().is_some_and(|v| (12..=24).contains(&v)) {
        return;
    }
    let env = jni.0 as usize;
    let Some(start) = tlab_before.filter(|&s| s != 0) else { return };
    if crate::hotspot::tlab::current(env).map(|t| t.start) != Some(start) {
        return;
    }
    // A long[]'s header is 16 bytes (24 without compressed class pointers).
    let Some(room) = crate::hotspot::tlab::room_left(env) else { return };
    let Ok(len) = jint::try_from(room.saturating_sub(24) / 8) else { return };
    if len == 0 {
        return;
    }
    let filler = jni.new_long_array(len);
    jni.clear_exception();
    // SAFETY: `filler` is null or the local reference just made, not used again.
    unsafe { jni.delete_local(filler) };
    crate::log::debug(&format!("filled the {room} bytes left in this thread's first TLAB, so allocation sampling covers its next one"));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn weights_are_unbiased() {
        let i = 512.0 * 1024.0;
        // Expected estimate = p * weight = size, for every size.
        for size in [16u64, 40, 1024, 256 * 1024, 512 * 1024, 8 << 20] {
            let w = estimated_bytes(size, i as u64);
            let p = 1.0 - (-(size as f64) / i).exp();
            assert!((p * w - size as f64).abs() < 1e-6 * size as f64, "size {size}");
        }
        // Tiny objects stand for about I bytes; huge ones for themselves.
        assert!((estimated_bytes(8, 1 << 19) - (1 << 19) as f64).abs() < 8.0);
        assert!((estimated_bytes(64 << 20, 1 << 19) - (64 << 20) as f64).abs() < 1.0);
        assert_eq!(estimated_bytes(100, 0), 100.0);
    }

    #[test]
    fn median_of_buckets() {
        assert_eq!(histogram_median(&[0; 8]), 0);
        assert_eq!(duration_bucket(1024), 40);
        assert_eq!(duration_bucket(1279), 40);
        assert_eq!(duration_bucket(1280), 41);
        assert_eq!(duration_bucket(2047), 43);
        assert_eq!(duration_bucket(0), 8);
        // 3 callbacks of 1000 ns, 1 of 1 ms: the median is about 1 µs.
        let mut b = [0u64; 128];
        b[duration_bucket(1000)] += 3;
        b[duration_bucket(1_000_000)] += 1;
        let m = histogram_median(&b);
        assert!((900..1100).contains(&m), "{m}");
    }

    #[test]
    fn globs() {
        assert!(glob_match("worker-*", "worker-1"));
        assert!(glob_match("worker-*", "worker-"));
        assert!(!glob_match("worker-*", "main"));
        assert!(glob_match("*pool*", "my-pool-3"));
        assert!(glob_match("t?", "t1"));
        assert!(!glob_match("t?", "t12"));
        assert!(glob_match("*", ""));
        assert!(glob_match("a*b*c", "axxbyyc"));
        assert!(!glob_match("a*b*c", "axxbyy"));
    }
}

//! signal-safe: The lock-free sample store the signal handler writes into.
//!
//! Distinct stacks live in slots handed out in order, their frames in an
//! arena, and a hash index (open addressing, 4 bytes per entry) maps a
//! stack's hash to its slot. All three are preallocated with `mmap` before
//! profiling starts. Inserting takes no lock and allocates nothing: a new
//! stack takes the next slot and arena space with `fetch_add`, fills them,
//! and is published by a compare-and-swap on an empty index entry; a
//! thread that loses that race to the same stack counts its sample there
//! and abandons its own slot. Identical stacks share one slot and bump its
//! counters. When slots or arena run out, samples are counted as dropped;
//! nothing blocks.
//!
//! Pages are what costs here. The index is written with zeros when the store
//! is created, so it is resident (1 MiB for the CPU store) and lookups,
//! which land on it at random, never fault; slots and frames fill their
//! pages in order, so a run with a few thousand stacks touches a few dozen
//! pages of them instead of one page per stack. And every page is first
//! touched by a write: a first read would map the kernel's shared zero page,
//! and replacing that on the next write flushes the TLB of every CPU the
//! process runs on (an inter-processor interrupt per page).
//!
//! Readers (dump) run off the signal path and only look at published slots.
//! [`SampleStore::reset`] must only run when no writer is active (the signal
//! module guarantees that).

use std::ptr::NonNull;

/// The slot an event log names for a sample the store had no room for
/// ([`SampleStore::log_dropped`]); no stack ever has it.
pub const DROPPED_SLOT: u32 = u32::MAX;
use std::sync::atomic::{AtomicBool, AtomicPtr, AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::sync::OnceLock;

use crate::sampling::cputime::monotonic_ns;
use crate::sampling::event_log::{Event, EventLog};

/// One raw frame as the walker produced it: `bci` (or a marker code) and the
/// `jmethodID` (or 0 for synthetic frames).
///
/// The layout is AsyncGetCallTrace's `ASGCT_CallFrame`, so the walker can
/// write straight into frame buffers. The `bci` word also carries what kind
/// of frame it is:
/// - `bci >= 0`: a Java frame. Bits 0..24 are the bytecode index, bits 24..31
///   the [`JavaFrameType`] (0 = unknown, as plain AsyncGetCallTrace gives).
/// - `bci == -3` (`BCI_NATIVE_FRAME`): a Java `native` method.
/// - [`RawFrame::NATIVE_PC`]: a native (C/C++) code address in `method`.
/// - [`RawFrame::KERNEL_PC`]: a kernel code address in `method`.
/// - `method ==` [`RawFrame::MARKER`]: `bci` is a marker naming why a CPU
///   stack has no (or no whole) Java part (failed walk codes and the
///   `MARK_*` constants). It ends the stack: alone or after native frames
///   when there is no Java frame, after the Java frames the own walk found
///   when it stopped short of the thread's first Java call.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct RawFrame {
    pub bci: i32,
    pub method: usize,
}

/// How a Java frame was executing, when the walker knows it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum JavaFrameType {
    Unknown = 0,
    Interpreted = 1,
    Compiled = 2,
    Inlined = 3,
}

impl RawFrame {
    /// `bci` marker: `method` is a native code address (user space).
    pub const NATIVE_PC: i32 = -0x100;
    /// `bci` marker: `method` is a kernel code address.
    pub const KERNEL_PC: i32 = -0x101;
    const BCI_MASK: i32 = 0x00ff_ffff;
    /// `method` of a marker frame: no `jmethodID` or code address has this
    /// value (a Java frame's `jmethodID` can be null: a method whose ID was
    /// never made).
    pub const MARKER: usize = usize::MAX;

    /// A Java frame with a known frame type. Negative `bci`s (native
    /// methods, unknown positions) are kept as they are.
    pub fn java(method: usize, bci: i32, ty: JavaFrameType) -> RawFrame {
        let bci = if bci >= 0 { (bci & Self::BCI_MASK) | ((ty as i32) << 24) } else { bci };
        RawFrame { bci, method }
    }

    /// Sets the frame type of a Java frame in place (no-op for other frames).
    pub fn set_type(&mut self, ty: JavaFrameType) {
        if self.bci >= 0 {
            self.bci = (self.bci & Self::BCI_MASK) | ((ty as i32) << 24);
        }
    }

    /// The bytecode index of a Java frame (negative values pass through).
    pub fn java_bci(&self) -> i32 {
        if self.bci >= 0 {
            self.bci & Self::BCI_MASK
        } else {
            self.bci
        }
    }

    /// The frame type of a Java frame.
    pub fn java_type(&self) -> JavaFrameType {
        match if self.bci >= 0 { self.bci >> 24 } else { 0 } {
            1 => JavaFrameType::Interpreted,
            2 => JavaFrameType::Compiled,
            3 => JavaFrameType::Inlined,
            _ => JavaFrameType::Unknown,
        }
    }

    /// A marker frame (see the type's comment).
    pub fn marker(code: i32) -> RawFrame {
        RawFrame { bci: code, method: Self::MARKER }
    }

    /// Whether this is a marker frame.
    pub fn is_marker(&self) -> bool {
        self.method == Self::MARKER && !self.is_native()
    }

    /// Whether this is a native or kernel code address.
    pub fn is_native(&self) -> bool {
        matches!(self.bci, Self::NATIVE_PC | Self::KERNEL_PC)
    }

    /// A native code address frame.
    pub fn native_pc(pc: usize) -> RawFrame {
        RawFrame { bci: Self::NATIVE_PC, method: pc }
    }

    /// A kernel code address frame.
    pub fn kernel_pc(pc: usize) -> RawFrame {
        RawFrame { bci: Self::KERNEL_PC, method: pc }
    }
}

const WRITING: u32 = 1;
const READY: u32 = 2;
const DEAD: u32 = 3;

/// How many slots a lookup probes before giving up.
const MAX_PROBE: usize = 256;
/// How long a reader spins on a slot another thread is still writing.
const MAX_SPIN: u32 = 4096;

#[repr(C)]
struct Slot {
    key: AtomicU64,
    state: AtomicU32,
    tid: AtomicU32,
    frames_at: AtomicU64,
    num_frames: AtomicU32,
    /// The context-label set of its samples (`sampling::label_slots`).
    labels: AtomicU32,
    samples: AtomicU64,
    total: AtomicU64,
}

/// An anonymous private mapping of `len` bytes, unmapped on drop.
struct Mapping {
    ptr: NonNull<u8>,
    len: usize,
}

impl Mapping {
    fn new(len: usize) -> Option<Mapping> {
        // SAFETY: a fresh anonymous mapping; no existing memory is touched.
        let p = unsafe {
            libc::mmap(std::ptr::null_mut(), len, libc::PROT_READ | libc::PROT_WRITE, libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE, -1, 0)
        };
        if p == libc::MAP_FAILED {
            return None;
        }
        NonNull::new(p as *mut u8).map(|ptr| Mapping { ptr, len })
    }

    fn zero(&self) {
        // MADV_DONTNEED on a private anonymous mapping returns its pages to the
        // kernel and makes them read back as zeros.
        // SAFETY: the range is exactly our mapping.
        let rc = unsafe { libc::madvise(self.ptr.as_ptr() as *mut _, self.len, libc::MADV_DONTNEED) };
        if rc != 0 {
            // SAFETY: the range is our writable mapping.
            unsafe { std::ptr::write_bytes(self.ptr.as_ptr(), 0, self.len) };
        }
    }
}

impl Mapping {
    /// Makes `[from, to)` of the mapping (bytes, clamped to it) resident and
    /// writable without changing what it holds, so that writers that get
    /// there later do not take page faults. Safe beside concurrent writers:
    /// the kernel only fills page tables. False where the kernel lacks
    /// `MADV_POPULATE_WRITE` (before Linux 5.14).
    fn populate(&self, from: usize, to: usize) -> bool {
        const MADV_POPULATE_WRITE: libc::c_int = 23;
        let from = from & !(PAGE - 1);
        let to = to.min(self.len);
        if from >= to {
            return true;
        }
        // SAFETY: the range lies inside our mapping; the advice fills page
        // tables only and leaves the contents as they are.
        unsafe { libc::madvise(self.ptr.as_ptr().add(from) as *mut _, to - from, MADV_POPULATE_WRITE) == 0 }
    }

    /// Writes zeros over the whole mapping, so every page is backed by
    /// memory of its own (a first read would map the shared zero page).
    fn write_zeros(&self) {
        // SAFETY: the range is exactly our writable mapping; callers ensure
        // nobody else uses it meanwhile (creation, or reset with no writer).
        unsafe { std::ptr::write_bytes(self.ptr.as_ptr(), 0, self.len) };
    }
}

impl Drop for Mapping {
    fn drop(&mut self) {
        // SAFETY: unmapping exactly what `new` mapped.
        unsafe { libc::munmap(self.ptr.as_ptr() as *mut _, self.len) };
    }
}

/// Totals kept beside the table.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct StoreStats {
    /// Samples recorded in the table.
    pub recorded: u64,
    /// Samples lost because the table or arena was full or contended.
    pub dropped: u64,
    /// Distinct stacks in the table.
    pub distinct: u64,
}

/// The store. Create it before profiling starts; share it by reference.
pub struct SampleStore {
    /// The hash index: per entry, the number of its slot plus one (0: empty).
    index: Mapping,
    index_len: usize,
    /// Slots, handed out in order, so they fill their pages densely.
    slots: Mapping,
    slot_capacity: usize,
    next_slot: AtomicUsize,
    frames: Mapping,
    frame_capacity: usize,
    frame_cursor: AtomicUsize,
    /// Bytes of the slots and of the frame arena made resident ahead of
    /// the writers by [`SampleStore::prefault_ahead`].
    slots_ready: AtomicUsize,
    frames_ready: AtomicUsize,
    published: AtomicUsize,
    /// Bumped by every [`SampleStore::reset`], so that what was read of the
    /// store before (an interval's baseline) is known to be stale.
    generation: AtomicU64,
    /// Writers inside `record_slot`/`add_to_slot` now, and whether new ones
    /// are turned away (counted as dropped) so the store can be emptied
    /// while profiling runs ([`SampleStore::pause`]).
    writers: AtomicUsize,
    paused: AtomicBool,
    recorded: AtomicU64,
    dropped: AtomicU64,
    /// Where each recorded sample is also logged with its time (JFR), or null.
    log: AtomicPtr<EventLog>,
}

// SAFETY: all shared mutation goes through atomics; arena ranges are written
// only by the thread that reserved them, before publication.
unsafe impl Sync for SampleStore {}
// SAFETY: the mappings are owned and can move between threads.
unsafe impl Send for SampleStore {}

/// A sample's key in the store: the thread id (0 when samples are not kept
/// per thread) in the low 24 bits (Linux thread ids stay below 2^22), the
/// thread's state (`hotspot::frames::ThreadState`) in the top 8. Its
/// context-label set is the other part of a stack's identity beside its
/// frames (the `labels` argument of [`SampleStore::record`]).
pub const fn sample_key(tid: u32, state: u8) -> u32 {
    (tid & 0x00FF_FFFF) | ((state as u32) << 24)
}

/// One distinct stack read back from the store.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StoredTrace {
    /// The thread id part of its key (0: not kept per thread).
    pub tid: u32,
    /// The thread-state part of its key (`ThreadState as u8`; 0 unknown).
    pub state: u8,
    /// Its context-label set (`labels.rs`; 0: none).
    pub labels: u32,
    /// Frames as the walker produced them: top (leaf) first.
    pub frames: Vec<RawFrame>,
    pub samples: u64,
    pub total: u64,
}

/// The slot of `key` in a direct-mapped table of `entries` slots (a power of
/// two): the top bits of its Fibonacci hash, so keys that differ only in low
/// bits spread out. For the walks' lock-free caches. Signal-safe, never
/// panics.
pub const fn direct_mapped_slot(key: usize, entries: usize) -> usize {
    match key.wrapping_mul(0x9E37_79B9_7F4A_7C15).checked_shr(usize::BITS - entries.trailing_zeros()) {
        Some(top) => top & entries.wrapping_sub(1),
        None => 0,
    }
}

/// Asks the CPU to start loading the cache line of `item` now, so that a
/// read of it a little later does not wait for memory: the walks' table
/// entries are cold at every sample (the JVM ran for milliseconds since the
/// last one), and the next frame's entries are known before this frame's
/// work is done. A prefetch never faults and changes nothing.
#[inline(always)]
pub fn prefetch<T>(item: &T) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: a prefetch hint reads nothing architecturally and cannot
    // fault, whatever the address; `item` is a valid reference anyway.
    unsafe {
        std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(item as *const T as *const i8)
    };
    #[cfg(not(target_arch = "x86_64"))]
    let _ = item;
}

/// Backs every page of a static lock-free table with its own memory now, off
/// the sample path, by applying `write` (an atomic write that keeps the
/// value: `compare_exchange(0, 0)`; not `fetch_or(0)`, which compilers turn
/// into a load) to one element per page and to the last one. The walks'
/// caches read an entry before they write it; on a page nothing has written
/// yet, that read maps the kernel's shared zero page, and the write after
/// it must replace the mapping and flush the TLB of every CPU the process
/// runs on (an inter-processor interrupt). Costs the table's size in
/// resident memory.
pub fn prefault<T>(table: &[T], write: impl Fn(&T)) {
    let per_page = (PAGE / std::mem::size_of::<T>().max(1)).max(1);
    table.iter().step_by(per_page).chain(table.last()).for_each(write);
}

/// The page size the mappings are handled in.
const PAGE: usize = 4096;
/// How far [`SampleStore::prefault_ahead`] keeps the frame arena resident
/// ahead of its cursor: 16,384 frames, seconds of new stacks at javac's
/// rate (about 100 new stacks of 50 frames a second at 10 ms).
pub const PREFAULT_AHEAD: usize = 256 * 1024;

fn mix(mut h: u64, v: u64) -> u64 {
    h ^= v;
    h = h.wrapping_mul(0x9E37_79B9_7F4A_7C15);
    h ^ (h >> 29)
}

/// Hash of a stack, thread id and label set; never 0 (0 marks an empty slot).
fn hash(tid: u32, labels: u32, frames: &[RawFrame]) -> u64 {
    let mut h = mix(0xcbf2_9ce4_8422_2325, tid as u64 | (labels as u64) << 32);
    for f in frames {
        h = mix(h, f.method as u64);
        h = mix(h, f.bci as u32 as u64);
    }
    h | 1
}

impl SampleStore {
    /// A store for up to three quarters of `slot_count` (rounded up to a
    /// power of two) distinct stacks and `frame_capacity` frames in total.
    /// The hash index (4 bytes per entry) is made resident here; slots and
    /// frames only as they fill.
    pub fn new(slot_count: usize, frame_capacity: usize) -> Option<SampleStore> {
        let index_len = slot_count.max(16).next_power_of_two();
        // Past 75% full, probe chains grow long: that many slots at most.
        let slot_capacity = index_len / 4 * 3;
        let index = Mapping::new(index_len * std::mem::size_of::<AtomicU32>())?;
        index.write_zeros();
        let slots = Mapping::new(slot_capacity * std::mem::size_of::<Slot>())?;
        let frames = Mapping::new(frame_capacity.max(1) * std::mem::size_of::<RawFrame>())?;
        Some(SampleStore {
            index,
            index_len,
            slots,
            slot_capacity,
            next_slot: AtomicUsize::new(0),
            frames,
            frame_capacity: frame_capacity.max(1),
            frame_cursor: AtomicUsize::new(0),
            slots_ready: AtomicUsize::new(0),
            frames_ready: AtomicUsize::new(0),
            published: AtomicUsize::new(0),
            generation: AtomicU64::new(0),
            writers: AtomicUsize::new(0),
            paused: AtomicBool::new(false),
            recorded: AtomicU64::new(0),
            dropped: AtomicU64::new(0),
            log: AtomicPtr::new(std::ptr::null_mut()),
        })
    }

    fn index_entry(&self, i: usize) -> &AtomicU32 {
        let i = i & (self.index_len - 1);
        // SAFETY: `i < index_len` by the mask; the mapping holds `index_len`
        // u32s, and any bit pattern is a valid AtomicU32.
        unsafe { &*(self.index.ptr.as_ptr() as *const AtomicU32).add(i) }
    }

    fn slot(&self, n: usize) -> Option<&Slot> {
        // SAFETY: `n < slot_capacity`, the mapping's length in slots;
        // all-zero is a valid `Slot` (atomics).
        (n < self.slot_capacity).then(|| unsafe { &*(self.slots.ptr.as_ptr() as *const Slot).add(n) })
    }

    fn frame_ptr(&self, at: usize) -> *mut RawFrame {
        // SAFETY: callers keep `at` within `frame_capacity`.
        unsafe { (self.frames.ptr.as_ptr() as *mut RawFrame).add(at) }
    }

    /// Records one sample of thread key `tid` ([`sample_key`]) and label
    /// set `labels`. Async-signal-safe: no allocation, no lock, no panic.
    /// Returns false when the sample was dropped.
    pub fn record(&self, tid: u32, labels: u32, frames: &[RawFrame], weight: u64) -> bool {
        self.record_slot(tid, labels, frames, weight).is_some()
    }

    /// Records one sample and returns its stack's slot (a stable stack id
    /// until [`SampleStore::reset`]), or `None` when it was dropped. When an
    /// event log is attached, the sample is also logged there with its time
    /// and thread. Async-signal-safe, like [`SampleStore::record`].
    pub fn record_slot(&self, tid: u32, labels: u32, frames: &[RawFrame], weight: u64) -> Option<u32> {
        self.record_naming(tid, labels, frames, weight, 0)
    }

    /// [`SampleStore::record_slot`] for an event that names another thread
    /// (`other`, a kernel thread id, 0 for none): the event log keeps it.
    pub fn record_naming(&self, tid: u32, labels: u32, frames: &[RawFrame], weight: u64, other: u32) -> Option<u32> {
        if !self.enter() {
            return None;
        }
        let slot = self.insert(tid, labels, frames, weight);
        if let Some(slot) = slot {
            let log = self.log.load(Ordering::Acquire);
            if !log.is_null() {
                // SAFETY: an attached log is leaked ('static) and never freed.
                unsafe { &*log }.push(slot, weight, other);
            }
        }
        self.leave();
        slot
    }

    /// A writer comes in; false (the sample counted as dropped) while the
    /// store is paused. Dekker-style with [`SampleStore::pause`]: the writer
    /// announces itself, then looks; the pauser closes, then waits.
    fn enter(&self) -> bool {
        self.writers.fetch_add(1, Ordering::SeqCst);
        if self.paused.load(Ordering::SeqCst) {
            self.writers.fetch_sub(1, Ordering::SeqCst);
            self.dropped.fetch_add(1, Ordering::Relaxed);
            return false;
        }
        true
    }

    fn leave(&self) {
        self.writers.fetch_sub(1, Ordering::SeqCst);
    }

    /// Counts one more sample of `weight` for the stack in `slot` (a slot
    /// [`SampleStore::record_slot`] returned), as taken on thread `tid` now:
    /// a thread seen not to have run since that sample. Async-signal-safe.
    /// `generation` is the store's [`SampleStore::generation`] read before
    /// the slot was: a slot from before the store was emptied is refused.
    pub fn add_to_slot(&self, slot: u32, generation: u64, tid: u32, weight: u64) -> bool {
        if !self.enter() {
            return false;
        }
        let ok = match self.slot(slot as usize).filter(|s| s.state.load(Ordering::Acquire) == READY) {
            Some(s) if self.generation.load(Ordering::SeqCst) == generation => {
                self.count(s, weight);
                let log = self.log.load(Ordering::Acquire);
                if !log.is_null() {
                    // SAFETY: an attached log is leaked ('static) and never freed.
                    unsafe { &*log }.push_event(Event { ticks: monotonic_ns(), tid, slot, weight, other: 0 });
                }
                true
            }
            _ => false,
        };
        self.leave();
        ok
    }

    /// Also log every sample recorded from now on (`None` stops logging).
    pub fn set_log(&self, log: Option<&'static EventLog>) {
        self.log.store(log.map_or(std::ptr::null_mut(), |l| l as *const EventLog as *mut EventLog), Ordering::Release);
    }

    fn insert(&self, tid: u32, labels: u32, frames: &[RawFrame], weight: u64) -> Option<u32> {
        let key = hash(tid, labels, frames);
        let mut i = key as usize;
        let mut mine: Option<usize> = None;
        for _ in 0..MAX_PROBE {
            let entry = self.index_entry(i);
            let mut e = entry.load(Ordering::Acquire);
            if e == 0 {
                // A new stack: fill a slot of our own, then publish it here.
                let n = match mine {
                    Some(n) => n,
                    None => {
                        let n = self.new_slot(key, tid, labels, frames, weight)?;
                        mine = Some(n);
                        n
                    }
                };
                match entry.compare_exchange(0, n as u32 + 1, Ordering::AcqRel, Ordering::Acquire) {
                    Ok(_) => {
                        if let Some(slot) = self.slot(n) {
                            slot.state.store(READY, Ordering::Release);
                        }
                        self.published.fetch_add(1, Ordering::Relaxed);
                        self.recorded.fetch_add(1, Ordering::Relaxed);
                        return Some(n as u32);
                    }
                    Err(now) => e = now, // another thread published first
                }
            }
            let n = e as usize - 1;
            if let Some(slot) = self.slot(n).filter(|s| s.key.load(Ordering::Relaxed) == key) {
                if self.matches(slot, tid, labels, frames) {
                    self.abandon(mine);
                    return self.count(slot, weight).then_some(n as u32);
                }
            }
            i = i.wrapping_add(1);
        }
        self.abandon(mine);
        self.dropped.fetch_add(1, Ordering::Relaxed);
        None
    }

    /// Takes the next free slot and fills it with this stack, unpublished.
    /// `None` (counted as dropped) when the slots or the arena ran out.
    fn new_slot(&self, key: u64, tid: u32, labels: u32, frames: &[RawFrame], weight: u64) -> Option<usize> {
        let n = self.next_slot.fetch_add(1, Ordering::Relaxed);
        let Some(slot) = self.slot(n) else {
            self.dropped.fetch_add(1, Ordering::Relaxed);
            return None;
        };
        let len = frames.len();
        let at = self.frame_cursor.fetch_add(len, Ordering::Relaxed);
        if at.checked_add(len).is_none_or(|end| end > self.frame_capacity) {
            slot.state.store(DEAD, Ordering::Release);
            self.dropped.fetch_add(1, Ordering::Relaxed);
            return None;
        }
        // SAFETY: [at, at+len) was reserved above by this thread alone and
        // lies inside the arena; source and destination cannot overlap.
        unsafe { std::ptr::copy_nonoverlapping(frames.as_ptr(), self.frame_ptr(at), len) };
        slot.key.store(key, Ordering::Relaxed);
        slot.tid.store(tid, Ordering::Relaxed);
        slot.labels.store(labels, Ordering::Relaxed);
        slot.frames_at.store(at as u64, Ordering::Relaxed);
        slot.num_frames.store(len as u32, Ordering::Relaxed);
        slot.samples.store(1, Ordering::Relaxed);
        slot.total.store(weight, Ordering::Relaxed);
        slot.state.store(WRITING, Ordering::Release);
        Some(n)
    }

    /// Marks a filled slot that lost the race to publish its stack as unused.
    fn abandon(&self, mine: Option<usize>) {
        if let Some(slot) = mine.and_then(|n| self.slot(n)) {
            slot.state.store(DEAD, Ordering::Release);
        }
    }

    /// The stack in slot `slot` (from [`SampleStore::record_slot`]), if published.
    pub fn trace(&self, slot: u32) -> Option<StoredTrace> {
        self.slot(slot as usize).and_then(|s| self.read(s))
    }

    /// A published slot's stack and counters.
    fn read(&self, slot: &Slot) -> Option<StoredTrace> {
        if slot.state.load(Ordering::Acquire) != READY {
            return None;
        }
        let n = slot.num_frames.load(Ordering::Relaxed) as usize;
        let at = slot.frames_at.load(Ordering::Relaxed) as usize;
        if at + n > self.frame_capacity {
            return None;
        }
        // SAFETY: published slot, range inside the arena (checked above).
        let frames = unsafe { std::slice::from_raw_parts(self.frame_ptr(at), n) }.to_vec();
        let key = slot.tid.load(Ordering::Relaxed);
        Some(StoredTrace {
            tid: key & 0x00FF_FFFF,
            state: (key >> 24) as u8,
            labels: slot.labels.load(Ordering::Relaxed),
            frames,
            samples: slot.samples.load(Ordering::Relaxed),
            total: slot.total.load(Ordering::Relaxed),
        })
    }

    fn count(&self, slot: &Slot, weight: u64) -> bool {
        slot.samples.fetch_add(1, Ordering::Relaxed);
        slot.total.fetch_add(weight, Ordering::Relaxed);
        self.recorded.fetch_add(1, Ordering::Relaxed);
        true
    }

    /// Whether a slot (whose key matched) holds exactly this stack. Waits a
    /// bounded time for a slot another thread has just published.
    fn matches(&self, slot: &Slot, tid: u32, labels: u32, frames: &[RawFrame]) -> bool {
        let mut spins = 0;
        loop {
            match slot.state.load(Ordering::Acquire) {
                READY => break,
                WRITING if spins < MAX_SPIN => {
                    spins += 1;
                    std::hint::spin_loop();
                }
                _ => return false,
            }
        }
        if slot.tid.load(Ordering::Relaxed) != tid
            || slot.labels.load(Ordering::Relaxed) != labels
            || slot.num_frames.load(Ordering::Relaxed) as usize != frames.len()
        {
            return false;
        }
        let at = slot.frames_at.load(Ordering::Relaxed) as usize;
        if at + frames.len() > self.frame_capacity {
            return false;
        }
        // SAFETY: a READY slot's range was fully written before its release
        // store, which our acquire load saw; the range is inside the arena.
        let stored = unsafe { std::slice::from_raw_parts(self.frame_ptr(at), frames.len()) };
        stored == frames
    }

    pub fn stats(&self) -> StoreStats {
        StoreStats {
            recorded: self.recorded.load(Ordering::Relaxed),
            dropped: self.dropped.load(Ordering::Relaxed),
            distinct: self.published.load(Ordering::Relaxed) as u64,
        }
    }

    // signal-safe: off (a system call that may block: from an agent thread)
    /// Makes the next [`PREFAULT_AHEAD`] bytes of the frame arena, and the
    /// slots for as many new stacks, resident before the signal handler
    /// writes there: a first write to a page faults inside the handler
    /// (about 6% of its CPU on javac, whose stacks are mostly new). Call
    /// every few hundred milliseconds from a thread of the agent's own; a
    /// no-op on kernels without `MADV_POPULATE_WRITE`.
    pub fn prefault_ahead(&self) {
        let frames_at = self.frame_cursor.load(Ordering::Relaxed).saturating_mul(std::mem::size_of::<RawFrame>());
        let slots_at = self.next_slot.load(Ordering::Relaxed).saturating_mul(std::mem::size_of::<Slot>());
        let ahead = |m: &Mapping, ready: &AtomicUsize, at: usize, bytes: usize| {
            let (from, to) = (ready.load(Ordering::Relaxed).max(at), at.saturating_add(bytes).min(m.len));
            if to > from && to - from >= PAGE && m.populate(from, to) {
                ready.store(to, Ordering::Relaxed);
            }
        };
        ahead(&self.frames, &self.frames_ready, frames_at, PREFAULT_AHEAD);
        let stacks = PREFAULT_AHEAD / (std::mem::size_of::<RawFrame>() * 8);
        ahead(&self.slots, &self.slots_ready, slots_at, stacks * std::mem::size_of::<Slot>());
    }
    // signal-safe: on

    /// Counts a sample that was lost before reaching the store.
    pub fn count_dropped(&self) {
        self.dropped.fetch_add(1, Ordering::Relaxed);
    }

    /// Counts `n` samples lost.
    pub fn add_dropped(&self, n: u64) {
        self.dropped.fetch_add(n, Ordering::Relaxed);
    }

    /// Logs a sample this store did not take (already counted as dropped)
    /// to the attached event log, if any, under [`DROPPED_SLOT`], so that a
    /// streamed recording keeps its time, thread and weight; `other` is the
    /// caller's (the allocation store's: the object's class id).
    pub fn log_dropped(&self, weight: u64, other: u32) {
        let log = self.log.load(Ordering::Acquire);
        if !log.is_null() {
            // SAFETY: an attached log is leaked ('static) and never freed.
            unsafe { &*log }.push(DROPPED_SLOT, weight, other);
        }
    }

    // signal-safe: off (mapped before any handler records into it)
    /// The store kept in `cell`, mapped on first use with room for `slots`
    /// stacks and `frames` frames and kept for the process's life (a signal
    /// handler may still hold it while a recording stops); `what` names it
    /// in the error.
    pub fn leaked(cell: &OnceLock<&'static SampleStore>, slots: usize, frames: usize, what: &str) -> Result<&'static SampleStore, String> {
        if let Some(s) = cell.get() {
            return Ok(s);
        }
        let s = SampleStore::new(slots, frames).ok_or_else(|| format!("cannot map memory for {what}"))?;
        Ok(*cell.get_or_init(|| Box::leak(Box::new(s))))
    }
    // signal-safe: on

    // signal-safe: off (read when a profile is written)
    /// Copies out every published stack, in the order they were first
    /// seen. Safe to call while writers run: it sees each slot either not
    /// yet published or complete.
    pub fn snapshot(&self) -> Vec<StoredTrace> {
        let taken = self.next_slot.load(Ordering::Acquire).min(self.slot_capacity);
        (0..taken).filter_map(|n| self.slot(n).and_then(|s| self.read(s))).collect()
    }

    /// Turns new writers away (their samples counted as dropped) and waits
    /// for those inside to leave: the store can then be read and emptied
    /// while profiling runs. Must not be called from a writer.
    pub fn pause(&self) {
        self.paused.store(true, Ordering::SeqCst);
        while self.writers.load(Ordering::SeqCst) != 0 {
            std::thread::yield_now();
        }
    }

    /// Lets writers in again.
    pub fn resume(&self) {
        self.paused.store(false, Ordering::SeqCst);
    }

    /// Puts a stack back with its counters (after [`SampleStore::reset`],
    /// what was recorded since the interval's profile was built). Not
    /// logged for JFR. False when the store has no room.
    pub fn restore(&self, t: &StoredTrace) -> bool {
        let key = sample_key(t.tid, t.state);
        let Some(n) = self.insert(key, t.labels, &t.frames, t.total) else { return false };
        if let Some(slot) = self.slot(n as usize) {
            slot.samples.fetch_add(t.samples.saturating_sub(1), Ordering::Relaxed);
            self.recorded.fetch_add(t.samples.saturating_sub(1), Ordering::Relaxed);
        }
        true
    }

    /// As [`SampleStore::snapshot`], each stack with its slot number.
    pub fn snapshot_slots(&self) -> Vec<(u32, StoredTrace)> {
        let taken = self.next_slot.load(Ordering::Acquire).min(self.slot_capacity);
        (0..taken).filter_map(|n| self.slot(n).and_then(|s| self.read(s)).map(|t| (n as u32, t))).collect()
    }

    /// Slot numbers handed out so far: every published stack's is below.
    pub fn slots_used(&self) -> u32 {
        self.next_slot.load(Ordering::Acquire).min(self.slot_capacity) as u32
    }

    /// A published slot's counters (samples, total), without copying its
    /// stack (see [`SampleStore::trace`]).
    pub fn counts(&self, slot: u32) -> Option<(u64, u64)> {
        let s = self.slot(slot as usize)?;
        if s.state.load(Ordering::Acquire) != READY {
            return None;
        }
        Some((s.samples.load(Ordering::Relaxed), s.total.load(Ordering::Relaxed)))
    }

    /// How full the store is: the larger of the slots' and the frame
    /// arena's used share, 0.0 to 1.0.
    pub fn fill(&self) -> f64 {
        let slots = self.next_slot.load(Ordering::Relaxed).min(self.slot_capacity) as f64 / self.slot_capacity.max(1) as f64;
        let frames = self.frame_cursor.load(Ordering::Relaxed).min(self.frame_capacity) as f64 / self.frame_capacity.max(1) as f64;
        slots.max(frames)
    }
    // signal-safe: on

    /// Empties the store. The caller guarantees no writer is running.
    pub fn reset(&self) {
        // The index stays resident (rewritten, not dropped): see `insert`.
        self.index.write_zeros();
        self.slots.zero();
        self.frames.zero();
        self.next_slot.store(0, Ordering::Relaxed);
        self.frame_cursor.store(0, Ordering::Relaxed);
        self.slots_ready.store(0, Ordering::Relaxed);
        self.frames_ready.store(0, Ordering::Relaxed);
        self.published.store(0, Ordering::Relaxed);
        self.recorded.store(0, Ordering::Relaxed);
        self.dropped.store(0, Ordering::Relaxed);
        self.generation.fetch_add(1, Ordering::Release);
    }

    /// How many times the store was emptied (see `generation`).
    pub fn generation(&self) -> u64 {
        self.generation.load(Ordering::Acquire)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    fn f(bci: i32, method: usize) -> RawFrame {
        RawFrame { bci, method }
    }

    /// Pages of `m` in `[from, to)` (bytes) that are resident now.
    fn resident_pages(m: &Mapping, from: usize, to: usize) -> usize {
        let from = from & !(PAGE - 1);
        let pages = (to - from).div_ceil(PAGE);
        let mut v = vec![0u8; pages];
        // SAFETY: the range lies inside the mapping; `v` holds a byte per page.
        let rc = unsafe { libc::mincore(m.ptr.as_ptr().add(from) as *mut _, to - from, v.as_mut_ptr()) };
        assert_eq!(rc, 0);
        v.iter().filter(|&&b| b & 1 == 1).count()
    }

    /// The pages the handler writes next are resident before it gets there,
    /// and what writers put there is kept: the stacks read back whole,
    /// written before and after the pages were made resident.
    #[test]
    fn prefault_ahead_makes_the_next_pages_resident_and_keeps_what_is_there() {
        let store = SampleStore::new(1 << 16, 1 << 20).unwrap();
        let arena = (1 << 20) * std::mem::size_of::<RawFrame>();
        assert_eq!(resident_pages(&store.frames, 0, PREFAULT_AHEAD), 0, "nothing is resident before");
        let stack = |k: usize| (0..40).map(|i| f(i, 0x1000 + k)).collect::<Vec<_>>();
        assert!(store.record(1, 0, &stack(0), 1));
        store.prefault_ahead();
        let resident = resident_pages(&store.frames, 0, PREFAULT_AHEAD);
        // The first stack's page, and the window ahead when the kernel can.
        assert!(resident == 1 || resident == PREFAULT_AHEAD / PAGE, "{resident} pages of the window resident");
        let populated = resident > 1;
        if populated {
            // The arena past the window stays untouched: memory follows use.
            assert_eq!(resident_pages(&store.frames, PREFAULT_AHEAD + PAGE, arena), 0);
            let slots = PREFAULT_AHEAD / (std::mem::size_of::<RawFrame>() * 8) * std::mem::size_of::<Slot>();
            assert_eq!(resident_pages(&store.slots, 0, slots), slots.div_ceil(PAGE), "slots for as many new stacks");
        } else {
            eprintln!("MADV_POPULATE_WRITE is refused by this kernel: prefault_ahead is a no-op");
        }
        for k in 1..100 {
            assert!(store.record(1, 0, &stack(k), 1));
        }
        // Further on: the window moves with the cursor.
        let cursor = store.frame_cursor.load(Ordering::Relaxed) * std::mem::size_of::<RawFrame>();
        store.prefault_ahead();
        if populated {
            let want = (cursor + PREFAULT_AHEAD - (cursor & !(PAGE - 1))).div_ceil(PAGE);
            assert_eq!(resident_pages(&store.frames, cursor, cursor + PREFAULT_AHEAD), want);
        }
        let snap = store.snapshot();
        assert_eq!(snap.len(), 100);
        for (k, t) in snap.iter().enumerate() {
            assert_eq!(t.frames, stack(k), "stack {k} read back whole");
        }
        // Emptied, the store starts its window over.
        store.reset();
        assert_eq!(resident_pages(&store.frames, 0, PREFAULT_AHEAD), 0);
        store.prefault_ahead();
        assert_eq!(resident_pages(&store.frames, 0, PREFAULT_AHEAD) == PREFAULT_AHEAD / PAGE, populated);
    }

    #[test]
    fn direct_mapped_slots_are_the_hash_top_bits_and_spread_aligned_keys() {
        // The top 13 bits for 8192 slots, the top 7 for 128.
        for key in [0x7f00_1234_5678usize, 8, usize::MAX] {
            assert_eq!(direct_mapped_slot(key, 8192), key.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 51);
            assert_eq!(direct_mapped_slot(key, 128), key.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 57);
        }
        assert_eq!(direct_mapped_slot(12345, 1), 0);
        // 4096 consecutive 16-byte-aligned addresses (as Method* or code
        // addresses are) fill most of a 4096-slot table.
        let used: std::collections::HashSet<usize> = (0..4096usize).map(|i| direct_mapped_slot(0x7f00_0000_0000 + 16 * i, 4096)).collect();
        assert!(used.iter().all(|&s| s < 4096));
        assert!(used.len() > 2500, "{} slots used", used.len());
    }

    #[test]
    fn frame_type_encoding_round_trips() {
        let mut f = RawFrame::java(0x1000, 1234, JavaFrameType::Inlined);
        assert_eq!((f.java_bci(), f.java_type(), f.method), (1234, JavaFrameType::Inlined, 0x1000));
        f.set_type(JavaFrameType::Interpreted);
        assert_eq!((f.java_bci(), f.java_type()), (1234, JavaFrameType::Interpreted));
        let n = RawFrame::java(0x1000, -3, JavaFrameType::Compiled);
        assert_eq!((n.bci, n.java_type()), (-3, JavaFrameType::Unknown));
        assert_eq!(RawFrame::native_pc(7).bci, RawFrame::NATIVE_PC);
        assert_eq!(RawFrame::kernel_pc(7).bci, RawFrame::KERNEL_PC);
    }

    #[test]
    fn identical_stacks_share_a_slot() {
        let s = SampleStore::new(64, 1024).unwrap();
        assert!(s.record(1, 0, &[f(1, 10), f(2, 20)], 5));
        assert!(s.record(1, 0, &[f(1, 10), f(2, 20)], 5));
        assert!(s.record(2, 0, &[f(1, 10), f(2, 20)], 5));
        assert!(s.record(1, 0, &[f(1, 10)], 5));
        let mut snap = s.snapshot();
        snap.sort_by_key(|t| (t.tid, t.frames.len()));
        assert_eq!(snap.len(), 3);
        assert_eq!(snap[1].samples, 2);
        assert_eq!(snap[1].total, 10);
        assert_eq!(snap[1].frames, vec![f(1, 10), f(2, 20)]);
        assert_eq!(s.stats(), StoreStats { recorded: 4, dropped: 0, distinct: 3 });
    }

    #[test]
    fn slots_name_stacks() {
        let s = SampleStore::new(64, 1024).unwrap();
        let a = s.record_slot(1, 0, &[f(1, 10), f(2, 20)], 5).unwrap();
        let b = s.record_slot(1, 0, &[f(1, 11)], 5).unwrap();
        assert_ne!(a, b);
        assert_eq!(s.record_slot(1, 0, &[f(1, 10), f(2, 20)], 5), Some(a));
        let t = s.trace(a).unwrap();
        assert_eq!((t.frames.clone(), t.samples, t.total), (vec![f(1, 10), f(2, 20)], 2, 10));
        assert!(s.trace((a + 1) % 64).is_none() || (a + 1) % 64 == b);
    }

    #[test]
    fn full_table_and_arena_drop_instead_of_blocking() {
        let s = SampleStore::new(16, 8).unwrap();
        // 75% of 16 slots = 12 distinct stacks at most; the arena holds 8 frames.
        let mut ok = 0;
        for m in 0..40 {
            if s.record(0, 0, &[f(0, m + 1)], 1) {
                ok += 1;
            }
        }
        assert_eq!(ok, 8);
        assert_eq!(s.stats().dropped, 32);
        // Existing stacks still count when the store is full.
        assert!(s.record(0, 0, &[f(0, 1)], 1));
    }

    /// Pages of `m` the kernel has mapped (mincore).
    fn mapped_pages(m: &Mapping) -> usize {
        let pages = m.len.div_ceil(4096);
        let mut v = vec![0u8; pages];
        // SAFETY: `m` is a live mapping of `m.len` bytes; `v` has one byte
        // per page.
        assert_eq!(unsafe { libc::mincore(m.ptr.as_ptr() as *mut _, m.len, v.as_mut_ptr()) }, 0);
        v.iter().filter(|&&b| b & 1 == 1).count()
    }

    #[test]
    fn stacks_fill_slot_pages_densely_and_snapshots_read_only_those() {
        // 65536 index entries (256 KiB, resident from the start) and room
        // for 49152 slots of 48 bytes (576 pages), untouched until used.
        let s = SampleStore::new(1 << 16, 1 << 16).unwrap();
        assert_eq!(mapped_pages(&s.index), 64);
        assert_eq!(mapped_pages(&s.slots), 0);
        for m in 0..200 {
            assert!(s.record(7, 0, &[f(1, 10 + m), f(2, 20)], 3));
        }
        assert!(s.record(7, 0, &[f(1, 10), f(2, 20)], 3));
        let snap = s.snapshot();
        assert_eq!(snap.len(), 200);
        // First seen first; the repeated stack counted in its slot.
        assert_eq!((snap[0].frames.clone(), snap[0].samples, snap[0].total), (vec![f(1, 10), f(2, 20)], 2, 6));
        assert_eq!(s.stats(), StoreStats { recorded: 201, dropped: 0, distinct: 200 });
        // 200 slots fill three pages, wherever their hashes fall; a
        // snapshot reads no slot beyond them.
        let mapped = mapped_pages(&s.slots);
        assert!(mapped <= 3, "{mapped} pages of slots are mapped");
    }

    #[test]
    fn label_sets_tell_stacks_apart() {
        let s = SampleStore::new(64, 1024).unwrap();
        let a = s.record_slot(1, 0, &[f(1, 10)], 5).unwrap();
        let b = s.record_slot(1, 7, &[f(1, 10)], 5).unwrap();
        assert_ne!(a, b);
        assert_eq!(s.record_slot(1, 7, &[f(1, 10)], 5), Some(b));
        assert_eq!((s.trace(a).unwrap().labels, s.trace(b).unwrap().labels), (0, 7));
        assert_eq!(s.trace(b).unwrap().samples, 2);
    }

    #[test]
    fn reset_empties() {
        let s = SampleStore::new(64, 64).unwrap();
        s.record(0, 0, &[f(0, 1)], 1);
        s.reset();
        assert!(s.snapshot().is_empty());
        assert_eq!(s.stats(), StoreStats::default());
        assert!(s.record(0, 0, &[f(0, 1)], 1));
        assert_eq!(s.snapshot().len(), 1);
    }

    #[test]
    fn concurrent_writers_lose_nothing() {
        let s = Arc::new(SampleStore::new(1 << 12, 1 << 16).unwrap());
        let threads: Vec<_> = (0..4)
            .map(|t| {
                let s = s.clone();
                std::thread::spawn(move || {
                    for i in 0..20_000usize {
                        let m = i % 50;
                        s.record(0, 0, &[f(m as i32, m + 1), f(0, 99)], t + 1);
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        let snap = s.snapshot();
        assert_eq!(snap.len(), 50);
        assert_eq!(snap.iter().map(|t| t.samples).sum::<u64>(), 80_000);
        assert_eq!(snap.iter().map(|t| t.total).sum::<u64>(), 20_000 * (1 + 2 + 3 + 4));
        assert_eq!(s.stats().dropped, 0);
    }
}

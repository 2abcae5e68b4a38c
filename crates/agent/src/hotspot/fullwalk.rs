//! signal-safe: oxprof's complete Java stack walk: every frame named, the
//! methods inlined into compiled frames included, from the physical frames
//! (see `javastack`) and compiled code's debug information (see `scopes`).
//!
//! Two callers. The allocation callback (`heap::allocstack`) walks from the
//! anchor the thread left when it entered the VM, every compiled frame at a
//! call site. The CPU and wall signal handler walks from the interrupted
//! registers, before AsyncGetCallTrace (`OXPROF_OWN_WALK=0`: not at all);
//! its top compiled frame is usually between call sites, and is named as
//! AsyncGetCallTrace names it: by the first debug record after the pc
//! (HotSpot's `pc_desc_near`), or the compiled method alone with bci 0 when
//! there is none. Callers are named by the record at their return address,
//! as `GetStackTrace` does (AsyncGetCallTrace takes the record after it for
//! the first frame it can use, which loses methods inlined at the call; see
//! docs/stack-walking.md for what `OXPROF_CHECK_CPU_WALK=1` found). Each
//! `Method*` becomes its `jmethodID` through the checked cache of
//! `method_ids`; decoded call sites are cached by return address (see
//! [`SiteCache`]) and callers' code blobs by pc (see `blob_cache`).
//!
//! Any doubt gives up (`None`) and the caller uses the JVM's own walk
//! (`GetStackTrace`, AsyncGetCallTrace): a frame it cannot step over or
//! name, a call site without debug information, a frame under
//! deoptimization or a stub returned into from Java (see
//! `JavaStack::doubtful`), an interpreted frame whose bytecode pointer is
//! not inside its method, a virtual thread's frozen frames, a JDK whose
//! nmethod layout is not in its structure table, or a walk that did not
//! reach the thread's first Java call.
//!
//! Compiled code's memory is read directly: `find_blob` only returns blobs in
//! a code heap's committed range, which stays mapped for the JVM's life, and
//! `Layout::debug_ranges` checks that each table lies inside its blob (JDK
//! 11–21). A frame's nmethod cannot be freed while the frame is on the
//! walking thread's own stack. JDK 25 keeps the tables on the C heap, freed
//! with the nmethod, and a stale stack slot can name an nmethod that is
//! gone: they are read through checked reads only ([`HeapTables`]).

use std::ffi::c_void;
use std::sync::atomic::{fence, AtomicBool, AtomicU32, AtomicU64, AtomicUsize, Ordering};

use jvmti_sys::asgct::BCI_NATIVE_FRAME;

use crate::hotspot::blob_cache;
use crate::hotspot::frames::{self, Blob, Layout};
use crate::hotspot::gate;
use crate::hotspot::javastack::{self, JavaStack, PhysFrame, Start};
use crate::hotspot::method_ids;
use crate::hotspot::safemem;
use crate::hotspot::scopes::{self, DebugInfo, MAX_SCOPES};
use crate::sampling::store::{direct_mapped_slot, prefault, prefetch, JavaFrameType, RawFrame};

/// Who walks, which says how the top frame and methods are read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Caller {
    /// A JVMTI callback on the thread: it stands at its anchor, every
    /// frame at a call site, and every frame's method is live.
    Callback,
    /// The signal handler, from the interrupted registers: the top frame
    /// may be anywhere in its code, and methods are read through
    /// `method_ids`' checked cache.
    Signal,
}

/// The signal handler walks this way first (`OXPROF_OWN_WALK=0`: only
/// AsyncGetCallTrace, to compare).
static ON_SIGNAL: AtomicBool = AtomicBool::new(false);
/// `OXPROF_CHECK_CPU_WALK=1`: the handler runs both walks and compares.
static CHECK_SIGNAL: AtomicBool = AtomicBool::new(false);

// signal-safe: off (read at start)
/// Reads the environment switches for the signal handler's walk; returns
/// whether it walks this way first. Call off the signal path.
pub fn configure_signal() -> (bool, bool) {
    let check = std::env::var_os("OXPROF_CHECK_CPU_WALK").is_some_and(|v| v == "1");
    let on = check || std::env::var_os("OXPROF_OWN_WALK").is_none_or(|v| v != "0");
    ON_SIGNAL.store(on, Ordering::Relaxed);
    CHECK_SIGNAL.store(check, Ordering::Relaxed);
    (on, check)
}
// signal-safe: on

/// Whether the handler should compare this walk with AsyncGetCallTrace's.
pub fn checking_signal() -> bool {
    CHECK_SIGNAL.load(Ordering::Relaxed)
}

/// Samples the signal handler named by this walk, and those it left to
/// AsyncGetCallTrace.
static WALKED: AtomicU64 = AtomicU64::new(0);
static LEFT: AtomicU64 = AtomicU64::new(0);

/// (walked, left to AsyncGetCallTrace) since the process started.
pub fn signal_walks() -> (u64, u64) {
    (WALKED.load(Ordering::Relaxed), LEFT.load(Ordering::Relaxed))
}

/// Why a walk gave up, counted for the debug log (see [`left_why`]).
#[derive(Clone, Copy)]
enum Why {
    /// The interrupted registers name no frame the walk can start from.
    Start,
    /// The physical walk ended before the thread's first Java call.
    Bottom,
    /// A frame in doubt (deoptimization, a stub returned into from Java).
    Doubt,
    /// The interrupted frame is not Java code at its pc (a stub, native
    /// code called without an anchor).
    NotAtPc,
    /// An interpreted frame's method or bytecode pointer did not check out.
    Interpreted,
    /// A compiled frame's method or debug information did not check out.
    Compiled,
}

const WHYS: [&str; 6] = ["start", "bottom", "doubt", "not_at_pc", "interpreted", "compiled"];
static LEFT_WHY: [AtomicU64; 6] = [const { AtomicU64::new(0) }; 6];

fn left<T>(why: Why) -> Option<T> {
    if let Some(c) = LEFT_WHY.get(why as usize) {
        c.fetch_add(1, Ordering::Relaxed);
    }
    None
}

/// Signal-handler walks left to AsyncGetCallTrace, by reason (both walks
/// count: allocation callbacks too), as `reason=count` pairs.
pub fn left_why() -> [(&'static str, u64); 6] {
    let mut out = [("", 0); 6];
    for ((o, name), c) in out.iter_mut().zip(WHYS).zip(&LEFT_WHY) {
        *o = (name, c.load(Ordering::Relaxed));
    }
    out
}

/// The signal handler's walk of the interrupted thread (`env` its
/// JNIEnv) into `out`; `None` when the walk is off, not yet possible (the
/// deoptimization blobs not yet found) or in doubt: use AsyncGetCallTrace.
pub fn on_signal(env: usize, ucontext: *mut c_void, out: &mut [RawFrame]) -> Option<usize> {
    if !ON_SIGNAL.load(Ordering::Relaxed) || !javastack::knows_deopt_blobs() {
        return None;
    }
    let l = frames::layout().filter(|l| usable(l))?;
    let regs = javastack::registers(ucontext)?;
    let walked = walk(l, l.thread(env), regs, javastack::more_registers(ucontext), Caller::Signal, out);
    match walked {
        Some(_) => WALKED.fetch_add(1, Ordering::Relaxed),
        None => LEFT.fetch_add(1, Ordering::Relaxed),
    };
    walked
}

/// Backs the call-site cache with memory (see [`prefault`]). Call before
/// the first walk, off the signal path.
pub fn prepare() {
    prefault(&SITES.entries, |e| {
        let _ = e.seq.compare_exchange(0, 0, Ordering::Relaxed, Ordering::Relaxed);
    });
}

/// Whether this JVM's layout lets the walk name compiled frames.
pub fn usable(l: &Layout) -> bool {
    gate::vmstructs_walk_trusted() && gate::jmethodid_is_method_slot() && l.has_debug_ranges()
}

/// Walks the current thread's Java frames into `out`, leaf first, from
/// `regs` (interrupted pc, sp, fp; zeros: from the anchor) and, for a
/// thread stopped in an interpreter method entry, `more` (see
/// `JavaStack::with_more_registers`). `Some(0)`: no Java frame. `None`:
/// use the JVM's walk.
pub fn walk(
    l: &Layout,
    thread: usize,
    regs: (usize, usize, usize),
    more: Option<(usize, usize, usize)>,
    caller: Caller,
    out: &mut [RawFrame],
) -> Option<usize> {
    let (start, mut stack) = JavaStack::new(l, thread, regs);
    match start {
        Start::Frames => {}
        Start::NoJavaFrame => return Some(0),
        Start::Unknown => return left(Why::Start),
    }
    if let Some(more) = more {
        stack.with_more_registers(more);
    }
    stack.cached();
    let mut n = 0;
    let mut first = true;
    let mut scratch = [(0usize, 0i32); MAX_SCOPES];
    while n < out.len() {
        let Some(phys) = stack.next() else {
            return match (stack.reached_bottom(), stack.doubtful()) {
                (true, false) => Some(n),
                (_, true) => left(Why::Doubt),
                (false, false) => left(Why::Bottom),
            };
        };
        if stack.doubtful() {
            return left(Why::Doubt);
        }
        // The caller's return address is known now: start loading its cache
        // entries, which the next step reads, while this frame is named.
        let upcoming = stack.next_pc();
        blob_cache::prefetch_entry(upcoming);
        SITES.prefetch_entry(upcoming);
        // The interrupted frame itself. A thread running Java code stopped
        // elsewhere (a stub, native code called without an anchor) is left
        // to the JVM's walk, which knows those frames.
        let top = first && stack.started_at_registers();
        if top {
            let at_pc = match phys {
                PhysFrame::Compiled { pc, .. } => pc == regs.0,
                PhysFrame::Interpreted { .. } => l.in_interpreter(regs.0),
            };
            if !at_pc {
                return left(Why::NotAtPc);
            }
        }
        // Compared with AsyncGetCallTrace (see `on_signal`), the first Java
        // frame is named as it names it: by the record after the pc, even
        // for a return address (where the record at it is the right one).
        let top = top || (first && caller == Caller::Signal && CHECK_SIGNAL.load(Ordering::Relaxed));
        first = false;
        match phys {
            PhysFrame::Interpreted { method, bcp } => {
                let frame = match caller {
                    Caller::Callback => {
                        let Some(id) = method_ids::get(l, method) else { return left(Why::Interpreted) };
                        // A native method's interpreted frame keeps no bytecode
                        // pointer, though its slot is not always cleared.
                        let native = bcp == 0 || l.is_native_live(method) == Some(true);
                        RawFrame::java(id, if native { BCI_NATIVE_FRAME } else { l.bci_live(method, bcp) }, JavaFrameType::Interpreted)
                    }
                    Caller::Signal => {
                        // A frame being built (the interrupted one) may hold a
                        // stale bytecode pointer: as AsyncGetCallTrace does, a
                        // Java method's must lie inside its bytecodes.
                        let Some(k) = method_ids::lookup(l, method) else { return left(Why::Interpreted) };
                        let (start, len) = k.code;
                        let bci = match k.native {
                            Some(true) => BCI_NATIVE_FRAME,
                            Some(false) if bcp >= start && bcp < start.wrapping_add(len) => k.bci(bcp),
                            _ => return left(Why::Interpreted),
                        };
                        RawFrame::java(k.id, bci, JavaFrameType::Interpreted)
                    }
                };
                push(out, &mut n, frame);
            }
            // A virtual thread's frames end at its continuation entry.
            PhysFrame::Compiled { blob, .. } if javastack::is_continuation_entry(blob.method) => return Some(n),
            PhysFrame::Compiled { pc, blob } => {
                let key = if top { pc | TOP_KEY } else { pc };
                let id = l.compile_id(&blob);
                if let Some(id) = id {
                    if SITES.get(key, blob.start, id, out, &mut n) {
                        continue;
                    }
                }
                let from = n;
                if compiled_frames(l, pc, top, &blob, &mut scratch, out, &mut n).is_none() {
                    return left(Why::Compiled);
                }
                // Not when the output filled up: the list may be cut short.
                if let (Some(id), Some(frames)) = (id, out.get(from..n).filter(|_| n < out.len())) {
                    SITES.put(key, blob.start, id, frames);
                }
            }
        }
    }
    Some(n)
}

/// Marks a top frame's key in the call-site cache: the same pc names other
/// frames as a top frame (the record after it) than as a return address
/// (its own record). Code addresses never have the top bit set.
const TOP_KEY: usize = 1 << 63;

/// The Java frames of compiled frame `pc` in `blob`: the native method of a
/// JNI wrapper, or the inlined scopes and the compiled method itself.
fn compiled_frames(l: &Layout, pc: usize, top: bool, blob: &Blob, scratch: &mut [(usize, i32)], out: &mut [RawFrame], n: &mut usize) -> Option<()> {
    let method = blob.method;
    let root = method_ids::lookup(l, method)?;
    let native = match root.native {
        Some(native) => native,
        None => l.is_native_live(method) == Some(true),
    };
    if native {
        push(out, n, RawFrame::java(root.id, BCI_NATIVE_FRAME, JavaFrameType::Compiled));
        return Some(());
    }
    let k = inlined(l, blob, pc, top, scratch)?;
    for (i, &(m, bci)) in scratch.iter().take(k).enumerate() {
        let ty = if i + 1 == k { JavaFrameType::Compiled } else { JavaFrameType::Inlined };
        let id = if i + 1 == k { root.id } else { method_ids::get(l, m)? };
        push(out, n, RawFrame::java(id, bci, ty));
    }
    Some(())
}

fn push(out: &mut [RawFrame], n: &mut usize, f: RawFrame) {
    if let Some(slot) = out.get_mut(*n) {
        *slot = f;
        *n += 1;
    }
}

/// The scopes of compiled frame `pc` in `blob`, innermost first: of the
/// call site `pc` returns to, or for a `top` frame of the first record
/// after `pc`.
fn inlined(l: &Layout, blob: &Blob, pc: usize, top: bool, out: &mut [(usize, i32)]) -> Option<usize> {
    let r = l.debug_ranges(blob)?;
    let offset = i32::try_from(pc.checked_sub(blob.code_begin)?).ok()?;
    if r.on_heap {
        // A binary search and a scope chain are a few dozen reads: not
        // at a system call each.
        if !safemem::cheap() {
            return None;
        }
        let info = HeapTables { ranges: r, root: blob.method };
        return if top { scopes::frames_after(&info, offset, out) } else { scopes::frames_at(&info, offset, out) };
    }
    // SAFETY: `debug_ranges` checked that each range lies inside this
    // nmethod, in its code heap's committed range (mapped for the JVM's
    // life); the nmethod has a frame on the current thread's stack and so
    // is not freed while it is walked. The ranges are aligned for their
    // element types.
    let info = unsafe {
        DebugInfo {
            pcs: std::slice::from_raw_parts(r.pcs.0 as *const [i32; 4], (r.pcs.1 - r.pcs.0) / 16),
            data: std::slice::from_raw_parts(r.data.0 as *const u8, r.data.1 - r.data.0),
            metadata: std::slice::from_raw_parts(r.metadata.0 as *const usize, (r.metadata.1 - r.metadata.0) / 8),
            root: blob.method,
        }
    };
    if top {
        scopes::frames_after(&info, offset, out)
    } else {
        scopes::frames_at(&info, offset, out)
    }
}

/// An nmethod's debug information on the C heap (JDK 25), read through
/// checked reads only: the blocks are freed when the nmethod is, which a
/// frame misread from a stale stack slot does not prevent. Reads are of
/// whole aligned words, so none straddles into a page the tables do not
/// use; a freed block costs a failed or misnamed frame, never a fault.
struct HeapTables {
    ranges: frames::DebugRanges,
    root: usize,
}

impl HeapTables {
    /// The aligned word holding byte `at` of `range`, shifted so that this
    /// byte is its lowest; `None` past the range's end or if unreadable.
    fn word_at(range: (usize, usize), at: usize) -> Option<usize> {
        let addr = range.0.checked_add(at).filter(|&a| a < range.1)?;
        safemem::read_word(addr & !7).map(|w| w >> ((addr & 7) * 8))
    }
}

impl scopes::Tables for HeapTables {
    fn pcs_len(&self) -> usize {
        // `debug_ranges` ordered the ends; saturating all the same, as
        // nothing the signal handler runs may panic.
        self.ranges.pcs.1.saturating_sub(self.ranges.pcs.0) / 16
    }
    fn pc_desc(&self, i: usize) -> Option<(i32, i32)> {
        // `pc_offset` and `scope_decode_offset`: the record's first word.
        let w = Self::word_at(self.ranges.pcs, i.checked_mul(16)?)?;
        Some((w as u32 as i32, (w >> 32) as u32 as i32))
    }
    fn data_byte(&self, pos: usize) -> Option<u8> {
        Self::word_at(self.ranges.data, pos).map(|w| w as u8)
    }
    fn metadata(&self, i: usize) -> Option<usize> {
        // An aligned word (`debug_ranges` checked the table's start).
        let addr = self.ranges.metadata.0.checked_add(i.checked_mul(8)?)?;
        if addr.checked_add(8)? > self.ranges.metadata.1 {
            return None;
        }
        safemem::read_word(addr)
    }
    fn root(&self) -> usize {
        self.root
    }
}

/// Decoded call sites of compiled frames, keyed by return address and
/// checked against the nmethod they belong to (its start and compile id,
/// which no later nmethod reuses). A stack's call sites recur from sample
/// to sample, and a hit replaces the debug-information lookups (a binary
/// search over PcDescs, the scopes, the metadata, one jmethodID per scope),
/// which are the walk's cache misses.
///
/// Each entry is a sequence lock: a writer makes the sequence odd, writes,
/// and makes it even again; a reader copies the entry and keeps the copy
/// only if the sequence was even and unchanged. Writers that find an entry
/// busy skip it, so nobody waits.
///
/// An entry is two cache lines, aligned: the tag and the first two frames
/// in the first, four more frames in the second, so a call site of one or
/// two methods (most of them) costs one line to read.
struct SiteCache {
    entries: [Site; SITES_CACHED],
}

const SITES_CACHED: usize = 8192;
/// Call sites with more scopes than this are not cached.
const SITE_FRAMES: usize = 6;

#[repr(C, align(128))]
struct Site {
    seq: AtomicU32,
    len: AtomicU32,
    compile_id: AtomicU32,
    pc: AtomicUsize,
    blob: AtomicUsize,
    frames: [SiteFrame; SITE_FRAMES],
}

// Two lines: the tag (32 bytes) and two frames, then four frames.
const _: () = assert!(std::mem::size_of::<Site>() == 128 && std::mem::size_of::<SiteFrame>() == 16);

/// One cached frame, 16 bytes.
#[repr(C)]
struct SiteFrame {
    id: AtomicUsize,
    bci: AtomicU32,
}

static SITES: SiteCache = SiteCache {
    entries: [const {
        Site {
            seq: AtomicU32::new(0),
            len: AtomicU32::new(0),
            compile_id: AtomicU32::new(0),
            pc: AtomicUsize::new(0),
            blob: AtomicUsize::new(0),
            frames: [const { SiteFrame { id: AtomicUsize::new(0), bci: AtomicU32::new(0) } }; SITE_FRAMES],
        }
    }; SITES_CACHED],
};

impl SiteCache {
    fn entry(&self, pc: usize) -> Option<&Site> {
        self.entries.get(direct_mapped_slot(pc, SITES_CACHED))
    }

    /// Starts loading the first line of the entry of `pc`, which holds its
    /// tag and first two frames (see `store::prefetch`).
    fn prefetch_entry(&self, pc: usize) {
        if let Some(e) = self.entry(pc) {
            prefetch(e);
        }
    }

    /// Pushes the cached frames of call site `pc` in nmethod (`blob`,
    /// `compile_id`) onto `out`; false on a miss (nothing pushed).
    fn get(&self, pc: usize, blob: usize, compile_id: i32, out: &mut [RawFrame], n: &mut usize) -> bool {
        let Some(e) = self.entry(pc) else { return false };
        let seq = e.seq.load(Ordering::Acquire);
        if seq & 1 == 1
            || e.pc.load(Ordering::Relaxed) != pc
            || e.blob.load(Ordering::Relaxed) != blob
            || e.compile_id.load(Ordering::Relaxed) != compile_id as u32
        {
            return false;
        }
        let len = (e.len.load(Ordering::Relaxed) as usize).min(SITE_FRAMES);
        let mut copy = [RawFrame::default(); SITE_FRAMES];
        for (slot, f) in copy.iter_mut().zip(&e.frames).take(len) {
            *slot = RawFrame { bci: f.bci.load(Ordering::Relaxed) as i32, method: f.id.load(Ordering::Relaxed) };
        }
        fence(Ordering::Acquire);
        if len == 0 || e.seq.load(Ordering::Relaxed) != seq {
            return false;
        }
        for f in copy.iter().take(len) {
            push(out, n, *f);
        }
        true
    }

    /// Remembers the frames of call site `pc` (skipped if the entry is busy).
    fn put(&self, pc: usize, blob: usize, compile_id: i32, frames: &[RawFrame]) {
        let Some(e) = self.entry(pc) else { return };
        if frames.is_empty() || frames.len() > SITE_FRAMES {
            return;
        }
        let seq = e.seq.load(Ordering::Relaxed);
        if seq & 1 == 1 || e.seq.compare_exchange(seq, seq.wrapping_add(1), Ordering::Acquire, Ordering::Relaxed).is_err() {
            return;
        }
        // Readers that see any of the stores below also see the odd sequence.
        fence(Ordering::Release);
        e.pc.store(pc, Ordering::Relaxed);
        e.blob.store(blob, Ordering::Relaxed);
        e.compile_id.store(compile_id as u32, Ordering::Relaxed);
        e.len.store(frames.len() as u32, Ordering::Relaxed);
        for (f, slot) in frames.iter().zip(&e.frames) {
            slot.id.store(f.method, Ordering::Relaxed);
            slot.bci.store(f.bci as u32, Ordering::Relaxed);
        }
        e.seq.store(seq.wrapping_add(2), Ordering::Release);
    }
}

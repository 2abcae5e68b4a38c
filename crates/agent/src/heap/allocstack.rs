//! The allocating thread's Java stack, for the SampledObjectAlloc callback.
//!
//! JVMTI's `GetStackTrace` costs about 0.5 µs per frame (it builds a
//! `javaVFrame` object for each, with register maps), which on javac's
//! 40-frame stacks made the callback 25–45 µs. This module walks the
//! thread's own frames instead, from the last-Java-frame anchor the thread
//! left when it entered the VM to allocate (see `javastack`), decoding the
//! inlining of compiled frames from their debug information (see `scopes`),
//! and turns each `Method*` into its `jmethodID` through a small cache;
//! decoded call sites are cached by return address. It produces what
//! `GetStackTrace` would (method and bytecode index per Java frame, leaf
//! first) plus each frame's type, two to three times faster: on javac a
//! median 11–17 µs against 23–37 µs, nearly all of it cache misses, since
//! samples are milliseconds apart and every frame touches cold metadata.
//!
//! Any doubt returns `None`, and the caller uses `GetStackTrace`: a frame it
//! cannot step over or name, a call site without debug information (a frame
//! being deoptimized), a JDK whose nmethod layout is not in its structure
//! table (JDK 25), or a walk that did not reach the thread's first Java
//! call. `OXPROF_ALLOC_WALK=0` turns the walk off (to compare), and
//! `OXPROF_CHECK_ALLOC_WALK=1` makes the caller run both and count
//! differences (the tests use it).
//!
//! Memory is read directly, not through `safemem`: the walk runs on the
//! thread whose stack it reads, outside any signal handler, and everything it
//! reads belongs to frames on that stack (the nmethods, their debug
//! information, the methods) and so cannot be freed meanwhile. Stack words
//! are bounds-checked by `javastack`, debug information by `hotspot`, and a
//! `Method*` is used only after its `jmethodID` was read back.

use std::sync::atomic::{fence, AtomicBool, AtomicU32, AtomicUsize, Ordering};

use jvmti_sys::asgct::BCI_NATIVE_FRAME;

use crate::hotspot::frames::{self, Blob, Layout};
use crate::hotspot::gate;
use crate::hotspot::javastack::{self, JavaStack, PhysFrame, Start};
use crate::hotspot::method_ids;
use crate::hotspot::scopes::{self, DebugInfo, MAX_SCOPES};
use crate::sampling::store::{direct_mapped_slot, prefault, JavaFrameType, RawFrame};

static ENABLED: AtomicBool = AtomicBool::new(true);
static CHECK: AtomicBool = AtomicBool::new(false);

/// Reads the environment switches. Call before allocation sampling starts.
pub fn configure() -> bool {
    let on = std::env::var_os("OXPROF_ALLOC_WALK").is_none_or(|v| v != "0");
    ENABLED.store(on, Ordering::Relaxed);
    CHECK.store(std::env::var_os("OXPROF_CHECK_ALLOC_WALK").is_some_and(|v| v == "1"), Ordering::Relaxed);
    // The call-site cache is read before it is written (see `prefault`).
    prefault(&SITES.entries, |e| {
        let _ = e.seq.compare_exchange(0, 0, Ordering::Relaxed, Ordering::Relaxed);
    });
    on
}

/// Whether the caller should also run `GetStackTrace` and compare.
pub fn checking() -> bool {
    CHECK.load(Ordering::Relaxed)
}

/// Walks the current thread's Java frames into `out`, leaf first. `env` is
/// the callback's `JNIEnv`. `None`: use `GetStackTrace`.
pub fn walk(env: usize, out: &mut [RawFrame]) -> Option<usize> {
    if !ENABLED.load(Ordering::Relaxed) || !gate::vmstructs_walk_trusted() {
        return None;
    }
    let l = frames::layout().filter(|l| l.has_debug_ranges())?;
    // No interrupted registers: in a callback the thread is "in native" and
    // the walk starts at its anchor.
    let (start, mut stack) = JavaStack::new(l, l.thread(env), (0, 0, 0));
    match start {
        Start::Frames => {}
        Start::NoJavaFrame => return Some(0),
        Start::Unknown => return None,
    }
    let mut n = 0;
    let mut scratch = [(0usize, 0i32); MAX_SCOPES];
    while n < out.len() {
        let Some(phys) = stack.next() else {
            return stack.reached_bottom().then_some(n);
        };
        match phys {
            PhysFrame::Interpreted { method, bcp } => {
                let id = method_ids::get(l, method)?;
                // A native method's interpreted frame keeps no bytecode
                // pointer, though its slot is not always cleared.
                let native = bcp == 0 || l.is_native_live(method) == Some(true);
                let bci = if native { BCI_NATIVE_FRAME } else { l.bci_live(method, bcp) };
                push(out, &mut n, RawFrame::java(id, bci, JavaFrameType::Interpreted));
            }
            PhysFrame::Compiled { blob, .. } if javastack::is_continuation_entry(blob.method) => return Some(n),
            PhysFrame::Compiled { pc, blob } => {
                let id = l.compile_id(&blob);
                if let Some(id) = id {
                    if SITES.get(pc, blob.start, id, out, &mut n) {
                        continue;
                    }
                }
                let first = n;
                compiled_frames(l, pc, &blob, &mut scratch, out, &mut n)?;
                // Not when the output filled up: the list may be cut short.
                if let (Some(id), Some(frames)) = (id, out.get(first..n).filter(|_| n < out.len())) {
                    SITES.put(pc, blob.start, id, frames);
                }
            }
        }
    }
    Some(n)
}

/// The Java frames of compiled frame `pc` in `blob`: the native method of a
/// JNI wrapper, or the inlined scopes and the compiled method itself.
fn compiled_frames(l: &Layout, pc: usize, blob: &Blob, scratch: &mut [(usize, i32)], out: &mut [RawFrame], n: &mut usize) -> Option<()> {
    let method = blob.method;
    let id = method_ids::get(l, method)?;
    if l.is_native_live(method) == Some(true) {
        push(out, n, RawFrame::java(id, BCI_NATIVE_FRAME, JavaFrameType::Compiled));
        return Some(());
    }
    let k = inlined(l, blob, pc, scratch)?;
    for (i, &(m, bci)) in scratch.iter().take(k).enumerate() {
        let ty = if i + 1 == k { JavaFrameType::Compiled } else { JavaFrameType::Inlined };
        let id = if i + 1 == k { id } else { method_ids::get(l, m)? };
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

/// The scopes of compiled frame `pc` in `blob`, innermost first.
fn inlined(l: &Layout, blob: &Blob, pc: usize, out: &mut [(usize, i32)]) -> Option<usize> {
    let r = l.debug_ranges(blob)?;
    // SAFETY: `debug_ranges` checked that each range lies inside this
    // nmethod, which has a frame on the current thread's stack and so is
    // neither freed nor changed while the thread is in this callback. The
    // ranges are aligned for their element types.
    let info = unsafe {
        DebugInfo {
            pcs: std::slice::from_raw_parts(r.pcs.0 as *const [i32; 4], (r.pcs.1 - r.pcs.0) / 16),
            data: std::slice::from_raw_parts(r.data.0 as *const u8, r.data.1 - r.data.0),
            metadata: std::slice::from_raw_parts(r.metadata.0 as *const usize, (r.metadata.1 - r.metadata.0) / 8),
            root: blob.method,
        }
    };
    let offset = i32::try_from(pc.checked_sub(blob.code_begin)?).ok()?;
    scopes::frames_at(&info, offset, out)
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
struct SiteCache {
    entries: [Site; SITES_CACHED],
}

const SITES_CACHED: usize = 4096;
/// Call sites with more scopes than this are not cached.
const SITE_FRAMES: usize = 6;

struct Site {
    seq: AtomicU32,
    len: AtomicU32,
    compile_id: AtomicU32,
    pc: AtomicUsize,
    blob: AtomicUsize,
    ids: [AtomicUsize; SITE_FRAMES],
    bcis: [AtomicU32; SITE_FRAMES],
}

static SITES: SiteCache = SiteCache {
    entries: [const {
        Site {
            seq: AtomicU32::new(0),
            len: AtomicU32::new(0),
            compile_id: AtomicU32::new(0),
            pc: AtomicUsize::new(0),
            blob: AtomicUsize::new(0),
            ids: [const { AtomicUsize::new(0) }; SITE_FRAMES],
            bcis: [const { AtomicU32::new(0) }; SITE_FRAMES],
        }
    }; SITES_CACHED],
};

impl SiteCache {
    fn entry(&self, pc: usize) -> Option<&Site> {
        self.entries.get(direct_mapped_slot(pc, SITES_CACHED))
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
        for ((slot, id), bci) in copy.iter_mut().zip(&e.ids).zip(&e.bcis).take(len) {
            *slot = RawFrame { bci: bci.load(Ordering::Relaxed) as i32, method: id.load(Ordering::Relaxed) };
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
        for ((f, id), bci) in frames.iter().zip(&e.ids).zip(&e.bcis) {
            id.store(f.method, Ordering::Relaxed);
            bci.store(f.bci as u32, Ordering::Relaxed);
        }
        e.seq.store(seq.wrapping_add(2), Ordering::Release);
    }
}

//! The allocating thread's Java stack, for the SampledObjectAlloc callback.
//!
//! JVMTI's `GetStackTrace` costs about 0.5 µs per frame (it builds a
//! `javaVFrame` object for each, with register maps), which on javac's
//! 40-frame stacks made the callback 25–45 µs. This module walks the
//! thread's own frames instead, from the last-Java-frame anchor the thread
//! left when it entered the VM to allocate (see `javastack`), decoding the
//! inlining of compiled frames from their debug information (see `scopes`),
//! and turns each `Method*` into its `jmethodID` through a small cache. It
//! produces what `GetStackTrace` would (method and bytecode index per Java
//! frame, leaf first) plus each frame's type, in a few microseconds.
//!
//! Any doubt returns `None`, and the caller uses `GetStackTrace`: a frame it
//! cannot step over or name, a call site without debug information (a frame
//! being deoptimized), a JDK whose nmethod layout is not in its structure
//! table (JDK 23+), or a walk that did not reach the thread's first Java
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

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use jvmti_sys::asgct::BCI_NATIVE_FRAME;

use crate::hotspot::{self, Blob, Layout};
use crate::javastack::{JavaStack, PhysFrame, Start};
use crate::scopes::{self, DebugInfo, MAX_SCOPES};
use crate::store::{JavaFrameType, RawFrame};

static ENABLED: AtomicBool = AtomicBool::new(true);
static CHECK: AtomicBool = AtomicBool::new(false);
/// The `Method*` of `Continuation.enterSpecial` (JDK 19+): a virtual
/// thread's frames end above it, as `GetStackTrace` shows them.
static CONTINUATION_ENTRY: AtomicUsize = AtomicUsize::new(0);

/// Reads the environment switches and notes the continuation entry method
/// (its `jmethodID`, or 0). Call before allocation sampling starts.
pub fn configure(continuation_entry: usize) -> bool {
    let on = std::env::var_os("OXPROF_ALLOC_WALK").map_or(true, |v| v != "0");
    ENABLED.store(on, Ordering::Relaxed);
    CHECK.store(std::env::var_os("OXPROF_CHECK_ALLOC_WALK").is_some_and(|v| v == "1"), Ordering::Relaxed);
    if continuation_entry != 0 {
        // SAFETY: a jmethodID from JVMTI points at its Method* slot, never freed.
        let method = unsafe { (continuation_entry as *const usize).read_volatile() };
        CONTINUATION_ENTRY.store(method, Ordering::Relaxed);
    }
    on
}

/// Whether the caller should also run `GetStackTrace` and compare.
pub fn checking() -> bool {
    CHECK.load(Ordering::Relaxed)
}

/// Whether the walk can run in this JVM (layout known, decoding possible).
pub fn available() -> bool {
    ENABLED.load(Ordering::Relaxed) && hotspot::layout().is_some_and(Layout::has_debug_ranges)
}

/// Walks the current thread's Java frames into `out`, leaf first. `env` is
/// the callback's `JNIEnv`. `None`: use `GetStackTrace`.
pub fn walk(env: usize, out: &mut [RawFrame]) -> Option<usize> {
    if !ENABLED.load(Ordering::Relaxed) {
        return None;
    }
    let l = hotspot::layout().filter(|l| l.has_debug_ranges())?;
    // No interrupted registers: in a callback the thread is "in native" and
    // the walk starts at its anchor.
    let (start, mut stack) = JavaStack::new(l, l.thread(env), (0, 0, 0));
    match start {
        Start::Frames => {}
        Start::NoJavaFrame => return Some(0),
        Start::Unknown => return None,
    }
    let entry = CONTINUATION_ENTRY.load(Ordering::Relaxed);
    let mut n = 0;
    let mut scratch = [(0usize, 0i32); MAX_SCOPES];
    while n < out.len() {
        let Some(phys) = stack.next() else {
            return stack.reached_bottom().then_some(n);
        };
        match phys {
            PhysFrame::Interpreted { method, bcp } => {
                let id = method_id(l, method)?;
                // A native method's interpreted frame keeps no bytecode
                // pointer, though its slot is not always cleared.
                let native = bcp == 0 || l.is_native_live(method) == Some(true);
                let bci = if native { BCI_NATIVE_FRAME } else { l.bci_live(method, bcp) };
                push(out, &mut n, RawFrame::java(id, bci, JavaFrameType::Interpreted));
            }
            PhysFrame::Compiled { method, .. } if method == entry => return Some(n),
            PhysFrame::Compiled { method, pc, blob } => {
                let id = method_id(l, method)?;
                if l.is_native_live(method) == Some(true) {
                    push(out, &mut n, RawFrame::java(id, BCI_NATIVE_FRAME, JavaFrameType::Compiled));
                    continue;
                }
                let k = inlined(l, &blob, pc, &mut scratch)?;
                for (i, &(m, bci)) in scratch.iter().take(k).enumerate() {
                    let ty = if i + 1 == k { JavaFrameType::Compiled } else { JavaFrameType::Inlined };
                    let id = if i + 1 == k { id } else { method_id(l, m)? };
                    push(out, &mut n, RawFrame::java(id, bci, ty));
                }
            }
        }
    }
    Some(n)
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

/// A cache of `Method*` → `jmethodID`. Entries are written without a lock;
/// a torn or stale entry fails the read-back check and is looked up again.
const CACHE: usize = 8192;

struct Entry {
    method: AtomicUsize,
    id: AtomicUsize,
}

static IDS: [Entry; CACHE] = [const { Entry { method: AtomicUsize::new(0), id: AtomicUsize::new(0) } }; CACHE];

/// The `jmethodID` of a `Method*` (read back to confirm), or `None`.
fn method_id(l: &Layout, method: usize) -> Option<usize> {
    let e = IDS.get((method >> 3).wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 51 & (CACHE - 1))?;
    if e.method.load(Ordering::Relaxed) == method {
        let id = e.id.load(Ordering::Relaxed);
        // SAFETY: every id in the cache was read back once: a jmethodID,
        // which points at a slot in a JNI method block that is never freed.
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

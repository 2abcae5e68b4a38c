//! signal-safe: The current thread's physical Java frames, walked from the signal context
//! or from the thread's last-Java-frame anchor, on x86_64. Signal-safe.
//!
//! HotSpot frames come in three shapes the walker tells apart by PC:
//! - interpreted (PC inside the interpreter's code): `rbp` is the frame
//!   pointer; the `Method*` and bytecode pointer sit in fixed slots below it,
//!   the caller's PC above it;
//! - compiled (PC inside an `nmethod`): no frame pointer, but a fixed frame
//!   size from the code blob: the caller's PC is the last word of the frame;
//! - stubs and adapters (other code blobs): stepped over the same way, and
//!   not reported.
//!
//! Entry frames (the VM calling Java, e.g. to load a class) are crossed
//! through the saved anchor of their call wrapper, as HotSpot does.
//!
//! The walk starts like AsyncGetCallTrace's: from the anchor when the thread
//! is outside Java (in the VM or in native code), else from the interrupted
//! registers. Every stack word read is inside [start sp − 8, stack base) of
//! this thread, every code read is checked against the code cache (see
//! `hotspot`); each step must move up the stack. Anything implausible ends
//! the walk: callers treat the frames seen so far as all they know.

use std::ffi::c_void;
use std::sync::atomic::{AtomicUsize, Ordering};

use crate::hotspot::frames::{Blob, Layout, THREAD_IN_JAVA, THREAD_IN_JAVA_TRANS};

/// The `Method*` of `Continuation.enterSpecial` (JDK 19+), or 0: a virtual
/// thread's frames end above it, as AsyncGetCallTrace and `GetStackTrace`
/// show them, so the walkers treat it as the bottom of the stack.
static CONTINUATION_ENTRY: AtomicUsize = AtomicUsize::new(0);

/// `StubRoutines::_cont_returnBarrier` (JDK 19+), or 0 until found. HotSpot
/// thaws a continuation lazily: when a virtual thread resumes, only its top
/// frames go back onto the carrier's stack, and the return address of the
/// lowest of them is this stub, which thaws the rest once returned into.
/// The frames below are still in a heap stack chunk, out of any walk's
/// reach.
static CONT_RETURN_BARRIER: AtomicUsize = AtomicUsize::new(0);

/// Notes the continuation return barrier's address (see
/// [`CONT_RETURN_BARRIER`]). Call off the signal path.
pub fn set_continuation_return_barrier(pc: usize) {
    CONT_RETURN_BARRIER.store(pc, Ordering::Relaxed);
}

/// The continuation entry's `Method*` (0: none), for naming it.
pub fn continuation_entry() -> usize {
    CONTINUATION_ENTRY.load(Ordering::Relaxed)
}

/// Notes the continuation entry method from its `jmethodID` (0: none).
/// Call before sampling starts. Nothing is noted where a jmethodID is not a
/// pointer to its `Method*` slot (JDK 26 and later).
pub fn set_continuation_entry(id: usize) {
    if id != 0 && crate::hotspot::gate::jmethodid_is_method_slot() {
        // SAFETY: a jmethodID from JVMTI points at its Method* slot, never freed.
        let method = unsafe { (id as *const usize).read_volatile() };
        CONTINUATION_ENTRY.store(method, Ordering::Relaxed);
    }
}

/// Whether `method` (a `Method*`) is the continuation entry: the walk has
/// reached the bottom of a virtual thread's stack.
pub fn is_continuation_entry(method: usize) -> bool {
    method != 0 && method == CONTINUATION_ENTRY.load(Ordering::Relaxed)
}

/// The interrupted (pc, sp, fp) from a signal's `ucontext`.
pub fn registers(ucontext: *mut c_void) -> Option<(usize, usize, usize)> {
    if ucontext.is_null() {
        return None;
    }
    // SAFETY: the kernel passed a valid ucontext for this signal.
    let gregs = unsafe { &(*(ucontext as *const libc::ucontext_t)).uc_mcontext.gregs };
    let reg = |r: libc::c_int| gregs.get(r as usize).map(|&v| v as usize);
    Some((reg(libc::REG_RIP)?, reg(libc::REG_RSP)?, reg(libc::REG_RBP)?))
}

/// One Java frame found on the stack.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PhysFrame {
    /// An interpreted frame: its `Method*` and bytecode pointer (as last saved).
    Interpreted { method: usize, bcp: usize },
    /// A compiled frame: its PC and its code blob, whose `method` is the
    /// `Method*` the nmethod was compiled for (the root of any inlined methods).
    Compiled { pc: usize, blob: Blob },
}

/// Where a walk starts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Start {
    /// A walk can start (see [`JavaStack`]).
    Frames,
    /// The thread is outside Java with no Java frame on its stack.
    NoJavaFrame,
    /// No usable starting point.
    Unknown,
}

/// A walk over the current thread's Java frames, leaf first.
pub struct JavaStack<'a> {
    l: &'a Layout,
    pc: usize,
    sp: usize,
    fp: usize,
    /// Stack words below this are not read.
    lo: usize,
    /// The thread's stack base (exclusive).
    hi: usize,
    /// The registers are the interrupted ones (the frame may be half built).
    top: bool,
    steps: u32,
    /// The walk reached the thread's first Java call (nothing below it).
    bottom: bool,
    /// The walk ended at the continuation return barrier: the frames below,
    /// down to the continuation entry, are still frozen.
    frozen: bool,
}

const MAX_STEPS: u32 = 8192;
/// Thread stacks larger than this are not believed (HotSpot's limit is 1 GiB).
const MAX_STACK: usize = 1 << 30;

impl<'a> JavaStack<'a> {
    /// Prepares a walk of the current thread (`thread` is its JavaThread*;
    /// `regs` the interrupted pc, sp, fp).
    pub fn new(l: &'a Layout, thread: usize, regs: (usize, usize, usize)) -> (Start, JavaStack<'a>) {
        let (stack_low, hi) = l.stack(thread);
        let mut w = JavaStack { l, pc: 0, sp: 0, fp: 0, lo: 0, hi, top: false, steps: 0, bottom: false, frozen: false };
        // The bounds must describe the stack we run on (this handler's own
        // frame is on it): otherwise the thread structure is not what we
        // think (a thread being torn down), and nothing is read from it.
        let here = &w as *const JavaStack as usize;
        if here < stack_low || here >= hi || hi - stack_low > MAX_STACK {
            return (Start::Unknown, w);
        }
        let (asp, afp, apc) = l.anchor(thread);
        // Every frame walked lies above this handler's frame on the stack.
        let live = |sp: usize| sp > here && sp < hi && sp.is_multiple_of(8);
        let start = if asp != 0 {
            // Outside Java (or leaving it): the anchor is the last Java frame.
            // With no saved pc, the return address sits just below its sp.
            if !live(asp) {
                return (Start::Unknown, w);
            }
            w.sp = asp;
            w.fp = afp;
            w.lo = asp.saturating_sub(8);
            w.pc = if apc != 0 { apc } else { w.word(asp.wrapping_sub(8)).unwrap_or(0) };
            Start::Frames
        } else if matches!(l.thread_state(thread), THREAD_IN_JAVA | THREAD_IN_JAVA_TRANS) {
            (w.pc, w.sp, w.fp) = regs;
            w.lo = w.sp;
            w.top = true;
            Start::Frames
        } else {
            Start::NoJavaFrame
        };
        let bad = !live(w.sp) || w.pc == 0;
        if start == Start::Frames && bad {
            return (Start::Unknown, w);
        }
        (start, w)
    }

    /// Whether the walk ended at the thread's first Java call, rather than
    /// at something it could not step over.
    pub fn reached_bottom(&self) -> bool {
        self.bottom
    }

    /// Whether the walk ended at a virtual thread's frames still frozen in
    /// its continuation (see [`CONT_RETURN_BARRIER`]): what lies below them
    /// is the continuation entry, but which frames are in between is
    /// unknown to a stack walk.
    pub fn reached_frozen_frames(&self) -> bool {
        self.frozen
    }

    /// A stack word of this thread, if inside the readable range.
    fn word(&self, addr: usize) -> Option<usize> {
        if addr < self.lo || addr.checked_add(8)? > self.hi || !addr.is_multiple_of(8) {
            return None;
        }
        // SAFETY: [lo, hi) is the live part of the current thread's own stack
        // (from the interrupted or anchored sp up to the stack base).
        Some(unsafe { (addr as *const usize).read_volatile() })
    }

    /// Moves to the caller; false ends the walk.
    fn step_to(&mut self, pc: usize, sp: usize, fp: usize) -> bool {
        if sp <= self.sp || sp >= self.hi || pc == 0 {
            return false;
        }
        (self.pc, self.sp, self.fp, self.top) = (pc, sp, fp, false);
        true
    }

    /// For a frame not (or no longer) set up: the return address is at `sp`,
    /// or at `sp + 8` when only `rbp` was pushed. A candidate counts only if
    /// it points into the code cache.
    fn unwind_unbuilt(&mut self) -> bool {
        let (sp, fp) = (self.sp, self.fp);
        if let Some(ret) = self.word(sp).filter(|&r| self.l.in_code_cache(r)) {
            return self.step_to(ret, sp + 8, fp);
        }
        match (self.word(sp + 8), self.word(sp)) {
            (Some(ret), Some(saved_fp)) if self.l.in_code_cache(ret) => self.step_to(ret, sp + 16, saved_fp),
            _ => false,
        }
    }

    /// Steps over a frame of `blob` (compiled method or stub).
    fn unwind_blob(&mut self, blob: &Blob) -> bool {
        if self.top && (self.pc < blob.frame_complete || blob.frame_bytes == 0) {
            return self.unwind_unbuilt();
        }
        if blob.frame_bytes == 0 {
            return false;
        }
        let sender_sp = self.sp + blob.frame_bytes;
        let (ret, saved_fp) = (self.word(sender_sp - 8), self.word(sender_sp - 16));
        match (ret, saved_fp) {
            (Some(ret), Some(fp)) if self.l.in_code_cache(ret) => self.step_to(ret, sender_sp, fp),
            // An interrupted epilogue: the frame is already popped.
            _ if self.top => self.unwind_unbuilt(),
            _ => false,
        }
    }

    /// Steps over an entry frame (the VM calling Java) to the Java frames
    /// that called into the VM, through the call wrapper's saved anchor. The
    /// wrapper is a C++ object on this same stack.
    fn cross_entry_frame(&mut self) -> bool {
        let Some((slot, [o_sp, o_fp, o_pc])) = self.l.entry_frame(self.fp) else { return false };
        let Some(wrapper) = self.word(slot).filter(|&w| w > self.sp && w < self.hi) else { return false };
        let (Some(sp), Some(fp), Some(pc)) = (self.word(wrapper + o_sp), self.word(wrapper + o_fp), self.word(wrapper + o_pc)) else { return false };
        if sp == 0 {
            self.bottom = true; // no Java frame below: the thread's first Java call
            return false;
        }
        let pc = if pc != 0 { pc } else { self.word(sp.wrapping_sub(8)).unwrap_or(0) };
        self.step_to(pc, sp, fp)
    }

    /// Steps over an interpreted frame; returns its Method* and bcp.
    fn unwind_interpreted(&mut self) -> Option<PhysFrame> {
        let fp = self.fp;
        if fp < self.sp || !fp.is_multiple_of(8) {
            return None;
        }
        let method = self.word(Layout::interpreted_method_slot(fp))?;
        let bcp = self.word(Layout::interpreted_bcp_slot(fp)).unwrap_or(0);
        let ret = self.word(fp.wrapping_add(8))?;
        let saved_fp = self.word(fp)?;
        let sender_sp = self.word(Layout::interpreted_sender_sp_slot(fp)).filter(|&s| s >= fp.wrapping_add(16) && s < self.hi).unwrap_or(fp.wrapping_add(16));
        if method == 0 || !self.step_to(ret, sender_sp, saved_fp) {
            // The frame is still reported: its slots were read.
            self.steps = MAX_STEPS;
        }
        (method != 0).then_some(PhysFrame::Interpreted { method, bcp })
    }
}

impl Iterator for JavaStack<'_> {
    type Item = PhysFrame;

    fn next(&mut self) -> Option<PhysFrame> {
        while self.steps < MAX_STEPS {
            self.steps += 1;
            let pc = self.pc;
            if pc == CONT_RETURN_BARRIER.load(Ordering::Relaxed) {
                self.frozen = true;
                return None;
            }
            if self.l.is_call_stub_return(pc) {
                // Below is the VM that called Java; it may itself have been
                // called from Java.
                if self.cross_entry_frame() {
                    continue;
                }
                return None;
            }
            if self.l.in_interpreter(pc) {
                return self.unwind_interpreted();
            }
            if let Some(blob) = self.l.find_blob(pc) {
                let moved = self.unwind_blob(&blob);
                if !moved {
                    self.steps = MAX_STEPS;
                }
                if blob.method != 0 {
                    return Some(PhysFrame::Compiled { pc, blob });
                }
                continue;
            }
            // Native code at the top (a leaf call from Java without an
            // anchor): follow rbp once if it leads back into Java code.
            if self.top {
                let fp = self.fp;
                let ok = match (self.word(fp.wrapping_add(8)), self.word(fp)) {
                    (Some(ret), Some(saved)) if fp > self.sp && self.l.in_code_cache(ret) => self.step_to(ret, fp.wrapping_add(16), saved),
                    _ => self.unwind_unbuilt(),
                };
                if ok {
                    continue;
                }
            }
            return None;
        }
        None
    }
}

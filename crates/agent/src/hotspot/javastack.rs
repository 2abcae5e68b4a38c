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
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

use crate::hotspot::frames::{Blob, Layout, THREAD_IN_JAVA, THREAD_IN_JAVA_TRANS};
use crate::hotspot::safemem;

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

/// The address of libjvm's `OptoRuntime::_exception_blob` (0: not known),
/// the pointer to C2's exception blob (see [`JavaStack::unwind_exception_blob`]).
/// The variable is read at each use: C2 may make the blob after the
/// address was found.
static EXCEPTION_BLOB_SLOT: AtomicUsize = AtomicUsize::new(0);

/// Notes where libjvm keeps the pointer to C2's exception blob (see
/// [`EXCEPTION_BLOB_SLOT`]). Call off the signal path.
pub fn set_exception_blob_slot(addr: usize) {
    EXCEPTION_BLOB_SLOT.store(addr, Ordering::Relaxed);
}

/// The addresses of libjvm's pointers to the deoptimization blob and the
/// uncommon-trap blob (0: not known). A frame whose return address leads into
/// one of them is being deoptimized, or was patched to be on return: its
/// layout is the blob's business, which only HotSpot's own frame code
/// reads right (see [`JavaStack::doubtful`]).
static DEOPT_BLOB_SLOTS: [AtomicUsize; 2] = [const { AtomicUsize::new(0) }; 2];

/// Notes where libjvm keeps the pointers to the deoptimization and
/// uncommon-trap blobs (see [`DEOPT_BLOB_SLOTS`]). Call off the signal path.
pub fn set_deopt_blob_slots(deopt: usize, uncommon_trap: usize) {
    for (slot, addr) in DEOPT_BLOB_SLOTS.iter().zip([deopt, uncommon_trap]) {
        slot.store(addr, Ordering::Relaxed);
    }
}

/// Whether both deoptimization blobs' pointers are known: a walk can then
/// tell a frame under deoptimization (see [`JavaStack::doubtful`]).
pub fn knows_deopt_blobs() -> bool {
    DEOPT_BLOB_SLOTS.iter().all(|s| s.load(Ordering::Relaxed) != 0)
}

/// Whether `blob` (a code blob's start) is one of the deoptimization blobs.
fn is_deopt_blob(blob: usize) -> bool {
    DEOPT_BLOB_SLOTS.iter().any(|s| {
        let slot = s.load(Ordering::Relaxed);
        // SAFETY: the address of a pointer-sized static variable of libjvm,
        // mapped for the process's life (see `set_deopt_blob_slots`).
        slot != 0 && blob != 0 && unsafe { (slot as *const usize).read_volatile() } == blob
    })
}

/// How the top frames found in C2's exception blob were stepped: frame
/// whole, one word pushed (or left), none, whole with `rdx` reused, not
/// stepped (see [`JavaStack::unwind_exception_blob`]).
static EXCEPTION_BLOB_STEPS: [AtomicU64; 5] = [const { AtomicU64::new(0) }; 5];

/// [`EXCEPTION_BLOB_STEPS`] since the process started.
pub fn exception_blob_steps() -> [u64; 5] {
    let mut out = [0; 5];
    for (o, c) in out.iter_mut().zip(&EXCEPTION_BLOB_STEPS) {
        *o = c.load(Ordering::Relaxed);
    }
    out
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

/// The interrupted values of the general registers `which` from a signal's `ucontext`.
fn interrupted<const N: usize>(ucontext: *mut c_void, which: [libc::c_int; N]) -> Option<[usize; N]> {
    if ucontext.is_null() {
        return None;
    }
    // SAFETY: the kernel passed a valid ucontext for this signal.
    let gregs = unsafe { &(*(ucontext as *const libc::ucontext_t)).uc_mcontext.gregs };
    let mut out = [0; N];
    for (o, r) in out.iter_mut().zip(which) {
        *o = *gregs.get(r as usize)? as usize;
    }
    Some(out)
}

/// The interrupted (pc, sp, fp) from a signal's `ucontext`.
pub fn registers(ucontext: *mut c_void) -> Option<(usize, usize, usize)> {
    let [pc, sp, fp] = interrupted(ucontext, [libc::REG_RIP, libc::REG_RSP, libc::REG_RBP])?;
    Some((pc, sp, fp))
}

/// The interrupted `r13`, `rax` and `rdx` from a signal's `ucontext` (see
/// [`JavaStack::with_more_registers`]).
pub fn more_registers(ucontext: *mut c_void) -> Option<(usize, usize, usize)> {
    let [r13, rax, rdx] = interrupted(ucontext, [libc::REG_R13, libc::REG_RAX, libc::REG_RDX])?;
    Some((r13, rax, rdx))
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
    /// The thread is being deoptimized (see [`JavaStack::deoptimizing`]).
    deopt: bool,
    /// Java frames returned so far.
    found: u32,
    /// The walk ended at an entry frame it could not cross.
    at_entry: bool,
    /// The interrupted `r13`, `rax` and `rdx` (see [`more_registers`]), or 0.
    more: (usize, usize, usize),
    /// The last frame returned was a Java frame (the next pc is its return
    /// address), not yet followed by an entry frame.
    after_java: bool,
    /// See [`JavaStack::doubtful`].
    doubt: bool,
    /// The walk started at the interrupted registers, not at the anchor.
    at_registers: bool,
    /// Callers' blobs may come from the cache (see [`JavaStack::cached`]).
    cached: bool,
}

const MAX_STEPS: u32 = 8192;
/// Thread stacks larger than this are not believed (HotSpot's limit is 1 GiB).
const MAX_STACK: usize = 1 << 30;

impl<'a> JavaStack<'a> {
    /// Prepares a walk of the current thread (`thread` is its JavaThread*;
    /// `regs` the interrupted pc, sp, fp).
    pub fn new(l: &'a Layout, thread: usize, regs: (usize, usize, usize)) -> (Start, JavaStack<'a>) {
        let (stack_low, hi) = l.stack(thread);
        let mut w = JavaStack {
            l,
            pc: 0,
            sp: 0,
            fp: 0,
            lo: 0,
            hi,
            top: false,
            steps: 0,
            bottom: false,
            frozen: false,
            deopt: false,
            found: 0,
            at_entry: false,
            more: (0, 0, 0),
            after_java: false,
            doubt: false,
            at_registers: false,
            cached: false,
        };
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
        let in_java = matches!(l.thread_state(thread), THREAD_IN_JAVA | THREAD_IN_JAVA_TRANS);
        // A thread still running generated code with a last Java sp but no
        // pc has recorded the anchor for a call it has not made yet (a
        // stub, about to call the VM): the word below that sp is stale, and
        // the interrupted registers tell where the thread is (as
        // AsyncGetCallTrace does: it takes an anchor only with a pc).
        let anchor_ahead = asp != 0 && apc == 0 && in_java && l.in_code_cache(regs.0);
        let start = if asp != 0 && !anchor_ahead {
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
        } else if in_java {
            (w.pc, w.sp, w.fp) = regs;
            w.lo = w.sp;
            w.top = true;
            w.at_registers = true;
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

    /// Walks a thread inside HotSpot's deoptimization handler (between
    /// `Deoptimization::fetch_unroll_info` or `uncommon_trap` and the end of
    /// `unpack_frames`), where AsyncGetCallTrace refuses. Only from the
    /// anchor the deoptimization blob set when it called the VM: while the
    /// thread runs the blob's own code its frames are being rearranged, so
    /// the walk gives up (false). Before the frames are unpacked, the
    /// compiled frame being deoptimized is still whole under the blob's
    /// frame and the walk goes on as usual. Once the blob has replaced it
    /// with skeletal interpreter frames (whose `Method*` slots are not yet
    /// written), the first Java frame met is interpreted: the walk ends
    /// there without naming it.
    pub fn deoptimizing(&mut self) -> bool {
        self.deopt = true;
        !self.top
    }

    /// Gives the walk the interrupted `r13` and `rax`, for a thread stopped
    /// in an interpreter method entry before the new frame is built (the
    /// interpreter keeps the caller's `sp` in `r13` there, and the return
    /// address at `sp` or, once popped while the locals are pushed, in
    /// `rax`). Used only for the interrupted frame, and only when `rbp`
    /// does not lead to an interpreted frame: that of a caller the compiled
    /// code's adapter entered the interpreter from.
    pub fn with_more_registers(&mut self, more: (usize, usize, usize)) {
        if self.top {
            self.more = more;
        }
    }

    /// Whether the walk ended at the thread's first Java call, rather than
    /// at something it could not step over.
    pub fn reached_bottom(&self) -> bool {
        self.bottom
    }

    /// Whether the walk ended at an entry frame (the VM calling Java) it
    /// could not cross: what lies below is the VM's, and whether Java
    /// frames lie below that is unknown.
    pub fn ended_at_entry(&self) -> bool {
        self.at_entry
    }

    /// Whether the walk ended at a virtual thread's frames still frozen in
    /// its continuation (see [`CONT_RETURN_BARRIER`]): what lies below them
    /// is the continuation entry, but which frames are in between is
    /// unknown to a stack walk.
    pub fn reached_frozen_frames(&self) -> bool {
        self.frozen
    }

    /// Whether the walk stepped over a frame whose layout it cannot vouch
    /// for: one of the deoptimization blobs (a frame being deoptimized, or a
    /// return address patched to deoptimize its frame on return, whose real
    /// pc HotSpot saved elsewhere), or any other stub that a Java frame
    /// returns into. The frames found after that may be wrong. Walks that
    /// must name every frame right stop there (see `fullwalk`); the others
    /// keep the old behaviour.
    pub fn doubtful(&self) -> bool {
        self.doubt
    }

    /// Finds callers' blobs through `blob_cache` (see
    /// `Layout::find_blob_cached`). Only for a walk from the thread's real
    /// registers or anchor: from a guessed start (a stack scan's candidate)
    /// a stale return address may lead to an nmethod already freed, which
    /// only the code heap's own map tells.
    pub fn cached(&mut self) {
        self.cached = true;
    }

    /// The pc of the frame the next step starts from (its caller's return
    /// address once a frame was returned).
    pub fn next_pc(&self) -> usize {
        self.pc
    }

    /// Whether the walk started at the interrupted registers (the thread
    /// runs Java code), rather than at the last Java frame it left.
    pub fn started_at_registers(&self) -> bool {
        self.at_registers
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

    /// The top frame stopped inside a compiled method's prologue (before
    /// its frame is complete): where the caller's return address and `rbp`
    /// are, told by the instruction at `pc` (see [`prologue_step`]), read
    /// directly from the blob's committed code. `None` when the instruction
    /// is not one the prologue is known to run.
    fn unwind_in_prologue(&mut self, blob: &Blob) -> Option<bool> {
        let (pc, end) = (self.pc, blob.start.wrapping_add(blob.size));
        if blob.size == 0 || pc < blob.start || pc.checked_add(8)? > end {
            return None;
        }
        // SAFETY: [pc, pc + 8) lies inside the blob, in its code heap's
        // committed range (see `Layout::find_blob`), mapped for the JVM's life.
        let code = unsafe { (pc as *const [u8; 8]).read_unaligned() };
        // SAFETY: as above, for [pc - 8, pc) when it lies inside the blob too.
        let before = (pc >= blob.start + 8).then(|| unsafe { ((pc - 8) as *const [u8; 8]).read_unaligned() });
        let (ret_at, sender_sp, fp) = match prologue_step(before, code, blob.frame_bytes)? {
            Prologue::NothingDone => (self.sp, self.sp + 8, self.fp),
            Prologue::RbpPushed => (self.sp + 8, self.sp + 16, self.word(self.sp)?),
            Prologue::RbpInRegister => (self.sp + blob.frame_bytes - 8, self.sp + blob.frame_bytes, self.fp),
            Prologue::Complete => (self.sp + blob.frame_bytes - 8, self.sp + blob.frame_bytes, self.word(self.sp + blob.frame_bytes - 16)?),
        };
        let ret = self.word(ret_at).filter(|&r| self.l.in_code_cache(r))?;
        Some(self.step_to(ret, sender_sp, fp))
    }

    /// The top frame stopped inside a compiled method's epilogue, after
    /// its frame was released (see [`epilogue_step`]): the caller's return
    /// address is at `sp`, or at `sp + 8` before `rbp` is popped. `None`
    /// when the instruction at `pc` is not one of the epilogue's last.
    fn unwind_in_epilogue(&mut self, blob: &Blob) -> Option<bool> {
        let (pc, end) = (self.pc, blob.start.wrapping_add(blob.size));
        if blob.size == 0 || blob.method == 0 || pc < blob.start + 8 || pc.checked_add(8)? > end {
            return None;
        }
        // SAFETY: [pc - 8, pc + 8) lies inside the blob, in its code heap's
        // committed range (see `Layout::find_blob`), mapped for the JVM's life.
        let (before, code) = unsafe { (((pc - 8) as *const [u8; 8]).read_unaligned(), (pc as *const [u8; 8]).read_unaligned()) };
        let (ret_at, sender_sp, fp) = match epilogue_step(before, code)? {
            Epilogue::RbpSaved => (self.sp + 8, self.sp + 16, self.word(self.sp)?),
            Epilogue::FrameGone => (self.sp, self.sp + 8, self.fp),
        };
        let ret = self.word(ret_at).filter(|&r| self.l.in_code_cache(r))?;
        Some(self.step_to(ret, sender_sp, fp))
    }

    /// Steps over a frame of `blob` (compiled method or stub).
    fn unwind_blob(&mut self, blob: &Blob) -> bool {
        if self.top && self.more.2 != 0 && blob.start != 0 && blob.start == self.exception_blob() {
            if let Some(moved) = self.unwind_exception_blob(blob) {
                return moved;
            }
        }
        if self.top && (self.pc < blob.frame_complete || blob.frame_bytes == 0) {
            if let Some(moved) = self.unwind_in_prologue(blob) {
                return moved;
            }
            return self.unwind_unbuilt();
        }
        if self.top {
            if let Some(moved) = self.unwind_in_epilogue(blob) {
                return moved;
            }
        }
        if blob.frame_bytes == 0 {
            return false;
        }
        let sender_sp = self.sp + blob.frame_bytes;
        let (ret, saved_fp) = (self.word(sender_sp - 8), self.word(sender_sp - 16));
        match (ret, saved_fp) {
            (Some(ret), Some(fp)) if self.l.in_code_cache(ret) => self.step_to(ret, sender_sp, fp),
            _ if self.unwind_pushed(blob) => true,
            // An interrupted epilogue: the frame is already popped.
            _ if self.top => self.unwind_unbuilt(),
            _ => false,
        }
    }

    /// C2's exception blob (`OptoRuntime::_exception_blob`; 0 if unknown).
    fn exception_blob(&self) -> usize {
        let slot = EXCEPTION_BLOB_SLOT.load(Ordering::Relaxed);
        if slot == 0 {
            return 0;
        }
        // SAFETY: the address of a pointer-sized static variable of libjvm,
        // mapped for the process's life (see `set_exception_blob_slot`).
        unsafe { (slot as *const usize).read_volatile() }
    }

    /// The top frame is in C2's exception blob, entered by a jump from the
    /// compiled method `m` an exception reached, with the exception's pc in
    /// `m` (the return address of the call that threw, or the pc that
    /// faulted) in `rdx`; `m`'s frame is whole at the entry `sp`. The blob
    /// pushes `rdx` as its return address, reserves a word for `rbp`, calls
    /// `OptoRuntime::handle_exception_C` (which clobbers `rdx`; the VM's
    /// anchor covers the call itself), pops both words again, reloads `rdx`
    /// with the exception pc and jumps to the handler. Where the words are
    /// is told by comparing them with `rdx`; with `rdx` clobbered, the
    /// frame is whole. The walk goes on at `m` (the pc in `rdx`, or in the
    /// frame); `rbp` is still `m`'s all along. `None` when nothing fits.
    fn unwind_exception_blob(&mut self, blob: &Blob) -> Option<bool> {
        let (rdx, sp, fp) = (self.more.2, self.sp, self.fp);
        let frame = blob.frame_bytes.max(16);
        let ret_slot = self.word(sp + frame - 8);
        let in_method = |pc: usize| self.l.find_blob(pc).is_some_and(|b| b.method != 0);
        let (case, moved) = if ret_slot == Some(rdx) && in_method(rdx) {
            (0, self.step_to(rdx, sp + frame, fp))
        } else if self.word(sp) == Some(rdx) && in_method(rdx) {
            (1, self.step_to(rdx, sp + 8, fp))
        } else if in_method(rdx) {
            // At the entry, or after the frame is gone: `m` at this `sp`.
            (self.pc, self.top) = (rdx, false);
            (2, true)
        } else if let Some(ret) = ret_slot.filter(|&r| in_method(r) && follows_call(self.l, r)) {
            (3, self.step_to(ret, sp + frame, fp))
        } else {
            (4, false)
        };
        if let Some(c) = EXCEPTION_BLOB_STEPS.get(case) {
            c.fetch_add(1, Ordering::Relaxed);
        }
        (case != 4).then_some(moved)
    }

    /// A compiled frame with a word or two pushed below it: C2 copies
    /// between stack slots with `push [rsp+a]; pop [rsp+b]` (the top frame
    /// interrupted between the two), and C1 pushes a stub's arguments
    /// before calling it (`slow_subtype_check`: the frame seen from the
    /// stub's return address); C2's runtime stubs copy their return
    /// address the same way. The frame then ends 8 or 16 bytes higher;
    /// taken only where that word is a return address after a call.
    fn unwind_pushed(&mut self, blob: &Blob) -> bool {
        for pushed in [8, 16] {
            let sender_sp = self.sp + blob.frame_bytes + pushed;
            if let (Some(ret), Some(fp)) = (self.word(sender_sp - 8), self.word(sender_sp - 16)) {
                if follows_call(self.l, ret) {
                    return self.step_to(ret, sender_sp, fp);
                }
            }
        }
        false
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

    /// The interrupted frame is in the interpreter but `rbp` does not lead
    /// to an interpreted frame of a live method: a method entry before its
    /// frame is built (see [`JavaStack::with_more_registers`]). Steps to
    /// the caller, leaving out the method being entered; `None` when `rbp`
    /// is fine or the entry registers do not fit.
    fn unwind_interpreter_entry(&mut self) -> Option<bool> {
        let (sender_sp, rax, _) = self.more;
        if sender_sp == 0 {
            return None;
        }
        let fp = self.fp;
        let framed = fp >= self.sp
            && fp.is_multiple_of(8)
            && self.word(Layout::interpreted_method_slot(fp)).is_some_and(|m| m != 0 && crate::hotspot::method_ids::lookup(self.l, m).is_some());
        if framed || sender_sp <= self.sp || sender_sp >= self.hi || !sender_sp.is_multiple_of(8) {
            return None;
        }
        let ret = self.word(self.sp).filter(|&r| follows_call(self.l, r)).or_else(|| Some(rax).filter(|&r| follows_call(self.l, r)))?;
        Some(self.step_to(ret, sender_sp, fp))
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

/// How far a compiled method's prologue has got, from the instruction
/// about to run (see [`prologue_step`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Prologue {
    /// Nothing pushed yet: the return address is at `sp`.
    NothingDone,
    /// `rbp` pushed, frame not allocated: `[sp]` = caller's `rbp`, then the
    /// return address.
    RbpPushed,
    /// Frame allocated, caller's `rbp` not saved yet (still in the register).
    RbpInRegister,
    /// Frame whole (the rest of the prologue, such as JDK 21's nmethod
    /// entry barrier, saves nothing more).
    Complete,
}

/// Where `code`, the bytes at the interrupted `pc` of a compiled method
/// with a frame of `frame_bytes` (return address and saved `rbp`
/// included), stands in its prologue. HotSpot's x86_64 prologues
/// (`C2_MacroAssembler::verified_entry`, C1's `build_frame`, JDK 11–25):
/// with a stack bang, `mov [rsp-N], eax; push rbp; [mov rbp, rsp;]
/// sub rsp, F-16`; without (C2 leaf methods with small frames), `sub rsp,
/// F-8; mov [rsp+F-16], rbp`; JDK 21 and later then run the entry barrier,
/// `cmp dword [r15+d8], imm32` and a conditional jump (`je` over a call
/// in C1's code, `jne` to a stub in C2's). The immediate and displacement
/// are checked against the frame size, so an instruction that only looks
/// like one of these elsewhere in the code is not taken for it; the jump
/// counts only right after the barrier's `cmp` (`before`, the 8 bytes
/// before `pc`), since the inline-cache check before the verified entry
/// ends with a `jne` too. `None` for any other instruction.
fn prologue_step(before: Option<[u8; 8]>, code: [u8; 8], frame_bytes: usize) -> Option<Prologue> {
    let [b0, b1, b2, b3, b4, b5, b6, _] = code;
    let fb = frame_bytes as i64;
    if fb < 16 {
        return None;
    }
    if before.is_some_and(|b| b[..3] == [0x41, 0x81, 0x7F]) && matches!((b0, b1), (0x74, _) | (0x75, _) | (0x0F, 0x84) | (0x0F, 0x85)) {
        return Some(Prologue::Complete);
    }
    // sub rsp, imm8 (48 83 EC ib) or imm32 (48 81 EC id).
    let sub = match code {
        [0x48, 0x83, 0xEC, i, ..] => Some(i as i8 as i64),
        [0x48, 0x81, 0xEC, a, b, c, d, _] => Some(i32::from_le_bytes([a, b, c, d]) as i64),
        _ => None,
    };
    if let Some(imm) = sub {
        return match fb - imm {
            8 => Some(Prologue::NothingDone),
            16 => Some(Prologue::RbpPushed),
            _ => None,
        };
    }
    // mov [rsp], rbp (48 89 2C 24); [rsp+d8] (48 89 6C 24 d8); [rsp+d32] (48 89 AC 24 d32).
    let saves_rbp = match code {
        [0x48, 0x89, 0x2C, 0x24, ..] => Some(0),
        [0x48, 0x89, 0x6C, 0x24, d, ..] => Some(d as i8 as i64),
        [0x48, 0x89, 0xAC, 0x24, a, b, c, d] => Some(i32::from_le_bytes([a, b, c, d]) as i64),
        _ => None,
    };
    if let Some(disp) = saves_rbp {
        return (disp + 16 == fb).then_some(Prologue::RbpInRegister);
    }
    match (b0, b1, b2, b3) {
        // push rbp
        (0x55, ..) => Some(Prologue::NothingDone),
        // the stack bang: mov [rsp-N], eax (89 84 24 d32, N > 0)
        (0x89, 0x84, 0x24, _) if i32::from_le_bytes([b3, b4, b5, b6]) < 0 => Some(Prologue::NothingDone),
        // mov rbp, rsp (48 89 E5 / 48 8B EC), with -XX:+PreserveFramePointer
        (0x48, 0x89, 0xE5, _) | (0x48, 0x8B, 0xEC, _) => Some(Prologue::RbpPushed),
        // the entry barrier: cmp dword [r15+d8], imm32 (41 81 7F) or [r15+d32] (41 81 BF)
        (0x41, 0x81, 0x7F | 0xBF, _) => Some(Prologue::Complete),
        _ => None,
    }
}

/// How far a compiled method's epilogue has got, from the instruction
/// about to run (see [`epilogue_step`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Epilogue {
    /// The frame is released but `rbp` not yet popped: `[sp]` = the
    /// caller's `rbp`, then the return address.
    RbpSaved,
    /// Only the return address is left, at `sp`.
    FrameGone,
}

/// Where `code`, the bytes at the interrupted `pc` of a compiled method
/// (`before`: the 8 bytes before it), stands in its epilogue, once the
/// frame is released. HotSpot's x86_64 epilogues (C2's `MachEpilogNode`,
/// C1's `remove_frame`, JDK 11–25): `add rsp, F-16; pop rbp`, then the
/// return poll, `cmp rsp, [r15+d]; ja stub` (JDK 17 and later) or
/// `mov r10, [r15+d8]; test [r10], eax` (JDK 11's thread-local poll),
/// then `ret`. There a walk that steps over a whole frame from `sp` reads
/// the caller's frame as this one's and names stale words as callers. An
/// instruction counts as part of the epilogue only where what follows or
/// precedes it pins it down (JDK 11's poll is the same in loops, but not
/// followed by `ret`). `None` for any other instruction.
fn epilogue_step(before: [u8; 8], code: [u8; 8]) -> Option<Epilogue> {
    match code {
        [0x5D, ..] => Some(Epilogue::RbpSaved),
        [0xC3, ..] => Some(Epilogue::FrameGone),
        // cmp rsp, [r15+d8] (49 3B 67 d8) before its ja, or [r15+d32] (49 3B A7 d32).
        [0x49, 0x3B, 0x67, _, 0x0F, 0x87, ..] | [0x49, 0x3B, 0xA7, ..] => Some(Epilogue::FrameGone),
        // ja to the poll stub, right after the cmp.
        [0x0F, 0x87, ..] if matches!(before, [_, _, _, _, 0x49, 0x3B, 0x67, _]) => Some(Epilogue::FrameGone),
        // JDK 11: mov r10, [r15+d8]; test [r10], eax; ret.
        [0x4D, 0x8B, 0x57, _, 0x41, 0x85, 0x02, 0xC3] => Some(Epilogue::FrameGone),
        [0x41, 0x85, 0x02, 0xC3, ..] if matches!(before, [_, _, _, _, 0x4D, 0x8B, 0x57, _]) => Some(Epilogue::FrameGone),
        _ => None,
    }
}

/// Whether `ret` is a return address into generated code: it lies in the
/// code cache and the bytes just before it end with a call instruction of
/// the kinds HotSpot emits: `call rel32`, `call reg`, `call [rip+disp32]`,
/// `call [reg+disp]`. Read directly when the bytes lie inside a code blob
/// (committed code cache, as in `Layout::find_blob`'s own reads), else
/// with a checked read (the code cache is reserved larger than it is
/// committed).
pub fn follows_call(l: &Layout, ret: usize) -> bool {
    if !l.in_code_cache(ret) {
        return false;
    }
    let in_blob = l.find_blob(ret).is_some_and(|b| b.size != 0 && ret.wrapping_sub(8) >= b.start && ret <= b.start.wrapping_add(b.size));
    let bytes = if in_blob {
        // SAFETY: [ret - 8, ret) lies inside a code blob found in a code
        // heap's committed range, which stays mapped for the JVM's life.
        Some(unsafe { ((ret - 8) as *const [u8; 8]).read_unaligned() })
    } else {
        ret.checked_sub(8).and_then(safemem::read_bytes8)
    };
    calls_before(bytes)
}

/// The call test of [`follows_call`] on the 8 bytes before a return address.
fn calls_before(bytes: Option<[u8; 8]>) -> bool {
    let Some(bytes) = bytes else { return false };
    // The k-th byte before `ret` (1..=8).
    let before = |k: usize| bytes.get(8 - k).copied().unwrap_or(0);
    before(5) == 0xE8
        || (before(2) == 0xFF && before(1) & 0xF8 == 0xD0)
        || (before(6) == 0xFF && before(5) == 0x15)
        || (before(3) == 0xFF && before(2) & 0xF8 == 0x50)
        || (before(6) == 0xFF && before(5) & 0xF8 == 0x90)
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
                    self.after_java = false;
                    continue;
                }
                self.at_entry = !self.bottom;
                return None;
            }
            if self.l.in_interpreter(pc) {
                if self.deopt && self.found == 0 {
                    return None; // a skeletal frame (see `deoptimizing`)
                }
                if self.top {
                    match self.unwind_interpreter_entry() {
                        Some(true) => continue,
                        Some(false) => return None,
                        None => {}
                    }
                }
                self.found += 1;
                self.after_java = true;
                return self.unwind_interpreted();
            }
            // A caller's return address: a live nmethod's, which the cache
            // may know (the interrupted pc is anywhere).
            let found = if self.cached && !self.top { self.l.find_blob_cached(pc) } else { self.l.find_blob(pc) };
            if let Some(blob) = found {
                if blob.method == 0 && (self.after_java || is_deopt_blob(blob.start)) {
                    self.doubt = true;
                }
                let moved = self.unwind_blob(&blob);
                if !moved {
                    self.steps = MAX_STEPS;
                }
                if blob.method != 0 {
                    self.found += 1;
                    self.after_java = true;
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

#[cfg(test)]
mod tests {
    use super::*;
    use Prologue::*;

    fn at(bytes: &[u8]) -> [u8; 8] {
        let mut code = [0x90u8; 8];
        code[..bytes.len()].copy_from_slice(bytes);
        code
    }

    /// C2 without a stack bang (a 48-byte frame): `sub rsp, 40` then
    /// `mov [rsp+32], rbp`; a 16-byte frame saves rbp at `[rsp]`.
    #[test]
    fn c2_prologue_without_a_stack_bang() {
        assert_eq!(prologue_step(None, at(&[0x48, 0x81, 0xEC, 40, 0, 0, 0]), 48), Some(NothingDone));
        assert_eq!(prologue_step(None, at(&[0x48, 0x83, 0xEC, 40]), 48), Some(NothingDone));
        assert_eq!(prologue_step(None, at(&[0x48, 0x89, 0x6C, 0x24, 32]), 48), Some(RbpInRegister));
        assert_eq!(prologue_step(None, at(&[0x48, 0x89, 0xAC, 0x24, 0x20, 1, 0, 0]), 0x130), Some(RbpInRegister));
        assert_eq!(prologue_step(None, at(&[0x48, 0x89, 0x2C, 0x24]), 16), Some(RbpInRegister));
        assert_eq!(prologue_step(None, at(&[0x41, 0x81, 0x7F, 0x20, 1, 0, 0, 0]), 48), Some(Complete), "JDK 21's entry barrier");
        // JDK 25: the barrier's jump right after its cmp; not the inline-cache check's jne.
        let barrier = Some([0x41, 0x81, 0x7F, 0x20, 1, 0, 0, 0]);
        assert_eq!(prologue_step(barrier, at(&[0x0F, 0x85, 0x6F, 0, 0, 0]), 48), Some(Complete));
        assert_eq!(prologue_step(barrier, at(&[0x74, 0x05]), 96), Some(Complete), "C1's je over the call");
        assert_eq!(prologue_step(Some([0x44, 0x8B, 0x56, 0x08, 0x44, 0x3B, 0x50, 0x08]), at(&[0x0F, 0x85, 0, 0, 0, 0]), 48), None);
    }

    /// With a stack bang (C1, and C2 methods that call): bang, push rbp,
    /// optionally mov rbp, rsp, then `sub rsp, F-16`.
    #[test]
    fn prologue_with_a_stack_bang() {
        assert_eq!(prologue_step(None, at(&[0x89, 0x84, 0x24, 0x00, 0xC0, 0xFE, 0xFF]), 64), Some(NothingDone));
        assert_eq!(prologue_step(None, at(&[0x55]), 64), Some(NothingDone));
        assert_eq!(prologue_step(None, at(&[0x48, 0x8B, 0xEC]), 64), Some(RbpPushed));
        assert_eq!(prologue_step(None, at(&[0x48, 0x83, 0xEC, 48]), 64), Some(RbpPushed));
    }

    /// The epilogue's last instructions, JDK 11–25, after the frame was
    /// released; the same instructions elsewhere are not taken for it.
    #[test]
    fn epilogue_after_the_frame_is_released() {
        use Epilogue::*;
        let none = [0x90; 8];
        assert_eq!(epilogue_step(none, at(&[0x5D, 0x49, 0x3B, 0x67, 0x20])), Some(RbpSaved), "pop rbp");
        assert_eq!(epilogue_step(none, at(&[0x49, 0x3B, 0x67, 0x20, 0x0F, 0x87, 1, 0])), Some(FrameGone), "JDK 17's return poll");
        let cmp = [0x90, 0x90, 0x90, 0x5D, 0x49, 0x3B, 0x67, 0x20];
        assert_eq!(epilogue_step(cmp, at(&[0x0F, 0x87, 1, 0, 0, 0, 0xC3])), Some(FrameGone), "its jump");
        assert_eq!(epilogue_step(none, at(&[0xC3])), Some(FrameGone), "ret");
        assert_eq!(epilogue_step(none, [0x4D, 0x8B, 0x57, 0x38, 0x41, 0x85, 0x02, 0xC3]), Some(FrameGone), "JDK 11's return poll");
        let mov = [0x90, 0x90, 0x90, 0x5D, 0x4D, 0x8B, 0x57, 0x38];
        assert_eq!(epilogue_step(mov, at(&[0x41, 0x85, 0x02, 0xC3])), Some(FrameGone));
        // JDK 11's poll inside a loop (no ret after it), a jump after anything
        // but the poll's cmp, and other code.
        assert_eq!(epilogue_step(none, [0x4D, 0x8B, 0x57, 0x38, 0x41, 0x85, 0x02, 0xEB]), None);
        assert_eq!(epilogue_step(mov, at(&[0x41, 0x85, 0x02, 0x75])), None);
        assert_eq!(epilogue_step(none, at(&[0x0F, 0x87, 1, 0, 0, 0])), None);
        assert_eq!(epilogue_step(none, at(&[0x48, 0x83, 0xC4, 0x20])), None, "add rsp: the frame is still whole");
    }

    /// Instructions that look alike but do not fit the frame, and anything
    /// else, are not taken for the prologue.
    #[test]
    fn lookalikes_and_other_code_are_refused() {
        assert_eq!(prologue_step(None, at(&[0x48, 0x83, 0xEC, 8]), 48), None, "sub of another size");
        assert_eq!(prologue_step(None, at(&[0x48, 0x89, 0x6C, 0x24, 8]), 48), None, "rbp stored elsewhere");
        assert_eq!(prologue_step(None, at(&[0x89, 0x84, 0x24, 0x10, 0, 0, 0]), 64), None, "a store above rsp is no bang");
        assert_eq!(prologue_step(None, at(&[0x8B, 0x46, 0x0C]), 64), None);
        assert_eq!(prologue_step(None, at(&[0x55]), 8), None, "no frame");
    }

    /// The stack scan takes a word for a return address only when the
    /// bytes before it end with a call HotSpot emits, at any alignment.
    #[test]
    fn follows_call_knows_hotspots_calls_at_any_alignment() {
        safemem::init();
        let calls: [&[u8]; 6] = [
            &[0xE8, 1, 2, 3, 4],          // call rel32
            &[0x41, 0xFF, 0xD2],          // call r10
            &[0xFF, 0xD0],                // call rax
            &[0xFF, 0x15, 9, 9, 9, 9],    // call [rip+disp32]
            &[0xFF, 0x50, 0x10],          // call [rax+disp8]
            &[0xFF, 0x90, 0x10, 0, 0, 0], // call [rax+disp32]
        ];
        let not_calls: [&[u8]; 3] = [&[0x90, 0x90, 0x90, 0x90, 0x90], &[0x48, 0x89, 0xC3], &[0xFF, 0xE0]];
        for (code, want) in calls.iter().map(|c| (c, true)).chain(not_calls.iter().map(|c| (c, false))) {
            for shift in 0..16 {
                let mut buf = [0x90u8; 64];
                let end = 24 + shift;
                buf[end - code.len()..end].copy_from_slice(code);
                let ret = buf.as_ptr() as usize + end;
                let bytes = safemem::read_bytes8(ret - 8);
                assert_eq!(calls_before(bytes), want, "{code:02x?} ending {shift} bytes in");
            }
        }
        assert!(!calls_before(safemem::read_bytes8(0)), "unreadable memory is no call");
    }
}

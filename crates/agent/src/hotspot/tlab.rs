//! The current thread's thread-local allocation buffer (TLAB) and its exact
//! allocated-bytes counter, as HotSpot's structure table describes them
//! (`Thread::_tlab`, `Thread::_allocated_bytes`,
//! `ThreadLocalAllocBuffer::{_start,_top,_end,_desired_size}`; exported on
//! JDK 11–25). Read by the SampledObjectAlloc callback, on the allocating
//! thread itself and outside any signal handler, to tell how a sampled object
//! was allocated and how many bytes the thread really allocated (see
//! `heap::accuracy`), and at VMInit to tell how much of the main thread's
//! first TLAB is left (see `heap::alloc::arm_first_tlab`). Read only: nothing
//! here writes JVM state.

use std::sync::OnceLock;

use crate::hotspot::frames;
use crate::hotspot::gate;
use crate::hotspot::vmstructs::VmStructs;

/// Byte offsets inside `JavaThread` (the TLAB is embedded in `Thread`).
#[derive(Clone, Copy, Debug)]
struct Offsets {
    start: usize,
    top: usize,
    desired_words: usize,
    allocated_bytes: usize,
    /// `_end`: where allocation in the TLAB stops (its sample point when armed).
    end: Option<usize>,
}

static OFFSETS: OnceLock<Offsets> = OnceLock::new();

/// The thread's TLAB and counter at one moment.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Tlab {
    /// First byte of the current TLAB; 0 when the thread has none (retired
    /// at a GC, or TLABs are off).
    pub start: usize,
    /// Next free byte in it.
    pub top: usize,
    /// The size HotSpot's resizing policy currently wants for this
    /// thread's TLABs, in bytes.
    pub desired_bytes: u64,
    /// Bytes the thread has allocated in its life, including those in its
    /// current TLAB up to `top` (what `Thread::cooked_allocated_bytes`
    /// computes on JDK 11–24).
    pub allocated_bytes: u64,
}

/// Finds the fields in the structure table. Returns why not when one is
/// missing; the caller logs it and allocation accuracy is not reported.
pub fn init(vs: &VmStructs) -> Result<(), String> {
    if !gate::vmstructs_walk_trusted() {
        return Err("this JDK's version is not one HotSpot's internals were tested on".into());
    }
    let off = |t: &str, f: &str| {
        vs.field(t, f).filter(|x| !x.is_static).map(|x| x.offset as usize).ok_or_else(|| format!("the JVM's structure table has no {t}::{f}"))
    };
    let tlab = off("Thread", "_tlab")?;
    let o = Offsets {
        start: tlab + off("ThreadLocalAllocBuffer", "_start")?,
        top: tlab + off("ThreadLocalAllocBuffer", "_top")?,
        desired_words: tlab + off("ThreadLocalAllocBuffer", "_desired_size")?,
        allocated_bytes: off("Thread", "_allocated_bytes")?,
        end: off("ThreadLocalAllocBuffer", "_end").ok().map(|e| tlab + e),
    };
    let _ = OFFSETS.set(o);
    Ok(())
}

/// Whether [`current`] can answer.
pub fn available() -> bool {
    OFFSETS.get().is_some() && frames::layout().is_some()
}

/// The calling Java thread's TLAB, from its `JNIEnv`. Call only from a JVMTI
/// callback on that thread (its `JavaThread` is alive and is not changing
/// its TLAB while it runs our code).
pub fn current(env: usize) -> Option<Tlab> {
    let o = OFFSETS.get()?;
    let thread = frames::layout()?.thread(env);
    if thread == 0 {
        return None;
    }
    let word = |off: usize| {
        // SAFETY: `thread` is the calling thread's own JavaThread (found from
        // its JNIEnv), alive while it runs; the offsets come from this JVM's
        // structure table and lie inside it.
        unsafe { ((thread + off) as *const usize).read_volatile() }
    };
    let (start, top) = (word(o.start), word(o.top));
    let mut allocated_bytes = word(o.allocated_bytes) as u64;
    if start != 0 && top >= start {
        allocated_bytes += (top - start) as u64;
    }
    Some(Tlab { start, top, desired_bytes: (word(o.desired_words) as u64).saturating_mul(8), allocated_bytes })
}

/// Bytes the calling Java thread can still allocate in its current TLAB
/// before the slow path (`_end - _top`); `None` without a TLAB or when the
/// table lacks the fields. Same contract as [`current`].
pub fn room_left(env: usize) -> Option<usize> {
    let o = OFFSETS.get()?;
    let end_off = o.end?;
    let thread = frames::layout()?.thread(env);
    if thread == 0 {
        return None;
    }
    // SAFETY: as in `current`: the calling thread's own JavaThread, fields
    // at offsets from this JVM's structure table.
    let (top, end) = unsafe { (((thread + o.top) as *const usize).read_volatile(), ((thread + end_off) as *const usize).read_volatile()) };
    (top != 0 && end >= top).then(|| end - top)
}

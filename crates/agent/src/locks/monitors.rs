//! Java monitors: a thread that finds a `synchronized` monitor taken gets a
//! JVMTI MonitorContendedEnter event before it blocks and
//! MonitorContendedEntered once it owns the monitor, both on that thread.
//! The time between them is the wait; the sampler decides whether to
//! record it, with the monitor object's class as the leaf frame. The stack
//! is taken at MonitorContendedEnter, before the thread blocks: taken at
//! Entered it would run inside the critical section of the very lock being
//! waited for (the thread owns the monitor by then), stretching every
//! holder's time (Jetty lost 2.4–2.6% of its throughput that way). The events
//! are enabled only while lock profiling runs; HotSpot posts them from the
//! contended path alone, so uncontended locking costs nothing.
//!
//! The monitor's owner is read at MonitorContendedEnter too (by Entered it
//! has let go), from HotSpot's structures
//! ([`crate::hotspot::monitor_owner`]), and named when the wait is
//! recorded ([`owners`]).

use std::cell::{Cell, RefCell};

use jvmti_sys::{jobject, jthread};

use crate::hotspot::monitor_owner::Owner;
use crate::jvmti::{Jni, Jvmti};
use crate::locks::owners;
use crate::locks::sampler::{Kind, LockSampler};
use crate::sampling::signal::monotonic_ns;
use crate::sampling::store::RawFrame;
use crate::sampling::threads::Threads;

thread_local! {
    /// When the thread started waiting for a contended monitor (0: not waiting).
    static ENTERED_AT: Cell<u64> = const { Cell::new(0) };
    /// Its stack then (slot 0 left for the class), and how many frames.
    static STACK: RefCell<(Vec<RawFrame>, usize)> = const { RefCell::new((Vec::new(), 0)) };
    /// The monitor's owner then, where it could be read.
    static OWNER: Cell<Option<Owner>> = const { Cell::new(None) };
}

/// MonitorContendedEnter: the thread is about to block on a monitor; its
/// stack and the monitor's owner are taken now, outside the lock.
///
/// # Safety
/// `object` must be the callback's live reference to the monitor's object
/// (or null), `jni` the callback's environment.
pub unsafe fn on_enter(sampler: &LockSampler, jvmti: Jvmti, jni: Jni, object: jobject) {
    if !sampler.is_running() {
        return;
    }
    let t0 = crate::sampling::cputime::thread_cpu_ns();
    // SAFETY: `object` is the callback's live reference to the monitor's
    // object (not null).
    let owner = owners::layout().filter(|_| !object.is_null()).and_then(|l| unsafe { l.owner(object as usize) });
    let _ = OWNER.try_with(|o| o.set(owner));
    let _ = STACK.try_with(|s| {
        let (frames, n) = &mut *s.borrow_mut();
        *n = sampler.take_stack(jvmti, jni, frames);
    });
    sampler.add_record_ns(crate::sampling::cputime::thread_cpu_ns().saturating_sub(t0));
    let _ = ENTERED_AT.try_with(|t| t.set(monotonic_ns()));
}

/// MonitorContendedEntered: the thread owns `object`'s monitor after waiting.
///
/// # Safety
/// `object` must be the callback's live reference to the monitor's object,
/// `jni` the callback's environment.
pub unsafe fn on_entered(sampler: &LockSampler, registry: &Threads, jvmti: Jvmti, jni: Jni, _thread: jthread, object: jobject) {
    let Ok(start) = ENTERED_AT.try_with(|t| t.replace(0)) else { return };
    let owner = OWNER.try_with(|o| o.take()).ok().flatten();
    if start == 0 {
        return; // profiling started while this thread was waiting
    }
    let waited = monotonic_ns().saturating_sub(start);
    let Some(weight) = sampler.should_record(Kind::Monitor, waited) else { return };
    // Not timed into `record_ns` (two more reads of the thread's CPU clock
    // would cost as much as the lookup).
    let owner = owner.and_then(|o| owners::of_monitor(o, registry, jvmti, jni));
    // SAFETY: `object` is live (this function's contract).
    let class = unsafe { jni.object_class(object) };
    let _ = STACK.try_with(|s| {
        let (frames, n) = &mut *s.borrow_mut();
        // SAFETY: `class` is the local reference just returned (or null).
        unsafe { sampler.record_stack(jvmti, Kind::Monitor, class, weight, frames, *n, owner.as_ref()) };
    });
    // SAFETY: as above; not used afterwards.
    unsafe { jni.delete_local(class) };
}

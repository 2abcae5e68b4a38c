//! Java monitors: a thread that finds a `synchronized` monitor taken gets a
//! JVMTI MonitorContendedEnter event before it blocks and
//! MonitorContendedEntered once it owns the monitor, both on that thread.
//! The time between them is the wait; the sampler decides whether to
//! record it, with the monitor object's class as the leaf frame. The events
//! are enabled only while lock profiling runs; HotSpot posts them from the
//! contended path alone, so uncontended locking costs nothing.

use std::cell::Cell;

use jvmti_sys::{jobject, jthread};

use crate::jvmti::{Jni, Jvmti};
use crate::locks::sampler::{Kind, LockSampler};
use crate::sampling::signal::monotonic_ns;

thread_local! {
    /// When the thread started waiting for a contended monitor (0: not waiting).
    static ENTERED_AT: Cell<u64> = const { Cell::new(0) };
}

/// MonitorContendedEnter: the thread is about to block on `object`'s monitor.
pub fn on_enter(sampler: &LockSampler) {
    if sampler.is_running() {
        let _ = ENTERED_AT.try_with(|t| t.set(monotonic_ns()));
    }
}

/// MonitorContendedEntered: the thread owns `object`'s monitor after waiting.
///
/// # Safety
/// `object` must be the callback's live reference to the monitor's object,
/// `jni` the callback's environment.
pub unsafe fn on_entered(sampler: &LockSampler, jvmti: Jvmti, jni: Jni, _thread: jthread, object: jobject) {
    let Ok(start) = ENTERED_AT.try_with(|t| t.replace(0)) else { return };
    if start == 0 {
        return; // profiling started while this thread was waiting
    }
    let waited = monotonic_ns().saturating_sub(start);
    let Some(weight) = sampler.should_record(Kind::Monitor, waited) else { return };
    // SAFETY: `object` is live (this function's contract).
    let class = unsafe { jni.object_class(object) };
    // SAFETY: `class` is the local reference just returned (or null).
    unsafe {
        sampler.record(jvmti, jni, Kind::Monitor, class, weight);
        jni.delete_local(class);
    }
}

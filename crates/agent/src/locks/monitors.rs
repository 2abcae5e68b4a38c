//! Java monitors: a thread that finds a `synchronized` monitor taken gets a
//! JVMTI MonitorContendedEnter event before it blocks and
//! MonitorContendedEntered once it owns the monitor. The time between them
//! is the wait; the sampler decides whether to record it, with the monitor
//! object's class as the leaf frame. The stack is taken at
//! MonitorContendedEnter, before the thread blocks: taken at Entered it
//! would run inside the critical section of the very lock being waited for
//! (the thread owns the monitor by then), stretching every holder's time
//! (Jetty lost 2.4–2.6% of its throughput that way). The wait is timed from
//! the start of the Enter callback, so the time the thread spends there
//! (the stack, the owner) counts as waiting, as it does for the program: on
//! a loaded machine it was a tenth and more of short waits. The events are
//! enabled only while lock profiling runs; HotSpot posts them from the
//! contended path alone, so uncontended locking costs nothing.
//!
//! Where the pending wait is kept: a platform thread gets both events on
//! its own OS thread, and keeps the wait in thread-locals. A virtual thread
//! may not: since JDK 24 (JEP 491) one blocked on a monitor unmounts, so its
//! Enter is posted on one carrier and its Entered, after the carrier ran
//! other virtual threads (which wait too), on any carrier. Thread-locals
//! of the carrier then lost nine waits in ten. The waits of virtual
//! threads (JDK 21 too, where they stay pinned, for one rule) are kept in
//! a table by the virtual thread's `java.lang.Thread` id instead, bounded
//! ([`MAX_VIRTUAL_WAITS`], [`MAX_VIRTUAL_FRAMES`]).
//!
//! The monitor's owner is read at MonitorContendedEnter too (by Entered it
//! has let go), from HotSpot's structures
//! ([`crate::hotspot::monitor_owner`]), and named when the wait is
//! recorded ([`owners`]).

use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::sync::{Mutex, OnceLock};

use jvmti_sys::{jfieldID, jobject, jthread};

use crate::hotspot::monitor_owner::Owner;
use crate::jvmti::{Jni, Jvmti};
use crate::locks::owners;
use crate::locks::sampler::{Kind, LockSampler};
use crate::sampling::cputime::monotonic_ns;
use crate::sampling::store::RawFrame;
use crate::sampling::threads::Threads;

thread_local! {
    /// When the (platform) thread started waiting for a contended monitor
    /// (0: not waiting).
    static ENTERED_AT: Cell<u64> = const { Cell::new(0) };
    /// Its stack then (slot 0 left for the class), and how many frames.
    /// Also where a virtual thread's stack is taken before it is copied
    /// into [`VIRTUAL`].
    static STACK: RefCell<(Vec<RawFrame>, usize)> = const { RefCell::new((Vec::new(), 0)) };
    /// The monitor's owner then, where it could be read.
    static OWNER: Cell<Option<Owner>> = const { Cell::new(None) };
}

/// Waits of virtual threads pending at most at once: past it, a new wait
/// is not recorded (after a sweep of those pending for over
/// [`STALE_AFTER_NS`]). Enough for every virtual thread blocked at once in
/// all but extreme programs; an entry is a few hundred bytes.
const MAX_VIRTUAL_WAITS: usize = 1 << 16;
/// Stack frames those pending waits may hold in all (16 MiB).
const MAX_VIRTUAL_FRAMES: usize = 1 << 20;
/// A pending wait older than this may be swept out to make room: its
/// Entered was most likely missed (profiling stopped while it waited and
/// the thread has ended since).
const STALE_AFTER_NS: u64 = 60_000_000_000;

/// A virtual thread's wait begun at MonitorContendedEnter.
struct Pending {
    start: u64,
    /// `frames[1..]` the stack (slot 0 left for the class).
    frames: Box<[RawFrame]>,
    owner: Option<Owner>,
}

#[derive(Default)]
struct VirtualWaits {
    by_id: HashMap<i64, Pending>,
    /// Frames held in `by_id`.
    frames: usize,
    /// When a full table may be swept again.
    next_sweep: u64,
}

static VIRTUAL: Mutex<Option<VirtualWaits>> = Mutex::new(None);

impl VirtualWaits {
    fn insert(&mut self, id: i64, wait: Pending, now: u64) {
        if let Some(old) = self.by_id.remove(&id) {
            self.frames -= old.frames.len();
        }
        let n = wait.frames.len();
        if (self.by_id.len() >= MAX_VIRTUAL_WAITS || self.frames + n > MAX_VIRTUAL_FRAMES) && now >= self.next_sweep {
            self.by_id.retain(|_, p| now.saturating_sub(p.start) < STALE_AFTER_NS);
            self.frames = self.by_id.values().map(|p| p.frames.len()).sum();
            self.next_sweep = now + 1_000_000_000;
        }
        if self.by_id.len() < MAX_VIRTUAL_WAITS && self.frames + n <= MAX_VIRTUAL_FRAMES {
            self.frames += n;
            self.by_id.insert(id, wait);
        }
    }

    fn remove(&mut self, id: i64) -> Option<Pending> {
        let wait = self.by_id.remove(&id)?;
        self.frames -= wait.frames.len();
        Some(wait)
    }
}

/// `thread`'s `java.lang.Thread` id if it is a virtual thread, else `None`
/// (a platform thread, or a JDK without virtual threads). JNI only: no
/// `FindClass`, which could run the class loader's Java code inside the
/// monitor callbacks.
///
/// # Safety
/// `thread` must be null or a live reference to a `java.lang.Thread`, `jni`
/// the calling thread's environment.
unsafe fn virtual_id(jni: Jni, thread: jthread) -> Option<i64> {
    // SAFETY: `thread` is null or live (this function's contract).
    if !unsafe { jni.is_virtual_thread(thread) } {
        return None;
    }
    /// `Thread.tid`'s field id, found through the first virtual thread's class.
    static TID: OnceLock<usize> = OnceLock::new();
    let tid = *TID.get_or_init(|| {
        // SAFETY: `thread` is a live virtual thread; `class` the local
        // reference just returned, deleted after its last use. `GetFieldID`
        // finds the field `Thread` declares.
        unsafe {
            let class = jni.object_class(thread);
            let f = if class.is_null() { std::ptr::null_mut() } else { jni.field_id(class, c"tid", c"J") };
            jni.delete_local(class);
            f as usize
        }
    });
    // SAFETY: `thread` is a live Thread and `tid` its `long tid`.
    (tid != 0).then(|| unsafe { jni.long_field(thread, tid as jfieldID) })
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
    let start = monotonic_ns();
    let t0 = crate::sampling::cputime::thread_cpu_ns();
    // The thread waiting: for a virtual thread, the virtual thread.
    let virtual_id = jvmti.current_thread().ok().and_then(|thread| {
        // SAFETY: `thread` is the local reference just returned, deleted
        // after its last use.
        unsafe {
            let id = virtual_id(jni, thread);
            jni.delete_local(thread);
            id
        }
    });
    // SAFETY: `object` is the callback's live reference to the monitor's
    // object (not null).
    let owner = owners::layout().filter(|_| !object.is_null()).and_then(|l| unsafe { l.owner(object as usize) });
    let _ = STACK.try_with(|s| {
        let (frames, n) = &mut *s.borrow_mut();
        *n = sampler.take_stack(jvmti, jni, frames);
        if let Some(id) = virtual_id {
            let wait = Pending { start, frames: frames.get(..=*n).unwrap_or_default().into(), owner };
            let mut table = VIRTUAL.lock().unwrap_or_else(|e| e.into_inner());
            table.get_or_insert_with(VirtualWaits::default).insert(id, wait, start);
        }
    });
    if virtual_id.is_none() {
        let _ = OWNER.try_with(|o| o.set(owner));
        let _ = ENTERED_AT.try_with(|t| t.set(start));
    }
    sampler.add_record_ns(crate::sampling::cputime::thread_cpu_ns().saturating_sub(t0));
}

/// MonitorContendedEntered: the thread owns `object`'s monitor after waiting.
///
/// # Safety
/// `thread` and `object` must be the callback's live references to the
/// thread and the monitor's object, `jni` the callback's environment.
pub unsafe fn on_entered(sampler: &LockSampler, registry: &Threads, jvmti: Jvmti, jni: Jni, thread: jthread, object: jobject) {
    // SAFETY: `thread` is live (this function's contract).
    let pending = match unsafe { virtual_id(jni, thread) } {
        Some(id) => {
            let Some(wait) = VIRTUAL.lock().unwrap_or_else(|e| e.into_inner()).as_mut().and_then(|t| t.remove(id)) else { return };
            Some(wait)
        }
        None => None,
    };
    let (start, owner) = match &pending {
        Some(wait) => (wait.start, wait.owner),
        None => {
            let Ok(start) = ENTERED_AT.try_with(|t| t.replace(0)) else { return };
            (start, OWNER.try_with(|o| o.take()).ok().flatten())
        }
    };
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
    match pending {
        Some(mut wait) => {
            let n = wait.frames.len().saturating_sub(1);
            // SAFETY: `class` is the local reference just returned (or null).
            unsafe { sampler.record_stack(jvmti, Kind::Monitor, class, weight, &mut wait.frames, n, owner.as_ref()) };
        }
        None => {
            let _ = STACK.try_with(|s| {
                let (frames, n) = &mut *s.borrow_mut();
                // SAFETY: `class` is the local reference just returned (or null).
                unsafe { sampler.record_stack(jvmti, Kind::Monitor, class, weight, frames, *n, owner.as_ref()) };
            });
        }
    }
    // SAFETY: as above; not used afterwards.
    unsafe { jni.delete_local(class) };
}

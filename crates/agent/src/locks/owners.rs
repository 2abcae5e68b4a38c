//! Who held the lock a thread waited for: its name, for the sample's
//! `lock_owner` label, and its kernel thread id, for JFR's `previousOwner`.
//!
//! A Java monitor's owner comes from HotSpot's structures
//! ([`crate::hotspot::monitor_owner`]): a kernel thread id, named through the
//! thread registry, or on JDK 24+ a `java.lang.Thread` id, found in a table
//! of the live platform threads made again at most once a second when an id
//! is missing (a virtual thread's id never is there: such owners stay
//! unnamed); a platform thread's kernel id is read through its `eetop`
//! field (the `JavaThread*`). A `java.util.concurrent` lock's owner is a
//! `Thread` object, named by JVMTI.
//!
//! The same reads name the Java threads already running when profiling
//! starts and again whenever profiles are built or a JFR chunk begins (a
//! thread renamed meanwhile gets its new name), with their
//! `Thread.getId()` (`name_running_threads`), and give a
//! starting thread's id (`java_id`) for JFR's `javaThreadId`.

use std::collections::HashMap;
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

use jvmti_sys::{jfieldID, jthread};

use crate::hotspot::monitor_owner::{Owner, OwnerLayout};
use crate::jvmti::{Jni, Jvmti};
use crate::sampling::threads::{self, Threads};

/// A lock's owner when a wait for it began.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LockOwner {
    pub name: String,
    /// Its kernel thread id; 0 when not known.
    pub tid: u32,
}

/// Where owners are read, made once from the JVM's structure table; `None`
/// without one (or without checked reads).
pub fn layout() -> Option<&'static OwnerLayout> {
    static LAYOUT: OnceLock<Option<OwnerLayout>> = OnceLock::new();
    LAYOUT.get_or_init(|| crate::hotspot::safemem::available().then(crate::vm_structs).flatten().and_then(OwnerLayout::new)).as_ref()
}

/// A monitor's owner ([`OwnerLayout::owner`]) by name: never the waiting
/// thread itself (it owns the monitor only after the wait), `None` when
/// unknown.
pub fn of_monitor(owner: Owner, registry: &Threads, jvmti: Jvmti, jni: Jni) -> Option<LockOwner> {
    match owner {
        Owner::Thread(java_thread) => {
            let tid = layout()?.kernel_tid(java_thread).filter(|&t| t != threads::current_tid())?;
            Some(LockOwner { name: registry.name(tid)?, tid })
        }
        Owner::Java(id) => by_java_id(id, jvmti, jni),
    }
}

/// The owner of a `java.util.concurrent` lock, a `Thread`, by name (its
/// kernel id is not looked up: `jdk.ThreadPark` has no owner field).
///
/// # Safety
/// `thread` must be a live reference to a `java.lang.Thread`.
pub unsafe fn of_lock_owner(jvmti: Jvmti, thread: jthread) -> LockOwner {
    // SAFETY: as this function's contract.
    LockOwner { name: unsafe { jvmti.thread_name(thread) }, tid: 0 }
}

/// A `Thread` by name and kernel id.
///
/// # Safety
/// `thread` must be a live reference to a `java.lang.Thread`; `jni` the
/// calling thread's environment.
unsafe fn of_thread(jvmti: Jvmti, jni: Jni, thread: jthread) -> LockOwner {
    // SAFETY: as this function's contract.
    unsafe { LockOwner { name: jvmti.thread_name(thread), tid: kernel_tid(jni, thread).unwrap_or(0) } }
}

/// Names every live platform thread in `threads` by its Java name and marks
/// it a Java thread, as `ThreadStart` does for the threads started later:
/// those running before profiling started (all of them after an attach;
/// the JVM's own started before `VMInit`) would otherwise keep their kernel
/// names, cut to 15 characters. Returns how many were named.
pub fn name_running_threads(jvmti: Jvmti, jni: Jni, threads: &Threads) -> usize {
    // Kernel ids are read through checked reads: not before they work (the
    // layout, once made, is kept).
    if !crate::hotspot::safemem::available() {
        return 0;
    }
    let mut named = 0;
    for (id, o) in java_ids(jvmti, jni) {
        // The launcher's main thread ends the JVM as `DestroyJavaVM`: it
        // keeps the name it had (see the ThreadStart callback).
        let relaunch = o.name == "DestroyJavaVM" && threads.is_java_visible(o.tid);
        if o.tid != 0 && !o.name.is_empty() && !relaunch {
            threads.name_java_thread(o.tid, o.name, Some(id));
            named += 1;
        }
    }
    named
}

/// A `Thread`'s id (`Thread.getId()`, its `tid` field), read by JNI.
///
/// # Safety
/// `thread` must be a live reference to a `java.lang.Thread`; `jni` the
/// calling thread's environment.
pub unsafe fn java_id(jni: Jni, thread: jthread) -> Option<i64> {
    let field = tid_field(jni)?;
    // SAFETY: `thread` is a live Thread (this function's contract) and
    // `field` its class's `long tid`.
    Some(unsafe { jni.long_field(thread, field as jfieldID) })
}

/// `java.lang.Thread.tid`'s field id (see [`thread_long_field`]).
fn tid_field(jni: Jni) -> Option<usize> {
    static FIELD: OnceLock<Option<usize>> = OnceLock::new();
    *FIELD.get_or_init(|| thread_long_field(jni, c"tid"))
}

/// A `Thread`'s kernel id: its `eetop` (the `JavaThread*`, 0 once it has
/// ended) read by JNI, then HotSpot's structures.
///
/// # Safety
/// As [`of_thread`].
unsafe fn kernel_tid(jni: Jni, thread: jthread) -> Option<u32> {
    let layout = layout()?;
    let field = eetop(jni)?;
    // SAFETY: `thread` is a live Thread (this function's contract) and
    // `field` its class's `long eetop`.
    let java_thread = unsafe { jni.long_field(thread, field as jfieldID) } as usize;
    (java_thread != 0).then(|| layout.kernel_tid(java_thread)).flatten()
}

/// The id of `java.lang.Thread`'s `long` field `name` (the class is never
/// unloaded, so the id stays valid), or `None`.
fn thread_long_field(jni: Jni, name: &std::ffi::CStr) -> Option<usize> {
    let class = jni.find_class(c"java/lang/Thread");
    if class.is_null() {
        jni.clear_exception();
        return None;
    }
    // SAFETY: `class` is the local reference just returned; deleted after
    // its last use.
    let f = unsafe {
        let f = jni.field_id(class, name, c"J") as usize;
        jni.delete_local(class);
        f
    };
    (f != 0).then_some(f)
}

/// `java.lang.Thread.eetop`'s field id (see [`thread_long_field`]).
fn eetop(jni: Jni) -> Option<usize> {
    static FIELD: OnceLock<Option<usize>> = OnceLock::new();
    *FIELD.get_or_init(|| thread_long_field(jni, c"eetop"))
}

/// How often the table of Java thread ids may be made again.
const JAVA_IDS_REMADE_EVERY: Duration = Duration::from_secs(1);

/// The live platform thread with `java.lang.Thread` id `id`.
fn by_java_id(id: i64, jvmti: Jvmti, jni: Jni) -> Option<LockOwner> {
    static TABLE: Mutex<Option<(HashMap<i64, LockOwner>, Instant)>> = Mutex::new(None);
    let mut table = TABLE.lock().unwrap_or_else(|e| e.into_inner());
    if let Some((owners, made)) = table.as_ref() {
        if let Some(o) = owners.get(&id) {
            return Some(o.clone());
        }
        if made.elapsed() < JAVA_IDS_REMADE_EVERY {
            return None;
        }
    }
    let owners = java_ids(jvmti, jni);
    let found = owners.get(&id).cloned();
    *table = Some((owners, Instant::now()));
    found.filter(|o| o.tid != threads::current_tid())
}

/// Every live platform thread by its `java.lang.Thread` id.
fn java_ids(jvmti: Jvmti, jni: Jni) -> HashMap<i64, LockOwner> {
    let mut out = HashMap::new();
    let Some(tid) = tid_field(jni) else { return out };
    let all = jvmti.all_threads().unwrap_or_default();
    jni.ensure_local_capacity(all.len());
    for t in all {
        // SAFETY: `t` is a live local reference to a Thread, deleted only
        // after its last use; `tid` is Thread's `long tid`.
        unsafe {
            out.insert(jni.long_field(t, tid as jfieldID), of_thread(jvmti, jni, t));
            jni.delete_local(t);
        }
    }
    out
}

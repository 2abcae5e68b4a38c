//! `java.util.concurrent` locks: a thread that cannot take a `ReentrantLock`
//! (or any lock built on `AbstractOwnableSynchronizer`) parks in
//! `jdk.internal.misc.Unsafe.park`, a JNI native method no JIT compiles
//! inline. While lock profiling runs, that method is bound (JNI
//! `RegisterNatives`) to [`park_hook`], which calls the JVM's own function
//! and times it; a wait the sampler keeps is recorded if the thread's
//! `parkBlocker` is a lock (an `AbstractOwnableSynchronizer`: not a
//! condition, a queue or a future), with the lock's class as the leaf frame.
//! At stop the method is bound back to the JVM's function, so nothing of
//! oxprof stays in the park path; when lock profiling is off it was never
//! there.
//!
//! The JVM's function is found without guessing at symbols: a `jmethodID`
//! holds the method's `Method*` (JDK 9–25, see `hotspot::gate`), and a native
//! method's function pointer sits right after its `Method` (HotSpot's
//! `Method::native_function_addr`), whose size the structure table gives.
//! The pointer is used only if it lies in libjvm.
//!
//! The rebinding goes through a small class oxprof defines in the boot
//! class loader (`oxprof.Rebind`: a static Java method calling a native one,
//! which calls `RegisterNatives`). HotSpot (JDK 15 and later, JDK-8238460)
//! warns on the JVM's console whenever a platform class's native method is
//! registered by code of another class loader, or by no Java code at all;
//! with a boot-loader caller it does not. async-profiler does the same.
//!
//! Trade-offs (async-profiler rebinds the same method): the rebinding makes
//! HotSpot discard the compiled native wrapper once, at start and at stop;
//! every park pays a clock read on each side, and a kept one the blocker
//! lookup and the stack walk; a thread parked at stop returns through the
//! hook (kept mapped: the library is never unloaded).

use std::ffi::{c_void, CStr};
use std::sync::atomic::{AtomicBool, AtomicPtr, AtomicUsize, Ordering};
use std::sync::Mutex;

use jvmti_sys::{jboolean, jclass, jfieldID, jlong, jobject, JNIEnv};

use crate::hotspot::gate;
use crate::hotspot::safemem;
use crate::hotspot::vmstructs::VmStructs;
use crate::jvmti::{Jni, Jvmti};
use crate::locks::sampler::{Kind, LockSampler};
use crate::sampling::cputime::monotonic_ns;

type ParkFn = unsafe extern "C" fn(*mut JNIEnv, jobject, jboolean, jlong);

const UNSAFE: &CStr = c"jdk/internal/misc/Unsafe";
const PARK: &CStr = c"park";
const PARK_SIG: &CStr = c"(ZJ)V";

/// The JVM's `Unsafe.park` function (0 until found).
static ORIGINAL: AtomicUsize = AtomicUsize::new(0);
/// Whether `Unsafe.park` is bound to [`park_hook`] now.
static HOOKED: AtomicBool = AtomicBool::new(false);
/// The sampler and JVMTI environment the hook reports to.
static SAMPLER: AtomicPtr<LockSampler> = AtomicPtr::new(std::ptr::null_mut());
static JVMTI: AtomicPtr<jvmti_sys::jvmtiEnv> = AtomicPtr::new(std::ptr::null_mut());

/// Global references and ids the hook needs (set once).
struct Refs {
    unsafe_class: usize,
    lock_class: usize,
    park_blocker: usize,
    /// `AbstractOwnableSynchronizer.exclusiveOwnerThread`.
    owner: usize,
    /// `oxprof.Rebind` and its `rebind(long)`.
    rebind_class: usize,
    rebind: usize,
}

const REBIND: &CStr = c"oxprof/Rebind";
/// `Unsafe` for `rebind0`, and whether its last `RegisterNatives` worked.
static UNSAFE_CLASS: AtomicUsize = AtomicUsize::new(0);
static REBOUND: AtomicBool = AtomicBool::new(false);

/// The class file of `oxprof.Rebind`, written out here (no Java compiler at
/// build time):
/// ```java
/// public final class Rebind {
///     public static void rebind(long entry) { rebind0(entry); }
///     private static native void rebind0(long entry);
/// }
/// ```
fn rebind_class_file() -> Vec<u8> {
    let mut b: Vec<u8> = Vec::new();
    let u2 = |b: &mut Vec<u8>, v: u16| b.extend_from_slice(&v.to_be_bytes());
    let utf8 = |b: &mut Vec<u8>, s: &str| {
        b.push(1);
        b.extend_from_slice(&(s.len() as u16).to_be_bytes());
        b.extend_from_slice(s.as_bytes());
    };
    b.extend_from_slice(&[0xCA, 0xFE, 0xBA, 0xBE, 0, 0, 0, 52]); // magic, version 52.0
    u2(&mut b, 11); // constant pool count (entries 1..=10)
    utf8(&mut b, "oxprof/Rebind"); // #1
    b.extend_from_slice(&[7, 0, 1]); // #2 Class #1
    utf8(&mut b, "java/lang/Object"); // #3
    b.extend_from_slice(&[7, 0, 3]); // #4 Class #3
    utf8(&mut b, "rebind"); // #5
    utf8(&mut b, "(J)V"); // #6
    utf8(&mut b, "rebind0"); // #7
    b.extend_from_slice(&[12, 0, 7, 0, 6]); // #8 NameAndType #7:#6
    b.extend_from_slice(&[10, 0, 2, 0, 8]); // #9 Methodref #2.#8
    utf8(&mut b, "Code"); // #10
    u2(&mut b, 0x0031); // public final super
    u2(&mut b, 2); // this
    u2(&mut b, 4); // super
    u2(&mut b, 0); // interfaces
    u2(&mut b, 0); // fields
    u2(&mut b, 2); // methods
                   // public static void rebind(long): lload_0, invokestatic #9, return
    u2(&mut b, 0x0009);
    u2(&mut b, 5);
    u2(&mut b, 6);
    u2(&mut b, 1);
    u2(&mut b, 10);
    b.extend_from_slice(&17u32.to_be_bytes()); // attribute length
    u2(&mut b, 2); // max stack
    u2(&mut b, 2); // max locals
    b.extend_from_slice(&5u32.to_be_bytes()); // code length
    b.extend_from_slice(&[0x1e, 0xb8, 0, 9, 0xb1]);
    u2(&mut b, 0); // exception table
    u2(&mut b, 0); // code attributes
                   // private static native void rebind0(long)
    u2(&mut b, 0x010A);
    u2(&mut b, 7);
    u2(&mut b, 6);
    u2(&mut b, 0);
    u2(&mut b, 0); // class attributes
    b
}

/// `oxprof.Rebind.rebind0`: binds `Unsafe.park` to `entry`, called from
/// Java code of the boot class loader (see the module comment).
///
/// # Safety
/// Called by the JVM as that native method.
unsafe extern "C" fn rebind0(env: *mut JNIEnv, _class: jclass, entry: jlong) {
    let _ = std::panic::catch_unwind(|| {
        let unsafe_class = UNSAFE_CLASS.load(Ordering::SeqCst) as jclass;
        // SAFETY: `unsafe_class` is a global reference to Unsafe, which
        // declares `native void park(boolean, long)`; `entry` is the hook or
        // the JVM's own function, both with that JNI signature.
        let ok = !unsafe_class.is_null() && unsafe { Jni(env).register_native(unsafe_class, PARK, PARK_SIG, entry as usize as *mut c_void) };
        REBOUND.store(ok, Ordering::SeqCst);
    });
}

/// Binds `Unsafe.park` to `entry` through `oxprof.Rebind`.
fn bind(jni: Jni, r: &Refs, entry: usize) -> bool {
    REBOUND.store(false, Ordering::SeqCst);
    // SAFETY: `rebind_class` is a live global reference to oxprof.Rebind and
    // `rebind` its static `(J)V` method.
    let called = unsafe { jni.call_static_void_long(r.rebind_class as jclass, r.rebind as jvmti_sys::jmethodID, entry as jlong) };
    called && REBOUND.load(Ordering::SeqCst)
}

/// Defines (or finds) `oxprof.Rebind` and binds its native method.
fn rebind_class(jni: Jni) -> Result<(usize, usize), String> {
    let mut c = jni.define_boot_class(REBIND, &rebind_class_file());
    if c.is_null() {
        c = jni.find_class(REBIND); // defined by an earlier start in this JVM
        if c.is_null() {
            jni.clear_exception();
            return Err("cannot define the class oxprof.Rebind".into());
        }
    }
    // SAFETY: `c` is a live local reference to oxprof.Rebind; the global one
    // is kept for the process's life.
    let g = unsafe { jni.new_global(c) };
    // SAFETY: as above.
    unsafe { jni.delete_local(c) };
    // SAFETY: oxprof.Rebind declares `static native void rebind0(long)` and
    // `rebind0` has that JNI signature (a static method gets the class).
    if !unsafe { jni.register_native(g as jclass, c"rebind0", c"(J)V", rebind0 as *mut c_void) } {
        return Err("cannot bind oxprof.Rebind.rebind0".into());
    }
    // SAFETY: `g` is a live global reference to a class.
    let m = unsafe { jni.static_method_id(g as jclass, c"rebind", c"(J)V") };
    if m.is_null() {
        return Err("oxprof.Rebind has no rebind(long)".into());
    }
    Ok((g as usize, m as usize))
}

static REFS: Mutex<Option<Refs>> = Mutex::new(None);
/// `parkBlocker`'s field id and the AbstractOwnableSynchronizer class, for
/// the hook (read without the lock).
static PARK_BLOCKER: AtomicUsize = AtomicUsize::new(0);
static LOCK_CLASS: AtomicUsize = AtomicUsize::new(0);
static OWNER_FIELD: AtomicUsize = AtomicUsize::new(0);

/// The JVM's function behind `Unsafe.park`, from the `Method` its
/// `jmethodID` names.
///
/// # Safety
/// `method` must be the jmethodID of the native method `Unsafe.park`.
unsafe fn jvm_function(method: jvmti_sys::jmethodID, vs: &VmStructs) -> Result<usize, String> {
    if !gate::jmethodid_is_method_slot() {
        return Err("this JDK's jmethodIDs are not read as pointers".into());
    }
    let size = vs.size("Method").ok_or("the JVM's structure table has no Method size")? as usize;
    let m = safemem::read_word(method as usize).filter(|&m| m != 0).ok_or("cannot read Unsafe.park's Method")?;
    let f = safemem::read_word(m + size).filter(|&f| f != 0).ok_or("Unsafe.park has no native function yet")?;
    // SAFETY: Dl_info is plain data; dladdr only reads the address.
    let mut info: libc::Dl_info = unsafe { std::mem::zeroed() };
    // SAFETY: as above.
    let found = unsafe { libc::dladdr(f as *const c_void, &mut info) } != 0 && !info.dli_fname.is_null();
    // SAFETY: dladdr returned a NUL-terminated path.
    if !found || !unsafe { CStr::from_ptr(info.dli_fname) }.to_string_lossy().contains("libjvm") {
        return Err("Unsafe.park's native function is not in libjvm".into());
    }
    Ok(f)
}

/// Binds `Unsafe.park` to the hook. Returns why not.
pub fn install(sampler: &'static LockSampler, jvmti: Jvmti, jni: Jni, vs: Option<&VmStructs>) -> Result<(), String> {
    if HOOKED.load(Ordering::SeqCst) {
        return Ok(());
    }
    let vs = vs.ok_or("no HotSpot structure table")?;
    let mut refs = REFS.lock().unwrap_or_else(|e| e.into_inner());
    if refs.is_none() {
        let find = |name: &CStr| {
            let c = jni.find_class(name);
            if c.is_null() {
                jni.clear_exception();
                return Err(format!("no class {}", name.to_string_lossy()));
            }
            // SAFETY: `c` is the local reference FindClass returned; the
            // global one is kept for the process's life.
            let g = unsafe { jni.new_global(c) };
            // SAFETY: as above.
            unsafe { jni.delete_local(c) };
            Ok(g as usize)
        };
        let unsafe_class = find(UNSAFE)?;
        let lock_class = find(c"java/util/concurrent/locks/AbstractOwnableSynchronizer")?;
        let thread_class = find(c"java/lang/Thread")?;
        // SAFETY: `thread_class` is a live global reference to a class.
        let park_blocker = unsafe { jni.field_id(thread_class as jclass, c"parkBlocker", c"Ljava/lang/Object;") } as usize;
        if park_blocker == 0 {
            return Err("java.lang.Thread has no parkBlocker field".into());
        }
        // SAFETY: `lock_class` is a live global reference to a class.
        let owner = unsafe { jni.field_id(lock_class as jclass, c"exclusiveOwnerThread", c"Ljava/lang/Thread;") } as usize;
        if owner == 0 {
            // Lock waits are still recorded, without their owner.
            jni.clear_exception();
        }
        let (rebind_class, rebind) = rebind_class(jni)?;
        UNSAFE_CLASS.store(unsafe_class, Ordering::SeqCst);
        *refs = Some(Refs { unsafe_class, lock_class, park_blocker, owner, rebind_class, rebind });
    }
    let Some(r) = refs.as_ref() else { return Err("no references".into()) };
    // SAFETY: `unsafe_class` is a live global reference to a class.
    let method = unsafe { jni.method_id(r.unsafe_class as jclass, PARK, PARK_SIG) };
    if method.is_null() {
        return Err("no method Unsafe.park(boolean, long)".into());
    }
    if ORIGINAL.load(Ordering::SeqCst) == 0 {
        // SAFETY: `method` is Unsafe.park's jmethodID, just looked up.
        ORIGINAL.store(unsafe { jvm_function(method, vs) }?, Ordering::SeqCst);
    }
    PARK_BLOCKER.store(r.park_blocker, Ordering::SeqCst);
    OWNER_FIELD.store(r.owner, Ordering::SeqCst);
    LOCK_CLASS.store(r.lock_class, Ordering::SeqCst);
    SAMPLER.store(sampler as *const LockSampler as *mut LockSampler, Ordering::SeqCst);
    JVMTI.store(jvmti.0, Ordering::SeqCst);
    // The hook has park's JNI signature and stays mapped for the process's life.
    if !bind(jni, r, park_hook as *const () as usize) {
        return Err("RegisterNatives refused to rebind Unsafe.park".into());
    }
    HOOKED.store(true, Ordering::SeqCst);
    Ok(())
}

/// Binds `Unsafe.park` back to the JVM's own function.
pub fn uninstall(jni: Jni) {
    if !HOOKED.load(Ordering::SeqCst) {
        return;
    }
    let refs = REFS.lock().unwrap_or_else(|e| e.into_inner());
    let (Some(r), original) = (refs.as_ref(), ORIGINAL.load(Ordering::SeqCst)) else { return };
    if bind(jni, r, original) {
        HOOKED.store(false, Ordering::SeqCst);
        crate::log::info("Unsafe.park bound back to the JVM's own function");
    } else {
        crate::log::warn("cannot bind Unsafe.park back to the JVM's function; the hook stays and records nothing");
    }
}

/// Whether the hook is bound now (for tests and status).
pub fn hooked() -> bool {
    HOOKED.load(Ordering::SeqCst)
}

/// `Unsafe.park` while lock profiling runs: the JVM's function, timed.
///
/// # Safety
/// Called by the JVM as the native method `Unsafe.park(boolean, long)`.
unsafe extern "C" fn park_hook(env: *mut JNIEnv, this: jobject, is_absolute: jboolean, time: jlong) {
    let original = ORIGINAL.load(Ordering::Acquire);
    if original == 0 {
        return;
    }
    // SAFETY: `original` is the JVM's Unsafe_Park (checked to lie in libjvm
    // at install), which has this JNI signature.
    let f: ParkFn = unsafe { std::mem::transmute::<usize, ParkFn>(original) };
    // The lock about to be waited for and its owner, read before the wait:
    // by its end the owner has let go.
    // SAFETY: `env` is this thread's JNIEnv, in a native method.
    let lookup_start = monotonic_ns();
    let before = std::panic::catch_unwind(|| unsafe { before_park(Jni(env)) }).unwrap_or_default();
    let t0 = monotonic_ns();
    if before.thread.is_some() {
        let sampler = SAMPLER.load(Ordering::Acquire);
        if !sampler.is_null() {
            // SAFETY: the sampler is a field of the agent's 'static Profiler.
            unsafe { &*sampler }.add_park_lookup_ns(t0.saturating_sub(lookup_start));
        }
    }
    // SAFETY: the arguments the JVM passed us, passed on.
    unsafe { f(env, this, is_absolute, time) };
    let waited = monotonic_ns().saturating_sub(t0);
    // No panic may cross into the JVM.
    let _ = std::panic::catch_unwind(|| {
        // SAFETY: `env` is this thread's JNIEnv, in a native method; `before`
        // holds local references of this native call.
        unsafe { after_park(Jni(env), waited, before) }
    });
}

/// Local references read as a park begins: the current thread, the lock it
/// is about to wait for (its `parkBlocker`, when an
/// `AbstractOwnableSynchronizer`) and that lock's owner (may be null).
#[derive(Default)]
struct Before {
    thread: Option<jobject>,
    lock: Option<jobject>,
    owner: Option<jobject>,
}

/// # Safety
/// `jni` must be the calling thread's environment, in the native method.
unsafe fn before_park(jni: Jni) -> Before {
    let sampler = SAMPLER.load(Ordering::Acquire);
    let jvmti = JVMTI.load(Ordering::Acquire);
    // SAFETY: the sampler is a field of the agent's 'static Profiler.
    if sampler.is_null() || jvmti.is_null() || !unsafe { &*sampler }.is_running() || jni.exception_pending() {
        return Before::default();
    }
    let (field, lock_class) = (PARK_BLOCKER.load(Ordering::Relaxed) as jfieldID, LOCK_CLASS.load(Ordering::Relaxed) as jclass);
    let Ok(thread) = Jvmti(jvmti).current_thread() else { return Before::default() };
    // SAFETY: `thread` is a live local reference to the current Thread;
    // `field` is Thread.parkBlocker's id.
    let blocker = unsafe { jni.object_field(thread, field) };
    // SAFETY: `blocker` is null or a live local reference; `lock_class` a
    // live global reference to a class.
    if !unsafe { jni.is_instance_of(blocker, lock_class) } {
        // SAFETY: a local reference of this call, not used afterwards.
        unsafe { jni.delete_local(blocker) };
        return Before { thread: Some(thread), lock: None, owner: None };
    }
    let owner_field = OWNER_FIELD.load(Ordering::Relaxed) as jfieldID;
    let owner = if owner_field.is_null() {
        std::ptr::null_mut()
    } else {
        // SAFETY: `blocker` is a live AbstractOwnableSynchronizer; the field
        // is its exclusiveOwnerThread.
        unsafe { jni.object_field(blocker, owner_field) }
    };
    Before { thread: Some(thread), lock: Some(blocker), owner: (!owner.is_null()).then_some(owner) }
}

/// # Safety
/// `jni` must be the calling thread's environment, in the native method,
/// and `before` what [`before_park`] returned in it.
unsafe fn after_park(jni: Jni, waited: u64, before: Before) {
    let sampler = SAMPLER.load(Ordering::Acquire);
    let jvmti = JVMTI.load(Ordering::Acquire);
    let ok = !sampler.is_null() && !jvmti.is_null() && !jni.exception_pending();
    if let (true, Some(lock)) = (ok, before.lock) {
        // SAFETY: the sampler is a field of the agent's 'static Profiler.
        let sampler = unsafe { &*sampler };
        if let Some(weight) = sampler.should_record(Kind::Park, waited) {
            let jvmti = Jvmti(jvmti);
            // SAFETY: `owner` is a live local reference to a Thread.
            let owner = before.owner.map(|o| unsafe { crate::locks::owners::of_lock_owner(jvmti, o) });
            // SAFETY: `lock` is a live local reference, not null.
            let class = unsafe { jni.object_class(lock) };
            // SAFETY: `class` is the local reference just returned.
            unsafe {
                sampler.record(jvmti, jni, Kind::Park, class, weight, owner.as_ref());
                jni.delete_local(class);
            }
        }
    }
    // SAFETY: local references of this native call, not used afterwards.
    unsafe {
        for r in [before.owner, before.lock, before.thread].into_iter().flatten() {
            jni.delete_local(r);
        }
    }
}

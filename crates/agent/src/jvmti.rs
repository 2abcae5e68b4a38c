//! Thin, checked wrappers over the raw JVMTI and JNI function tables.
//!
//! Every JVMTI call returns a `Result` with the error's name, never panics, and
//! frees what the JVM allocated for us (`Deallocate`). Strings the JVM gives
//! in modified UTF-8 are decoded as such ([`from_modified_utf8`]).
//!
//! Soundness: wrappers that pass a caller-chosen JNI handle, jmethodID or
//! jfieldID, or JavaVM pointer to the JVM are `unsafe fn` (see [`Jvmti`]).

use std::ffi::{c_char, c_void, CStr};
use std::fmt;
use std::ptr;

use jvmti_sys::*;

/// A JVMTI error code with its name.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct JvmtiError(pub jvmtiError);

impl JvmtiError {
    pub fn name(self) -> &'static str {
        match self.0 {
            JVMTI_ERROR_INVALID_THREAD => "INVALID_THREAD",
            JVMTI_ERROR_INVALID_METHODID => "INVALID_METHODID",
            JVMTI_ERROR_INVALID_CLASS => "INVALID_CLASS",
            JVMTI_ERROR_CLASS_NOT_PREPARED => "CLASS_NOT_PREPARED",
            JVMTI_ERROR_NOT_AVAILABLE => "NOT_AVAILABLE",
            JVMTI_ERROR_MUST_POSSESS_CAPABILITY => "MUST_POSSESS_CAPABILITY",
            JVMTI_ERROR_NULL_POINTER => "NULL_POINTER",
            JVMTI_ERROR_ABSENT_INFORMATION => "ABSENT_INFORMATION",
            JVMTI_ERROR_ILLEGAL_ARGUMENT => "ILLEGAL_ARGUMENT",
            JVMTI_ERROR_OUT_OF_MEMORY => "OUT_OF_MEMORY",
            JVMTI_ERROR_WRONG_PHASE => "WRONG_PHASE",
            JVMTI_ERROR_UNATTACHED_THREAD => "UNATTACHED_THREAD",
            JVMTI_ERROR_INVALID_ENVIRONMENT => "INVALID_ENVIRONMENT",
            JVMTI_ERROR_INTERNAL => "INTERNAL",
            JVMTI_ERROR_THREAD_NOT_ALIVE => "THREAD_NOT_ALIVE",
            JVMTI_ERROR_UNSUPPORTED_VERSION => "UNSUPPORTED_VERSION",
            _ => "UNKNOWN",
        }
    }
}

impl fmt::Display for JvmtiError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "JVMTI error {} ({})", self.0, self.name())
    }
}

impl std::error::Error for JvmtiError {}

pub type JvmtiResult<T> = Result<T, JvmtiError>;

/// Calls a function of the JVMTI table; a missing entry is `NOT_AVAILABLE`.
macro_rules! jvmti_call {
    ($env:expr, $f:ident $(, $arg:expr)* $(,)?) => {{
        let env: *mut jvmtiEnv = $env;
        // SAFETY: `env` is a valid jvmtiEnv obtained from GetEnv; its function
        // table lives as long as the VM.
        match unsafe { (**env).$f } {
            // SAFETY: the arguments follow the JVMTI specification of $f.
            Some(f) => unsafe { f(env $(, $arg)*) },
            None => JVMTI_ERROR_NOT_AVAILABLE,
        }
    }};
}

fn check(code: jvmtiError) -> JvmtiResult<()> {
    if code == JVMTI_ERROR_NONE {
        Ok(())
    } else {
        Err(JvmtiError(code))
    }
}

/// A JVMTI environment. Copyable: it is just the pointer the JVM gave us.
///
/// # Soundness rule of these wrappers
///
/// A wrapper that hands the JVM a handle or pointer chosen by its caller is
/// an `unsafe fn` whose `# Safety` section says what must hold: JNI
/// references (`jobject`, `jclass`, `jthread`, `jweak`), `jmethodID`s,
/// `jfieldID`s, the `JavaVM` pointer and heap-walk user data. The JVM checks
/// such values only partly: a dangling `jclass` or a deleted reference can
/// crash it. `jmethodID`s get no exception (no `allow` of
/// `clippy::not_unsafe_ptr_arg_deref` anywhere): up to JDK 25 HotSpot reads
/// them as pointers to `Method*` slots, and their class may unload (see
/// `hotspot::vmstructs` and `output::jfr_frames::Lines`). Wrappers whose
/// arguments are Rust references or plain values, or that pass only handles
/// the JVM returned within the same wrapper, stay safe: `set_event` (all
/// threads) is safe, `set_thread_event` is not. Agent functions that take a
/// handle from their caller and pass it on are `unsafe fn` too, with the same
/// contract, up to where the handle comes from (a JVMTI callback's
/// arguments, a wrapper's result, the sample store); every `unsafe` block
/// calling one says there why the handle is live. The `JavaVM` pointer is
/// the one exception to that propagation: the process has exactly one,
/// given to `Agent_OnLoad`/`Agent_OnAttach` (`unsafe extern fn`s for that
/// reason) and kept in `Agent::vm` for the process's life; functions that
/// carry it along take it as a plain parameter, and the `unsafe` blocks that
/// use it cite `Agent::vm` (or get it from a JNIEnv, [`Jni::java_vm`]).
///
/// `Jvmti` and [`Jni`] themselves are trusted: they are only built from the
/// environment pointers the JVM hands the agent (callbacks, `GetEnv`).
#[derive(Clone, Copy, Debug)]
pub struct Jvmti(pub *mut jvmtiEnv);

// SAFETY: JVMTI environments may be used from any thread (JVMTI spec, "Environments").
unsafe impl Send for Jvmti {}
// SAFETY: as above.
unsafe impl Sync for Jvmti {}

impl Jvmti {
    /// Gets a JVMTI 1.2 environment from the VM.
    ///
    /// # Safety
    /// `vm` must be the JavaVM the JVM passed to `Agent_OnLoad` or
    /// `Agent_OnAttach`.
    pub unsafe fn from_vm(vm: *mut JavaVM) -> JvmtiResult<Jvmti> {
        // HotSpot refuses JVMTI environments (JNI_EDETACHED) between its
        // onload and live phases. The attach listener can already run then:
        // a JVM attached to while still starting gets there a few
        // milliseconds before its main thread enters the live phase, so wait
        // for it (the listener thread waits, never a thread of the program).
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        loop {
            let mut env: *mut c_void = ptr::null_mut();
            // SAFETY: `vm` is the JavaVM passed to Agent_OnLoad/OnAttach.
            let rc = unsafe {
                match (**vm).GetEnv {
                    Some(f) => f(vm, &mut env, JVMTI_VERSION_1_2 as jint),
                    None => JNI_ERR,
                }
            };
            if rc == JNI_OK as jint && !env.is_null() {
                return Ok(Jvmti(env as *mut jvmtiEnv));
            }
            if rc != JNI_EDETACHED || std::time::Instant::now() >= deadline {
                return Err(JvmtiError(if rc == JNI_EDETACHED { JVMTI_ERROR_WRONG_PHASE } else { JVMTI_ERROR_UNSUPPORTED_VERSION }));
            }
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
    }

    pub fn potential_capabilities(self) -> JvmtiResult<jvmtiCapabilities> {
        // SAFETY: jvmtiCapabilities is plain bits; all-zero is valid.
        let mut caps: jvmtiCapabilities = unsafe { std::mem::zeroed() };
        check(jvmti_call!(self.0, GetPotentialCapabilities, &mut caps))?;
        Ok(caps)
    }

    pub fn add_capabilities(self, caps: &jvmtiCapabilities) -> JvmtiResult<()> {
        check(jvmti_call!(self.0, AddCapabilities, caps))
    }

    pub fn set_event_callbacks(self, callbacks: &jvmtiEventCallbacks) -> JvmtiResult<()> {
        let size = std::mem::size_of::<jvmtiEventCallbacks>() as jint;
        check(jvmti_call!(self.0, SetEventCallbacks, callbacks, size))
    }

    /// Enables or disables `event` for all threads.
    pub fn set_event(self, enable: bool, event: jvmtiEvent) -> JvmtiResult<()> {
        // SAFETY: a null thread means all threads.
        unsafe { self.set_thread_event(enable, event, ptr::null_mut()) }
    }

    /// Enables or disables `event` for one thread (all threads if null).
    ///
    /// # Safety
    /// `thread` must be null or a live JNI reference to a `java.lang.Thread`.
    pub unsafe fn set_thread_event(self, enable: bool, event: jvmtiEvent, thread: jthread) -> JvmtiResult<()> {
        let mode = if enable { JVMTI_ENABLE } else { JVMTI_DISABLE };
        check(jvmti_call!(self.0, SetEventNotificationMode, mode, event, thread))
    }

    pub fn generate_events(self, event: jvmtiEvent) -> JvmtiResult<()> {
        check(jvmti_call!(self.0, GenerateEvents, event))
    }

    fn deallocate<T>(self, p: *mut T) {
        if !p.is_null() {
            let _ = jvmti_call!(self.0, Deallocate, p as *mut u8);
        }
    }

    /// Copies a JVMTI-allocated C string and frees it.
    fn take_string(self, p: *mut c_char) -> String {
        if p.is_null() {
            return String::new();
        }
        // SAFETY: JVMTI returns NUL-terminated modified UTF-8 strings.
        let s = from_modified_utf8(unsafe { CStr::from_ptr(p) }.to_bytes());
        self.deallocate(p);
        s
    }

    /// Copies a JVMTI-allocated array and frees it.
    fn take_array<T: Copy>(self, p: *mut T, n: jint) -> Vec<T> {
        let v = if p.is_null() || n <= 0 {
            Vec::new()
        } else {
            // SAFETY: JVMTI returned `n` elements at `p`.
            unsafe { std::slice::from_raw_parts(p, n as usize) }.to_vec()
        };
        self.deallocate(p);
        v
    }

    pub fn loaded_classes(self) -> JvmtiResult<Vec<jclass>> {
        let mut n: jint = 0;
        let mut p: *mut jclass = ptr::null_mut();
        check(jvmti_call!(self.0, GetLoadedClasses, &mut n, &mut p))?;
        Ok(self.take_array(p, n))
    }

    /// The class's methods (creating their jmethodIDs).
    ///
    /// # Safety
    /// `class` must be a live JNI reference to a class.
    pub unsafe fn class_methods(self, class: jclass) -> JvmtiResult<Vec<jmethodID>> {
        let mut n: jint = 0;
        let mut p: *mut jmethodID = ptr::null_mut();
        check(jvmti_call!(self.0, GetClassMethods, class, &mut n, &mut p))?;
        Ok(self.take_array(p, n))
    }

    /// The class's JVM signature, e.g. `Ljava/lang/String;` or `[I`.
    ///
    /// # Safety
    /// `class` must be a live JNI reference to a class.
    pub unsafe fn class_signature(self, class: jclass) -> JvmtiResult<String> {
        let mut sig: *mut c_char = ptr::null_mut();
        check(jvmti_call!(self.0, GetClassSignature, class, &mut sig, ptr::null_mut::<*mut c_char>()))?;
        Ok(self.take_string(sig))
    }

    /// A VM system property (available in the OnLoad and live phases), e.g.
    /// `java.vm.version`.
    pub fn system_property(self, name: &CStr) -> JvmtiResult<String> {
        let mut value: *mut c_char = ptr::null_mut();
        check(jvmti_call!(self.0, GetSystemProperty, name.as_ptr(), &mut value))?;
        Ok(self.take_string(value))
    }

    /// The class's loader (a local reference), null for the boot loader.
    ///
    /// # Safety
    /// `class` must be a live JNI reference to a class.
    pub unsafe fn class_loader(self, class: jclass) -> JvmtiResult<jobject> {
        let mut loader: jobject = ptr::null_mut();
        check(jvmti_call!(self.0, GetClassLoader, class, &mut loader))?;
        Ok(loader)
    }

    /// Method name and signature.
    ///
    /// # Safety
    /// `method` must be a jmethodID the JVM gave out, of a class that has not
    /// unloaded since.
    pub unsafe fn method_name(self, method: jmethodID) -> JvmtiResult<(String, String)> {
        let mut name: *mut c_char = ptr::null_mut();
        let mut sig: *mut c_char = ptr::null_mut();
        check(jvmti_call!(self.0, GetMethodName, method, &mut name, &mut sig, ptr::null_mut::<*mut c_char>()))?;
        Ok((self.take_string(name), self.take_string(sig)))
    }

    /// A method's line number table: (first bytecode index, line), in the
    /// JVM's order. Empty for native and abstract methods.
    ///
    /// # Safety
    /// `method` must be a jmethodID the JVM gave out, of a class that has not
    /// unloaded since.
    pub unsafe fn line_number_table(self, method: jmethodID) -> JvmtiResult<Vec<(i64, i32)>> {
        let mut n: jint = 0;
        let mut p: *mut jvmtiLineNumberEntry = ptr::null_mut();
        check(jvmti_call!(self.0, GetLineNumberTable, method, &mut n, &mut p))?;
        Ok(self.take_array(p, n).iter().map(|e| (e.start_location, e.line_number)).collect())
    }

    /// The class declaring the method (a local reference).
    ///
    /// # Safety
    /// `method` must be a jmethodID the JVM gave out, of a class that has not
    /// unloaded since.
    pub unsafe fn method_declaring_class(self, method: jmethodID) -> JvmtiResult<jclass> {
        let mut class: jclass = ptr::null_mut();
        check(jvmti_call!(self.0, GetMethodDeclaringClass, method, &mut class))?;
        Ok(class)
    }

    /// A thread's name (empty when it cannot be read).
    ///
    /// # Safety
    /// `thread` must be null (the current thread) or a live JNI reference to
    /// a `java.lang.Thread`.
    pub unsafe fn thread_name(self, thread: jthread) -> String {
        // SAFETY: jvmtiThreadInfo is plain data; all-zero is valid.
        let mut info: jvmtiThreadInfo = unsafe { std::mem::zeroed() };
        if check(jvmti_call!(self.0, GetThreadInfo, thread, &mut info)).is_err() {
            return String::new();
        }
        let name = self.take_string(info.name);
        // GetThreadInfo returns local references we own.
        name
    }

    /// JEP 331: mean bytes between SampledObjectAlloc events (0 = every allocation).
    pub fn set_heap_sampling_interval(self, bytes: jint) -> JvmtiResult<()> {
        check(jvmti_call!(self.0, SetHeapSamplingInterval, bytes))
    }

    /// The current thread's stack, top frame first, into `frames`; returns the count.
    pub fn own_stack_trace(self, frames: &mut [jvmtiFrameInfo]) -> JvmtiResult<usize> {
        let mut count: jint = 0;
        let max = frames.len().min(jint::MAX as usize) as jint;
        check(jvmti_call!(self.0, GetStackTrace, ptr::null_mut(), 0, max, frames.as_mut_ptr(), &mut count))?;
        Ok(count.max(0) as usize)
    }

    /// The object's tag in this environment (0: none).
    ///
    /// # Safety
    /// `obj` must be a live JNI reference.
    pub unsafe fn get_tag(self, obj: jobject) -> JvmtiResult<jlong> {
        let mut tag: jlong = 0;
        check(jvmti_call!(self.0, GetTag, obj, &mut tag))?;
        Ok(tag)
    }

    /// Tags the object in this environment.
    ///
    /// # Safety
    /// `obj` must be a live JNI reference.
    pub unsafe fn set_tag(self, obj: jobject, tag: jlong) -> JvmtiResult<()> {
        check(jvmti_call!(self.0, SetTag, obj, tag))
    }

    /// The calling thread's `java.lang.Thread` (a local reference the caller
    /// deletes).
    pub fn current_thread(self) -> JvmtiResult<jthread> {
        let mut t: jthread = ptr::null_mut();
        check(jvmti_call!(self.0, GetCurrentThread, &mut t))?;
        if t.is_null() {
            return Err(JvmtiError(JVMTI_ERROR_THREAD_NOT_ALIVE));
        }
        Ok(t)
    }

    /// All live threads (local references the caller must delete).
    pub fn all_threads(self) -> JvmtiResult<Vec<jthread>> {
        let mut n: jint = 0;
        let mut p: *mut jthread = ptr::null_mut();
        check(jvmti_call!(self.0, GetAllThreads, &mut n, &mut p))?;
        Ok(self.take_array(p, n))
    }

    /// Requests a full garbage collection and waits for it.
    pub fn force_gc(self) -> JvmtiResult<()> {
        check(jvmti_call!(self.0, ForceGarbageCollection))
    }

    /// Walks the references reachable from the heap roots (JVMTI
    /// FollowReferences), calling `callbacks` with `user_data`.
    ///
    /// # Safety
    /// `user_data` must be what the callbacks set in `callbacks` expect, and
    /// valid for the whole call.
    pub unsafe fn follow_references(self, callbacks: &jvmtiHeapCallbacks, user_data: *const c_void) -> JvmtiResult<()> {
        check(jvmti_call!(self.0, FollowReferences, 0, ptr::null_mut(), ptr::null_mut(), callbacks, user_data))
    }

    /// The objects carrying these tags (local references), with their tags.
    pub fn objects_with_tags(self, tags: &[jlong]) -> JvmtiResult<Vec<(jobject, jlong)>> {
        let mut n: jint = 0;
        let mut objs: *mut jobject = ptr::null_mut();
        let mut found: *mut jlong = ptr::null_mut();
        check(jvmti_call!(self.0, GetObjectsWithTags, tags.len() as jint, tags.as_ptr(), &mut n, &mut objs, &mut found))?;
        let o = self.take_array(objs, n);
        let t = self.take_array(found, n);
        Ok(o.into_iter().zip(t).collect())
    }

    /// The fields a class declares (not inherited ones).
    ///
    /// # Safety
    /// `class` must be a live JNI reference to a class.
    pub unsafe fn class_fields(self, class: jclass) -> JvmtiResult<Vec<jfieldID>> {
        let mut n: jint = 0;
        let mut p: *mut jfieldID = ptr::null_mut();
        check(jvmti_call!(self.0, GetClassFields, class, &mut n, &mut p))?;
        Ok(self.take_array(p, n))
    }

    /// A field's name, signature and modifiers.
    ///
    /// # Safety
    /// `class` must be a live JNI reference to a class, and `field` one of
    /// its fields (from [`Jvmti::class_fields`]).
    pub unsafe fn field_info(self, class: jclass, field: jfieldID) -> JvmtiResult<(String, String, jint)> {
        let mut name: *mut c_char = ptr::null_mut();
        let mut sig: *mut c_char = ptr::null_mut();
        check(jvmti_call!(self.0, GetFieldName, class, field, &mut name, &mut sig, ptr::null_mut::<*mut c_char>()))?;
        let (name, sig) = (self.take_string(name), self.take_string(sig));
        let mut modifiers: jint = 0;
        check(jvmti_call!(self.0, GetFieldModifiers, class, field, &mut modifiers))?;
        Ok((name, sig, modifiers))
    }

    /// Gives up this environment and everything it holds (its object tags).
    pub fn dispose(self) {
        let _ = jvmti_call!(self.0, DisposeEnvironment);
    }

    /// The JVMTI major version: the JDK's feature version since JDK 9.
    pub fn major_version(self) -> u32 {
        let mut v: jint = 0;
        let _ = jvmti_call!(self.0, GetVersionNumber, &mut v);
        ((v as u32) >> 16) & 0x0FFF
    }
}

/// Calls a function of the JNI table; a missing entry yields `$default`.
macro_rules! jni_call {
    ($env:expr, $f:ident, $default:expr $(, $arg:expr)* $(,)?) => {{
        let env: *mut JNIEnv = $env;
        // SAFETY: `env` is the current thread's JNIEnv; its table lives as long as the VM.
        match unsafe { (**env).$f } {
            // SAFETY: the arguments follow the JNI specification of $f.
            Some(f) => unsafe { f(env $(, $arg)*) },
            None => $default,
        }
    }};
}

/// The current thread's JNI environment (see [`Jvmti`] for which wrappers
/// are `unsafe fn`). "Live reference" below means a JNI reference that has
/// not been deleted: a local one of this thread's current local frame, a
/// global one, or (where said) a weak global one.
#[derive(Clone, Copy, Debug)]
pub struct Jni(pub *mut JNIEnv);

impl Jni {
    /// A weak global reference to the object, or null.
    ///
    /// # Safety
    /// `obj` must be null or a live reference.
    pub unsafe fn new_weak_global(self, obj: jobject) -> jweak {
        jni_call!(self.0, NewWeakGlobalRef, ptr::null_mut(), obj)
    }

    /// # Safety
    /// `obj` must be null (HotSpot ignores it) or a weak global reference
    /// not yet deleted, and not be used afterwards.
    pub unsafe fn delete_weak_global(self, obj: jweak) {
        jni_call!(self.0, DeleteWeakGlobalRef, (), obj)
    }

    /// # Safety
    /// `obj` must be null or a global reference not yet deleted, and not be
    /// used afterwards.
    pub unsafe fn delete_global(self, obj: jobject) {
        if !obj.is_null() {
            jni_call!(self.0, DeleteGlobalRef, (), obj)
        }
    }

    /// # Safety
    /// `obj` must be null or a live reference (weak allowed: null if cleared).
    pub unsafe fn new_global(self, obj: jobject) -> jobject {
        jni_call!(self.0, NewGlobalRef, ptr::null_mut(), obj)
    }

    /// # Safety
    /// `obj` must be null or a live reference (weak allowed: null if cleared).
    pub unsafe fn new_local(self, obj: jobject) -> jobject {
        jni_call!(self.0, NewLocalRef, ptr::null_mut(), obj)
    }

    /// Tells the JVM the current local frame holds `n` more local references
    /// than JNI calls made (JVMTI functions such as GetAllThreads and
    /// GetLoadedClasses return arrays of them), so `-Xcheck:jni` does not
    /// warn. Capped at HotSpot's `MaxJNILocalCapacity`; harmless when refused.
    pub fn ensure_local_capacity(self, n: usize) {
        const MAX_LOCAL_CAPACITY: usize = 65_536;
        let n = n.min(MAX_LOCAL_CAPACITY) as jint;
        // SAFETY: `self.0` is the current thread's JNIEnv, whose function
        // table lives as long as the VM; EnsureLocalCapacity only plans room.
        unsafe {
            if let Some(ensure) = (**self.0).EnsureLocalCapacity {
                ensure(self.0, n);
            }
        }
    }

    /// # Safety
    /// `obj` must be null or a local reference of the current local frame
    /// not yet deleted, and not be used afterwards.
    pub unsafe fn delete_local(self, obj: jobject) {
        if !obj.is_null() {
            jni_call!(self.0, DeleteLocalRef, (), obj)
        }
    }

    /// A new `long[len]` (a local reference), or null with an exception
    /// pending.
    pub fn new_long_array(self, len: jint) -> jobject {
        jni_call!(self.0, NewLongArray, ptr::null_mut(), len)
    }

    /// Whether both refer to the same object (a weak reference is the same
    /// as null once its object was collected).
    ///
    /// # Safety
    /// `a` and `b` must each be null or a live reference (weak allowed).
    pub unsafe fn is_same(self, a: jobject, b: jobject) -> bool {
        jni_call!(self.0, IsSameObject, 0, a, b) != 0
    }

    /// The object's class (a local reference).
    ///
    /// # Safety
    /// `obj` must be a live reference, not null.
    pub unsafe fn object_class(self, obj: jobject) -> jclass {
        jni_call!(self.0, GetObjectClass, ptr::null_mut(), obj)
    }

    /// The superclass (a local reference), null for `Object` and interfaces.
    ///
    /// # Safety
    /// `class` must be a live reference to a class.
    pub unsafe fn superclass(self, class: jclass) -> jclass {
        jni_call!(self.0, GetSuperclass, ptr::null_mut(), class)
    }

    /// The value of a static field of reference type (a local reference).
    ///
    /// # Safety
    /// `class` must be a live reference to a class and `field` one of its
    /// static fields of a reference type.
    pub unsafe fn static_object_field(self, class: jclass, field: jfieldID) -> jobject {
        jni_call!(self.0, GetStaticObjectField, ptr::null_mut(), class, field)
    }

    /// The value of an instance field of reference type (a local reference).
    ///
    /// # Safety
    /// `obj` must be a live reference, not null, and `field` an instance
    /// field of a reference type of its class or of a superclass.
    pub unsafe fn object_field(self, obj: jobject, field: jfieldID) -> jobject {
        jni_call!(self.0, GetObjectField, ptr::null_mut(), obj, field)
    }

    /// The value of an instance field of type `long`.
    ///
    /// # Safety
    /// `obj` must be a live reference, not null, and `field` an instance
    /// field of type `long` of its class or of a superclass.
    pub unsafe fn long_field(self, obj: jobject, field: jfieldID) -> jlong {
        jni_call!(self.0, GetLongField, 0, obj, field)
    }

    /// A method's id (`GetMethodID`), or null with the exception cleared.
    ///
    /// # Safety
    /// `class` must be a live reference to a class.
    pub unsafe fn method_id(self, class: jclass, name: &CStr, sig: &CStr) -> jmethodID {
        let m = jni_call!(self.0, GetMethodID, ptr::null_mut(), class, name.as_ptr(), sig.as_ptr());
        if m.is_null() {
            self.clear_exception();
        }
        m
    }

    /// An instance field's id (`GetFieldID`), or null with the exception cleared.
    ///
    /// # Safety
    /// `class` must be a live reference to a class.
    pub unsafe fn field_id(self, class: jclass, name: &CStr, sig: &CStr) -> jfieldID {
        let f = jni_call!(self.0, GetFieldID, ptr::null_mut(), class, name.as_ptr(), sig.as_ptr());
        if f.is_null() {
            self.clear_exception();
        }
        f
    }

    /// Binds the native method `name` of `class` with signature `sig` to
    /// `function` (`RegisterNatives`); false (exception cleared) when refused.
    ///
    /// # Safety
    /// `class` must be a live reference to a class declaring that native
    /// method, and `function` a function with the JNI signature `sig`
    /// calls it with, valid for as long as it stays bound.
    pub unsafe fn register_native(self, class: jclass, name: &CStr, sig: &CStr, function: *mut c_void) -> bool {
        let m = jvmti_sys::JNINativeMethod { name: name.as_ptr() as *mut c_char, signature: sig.as_ptr() as *mut c_char, fnPtr: function };
        let ok = jni_call!(self.0, RegisterNatives, JNI_ERR, class, &m, 1) == 0;
        if !ok {
            self.clear_exception();
        }
        ok
    }

    /// Whether `obj` is an instance of `class` (false for null).
    ///
    /// # Safety
    /// `obj` must be null or a live reference, `class` a live reference to a class.
    pub unsafe fn is_instance_of(self, obj: jobject, class: jclass) -> bool {
        !obj.is_null() && jni_call!(self.0, IsInstanceOf, 0, obj, class) != 0
    }

    /// Whether `obj` is a virtual thread (JNI `IsVirtualThread`, JNI 21+);
    /// false for null and where the JVM has no such function (before JDK
    /// 21, no virtual threads either). The bindings' table ends before the
    /// function, so it is read from the slot after `GetModule`, once.
    ///
    /// # Safety
    /// `obj` must be null or a live reference.
    pub unsafe fn is_virtual_thread(self, obj: jobject) -> bool {
        use std::sync::atomic::{AtomicBool, AtomicPtr, Ordering};
        type IsVirtualThread = unsafe extern "C" fn(*mut JNIEnv, jobject) -> jboolean;
        const JNI_VERSION_21: jint = 0x0015_0000;
        /// The function (null: none), once `LOOKED_UP`.
        static FUNCTION: AtomicPtr<c_void> = AtomicPtr::new(ptr::null_mut());
        static LOOKED_UP: AtomicBool = AtomicBool::new(false);
        if !LOOKED_UP.load(Ordering::Acquire) {
            if jni_call!(self.0, GetVersion, 0) >= JNI_VERSION_21 {
                // SAFETY: `self.0` is the current thread's JNIEnv; a JNI 21+
                // VM's function table (jni.h) has `IsVirtualThread` right
                // after `GetModule`, every entry a function pointer, and
                // lives as long as the VM.
                let next = unsafe { ptr::addr_of!((**self.0).GetModule).cast::<*mut c_void>().add(1).read() };
                FUNCTION.store(next, Ordering::Relaxed);
            }
            LOOKED_UP.store(true, Ordering::Release);
        }
        let f = FUNCTION.load(Ordering::Relaxed);
        if f.is_null() || obj.is_null() {
            return false;
        }
        // SAFETY: `f` is the VM's `IsVirtualThread` (above), whose signature
        // is `IsVirtualThread`; `obj` is a live reference (this function's
        // contract).
        unsafe { std::mem::transmute::<*mut c_void, IsVirtualThread>(f)(self.0, obj) != 0 }
    }

    /// Defines a class in the boot class loader (`DefineClass` with a null
    /// loader); a local reference, or null with the exception cleared (for
    /// one, when it was defined already).
    pub fn define_boot_class(self, name: &CStr, bytes: &[u8]) -> jclass {
        let c = jni_call!(self.0, DefineClass, ptr::null_mut(), name.as_ptr(), ptr::null_mut(), bytes.as_ptr() as *const jbyte, bytes.len() as jsize);
        if c.is_null() {
            self.clear_exception();
        }
        c
    }

    /// A static method's id (`GetStaticMethodID`), or null with the exception cleared.
    ///
    /// # Safety
    /// `class` must be a live reference to a class.
    pub unsafe fn static_method_id(self, class: jclass, name: &CStr, sig: &CStr) -> jmethodID {
        let m = jni_call!(self.0, GetStaticMethodID, ptr::null_mut(), class, name.as_ptr(), sig.as_ptr());
        if m.is_null() {
            self.clear_exception();
        }
        m
    }

    /// Calls a static `void m(long)`; returns false (exception cleared) if it threw.
    ///
    /// # Safety
    /// `class` must be a live reference to a class and `method` the id of
    /// one of its static methods with signature `(J)V`.
    pub unsafe fn call_static_void_long(self, class: jclass, method: jmethodID, arg: jlong) -> bool {
        jni_call!(self.0, CallStaticVoidMethod, (), class, method, arg);
        !self.clear_exception()
    }

    /// Whether a Java exception is pending.
    pub fn exception_pending(self) -> bool {
        jni_call!(self.0, ExceptionCheck, 0) != 0
    }

    /// The JavaVM this environment belongs to (the process's one VM).
    pub fn java_vm(self) -> Option<*mut JavaVM> {
        let mut vm: *mut JavaVM = ptr::null_mut();
        let rc = jni_call!(self.0, GetJavaVM, JNI_ERR, &mut vm);
        (rc == JNI_OK as jint && !vm.is_null()).then_some(vm)
    }

    pub fn push_frame(self, capacity: jint) -> bool {
        jni_call!(self.0, PushLocalFrame, -1, capacity) == 0
    }

    pub fn pop_frame(self) {
        jni_call!(self.0, PopLocalFrame, ptr::null_mut(), ptr::null_mut());
    }

    /// `FindClass` by internal name (`java/lang/String`); a local reference,
    /// or null with the exception left pending.
    pub fn find_class(self, name: &CStr) -> jclass {
        jni_call!(self.0, FindClass, ptr::null_mut(), name.as_ptr())
    }

    /// Clears a pending Java exception; returns whether there was one.
    pub fn clear_exception(self) -> bool {
        let pending = jni_call!(self.0, ExceptionCheck, 0) != 0;
        if pending {
            jni_call!(self.0, ExceptionClear, ());
        }
        pending
    }

    /// A Java string's text (read as UTF-16, so every character survives;
    /// unpaired surrogates become U+FFFD), or `None` with an exception
    /// pending when the JVM could not give it.
    ///
    /// # Safety
    /// `s` must be null or a live reference to a `java.lang.String`.
    pub unsafe fn string(self, s: jstring) -> Option<String> {
        if s.is_null() {
            return None;
        }
        let len = jni_call!(self.0, GetStringLength, -1, s);
        if len < 0 {
            return None;
        }
        let mut units: Vec<jchar> = vec![0; len as usize];
        jni_call!(self.0, GetStringRegion, (), s, 0, len, units.as_mut_ptr());
        if self.exception_pending() {
            return None;
        }
        Some(String::from_utf16_lossy(&units))
    }

    /// A new Java string (a local reference), or null with an exception
    /// pending (out of memory).
    pub fn new_string(self, text: &str) -> jstring {
        let units: Vec<jchar> = text.encode_utf16().collect();
        jni_call!(self.0, NewString, ptr::null_mut(), units.as_ptr(), units.len() as jsize)
    }

    /// A direct `java.nio.ByteBuffer` over `len` bytes at `address` (a
    /// local reference), or null with an exception pending.
    ///
    /// # Safety
    /// The memory must stay valid and writable for as long as Java may use
    /// the buffer (the agent passes memory it never frees).
    pub unsafe fn new_direct_buffer(self, address: *mut c_void, len: usize) -> jobject {
        jni_call!(self.0, NewDirectByteBuffer, ptr::null_mut(), address, len as jlong)
    }

    /// The strings of a `String[]` (null elements as `None`), or `None`
    /// with an exception pending.
    ///
    /// # Safety
    /// `array` must be a live reference to a `String[]`.
    pub unsafe fn string_array(self, array: jobjectArray) -> Option<Vec<Option<String>>> {
        if array.is_null() {
            return None;
        }
        let n = jni_call!(self.0, GetArrayLength, -1, array);
        if n < 0 {
            return None;
        }
        let mut out = Vec::with_capacity(n as usize);
        for i in 0..n {
            let e = jni_call!(self.0, GetObjectArrayElement, ptr::null_mut(), array, i);
            if self.exception_pending() {
                return None;
            }
            // SAFETY: `e` is the local reference just returned, to a String
            // (the array's type) or null; deleted after use.
            unsafe {
                out.push(if e.is_null() { None } else { Some(self.string(e)?) });
                self.delete_local(e);
            }
        }
        Some(out)
    }

    /// Throws a new exception of `class` (internal name, such as
    /// `java/lang/IllegalStateException`) with `message`, to be raised when
    /// the native method returns.
    pub fn throw_new(self, class: &CStr, message: &str) {
        let cls = self.find_class(class);
        if cls.is_null() {
            return; // NoClassDefFoundError is pending instead
        }
        let text = modified_utf8(message);
        jni_call!(self.0, ThrowNew, JNI_ERR, cls, text.as_ptr());
        // SAFETY: `cls` is the local reference FindClass just returned.
        unsafe { self.delete_local(cls) };
    }

    /// `System.getProperty(name)`: what Java code sees, including the
    /// properties the class library sets itself (`java.runtime.name`),
    /// which JVMTI's `GetSystemProperty` does not list. `None` if unset or
    /// if the call failed (exception cleared). Call in the live phase.
    pub fn java_system_property(self, name: &str) -> Option<String> {
        if !self.push_frame(4) {
            self.clear_exception();
            return None;
        }
        let value = (|| {
            let cls = self.find_class(c"java/lang/System");
            if cls.is_null() {
                return None;
            }
            // SAFETY: `cls` is the live local reference to System just found.
            let mid = unsafe { self.static_method_id(cls, c"getProperty", c"(Ljava/lang/String;)Ljava/lang/String;") };
            let key = self.new_string(name);
            if mid.is_null() || key.is_null() {
                return None;
            }
            let v = jni_call!(self.0, CallStaticObjectMethod, ptr::null_mut(), cls, mid, key);
            if self.exception_pending() {
                return None;
            }
            // SAFETY: `v` is null or the String getProperty returned.
            unsafe { self.string(v) }
        })();
        self.clear_exception();
        // Frees every local reference made above.
        self.pop_frame();
        value
    }

    /// Calls a static no-argument method returning an object, e.g.
    /// `ClassLoader.getSystemClassLoader()`. Returns a local reference or null.
    pub fn call_static_object(self, class: &CStr, name: &CStr, sig: &CStr) -> jobject {
        let cls = jni_call!(self.0, FindClass, ptr::null_mut(), class.as_ptr());
        if cls.is_null() {
            self.clear_exception();
            return ptr::null_mut();
        }
        let mid = jni_call!(self.0, GetStaticMethodID, ptr::null_mut(), cls, name.as_ptr(), sig.as_ptr());
        if mid.is_null() {
            self.clear_exception();
            // SAFETY: `cls` is the local reference FindClass just returned.
            unsafe { self.delete_local(cls) };
            return ptr::null_mut();
        }
        let obj = jni_call!(self.0, CallStaticObjectMethod, ptr::null_mut(), cls, mid);
        self.clear_exception();
        // SAFETY: as above.
        unsafe { self.delete_local(cls) };
        obj
    }
}

/// Text from JNI's modified UTF-8 (what JVMTI returns for class, method,
/// field and thread names, and JNI's `GetStringUTFChars`): NUL comes as
/// `C0 80`, a character beyond U+FFFF as its two surrogates encoded as
/// three bytes each. Surrogate pairs are joined; a lone surrogate or a
/// malformed byte becomes U+FFFD. Standard 4-byte sequences (never produced
/// by the JVM) are accepted too.
pub fn from_modified_utf8(bytes: &[u8]) -> String {
    // Most names are ASCII or valid UTF-8 already (standard UTF-8 rejects
    // both `C0 80` and encoded surrogates, so valid means identical).
    if let Ok(s) = std::str::from_utf8(bytes) {
        return s.to_string();
    }
    let mut units: Vec<u16> = Vec::with_capacity(bytes.len());
    let cont = |i: usize| bytes.get(i).copied().filter(|b| b & 0xc0 == 0x80).map(|b| (b & 0x3f) as u32);
    let mut i = 0;
    while let Some(&b) = bytes.get(i) {
        let (unit, len) = match b {
            0x00..=0x7f => (Some(b as u32), 1),
            0xc0..=0xdf => (cont(i + 1).map(|c1| ((b as u32 & 0x1f) << 6) | c1), 2),
            0xe0..=0xef => (cont(i + 1).zip(cont(i + 2)).map(|(c1, c2)| ((b as u32 & 0x0f) << 12) | (c1 << 6) | c2), 3),
            0xf0..=0xf7 => (cont(i + 1).zip(cont(i + 2)).zip(cont(i + 3)).map(|((c1, c2), c3)| ((b as u32 & 0x07) << 18) | (c1 << 12) | (c2 << 6) | c3), 4),
            _ => (None, 1),
        };
        match unit {
            Some(u) if u <= 0xffff => {
                units.push(u as u16);
                i += len;
            }
            Some(u) => {
                match char::from_u32(u) {
                    Some(c) => units.extend_from_slice(c.encode_utf16(&mut [0; 2])),
                    None => units.push(0xfffd),
                }
                i += len;
            }
            None => {
                units.push(0xfffd);
                i += 1;
            }
        }
    }
    String::from_utf16_lossy(&units)
}

/// `text` in JNI's modified UTF-8 (NUL as two bytes, characters beyond
/// U+FFFF as two encoded surrogates), NUL-terminated.
fn modified_utf8(text: &str) -> std::ffi::CString {
    let mut out = Vec::with_capacity(text.len() + 1);
    for u in text.encode_utf16() {
        match u {
            1..=0x7f => out.push(u as u8),
            0 | 0x80..=0x7ff => out.extend_from_slice(&[0xc0 | (u >> 6) as u8, 0x80 | (u & 0x3f) as u8]),
            _ => out.extend_from_slice(&[0xe0 | (u >> 12) as u8, 0x80 | ((u >> 6) & 0x3f) as u8, 0x80 | (u & 0x3f) as u8]),
        }
    }
    // No byte is 0: NUL itself was encoded as two bytes.
    std::ffi::CString::new(out).unwrap_or_default()
}

/// The JNIEnv of the current thread, if it is attached to the VM.
///
/// # Safety
/// `vm` must be null or the JavaVM the JVM passed to `Agent_OnLoad` or
/// `Agent_OnAttach`.
pub unsafe fn current_jni(vm: *mut JavaVM) -> Option<Jni> {
    if vm.is_null() {
        return None;
    }
    let mut env: *mut c_void = ptr::null_mut();
    // SAFETY: `vm` is the VM's JavaVM; GetEnv only reads thread state.
    let rc = unsafe {
        match (**vm).GetEnv {
            Some(f) => f(vm, &mut env, JNI_VERSION_1_6 as jint),
            None => JNI_ERR,
        }
    };
    (rc == JNI_OK as jint && !env.is_null()).then_some(Jni(env as *mut JNIEnv))
}

/// Attaches the current native thread to the VM as a daemon thread.
///
/// # Safety
/// `vm` must be the JavaVM the JVM passed to `Agent_OnLoad` or
/// `Agent_OnAttach`.
pub unsafe fn attach_daemon(vm: *mut JavaVM, name: &CStr) -> Option<Jni> {
    // SAFETY: `vm` is the agent's JavaVM (this function's contract).
    if let Some(jni) = unsafe { current_jni(vm) } {
        return Some(jni);
    }
    let mut env: *mut c_void = ptr::null_mut();
    let mut args = JavaVMAttachArgs { version: JNI_VERSION_1_6 as jint, name: name.as_ptr() as *mut c_char, group: ptr::null_mut() };
    // SAFETY: `vm` is valid; `args` outlives the call.
    let rc = unsafe {
        match (**vm).AttachCurrentThreadAsDaemon {
            Some(f) => f(vm, &mut env, &mut args as *mut _ as *mut c_void),
            None => JNI_ERR,
        }
    };
    (rc == JNI_OK as jint && !env.is_null()).then_some(Jni(env as *mut JNIEnv))
}

/// Detaches the current thread from the VM.
///
/// # Safety
/// `vm` must be the JavaVM the JVM passed to `Agent_OnLoad` or
/// `Agent_OnAttach`, and the current thread one that [`attach_daemon`]
/// attached and that holds no JNI references it still uses.
pub unsafe fn detach(vm: *mut JavaVM) {
    // SAFETY: detaching a thread we attached ourselves.
    unsafe {
        if let Some(f) = (**vm).DetachCurrentThread {
            f(vm);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn modified_utf8_decodes_surrogate_pairs_and_nul() {
        // U+1D465 as two encoded surrogates (D835 DC65), as the JVM gives it.
        let x = [0xed, 0xa0, 0xb5, 0xed, 0xb1, 0xa5];
        assert_eq!(from_modified_utf8(&[b"Supp$".as_slice(), &x, b"Class"].concat()), "Supp$\u{1D465}Class");
        assert_eq!(from_modified_utf8(&[b'a', 0xc0, 0x80, b'b']), "a\0b");
        assert_eq!(from_modified_utf8("Ελληνικά 中文".as_bytes()), "Ελληνικά 中文");
        // Lone surrogates and malformed bytes: U+FFFD each, the rest kept.
        assert_eq!(from_modified_utf8(&[b'a', 0xed, 0xa0, 0xb5, b'b']), "a\u{fffd}b");
        assert_eq!(from_modified_utf8(&[0xed, 0xb1, 0xa5, b'c']), "\u{fffd}c");
        assert_eq!(from_modified_utf8(&[b'a', 0xff, b'b', 0xe4, 0xb8]), "a\u{fffd}b\u{fffd}\u{fffd}");
        // Whatever the encoder writes comes back.
        for text in ["thread-\u{1D465}", "nul\0inside", "plain", "\u{10FFFF}\u{FFFF}"] {
            assert_eq!(from_modified_utf8(modified_utf8(text).as_bytes()), text);
        }
    }
}

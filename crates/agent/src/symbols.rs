//! Method resolution: jmethodIDs to `package.Class.method` names, off the
//! signal path.
//!
//! AsyncGetCallTrace can only name frames whose jmethodIDs exist, so every
//! class gets `GetClassMethods` when it is prepared (and at start-up or attach
//! for classes loaded before). Most names are resolved lazily at dump time.
//!
//! Classes can unload during a recording, and asking the JVM about a method of
//! an unloaded class returns an error at best and crashes some JDK builds at
//! worst. So a class that *can* unload (defined by a loader other than the
//! boot, platform or application loader, or a hidden/anonymous class) has its
//! method names copied when it is prepared, and those names are used at dump
//! time without asking the JVM. Classes of the three built-in loaders never
//! unload, so asking about them later is safe.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};

use jvmti_sys::{jclass, jmethodID, jobject};

use crate::jvmti::{Jni, Jvmti};

/// A resolved method.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MethodName {
    /// Class in Java form, e.g. `java.util.HashMap` or `Foo$$Lambda`.
    pub class: Arc<str>,
    pub method: String,
    /// The JVM method descriptor, e.g. `(I)V` (empty when unknown).
    pub descriptor: String,
}

impl MethodName {
    pub fn frame_name(&self) -> String {
        format!("{}.{}", self.class, self.method)
    }
}

/// A class that can unload: a weak reference tells when it has.
struct UnloadableClass {
    weak: jobject,
    methods: Vec<usize>,
}

/// Early names are pruned when they exceed this many (and then twice the
/// number left after each pruning).
const FIRST_PRUNE_AT: usize = 20_000;

#[derive(Default)]
struct Inner {
    /// Names copied early for methods of classes that can unload.
    early: HashMap<usize, Arc<MethodName>>,
    /// The weak reference to the class of each method in `early` whose
    /// class has not been pruned (see [`Symbols::unloadable_lines`]).
    weak_of: HashMap<usize, jobject>,
    unloadable: Vec<UnloadableClass>,
    prune_at: usize,
    /// Names resolved at dump time (classes that never unload).
    cache: HashMap<usize, Arc<MethodName>>,
    /// Global references to the platform and application class loaders.
    builtin_loaders: Vec<jobject>,
    classes_seen: u64,
    unloadable_seen: u64,
    /// Prunes that forgot names (see [`Symbols::prunes`]).
    prunes: u64,
}

// SAFETY: the jobjects held are JNI global and weak global references, valid
// on any thread.
unsafe impl Send for Inner {}

#[derive(Default)]
pub struct Symbols {
    inner: Mutex<Inner>,
}

/// Converts a JVM class signature (`Ljava/lang/String;`, `[I`) to Java form
/// (`java.lang.String`, `int[]`), dropping a hidden class's address suffix.
pub fn class_name_from_signature(sig: &str) -> String {
    let dims = sig.bytes().take_while(|&b| b == b'[').count();
    let base = &sig[dims..];
    let mut name = match base {
        "Z" => "boolean".to_string(),
        "B" => "byte".to_string(),
        "C" => "char".to_string(),
        "S" => "short".to_string(),
        "I" => "int".to_string(),
        "J" => "long".to_string(),
        "F" => "float".to_string(),
        "D" => "double".to_string(),
        "V" => "void".to_string(),
        _ => {
            let inner = base.strip_prefix('L').unwrap_or(base);
            let inner = inner.strip_suffix(';').unwrap_or(inner);
            // Hidden and VM-anonymous classes' suffixes and the lambda
            // counter go, as the profile crate's readers drop them.
            oxprof_profile::names::class(&inner.replace('/', ".")).into_owned()
        }
    };
    for _ in 0..dims {
        name.push_str("[]");
    }
    name
}

/// Hidden and VM-anonymous classes carry an address (or, on JDK 11, an
/// identity hash) in their name.
fn is_hidden_signature(sig: &str) -> bool {
    let anonymous =
        sig.strip_suffix(';').and_then(|s| s.rsplit_once('/')).is_some_and(|(_, tail)| !tail.is_empty() && tail.bytes().all(|b| b.is_ascii_digit()));
    anonymous || sig.contains("/0x") || sig.contains(".0x") || sig.contains("+0x")
}

impl Symbols {
    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Remembers the built-in platform and application loaders (needs a live VM).
    pub fn init_builtin_loaders(&self, jni: Jni) {
        let mut found = Vec::new();
        for name in [c"getSystemClassLoader", c"getPlatformClassLoader"] {
            let local = jni.call_static_object(c"java/lang/ClassLoader", name, c"()Ljava/lang/ClassLoader;");
            if !local.is_null() {
                // SAFETY: `local` is the local reference call_static_object
                // just returned; it is not used after its deletion.
                unsafe {
                    found.push(jni.new_global(local));
                    jni.delete_local(local);
                }
            }
        }
        self.lock().builtin_loaders = found;
    }

    /// Prepares a class for sampling: creates its jmethodIDs, and copies its
    /// method names now if the class can unload.
    ///
    /// # Safety
    /// `class` must be a live JNI reference to a class.
    pub unsafe fn on_class_prepare(&self, jvmti: Jvmti, jni: Jni, class: jclass) {
        // SAFETY: `class` is live (this function's contract).
        let Ok(methods) = (unsafe { jvmti.class_methods(class) }) else { return };
        // SAFETY: as above.
        let unloadable = unsafe { self.can_unload(jvmti, jni, class) };
        let mut early = Vec::new();
        if unloadable {
            // SAFETY: as above.
            let Ok(sig) = (unsafe { jvmti.class_signature(class) }) else { return };
            let class_name: Arc<str> = class_name_from_signature(&sig).into();
            for &m in &methods {
                // SAFETY: `m` is one of `class`'s jmethodIDs, valid while the
                // live `class` keeps it loaded.
                if let Ok((name, descriptor)) = unsafe { jvmti.method_name(m) } {
                    early.push((m as usize, Arc::new(MethodName { class: class_name.clone(), method: name, descriptor })));
                }
            }
        }
        // SAFETY: `class` is live (this function's contract).
        let weak = if unloadable { unsafe { jni.new_weak_global(class) } } else { std::ptr::null_mut() };
        let mut inner = self.lock();
        inner.classes_seen += 1;
        if unloadable {
            inner.unloadable_seen += 1;
            inner.unloadable.push(UnloadableClass { weak, methods: early.iter().map(|(m, _)| *m).collect() });
            if !weak.is_null() {
                inner.weak_of.extend(early.iter().map(|(m, _)| (*m, weak)));
            }
            inner.early.extend(early);
        }
    }

    /// Whether any name of a class that can unload is kept.
    pub fn keeps_early_names(&self) -> bool {
        !self.lock().early.is_empty()
    }

    /// Whether enough early names piled up to be worth [`Symbols::prune`].
    pub fn needs_prune(&self) -> bool {
        let inner = self.lock();
        inner.early.len() > inner.prune_at.max(FIRST_PRUNE_AT)
    }

    /// Forgets the early names of classes that have unloaded, except for
    /// methods in `sampled` (still needed by the profile). Keeps memory
    /// bounded in programs that keep generating classes.
    pub fn prune(&self, jni: Jni, sampled: &std::collections::HashSet<usize>) -> usize {
        let mut inner = self.lock();
        let before = inner.early.len();
        let classes = std::mem::take(&mut inner.unloadable);
        for class in classes {
            // SAFETY: `class.weak` is the weak global reference (or null)
            // on_class_prepare made, deleted only here, when dropping it.
            if unsafe { jni.is_same(class.weak, std::ptr::null_mut()) } {
                for m in &class.methods {
                    inner.weak_of.remove(m);
                    if !sampled.contains(m) {
                        inner.early.remove(m);
                    }
                }
                // SAFETY: as above; `class` is dropped right after.
                unsafe { jni.delete_weak_global(class.weak) };
            } else {
                inner.unloadable.push(class);
            }
        }
        inner.early.shrink_to_fit();
        inner.weak_of.shrink_to_fit();
        inner.prune_at = inner.early.len() * 2;
        if inner.early.len() != before {
            inner.prunes += 1;
        }
        before - inner.early.len()
    }

    /// How many prunes forgot names so far: a cache of names made from
    /// these (`source::FrameNames`) checks its methods with
    /// [`Symbols::has_name`] when this changed.
    pub fn prunes(&self) -> u64 {
        self.lock().prunes
    }

    /// Whether a method's name is still here (it was resolved, and its
    /// class has not unloaded and been pruned since).
    pub fn has_name(&self, method: usize) -> bool {
        let inner = self.lock();
        inner.early.contains_key(&method) || inner.cache.contains_key(&method)
    }

    /// # Safety
    /// `class` must be a live JNI reference to a class.
    unsafe fn can_unload(&self, jvmti: Jvmti, jni: Jni, class: jclass) -> bool {
        // SAFETY: `class` is live (this function's contract).
        if let Ok(sig) = unsafe { jvmti.class_signature(class) } {
            if is_hidden_signature(&sig) {
                return true;
            }
        }
        // SAFETY: as above.
        let loader = match unsafe { jvmti.class_loader(class) } {
            Ok(l) => l,
            Err(_) => return true,
        };
        if loader.is_null() {
            return false; // the boot loader
        }
        // SAFETY: `loader` is the local reference GetClassLoader just
        // returned, the built-in loaders are global references we hold.
        let builtin = self.lock().builtin_loaders.iter().any(|&b| unsafe { jni.is_same(b, loader) });
        // SAFETY: as above; `loader` is not used afterwards.
        unsafe { jni.delete_local(loader) };
        !builtin
    }

    /// Prepares every class already loaded (at VMInit or attach).
    /// GetLoadedClasses hands back a local reference per class at once (20,000
    /// at an attach to a big application); room for them is asked for before
    /// the next JNI call, so `-Xcheck:jni` does not warn that they exceed the
    /// frame's capacity, and each is deleted once prepared.
    pub fn prepare_loaded_classes(&self, jvmti: Jvmti, jni: Jni) -> usize {
        let classes = jvmti.loaded_classes().unwrap_or_default();
        let n = classes.len();
        jni.ensure_local_capacity(n);
        for class in classes {
            // SAFETY: `class` is a local reference GetLoadedClasses returned
            // in this frame, deleted only after its last use.
            unsafe {
                self.on_class_prepare(jvmti, jni, class);
                jni.delete_local(class);
            }
        }
        n
    }

    /// The name of a sampled method. Must run on a thread attached to the VM.
    ///
    /// # Safety
    /// `method` must be a jmethodID the JVM gave out whose class has not
    /// unloaded, unless its name was copied early (at ClassPrepare, for
    /// classes that can unload; kept while it is sampled, see
    /// [`Symbols::prune`]): only then is the JVM not asked about it.
    pub unsafe fn resolve(&self, jvmti: Jvmti, jni: Jni, method: jmethodID) -> Arc<MethodName> {
        let key = method as usize;
        {
            let inner = self.lock();
            if let Some(n) = inner.early.get(&key).or_else(|| inner.cache.get(&key)) {
                return n.clone();
            }
        }
        // SAFETY: no early name, so `method`'s class has not unloaded (this
        // function's contract).
        let name = Arc::new(unsafe { Self::ask_jvm(jvmti, jni, method) }.unwrap_or_else(|| MethodName {
            class: "[unknown]".into(),
            method: "[unknown method]".into(),
            descriptor: String::new(),
        }));
        self.lock().cache.insert(key, name.clone());
        name
    }

    /// # Safety
    /// `method` must be a jmethodID the JVM gave out, of a class that has not
    /// unloaded.
    unsafe fn ask_jvm(jvmti: Jvmti, jni: Jni, method: jmethodID) -> Option<MethodName> {
        // SAFETY: `method` is valid (this function's contract).
        let class = unsafe { jvmti.method_declaring_class(method) }.ok()?;
        // The local reference to the class keeps it from unloading while we look.
        let result = (|| {
            // SAFETY: `class` is the local reference GetMethodDeclaringClass
            // just returned, and it keeps `method` valid.
            let sig = unsafe { jvmti.class_signature(class) }.ok()?;
            // SAFETY: `method` is valid (this function's contract).
            let (name, descriptor) = unsafe { jvmti.method_name(method) }.ok()?;
            Some(MethodName { class: class_name_from_signature(&sig).into(), method: name, descriptor })
        })();
        // SAFETY: as above; not used afterwards.
        unsafe { jni.delete_local(class) };
        result
    }

    /// The line number table of a method whose class may unload (see
    /// [`Symbols::may_unload`]), asked of the JVM only while a local
    /// reference made from the class's weak reference keeps it loaded:
    /// empty once the class has unloaded (or when the JVM has none).
    pub fn unloadable_lines(&self, jvmti: Jvmti, jni: Jni, method: usize) -> Vec<(i64, i32)> {
        let inner = self.lock();
        let Some(&weak) = inner.weak_of.get(&method) else { return Vec::new() };
        // SAFETY: `weak` is the class's weak global reference, deleted only
        // by `prune` under this lock, which we hold while promoting it.
        let class = unsafe { jni.new_local(weak) };
        drop(inner);
        if class.is_null() {
            return Vec::new();
        }
        // SAFETY: the local reference to the class keeps it, and so the
        // jmethodID `method` of one of its methods, valid while we ask.
        let table = unsafe { jvmti.line_number_table(method as jmethodID) }.unwrap_or_default();
        // SAFETY: `class` is the local reference made above, not used after.
        unsafe { jni.delete_local(class) };
        table
    }

    /// Whether the method's class may unload (its name was copied early):
    /// such methods must not be passed to the JVM later.
    pub fn may_unload(&self, method: usize) -> bool {
        self.lock().early.contains_key(&method)
    }

    /// (classes prepared, of which could unload, early names kept).
    pub fn stats(&self) -> (u64, u64, usize) {
        let inner = self.lock();
        (inner.classes_seen, inner.unloadable_seen, inner.early.len())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn signatures_to_java_names() {
        assert_eq!(class_name_from_signature("Ljava/lang/String;"), "java.lang.String");
        assert_eq!(class_name_from_signature("[I"), "int[]");
        assert_eq!(class_name_from_signature("[[Ljava/util/Map$Entry;"), "java.util.Map$Entry[][]");
        assert_eq!(class_name_from_signature("LFoo$$Lambda$14.0x0000000800c03000;"), "Foo$$Lambda");
        assert_eq!(class_name_from_signature("LFoo$$Lambda+0x0000000800c03000;"), "Foo$$Lambda");
        assert_eq!(class_name_from_signature("Lcom/x0/Bar0x;"), "com.x0.Bar0x");
        assert!(is_hidden_signature("LFoo$$Lambda$14.0x0000000800c03000;"));
        assert_eq!(class_name_from_signature("LMix$$Lambda$8/2054881392;"), "Mix$$Lambda");
        assert_eq!(class_name_from_signature("Ljava/lang/invoke/LambdaForm$MH/1725154839;"), "java.lang.invoke.LambdaForm$MH");
        assert!(is_hidden_signature("LMix$$Lambda$8/2054881392;"));
        assert!(!is_hidden_signature("Lorg/h2/V2;"));
        assert_eq!(class_name_from_signature("Lorg/h2/V2;"), "org.h2.V2");
        assert!(!is_hidden_signature("Ljava/lang/String;"));
    }
}

//! signal-safe: Whether the interrupted thread has set HotSpot's current
//! thread yet, asked the way HotSpot's own signal handler asks
//! (`Thread::current_or_null_safe`): through the pthread key of HotSpot's
//! `ThreadLocalStorage`.
//!
//! Why the handler must ask before calling `GetEnv`: `GetEnv` reads the
//! current thread from a C++ `thread_local` of libjvm. libjvm is loaded with
//! `dlopen`, so glibc gives each thread its block of libjvm's thread-locals
//! lazily, with `malloc`, on the thread's first access (`__tls_get_addr`). A
//! thread HotSpot has just created reads its stack bounds
//! (`pthread_getattr_np`, which calls `malloc`) before it sets its current
//! thread (`Thread::initialize_thread_current`). A sampling signal there made
//! the handler's `GetEnv` call `malloc` inside `malloc`: the thread waited
//! forever for the arena lock it held itself, and the JVM behind it (the
//! creating thread waits for it under `Threads_lock`, which safepoints and
//! `SIGTERM`'s shutdown thread need). `itimer` signals whichever thread runs,
//! and a program that starts threads in a loop runs little else, so it hung
//! there (gdb: `on_sigprof` → `jni_GetEnv` → `__tls_get_addr` → `malloc`
//! waiting, above `_int_malloc` ← `pthread_getattr_np` ←
//! `Thread::record_stack_base_and_size`). HotSpot sets the key right after
//! that `thread_local`, so while the key is unset `GetEnv` must not be called,
//! and once it is set `GetEnv` reads a block that exists.
//!
//! The key also gives the handler the thread's `JNIEnv` without `GetEnv` at
//! all ([`current_env`]): a `JavaThread` holds its `JNIEnv` at a fixed
//! offset, found with the key on a Java thread at start, and the env's first
//! word is the JNI function table every Java thread shares. So even the rare
//! slow path of a set thread-local (glibc allocating libjvm's block again
//! after a `dlopen` of another library with thread-locals) stays out of the
//! handler; `GetEnv` is left for when the key or offset is unknown.
//!
//! `pthread_getspecific` is not on POSIX's async-signal-safe list, but glibc's
//! reads the calling thread's key slots and allocates and locks nothing;
//! HotSpot's own SIGSEGV handler relies on it.

use std::sync::atomic::{AtomicU32, AtomicUsize, Ordering};

use crate::hotspot::safemem;

/// No key found (not searched yet, or not found): callers fall back to
/// calling `GetEnv` as before.
const UNKNOWN: u32 = u32::MAX;
/// HotSpot's `ThreadLocalStorage` key, or [`UNKNOWN`].
static KEY: AtomicU32 = AtomicU32::new(UNKNOWN);
/// Where a `JavaThread`'s `JNIEnv` sits inside it (the env less the thread's
/// `Thread*`), and the JNI function table every `JNIEnv` points to: with
/// both, the handler finds the current thread's `JNIEnv` without `GetEnv`
/// (see [`current_env`]). 0: unknown.
static ENV_OFFSET: AtomicUsize = AtomicUsize::new(0);
static ENV_FUNCTIONS: AtomicUsize = AtomicUsize::new(0);
/// `PTHREAD_KEYS_MAX` on Linux (glibc and musl).
const KEYS: u32 = 1024;
/// How far below its `JNIEnv` a `JavaThread` starts at most: the `JNIEnv` is
/// a field of `JavaThread` (`frames::find_env_offset` searches as far).
const MAX_ENV_OFFSET: usize = 4096;

// signal-safe: off (runs when a recording starts, on a Java thread)
/// Finds HotSpot's key from the calling thread, a Java thread whose `JNIEnv`
/// is `env`: the one key whose value (the thread's `Thread*`) lies less than
/// 4 KiB below `env`. HotSpot has one key for the process's life, so a key
/// found once stays. Returns the key, if known.
pub fn find(env: usize) -> Option<u32> {
    let known = KEY.load(Ordering::SeqCst);
    if known != UNKNOWN {
        return Some(known);
    }
    let key = key_below(env)?;
    // SAFETY: `key` is a live key (see the module comment); `env` is the
    // calling thread's own JNIEnv, whose first word is its function table.
    let (thread, functions) = unsafe { (libc::pthread_getspecific(key) as usize, (env as *const usize).read()) };
    ENV_OFFSET.store(env - thread, Ordering::SeqCst);
    ENV_FUNCTIONS.store(functions, Ordering::SeqCst);
    KEY.store(key, Ordering::SeqCst);
    Some(key)
}

/// The one key of the calling thread whose value lies less than
/// [`MAX_ENV_OFFSET`] below `env`; none when no key or several do.
fn key_below(env: usize) -> Option<u32> {
    let mut found = None;
    for key in 0..KEYS {
        // SAFETY: glibc returns null for a key that was never created or
        // is out of range; it only reads the calling thread's slots.
        let value = unsafe { libc::pthread_getspecific(key) } as usize;
        if value != 0 && value < env && env - value < MAX_ENV_OFFSET {
            if found.is_some() {
                return None;
            }
            found = Some(key);
        }
    }
    found
}
// signal-safe: on

/// Whether the calling thread has set HotSpot's current thread: `Some(false)`
/// for a thread being created or ending, or one HotSpot never attached;
/// `None` when the key is unknown. Async-signal-safe.
pub fn current_is_set() -> Option<bool> {
    let key = KEY.load(Ordering::Relaxed);
    if key == UNKNOWN {
        return None;
    }
    Some(is_set(key))
}

/// The calling thread's HotSpot `Thread*` as HotSpot's thread key holds it,
/// or 0 (key unknown, or a thread HotSpot has not attached or has detached).
/// Async-signal-safe.
pub fn current() -> usize {
    let key = KEY.load(Ordering::Relaxed);
    if key == UNKNOWN {
        return 0;
    }
    // SAFETY: see the module comment; `key` is a live key.
    unsafe { libc::pthread_getspecific(key) as usize }
}

/// The calling thread's `JNIEnv` found without `GetEnv`, which reads a
/// thread-local of libjvm (see the module comment: a first read may call
/// `malloc`): its HotSpot `Thread*` from the key, plus the `JNIEnv`'s offset
/// inside a `JavaThread`, where the word read must be the JNI function
/// table. `Some(0)` for a thread that is no Java thread (a GC or VM thread:
/// the word is something else) or has no `Thread` yet; `None` when that
/// cannot be told (key or offset unknown, the word unreadable): ask `GetEnv`.
/// Async-signal-safe.
pub fn current_env() -> Option<usize> {
    let key = KEY.load(Ordering::Relaxed);
    if key == UNKNOWN {
        return None;
    }
    // SAFETY: see the module comment; `key` is a live key.
    let thread = unsafe { libc::pthread_getspecific(key) } as usize;
    env_of(thread, ENV_OFFSET.load(Ordering::Relaxed), ENV_FUNCTIONS.load(Ordering::Relaxed))
}

/// [`current_env`] for `thread`, with the `JNIEnv` at `offset` in a
/// `JavaThread` and `functions` the JNI function table.
fn env_of(thread: usize, offset: usize, functions: usize) -> Option<usize> {
    if offset == 0 || functions == 0 {
        return None;
    }
    if thread == 0 {
        return Some(0);
    }
    let env = thread.checked_add(offset)?;
    let word = safemem::read_word(env)?;
    Some(if word == functions { env } else { 0 })
}

/// Whether the calling thread's value of `key` is set.
fn is_set(key: u32) -> bool {
    // SAFETY: see the module comment; `key` is a live key.
    !unsafe { libc::pthread_getspecific(key) }.is_null()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A "Java thread" holds the function table at the env's offset and
    /// gets its env; another thread (the word differs) gets none; unknown
    /// facts or an unreadable word leave it to GetEnv.
    #[test]
    fn the_env_is_found_only_in_a_java_thread() {
        assert!(safemem::init());
        let functions = 0x5eed_f00d_usize;
        let java = [0usize, 0, 0, functions, 0];
        let other = [0usize, 0, 0, 1234, 0];
        let (j, o) = (java.as_ptr() as usize, other.as_ptr() as usize);
        assert_eq!(env_of(j, 24, functions), Some(j + 24));
        assert_eq!(env_of(o, 24, functions), Some(0));
        assert_eq!(env_of(0, 24, functions), Some(0), "no Thread yet");
        assert_eq!(env_of(j, 0, functions), None);
        assert_eq!(env_of(j, 24, 0), None);
        assert_eq!(env_of(8, 24, functions), None, "unreadable: ask GetEnv");
    }

    /// A key whose value sits just below a fake `JNIEnv` is found; a thread
    /// that never set it reads as not set. (The real key is checked on real
    /// JVMs by the CLI's exit tests.)
    #[test]
    fn finds_the_key_below_the_env_and_tells_unset_threads() {
        let thread = vec![0u8; 1024];
        let base = thread.as_ptr() as usize;
        let mut key: libc::pthread_key_t = 0;
        // SAFETY: creates and sets a key of this test's thread.
        unsafe {
            assert_eq!(libc::pthread_key_create(&mut key, None), 0);
            assert_eq!(libc::pthread_setspecific(key, base as *const libc::c_void), 0);
        }
        assert_eq!(key_below(base + 0x300), Some(key));
        assert_eq!(key_below(base), None, "the env must lie above the thread");
        assert_eq!(key_below(base + MAX_ENV_OFFSET), None, "too far below");
        // (KEY itself is left alone: the handler tests share it.)
        assert!(is_set(key));
        assert!(!std::thread::spawn(move || is_set(key)).join().unwrap(), "a thread that never set the key");
        // Two candidates: no key is trusted.
        let mut other: libc::pthread_key_t = 0;
        // SAFETY: as above.
        unsafe {
            assert_eq!(libc::pthread_key_create(&mut other, None), 0);
            assert_eq!(libc::pthread_setspecific(other, (base + 8) as *const libc::c_void), 0);
        }
        assert_eq!(key_below(base + 0x300), None);
        // SAFETY: removes the test's keys.
        unsafe {
            libc::pthread_key_delete(key);
            libc::pthread_key_delete(other);
        }
    }
}

//! The native side of `oxprof.jar` (`one.oxprof.OxProfiler`, sources in
//! `java/src/main/java`): `JNI_OnLoad` and the `Java_one_oxprof_*` methods.
//!
//! One agent, one state. When the JVM already runs this library (loaded by
//! `-agentpath` or `oxprof attach`), `System.load` of the same file gets the
//! same `dlopen` handle, so the methods below see the agent those created.
//! When the jar loads it first, the JVM has made no agent of it: `JNI_OnLoad`
//! creates the JVMTI environment and the agent as a first attach does
//! (idle, quiet), and a later `oxprof attach` of the same file finds it. A
//! copy loaded from another file would be a second agent: it refuses to run
//! (`init0` says which file to load instead), as `Agent_OnAttach` does.
//!
//! Commands go through [`commands::run`] exactly as attach's do; the reply
//! lines come back as the method's string, an error as a Java exception with
//! the agent's one-line message: `IllegalArgumentException` for options the
//! agent does not accept, `IllegalStateException` for commands that cannot
//! run now, and for commands that ran but did not do all that was asked
//! ([`not_done`]: a profile not written where asked; the message, one line,
//! ends with the whole reply, what the command did do), which attach's
//! user reads in the reply but a program would not.
//!
//! Context labels (`one.oxprof.ThreadLabels`, docs/labels.md): a thread
//! registers once and gets a direct buffer over its slot
//! (`sampling::label_slots`); a label set is named once (`labels::intern`);
//! setting and clearing then happen in Java, with no call into the agent.

use std::ffi::{c_void, CStr};
use std::sync::{Mutex, OnceLock};

use jvmti_sys::*;

use crate::commands;
use crate::jvmti::{self, Jni};
use crate::log;
use crate::options::{Config, LogLevel, OptionError};
use crate::{guard, AGENT};

/// One command at a time, from Java or from attach.
pub(crate) static COMMANDS: Mutex<()> = Mutex::new(());

/// Why this copy of the library cannot be the JVM's agent, when it cannot.
static LOAD_ERROR: OnceLock<String> = OnceLock::new();

const ILLEGAL_ARGUMENT: &CStr = c"java/lang/IllegalArgumentException";
const ILLEGAL_STATE: &CStr = c"java/lang/IllegalStateException";

/// Keeps this library mapped for the process's life: a library loaded by
/// `System.load` is unloaded when its class loader is collected, and the
/// JVM would then call JVMTI callbacks and signal handlers into unmapped
/// code.
fn pin_library() {
    // SAFETY: Dl_info is plain data; all-zero is valid.
    let mut info: libc::Dl_info = unsafe { std::mem::zeroed() };
    // SAFETY: dladdr with the address of one of our own functions; the
    // path it returns is NUL-terminated and lives while the library is
    // loaded; dlopen with RTLD_NOLOAD only bumps the count of an object
    // already loaded (and RTLD_NODELETE keeps it).
    unsafe {
        if libc::dladdr(pin_library as *const c_void, &mut info) != 0 && !info.dli_fname.is_null() {
            libc::dlopen(info.dli_fname, libc::RTLD_NOW | libc::RTLD_NOLOAD | libc::RTLD_NODELETE);
        }
    }
}

/// Called by `System.load` (through `OxProfiler.getInstance`).
///
/// # Safety
/// As the JVM calls it: `vm` is its JavaVM, on a Java thread.
#[no_mangle]
pub unsafe extern "system" fn JNI_OnLoad(vm: *mut JavaVM, _reserved: *mut c_void) -> jint {
    guard("JNI_OnLoad", JNI_VERSION_1_8 as jint, || {
        if AGENT.get().is_some() {
            // Loaded by -agentpath or attach: the same agent.
            pin_library();
            return JNI_VERSION_1_8 as jint;
        }
        if let Some(path) = crate::other_copy() {
            let _ =
                LOAD_ERROR.set(format!("oxprof is already loaded in this JVM from {path}; load that file (-Doxprof.library={path}) rather than a second copy"));
            return JNI_VERSION_1_8 as jint;
        }
        // Quiet, as an attached agent: replies carry the messages.
        log::configure(LogLevel::Error, None);
        match crate::init(vm, Config::default()) {
            Ok(agent) => {
                pin_library();
                // SAFETY: `vm` is the JavaVM the JVM passed to JNI_OnLoad.
                if let Some(jni) = unsafe { jvmti::current_jni(vm) } {
                    agent.symbols.init_builtin_loaders(jni);
                    let n = agent.symbols.prepare_loaded_classes(agent.jvmti, jni);
                    log::debug(&format!("loaded by oxprof.jar: prepared {n} loaded classes"));
                }
            }
            Err(e) => {
                let _ = LOAD_ERROR.set(e);
            }
        }
        JNI_VERSION_1_8 as jint
    })
}

/// `OxProfiler.init0()`: null when this library is the JVM's agent, else why not.
///
/// # Safety
/// As the JVM calls a static native method: `env` is the thread's JNIEnv.
#[no_mangle]
pub unsafe extern "system" fn Java_one_oxprof_OxProfiler_init0(env: *mut JNIEnv, _class: jclass) -> jstring {
    guard("OxProfiler.init0", std::ptr::null_mut(), || match (AGENT.get(), LOAD_ERROR.get()) {
        (Some(_), _) => std::ptr::null_mut(),
        (None, Some(e)) => Jni(env).new_string(e),
        (None, None) => Jni(env).new_string("the oxprof agent was not initialised (JNI_OnLoad did not run)"),
    })
}

/// `OxProfiler.version0()`: the agent's version and the file it runs from.
///
/// # Safety
/// As the JVM calls a static native method: `env` is the thread's JNIEnv.
#[no_mangle]
pub unsafe extern "system" fn Java_one_oxprof_OxProfiler_version0(env: *mut JNIEnv, _class: jclass) -> jstring {
    guard("OxProfiler.version0", std::ptr::null_mut(), || Jni(env).new_string(env!("CARGO_PKG_VERSION")))
}

/// `OxProfiler.execute0(command)`: runs one command as attach runs it.
///
/// # Safety
/// As the JVM calls a static native method: `env` is the thread's JNIEnv,
/// `command` a live reference to a String.
#[no_mangle]
pub unsafe extern "system" fn Java_one_oxprof_OxProfiler_execute0(env: *mut JNIEnv, _class: jclass, command: jstring) -> jstring {
    let jni = Jni(env);
    let failed = guard("OxProfiler.execute", Err((ILLEGAL_STATE, "internal error in the oxprof agent (see its log)".to_string())), || {
        // SAFETY: `command` is the String argument of this native method.
        execute(jni, unsafe { jni.string(command) })
    });
    match failed {
        Ok(reply) => reply,
        Err((class, message)) => {
            if !jni.exception_pending() {
                jni.throw_new(class, &message);
            }
            std::ptr::null_mut()
        }
    }
}

type Thrown = (&'static CStr, String);

fn execute(jni: Jni, command: Option<String>) -> Result<jstring, Thrown> {
    let agent = AGENT.get().ok_or_else(|| (ILLEGAL_STATE, LOAD_ERROR.get().cloned().unwrap_or_else(|| "the oxprof agent is not loaded".into())))?;
    let Some(text) = command else { return Ok(std::ptr::null_mut()) }; // exception pending
    let config = Config::parse(&text)
        .and_then(|c| {
            if let Some(file) = &c.file {
                crate::output::check_writable(file).map_err(|e| OptionError { option: format!("file={}", file.display()), problem: e.to_string() })?;
            }
            Ok(c)
        })
        .map_err(|e| (ILLEGAL_ARGUMENT, e.to_string()))?;
    if config.log.is_some() || text.contains("loglevel=") {
        let file = crate::open_log(&config).map_err(|e| (ILLEGAL_ARGUMENT, format!("invalid agent option 'log': cannot open the log file: {e}")))?;
        log::configure(config.loglevel, file);
    }
    let lines = {
        let _one = COMMANDS.lock().unwrap_or_else(|e| e.into_inner());
        commands::run(agent, config, jni).map_err(|e| (ILLEGAL_STATE, e))?
    };
    let failed = not_done(&lines, crate::output::files::in_private_dir);
    if !failed.is_empty() {
        return Err((ILLEGAL_STATE, format!("{} (the agent's reply: {})", failed.join("; "), lines.join(" | "))));
    }
    Ok(jni.new_string(&lines.join("\n")))
}

/// The reply lines of a command that ran but did not do what was asked, as
/// what went wrong: the profile not written to the file asked for while a
/// JFR recording streams to another (`note: ... was not written`), a failed
/// JFR stream (`warning: ...`), a profile written to a fallback file
/// (`profile written to` a file in the private directory, `is_fallback`)
/// because the file asked for could not be.
fn not_done(lines: &[String], is_fallback: impl Fn(&std::path::Path) -> bool) -> Vec<String> {
    lines
        .iter()
        .filter_map(|l| {
            if let Some(w) = l.strip_prefix("warning: ") {
                return Some(w.to_string());
            }
            if let Some(n) = l.strip_prefix("note: ").filter(|n| n.ends_with(" was not written")) {
                return Some(n.to_string());
            }
            let written = l.strip_prefix("profile written to ").map(std::path::Path::new)?;
            is_fallback(written).then(|| format!("the profile could not be written where asked and went to {} (the agent's log says why)", written.display()))
        })
        .collect()
}

/// `ThreadLabels.activeFlag0()`: a direct buffer over two words: 1 while a
/// recording runs, and the label-set generation (`labels::recycle`).
///
/// # Safety
/// As the JVM calls a static native method: `env` is the thread's JNIEnv.
#[no_mangle]
pub unsafe extern "system" fn Java_one_oxprof_ThreadLabels_activeFlag0(env: *mut JNIEnv, _class: jclass) -> jobject {
    guard("ThreadLabels.activeFlag0", std::ptr::null_mut(), || {
        // SAFETY: the two words are a static array, valid for the process's life.
        unsafe { Jni(env).new_direct_buffer(crate::sampling::label_slots::flag_words().cast(), 8) }
    })
}

/// `ThreadLabels.registerThread0()`: a direct buffer over the calling
/// thread's label slot, or null when it has none (no memory, a tid beyond
/// the table).
///
/// # Safety
/// As the JVM calls a static native method: `env` is the thread's JNIEnv.
#[no_mangle]
pub unsafe extern "system" fn Java_one_oxprof_ThreadLabels_registerThread0(env: *mut JNIEnv, _class: jclass) -> jobject {
    guard("ThreadLabels.registerThread0", std::ptr::null_mut(), || {
        match crate::sampling::label_slots::register(crate::sampling::threads::current_tid()) {
            // SAFETY: the slot is in a table that is never unmapped.
            Some(slot) => unsafe { Jni(env).new_direct_buffer(slot.cast(), 4) },
            None => std::ptr::null_mut(),
        }
    })
}

/// `ThreadLabels.intern0(parent, keysAndValues)`: the id of the label set
/// the pairs make inside set `parent`; throws `IllegalArgumentException`
/// for a bad key.
///
/// # Safety
/// As the JVM calls a static native method: `env` is the thread's JNIEnv,
/// `pairs` a live reference to a `String[]`.
#[no_mangle]
pub unsafe extern "system" fn Java_one_oxprof_ThreadLabels_intern0(env: *mut JNIEnv, _class: jclass, parent: jint, pairs: jobjectArray) -> jint {
    let jni = Jni(env);
    let result = guard("ThreadLabels.intern0", Ok(crate::labels::OVER_LIMIT), || {
        // SAFETY: `pairs` is the String[] argument of this native method.
        let Some(items) = (unsafe { jni.string_array(pairs) }) else { return Ok(crate::labels::NONE) }; // exception pending
        let own: Vec<(String, String)> = items.chunks(2).map(|p| (p[0].clone().unwrap_or_default(), p.get(1).cloned().flatten().unwrap_or_default())).collect();
        crate::labels::intern(parent.max(0) as u32, &own)
    });
    match result {
        Ok(id) => id as jint,
        Err(e) => {
            if !jni.exception_pending() {
                jni.throw_new(ILLEGAL_ARGUMENT, &e);
            }
            0
        }
    }
}

/// `ThreadLabels.stats0(refusedOpens)`: the label sets named so far, the
/// limit, and the contexts Java opened with the over-limit set (it counts
/// them: past the limit it stops asking the agent).
///
/// # Safety
/// As the JVM calls a static native method: `env` is the thread's JNIEnv.
#[no_mangle]
pub unsafe extern "system" fn Java_one_oxprof_ThreadLabels_stats0(env: *mut JNIEnv, _class: jclass, refused_opens: jlong) -> jstring {
    guard("ThreadLabels.stats0", std::ptr::null_mut(), || Jni(env).new_string(&crate::labels::stats(refused_opens.max(0) as u64)))
}

/// `OxProfiler.span0(start, end, tag)`: queues a span the calling thread
/// timed (`System.nanoTime` values) for the JFR stream (`spans.rs`).
///
/// # Safety
/// As the JVM calls a static native method: `env` is the thread's JNIEnv,
/// `tag` null or a live reference to a String.
#[no_mangle]
pub unsafe extern "system" fn Java_one_oxprof_OxProfiler_span0(env: *mut JNIEnv, _class: jclass, start: jlong, end: jlong, tag: jstring) {
    guard("OxProfiler.span0", (), || {
        if !crate::output::jfr_stream::is_active() {
            return; // no JFR recording: nowhere to write it
        }
        let tid = crate::sampling::threads::current_tid();
        // SAFETY: `tag` is the String argument of this native method.
        let tag = unsafe { Jni(env).string(tag) }.unwrap_or_else(|| "null".into());
        let labels = crate::sampling::label_slots::current(tid);
        crate::spans::record(crate::spans::Span { start_ticks: start.max(0) as u64, end_ticks: end.max(start).max(0) as u64, tid, tag, labels });
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replies_that_did_not_do_what_was_asked_are_told() {
        let lines = |l: &[&str]| l.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        let fallback = |p: &std::path::Path| p.starts_with("/private");
        let ok =
            lines(&["summary: samples=3", "jfr summary: chunks=1", "profile written to /tmp/p.html", "note: this recording was not started with a .jfr file"]);
        assert!(not_done(&ok, fallback).is_empty());
        let streamed = lines(&["jfr summary: chunks=2", "note: a JFR recording streams to the file chosen at start; /tmp/o.jfr was not written"]);
        assert_eq!(not_done(&streamed, fallback), ["a JFR recording streams to the file chosen at start; /tmp/o.jfr was not written"]);
        let moved = lines(&["summary: samples=3", "warning: disk full", "profile written to /private/x.html"]);
        let failed = not_done(&moved, fallback);
        assert_eq!(failed.len(), 2);
        assert_eq!(failed[0], "disk full");
        assert!(failed[1].contains("/private/x.html"), "{failed:?}");
    }
}

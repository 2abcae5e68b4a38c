//! liboxprof.so: the oxprof JVMTI agent.
//!
//! This module owns the JVM-facing entry points (`Agent_OnLoad`,
//! `Agent_OnAttach`, `Agent_OnUnload`) and the JVMTI event callbacks. Every
//! entry point runs inside [`guard`], so no panic ever crosses into the JVM:
//! it is caught and logged.
//!
//! `java_api` holds the native side of `oxprof.jar` (`JNI_OnLoad`, which
//! makes the agent when the jar loads the library first), `labels` the
//! context-label sets it names, `spans` the intervals it times.
//!
//! The layout (see ARCHITECTURE.md): `options`, `jvmti`, `log`, `commands`,
//! `profiler` (the recording lifecycle), `symbols` (Java method names) and
//! `memory` (the agent's own heap use) at the top; `sampling` (the signal handler and its lock-free stores),
//! `engine` (perf_events, ctimer, itimer), `hotspot` (HotSpot's internals and
//! the own walks), `native` (native and kernel frames), `heap` (allocations,
//! live objects, leaks) and `output` (files, JFR). Modules the signal handler
//! can reach open with `//! signal-safe:`; `scripts/check-layout.py` keeps
//! them apart.

pub mod commands;
pub mod engine;
pub mod heap;
pub mod hotspot;
pub mod java_api;
pub mod jvmti;
pub mod labels;
pub mod locks;
pub mod log;
pub mod memory;
pub mod native;
pub mod options;
pub mod output;
pub mod profiler;
pub mod sampling;
pub mod sigchain;
pub mod source;
pub mod spans;
pub mod symbols;
pub mod trigger;

use std::ffi::{c_char, c_void, CStr};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::OnceLock;

use jvmti_sys::asgct::AsyncGetCallTraceFn;
use jvmti_sys::*;

use crate::heap::{allocstack, live_report};
use crate::hotspot::vmstructs::{self, VmStructs};
use crate::hotspot::{frames, javastack, javawalk, method_ids};
use crate::jvmti::{Jni, Jvmti};
use crate::options::Config;
use crate::output::{intervals, jfr_stream};
use crate::profiler::Profiler;
use crate::sampling::{signal, threads};
use crate::symbols::Symbols;

/// The agent's state, created once per JVM.
pub struct Agent {
    pub vm: *mut JavaVM,
    pub jvmti: Jvmti,
    pub asgct: Option<AsyncGetCallTraceFn>,
    pub symbols: Symbols,
    pub profiler: Profiler,
    /// Options given when the agent was loaded.
    pub config: Config,
    /// Whether objects may be tagged (used to look up allocated classes fast).
    pub can_tag: bool,
    /// HotSpot's structure table, when the JVM exports it.
    pub vm_structs: Option<VmStructs>,
}

// SAFETY: `vm` is the process-wide JavaVM, usable from any thread; the rest
// is synchronised internally.
unsafe impl Send for Agent {}
// SAFETY: as above.
unsafe impl Sync for Agent {}

static AGENT: OnceLock<Agent> = OnceLock::new();

/// The JVM's structure table, once the agent is made (`None` before, or
/// when the JVM's internals are not used: see `hotspot::vmstructs::decide`).
pub(crate) fn vm_structs() -> Option<&'static VmStructs> {
    AGENT.get()?.vm_structs.as_ref()
}

/// Set by `Agent_OnLoad`: VMInit finishes what loading at start-up began.
/// An agent attached to a JVM still starting may see VMInit too (its
/// environment can be created between the live phase and the event), and
/// must not start a second time there.
static LOADED_AT_STARTUP: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Runs an entry point, turning a panic into a logged error and `on_panic`.
fn guard<T>(what: &str, on_panic: T, f: impl FnOnce() -> T) -> T {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(v) => v,
        Err(p) => {
            let msg = p.downcast_ref::<&str>().map(|s| s.to_string()).or_else(|| p.downcast_ref::<String>().cloned()).unwrap_or_default();
            log::error(&format!("internal error in {what}: {msg}"));
            on_panic
        }
    }
}

fn find_asgct() -> Option<AsyncGetCallTraceFn> {
    // SAFETY: dlsym/dlopen with valid C strings; the symbol, if present, has
    // AsyncGetCallTrace's signature in every HotSpot since JDK 6.
    unsafe {
        let mut sym = libc::dlsym(libc::RTLD_DEFAULT, c"AsyncGetCallTrace".as_ptr());
        if sym.is_null() {
            let jvm = libc::dlopen(c"libjvm.so".as_ptr(), libc::RTLD_NOW | libc::RTLD_NOLOAD);
            if !jvm.is_null() {
                sym = libc::dlsym(jvm, c"AsyncGetCallTrace".as_ptr());
            }
        }
        (!sym.is_null()).then(|| std::mem::transmute::<*mut c_void, AsyncGetCallTraceFn>(sym))
    }
}

fn options_string(options: *const c_char) -> String {
    if options.is_null() {
        String::new()
    } else {
        // SAFETY: the JVM passes a NUL-terminated string.
        unsafe { CStr::from_ptr(options) }.to_string_lossy().into_owned()
    }
}

/// The `log=` file, appended to if it is a regular file (never through a
/// symbolic link; a new one is 0600).
fn open_log(config: &Config) -> std::io::Result<Option<std::fs::File>> {
    config.log.as_deref().map(|p| output::files::open_chosen(p, true).map(|(f, _)| f)).transpose()
}

/// Parses options and prepares logging; errors are one line for the user.
fn configure(options: &str) -> Result<Config, String> {
    let config = Config::parse(options).map_err(|e| e.to_string())?;
    prepare(&config)?;
    Ok(config)
}

/// What a load's options set up before the agent starts: the log, and a
/// check that `file=` can be written.
fn prepare(config: &Config) -> Result<(), String> {
    let file = open_log(config).map_err(|e| {
        format!("invalid agent option 'log={}': cannot open the log file: {e}", config.log.as_deref().map(|p| p.display().to_string()).unwrap_or_default())
    })?;
    log::configure(config.loglevel, file);
    if let Some(file) = &config.file {
        output::check_writable(file).map_err(|e| format!("invalid agent option 'file={}': {e}", file.display()))?;
    }
    Ok(())
}

/// Adds the capabilities oxprof uses; returns whether objects can be tagged.
fn capabilities(jvmti: Jvmti, config: &Config) -> Result<bool, String> {
    let potential = jvmti.potential_capabilities().map_err(|e| format!("cannot query JVMTI capabilities: {e}"))?;
    if config.alloc.is_some() && potential.can_generate_sampled_object_alloc_events() == 0 {
        return Err("invalid agent option 'alloc': this JVM cannot sample allocations (no JVMTI can_generate_sampled_object_alloc_events); allocation profiling (JEP 331) needs JDK 11 or later".into());
    }
    // SAFETY: all-zero capabilities are valid; we then set the bits we want.
    let mut caps: jvmtiCapabilities = unsafe { std::mem::zeroed() };
    caps.set_can_get_line_numbers(potential.can_get_line_numbers());
    caps.set_can_get_source_file_name(potential.can_get_source_file_name());
    caps.set_can_generate_compiled_method_load_events(potential.can_generate_compiled_method_load_events());
    caps.set_can_generate_sampled_object_alloc_events(potential.can_generate_sampled_object_alloc_events());
    caps.set_can_tag_objects(potential.can_tag_objects());
    // Lock profiling; HotSpot posts the events from the contended path only,
    // and only while they are enabled.
    caps.set_can_generate_monitor_events(potential.can_generate_monitor_events());
    // Live tracking counts GCs; the capability costs nothing until the events are enabled.
    caps.set_can_generate_garbage_collection_events(potential.can_generate_garbage_collection_events());
    jvmti.add_capabilities(&caps).map_err(|e| format!("cannot add JVMTI capabilities: {e}"))?;
    Ok(potential.can_tag_objects() != 0)
}

fn callbacks() -> jvmtiEventCallbacks {
    // SAFETY: an all-null callback table is valid; we fill what we use.
    let mut cb: jvmtiEventCallbacks = unsafe { std::mem::zeroed() };
    cb.VMInit = Some(on_vm_init);
    cb.VMDeath = Some(on_vm_death);
    cb.ClassLoad = Some(on_class_load);
    cb.ClassPrepare = Some(on_class_prepare);
    cb.ThreadStart = Some(on_thread_start);
    cb.ThreadEnd = Some(on_thread_end);
    cb.CompiledMethodLoad = Some(on_compiled_method_load);
    cb.DynamicCodeGenerated = Some(on_dynamic_code_generated);
    cb.SampledObjectAlloc = Some(on_sampled_object_alloc);
    cb.GarbageCollectionFinish = Some(on_gc_finish);
    cb.MonitorContendedEnter = Some(on_monitor_contended_enter);
    cb.MonitorContendedEntered = Some(on_monitor_contended_entered);
    cb
}

/// Creates the agent: capabilities, callbacks, events. Shared by load and attach.
fn init(vm: *mut JavaVM, config: Config) -> Result<&'static Agent, String> {
    // SAFETY: `vm` is the JavaVM passed to Agent_OnLoad/Agent_OnAttach.
    let jvmti = unsafe { Jvmti::from_vm(vm) }.map_err(|e| {
        if e.0 == JVMTI_ERROR_WRONG_PHASE {
            format!("cannot get a JVMTI environment: the JVM did not reach its live phase within 10 s (still starting, or shutting down): {e}")
        } else {
            format!("cannot get a JVMTI environment: {e}")
        }
    })?;
    let can_tag = capabilities(jvmti, &config)?;
    if let Some(interval) = config.alloc {
        // HotSpot draws each thread's next sample point with the interval in
        // force at its previous one: set it before any Java thread runs so
        // the first samples already follow it (alloc=0 sees everything).
        if let Err(e) = jvmti.set_heap_sampling_interval(interval.min(i32::MAX as u64) as jint) {
            log::debug(&format!("cannot set the heap sampling interval at load time: {e}"));
        }
        // HotSpot 11-24 arms a TLAB's sample point only when the TLAB is
        // taken while SampledObjectAlloc is enabled: a TLAB taken before the
        // recording starts (at VMInit) is used up without a sample and its
        // bytes never counted. Enabled now, every TLAB is armed from the
        // first on JDK 11; 12-24 honour it from the live phase only, where
        // `heap::alloc::arm_current_tlab` fills the main thread's first TLAB
        // instead. The callback drops samples until the recording runs; a
        // thread filter enables it per thread.
        if config.start && config.alloc_threads.is_none() {
            if let Err(e) = jvmti.set_event(true, JVMTI_EVENT_SAMPLED_OBJECT_ALLOC) {
                log::debug(&format!("cannot enable SampledObjectAlloc at load time: {e}"));
            }
        }
    }
    jvmti.set_event_callbacks(&callbacks()).map_err(|e| format!("cannot set JVMTI callbacks: {e}"))?;
    // ClassLoad must be enabled or AsyncGetCallTrace refuses every walk.
    // CompiledMethodLoad being enabled makes HotSpot record debug information
    // at non-safepoint PCs (DebugNonSafepoints left at its default), so
    // inlined frames are attributed right.
    for event in
        [JVMTI_EVENT_VM_INIT, JVMTI_EVENT_VM_DEATH, JVMTI_EVENT_CLASS_LOAD, JVMTI_EVENT_CLASS_PREPARE, JVMTI_EVENT_THREAD_START, JVMTI_EVENT_THREAD_END]
    {
        if let Err(e) = jvmti.set_event(true, event) {
            log::warn(&format!("cannot enable JVMTI event {event}: {e}"));
        }
    }
    // Inlined frames are attributed right only when HotSpot records debug
    // information at every PC (DebugNonSafepoints). Switch the flag on
    // directly when the JVM exports its flag table; otherwise enabling
    // CompiledMethodLoad has the same effect, at the cost of JVM work for
    // every compiled method (0.8% of CPU on javac). Only when CPU profiling
    // runs now or may start later.
    // Decides, from the JVM's version, whether HotSpot's internals may be
    // used at all (`start` says why not); `load` is empty when they may not.
    vmstructs::decide(jvmti);
    let vm_structs = VmStructs::load();
    if config.cpu.is_some() || !config.start {
        if vm_structs.as_ref().is_some_and(|v| v.enable_debug_non_safepoints()) {
            log::debug("DebugNonSafepoints switched on through the JVM's flag table");
        } else {
            enable_code_events(jvmti);
            log::debug("DebugNonSafepoints through the CompiledMethodLoad event (no flag table)");
        }
    }
    let asgct = find_asgct();
    if asgct.is_none() {
        log::warn("AsyncGetCallTrace not found: this JVM is not HotSpot; CPU profiling is unavailable");
    }
    let agent = Agent { vm, jvmti, asgct, symbols: Symbols::default(), profiler: Profiler::new(), config, can_tag, vm_structs };
    AGENT.set(agent).map_err(|_| "the agent is already loaded".to_string())?;
    AGENT.get().ok_or_else(|| "agent state missing".to_string())
}

/// Called by the JVM for `-agentpath:liboxprof.so=OPTIONS`.
///
/// # Safety
/// As the JVM calls it: `vm` is its JavaVM, `options` null or a
/// NUL-terminated string.
#[no_mangle]
pub unsafe extern "C" fn Agent_OnLoad(vm: *mut JavaVM, options: *mut c_char, _reserved: *mut c_void) -> jint {
    guard("Agent_OnLoad", JNI_ERR, || {
        LOADED_AT_STARTUP.store(true, std::sync::atomic::Ordering::Relaxed);
        let raw = options_string(options);
        if let Some(agent) = AGENT.get() {
            return load_again(agent, &raw);
        }
        if let Some(path) = other_copy() {
            // Two copies would each arm timers and take each other's
            // signals: this one stays inert, and the JVM starts.
            eprintln!("oxprof: already loaded in this JVM from {path}; this copy stays inactive and its options are ignored");
            return JNI_OK as jint;
        }
        let configured = configure(&raw).inspect(|config| {
            if let Some(note) = &config.idle_note {
                // Options that start nothing: say so, rather than load idle
                // without a word.
                eprintln!("{note}");
            }
        });
        match configured.and_then(|config| init(vm, config)) {
            Ok(_) => JNI_OK as jint,
            Err(e) => {
                // The JVM refuses to start; say why on the console, in one line.
                eprintln!("oxprof: {e}");
                JNI_ERR
            }
        }
    })
}

/// Options of a second `-agentpath` load of this library, to start with at
/// VMInit when the first load was idle (e.g. an idle agent installed for a
/// whole fleet through `JAVA_TOOL_OPTIONS`, then `oxprof record`).
static LATE_START: std::sync::Mutex<Option<Config>> = std::sync::Mutex::new(None);

/// This library loaded a second time at startup. Bad options refuse the
/// start as on a first load; otherwise the JVM starts, profiling with the
/// second load's options when the first started nothing, else with the
/// first's, and one line says which.
fn load_again(agent: &Agent, raw: &str) -> jint {
    let config = match Config::parse(raw) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("oxprof: {e}");
            return JNI_ERR;
        }
    };
    if !config.start {
        eprintln!("oxprof: loaded twice; the second load starts nothing and is ignored");
        return JNI_OK as jint;
    }
    let mut late = LATE_START.lock().unwrap_or_else(|e| e.into_inner());
    if agent.config.start || late.is_some() {
        eprintln!("oxprof: loaded twice, both times with profiling options; profiling runs with the first load's, these are ignored: {raw}");
        return JNI_OK as jint;
    }
    if let Err(e) = prepare(&config) {
        eprintln!("oxprof: {e}");
        return JNI_ERR;
    }
    if let Some(interval) = config.alloc {
        // As at a first load: before any Java thread runs.
        let _ = agent.jvmti.set_heap_sampling_interval(interval.min(i32::MAX as u64) as jint);
    }
    eprintln!("oxprof: loaded twice; the first load was idle, profiling starts with the second's options");
    *late = Some(config);
    JNI_OK as jint
}

/// The `reply=` path of a raw option string, found before full parsing so
/// even a parse error can be reported to the CLI.
fn reply_path(options: &str) -> Option<std::path::PathBuf> {
    options.split(',').find_map(|o| o.trim().strip_prefix("reply=")).filter(|p| !p.is_empty()).map(Into::into)
}

/// Another oxprof library mapped into this process from a different file,
/// which would have state of its own.
fn other_copy() -> Option<String> {
    // SAFETY: Dl_info is plain data; all-zero is valid.
    let mut info: libc::Dl_info = unsafe { std::mem::zeroed() };
    // SAFETY: dladdr with the address of one of our own functions.
    let ours = if unsafe { libc::dladdr(Agent_OnAttach as *const c_void, &mut info) } != 0 && !info.dli_fname.is_null() {
        // SAFETY: dladdr returned a NUL-terminated path.
        std::fs::canonicalize(unsafe { CStr::from_ptr(info.dli_fname) }.to_string_lossy().as_ref()).ok()?
    } else {
        return None;
    };
    let maps = std::fs::read_to_string("/proc/self/maps").ok()?;
    maps.lines()
        .filter_map(|l| l.split_whitespace().nth(5))
        .filter(|p| p.contains("liboxprof") && p.ends_with(".so"))
        .find(|p| std::fs::canonicalize(p).map_or(true, |c| c != ours))
        .map(str::to_string)
}

/// Called by the JVM when oxprof is loaded into a running VM, the first time
/// and for every later command (`start`, `stop`, `dump`, `status`).
///
/// When this returns an error the JVM unloads the library again, which is
/// only safe while it has registered nothing with the JVM: so an error is
/// returned for bad options on the first load, or for a failed command once
/// an earlier load keeps the library mapped; otherwise the error goes in the
/// reply and the agent stays loaded, idle.
///
/// # Safety
/// As the JVM calls it: `vm` is its JavaVM, `options` null or a
/// NUL-terminated string.
#[no_mangle]
pub unsafe extern "C" fn Agent_OnAttach(vm: *mut JavaVM, options: *mut c_char, _reserved: *mut c_void) -> jint {
    let was_loaded = AGENT.get().is_some();
    guard("Agent_OnAttach", if was_loaded { JNI_ERR } else { JNI_OK as jint }, || {
        let raw = options_string(options);
        let reply = reply_path(&raw);
        let respond = |result: &Result<Vec<String>, String>| {
            if let Some(p) = &reply {
                commands::write_reply(p, result);
            } else if let Err(e) = result {
                log::error(e);
            }
        };
        let config = match Config::parse(&raw).and_then(|c| {
            if let Some(file) = &c.file {
                output::check_writable(file).map_err(|e| options::OptionError {
                    option: format!("file={}", file.display()),
                    problem: format!("{e} (the JVM writes as its own user)"),
                })?;
            }
            Ok(c)
        }) {
            Ok(c) => c,
            Err(e) => {
                respond(&Err(e.to_string()));
                return JNI_ERR;
            }
        };
        if !was_loaded {
            if let Some(path) = other_copy() {
                respond(&Err(format!("oxprof is already loaded in this JVM from {path}; attach with that library")));
                return JNI_ERR;
            }
            // An attached agent keeps the JVM's console quiet: replies carry
            // its messages, unless the user asked for a log.
            let level = if config.log.is_some() || raw.contains("loglevel=") { config.loglevel } else { options::LogLevel::Error };
            match open_log(&config) {
                Ok(file) => log::configure(level, file),
                Err(e) => {
                    respond(&Err(format!("cannot open the log file: {e}")));
                    return JNI_ERR;
                }
            }
        }
        let agent = match AGENT.get() {
            Some(a) => a,
            None => match init(vm, config.clone()) {
                Ok(a) => a,
                Err(e) => {
                    respond(&Err(e));
                    // Callbacks may be registered: stay loaded.
                    return JNI_OK as jint;
                }
            },
        };
        // SAFETY: `vm` is the JavaVM passed to Agent_OnAttach.
        let Some(jni) = (unsafe { jvmti::current_jni(vm) }) else {
            respond(&Err("the attach thread has no JNI environment".into()));
            return JNI_OK as jint;
        };
        if !was_loaded {
            agent.symbols.init_builtin_loaders(jni);
            let started = std::time::Instant::now();
            let n = agent.symbols.prepare_loaded_classes(agent.jvmti, jni);
            log::debug(&format!("prepared {n} loaded classes in {:?}", started.elapsed()));
        }
        let result = {
            let _one = java_api::COMMANDS.lock().unwrap_or_else(|e| e.into_inner());
            commands::run(agent, config, jni)
        };
        respond(&result);
        match result {
            Ok(_) => JNI_OK as jint,
            Err(_) if was_loaded => JNI_ERR,
            Err(_) => JNI_OK as jint,
        }
    })
}

/// Called when the agent library is unloaded (VM shutdown).
#[no_mangle]
pub extern "C" fn Agent_OnUnload(_vm: *mut JavaVM) {
    guard("Agent_OnUnload", (), || {
        if let Some(agent) = AGENT.get() {
            // VMDeath normally stopped everything already; make sure no timer fires now.
            agent.profiler.stop(None);
        }
    })
}

/// Starts a recording with the given options, logs what runs and returns it.
fn start(agent: &'static Agent, config: Config, jni: Jni) -> Result<Vec<String>, String> {
    if config.cpu.is_some() || config.wall.is_some() {
        // Walk recovery checks return addresses against the code cache.
        match agent.vm_structs.as_ref().and_then(VmStructs::code_cache_bounds) {
            Some((low, high)) => signal::note_code(low, high - low),
            None => {
                // Enabled at load or now; after an attach, the code compiled
                // before it is known only from the replay.
                enable_code_events(agent.jvmti);
                replay_code_events(agent.jvmti);
            }
        }
    }
    let walks = config.cpu.is_some() || config.wall.is_some() || config.alloc.is_some() || config.lock.is_some();
    if walks {
        init_java_walker(agent, jni);
    }
    let named = crate::locks::owners::name_running_threads(agent.jvmti, jni, &agent.profiler.threads);
    log::debug(&format!("named {named} running Java threads"));
    if intervals::is_active() {
        return Err("continuous profiling (loop=) is already running; stop it first".into());
    }
    let runtime = runtime_facts(agent.jvmti, Some(jni));
    intervals::note_runtime(&runtime);
    let first_interval = intervals::prepare(&config, &runtime)?;
    let jfr = jfr_stream::wanted(&config);
    if jfr {
        // With loop=, the recording streams to the first interval's file.
        let mut streamed = config.clone();
        if first_interval.is_some() {
            streamed.file = first_interval.clone();
        }
        if let Err(e) = jfr_stream::prepare(agent, &streamed) {
            intervals::forget();
            return Err(e);
        }
    }
    let mut lines = match agent.profiler.start(config, agent.vm, agent.asgct, (agent.jvmti, jni), agent.can_tag, agent.vm_structs.as_ref()) {
        Ok(lines) => lines,
        Err(e) => {
            if jfr {
                jfr_stream::abort();
            }
            intervals::forget();
            return Err(e);
        }
    };
    if jfr {
        jfr_stream::begin(agent);
    }
    if let Some(first) = first_interval {
        intervals::begin(agent, commands::write_interval);
        lines.push(intervals::started_line(&first));
    }
    // Why HotSpot's internals are not used on this JDK (once).
    if let Some(line) = walks.then(vmstructs::untold_refusal).flatten() {
        lines.insert(0, line);
    }
    for line in &lines {
        log::info(line);
    }
    Ok(lines)
}

/// What a profile store is told about this JVM: the default service name
/// (the main class, or the jar's name, from `sun.java.command`), the
/// runtime's name and version.
fn runtime_facts(jvmti: Jvmti, jni: Option<Jni>) -> intervals::Runtime {
    let prop = |name: &CStr| jvmti.system_property(name).unwrap_or_default();
    let command = prop(c"sun.java.command");
    let main = command.split_whitespace().next().unwrap_or("java");
    let service = match main.strip_suffix(".jar") {
        Some(jar) => std::path::Path::new(jar).file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_else(|| jar.to_string()),
        None => main.to_string(),
    };
    // The runtime as OpenTelemetry names it (`java.runtime.name`, "OpenJDK
    // Runtime Environment"), which the class library sets: read through
    // Java; the VM's own properties, which JVMTI lists from the start, when
    // Java cannot be asked.
    let java = |name: &str| jni.and_then(|j| j.java_system_property(name)).filter(|v| !v.is_empty());
    let vm = format!("{} {} {}", prop(c"java.vm.vendor"), prop(c"java.vm.name"), prop(c"java.vm.version"));
    intervals::Runtime {
        service,
        name: java("java.runtime.name").unwrap_or_else(|| prop(c"java.vm.name")),
        version: java("java.runtime.version").unwrap_or_else(|| prop(c"java.vm.version")),
        description: vm.trim().to_string(),
    }
}

/// Prepares frame types and the own Java stack walk (see `hotspot`); when
/// this JVM's structure table lacks something, both stay off, with a log line.
fn init_java_walker(agent: &Agent, jni: Jni) {
    let Some(vs) = agent.vm_structs.as_ref() else {
        // An untested JDK is reported by `start`.
        if crate::hotspot::gate::vmstructs_walk_trusted() {
            log::info("no HotSpot structure table: Java frame types and the own stack walk are off");
        }
        return;
    };
    match frames::init(vs, jni.0 as usize) {
        Ok(l) => {
            if let Err(e) = crate::hotspot::tlab::init(vs) {
                log::info(&format!("allocation accuracy is not measured: {e}"));
            }
            method_ids::prepare();
            crate::hotspot::blob_cache::prepare();
            crate::hotspot::fullwalk::prepare();
            let entry = continuation_entry(agent.jvmti, jni);
            javastack::set_continuation_entry(entry);
            find_stub_addresses(entry != 0);
            log::debug(&format!("checked reads of the JVM's memory: {}", crate::hotspot::safemem::describe()));
            let fallback = javawalk::configure();
            log::debug(&format!("Java frame types on; own stack walk on failed walks {}", if fallback { "on" } else { "off (OXPROF_DISABLE_JAVA_WALKER)" }));
            let (first, check) = crate::hotspot::fullwalk::configure_signal();
            log::debug(&format!(
                "CPU and wall stacks: {}{}",
                match (first, l.has_debug_ranges()) {
                    (false, _) => "AsyncGetCallTrace (OXPROF_OWN_WALK=0)",
                    (true, false) => "AsyncGetCallTrace (this JDK's nmethod layout is not in its structure table)",
                    (true, true) => "own walk once libjvm's deoptimization blobs are found, AsyncGetCallTrace where it gives up",
                },
                if check { "; each own walk compared with AsyncGetCallTrace (OXPROF_CHECK_CPU_WALK)" } else { "" }
            ));
            let own = allocstack::configure();
            log::debug(&format!(
                "allocation stacks: {}",
                match (own, l.has_debug_ranges()) {
                    (false, _) => "GetStackTrace (OXPROF_ALLOC_WALK=0)",
                    (true, false) => "GetStackTrace (this JDK's nmethod layout is not in its structure table)",
                    (true, true) => "own walk, GetStackTrace where it gives up",
                }
            ));
        }
        Err(e) => log::info(&format!("Java frame types and the own stack walk are off: {e}")),
    }
}

/// Looks up statics of libjvm in its ELF symbol table, for the own walks
/// (see `javastack`): `StubRoutines::_cont_returnBarrier` (with virtual
/// threads: until it is found, a virtual thread's stack that ends at frames
/// still frozen counts as a failed walk), `OptoRuntime::_exception_blob`
/// (C2's exception blob, stepped over with the register that holds its
/// caller's pc) and the deoptimization and uncommon-trap blobs (a frame
/// under deoptimization puts the own walk in doubt; until they are known
/// the signal handler walks with AsyncGetCallTrace). On a thread of its own:
/// reading libjvm's symbol table takes tens of milliseconds, which a JVM's
/// start-up does not wait for; without virtual threads, a second later
/// still, so that a short-lived JVM never pays for it.
fn find_stub_addresses(continuations: bool) {
    let spawned = std::thread::Builder::new().name("oxprof-stubs".into()).spawn(move || {
        if !continuations {
            std::thread::sleep(std::time::Duration::from_secs(1));
        }
        let cpu_start = crate::sampling::cputime::thread_cpu_ns();
        let names = [
            "_ZN12StubRoutines19_cont_returnBarrierE",
            "_ZN11OptoRuntime15_exception_blobE",
            "_ZN13SharedRuntime11_deopt_blobE",
            // Until JDK 24 the uncommon-trap blob is SharedRuntime's, then C2's own.
            "_ZN13SharedRuntime19_uncommon_trap_blobE",
            "_ZN11OptoRuntime19_uncommon_trap_blobE",
        ];
        let Ok(found) = catch_unwind(|| crate::native::lookup::find_exact(&names, crate::native::lookup::Kind::Variable)) else {
            log::debug("looking up libjvm's stub addresses panicked");
            return;
        };
        let ms = crate::sampling::cputime::thread_cpu_ns().saturating_sub(cpu_start) as f64 / 1e6;
        let slot = |i: usize| found.get(i).copied().flatten().filter(|a| *a != 0 && a.is_multiple_of(8));
        if let Some(addr) = slot(1) {
            javastack::set_exception_blob_slot(addr);
            log::debug(&format!("C2's exception blob pointer at {addr:#x} (found in {ms:.1} ms of CPU)"));
        }
        match (slot(2), slot(3).or(slot(4))) {
            (Some(deopt), Some(trap)) => {
                javastack::set_deopt_blob_slots(deopt, trap);
                log::debug("deoptimization blobs found: the own walk names CPU and wall samples first");
            }
            _ => log::debug("libjvm's deoptimization blobs not found: CPU and wall samples are walked by AsyncGetCallTrace"),
        }
        if !continuations {
            return;
        }
        let Some(addr) = slot(0) else {
            log::debug("no continuation return barrier in libjvm's symbols");
            return;
        };
        // SAFETY: the address of a pointer-sized static variable of libjvm
        // (mapped for the process's life), set once when HotSpot generated
        // its stubs, before any Java code ran.
        let pc = unsafe { (addr as *const usize).read_volatile() };
        if pc != 0 && frames::layout().is_some_and(|l| l.in_code_cache(pc)) {
            javastack::set_continuation_return_barrier(pc);
            log::debug(&format!("continuation return barrier at {pc:#x}: walks of virtual threads end at their frozen frames"));
        } else {
            log::debug("the continuation return barrier is not in the code cache: not used");
        }
    });
    if let Err(e) = spawned {
        log::debug(&format!("cannot start the thread that finds libjvm's stub addresses: {e}"));
    }
}

/// The `jmethodID` of `jdk.internal.vm.Continuation.enterSpecial` (JDK 19+),
/// below which a virtual thread's frames end; 0 where there is none.
fn continuation_entry(jvmti: Jvmti, jni: Jni) -> usize {
    let class = jni.find_class(c"jdk/internal/vm/Continuation");
    if class.is_null() {
        jni.clear_exception();
        return 0;
    }
    // SAFETY: `class` is the local reference FindClass just returned, and
    // the jmethodIDs are its methods, from GetClassMethods; it is deleted last.
    let id = unsafe { jvmti.class_methods(class) }
        .unwrap_or_default()
        .into_iter()
        .find(|&m| unsafe { jvmti.method_name(m) }.is_ok_and(|(name, _)| name == "enterSpecial"));
    // SAFETY: as above; not used afterwards.
    unsafe { jni.delete_local(class) };
    id.map_or(0, |m| m as usize)
}

/// Stops the recording and writes the profiles. Used at VM death.
fn finish(agent: &Agent, jni: Jni) {
    let started = std::time::Instant::now();
    intervals::stop_thread();
    let Some(rec) = agent.profiler.stop(Some((agent.jvmti, jni))) else { return };
    log::debug(&format!("recording stopped in {:.1} ms", started.elapsed().as_secs_f64() * 1e3));
    match commands::write_recording(agent, &rec, &rec.config, jni, true) {
        Ok(lines) => lines.iter().for_each(|l| log::info(l)),
        Err(e) => log::error(&e),
    }
}

unsafe extern "C" fn on_vm_init(jvmti_env: *mut jvmtiEnv, jni: *mut JNIEnv, thread: jthread) {
    guard("VMInit", (), || {
        if !LOADED_AT_STARTUP.load(std::sync::atomic::Ordering::Relaxed) {
            return;
        }
        let Some(agent) = AGENT.get() else { return };
        let jvmti = Jvmti(jvmti_env);
        let jni = Jni(jni);
        let tid = threads::current_tid();
        // SAFETY: `thread` is the local reference the JVM passed to this
        // VMInit callback (the main thread); `jni` is this thread's.
        let (name, id) = unsafe { (jvmti.thread_name(thread), crate::locks::owners::java_id(jni, thread)) };
        agent.profiler.threads.name_java_thread(tid, name, id);
        agent.symbols.init_builtin_loaders(jni);
        let n = agent.symbols.prepare_loaded_classes(jvmti, jni);
        log::debug(&format!("prepared {n} classes loaded before VMInit"));
        replay_code_events(jvmti);
        let late = LATE_START.lock().unwrap_or_else(|e| e.into_inner()).take();
        let config = late.unwrap_or_else(|| agent.config.clone());
        if config.start {
            if let Err(e) = start(agent, config, jni) {
                log::error(&e);
            }
            // JDK 11 does not list the main thread in GetAllThreads yet.
            // SAFETY: `thread` as above; this callback's frame is still live.
            unsafe { agent.profiler.alloc.thread_started(jvmti, jni, thread, &jvmti.thread_name(thread)) };
        }
    })
}

unsafe extern "C" fn on_vm_death(_jvmti: *mut jvmtiEnv, jni: *mut JNIEnv) {
    guard("VMDeath", (), || {
        if let Some(agent) = AGENT.get() {
            live_report::vm_dying();
            finish(agent, Jni(jni));
            // No oxprof thread stays attached to the exiting JVM (its exit
            // would wait 300 ms for an idle one in native code).
            agent.profiler.alloc.live.shut_down();
        }
    })
}

unsafe extern "C" fn on_class_load(_jvmti: *mut jvmtiEnv, _jni: *mut JNIEnv, _thread: jthread, _class: jclass) {}

unsafe extern "C" fn on_class_prepare(jvmti: *mut jvmtiEnv, jni: *mut JNIEnv, _thread: jthread, class: jclass) {
    guard("ClassPrepare", (), || {
        if let Some(agent) = AGENT.get() {
            // SAFETY: `class` is the local reference the JVM passed to this
            // ClassPrepare callback.
            unsafe { agent.symbols.on_class_prepare(Jvmti(jvmti), Jni(jni), class) };
            if agent.symbols.needs_prune() {
                let dropped = agent.symbols.prune(Jni(jni), &agent.profiler.sampled_methods());
                log::debug(&format!("forgot {dropped} method names of unloaded classes"));
            }
        }
    })
}

unsafe extern "C" fn on_thread_start(jvmti: *mut jvmtiEnv, jni: *mut JNIEnv, thread: jthread) {
    guard("ThreadStart", (), || {
        if let Some(agent) = AGENT.get() {
            let tid = threads::current_tid();
            // SAFETY: `thread` is the local reference the JVM passed to this
            // ThreadStart callback.
            let name = unsafe { Jvmti(jvmti).thread_name(thread) };
            // SAFETY: as above.
            unsafe { agent.profiler.alloc.thread_started(Jvmti(jvmti), Jni(jni), thread, &name) };
            // The launcher's main thread attaches again as `DestroyJavaVM`
            // to end the JVM: it keeps the name and id it had all its life.
            if name != "DestroyJavaVM" || !agent.profiler.threads.is_java_visible(tid) {
                // SAFETY: as above.
                let id = unsafe { crate::locks::owners::java_id(Jni(jni), thread) };
                agent.profiler.threads.name_java_thread(tid, name, id);
            }
            agent.profiler.threads.add(tid);
        }
    })
}

unsafe extern "C" fn on_thread_end(jvmti: *mut jvmtiEnv, jni: *mut JNIEnv, thread: jthread) {
    guard("ThreadEnd", (), || {
        if let Some(agent) = AGENT.get() {
            let tid = threads::current_tid();
            // The name it ends with (it may have been renamed while it ran)
            // names its samples in profiles built after it is gone.
            // SAFETY: `thread` is the local reference the JVM passed to this
            // ThreadEnd callback.
            let name = unsafe { Jvmti(jvmti).thread_name(thread) };
            if !name.is_empty() && name != "DestroyJavaVM" && agent.profiler.threads.is_java_visible(tid) {
                agent.profiler.threads.name_java_thread(tid, name, None);
            }
            // Its tid may be reused by a thread that never set labels.
            sampling::label_slots::clear(tid);
            agent.profiler.threads.remove(tid);
            // SAFETY: `thread` is the local reference the JVM passed to this
            // ThreadEnd callback.
            unsafe { agent.profiler.alloc.thread_ended(Jni(jni), thread) };
        }
    })
}

unsafe extern "C" fn on_sampled_object_alloc(jvmti: *mut jvmtiEnv, jni: *mut JNIEnv, thread: jthread, object: jobject, class: jclass, size: jlong) {
    guard("SampledObjectAlloc", (), || {
        if let Some(agent) = AGENT.get() {
            // SAFETY: `thread`, `object` and `class` are the local references
            // the JVM passed to this SampledObjectAlloc callback.
            unsafe { agent.profiler.alloc.on_sample(Jvmti(jvmti), Jni(jni), thread, object, class, size, threads::current_tid()) };
        }
    })
}

unsafe extern "C" fn on_monitor_contended_enter(jvmti: *mut jvmtiEnv, jni: *mut JNIEnv, _thread: jthread, object: jobject) {
    guard("MonitorContendedEnter", (), || {
        if let Some(agent) = AGENT.get() {
            // SAFETY: `object` is the local reference the JVM passed to this
            // MonitorContendedEnter callback.
            unsafe { locks::monitors::on_enter(&agent.profiler.locks, Jvmti(jvmti), Jni(jni), object) };
        }
    })
}

unsafe extern "C" fn on_monitor_contended_entered(jvmti: *mut jvmtiEnv, jni: *mut JNIEnv, thread: jthread, object: jobject) {
    guard("MonitorContendedEntered", (), || {
        if let Some(agent) = AGENT.get() {
            // SAFETY: `thread` and `object` are the local references the JVM
            // passed to this MonitorContendedEntered callback.
            unsafe { locks::monitors::on_entered(&agent.profiler.locks, &agent.profiler.threads, Jvmti(jvmti), Jni(jni), thread, object) };
        }
    })
}

/// Inside the GC pause: only counts and wakes the live sweeper (no JNI, no
/// JVMTI, no allocation; see `LiveTracker::on_gc_finish`).
unsafe extern "C" fn on_gc_finish(_jvmti: *mut jvmtiEnv) {
    guard("GarbageCollectionFinish", (), || {
        if let Some(agent) = AGENT.get() {
            agent.profiler.alloc.live.on_gc_finish();
        }
    })
}

unsafe extern "C" fn on_compiled_method_load(
    _jvmti: *mut jvmtiEnv,
    _method: jmethodID,
    code_size: jint,
    code_addr: *const c_void,
    _map_length: jint,
    _map: *const jvmtiAddrLocationMap,
    _compile_info: *const c_void,
) {
    signal::note_code(code_addr as usize, code_size.max(0) as usize);
}

unsafe extern "C" fn on_dynamic_code_generated(_jvmti: *mut jvmtiEnv, _name: *const c_char, address: *const c_void, length: jint) {
    signal::note_code(address as usize, length.max(0) as usize);
}

static CODE_EVENTS: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Enables the code events CPU profiling needs (once). Returns whether this
/// call enabled them.
fn enable_code_events(jvmti: Jvmti) -> bool {
    if CODE_EVENTS.swap(true, std::sync::atomic::Ordering::SeqCst) {
        return false;
    }
    for event in [JVMTI_EVENT_COMPILED_METHOD_LOAD, JVMTI_EVENT_DYNAMIC_CODE_GENERATED] {
        if let Err(e) = jvmti.set_event(true, event) {
            log::warn(&format!("cannot enable JVMTI event {event}: {e}"));
        }
    }
    true
}

static CODE_REPLAYED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Replays code events for what was generated before the agent listened
/// (only when it listens to them at all, and once: later code comes as
/// events).
fn replay_code_events(jvmti: Jvmti) {
    if !CODE_EVENTS.load(std::sync::atomic::Ordering::SeqCst) || CODE_REPLAYED.swap(true, std::sync::atomic::Ordering::SeqCst) {
        return;
    }
    for event in [JVMTI_EVENT_DYNAMIC_CODE_GENERATED, JVMTI_EVENT_COMPILED_METHOD_LOAD] {
        if let Err(e) = jvmti.generate_events(event) {
            log::debug(&format!("cannot replay code event {event}: {e}"));
        }
    }
}

//! Continuous profiling (`loop=DURATION`): the recording is cut into
//! consecutive intervals, each written as a complete file of its own (in
//! any format) holding only that interval's samples; `keep=N` deletes the
//! oldest. This module owns the interval thread, the file names (`%p` the
//! process id, `%t` the interval's start time, `%n` its sequence number),
//! the list of files kept, and the counters `status` reports.
//!
//! Interval files are named by oxprof, not by the user, and `keep=` deletes
//! them: so an interval never replaces a file it did not write (a file of
//! the user's at that name, an earlier run's interval: the interval goes to
//! the private fallback, and the log says so), and `keep=` deletes a file
//! only while it is still the one the recording wrote there (same device and
//! inode, not a symbolic link): a link or a file put in its place since is
//! left, with a line in the log. A fallback keeps the interval's file name
//! (so its number), and an interval that hits a full disk goes there too: a
//! JFR interval's chunk, its file cut back to its whole chunks
//! (`jfr_stream`), other formats' files whole (`files::write_chosen` leaves
//! no cut-off file behind). `%n` counts intervals whatever failed.
//!
//! How an interval holds each sample once: the sample stores only add to
//! counters while profiling runs, and each interval's profile is what they
//! gained since the previous one ended (`sampling::interval`); a JFR
//! recording drains its event logs into the old file and goes on in a new
//! one (`jfr_stream::cut`). Live objects are state, not counts: every
//! interval's file carries the leak report of all objects still alive, with
//! each site's growth history.
//!
//! With `upload=URL`, each interval is also pushed to a profile store
//! (`crates/upload`: its own sender thread, a bounded queue, retries): to an
//! OpenTelemetry collector as one OTLP request holding every profile, to
//! Pyroscope as the interval's JFR file when the recording is JFR, else as
//! one pprof body per kind of event. Without `file=`, no interval file is
//! written; what the store does not take (given up, pushed out of the full
//! queue, unsent at the shutdown deadline) is kept in the private fallback
//! directory instead (`files::private_dir`, the working directory's, else
//! the temp directory's), one file per payload named after its interval
//! (`interval-3-20250101-120000.otlp.pb`), bounded by `upload_spool_bytes`:
//! the uploader writes them on its own thread or, for payloads pushed out of
//! its queue, on the interval thread, never on one of the JVM's. With
//! `file=` the interval files hold every interval, and the uploader's
//! messages say so.

use std::collections::VecDeque;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use crate::jvmti;
use crate::log;
use crate::options::Config;
use crate::output::files::Written;
use crate::Agent;

/// Counters for `status` and the log.
#[derive(Clone, Debug, Default)]
pub struct Counts {
    /// Intervals ended (written, or handed to the uploader).
    pub intervals: u64,
    /// Files written.
    pub written: u64,
    /// Files deleted by `keep=`.
    pub deleted: u64,
    /// Files `keep=` left because something else is at their name now.
    pub left: u64,
    /// Files written to a private fallback directory instead of their
    /// name, and the last of them (an attached agent logs only errors:
    /// `status` is where an operator learns of them).
    pub fallbacks: u64,
    pub last_fallback: Option<PathBuf>,
    /// Intervals that could not be written whole.
    pub failed: u64,
    pub last_error: Option<String>,
}

/// Pushing intervals to a profile store.
struct Push {
    uploader: oxprof_upload::Uploader,
    kind: oxprof_upload::Kind,
    resource: oxprof_profile::otlp::Resource,
    /// Also write interval files (`file=` was given).
    files: bool,
    /// Intervals pushed so far: the number in the name of the next one's
    /// payloads (each ended interval is pushed once, so this is its `%n`).
    pushed: AtomicU64,
}

/// Facts about the JVM for the store: the default service name (from the
/// main class or jar) and the runtime's name and version.
#[derive(Clone, Debug, Default)]
pub struct Runtime {
    pub service: String,
    pub name: String,
    pub version: String,
    /// The VM's vendor, name and version (`process.runtime.description`).
    pub description: String,
}

struct State {
    /// Sequence number of the interval in progress (from 0).
    seq: u64,
    /// Where the interval in progress goes.
    path: PathBuf,
    /// Files written, oldest first (for `keep=`).
    files: VecDeque<Written>,
    /// Files a `dump` wrote at the interval's own name (which the
    /// interval's end replaces).
    dumps: Vec<Written>,
    counts: Counts,
    /// The next [`advance`] keeps the interval in progress: it was begun
    /// already (see [`next_advance_keeps`]).
    keep_next: bool,
}

/// The continuous recording in progress.
pub struct Loop {
    every: Duration,
    pattern: PathBuf,
    keep: Option<usize>,
    state: Mutex<State>,
    stop: Mutex<bool>,
    wake: Condvar,
    thread: Mutex<Option<JoinHandle<()>>>,
    /// Set while an interval is being cut (so `stop` can wait it out).
    cutting: AtomicBool,
    push: Option<Push>,
}

static LOOP: Mutex<Option<Arc<Loop>>> = Mutex::new(None);

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

fn now_secs() -> i64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_secs() as i64).unwrap_or(0)
}

pub use crate::options::{expand, timestamp};

/// The pattern interval files are named after: `file=` or the default name,
/// with `-%n` added before the extension when it names no `%t` or `%n`, so
/// that intervals never overwrite each other.
pub fn pattern(config: &Config) -> PathBuf {
    let format = config.output_format();
    let given = config.file.clone().unwrap_or_else(|| PathBuf::from(format!("oxprof-%p-%t.{}", format.extension())));
    let text = given.to_string_lossy();
    if text.contains("%t") || text.contains("%n") {
        return given;
    }
    let name = given.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let ext = format!(".{}", format.extension());
    let renamed = match name.strip_suffix(&ext) {
        Some(stem) => format!("{stem}-%n{ext}"),
        None => match name.rsplit_once('.') {
            Some((stem, e)) if !stem.is_empty() => format!("{stem}-%n.{e}"),
            _ => format!("{name}-%n"),
        },
    };
    given.with_file_name(renamed)
}

/// The log line saying where intervals go.
pub fn started_line(first: &Path) -> String {
    match current() {
        Some(l) if l.push.as_ref().is_some_and(|p| !p.files) => format!(
            "continuous profiling: an interval every {}s pushed to the {} store (no files: file= not given; what the store does not take is kept in a private oxprof-<pid>-XXXXXX directory)",
            l.every.as_secs_f64(),
            l.push.as_ref().map_or("", |p| p.kind.name())
        ),
        Some(l) => format!(
            "continuous profiling: an interval every {}s to {}{}, the first to {}",
            l.every.as_secs_f64(),
            l.pattern.display(),
            l.keep.map(|k| format!(", keeping the last {k}")).unwrap_or_default(),
            first.display()
        ),
        None => String::new(),
    }
}

/// Whether continuous profiling is running.
pub fn is_active() -> bool {
    lock(&LOOP).is_some()
}

/// Sets up continuous profiling for `config` (before sampling starts) and
/// returns the first interval's file, which a JFR recording streams to.
pub fn prepare(config: &Config, runtime: &Runtime) -> Result<Option<PathBuf>, String> {
    let Some(every) = config.loop_ns else {
        *lock(&LOOP) = None;
        return Ok(None);
    };
    let pattern = pattern(config);
    let path = expand(&pattern, 0, now_secs());
    let push = match &config.upload {
        Some(opts) => Some(start_push(opts, config, runtime)?),
        None => None,
    };
    if push.as_ref().is_none_or(|p| p.files) {
        crate::output::check_writable(&path)?;
    }
    let state = State { seq: 0, path: path.clone(), files: VecDeque::new(), dumps: Vec::new(), counts: Counts::default(), keep_next: false };
    // Every interval names mostly the frames of the one before: keep the
    // symbol tables and the names made from them.
    crate::native::symbols::keep_between_builds(true);
    crate::source::keep_frame_names(true);
    *lock(&LOOP) = Some(Arc::new(Loop {
        every: Duration::from_nanos(every),
        pattern,
        keep: config.keep,
        state: Mutex::new(state),
        stop: Mutex::new(false),
        wake: Condvar::new(),
        thread: Mutex::new(None),
        cutting: AtomicBool::new(false),
        push,
    }));
    Ok(Some(path))
}

fn start_push(opts: &oxprof_upload::UploadOptions, config: &Config, runtime: &Runtime) -> Result<Push, String> {
    // The service: `service=`, else OpenTelemetry's variables, else the
    // main class or jar (as in files written with `format=otlp`).
    let mut resource = resource(runtime);
    let mut cfg = opts.clone().finish(&resource.service)?.ok_or("upload: needs upload=URL")?;
    // Retries wait at most about one interval (5 s at least, 30 s at most):
    // after an outage uploads resume within that, rather than 30 s later
    // while each new interval waits behind the oldest.
    let every = Duration::from_nanos(config.loop_ns.unwrap_or(0));
    cfg.backoff_cap = cfg.backoff_cap.min(every.max(Duration::from_secs(5)));
    resource.service = cfg.service.clone();
    for (k, v) in &cfg.labels {
        resource = resource.with(k.clone(), v.clone());
    }
    if config.file.is_some() {
        cfg.kept_by_caller = Some("every interval is in its file (file=)".to_string());
    } else {
        // What the store does not take goes where a profile that cannot be
        // written goes: this process's private directory, in the working
        // directory, else in the temp directory.
        cfg.spool_dirs = Some(oxprof_upload::SpoolDirs(std::sync::Arc::new(|n| {
            crate::output::files::fallback_bases().get(n).map(|base| crate::output::files::private_dir(base))
        })));
    }
    let kind = cfg.kind;
    let log_fn: oxprof_upload::LogFn = std::sync::Arc::new(|level, line: &str| match level {
        oxprof_upload::LogLevel::Error => log::error(line),
        oxprof_upload::LogLevel::Warn => log::warn(line),
        oxprof_upload::LogLevel::Info => log::info(line),
        oxprof_upload::LogLevel::Debug => log::debug(line),
    });
    let uploader = oxprof_upload::Uploader::start(cfg, log_fn)?;
    Ok(Push { uploader, kind, resource, files: config.file.is_some(), pushed: AtomicU64::new(0) })
}

/// The JVM's facts, noted when profiling first starts (see [`resource`]).
static RUNTIME: std::sync::OnceLock<Runtime> = std::sync::OnceLock::new();

/// Notes the JVM's facts for the OTLP resource. Call when profiling starts.
pub fn note_runtime(runtime: &Runtime) {
    let _ = RUNTIME.set(runtime.clone());
}

/// What an OTLP request says produced it, in files and uploads alike:
/// OpenTelemetry's variables (`OTEL_RESOURCE_ATTRIBUTES`,
/// `OTEL_SERVICE_NAME`), else the main class or jar as the service; the
/// process id, host name and runtime.
pub fn resource(runtime: &Runtime) -> oxprof_profile::otlp::Resource {
    let mut resource = oxprof_profile::otlp::Resource::from_env("java");
    if resource.service.starts_with("unknown_service:") && !runtime.service.is_empty() {
        resource.service = runtime.service.clone();
    }
    resource = resource.with("process.pid", std::process::id() as i64);
    if let Some(host) = hostname() {
        resource = resource.with("host.name", host);
    }
    for (key, value) in
        [("process.runtime.name", &runtime.name), ("process.runtime.version", &runtime.version), ("process.runtime.description", &runtime.description)]
    {
        if !value.is_empty() {
            resource = resource.with(key, value.clone());
        }
    }
    resource
}

/// [`resource`] with the facts noted when profiling started (none before).
pub fn file_resource() -> oxprof_profile::otlp::Resource {
    resource(RUNTIME.get().unwrap_or(&Runtime::default()))
}

fn hostname() -> Option<String> {
    let mut buf = [0u8; 256];
    // SAFETY: gethostname writes at most `buf.len()` bytes into `buf`.
    if unsafe { libc::gethostname(buf.as_mut_ptr() as *mut libc::c_char, buf.len()) } != 0 {
        return None;
    }
    let end = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
    std::str::from_utf8(&buf[..end]).ok().filter(|h| !h.is_empty()).map(str::to_string)
}

/// Whether interval files are written (always, except when pushing to a
/// store without `file=`).
pub fn writes_files() -> bool {
    current().is_none_or(|l| l.push.as_ref().is_none_or(|p| p.files))
}

/// Hands an ended interval to the store's sender (never waits on the
/// network): `profiles` with their keys, the interval's JFR file when the
/// recording is JFR, its start and end (Unix ns), and the CPU sampling
/// rate (Pyroscope's `sampleRate`). Returns a line for the log, if pushing.
pub fn push(profiles: &[(&str, &oxprof_profile::Profile)], jfr: Option<&Path>, start_ns: u64, end_ns: u64, cpu_hz: Option<u64>) -> Option<String> {
    use oxprof_upload::{Kind, Payload, PayloadFormat};
    let l = current()?;
    let p = l.push.as_ref()?;
    let start = UNIX_EPOCH + Duration::from_nanos(start_ns);
    let end = UNIX_EPOCH + Duration::from_nanos(end_ns.max(start_ns));
    // The name of the files the payloads are kept in if the store does not
    // take them: the interval's number and start.
    let name = format!("interval-{}-{}", p.pushed.fetch_add(1, Ordering::Relaxed), timestamp((start_ns / 1_000_000_000) as i64));
    let mut payloads = Vec::new();
    match (p.kind, jfr) {
        (Kind::Otlp, _) => {
            let all: Vec<&oxprof_profile::Profile> = profiles.iter().map(|(_, p)| *p).collect();
            payloads.push(Payload::new(PayloadFormat::Otlp, oxprof_profile::otlp::encode(&all, &p.resource), start, end).with_name(name.clone()));
        }
        (Kind::Pyroscope, Some(file)) => match std::fs::read(file) {
            Ok(bytes) => {
                let payload = Payload::new(PayloadFormat::Jfr, bytes, start, end).with_name(name.clone());
                payloads.push(match cpu_hz {
                    Some(hz) => payload.with_sample_rate(hz),
                    None => payload,
                });
            }
            Err(e) => log::warn(&format!("upload: cannot read the interval's recording {}: {e}", file.display())),
        },
        (Kind::Pyroscope, None) => {
            // One pprof body per kind; live objects join the allocations
            // (Go's heap profile: alloc_* and inuse_* in one).
            let alloc_live: Vec<&oxprof_profile::Profile> = profiles.iter().filter(|(k, _)| *k == "alloc" || *k == "live").map(|(_, p)| *p).collect();
            for (key, profile) in profiles {
                let mut body = Vec::new();
                let written = match *key {
                    "live" if alloc_live.len() > 1 => continue,
                    "alloc" if alloc_live.len() > 1 => oxprof_profile::pprof::write_parts(&alloc_live, &mut body),
                    _ => oxprof_profile::pprof::write(profile, &mut body),
                };
                if written.is_err() {
                    continue;
                }
                let payload = Payload::new(PayloadFormat::Pprof, body, start, end).with_name(format!("{name}.{key}"));
                payloads.push(match (*key, cpu_hz) {
                    ("cpu", Some(hz)) => payload.with_sample_rate(hz),
                    _ => payload,
                });
            }
        }
    }
    let bytes: usize = payloads.iter().map(|p| p.data.len()).sum();
    let n = payloads.len();
    let taken = payloads.into_iter().map(|payload| p.uploader.submit(payload)).filter(|&ok| ok).count();
    // Payloads pushed out of a full queue are written to disk here when
    // this is the interval thread; at the last interval (a JVM thread, or
    // the one running `stop`) the uploader's thread writes them.
    let on_loop_thread = lock(&l.thread).as_ref().is_some_and(|h| h.thread().id() == std::thread::current().id());
    if on_loop_thread {
        p.uploader.spool_pushed_out();
    }
    Some(format!("upload: interval queued for {} ({taken} of {n} payloads, {bytes} bytes)", p.kind.name()))
}

/// Sends what the store's queue holds for at most `deadline`, then stops
/// the sender (stop, JVM exit). Returns its last status line.
pub fn finish_push(deadline: Duration) -> Option<String> {
    let l = current()?;
    let p = l.push.as_ref()?;
    Some(format!("upload summary: {}", p.uploader.shutdown(deadline)))
}

fn current() -> Option<Arc<Loop>> {
    lock(&LOOP).clone()
}

/// Where the interval in progress is written.
pub fn current_path() -> Option<PathBuf> {
    current().map(|l| lock(&l.state).path.clone())
}

/// The interval in progress ended: the next one starts now. Returns its
/// file name.
pub fn advance() -> Option<PathBuf> {
    let l = current()?;
    let mut st = lock(&l.state);
    if std::mem::take(&mut st.keep_next) {
        return Some(st.path.clone());
    }
    st.seq += 1;
    st.counts.intervals += 1;
    let mut path = expand(&l.pattern, st.seq, now_secs());
    if path == st.path || st.files.iter().any(|w| w.path == path) {
        // `%t` alone, two intervals in one second (a late cut): never
        // replace an interval's file with the next.
        let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
        let unique = match name.split_once('.') {
            Some((stem, ext)) => format!("{stem}-{}.{ext}", st.seq),
            None => format!("{name}-{}", st.seq),
        };
        path = path.with_file_name(unique);
    }
    st.path = path;
    st.dumps.clear();
    Some(st.path.clone())
}

/// The JFR stream began the next interval but could not write the one that
/// ended, whose profiles the cut then writes another way before ending the
/// interval again: that second [`advance`] keeps the interval begun, so
/// that `%n` goes on counting intervals. Forgotten when the cut is over.
pub fn next_advance_keeps() {
    let Some(l) = current() else { return };
    lock(&l.state).keep_next = true;
}

/// Whether an interval file may replace the existing regular file `meta`:
/// only a file this recording wrote (an interval's, or a dump of the
/// interval in progress), never a file that was there before or was put
/// there since.
pub fn may_replace(meta: &std::fs::Metadata) -> bool {
    current().is_some_and(|l| {
        let st = lock(&l.state);
        st.files.iter().chain(&st.dumps).any(|w| w.is(meta))
    })
}

/// Notes the files a `dump` wrote at the interval's own name.
pub fn dumped(files: &[Written]) {
    let Some(l) = current() else { return };
    lock(&l.state).dumps.extend(files.iter().cloned());
}

/// Notes the files an interval was written to, and deletes the oldest past
/// `keep=` (only files this recording wrote, still as it wrote them).
pub fn written(files: &[Written]) {
    let Some(l) = current() else { return };
    let mut st = lock(&l.state);
    for w in files {
        st.counts.written += 1;
        if crate::output::files::in_private_dir(&w.path) {
            st.counts.fallbacks += 1;
            st.counts.last_fallback = Some(w.path.clone());
        }
        st.files.retain(|old| old.path != w.path);
        st.files.push_back(w.clone());
    }
    // Several files per interval (collapsed and pprof write one per kind):
    // keep counts intervals, so it applies to files per kind.
    let per_interval = files.len().max(1);
    let Some(keep) = l.keep.map(|k| k * per_interval) else { return };
    while st.files.len() > keep {
        let Some(old) = st.files.pop_front() else { break };
        match delete_own(&old) {
            Ok(true) => st.counts.deleted += 1,
            Ok(false) => {}
            Err(e) => {
                st.counts.left += 1;
                log::warn(&format!("keep={}: left {}: {e}", l.keep.unwrap_or(0), old.path.display()));
            }
        }
    }
}

/// Deletes `old` if its path still names the file the recording wrote
/// there; `Ok(false)` if nothing is there any more. Someone who can put a
/// file or a link in its place (a writer of that directory, or the JVM's
/// user) could also swap it between the look and the unlink; what the look
/// stops is deleting what was put there before it: a link (or its target),
/// a file of the user's.
fn delete_own(old: &Written) -> Result<bool, String> {
    match std::fs::symlink_metadata(&old.path) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(false),
        Err(e) => return Err(format!("cannot look at it: {e}")),
        Ok(m) if !m.file_type().is_file() || !old.is(&m) => return Err("it is no longer the file this recording wrote there".into()),
        Ok(_) => {}
    }
    match std::fs::remove_file(&old.path) {
        Ok(()) => Ok(true),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(false),
        Err(e) => Err(format!("cannot delete it: {e}")),
    }
}

/// Notes an interval that could not be written whole.
pub fn failed(error: &str) {
    let Some(l) = current() else { return };
    let mut st = lock(&l.state);
    st.counts.failed += 1;
    st.counts.last_error = Some(error.to_string());
}

/// The counters so far.
pub fn counts() -> Option<Counts> {
    current().map(|l| lock(&l.state).counts.clone())
}

/// The `status` part: `loop=60s: interval 3 to PATH (ended=3 files_written=3
/// deleted=0 left=0 fallbacks=0 failed=0)`, then `last_fallback=`,
/// `last_error=` when there are any.
pub fn status() -> Option<String> {
    let l = current()?;
    let st = lock(&l.state);
    let c = &st.counts;
    let to = if uploads_only(&l) { "pushed only, no file= given".to_string() } else { format!("to {}", st.path.display()) };
    let mut s = format!(
        "loop={}s: interval {} {to} (ended={} files_written={} deleted={} left={} fallbacks={} failed={}",
        l.every.as_secs_f64(),
        st.seq,
        c.intervals,
        c.written,
        c.deleted,
        c.left,
        c.fallbacks,
        c.failed
    );
    if let Some(p) = &c.last_fallback {
        s.push_str(&format!(" last_fallback={}", p.display()));
    }
    if let Some(e) = &c.last_error {
        s.push_str(&format!(" last_error={e}"));
    }
    s.push(')');
    if let Some(p) = &l.push {
        s.push_str(&format!("; upload to {}: {}", p.kind.name(), p.uploader.status()));
    }
    Some(s)
}

/// Whether intervals are only pushed to a store (`upload=` without `file=`).
fn uploads_only(l: &Loop) -> bool {
    l.push.as_ref().is_some_and(|p| !p.files)
}

/// Whether the continuous recording in progress writes no files, only
/// pushes its intervals (`upload=` without `file=`).
pub fn is_upload_only() -> bool {
    current().is_some_and(|l| uploads_only(&l))
}

/// What ends an interval: writes it and starts the next (`commands::write_interval`).
pub type Cut = fn(&'static Agent, &crate::source::Recording, crate::jvmti::Jni) -> Result<Vec<String>, String>;

/// Starts the interval thread: at the end of each interval it calls `cut`.
pub fn begin(agent: &'static Agent, cut: Cut) {
    let Some(l) = current() else { return };
    let vm = agent.vm as usize;
    let me = l.clone();
    let spawned = std::thread::Builder::new().name("oxprof-loop".into()).spawn(move || {
        let vm = vm as *mut jvmti_sys::JavaVM;
        // SAFETY: `vm` is the agent's JavaVM (`Agent::vm`).
        let Some(jni) = (unsafe { jvmti::attach_daemon(vm, c"oxprof-loop") }) else {
            log::error("the interval thread cannot attach to the JVM: loop= cannot cut intervals; the recording is written at stop");
            return;
        };
        agent.profiler.threads.exclude(crate::sampling::threads::current_tid());
        let mut next = Instant::now() + me.every;
        loop {
            {
                let mut stop = lock(&me.stop);
                while !*stop {
                    let now = Instant::now();
                    if now >= next {
                        break;
                    }
                    stop = me.wake.wait_timeout(stop, next - now).map(|(g, _)| g).unwrap_or_else(|e| e.into_inner().0);
                }
                if *stop {
                    break;
                }
                me.cutting.store(true, Ordering::SeqCst);
            }
            let started = Instant::now();
            let result = agent.profiler.with_recording(|rec| rec.map(|rec| cut(agent, rec, jni)));
            lock(&me.state).keep_next = false;
            me.cutting.store(false, Ordering::SeqCst);
            match result {
                None => break, // the recording stopped
                Some(Ok(lines)) => lines.iter().for_each(|line| log::debug(line)),
                Some(Err(e)) => {
                    log::error(&e);
                    failed(&e);
                }
            }
            log::debug(&format!("interval cut in {:.1} ms; {}", started.elapsed().as_secs_f64() * 1e3, crate::memory::describe()));
            // The next boundary from the schedule, not from now: intervals
            // stay the asked length however long writing took, and a late
            // cut (a stalled disk) does not shift every later one.
            next += me.every;
            let now = Instant::now();
            if next <= now {
                next = now + me.every;
            }
        }
        // SAFETY: `vm` as above; this thread was attached above and `jni` is
        // not used after this.
        unsafe { jvmti::detach(vm) };
    });
    match spawned {
        Ok(h) => *lock(&l.thread) = Some(h),
        Err(e) => log::error(&format!("no interval thread ({e}): loop= cannot cut intervals; the recording is written at stop")),
    }
}

/// Ends the interval thread (waiting for an interval being written); the
/// last interval is written by the stop that follows. Keeps the counters and
/// the pattern until [`forget`].
pub fn stop_thread() {
    let Some(l) = current() else { return };
    *lock(&l.stop) = true;
    l.wake.notify_all();
    let handle = lock(&l.thread).take();
    if let Some(h) = handle {
        let _ = h.join();
    }
}

/// Continuous profiling is over (after the last interval was written).
pub fn forget() {
    *lock(&LOOP) = None;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_expand_and_never_collide() {
        let pid = std::process::id();
        let p = expand(Path::new("/var/log/app/%p-%t.jfr"), 3, 0);
        let s = p.to_string_lossy();
        assert!(s.starts_with(&format!("/var/log/app/{pid}-19")) || s.starts_with(&format!("/var/log/app/{pid}-1970")), "{s}");
        assert!(s.ends_with(".jfr") && s.len() == format!("/var/log/app/{pid}-19700101-000000.jfr").len(), "{s}");
        assert_eq!(expand(Path::new("a-%n-%%-%q.html"), 7, 0), PathBuf::from("a-7-%-%q.html"));
        let c = Config::parse("loop=10s,file=/tmp/x/profile.html").unwrap();
        assert_eq!(pattern(&c), PathBuf::from("/tmp/x/profile-%n.html"));
        let c = Config::parse("loop=10s,file=p.pb.gz").unwrap();
        assert_eq!(pattern(&c), PathBuf::from("p-%n.pb.gz"));
        let c = Config::parse("loop=10s,file=rec-%t.jfr").unwrap();
        assert_eq!(pattern(&c), PathBuf::from("rec-%t.jfr"));
        let c = Config::parse("loop=10s,jfr").unwrap();
        assert_eq!(pattern(&c), PathBuf::from("oxprof-%p-%t.jfr"));
    }
}

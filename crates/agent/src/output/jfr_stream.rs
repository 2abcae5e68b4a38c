//! JFR output: a recording streamed to disk while profiling runs.
//!
//! When the output format is JFR (`file=rec.jfr` or `format=jfr`), the
//! sample stores log every sample with its time and thread into an
//! [`EventLog`] (see `store.rs`). A background thread, attached to the JVM as
//! a daemon, drains the logs every [`DRAIN_PERIOD`], resolves the stacks it
//! has not written in the current chunk, and appends `jdk.ExecutionSample`
//! (with the sampled thread's state), wall-clock samples and
//! `jdk.ObjectAllocationSample` events to the file, each with its context
//! labels (a `labels` field, its sets pooled per chunk), and the spans the
//! application timed (`oxprof.Span`, see `spans.rs`); leak reports add
//! `jdk.OldObjectSample` and oxprof's `oxprof.LiveSite` per site. Wall-clock samples are
//! the JDK's `jdk.ExecutionSample` (`jdk.NativeMethodSample` in native
//! code), one per interval they stand for, when no CPU source runs, so JFR
//! tools show them as they are; beside CPU samples they are oxprof's own
//! `oxprof.WallClockSample` with their weight. Chunks end when they
//! pass the size limit, at `dump` (so the file on disk is complete up to
//! then) and at stop: the recording never sits in memory, only the current
//! chunk's pools do. Each chunk starts with `jdk.ActiveRecording` and
//! `jdk.ActiveSetting` events saying what was sampled, how often, and with
//! which engine. Events lost because a log was full are counted and
//! reported in the summary line. A file deleted while recording (or its
//! directory removed) is noticed at the next chunk end: the descriptor
//! still holds every chunk, which are copied to a new file at the name
//! asked for, else to a fallback file, where the recording goes on.

use std::fs::File;
use std::os::fd::{AsRawFd, RawFd};
use std::path::{Path, PathBuf};

use crate::output::files::{FileId, Written};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};
use std::thread::JoinHandle;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use oxprof_profile::jfr::writer::event_type;
use oxprof_profile::jfr::{FrameType, JfrFrame, JfrWriter, OldObject, SafepointEvent, ThreadState};
use oxprof_profile::OutputFormat;
use std::collections::HashMap;

use crate::heap::accuracy::accuracy_facts;
use crate::heap::alloc::{DROPPED_FRAME, MARK_ALLOC_CLASS};
use crate::jvmti::{self, Jni};
use crate::locks::sampler::{MARK_LOCK_CLASS, MARK_PARK_CLASS};
use crate::log;
use crate::options::Config;
use crate::output;
use crate::output::jfr_frames::{alloc_stack, cpu_stack, synthetic, Context, Lines};
use crate::sampling::cpu::VirtualGap;
use crate::sampling::cputime::{monotonic_ns, thread_cpu_ns};
use crate::sampling::event_log::EventLog;
use crate::sampling::store::{SampleStore, DROPPED_SLOT};
use crate::sampling::threads;
use crate::Agent;

/// How often the background thread drains the logs.
const DRAIN_PERIOD: Duration = Duration::from_millis(100);
/// Events each log holds between drains (32 bytes each).
const LOG_CAPACITY: usize = 1 << 16;
/// A chunk ends when it grows past this many bytes (the JDK uses 12 MB).
/// `OXPROF_JFR_CHUNK_BYTES` overrides it.
const DEFAULT_CHUNK_BYTES: u64 = 12 << 20;
/// A chunk also ends when it is this old, so that a JVM killed outright
/// (`kill -9`, a crash) leaves at most this much of its recording unwritten.
/// `OXPROF_JFR_CHUNK_SECONDS` overrides it.
const DEFAULT_CHUNK_AGE: Duration = Duration::from_secs(60);
/// Allocation stacks get ids of their own beside the CPU stacks' slots.
const ALLOC_STACK_BIT: u64 = 1 << 40;
/// Lock-wait stacks get ids of their own too.
const LOCK_STACK_BIT: u64 = 1 << 43;
/// Stack ids of live-object sites (one id space per site list).
const LIVE_STACK_BIT: u64 = 1 << 41;
/// Wall-clock stacks get ids of their own too.
const WALL_STACK_BIT: u64 = 1 << 42;
// Each id space its own bit (lock and wall stacks once shared one, so a
// recording with both could give a lock event a wall sample's stack).
const _: () = {
    let bits = [ALLOC_STACK_BIT, LIVE_STACK_BIT, WALL_STACK_BIT, LOCK_STACK_BIT];
    let mut i = 0;
    while i < bits.len() {
        let mut j = i + 1;
        while j < bits.len() {
            assert!(bits[i] & bits[j] == 0, "two JFR stack id spaces share a bit");
            j += 1;
        }
        i += 1;
    }
};
/// A slot whose state is not cached yet.
const NO_STATE: u8 = u8::MAX;

/// A store and the log it writes its samples to.
#[derive(Clone, Copy)]
struct Source {
    store: &'static SampleStore,
    log: &'static EventLog,
}

/// The wall-clock source and how its samples are written.
struct Wall {
    src: Source,
    interval_ns: u64,
    /// Written as `jdk.ExecutionSample`/`jdk.NativeMethodSample`, one per
    /// interval (no CPU source in the recording).
    as_execution_samples: bool,
    /// Per thread, the wall time not yet written as whole intervals (can be
    /// negative: a sample shorter than half an interval still makes one
    /// event), so the events add up to the thread's time.
    carry: HashMap<u32, i64>,
}

/// Per stored slot, its sample's state (`ThreadState as u8`, refined as
/// [`crate::sampling::cpu::refine_state`] does), context-label set and
/// whether its stack shows a virtual thread's frozen frames, so a trace is
/// read once per chunk, when its stack is written. [`NO_STATE`] = not known
/// yet.
#[derive(Default)]
struct States(Vec<(u8, u32, bool)>);

/// What a sample's stack says beside its frames: its state, label set, and
/// whether it shows a virtual thread's frozen frames.
type StackFacts = (ThreadState, u32, bool);

impl States {
    fn get(&self, slot: u32) -> Option<StackFacts> {
        self.0.get(slot as usize).filter(|s| s.0 != NO_STATE).map(|&(s, l, f)| (ThreadState::from_u8(s), l, f))
    }

    fn set(&mut self, slot: u32, (s, labels, frozen): StackFacts) {
        let i = slot as usize;
        if self.0.len() <= i {
            self.0.resize(i + 1, (NO_STATE, 0, false));
        }
        self.0[i] = (s as u8, labels, frozen);
    }
}

/// The id of label set `labels` in the writer's chunk (added to its pool
/// the first time the chunk needs it); 0 for no labels.
fn labels_in_chunk(writer: &mut JfrWriter<File>, labels: u32) -> u64 {
    let id = labels as u64;
    if id != 0 && !writer.has_labels(id) {
        writer.labels(id, &crate::labels::set(labels));
    }
    id
}

#[derive(Clone, Copy, Debug, Default)]
struct Counts {
    cpu: u64,
    /// Wall-clock events written.
    wall: u64,
    alloc: u64,
    alloc_bytes: u64,
    /// Logged events whose stack was no longer in the store.
    missing: u64,
    /// `jdk.OldObjectSample` events (live-object sites).
    live: u64,
    /// `jdk.JavaMonitorEnter` and `jdk.ThreadPark` events.
    lock: u64,
    /// Safepoints timed by `ttsp` (four JDK events each).
    safepoints: u64,
    /// `oxprof.Span` events.
    spans: u64,
    /// CPU and wall-clock events whose stack shows a virtual thread's
    /// frames still frozen in its continuation (under their marker), as
    /// the profiles' `frozen=` counts them.
    frozen: u64,
}

struct Inner {
    writer: JfrWriter<File>,
    /// The descriptor the writer's file holds (see `Inner::keep_at_name`).
    writer_fd: RawFd,
    cpu: Option<Source>,
    cpu_states: States,
    wall: Option<Wall>,
    wall_states: States,
    alloc: Option<Source>,
    lock: Option<Source>,
    /// (event type, name, value) written at the start of every chunk.
    settings: Vec<(u64, &'static str, String)>,
    lines: Lines,
    counts: Counts,
    chunk_limit: u64,
    /// How old a chunk may grow (see [`DEFAULT_CHUNK_AGE`]), and when the
    /// current one began.
    chunk_age: Duration,
    chunk_began: std::time::Instant,
    start_wall_ms: i64,
    start_ticks: u64,
    /// Where the next chunk starts, as ticks and nanoseconds since the
    /// epoch read together: the recording's start, then each chunk's end,
    /// so chunks meet and hold every event logged since (a chunk opens at
    /// its first write, after events have waited in the log).
    next_start: (i64, i64),
    destination: String,
    /// The file written now (a new one each interval with `loop=`), and a
    /// second descriptor of it, to tell which file it is once written.
    file: (PathBuf, Option<File>),
    /// The file the user named, when it existed at start: the recording is
    /// written beside it and renamed over it when its first chunk is whole.
    replaces: Option<PathBuf>,
    /// A write error; the recording stops writing and reports it.
    failed: Option<String>,
    /// The chunks and bytes the file holds that its writer did not write:
    /// a chunk moved to a fallback file (see `Inner::rescue`).
    rescued: (u64, u64),
    /// The file was deleted while recording and could not be written again
    /// anywhere: why. The recording goes on in the deleted file (its
    /// descriptor holds it), and each chunk end tries again.
    lost: Option<String>,
}

struct Stream {
    inner: Mutex<Inner>,
    stop: Arc<AtomicBool>,
    thread: Mutex<Option<JoinHandle<()>>>,
    /// CPU time the streaming thread used, in nanoseconds (set when it ends).
    thread_cpu_ns: Arc<AtomicU64>,
}

static STREAM: Mutex<Option<Arc<Stream>>> = Mutex::new(None);
static CPU_LOG: OnceLock<&'static EventLog> = OnceLock::new();
static ALLOC_LOG: OnceLock<&'static EventLog> = OnceLock::new();
static WALL_LOG: OnceLock<&'static EventLog> = OnceLock::new();
static LOCK_LOG: OnceLock<&'static EventLog> = OnceLock::new();

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

fn leaked_log(cell: &OnceLock<&'static EventLog>) -> &'static EventLog {
    cell.get_or_init(|| Box::leak(Box::new(EventLog::new(LOG_CAPACITY))))
}

fn wall_ns() -> i64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_nanos() as i64).unwrap_or(0)
}

/// Whether this configuration asks for JFR output.
pub fn wanted(config: &Config) -> bool {
    config.output_format() == OutputFormat::Jfr
}

/// Whether a JFR recording is streaming.
pub fn is_active() -> bool {
    lock(&STREAM).is_some()
}

/// Creates the file (or a fallback beside it, never losing the recording)
/// and attaches event logs to the stores. Call before sampling starts.
pub fn prepare(agent: &'static Agent, config: &Config) -> Result<(), String> {
    let mut slot = lock(&STREAM);
    if slot.is_some() {
        return Err("a JFR recording is already being written; stop it first".into());
    }
    // Notes left by an earlier recording are not this one's.
    output::take_notes();
    let wanted = config.file.clone().unwrap_or_else(|| output::default_path(OutputFormat::Jfr));
    let (path, file, replaces) = create_beside(&wanted)?;
    let probe = file.try_clone().ok();
    let cpu = match config.cpu {
        Some(_) => Some(Source { store: crate::sampling::cpu::store()?, log: leaked_log(&CPU_LOG) }),
        None => None,
    };
    let alloc = match config.alloc {
        Some(_) => Some(Source { store: agent.profiler.alloc.store()?, log: leaked_log(&ALLOC_LOG) }),
        None => None,
    };
    let wall = match config.wall {
        Some(interval_ns) => Some(Wall {
            src: Source { store: crate::sampling::wall::store()?, log: leaked_log(&WALL_LOG) },
            interval_ns: interval_ns.max(1),
            as_execution_samples: cpu.is_none(),
            carry: HashMap::new(),
        }),
        None => None,
    };
    let lock = match config.lock {
        Some(_) => Some(Source { store: agent.profiler.locks.store()?, log: leaked_log(&LOCK_LOG) }),
        None => None,
    };
    for s in cpu.iter().chain(alloc.iter()).chain(wall.iter().map(|w| &w.src)).chain(lock.iter()) {
        s.log.reset(); // nothing writes to it: it is attached to no store
        s.store.set_log(Some(s.log));
    }
    let chunk_limit = std::env::var("OXPROF_JFR_CHUNK_BYTES").ok().and_then(|v| v.parse().ok()).unwrap_or(DEFAULT_CHUNK_BYTES).max(4096);
    let chunk_age = std::env::var("OXPROF_JFR_CHUNK_SECONDS")
        .ok()
        .and_then(|v| v.parse::<f64>().ok())
        .filter(|s| s.is_finite() && *s > 0.0)
        .map_or(DEFAULT_CHUNK_AGE, |s| Duration::from_secs_f64(s.max(0.1)));
    let (start_ticks, start_wall) = (monotonic_ns() as i64, wall_ns());
    let inner = Inner {
        writer_fd: file.as_raw_fd(),
        writer: JfrWriter::new(file),
        cpu,
        cpu_states: States::default(),
        wall,
        wall_states: States::default(),
        alloc,
        lock,
        settings: Vec::new(),
        lines: Lines::default(),
        counts: Counts::default(),
        chunk_limit,
        chunk_age,
        chunk_began: std::time::Instant::now(),
        start_wall_ms: start_wall / 1_000_000,
        start_ticks: start_ticks as u64,
        next_start: (start_ticks, start_wall),
        destination: path.display().to_string(),
        file: (path, probe),
        replaces,
        failed: None,
        rescued: (0, 0),
        lost: None,
    };
    *slot = Some(Arc::new(Stream {
        inner: Mutex::new(inner),
        stop: Arc::new(AtomicBool::new(false)),
        thread: Mutex::new(None),
        thread_cpu_ns: Arc::new(AtomicU64::new(0)),
    }));
    Ok(())
}

/// Opens `wanted` (see `files::open_output`), or a new fallback file in a
/// private directory under the working or temp directory. With `loop=`,
/// `wanted` is an interval's file, which never replaces an existing file
/// (`intervals::may_replace`).
fn create(wanted: &Path) -> Result<(PathBuf, File), String> {
    use crate::output::files;
    let may_replace: files::MayReplace<'_> = if crate::output::intervals::is_active() { &crate::output::intervals::may_replace } else { &files::any_file };
    let first_error = match files::open_output(wanted, may_replace) {
        Ok(f) => return Ok((wanted.to_path_buf(), f)),
        Err(e) => e,
    };
    fallback(wanted, &format!("cannot create {}: {first_error}", wanted.display()))
        .ok_or_else(|| format!("cannot create the JFR recording {} ({first_error}), nor a fallback file in the working or temp directory", wanted.display()))
}

/// A new fallback file for `wanted` in a private directory under the
/// working or temp directory, said in the log after `why`; `None` when
/// neither takes one.
fn fallback(wanted: &Path, why: &str) -> Option<(PathBuf, File)> {
    use crate::output::files;
    let stem = fallback_stem(wanted);
    let (p, f) = files::fallback_bases().iter().find_map(|base| files::open_fallback(base, &stem, "jfr").ok())?;
    log::warn(&format!("{why}; writing the JFR recording to {} instead", p.display()));
    Some((p, f))
}

/// The name of a fallback file for `wanted`: an interval's own name (its
/// number stays in it) under continuous profiling, else
/// `oxprof-<pid>-<time>`.
fn fallback_stem(wanted: &Path) -> String {
    match crate::output::intervals::is_active().then(|| crate::output::files::interval_stem(wanted, "jfr")).flatten() {
        Some(stem) => stem,
        None => format!("oxprof-{}-{}", std::process::id(), wall_ns() / 1_000_000_000),
    }
}

/// The recording's first file. An existing regular file the user named is
/// not truncated: the recording goes to a new file beside it (hidden,
/// random name, 0600; see `files::open_beside`), renamed over it when the
/// first chunk is whole (at the first `dump`, chunk rotation or stop), so a
/// JVM that dies before, or a disk that fills first, leaves the previous
/// recording as it was. Returns the file written and the one it replaces.
fn create_beside(wanted: &Path) -> Result<(PathBuf, File, Option<PathBuf>), String> {
    use crate::output::files;
    let replaceable = !crate::output::intervals::is_active() && std::fs::symlink_metadata(wanted).is_ok_and(|m| m.file_type().is_file());
    if !replaceable {
        return create(wanted).map(|(p, f)| (p, f, None));
    }
    match files::open_beside(wanted) {
        Ok((p, f)) => Ok((p, f, Some(wanted.to_path_buf()))),
        Err(e) => fallback(wanted, &format!("cannot write a new recording beside {} ({e}), which is kept", wanted.display()))
            .map(|(p, f)| (p, f, None))
            .ok_or_else(|| format!("cannot create the JFR recording beside {} ({e}), nor a fallback file in the working or temp directory", wanted.display())),
    }
}

/// A new file at `wanted` holding the first `len` bytes of the open file
/// `old` (a recording whose file was deleted), positioned after them. A
/// file now at `wanted` is replaced (whole: written beside it and renamed)
/// only when `replacing` it was the plan; any other is someone else's.
fn copy_to_name(old: &File, len: u64, wanted: &Path, replacing: bool) -> std::io::Result<(PathBuf, File)> {
    use crate::output::files;
    let exists = std::fs::symlink_metadata(wanted).is_ok();
    if exists && replacing && !crate::output::intervals::is_active() {
        let (tmp, mut f) = files::open_beside(wanted)?;
        let done = files::copy_open(old, len, &mut f).and_then(|()| std::fs::rename(&tmp, wanted));
        if let Err(e) = done {
            let _ = std::fs::remove_file(&tmp);
            return Err(e);
        }
        return Ok((wanted.to_path_buf(), f));
    }
    let mut f = files::open_new(wanted)?;
    if let Err(e) = files::copy_open(old, len, &mut f) {
        let _ = files::remove_if_still(wanted, &f.try_clone().ok());
        return Err(e);
    }
    Ok((wanted.to_path_buf(), f))
}

fn current() -> Option<Arc<Stream>> {
    lock(&STREAM).clone()
}

impl Inner {
    /// Every source's store and log.
    fn sources(&self) -> impl Iterator<Item = &Source> {
        self.cpu.iter().chain(self.alloc.iter()).chain(self.wall.iter().map(|w| &w.src)).chain(self.lock.iter())
    }
}

fn detach_logs(inner: &Inner) {
    for s in inner.sources() {
        s.store.set_log(None);
    }
}

/// Sampling has started: note the settings and start the streaming thread.
pub fn begin(agent: &'static Agent) {
    let Some(stream) = current() else { return };
    {
        let mut inner = lock(&stream.inner);
        let settings = agent.profiler.with_recording(|rec| rec.map(|rec| rec.sources.iter().flat_map(|s| s.jfr_settings()).collect()).unwrap_or_default());
        inner.settings = settings;
    }
    let stop = stream.stop.clone();
    let cpu_ns = stream.thread_cpu_ns.clone();
    let vm = agent.vm as usize;
    let spawned = std::thread::Builder::new().name("oxprof-jfr".into()).spawn(move || {
        let vm = vm as *mut jvmti_sys::JavaVM;
        // SAFETY: `vm` is the agent's JavaVM (`Agent::vm`).
        let Some(jni) = (unsafe { jvmti::attach_daemon(vm, c"oxprof-jfr") }) else {
            log::warn("the JFR thread cannot attach to the JVM; events are written at dump and stop only");
            return;
        };
        agent.profiler.threads.exclude(threads::current_tid());
        while !stop.load(Ordering::SeqCst) {
            let mut slept = Duration::ZERO;
            while slept < DRAIN_PERIOD && !stop.load(Ordering::SeqCst) {
                std::thread::sleep(Duration::from_millis(20));
                slept += Duration::from_millis(20);
            }
            if let Some(stream) = current() {
                lock(&stream.inner).drain(agent, jni);
            }
        }
        cpu_ns.store(thread_cpu_ns(), Ordering::SeqCst);
        // SAFETY: `vm` as above; attach_daemon attached this thread, and
        // `jni` is not used after this.
        unsafe { jvmti::detach(vm) };
    });
    match spawned {
        Ok(h) => *lock(&stream.thread) = Some(h),
        Err(e) => log::warn(&format!("no JFR streaming thread ({e}); events are written at dump and stop only")),
    }
}

/// Sampling could not start: forget the recording and its file.
pub fn abort() {
    if let Some(stream) = lock(&STREAM).take() {
        let inner = lock(&stream.inner);
        detach_logs(&inner);
        let _ = std::fs::remove_file(&inner.file.0);
    }
}

/// `dump`: writes everything logged so far and ends the chunk, so the file
/// is a complete recording up to now; recording goes on.
pub fn flush(agent: &Agent, jni: Jni) -> Result<Vec<String>, String> {
    let stream = current().ok_or("no JFR recording is running")?;
    let mut inner = lock(&stream.inner);
    inner.drain(agent, jni);
    inner.end_chunk(agent, false);
    Ok(vec![inner.summary(&inner.file.0, None)])
}

/// Adds the live-object report to the current chunk: per allocation site,
/// oxprof's own `oxprof.LiveSite` (everything the site's leak score is
/// computed from, so `oxprof report` ranks as the text report does; all
/// events of one report share one time, and a later report replaces it)
/// and one `jdk.OldObjectSample` for JDK tools, standing for the site's
/// tracked live objects. `allocationTime` is now minus their mean age,
/// `objectSize` the site's estimated live bytes (the field JDK 21+ define),
/// and the description gives the estimated object count. JFR's own sampler
/// writes one event per sampled object instead; oxprof's tracking keeps
/// sites, which is what bounds its memory.
pub fn live_sites(agent: &Agent, report: &oxprof_profile::leak::LeakReport) {
    let Some(stream) = current() else { return };
    let mut inner = lock(&stream.inner);
    inner.begin_chunk();
    let now = monotonic_ns() as i64;
    let tid = crate::sampling::threads::current_tid();
    inner.name_thread(agent, tid);
    if let Err(e) = inner.writer.live_report(now, tid as u64, report) {
        return inner.fail(e);
    }
    let mut n = 0;
    for (i, site) in report.sites.iter().enumerate() {
        let Some((class, stack)) = site.frames.split_last() else { continue };
        let id = LIVE_STACK_BIT | i as u64;
        let frames: Vec<JfrFrame> = stack.iter().rev().map(model_frame).collect();
        inner.writer.stack(id, &frames, false);
        let age_ticks = (site.mean_age_secs.max(0.0) * 1e9) as i64;
        let description = format!("{:.0} live objects (estimated) at this site", site.live_objects);
        let object = OldObject {
            allocation_ticks: now.saturating_sub(age_ticks),
            address: 0,
            class: &class.name,
            array_elements: i32::MIN,
            heap_used: 0,
            description: Some(&description),
            size: site.live_bytes.max(0.0).round() as u64,
        };
        if let Err(e) = inner.writer.old_object_sample(now, tid as u64, id, &object) {
            return inner.fail(e);
        }
        if let Err(e) = inner.writer.live_site(now, tid as u64, id, site) {
            return inner.fail(e);
        }
        n += 1;
    }
    inner.counts.live += n;
}

/// A model frame (from the leak report) as a JFR frame: `pkg.Class.method`
/// splits at its last dot; line numbers are not kept by the report.
fn model_frame(f: &oxprof_profile::Frame) -> JfrFrame {
    use oxprof_profile::FrameKind;
    let (class, method) = match f.kind {
        FrameKind::Java | FrameKind::Interpreted | FrameKind::Jit | FrameKind::Inlined | FrameKind::Native => {
            f.name.rsplit_once('.').map(|(c, m)| (c.to_string(), m.to_string())).unwrap_or_else(|| (String::new(), f.name.clone()))
        }
        _ => (String::new(), f.name.clone()),
    };
    let kind = if f.kind == FrameKind::Native { FrameType::Native } else { FrameType::Unknown };
    JfrFrame { class, method, descriptor: String::new(), line: -1, bci: -1, kind }
}

/// Stop: ends the streaming thread, writes what is left and the last chunk.
/// Sampling must already be stopped. Returns the lines for the log and the
/// file written.
pub fn finish(agent: &Agent, jni: Jni) -> (Result<Vec<String>, String>, Option<Written>) {
    let Some(stream) = current() else { return (Err("no JFR recording is running".into()), None) };
    stream.stop.store(true, Ordering::SeqCst);
    if let Some(h) = lock(&stream.thread).take() {
        let _ = h.join();
    }
    let mut inner = lock(&stream.inner);
    detach_logs(&inner);
    inner.drain(agent, jni);
    inner.end_chunk(agent, true);
    *lock(&STREAM) = None;
    let file = inner.written();
    let path = &file.path;
    let lines = match (&inner.failed, &inner.lost) {
        (Some(e), _) => Err(format!("the JFR recording {} is incomplete: {e}", path.display())),
        (None, Some(lost)) => Err(lost.clone()),
        (None, None) => Ok(vec![inner.summary(path, Some(stream.thread_cpu_ns.load(Ordering::SeqCst))), format!("profile written to {}", path.display())]),
    };
    (lines, Some(file))
}

/// The sample stores are about to be emptied (writers are paused): writes
/// every event logged so far and ends the chunk, whose stack pool is keyed
/// by the slots that change meaning, and forgets the states cached per slot.
pub fn before_store_reset(agent: &Agent, jni: Jni) {
    let Some(stream) = current() else { return };
    let mut inner = lock(&stream.inner);
    inner.drain(agent, jni);
    inner.end_chunk(agent, false);
    inner.cpu_states = States::default();
    inner.wall_states = States::default();
}

/// Continuous profiling (`loop=`): the current file ends here as a whole
/// recording of its own (everything logged so far, its last chunk closed)
/// and the events logged from now on go to a new file at `next` (or a
/// fallback beside it, as at start). Returns the summary line of the file
/// ended and the file; an error when it could not be written whole (the
/// next file is opened all the same).
pub fn cut(agent: &Agent, jni: Jni, next: &Path) -> Result<(String, Written), String> {
    let result = cut_to(agent, jni, next);
    if result.is_err() {
        // The caller writes the ended interval's profiles another way and
        // then ends the interval again: `next` is already the one begun.
        crate::output::intervals::next_advance_keeps();
    }
    result
}

fn cut_to(agent: &Agent, jni: Jni, next: &Path) -> Result<(String, Written), String> {
    let stream = current().ok_or("no JFR recording is running")?;
    let mut inner = lock(&stream.inner);
    inner.drain(agent, jni);
    inner.end_chunk(agent, true);
    let ended = inner.written();
    let result = match (inner.failed.take(), inner.lost.take()) {
        (Some(e), _) => Err(format!("the JFR recording {} is incomplete: {e}", ended.path.display())),
        (None, Some(lost)) => Err(lost),
        (None, None) => Ok((inner.summary(&ended.path, None), ended)),
    };
    match create(next) {
        Ok((path, file)) => {
            let probe = file.try_clone().ok();
            inner.writer_fd = file.as_raw_fd();
            inner.writer = JfrWriter::new(file);
            inner.rescued = (0, 0);
            inner.lost = None;
            inner.counts = Counts::default();
            inner.destination = path.display().to_string();
            inner.file = (path, probe);
            inner.begin_chunk();
        }
        Err(e) => {
            // Nothing to write to: the events are drained and counted as
            // lost until the next interval finds a file.
            inner.failed = Some(e.clone());
            log::error(&e);
        }
    }
    result
}

impl Inner {
    /// The `jfr summary:` line; `thread_cpu_ns` is the streaming thread's
    /// CPU time, known once it has ended.
    fn summary(&self, path: &Path, thread_cpu_ns: Option<u64>) -> String {
        let c = self.counts;
        // Samples lost before the log (a full sample store) are lost to the
        // file as well.
        let dropped: u64 = self.sources().map(|s| s.log.dropped() + s.store.stats().dropped).sum::<u64>() + crate::spans::dropped();
        let stats = self.writer.stats();
        format!(
            "jfr summary: execution_samples={} wall_samples={} frozen={} lock_events={} safepoints={} spans={} allocation_samples={} allocation_bytes={} old_object_samples={} dropped={} missing={} chunks={} bytes={}{} file={}",
            c.cpu,
            c.wall,
            c.frozen,
            c.lock,
            c.safepoints,
            c.spans,
            c.alloc,
            c.alloc_bytes,
            c.live,
            dropped,
            c.missing,
            stats.chunks + self.rescued.0,
            stats.bytes + self.rescued.1,
            thread_cpu_ns.map(|ns| format!(" writer_cpu_ms={}", ns / 1_000_000)).unwrap_or_default(),
            path.display()
        )
    }

    /// The file written now, as it is now (see `files::FileId`).
    fn written(&self) -> Written {
        Written { path: self.file.0.clone(), id: FileId::of_open(&self.file.1) }
    }

    /// A chunk was written: if the file is no longer at its name (deleted,
    /// its directory removed, another file put there), everything it holds
    /// (its descriptor still reaches it) is copied to a new file at the name
    /// asked for, else to a fallback file in the private directory, and the
    /// recording goes on there; a note says where. Nothing is copied while
    /// the file is where it was (a `stat` and an `fstat` per chunk).
    fn keep_at_name(&mut self) {
        use crate::output::files;
        let Some(meta) = self.file.1.as_ref().and_then(|f| f.metadata().ok()) else { return };
        if !meta.file_type().is_file() || !files::gone_from(&self.file.0, &meta) {
            return;
        }
        let gone = self.file.0.clone();
        let how = files::how_gone(&gone);
        // A recording that was to replace an existing file goes to that
        // file's name (it replaces it whole, as it would have).
        let replacing = self.replaces.is_some();
        let wanted = self.replaces.clone().unwrap_or_else(|| gone.clone());
        let bytes = self.writer.stats().bytes + self.rescued.1;
        let Some(old) = self.file.1.as_ref() else { return };
        let moved = copy_to_name(old, bytes, &wanted, replacing);
        let (path, file, note) = match moved {
            Ok((path, file)) => {
                let note = format!(
                    "the JFR recording {} was removed while recording ({how}); wrote it again at {} with everything recorded so far ({bytes} bytes), and recording goes on there",
                    gone.display(),
                    path.display()
                );
                (path, file, note)
            }
            Err(first) => {
                let stem = fallback_stem(&wanted);
                let found = files::fallback_bases().iter().find_map(|base| {
                    let (p, mut f) = files::open_fallback(base, &stem, "jfr").ok()?;
                    match files::copy_open(old, bytes, &mut f) {
                        Ok(()) => Some((p, f)),
                        Err(_) => {
                            files::discard_fallback(&p);
                            None
                        }
                    }
                });
                let Some((path, file)) = found else {
                    if self.lost.is_none() {
                        let why = format!(
                            "the JFR recording {} was removed while recording ({how}) and could not be written again there ({first}) nor to a fallback file in the working or temp directory",
                            gone.display()
                        );
                        output::error_noted(&format!("{why}; it goes on in the deleted file, and the next chunk tries again"));
                        self.lost = Some(why);
                    }
                    return;
                };
                let note = format!(
                    "the JFR recording {} was removed while recording ({how}) and cannot be written there again ({first}); wrote everything recorded so far ({bytes} bytes) to {}, and recording goes on there",
                    wanted.display(),
                    path.display()
                );
                (path, file, note)
            }
        };
        // The writer goes on with the new file under its own descriptor:
        // it keeps the ids it gave values in earlier chunks, which the
        // JDK's reader expects to stay the same from chunk to chunk.
        // SAFETY: `writer_fd` is the descriptor of the File the writer owns
        // (open for as long as the writer); dup3 makes it another
        // description of the new file, atomically, keeping close-on-exec;
        // `file` keeps its own descriptor, closed when dropped below.
        if unsafe { libc::dup3(file.as_raw_fd(), self.writer_fd, libc::O_CLOEXEC) } < 0 {
            let e = std::io::Error::last_os_error();
            let _ = files::remove_if_still(&path, &file.try_clone().ok());
            if self.lost.is_none() {
                let why =
                    format!("the JFR recording {} was removed while recording ({how}) and could not be moved to {} ({e})", gone.display(), path.display());
                output::error_noted(&format!("{why}; it goes on in the deleted file, and the next chunk tries again"));
                self.lost = Some(why);
            }
            return;
        }
        let probe = file.try_clone().ok();
        drop(file);
        self.destination = path.display().to_string();
        self.file = (path, probe);
        self.replaces = None;
        self.lost = None;
        output::warn_noted(&note);
    }

    /// The first chunk is whole: the new recording takes the place of the
    /// file it replaces. If it cannot, it stays where it is, and says so.
    fn take_place(&mut self) {
        let Some(target) = self.replaces.take() else { return };
        match std::fs::rename(&self.file.0, &target) {
            Ok(()) => {
                log::info(&format!("the JFR recording replaced the previous file {}", target.display()));
                self.destination = target.display().to_string();
                self.file.0 = target;
            }
            Err(e) => log::warn(&format!(
                "cannot move the JFR recording {} over {} ({e}); it stays where it is, and the previous file is kept",
                self.file.0.display(),
                target.display()
            )),
        }
    }

    /// Continuous profiling: the chunk just ended could not be written to
    /// the interval's file (a full disk, a quota). The file is cut back to
    /// its whole chunks, or removed if it holds none, so that no file under
    /// an interval's name is left that readers cannot open; the chunk goes
    /// to a file of the interval's name in the private fallback directory,
    /// where the interval goes on (the next starts at its own name again),
    /// and the log says where. Returns whether a fallback took it.
    fn rescue(&mut self, e: &std::io::Error) -> bool {
        use crate::output::files;
        use std::io::Write;
        let chunk = self.writer.take_unwritten();
        if chunk.is_empty() || !crate::output::intervals::is_active() || self.replaces.is_some() {
            return false;
        }
        let wanted = self.file.0.clone();
        // What the file holds whole: the writer's chunks, after any moved
        // here by an earlier rescue.
        let (chunks, bytes) = (self.writer.stats().chunks + self.rescued.0, self.writer.stats().bytes + self.rescued.1);
        let left = if chunks > 0 {
            match self.file.1.as_ref().map(|f| f.set_len(bytes)) {
                Some(Ok(())) => format!("cut it back to its whole chunks ({bytes} bytes)"),
                Some(Err(e)) => format!("could not cut it back to its whole chunks ({e})"),
                None => "could not cut it back to its whole chunks".to_string(),
            }
        } else {
            match files::remove_if_still(&wanted, &self.file.1) {
                Ok(true) => "removed it (no whole chunk)".to_string(),
                Ok(false) => "left what is now at its name".to_string(),
                Err(e) => format!("could not remove it ({e})"),
            }
        };
        let stem = fallback_stem(&wanted);
        for base in files::fallback_bases() {
            let Ok((path, mut file)) = files::open_fallback(&base, &stem, "jfr") else { continue };
            if file.write_all(&chunk).is_err() {
                files::discard_fallback(&path);
                continue;
            }
            log::warn(&format!("cannot write the JFR recording to {}: {e}; {left}; writing the JFR recording to {} instead", wanted.display(), path.display()));
            let probe = file.try_clone().ok();
            self.writer_fd = file.as_raw_fd();
            self.writer = JfrWriter::new(file);
            self.rescued = (1, chunk.len() as u64);
            self.destination = path.display().to_string();
            self.file = (path, probe);
            return true;
        }
        log::error(&format!("cannot write the JFR recording to {} ({e}; {left}), nor to a fallback file in the working or temp directory", wanted.display()));
        false
    }

    fn fail(&mut self, e: std::io::Error) {
        if self.failed.is_none() {
            log::error(&format!("cannot write the JFR recording: {e}"));
            self.failed = Some(e.to_string());
        }
    }

    fn begin_chunk(&mut self) {
        if self.writer.in_chunk() {
            return;
        }
        let (ticks, wall) = self.next_start;
        self.chunk_began = std::time::Instant::now();
        if let Err(e) = self.writer.begin_chunk(ticks, wall) {
            return self.fail(e);
        }
        // The writing thread is named with the others when the chunk ends.
        let tid = threads::current_tid() as u64;
        let elapsed_ms = (ticks as u64).saturating_sub(self.start_ticks) as i64 / 1_000_000;
        let r = self.writer.recording(ticks, tid, "oxprof", &self.destination, self.start_wall_ms, elapsed_ms);
        let r = r.and_then(|()| self.settings.iter().try_for_each(|(id, k, v)| self.writer.setting(ticks, tid, *id, k, v)));
        if let Err(e) = r {
            self.fail(e);
        }
    }

    fn end_chunk(&mut self, agent: &Agent, last: bool) {
        if self.failed.is_some() && !self.writer.in_chunk() {
            return;
        }
        self.begin_chunk(); // an empty recording is still a valid file
        if self.alloc.is_some() {
            // What the allocation sampler can vouch for, measured up to now
            // (the last chunk's value covers the whole recording).
            let ticks = monotonic_ns() as i64;
            let tid = threads::current_tid() as u64;
            let facts = accuracy_facts(&agent.profiler.alloc.accuracy.summary());
            let r = facts.iter().try_for_each(|(k, v)| self.writer.setting(ticks, tid, event_type::OBJECT_ALLOCATION_SAMPLE, k, v));
            if let Err(e) = r {
                self.fail(e);
            }
        }
        for tid in self.writer.unnamed_threads() {
            self.name_thread(agent, tid as u32);
        }
        let end = (monotonic_ns() as i64, wall_ns());
        self.next_start = end;
        if let Err(e) = self.writer.end_chunk(end.0, last) {
            if !self.rescue(&e) {
                self.fail(e);
            }
        }
        if self.failed.is_none() {
            self.keep_at_name();
            self.take_place();
        }
        // Line tables are asked again per chunk: a recording that runs for
        // weeks through class churn keeps only its current chunk's.
        self.lines = Lines::default();
    }

    /// Names a thread in the current chunk by its name now (the first time
    /// the chunk sees it), so a thread renamed later keeps this name here.
    fn name_thread(&mut self, agent: &Agent, tid: u32) {
        if self.writer.has_thread(tid as u64) {
            return;
        }
        let name = agent.profiler.threads.name(tid).unwrap_or_else(|| format!("tid {tid}"));
        let java = agent.profiler.threads.is_java_visible(tid);
        let java_id = agent.profiler.threads.java_id(tid).unwrap_or(tid as i64);
        self.writer.java_thread(tid as u64, &name, java.then_some((name.as_str(), java_id)));
    }

    /// Moves every logged event into the file.
    fn drain(&mut self, agent: &Agent, jni: Jni) {
        if self.failed.is_some() {
            return;
        }
        let cx = Context { jvmti: agent.jvmti, jni, symbols: &agent.symbols, threads: &agent.profiler.threads };
        if !self.writer.in_chunk() {
            // A new chunk names threads by their names now (renamed ones too).
            crate::locks::owners::name_running_threads(agent.jvmti, jni, &agent.profiler.threads);
        }
        self.begin_chunk();
        if let Some(src) = self.cpu {
            while let Some(e) = src.log.pop() {
                let id = e.slot as u64;
                let Some((state, labels, frozen)) = thread_stack(&mut self.writer, &mut self.lines, &mut self.cpu_states, &cx, src.store, id, e.slot) else {
                    self.counts.missing += 1;
                    continue;
                };
                self.name_thread(agent, e.tid);
                let labels = labels_in_chunk(&mut self.writer, labels);
                if let Err(err) = self.writer.execution_sample(e.ticks as i64, e.tid as u64, id, state, labels) {
                    return self.fail(err);
                }
                self.counts.cpu += 1;
                self.counts.frozen += u64::from(frozen);
                self.rotate(agent);
            }
        }
        if let Some(src) = self.wall.as_ref().map(|w| w.src) {
            while let Some(e) = src.log.pop() {
                let id = WALL_STACK_BIT | e.slot as u64;
                let Some((state, labels, frozen)) = thread_stack(&mut self.writer, &mut self.lines, &mut self.wall_states, &cx, src.store, id, e.slot) else {
                    self.counts.missing += 1;
                    continue;
                };
                self.name_thread(agent, e.tid);
                let labels = labels_in_chunk(&mut self.writer, labels);
                let written = self.counts.wall;
                if let Err(err) = self.wall_sample(e.ticks as i64, e.tid, id, (state, labels), e.weight) {
                    return self.fail(err);
                }
                if frozen {
                    self.counts.frozen += self.counts.wall - written;
                }
                self.rotate(agent);
            }
        }
        self.drain_locks(agent, &cx);
        self.drain_safepoints(agent);
        self.drain_spans(agent);
        if self.failed.is_some() {
            return;
        }
        if let Some(src) = self.alloc {
            while let Some(e) = src.log.pop() {
                let id = ALLOC_STACK_BIT | e.slot as u64;
                let (class, labels) = if e.slot == DROPPED_SLOT {
                    // A sample the full store turned away: its class and bytes
                    // under a one-frame `[dropped]` stack, as in the profile.
                    if !self.writer.has_stack(id) {
                        self.writer.stack(id, &[synthetic(DROPPED_FRAME.to_string())], false);
                    }
                    (agent.profiler.alloc.class_name(e.other as usize), 0)
                } else {
                    let Some(t) = src.store.trace(e.slot) else {
                        self.counts.missing += 1;
                        continue;
                    };
                    let (class, stack) = match t.frames.split_first() {
                        Some((c, rest)) if c.bci == MARK_ALLOC_CLASS => (agent.profiler.alloc.class_name(c.method), rest),
                        _ => ("[unknown class]".to_string(), &t.frames[..]),
                    };
                    if !self.writer.has_stack(id) {
                        let frames = alloc_stack(&cx, &mut self.lines, stack);
                        self.writer.stack(id, &frames, false);
                    }
                    (class, t.labels)
                };
                self.name_thread(agent, e.tid);
                let labels = labels_in_chunk(&mut self.writer, labels);
                if let Err(err) = self.writer.allocation_sample(e.ticks as i64, e.tid as u64, id, &class, e.weight, labels) {
                    return self.fail(err);
                }
                self.counts.alloc += 1;
                self.counts.alloc_bytes += e.weight;
                self.rotate(agent);
            }
        }
        // A quiet recording still ends its chunk on time.
        if self.failed.is_none() {
            self.rotate(agent);
        }
    }

    /// Moves the logged lock waits into the file (see `drain`).
    fn drain_locks(&mut self, agent: &Agent, cx: &Context<'_>) {
        let Some(src) = self.lock else { return };
        while let Some(e) = src.log.pop() {
            let Some(t) = src.store.trace(e.slot) else {
                self.counts.missing += 1;
                continue;
            };
            let (park, class, stack) = match t.frames.split_first() {
                Some((c, rest)) if c.bci == MARK_LOCK_CLASS || c.bci == MARK_PARK_CLASS => {
                    (c.bci == MARK_PARK_CLASS, agent.profiler.locks.class_name(c.method), rest)
                }
                _ => (false, "[unknown lock]".to_string(), &t.frames[..]),
            };
            let id = LOCK_STACK_BIT | e.slot as u64;
            if !self.writer.has_stack(id) {
                let frames = alloc_stack(cx, &mut self.lines, stack);
                self.writer.stack(id, &frames, false);
            }
            self.name_thread(agent, e.tid);
            let owner = (e.other != 0).then_some(e.other);
            if let Some(o) = owner {
                self.name_thread(agent, o);
            }
            let labels = labels_in_chunk(&mut self.writer, t.labels);
            // The event's duration is the waiting time it stands for (its
            // weight), so sums per site stay unbiased at any interval.
            let (ticks, wait) = (e.ticks as i64, e.weight.min(i64::MAX as u64) as i64);
            if let Err(err) = self.writer.lock_wait(park, ticks, wait, e.tid as u64, id, &class, labels, owner.map(u64::from)) {
                return self.fail(err);
            }
            self.counts.lock += 1;
            self.rotate(agent);
        }
    }

    /// Writes the safepoints `ttsp` timed since the last drain as the JDK's
    /// own safepoint events (see `trigger/gate.rs`), on the VM thread.
    fn drain_safepoints(&mut self, agent: &Agent) {
        if self.failed.is_some() {
            return;
        }
        let Some(gate) = crate::trigger::gate::current().filter(|g| g.ttsp) else { return };
        for (r, operation) in gate.new_for_jfr() {
            let vm_tid = r.tid as u32;
            self.name_thread(agent, vm_tid);
            let e = SafepointEvent {
                id: r.id,
                begin_ticks: r.begin as i64,
                sync_ticks: r.sync as i64,
                end_ticks: (r.end != 0).then_some(r.end as i64),
                operation: operation.as_deref(),
                threads: (r.threads != 0).then_some(r.threads as u32),
                vm_tid: vm_tid as u64,
            };
            if let Err(err) = self.writer.safepoint(&e) {
                return self.fail(err);
            }
            self.counts.safepoints += 1;
            self.rotate(agent);
        }
    }

    /// Writes the spans the application closed since the last drain
    /// (`spans.rs`) as `oxprof.Span` events.
    fn drain_spans(&mut self, agent: &Agent) {
        for s in crate::spans::take() {
            if self.failed.is_some() {
                return;
            }
            self.name_thread(agent, s.tid);
            let labels = labels_in_chunk(&mut self.writer, s.labels);
            let duration = s.end_ticks.saturating_sub(s.start_ticks).min(i64::MAX as u64) as i64;
            if let Err(err) = self.writer.span(s.start_ticks as i64, duration, s.tid as u64, &s.tag, labels) {
                return self.fail(err);
            }
            self.counts.spans += 1;
            self.rotate(agent);
        }
    }

    /// Writes one wall-clock sample of `weight_ns` (see the module comment)
    /// with its state and label set (already in the chunk).
    fn wall_sample(&mut self, ticks: i64, tid: u32, stack: u64, (state, labels): (ThreadState, u64), weight_ns: u64) -> std::io::Result<()> {
        let Some(wall) = self.wall.as_mut() else { return Ok(()) };
        if !wall.as_execution_samples {
            self.counts.wall += 1;
            return self.writer.wall_clock_sample(ticks, tid as u64, stack, state, weight_ns, labels);
        }
        let carry = wall.carry.entry(tid).or_insert(0);
        let n = intervals(carry, weight_ns, wall.interval_ns);
        for _ in 0..n {
            match state {
                ThreadState::Native => self.writer.native_method_sample(ticks, tid as u64, stack, state, labels)?,
                _ => self.writer.execution_sample(ticks, tid as u64, stack, state, labels)?,
            }
        }
        self.counts.wall += n;
        Ok(())
    }

    fn rotate(&mut self, agent: &Agent) {
        if self.writer.chunk_bytes() >= self.chunk_limit || (self.writer.in_chunk() && self.chunk_began.elapsed() >= self.chunk_age) {
            self.end_chunk(agent, false);
            self.begin_chunk();
        }
    }
}

/// How many whole intervals a wall sample of `weight_ns` makes, at least
/// one, with `carry` (the thread's time not yet written, in ns) so that a
/// thread's events add up to its time.
fn intervals(carry: &mut i64, weight_ns: u64, interval_ns: u64) -> u64 {
    let interval = interval_ns.max(1) as i64;
    let owed = carry.saturating_add(weight_ns.min(i64::MAX as u64) as i64);
    let n = ((owed + interval / 2).div_euclid(interval)).max(1);
    *carry = (owed - n * interval).max(-interval);
    n as u64
}

/// Makes sure stack `id` (slot `slot` of `store`) is in the chunk's pool,
/// and returns the sample's state, label set and whether its stack shows a
/// virtual thread's frozen frames: read (the state refined) when the stack
/// is written (once per chunk), cached per slot. `None` when the slot is no
/// longer in the store.
fn thread_stack(
    writer: &mut JfrWriter<File>,
    lines: &mut Lines,
    states: &mut States,
    cx: &Context<'_>,
    store: &SampleStore,
    id: u64,
    slot: u32,
) -> Option<StackFacts> {
    if writer.has_stack(id) {
        if let Some(s) = states.get(slot) {
            return Some(s);
        }
    }
    let t = store.trace(slot)?;
    let (frames, gap) = cpu_stack(cx, lines, t.tid, &t.frames);
    let state = refine_state(ThreadState::from_u8(t.state), &frames);
    let frozen = matches!(gap, VirtualGap::Frozen(_));
    states.set(slot, (state, t.labels, frozen));
    // A stack cut short (at `jstackdepth`, or where both walks stopped, or
    // a virtual thread's that lost frames) ends in the `[truncated]`
    // marker: JFR's readers are told so too.
    let marker = crate::sampling::cpu::failure_name(crate::sampling::signal::MARK_TRUNCATED);
    let cut = frames.last().is_some_and(|f| f.class.is_empty() && f.method == marker);
    writer.stack(id, &frames, cut);
    Some((state, t.labels, frozen))
}

/// A sample's state told apart by its innermost Java frame (see
/// [`ThreadState::refine`]), from resolved frames (leaf first).
fn refine_state(state: ThreadState, frames: &[JfrFrame]) -> ThreadState {
    state.refine(frames.iter().find(|f| !f.class.is_empty()).map(|f| (f.class.as_str(), f.method.as_str())))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame(class: &str, method: &str) -> JfrFrame {
        JfrFrame { class: class.into(), method: method.into(), descriptor: String::new(), line: -1, bci: -1, kind: FrameType::Native }
    }

    #[test]
    fn sleeping_is_told_from_parked_by_the_innermost_java_frame() {
        let sleep = [frame("", "__futex_wait"), frame("java.lang.Thread", "sleep0"), frame("Main", "nap")];
        assert_eq!(refine_state(ThreadState::Parked, &sleep), ThreadState::Sleeping);
        assert_eq!(refine_state(ThreadState::Vm, &sleep), ThreadState::Sleeping);
        assert_eq!(refine_state(ThreadState::Running, &sleep), ThreadState::Running);
        let park = [frame("jdk.internal.misc.Unsafe", "park"), frame("java.lang.Thread", "sleep")];
        assert_eq!(refine_state(ThreadState::Parked, &park), ThreadState::Parked);
    }

    #[test]
    fn wall_weights_become_whole_intervals_that_add_up() {
        let mut carry = 0;
        assert_eq!(intervals(&mut carry, 20, 20), 1);
        assert_eq!(intervals(&mut carry, 61, 20), 3);
        // A short sample still makes one event, and the next pays it back.
        let mut carry = 0;
        assert_eq!(intervals(&mut carry, 5, 20), 1);
        assert_eq!(intervals(&mut carry, 35, 20), 1);
        assert_eq!(carry, 0);
        let mut carry = 0;
        let n: u64 = (0..1000).map(|i| intervals(&mut carry, 15 + (i % 3) * 10, 20)).sum();
        let truth = (0..1000).map(|i| 15 + (i % 3) * 10).sum::<u64>() / 20;
        assert!(n.abs_diff(truth) <= 2, "{n} vs {truth}");
    }
}

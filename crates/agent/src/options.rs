//! Agent options: the comma-separated `key[=value]` string given after
//! `-agentpath:liboxprof.so=` (or in an attach `load` request), in
//! async-profiler's syntax, parsed into one typed [`Config`]; also the
//! `%p`/`%t`/`%n` patterns of `file=` names ([`expand`]).
//!
//! Every error names the offending option and the accepted values, in one
//! line, so the JVM can refuse to start with it.

use std::fmt;
use std::path::PathBuf;

use oxprof_profile::units::parse_size_bytes;
use oxprof_profile::{Counter, OutputFormat};

/// The CPU sampling engines.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Event {
    /// perf_events `cpu-clock` per thread; falls back to [`Event::Ctimer`] when refused.
    Cpu,
    /// Process-wide `setitimer(ITIMER_PROF)`; limited by the kernel tick.
    Itimer,
    /// Per-thread `timer_create` on each thread's CPU-time clock.
    Ctimer,
}

impl Event {
    pub const WORDS: &'static str = "cpu, itimer, ctimer";

    fn parse(s: &str) -> Option<Event> {
        match s {
            "cpu" | "cpu-clock" => Some(Event::Cpu),
            "itimer" => Some(Event::Itimer),
            "ctimer" => Some(Event::Ctimer),
            _ => None,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Event::Cpu => "cpu",
            Event::Itimer => "itimer",
            Event::Ctimer => "ctimer",
        }
    }
}

pub use crate::native::CStack;

impl CStack {
    pub const WORDS: &'static str = "fp, dwarf, no";

    fn parse(s: &str) -> Result<CStack, String> {
        match s.to_ascii_lowercase().as_str() {
            "fp" => Ok(CStack::Fp),
            "dwarf" => Ok(CStack::Dwarf),
            "no" | "none" => Ok(CStack::No),
            "lbr" | "vm" | "vmx" => Err(format!("cstack={s} is not supported by oxprof; accepted: {}", CStack::WORDS)),
            _ => Err(format!("unknown native stack mode '{s}'; accepted: {}", CStack::WORDS)),
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            CStack::Fp => "fp",
            CStack::Dwarf => "dwarf",
            CStack::No => "no",
        }
    }
}

/// A command sent to a running agent (through attach).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Command {
    /// Start profiling (also the meaning of `start` at load time).
    Start,
    /// Stop profiling and write the profile.
    Stop,
    /// Write what was gathered so far and keep profiling.
    Dump,
    /// Report what runs.
    Status,
}

/// Log verbosity.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum LogLevel {
    Error,
    Warn,
    Info,
    Debug,
}

impl LogLevel {
    pub const WORDS: &'static str = "error, warn, info, debug";

    fn parse(s: &str) -> Option<LogLevel> {
        match s.to_ascii_lowercase().as_str() {
            "error" => Some(LogLevel::Error),
            "warn" | "warning" => Some(LogLevel::Warn),
            "info" => Some(LogLevel::Info),
            "debug" | "trace" => Some(LogLevel::Debug),
            _ => None,
        }
    }
}

/// Words accepted by `event=`.
pub const EVENT_WORDS: &str = "cpu, itimer, ctimer, alloc, wall, lock";
/// The default mean interval of lock profiling: 1 ms of waiting between samples.
pub const DEFAULT_LOCK_INTERVAL_NS: u64 = 1_000_000;
/// The shortest `loop=` interval: 1 s.
pub const MIN_LOOP_NS: u64 = 1_000_000_000;
/// The default CPU interval with `ttsp`: 1 ms.
pub const DEFAULT_TTSP_INTERVAL_NS: u64 = 1_000_000;
/// The default wall-clock sampling interval: 50 ms (async-profiler's).
pub const DEFAULT_WALL_INTERVAL_NS: u64 = 50_000_000;
/// The shortest wall-clock interval served (async-profiler's limit too).
pub const MIN_WALL_INTERVAL_NS: u64 = 100_000;
/// The default mean allocation sampling interval: 512 KiB, as in JEP 331.
pub const DEFAULT_ALLOC_INTERVAL: u64 = 512 * 1024;

/// The default sampling interval for CPU events: 10 ms.
pub const DEFAULT_INTERVAL_NS: u64 = 10_000_000;
/// The default maximum Java stack depth.
pub const DEFAULT_JSTACKDEPTH: usize = 2048;
const MAX_JSTACKDEPTH: usize = 65_536;
/// The shortest CPU interval: the signal handler takes 10-60 us per sample,
/// and with the interval near that a thread spends its CPU in the handler;
/// a system call that must run without a signal for longer than what is
/// left (`clone` when creating a thread or process) is restarted forever.
/// Measured: a program creating threads and processes hung at 50 us and
/// 25 us with `cpu`, and ran (about twice slower) at 100 us.
const MIN_INTERVAL_NS: u64 = 100_000;

/// Everything the agent was asked to do.
#[derive(Clone, Debug)]
pub struct Config {
    /// Start profiling right away (`start`, implied by any profiling option).
    pub start: bool,
    /// The CPU engine, or `None` when CPU is not profiled (e.g. `event=alloc`).
    pub cpu: Option<Event>,
    pub interval_ns: u64,
    /// Mean bytes between allocation samples (JEP 331); `None` = no
    /// allocation profiling, `Some(0)` = every allocation.
    pub alloc: Option<u64>,
    /// Whether `alloc=SIZE` named the interval. Without a size, a restart
    /// reuses the interval of the previous allocation recording in this JVM
    /// (as the JEP 331 CSR specifies for re-enabling), else the default.
    pub alloc_interval_given: bool,
    /// Only sample allocations of threads whose name matches this glob.
    pub alloc_threads: Option<String>,
    /// Wall-clock sampling interval (`event=wall`, `wall=INTERVAL`); `None`
    /// = no wall-clock profiling.
    pub wall: Option<u64>,
    /// Show each sample's thread state as a root frame (`state`).
    pub state: bool,
    /// Mean waiting time between lock samples (`event=lock`, `lock=DURATION`;
    /// 0 = every contended acquisition); `None` = no lock profiling.
    pub lock: Option<u64>,
    /// Keep CPU and wall samples only between entering these native
    /// functions (`begin=FUNC`, `end=FUNC`; see `trigger/`).
    pub begin: Option<String>,
    pub end: Option<String>,
    /// Time-to-safepoint profiling (`ttsp`): the window from a safepoint
    /// request until every thread stopped, with each safepoint recorded.
    pub ttsp: bool,
    /// Output file; `None` means the default name chosen at dump time.
    pub file: Option<PathBuf>,
    /// Explicit format word; otherwise taken from the file's extension.
    pub format: Option<OutputFormat>,
    /// One root frame per thread.
    pub threads: bool,
    pub jstackdepth: usize,
    /// Native and kernel frames with CPU samples.
    pub cstack: CStack,
    pub title: Option<String>,
    pub counter: Counter,
    /// Frame-type suffixes in collapsed output (`_[j]`, `_[i]`, ...).
    pub annotate: bool,
    pub log: Option<PathBuf>,
    pub loglevel: LogLevel,
    /// Where to publish live progress (`samples=N elapsed_ms=M`) for the CLI.
    pub status: Option<PathBuf>,
    /// `stop`, `dump` or `status`, for a running agent (`start` sets `start`).
    pub command: Option<Command>,
    /// Where to write the text reply to a command (created by the agent).
    pub reply: Option<PathBuf>,
    /// Live objects and leak detection (see `live.rs`).
    pub live: LiveOptions,
    /// Continuous profiling: cut the recording into intervals of this many
    /// ns, each written as a file of its own (`loop=DURATION`).
    pub loop_ns: Option<u64>,
    /// Keep at most this many interval files, deleting the oldest (`keep=N`).
    pub keep: Option<usize>,
    /// Push each interval to a profile store (`upload=URL`, `format=otlp|pyroscope`,
    /// `service=`, `labels=`, `auth=`, `upload_*`); the service name's default
    /// (the main class) is only known at start.
    pub upload: Option<oxprof_upload::UploadOptions>,
    /// Options that start nothing and are ignored (`interval=1ms` alone at
    /// load): the line `Agent_OnLoad` prints about them.
    pub idle_note: Option<String>,
}

/// Options of live-object tracking (`live`, `livemem`, `nogc`, `gcroots`).
#[derive(Clone, Debug, PartialEq)]
pub struct LiveOptions {
    /// Track sampled objects until they die (`live`).
    pub enabled: bool,
    /// Memory budget for tracked samples in bytes (`livemem=SIZE`).
    pub budget: u64,
    /// Force a full GC before a live report (off with `nogc`/`live_gc=no`).
    pub force_gc: bool,
    /// Time budget for paths to GC roots (`gcroots[=DURATION]`), in ns.
    pub gc_roots_ns: Option<u64>,
    /// Explicit `format=leaks`: the text leak report whatever the extension.
    pub report_format: bool,
}

/// Default memory budget for tracked live samples: 16 MiB.
pub const DEFAULT_LIVE_BUDGET: u64 = 16 << 20;
const MIN_LIVE_BUDGET: u64 = 64 << 10;
/// Default time budget for the search of paths to GC roots: 5 s.
pub const DEFAULT_GC_ROOTS_NS: u64 = 5_000_000_000;

impl Default for LiveOptions {
    fn default() -> LiveOptions {
        LiveOptions { enabled: false, budget: DEFAULT_LIVE_BUDGET, force_gc: true, gc_roots_ns: None, report_format: false }
    }
}

impl Default for Config {
    fn default() -> Config {
        Config {
            start: false,
            cpu: Some(Event::Cpu),
            interval_ns: DEFAULT_INTERVAL_NS,
            alloc: None,
            alloc_interval_given: false,
            alloc_threads: None,
            wall: None,
            state: false,
            lock: None,
            begin: None,
            end: None,
            ttsp: false,
            file: None,
            format: None,
            threads: false,
            jstackdepth: DEFAULT_JSTACKDEPTH,
            cstack: CStack::Fp,
            title: None,
            counter: Counter::Samples,
            annotate: false,
            log: None,
            loglevel: LogLevel::Info,
            status: None,
            command: None,
            reply: None,
            live: LiveOptions::default(),
            loop_ns: None,
            keep: None,
            upload: None,
            idle_note: None,
        }
    }
}

/// An option the agent could not accept.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OptionError {
    pub option: String,
    pub problem: String,
}

impl fmt::Display for OptionError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "invalid agent option '{}': {}", Escaped(&self.option), Escaped(&self.problem))
    }
}

/// Text quoting the user's option string, with control characters escaped
/// (`\n`), so an error stays one line in the log and the reply file.
struct Escaped<'a>(&'a str);

impl fmt::Display for Escaped<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for c in self.0.chars() {
            if c.is_control() {
                write!(f, "{}", c.escape_debug())?;
            } else {
                fmt::Write::write_char(f, c)?;
            }
        }
        Ok(())
    }
}

impl std::error::Error for OptionError {}

/// An option item with the user:password of a URL in it left out, so that
/// an error about it never shows a password.
fn without_userinfo(item: &str) -> String {
    let Some(scheme_end) = item.find("://") else { return item.to_string() };
    let rest = &item[scheme_end + 3..];
    let authority_end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    match rest[..authority_end].rfind('@') {
        Some(at) => format!("{}://…@{}", &item[..scheme_end], &rest[at + 1..]),
        None => item.to_string(),
    }
}

fn err(option: &str, problem: impl Into<String>) -> OptionError {
    OptionError { option: option.to_string(), problem: problem.into() }
}

const KEYS: &str = "start, stop, dump, status, event, interval, alloc, alloc_threads, wall, state, lock, begin, end, ttsp, loop, keep, live, livemem, nogc, live_gc, gcroots, file, format, collapsed, folded, flamegraph, html, pprof, jfr, otlp, leaks, threads, jstackdepth, cstack, title, samples, total, ann, log, loglevel, status=FILE";

impl Config {
    /// Parses an option string such as `start,event=cpu,interval=10ms,file=p.html`.
    pub fn parse(options: &str) -> Result<Config, OptionError> {
        let mut c = Config::default();
        let mut profiling_option = false;
        let mut cpu_asked = false;
        let mut wall_event = false;
        // `event=wall` / `event=lock`: `interval=` is then that event's.
        let mut wall_named = false;
        let mut lock_named = false;
        let mut wall_given: Option<u64> = None;
        let mut interval_given = false;
        let mut interval_item = String::new();
        let mut lock_event = false;
        // `event=alloc`, `event=wall` or `event=lock`: that event alone.
        let mut other_event_named = false;
        let mut lock_given: Option<u64> = None;
        let mut live_gc_given = false;
        let mut upload = oxprof_upload::UploadOptions::default();
        let mut store_word: Option<(String, String)> = None;
        // The item before, when it was `file=`: a comma in a file name
        // splits it into a second, unknown option.
        let mut after_file = false;
        // Items that do not start profiling (for the note of an idle load).
        let mut idle_items: Vec<String> = Vec::new();
        for item in options.split(',').map(str::trim).filter(|s| !s.is_empty()) {
            let (key, value) = match item.split_once('=') {
                Some((k, v)) => (k.trim(), Some(v)),
                None => (item, None),
            };
            // Option words are taken in any case (`event=CPU`, `START`);
            // paths, names and URLs stay as given.
            let key_lower = key.to_ascii_lowercase();
            let key = key_lower.as_str();
            let word_owned = value.map(|v| v.trim().to_ascii_lowercase());
            let word = word_owned.as_deref();
            let need = |what: &str| value.filter(|v| !v.is_empty()).ok_or_else(|| err(item, format!("'{key}' needs a value: {what}")));
            let need_word = |what: &str| word.filter(|v| !v.is_empty()).ok_or_else(|| err(item, format!("'{key}' needs a value: {what}")));
            let was_after_file = std::mem::replace(&mut after_file, key == "file");
            if !matches!(key, "log" | "loglevel" | "start" | "reply" | "status") {
                idle_items.push(item.to_string());
            }
            if value.is_some() && BARE_WORDS.contains(&key) {
                return Err(err(item, format!("'{key}' takes no value: give it as a word on its own ({key})")));
            }
            match key {
                "start" => c.start = true,
                "stop" | "dump" | "status" if value.is_none() => {
                    let cmd = match key {
                        "stop" => Command::Stop,
                        "dump" => Command::Dump,
                        _ => Command::Status,
                    };
                    if let Some(prev) = c.command.filter(|p| *p != cmd) {
                        return Err(err(item, format!("only one command at a time ({prev:?} was given too)")));
                    }
                    c.command = Some(cmd);
                }
                "reply" => c.reply = Some(PathBuf::from(need("a reply file path")?)),
                "event" => {
                    let v = need_word(EVENT_WORDS)?;
                    other_event_named |= matches!(v, "alloc" | "wall" | "lock");
                    if v == "alloc" {
                        c.alloc.get_or_insert(DEFAULT_ALLOC_INTERVAL);
                    } else if v == "wall" {
                        wall_event = true;
                        wall_named = true;
                    } else if v == "lock" {
                        lock_event = true;
                        lock_named = true;
                    } else {
                        c.cpu =
                            Some(Event::parse(v).ok_or_else(|| err(item, format!("unknown event '{}'; accepted: {EVENT_WORDS}", value.unwrap_or("").trim())))?);
                        cpu_asked = true;
                    }
                    profiling_option = true;
                }
                "cpu" | "itimer" | "ctimer" if value.is_none() => {
                    c.cpu = Event::parse(key);
                    cpu_asked = true;
                    profiling_option = true;
                }
                "alloc" => {
                    c.alloc_interval_given |= value.is_some();
                    c.alloc = Some(match word {
                        None => c.alloc.unwrap_or(DEFAULT_ALLOC_INTERVAL),
                        Some(v) => parse_size(v, MAX_ALLOC_INTERVAL, "the JVM's allocation sampling interval is at most 2147483647 bytes (2g less one byte)")
                            .map_err(|p| {
                            err(item, format!("{p}; the allocation sampling interval is the mean number of bytes between samples (0 samples every allocation)"))
                        })?,
                    });
                    profiling_option = true;
                }
                "wall" => {
                    wall_event = true;
                    if let Some(v) = word {
                        let ns = parse_interval(v).map_err(|p| err(item, format!("{p}; wall=INTERVAL is the wall-clock sampling interval, e.g. 50ms")))?;
                        if !(MIN_WALL_INTERVAL_NS..=MAX_INTERVAL_NS).contains(&ns) {
                            return Err(err(item, WALL_RANGE));
                        }
                        wall_given = Some(ns);
                    }
                    profiling_option = true;
                }
                "state" => c.state = parse_flag(item, key, word)?,
                "lock" => {
                    lock_event = true;
                    if let Some(v) = word {
                        lock_given = Some(parse_interval(v).map_err(|p| {
                            err(
                                item,
                                format!("{p}; lock=DURATION is the mean waiting time between lock samples, e.g. 1ms (0 records every contended acquisition)"),
                            )
                        })?);
                    }
                    profiling_option = true;
                }
                "live" => c.live.enabled = parse_flag(item, key, word)?,
                "livemem" => {
                    let v = need_word("a memory budget such as 16m")?;
                    c.live.budget = parse_size(v, MAX_LIVE_BUDGET, "oxprof's budget for tracked live samples is at most 2147483647 bytes (2g less one byte)")
                        .map_err(|p| err(item, format!("{p}; livemem is the memory budget for tracked live samples")))?;
                    if c.live.budget < MIN_LIVE_BUDGET {
                        return Err(err(item, "livemem must be at least 64k"));
                    }
                }
                "nogc" if value.is_none() => {
                    c.live.force_gc = false;
                    live_gc_given = true;
                }
                "live_gc" => {
                    c.live.force_gc = parse_flag(item, key, word)?;
                    live_gc_given = true;
                }
                "gcroots" => {
                    c.live.gc_roots_ns = match word {
                        None => Some(DEFAULT_GC_ROOTS_NS),
                        Some("no" | "false" | "0") => None,
                        Some(v) => Some(
                            parse_wall_duration_ns(v)
                                .map_err(|p| err(item, format!("{p}; gcroots=DURATION bounds the time spent finding paths to GC roots")))?,
                        ),
                    }
                }
                "leaks" if value.is_none() => c.live.report_format = true,
                "format" if word == Some("leaks") => c.live.report_format = true,
                "alloc_threads" => c.alloc_threads = Some(need("a thread name pattern such as worker-*")?.to_string()),
                "interval" => {
                    interval_given = true;
                    c.interval_ns = parse_interval(need_word("a duration such as 10ms")?).map_err(|p| err(item, p))?;
                    interval_item = item.to_string();
                }
                "file" => {
                    c.file = Some(PathBuf::from(need("an output path such as profile.html")?));
                    profiling_option = true;
                }

                "format" if matches!(word, Some("otlp" | "pyroscope")) => {
                    // The kind of store with upload=; otherwise otlp is a file format.
                    store_word = word.map(|v| (item.to_string(), v.to_string()));
                }
                "format" => {
                    let v = need_word(OutputFormat::WORDS)?;
                    c.format = Some(OutputFormat::from_word(v).ok_or_else(|| {
                        err(
                            item,
                            format!(
                                "unknown format '{}'; accepted: {} (with upload=URL, the kind of store: otlp or pyroscope)",
                                value.unwrap_or("").trim(),
                                OutputFormat::WORDS
                            ),
                        )
                    })?);
                }
                "collapsed" | "flamegraph" | "folded" | "html" | "pprof" | "jfr" | "otlp" if value.is_none() => c.format = OutputFormat::from_word(key),
                _ if upload.accept(key, value).map_err(|p| err(&without_userinfo(item), p))? => profiling_option |= key == "upload",
                "threads" => c.threads = parse_flag(item, key, word)?,
                "begin" | "end" => {
                    let v = need("a native function, e.g. SafepointSynchronize::begin or a mangled or C symbol")?.trim().to_string();
                    if key == "begin" {
                        c.begin = Some(v);
                    } else {
                        c.end = Some(v);
                    }
                    // Triggers choose when CPU samples are kept: they ask for CPU.
                    cpu_asked = true;
                    profiling_option = true;
                }
                "ttsp" => {
                    c.ttsp = parse_flag(item, key, word)?;
                    cpu_asked |= c.ttsp;
                    profiling_option |= c.ttsp;
                }
                "loop" => {
                    let v = need_word("an interval such as 60s, 5m or 1h")?;
                    if v.trim().parse::<f64>().is_ok_and(|n| n == 0.0) {
                        return Err(err(item, "the loop interval must be at least 1s, e.g. loop=60s"));
                    }
                    let ns = parse_wall_duration_ns(v).map_err(|p| err(item, format!("{p}; loop=DURATION cuts the recording into files of that length")))?;
                    if ns < MIN_LOOP_NS {
                        return Err(err(item, "the loop interval must be at least 1s"));
                    }
                    c.loop_ns = Some(ns);
                    profiling_option = true;
                }
                "keep" => {
                    let v = need("a number of interval files such as 48")?;
                    c.keep = Some(
                        v.parse()
                            .ok()
                            .filter(|&n: &usize| n > 0)
                            .ok_or_else(|| err(item, "keep=N is the number of interval files kept (a whole number, at least 1)"))?,
                    );
                }
                "ann" => c.annotate = parse_flag(item, key, word)?,
                "samples" if value.is_none() => c.counter = Counter::Samples,
                "total" if value.is_none() => c.counter = Counter::Total,
                "jstackdepth" => {
                    let v = need("a whole number of frames, e.g. 2048")?;
                    let n: usize = v.parse().map_err(|_| err(item, "jstackdepth must be a whole number of frames, e.g. 2048"))?;
                    if n == 0 || n > MAX_JSTACKDEPTH {
                        return Err(err(item, format!("jstackdepth must be between 1 and {MAX_JSTACKDEPTH}")));
                    }
                    c.jstackdepth = n;
                }
                "cstack" => c.cstack = CStack::parse(need(CStack::WORDS)?.trim()).map_err(|p| err(item, p))?,
                "title" => c.title = Some(need("a title text")?.to_string()),
                "log" => c.log = Some(PathBuf::from(need("a log file path")?)),
                "status" => c.status = Some(PathBuf::from(need("a status file path")?)),
                "loglevel" => {
                    let v = need(LogLevel::WORDS)?;
                    c.loglevel = LogLevel::parse(v).ok_or_else(|| err(item, format!("unknown log level '{v}'; accepted: {}", LogLevel::WORDS)))?;
                }
                _ => return Err(err(item, unknown_option(key, was_after_file && (key.contains('.') || key.contains('/'))))),
            }
        }
        if profiling_option && c.command.is_none() {
            c.start = true;
        }
        if c.start && c.command.is_some() {
            return Err(err("start", "start cannot be combined with stop, dump or status"));
        }
        if wall_event {
            // `event=wall,interval=20ms`: the interval is the wall clock's.
            let ns = wall_given.unwrap_or(if interval_given && !cpu_asked && wall_named { c.interval_ns } else { DEFAULT_WALL_INTERVAL_NS });
            if !(MIN_WALL_INTERVAL_NS..=MAX_INTERVAL_NS).contains(&ns) {
                return Err(err(if interval_item.is_empty() { "interval" } else { &interval_item }, WALL_RANGE));
            }
            c.wall = Some(ns);
        }
        if lock_event {
            c.lock =
                Some(lock_given.unwrap_or(if interval_given && !cpu_asked && lock_named && !wall_named { c.interval_ns } else { DEFAULT_LOCK_INTERVAL_NS }));
        }
        // As async-profiler: CPU sampling unless only other events are named
        // (`alloc`, `wall`, `lock`), but an `interval=` asks for CPU sampling
        // beside them, unless `event=` named another event (`event=wall`
        // and `event=lock` take `interval=` as their own).
        let interval_is_other = (wall_named && wall_given.is_none()) || (lock_named && lock_given.is_none() && !wall_named);
        let cpu_implied = interval_given && !interval_is_other && !other_event_named;
        if (c.alloc.is_some() || c.wall.is_some() || c.lock.is_some()) && !cpu_asked && !cpu_implied {
            c.cpu = None;
        }
        if c.ttsp && (c.begin.is_some() || c.end.is_some()) {
            return Err(err("ttsp", "ttsp sets its own begin and end functions; give either ttsp or begin=/end="));
        }
        // A window opens at `begin` and closes at `end`: one alone would
        // open one window that never closes, or none.
        match (&c.begin, &c.end) {
            (Some(_), None) => return Err(err("begin", "begin=FUNC needs end=FUNC: samples are kept from a call of begin until the next call of end")),
            (None, Some(_)) => return Err(err("end", "end=FUNC needs begin=FUNC: samples are kept from a call of begin until the next call of end")),
            _ => {}
        }
        if c.cpu.is_some() && interval_given && c.interval_ns < MIN_INTERVAL_NS {
            return Err(err(
                &interval_item,
                "the CPU interval must be at least 100us and at most 60s (shorter, threads spend their time in the signal handler and system calls such as clone() can be restarted forever)",
            ));
        }
        if c.cpu.is_some() && interval_given && c.interval_ns > MAX_INTERVAL_NS {
            return Err(err(&interval_item, CPU_RANGE));
        }
        if c.ttsp && c.cpu.is_some() && !interval_given {
            // Safepoints are reached in microseconds to milliseconds: the
            // default 10 ms would rarely sample one.
            c.interval_ns = DEFAULT_TTSP_INTERVAL_NS;
        }
        if c.live.enabled && c.alloc.is_none() {
            return Err(err("live", "live needs allocation sampling: add event=alloc or alloc=SIZE"));
        }
        if !c.live.enabled && c.start && (c.live.gc_roots_ns.is_some() || c.live.budget != DEFAULT_LIVE_BUDGET || !c.live.force_gc || c.live.report_format) {
            return Err(err("live", "livemem, nogc, live_gc, gcroots and format=leaks need live object tracking: add live"));
        }
        if let Some((item, word)) = store_word {
            if upload.any() {
                upload.accept("format", Some(&word)).map_err(|p| err(&item, p))?;
            } else if word == "otlp" {
                c.format = Some(OutputFormat::Otlp);
            } else {
                return Err(err(&item, "format=pyroscope names a profile store: give it with upload=URL"));
            }
        }
        if upload.any() {
            // Checked now (one line naming the option); built at start,
            // when the main class (the default service name) is known.
            upload.clone().finish("java").map_err(|p| match p.split_once(": ") {
                Some((option, problem)) => err(option, problem),
                None => err("upload", p),
            })?;
            if c.loop_ns.is_none() && c.start {
                return Err(err("upload", "upload=URL pushes each interval of continuous profiling: add loop=DURATION, e.g. loop=15s"));
            }
            if c.start {
                // Read now, so a missing credential refuses the start like
                // any bad option rather than failing every upload later.
                oxprof_upload::check_credential(&upload).map_err(|p| match p.split_once(": ") {
                    Some((option, problem)) => err(option, problem),
                    None => err("auth", p),
                })?;
            }
            c.upload = Some(upload);
        }
        if c.live.enabled && c.loop_ns.is_some() && !live_gc_given {
            // A full GC before every interval's leak report would cost a
            // service a full collection a minute: intervals use what the
            // collector found on its own (`live_gc=yes` asks for the GC).
            c.live.force_gc = false;
        }
        if c.keep.is_some() && c.loop_ns.is_none() {
            return Err(err("keep", "keep=N needs continuous profiling: add loop=DURATION"));
        }
        if c.alloc_threads.is_some() && c.alloc.is_none() {
            return Err(err("alloc_threads", "alloc_threads needs allocation profiling: add alloc or event=alloc"));
        }
        if let Some(f) = c.file.take() {
            c.file = Some(expand_file(f, c.loop_ns.is_some(), c.command.is_some())?);
        }
        if let Some(f) = c.file.as_deref() {
            let text = f.to_string_lossy();
            if text.ends_with('/') || f.is_dir() {
                let dir = text.trim_end_matches('/');
                let dir = if dir.is_empty() { "/" } else { dir };
                return Err(err(&format!("file={text}"), format!("{dir} is a directory; give a file name such as {}/profile.html", dir.trim_end_matches('/'))));
            }
        }
        // The format follows the file's extension: a name it cannot tell
        // (a typo such as `rec.jfrr`) is refused rather than written as HTML.
        if let Some(f) = c.file.as_deref().filter(|f| c.format.is_none() && !c.live.report_format && OutputFormat::from_path(f).is_none()) {
            return Err(err(
                "file",
                format!(
                    "cannot tell the format from '{}': end the name in .html, .collapsed, .jfr, .pb.gz or .otlp.pb (also .folded, .txt, .pprof, .pb, .otlp), or add format=WORD ({})",
                    f.display(),
                    OutputFormat::WORDS
                ),
            ));
        }
        if !c.start && c.command.is_none() && !idle_items.is_empty() {
            c.idle_note = Some(idle_note(&idle_items));
        }
        Ok(c)
    }

    /// The output format: the explicit word, else the file's extension, else HTML.
    pub fn output_format(&self) -> OutputFormat {
        self.format.or_else(|| self.file.as_deref().and_then(OutputFormat::from_path)).unwrap_or(OutputFormat::FlameGraph)
    }
}

/// An on/off option (`threads`, `threads=false`); `word` is its value in
/// lower case.
fn parse_flag(item: &str, key: &str, word: Option<&str>) -> Result<bool, OptionError> {
    match word {
        None | Some("true") | Some("1") | Some("yes") => Ok(true),
        Some("false") | Some("0") | Some("no") => Ok(false),
        Some(_) => Err(err(item, format!("'{key}' takes no value, or true/false (yes/no, 1/0)"))),
    }
}

/// The line printed when `-agentpath` options start nothing (`interval=1ms`
/// alone): they are not kept for a later start, which takes its own.
fn idle_note(items: &[String]) -> String {
    let shown: Vec<String> = items.iter().map(|i| format!("'{}'", Escaped(&without_userinfo(i)))).collect();
    format!(
        "oxprof: loaded idle: {} start{} nothing and {} ignored (no start, event= or file= given); add start to profile from JVM start, or give {} to `oxprof attach PID start` later",
        shown.join(", "),
        if items.len() == 1 { "s" } else { "" },
        if items.len() == 1 { "is" } else { "are" },
        if items.len() == 1 { "it" } else { "them" }
    )
}

/// `YYYYMMDD-HHMMSS` in local time (async-profiler's `%t`).
pub fn timestamp(secs: i64) -> String {
    // SAFETY: all-zero is a valid `tm`; localtime_r writes it from `t`
    // and touches nothing else (reentrant, unlike localtime).
    let mut tm: libc::tm = unsafe { std::mem::zeroed() };
    let t: libc::time_t = secs as libc::time_t;
    // SAFETY: both pointers are to live locals.
    if unsafe { libc::localtime_r(&t, &mut tm) }.is_null() {
        return secs.to_string();
    }
    format!("{:04}{:02}{:02}-{:02}{:02}{:02}", tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec)
}

/// The file name of interval `seq` started at `secs`: `%p` → process id,
/// `%t` → `YYYYMMDD-HHMMSS`, `%n` → `seq`, `%%` → `%`.
pub fn expand(pattern: &std::path::Path, seq: u64, secs: i64) -> PathBuf {
    let text = pattern.to_string_lossy();
    let mut out = String::with_capacity(text.len() + 16);
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        if c != '%' {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some('p') => out.push_str(&std::process::id().to_string()),
            Some('t') => out.push_str(&timestamp(secs)),
            Some('n') => out.push_str(&seq.to_string()),
            Some('%') => out.push('%'),
            Some(other) => {
                out.push('%');
                out.push(other);
            }
            None => out.push('%'),
        }
    }
    PathBuf::from(out)
}

/// The character after each `%` of a file name (`%%` counts once), `None`
/// for a `%` that ends it.
fn percent_codes(text: &str) -> impl Iterator<Item = Option<char>> + '_ {
    let mut chars = text.chars();
    std::iter::from_fn(move || loop {
        match chars.next()? {
            '%' => return Some(chars.next()),
            _ => continue,
        }
    })
}

/// Whether a file name holds `%n` (not `%%n`): it names the files of
/// continuous profiling.
pub fn numbers_intervals(f: &std::path::Path) -> bool {
    percent_codes(&f.to_string_lossy()).any(|c| c == Some('n'))
}

/// A `file=` name: its `%` sequences checked (`%p`, `%t`, `%n`, `%%`), and,
/// without `loop=`, expanded as async-profiler does: `%p` the JVM's pid,
/// `%t` the time now (`YYYYMMDD-HHMMSS`), `%%` a `%`. `%n` numbers the files
/// of `loop=` and is refused without it, except in a command (`dump`,
/// `stop`) while a loop runs, where it names that loop's pattern (kept
/// whole, as the recording's own `file=` is).
fn expand_file(f: PathBuf, looping: bool, command: bool) -> Result<PathBuf, OptionError> {
    let text = f.to_string_lossy().into_owned();
    let accepted = "accepted: %p (the JVM's pid), %t (the start time, YYYYMMDD-HHMMSS), %n (the interval's number, with loop=), %% (a %)";
    let mut numbered = false;
    for code in percent_codes(&text) {
        match code {
            Some('p' | 't' | '%') => {}
            Some('n') => numbered = true,
            Some(other) => return Err(err(&format!("file={text}"), format!("unknown '%{other}' in the file name; {accepted}"))),
            None => return Err(err(&format!("file={text}"), format!("a lone '%' ends the file name (write %% for a %); {accepted}"))),
        }
    }
    // `%n` in a command's file is checked by the command (`commands.rs`),
    // which knows whether a loop runs.
    if looping || !text.contains('%') || (numbered && command) {
        return Ok(f);
    }
    if numbered {
        return Err(err(
            &format!("file={text}"),
            "%n numbers the files of continuous profiling: add loop=DURATION, or name the file with %p (the JVM's pid) or %t (the start time)",
        ));
    }
    let secs = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_secs() as i64).unwrap_or(0);
    Ok(expand(&f, 0, secs))
}

/// Options that are words on their own and take no value.
const BARE_WORDS: &[&str] = &[
    "start",
    "stop",
    "dump",
    "cpu",
    "itimer",
    "ctimer",
    "nogc",
    "leaks",
    "collapsed",
    "flamegraph",
    "folded",
    "html",
    "pprof",
    "jfr",
    "otlp",
    "samples",
    "total",
];

/// Every option key, for the unknown-option message and its suggestion.
fn all_keys() -> impl Iterator<Item = &'static str> {
    KEYS.split(", ").chain(oxprof_upload::config::OPTION_KEYS.split(", ")).map(|k| k.split('=').next().unwrap_or(k))
}

/// The message for an unknown option `key`: a key at most two edits away
/// is suggested; `path_piece` (it follows a `file=` and looks like part of
/// a path) says that commas separate options.
fn unknown_option(key: &str, path_piece: bool) -> String {
    let mut m = format!("unknown option '{key}'");
    if path_piece {
        m.push_str(" (commas separate options: a file name cannot contain one)");
    } else if let Some(near) = all_keys().map(|k| (edit_distance(key, k), k)).filter(|&(d, _)| d <= 2).min_by_key(|&(d, _)| d).map(|(_, k)| k) {
        m.push_str(&format!("; did you mean '{near}'?"));
    }
    m.push_str(&format!("; accepted: {KEYS}, {}", oxprof_upload::config::OPTION_KEYS));
    m
}

/// Levenshtein distance between two short words.
fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut prev = row[0];
        row[0] = i + 1;
        for (j, &cb) in b.iter().enumerate() {
            let cur = row[j + 1];
            row[j + 1] = (prev + usize::from(ca != cb)).min(row[j] + 1).min(cur + 1);
            prev = cur;
        }
    }
    row[b.len()]
}

/// The longest CPU or wall-clock interval: 60 s (longer, a profile of
/// minutes holds a handful of samples, or none).
pub const MAX_INTERVAL_NS: u64 = 60_000_000_000;
const CPU_RANGE: &str = "the CPU interval must be at least 100us and at most 60s";
const WALL_RANGE: &str = "the wall-clock interval must be at least 100us and at most 60s";
/// The largest allocation sampling interval: HotSpot takes a jint.
const MAX_ALLOC_INTERVAL: u64 = i32::MAX as u64;
/// The largest live-tracking memory budget (oxprof's own bound).
const MAX_LIVE_BUDGET: u64 = i32::MAX as u64;

/// Splits `N[unit]` into its number (digits and dots) and unit.
fn number_and_unit(v: &str) -> (&str, &str) {
    let v = v.trim();
    v.split_at(v.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(v.len()))
}

/// A duration `N[ns|us|ms|s]` (bare numbers are nanoseconds), zero in any
/// unit included; a number too large to hold is "too large", not "not a
/// duration".
fn parse_interval(v: &str) -> Result<u64, String> {
    let (num, unit) = number_and_unit(v);
    let scale = match unit.trim() {
        "" | "ns" => 1.0,
        "us" | "µs" => 1e3,
        "ms" => 1e6,
        "s" => 1e9,
        _ => return parse_duration(v),
    };
    match num.parse::<f64>() {
        Ok(0.0) => Ok(0),
        Ok(n) if n.is_finite() && n * scale >= 1e18 => Err(format!("'{}' is too large; at most 1000000000s", v.trim())),
        _ => parse_duration(v),
    }
}

/// A size `N[k|m|g]` of at most `max` bytes; above it (or too large to
/// hold), the error says `limit`.
fn parse_size(v: &str, max: u64, limit: &str) -> Result<u64, String> {
    let (num, unit) = number_and_unit(v);
    let scale: u64 = match unit.trim() {
        "" | "b" => 1,
        "k" | "kb" | "kib" => 1 << 10,
        "m" | "mb" | "mib" => 1 << 20,
        "g" | "gb" | "gib" => 1 << 30,
        _ => return parse_size_bytes(v),
    };
    if num.is_empty() || !num.bytes().all(|b| b.is_ascii_digit()) {
        return parse_size_bytes(v);
    }
    match num.parse::<u64>().ok().and_then(|n| n.checked_mul(scale)) {
        Some(n) if n <= max => Ok(n),
        _ => Err(format!("'{}' is too large; {limit}", v.trim())),
    }
}

pub use oxprof_profile::units::parse_duration_ns as parse_duration;
use oxprof_profile::units::parse_wall_duration_ns;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn full_option_string() {
        let c = Config::parse("start,event=ctimer,interval=5ms,file=/tmp/p.collapsed,threads,jstackdepth=64,title=My App,log=/tmp/l,loglevel=debug").unwrap();
        assert!(c.start);
        assert_eq!(c.cpu, Some(Event::Ctimer));
        assert_eq!(c.alloc, None);
        assert_eq!(c.interval_ns, 5_000_000);
        assert_eq!(c.file.as_deref(), Some(std::path::Path::new("/tmp/p.collapsed")));
        assert_eq!(c.output_format(), OutputFormat::Collapsed);
        assert!(c.threads);
        assert_eq!(c.jstackdepth, 64);
        assert_eq!(c.title.as_deref(), Some("My App"));
        assert_eq!(c.loglevel, LogLevel::Debug);
    }

    #[test]
    fn defaults_and_implied_start() {
        let c = Config::parse("").unwrap();
        assert!(!c.start);
        assert_eq!(c.interval_ns, DEFAULT_INTERVAL_NS);
        assert_eq!(c.output_format(), OutputFormat::FlameGraph);
        assert!(Config::parse("file=x.html").unwrap().start);
        assert_eq!(Config::parse("file=x.pb.gz").unwrap().output_format(), OutputFormat::Pprof);
        assert_eq!(Config::parse("file=x.pprof").unwrap().output_format(), OutputFormat::Pprof);
        assert_eq!(Config::parse("file=x.otlp.pb").unwrap().output_format(), OutputFormat::Otlp);
        assert_eq!(Config::parse("file=x.out,otlp").unwrap().output_format(), OutputFormat::Otlp);
        assert_eq!(Config::parse("file=x.out,pprof").unwrap().output_format(), OutputFormat::Pprof);
        assert!(Config::parse("event=itimer").unwrap().start);
    }

    #[test]
    fn wall_options() {
        let c = Config::parse("event=wall").unwrap();
        assert_eq!((c.cpu, c.wall), (None, Some(DEFAULT_WALL_INTERVAL_NS)));
        assert!(c.start);
        let c = Config::parse("event=wall,interval=20ms,state").unwrap();
        assert_eq!((c.cpu, c.wall, c.state), (None, Some(20_000_000), true));
        let c = Config::parse("event=cpu,interval=5ms,wall=50ms,alloc").unwrap();
        assert_eq!((c.cpu, c.interval_ns, c.wall, c.alloc), (Some(Event::Cpu), 5_000_000, Some(50_000_000), Some(DEFAULT_ALLOC_INTERVAL)));
        let c = Config::parse("event=cpu,wall").unwrap();
        assert_eq!((c.cpu, c.wall), (Some(Event::Cpu), Some(DEFAULT_WALL_INTERVAL_NS)));
        // Another event alone turns CPU sampling off, but a CPU interval
        // beside it asks for CPU sampling too.
        assert_eq!(Config::parse("wall=50ms").unwrap().cpu, None);
        let c = Config::parse("start,interval=2ms,wall=50ms").unwrap();
        assert_eq!((c.cpu, c.interval_ns, c.wall), (Some(Event::Cpu), 2_000_000, Some(50_000_000)));
        let c = Config::parse("start,interval=2ms,alloc").unwrap();
        assert_eq!((c.cpu, c.alloc), (Some(Event::Cpu), Some(DEFAULT_ALLOC_INTERVAL)));
        let c = Config::parse("wall,interval=20ms").unwrap();
        assert_eq!((c.cpu, c.interval_ns, c.wall), (Some(Event::Cpu), 20_000_000, Some(DEFAULT_WALL_INTERVAL_NS)), "a bare wall keeps its own interval");
        let c = Config::parse("event=wall,interval=20ms").unwrap();
        assert_eq!((c.cpu, c.wall), (None, Some(20_000_000)), "event=wall takes the interval");
        assert_eq!(Config::parse("event=alloc,interval=2ms").unwrap().cpu, None, "event= names allocations alone");
        let c = Config::parse("lock,interval=2ms").unwrap();
        assert_eq!((c.cpu, c.lock), (Some(Event::Cpu), Some(DEFAULT_LOCK_INTERVAL_NS)), "a bare lock keeps its own interval");
        let c = Config::parse("event=lock,interval=2ms").unwrap();
        assert_eq!((c.cpu, c.lock), (None, Some(2_000_000)), "event=lock takes the interval");
        assert_eq!(Config::parse("interval=2ms,lock=1ms").unwrap().cpu, Some(Event::Cpu));
        let e = Config::parse("wall=abc").unwrap_err().to_string();
        assert!(e.contains("'wall=abc'") && e.contains("wall-clock sampling interval"), "{e}");
        let e = Config::parse("wall=50us").unwrap_err().to_string();
        assert!(e.contains("at least 100us"), "{e}");
        let e = Config::parse("event=wall,interval=20us").unwrap_err().to_string();
        assert!(e.contains("at least 100us"), "{e}");
        let e = Config::parse("event=bogus").unwrap_err().to_string();
        assert!(e.contains("accepted: cpu, itimer, ctimer, alloc, wall, lock"), "{e}");
        let e = Config::parse("format=pyro").unwrap_err().to_string();
        assert!(e.contains("otlp or pyroscope"), "{e}");
        let e = Config::parse("start,loop=0").unwrap_err().to_string();
        assert!(e.contains("at least 1s"), "{e}");
        let e = Config::parse("start,loop=1s,format=otlp,upload=http://admin:PASSW0RD@host:4318/x").unwrap_err().to_string();
        assert!(!e.contains("PASSW0RD") && !e.contains("admin") && e.contains("credentials in the URL"), "{e}");
        assert_eq!(without_userinfo("upload=https://u:p@h:1/a@b"), "upload=https://…@h:1/a@b");
        assert_eq!(without_userinfo("upload=http://h/p"), "upload=http://h/p");
    }

    #[test]
    fn trigger_options() {
        let c = Config::parse("ttsp").unwrap();
        assert!(c.ttsp && c.start);
        assert_eq!((c.cpu, c.interval_ns), (Some(Event::Cpu), DEFAULT_TTSP_INTERVAL_NS));
        assert_eq!(Config::parse("ttsp,interval=5ms").unwrap().interval_ns, 5_000_000);
        let c = Config::parse("event=cpu,begin=my_begin,end=_ZN3Foo3endEv").unwrap();
        assert_eq!((c.begin.as_deref(), c.end.as_deref()), (Some("my_begin"), Some("_ZN3Foo3endEv")));
        let e = Config::parse("ttsp,begin=f").unwrap_err().to_string();
        assert!(e.contains("'ttsp'") && e.contains("either ttsp or begin"), "{e}");
        let e = Config::parse("event=cpu,begin=my_begin").unwrap_err().to_string();
        assert!(e.contains("'begin'") && e.contains("needs end=FUNC"), "{e}");
        let e = Config::parse("end=my_end").unwrap_err().to_string();
        assert!(e.contains("'end'") && e.contains("needs begin=FUNC"), "{e}");
        let e = Config::parse("begin=").unwrap_err().to_string();
        assert!(e.contains("'begin' needs a value") && e.contains("native function"), "{e}");
        // Triggers gate CPU samples, so they ask for CPU beside other events.
        let c = Config::parse("event=alloc,ttsp").unwrap();
        assert_eq!((c.cpu, c.alloc.is_some()), (Some(Event::Cpu), true));
        assert_eq!(Config::parse("event=wall,begin=b,end=f").unwrap().cpu, Some(Event::Cpu));
        assert_eq!(Config::parse("event=itimer,wall=50ms,begin=b,end=f").unwrap().cpu, Some(Event::Itimer));
    }

    #[test]
    fn lock_options() {
        let c = Config::parse("event=lock").unwrap();
        assert_eq!((c.cpu, c.lock), (None, Some(DEFAULT_LOCK_INTERVAL_NS)));
        assert_eq!(Config::parse("event=lock,lock=0").unwrap().lock, Some(0));
        assert_eq!(Config::parse("lock=250us").unwrap().lock, Some(250_000));
        assert_eq!(Config::parse("event=lock,interval=5ms").unwrap().lock, Some(5_000_000));
        let c = Config::parse("event=cpu,wall=50ms,lock=1ms").unwrap();
        assert_eq!((c.cpu, c.wall, c.lock), (Some(Event::Cpu), Some(50_000_000), Some(1_000_000)));
        let e = Config::parse("lock=abc").unwrap_err().to_string();
        assert!(e.contains("'lock=abc'") && e.contains("mean waiting time"), "{e}");
    }

    #[test]
    fn allocation_options() {
        let c = Config::parse("event=alloc").unwrap();
        assert_eq!((c.cpu, c.alloc), (None, Some(DEFAULT_ALLOC_INTERVAL)));
        let c = Config::parse("start,event=cpu,alloc=256k").unwrap();
        assert_eq!((c.cpu, c.alloc), (Some(Event::Cpu), Some(256 * 1024)));
        let c = Config::parse("alloc=0").unwrap();
        assert_eq!((c.cpu, c.alloc, c.start), (None, Some(0), true));
        assert!(!Config::parse("event=alloc").unwrap().alloc_interval_given);
        assert!(!Config::parse("start,alloc").unwrap().alloc_interval_given);
        let c = Config::parse("alloc=1m,event=alloc").unwrap();
        assert_eq!((c.alloc, c.alloc_interval_given), (Some(1 << 20), true));
        let c = Config::parse("event=alloc,alloc=1m,alloc_threads=worker-*").unwrap();
        assert_eq!((c.alloc, c.alloc_threads.as_deref()), (Some(1 << 20), Some("worker-*")));
        assert_eq!(Config::parse("start").unwrap().cpu, Some(Event::Cpu));
        for bad in ["alloc=-1", "alloc=lots", "alloc=1.5m"] {
            let e = Config::parse(bad).unwrap_err();
            assert!(e.to_string().starts_with(&format!("invalid agent option '{bad}'")), "{e}");
            assert!(e.to_string().contains("e.g. 512k"), "{e}");
        }
        assert!(Config::parse("start,alloc_threads=x").is_err());
    }

    #[test]
    fn live_options() {
        let c = Config::parse("event=alloc,live").unwrap();
        assert!(c.live.enabled && c.live.force_gc);
        assert_eq!((c.live.budget, c.live.gc_roots_ns), (DEFAULT_LIVE_BUDGET, None));
        let c = Config::parse("alloc=64k,live,livemem=1m,nogc,gcroots").unwrap();
        assert_eq!((c.live.budget, c.live.force_gc, c.live.gc_roots_ns), (1 << 20, false, Some(DEFAULT_GC_ROOTS_NS)));
        let c = Config::parse("event=alloc,live,live_gc=no,gcroots=2s,format=leaks").unwrap();
        assert_eq!((c.live.force_gc, c.live.gc_roots_ns, c.live.report_format), (false, Some(2_000_000_000), true));
        // A command may carry nogc/gcroots for its dump.
        assert!(Config::parse("dump,nogc,gcroots=1s").is_ok());
        for (bad, expected) in [
            ("start,event=cpu,live", "invalid agent option 'live': live needs allocation sampling"),
            ("event=alloc,nogc", "invalid agent option 'live': livemem, nogc"),
            ("event=alloc,live,livemem=lots", "invalid agent option 'livemem=lots': 'lots' is not a size"),
            ("event=alloc,live,livemem=1k", "invalid agent option 'livemem=1k': livemem must be at least 64k"),
            ("event=alloc,live,gcroots=soon", "invalid agent option 'gcroots=soon': 'soon' is not a duration"),
            ("event=alloc,live=maybe", "invalid agent option 'live=maybe'"),
            ("event=alloc,format=leaks", "invalid agent option 'live': livemem, nogc, live_gc, gcroots and format=leaks need live"),
        ] {
            let e = Config::parse(bad).unwrap_err().to_string();
            assert!(e.starts_with(expected), "{bad}: {e}");
            assert!(!e.contains('\n'), "{e}");
        }
    }

    #[test]
    fn loop_options() {
        let c = Config::parse("event=cpu,alloc,live,loop=60s,file=/var/log/app/%p-%t.jfr,keep=48").unwrap();
        assert_eq!((c.loop_ns, c.keep, c.start), (Some(60_000_000_000), Some(48), true));
        // No forced GC per interval unless asked for.
        assert!(!c.live.force_gc);
        assert!(Config::parse("alloc,live,loop=1m,live_gc=yes").unwrap().live.force_gc);
        assert_eq!(Config::parse("loop=5m").unwrap().loop_ns, Some(300_000_000_000));
        assert_eq!(Config::parse("loop=10").unwrap().loop_ns, Some(10_000_000_000));
        for (bad, expected) in [
            ("loop=500ms", "invalid agent option 'loop=500ms': the loop interval must be at least 1s"),
            ("loop=often", "invalid agent option 'loop=often': 'often' is not a duration"),
            ("loop=", "invalid agent option 'loop=': 'loop' needs a value"),
            ("loop=1m,keep=0", "invalid agent option 'keep=0': keep=N is the number of interval files kept"),
            ("start,keep=3", "invalid agent option 'keep': keep=N needs continuous profiling"),
            ("keep=3", "invalid agent option 'keep': keep=N needs continuous profiling"),
        ] {
            let e = Config::parse(bad).unwrap_err().to_string();
            assert!(e.starts_with(expected), "{bad}: {e}");
        }
    }

    #[test]
    fn commands() {
        let c = Config::parse("stop,file=/tmp/x.html,reply=/tmp/r").unwrap();
        assert_eq!((c.command, c.start), (Some(Command::Stop), false));
        assert_eq!(c.reply.as_deref(), Some(std::path::Path::new("/tmp/r")));
        assert_eq!(Config::parse("dump").unwrap().command, Some(Command::Dump));
        assert_eq!(Config::parse("status").unwrap().command, Some(Command::Status));
        assert!(Config::parse("stop,dump").is_err());
        assert!(Config::parse("start,stop").is_err());
    }

    #[test]
    fn native_stack_modes() {
        assert_eq!(Config::parse("").unwrap().cstack, CStack::Fp);
        assert_eq!(Config::parse("start,cstack=no").unwrap().cstack, CStack::No);
        assert_eq!(Config::parse("start,cstack=fp").unwrap().cstack, CStack::Fp);
        assert_eq!(Config::parse("start,cstack=dwarf").unwrap().cstack, CStack::Dwarf);
        let e = Config::parse("start,cstack=lbr").unwrap_err().to_string();
        assert_eq!(e, "invalid agent option 'cstack=lbr': cstack=lbr is not supported by oxprof; accepted: fp, dwarf, no");
        let e = Config::parse("cstack=deep").unwrap_err().to_string();
        assert!(e.contains("unknown native stack mode 'deep'; accepted: fp, dwarf, no"), "{e}");
        assert!(Config::parse("cstack=").is_err());
    }

    /// Fuzzing finding (agent_options): a newline in an option made its
    /// error two lines, splitting the `error:` line of the reply file.
    #[test]
    fn errors_with_control_characters_stay_one_line() {
        let e = Config::parse("st\ntctimerp/s,dump,jfr").unwrap_err().to_string();
        assert!(e.starts_with("invalid agent option 'st\\ntctimerp/s': unknown option 'st\\ntctimerp/s'"), "{e}");
        let e = Config::parse("event=\u{1b}[2J\rx").unwrap_err().to_string();
        assert!(e.contains("unknown event '\\u{1b}[2J\\rx'"), "{e}");
        assert!(!e.chars().any(char::is_control), "{e}");
    }

    #[test]
    fn a_name_without_a_known_extension_needs_a_format() {
        for file in ["prof.jfrr", "profile", "out/x.weird"] {
            let e = Config::parse(&format!("start,file={file}")).unwrap_err().to_string();
            assert!(e.contains("'file'") && e.contains(&format!("cannot tell the format from '{file}'")) && e.contains(".jfr"), "{e}");
        }
        assert_eq!(Config::parse("start,file=profile,format=jfr").unwrap().output_format(), OutputFormat::Jfr);
        assert_eq!(Config::parse("start,file=x.weird,collapsed").unwrap().output_format(), OutputFormat::Collapsed);
        assert!(Config::parse("start,event=alloc,live,file=leaks.report,format=leaks").is_ok());
        assert_eq!(Config::parse("start,file=/var/log/%p-%t.JFR").unwrap().output_format(), OutputFormat::Jfr);
    }

    #[test]
    fn explicit_format_beats_extension() {
        let c = Config::parse("file=out.txt,flamegraph").unwrap();
        assert_eq!(c.output_format(), OutputFormat::FlameGraph);
    }

    #[test]
    fn errors_name_option_and_accepted_values() {
        let e = Config::parse("start,bogus=1").unwrap_err();
        assert_eq!(e.option, "bogus=1");
        assert!(e.to_string().contains("accepted"), "{e}");
        let e = Config::parse("event=bogus").unwrap_err();
        assert!(e.to_string().contains("cpu, itimer, ctimer, alloc, wall, lock"), "{e}");
        let e = Config::parse("interval=-5").unwrap_err();
        assert!(e.to_string().contains("interval=-5"), "{e}");
        let e = Config::parse("interval=50us").unwrap_err().to_string();
        assert!(e.contains("'interval=50us'") && e.contains("at least 100us"), "{e}");
        assert_eq!(Config::parse("interval=100us").unwrap().interval_ns, 100_000);
        // A lock-only recording's interval is a waiting time: no CPU bound.
        assert_eq!(Config::parse("event=lock,interval=20us").unwrap().lock, Some(20_000));
        assert!(Config::parse("jstackdepth=0").is_err());
        assert!(Config::parse("file=").is_err());
        assert!(Config::parse("format=pdf").is_err());
        assert!(Config::parse("event=cpu").is_ok());
    }

    /// The user sweep's findings about option messages (each one line,
    /// naming the option and what is accepted).
    #[test]
    fn sweep_messages_name_the_option_and_what_is_accepted() {
        let e = |o: &str| Config::parse(o).unwrap_err().to_string();
        // Words that take no value.
        for (o, key) in [("samples=1", "samples"), ("total=yes", "total"), ("cpu=1", "cpu"), ("start=no", "start"), ("jfr=1", "jfr"), ("nogc=1", "nogc")] {
            let m = e(o);
            assert!(m.contains(&format!("'{key}' takes no value")) && !m.contains("unknown option"), "{o}: {m}");
        }
        let m = e("threads=x");
        assert!(m.contains("'threads' takes no value, or true/false"), "{m}");
        // Exact bounds, and whose they are.
        let m = e("alloc=2g");
        assert!(m.contains("'2g' is too large") && m.contains("at most 2147483647 bytes (2g less one byte)"), "{m}");
        assert_eq!(Config::parse("alloc=2147483647").unwrap().alloc, Some(2147483647));
        let m = e("event=alloc,live,livemem=4g");
        assert!(m.contains("'4g' is too large") && m.contains("oxprof's budget") && !m.contains("JVM"), "{m}");
        let m = e("alloc=99999999999999999999");
        assert!(m.contains("too large") && !m.contains("not a size"), "{m}");
        let m = e("interval=99999999999999999999ms");
        assert!(m.starts_with("invalid agent option 'interval=99999999999999999999ms'") && m.contains("too large"), "{m}");
        // Upper bound of CPU and wall intervals.
        let m = e("interval=999999999s");
        assert!(m.starts_with("invalid agent option 'interval=999999999s'") && m.contains("at most 60s"), "{m}");
        let m = e("event=wall,interval=999999999s");
        assert!(m.starts_with("invalid agent option 'interval=999999999s'") && m.contains("wall-clock interval") && m.contains("at most 60s"), "{m}");
        assert!(e("wall=61s").contains("at most 60s"));
        assert_eq!(Config::parse("interval=60s").unwrap().interval_ns, 60_000_000_000);
        assert!(!e("interval=61s").contains('\n'));
        // Lock waiting times are not CPU intervals: no bound but overflow.
        assert_eq!(Config::parse("event=lock,interval=120s").unwrap().lock, Some(120_000_000_000));
        // Any zero duration is zero.
        for z in ["lock=0", "lock=0ms", "lock=0s", "lock=0us", "lock=0.0ms"] {
            assert_eq!(Config::parse(z).unwrap().lock, Some(0), "{z}");
        }
        // Option words in any case; paths as given.
        let c = Config::parse("event=CPU,cstack=FP,format=HTML,Interval=5MS,file=/tmp/Mixed.Case").unwrap();
        assert_eq!((c.cpu, c.cstack, c.output_format(), c.interval_ns), (Some(Event::Cpu), CStack::Fp, OutputFormat::FlameGraph, 5_000_000));
        assert_eq!(c.file.as_deref(), Some(std::path::Path::new("/tmp/Mixed.Case")));
        assert!(Config::parse("START,THREADS=TRUE").unwrap().threads);
        assert_eq!(Config::parse("event=Wall").unwrap().wall, Some(DEFAULT_WALL_INTERVAL_NS));
        // Paths.
        let dir = std::env::temp_dir();
        let m = e(&format!("start,file={}", dir.display()));
        assert!(m.contains("is a directory") && !m.contains("cannot tell the format"), "{m}");
        let m = e("start,file=dir.html/");
        assert!(m.contains("dir.html is a directory") && m.contains("dir.html/profile.html") && !m.contains("//"), "{m}");
        let m = e("start,file=/tmp/a,b.html");
        assert!(m.contains("unknown option 'b.html'") && m.contains("commas separate options"), "{m}");
        // A misspelled key gets a suggestion; something far from any, none.
        let m = e("intervl=10ms");
        assert!(m.contains("did you mean 'interval'?"), "{m}");
        assert!(e("evnt=cpu").contains("did you mean 'event'?"));
        assert!(!e("zzzzzzzz=1").contains("did you mean"));
        for o in ["samples=1", "alloc=2g", "start,file=/tmp/a,b.html", "intervl=10ms"] {
            assert!(!e(o).contains('\n'), "{o}");
        }
    }

    #[test]
    fn percent_sequences_in_file_names() {
        let pid = std::process::id().to_string();
        let c = Config::parse("start,file=/tmp/prof-%p.html").unwrap();
        assert_eq!(c.file.unwrap(), PathBuf::from(format!("/tmp/prof-{pid}.html")));
        let c = Config::parse("stop,file=/tmp/x-%p-%t-100%%.collapsed").unwrap();
        let name = c.file.unwrap().to_string_lossy().into_owned();
        let rest = name.strip_prefix(&format!("/tmp/x-{pid}-")).unwrap_or_else(|| panic!("{name}"));
        let stamp = rest.strip_suffix("-100%.collapsed").unwrap_or_else(|| panic!("{name}"));
        assert!(stamp.len() == 15 && stamp.as_bytes()[8] == b'-' && stamp.chars().filter(char::is_ascii_digit).count() == 14, "{name}");
        // Under loop=, the pattern stays for each interval to expand.
        assert_eq!(Config::parse("loop=2s,file=l-%p-%n.jfr").unwrap().file.unwrap(), PathBuf::from("l-%p-%n.jfr"));
        for o in ["loop=2s,file=l-%x.jfr", "start,file=a-%x.html", "start,file=a-%.html", "start,file=a.html%"] {
            let m = Config::parse(o).unwrap_err().to_string();
            assert!(m.starts_with("invalid agent option 'file=") && m.contains("%p") && m.contains("%t") && m.contains("%n") && m.contains("%%"), "{o}: {m}");
        }
        let m = Config::parse("start,file=a-%n.html").unwrap_err().to_string();
        assert!(m.contains("'file=a-%n.html'") && m.contains("loop="), "{m}");
        assert!(numbers_intervals(std::path::Path::new("/tmp/a-%n.html")));
        assert!(!numbers_intervals(std::path::Path::new("/tmp/a-%%n.html")));
        assert!(!numbers_intervals(std::path::Path::new("/tmp/a-%p-%t.html")));
        // A command's %n is kept for the command to check (commands.rs):
        // only a running loop can number it.
        assert_eq!(Config::parse("dump,file=a-%n.html").unwrap().file, Some(PathBuf::from("a-%n.html")));
    }
}

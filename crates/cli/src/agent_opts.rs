//! Pieces shared by the subcommands that build agent option strings
//! (`record`, `attach`): value parsers for clap, the comma check, and the
//! options that choose what to sample.

use std::path::{Path, PathBuf};

use clap::Args;
use oxprof_profile::units::{parse_duration_ns, parse_size_bytes, parse_wall_duration_ns};

/// clap parser: a sampling interval such as `10ms` (kept as written).
pub fn parse_interval(s: &str) -> Result<String, String> {
    parse_duration_ns(s).map(|_| s.to_string())
}

/// The shortest CPU or wall-clock interval the agent takes.
const MIN_SAMPLING_INTERVAL_NS: u64 = 100_000;

/// `--interval` is a sampling interval unless the event is `lock` (then it
/// is the mean waiting time per sample, which may be shorter): refuses one
/// under 100us here, before a JVM is started or attached to, as the agent
/// would.
pub fn check_interval(interval: Option<&str>, event: Option<&str>) -> Result<(), String> {
    let Some(i) = interval else { return Ok(()) };
    if event == Some("lock") || parse_duration_ns(i)? >= MIN_SAMPLING_INTERVAL_NS {
        return Ok(());
    }
    Err(format!(
        "--interval {i}: the sampling interval must be at least 100us (shorter, threads spend their time in the signal handler and system calls such as clone() can be restarted forever)"
    ))
}

/// clap parser: a size such as `512k` (kept as written).
pub fn parse_size(s: &str) -> Result<String, String> {
    parse_size_bytes(s).map(|_| s.to_string())
}

/// clap parser for `--alloc [SIZE]`: an empty value (the flag without SIZE)
/// is kept empty and becomes a bare `alloc`, so the agent picks the interval
/// (the last one used in that JVM, else 512 KiB).
pub fn parse_optional_size(s: &str) -> Result<String, String> {
    if s.is_empty() {
        Ok(String::new())
    } else {
        parse_size(s)
    }
}

/// clap parser for `--wall [INTERVAL]`: empty (the flag alone) keeps the
/// agent's default (50 ms); an interval must be at least 100 us, as the agent
/// requires.
pub fn parse_wall_interval(s: &str) -> Result<String, String> {
    if s.is_empty() {
        return Ok(String::new());
    }
    let ns = parse_duration_ns(s)?;
    if ns < 100_000 {
        return Err(format!("'{s}': the wall-clock interval must be at least 100us"));
    }
    Ok(s.to_string())
}

/// clap parser for `--lock [DURATION]`: empty (the flag alone) keeps the
/// agent's default (1 ms of waiting between samples); `0` records every
/// contended acquisition.
pub fn parse_lock_interval(s: &str) -> Result<String, String> {
    if s.is_empty() || s.trim() == "0" {
        return Ok(s.trim().to_string());
    }
    parse_duration_ns(s).map(|_| s.to_string())
}

/// clap parser: a wall-clock duration such as `30s` (kept as written).
pub fn parse_wall(s: &str) -> Result<String, String> {
    parse_wall_duration_ns(s).map(|_| s.to_string())
}

/// Agent options are comma-separated, so values must not contain commas.
pub fn no_comma(what: &str, value: &str) -> Result<(), String> {
    if value.contains(',') {
        Err(format!("the {what} must not contain a comma ('{value}'): agent options are comma-separated"))
    } else {
        Ok(())
    }
}

/// A path made absolute against our working directory.
pub fn absolute(p: &Path) -> PathBuf {
    if p.is_absolute() {
        p.to_path_buf()
    } else {
        std::env::current_dir().map(|d| d.join(p)).unwrap_or_else(|_| p.to_path_buf())
    }
}

/// `start` and what to sample: the event (`cpu` unless only allocations or
/// wall-clock time were asked for), the allocation interval and thread
/// pattern, the wall-clock interval.
pub fn start_options(
    event: Option<&str>,
    alloc: Option<&str>,
    alloc_threads: Option<&str>,
    wall: Option<&str>,
    lock: Option<&str>,
) -> Result<Vec<String>, String> {
    let mut opts = vec!["start".to_string()];
    match (event, alloc, wall, lock) {
        (Some(e), _, _, _) => opts.push(format!("event={e}")),
        (None, None, None, None) => opts.push("event=cpu".into()),
        (None, _, _, _) => {}
    }
    match lock {
        Some("") => opts.push("lock".into()),
        Some(d) => opts.push(format!("lock={d}")),
        None => {}
    }
    match wall {
        Some("") => opts.push("wall".into()),
        Some(interval) => opts.push(format!("wall={interval}")),
        None => {}
    }
    match alloc {
        Some("") => opts.push("alloc".into()),
        Some(size) => opts.push(format!("alloc={size}")),
        None => {}
    }
    if let Some(glob) = alloc_threads {
        no_comma("thread pattern", glob)?;
        opts.push(format!("alloc_threads={glob}"));
    }
    Ok(opts)
}

/// What to sample, shared by `record` and `attach`: the CPU event, the
/// allocation interval and thread pattern, and the live-object options.
#[derive(Args, Debug, Clone, Default)]
pub struct SampleArgs {
    /// What to sample: cpu (perf_events, falls back to ctimer), itimer,
    /// ctimer, wall (every thread, on or off the CPU, at --interval, default
    /// 50ms) or lock (waits for contended locks, one sample per --interval
    /// of waiting, default 1ms) [default: cpu, unless only --alloc, --wall
    /// or --lock is given without --interval; with --interval, --wall and
    /// --lock keep their own intervals and CPU is sampled at --interval]
    #[arg(short, long, value_parser = ["cpu", "itimer", "ctimer", "wall", "lock"])]
    pub event: Option<String>,
    /// Also profile lock contention: monitors and java.util.concurrent locks,
    /// one sample per DURATION of waiting on average (without DURATION: 1ms;
    /// 0 = every contended acquisition)
    #[arg(long, value_name = "DURATION", num_args = 0..=1, default_missing_value = "", value_parser = parse_lock_interval)]
    pub lock: Option<String>,
    /// Also sample wall-clock time: every Java thread, whatever it is doing,
    /// every INTERVAL (without INTERVAL: 50ms; at least 100us)
    #[arg(long, value_name = "INTERVAL", num_args = 0..=1, default_missing_value = "", value_parser = parse_wall_interval)]
    pub wall: Option<String>,
    /// Put each CPU or wall sample's thread state (running, sleeping,
    /// waiting, parked, blocked, native, vm) at the root of its stack
    #[arg(long)]
    pub state: bool,
    /// Also sample allocations (JEP 331), every SIZE bytes on average
    /// (without SIZE: the interval last used in that JVM, else 512k; 0 =
    /// every allocation)
    #[arg(long, value_name = "SIZE", num_args = 0..=1, default_missing_value = "", value_parser = parse_optional_size)]
    pub alloc: Option<String>,
    /// Time-to-safepoint profiling: keep CPU samples only while the JVM is
    /// bringing threads to a safepoint (they name the code that delays
    /// it), and record every safepoint [interval default: 1ms]
    #[arg(long, conflicts_with_all = ["begin", "end"])]
    pub ttsp: bool,
    /// Keep CPU samples only after the JVM enters this native function
    /// (C++ name as `nm -C` prints it, with or without parameters, or the
    /// symbol), until it enters --end's
    #[arg(long, value_name = "FUNCTION")]
    pub begin: Option<String>,
    /// Stop keeping CPU samples when the JVM enters this native function
    #[arg(long, value_name = "FUNCTION")]
    pub end: Option<String>,
    /// Sample allocations only on threads whose name matches this pattern (* and ?)
    #[arg(long, value_name = "GLOB", requires = "alloc")]
    pub alloc_threads: Option<String>,
    /// Continuous profiling: cut the recording into intervals of DURATION
    /// (at least 1s), each written to a file of its own; in the output
    /// name %p is the process id, %t the interval's start time, %n its
    /// number (-%n is added when the name has neither)
    #[arg(long = "loop", value_name = "DURATION", value_parser = parse_loop)]
    pub loop_every: Option<String>,
    /// With --loop: keep only the last N interval files
    #[arg(long, value_name = "N", requires = "loop_every", value_parser = clap::value_parser!(u32).range(1..))]
    pub keep: Option<u32>,
    /// With --loop: push each interval to a profile store at URL (an
    /// OpenTelemetry collector or Grafana Pyroscope, see --store), from a
    /// thread of the agent's own
    #[arg(long, value_name = "URL", requires_all = ["loop_every", "store"])]
    pub upload: Option<String>,
    /// The kind of store --upload names
    #[arg(long, value_name = "KIND", value_parser = ["otlp", "pyroscope"], requires = "upload")]
    pub store: Option<String>,
    /// The service name the store files profiles under [default: the main class]
    #[arg(long, value_name = "NAME", requires = "upload")]
    pub service: Option<String>,
    /// Labels for the store: NAME=VALUE;NAME=VALUE
    #[arg(long, value_name = "LABELS", requires = "upload")]
    pub labels: Option<String>,
    /// Where the store's credential is read: env:VARIABLE or file:PATH
    /// (Bearer TOKEN, Basic user:password or a bare token); never logged
    #[arg(long, value_name = "SOURCE", requires = "upload")]
    pub auth: Option<String>,
    #[command(flatten)]
    pub live: LiveArgs,
}

fn parse_loop(s: &str) -> Result<String, String> {
    let ns = oxprof_profile::units::parse_wall_duration_ns(s)?;
    if ns < 1_000_000_000 {
        return Err("the loop interval must be at least 1s".into());
    }
    no_comma("loop interval", s)?;
    Ok(s.to_string())
}

impl SampleArgs {
    /// `start` and the agent options for what to sample.
    pub fn start_options(&self) -> Result<Vec<String>, String> {
        let mut opts = start_options(
            self.event.as_deref(),
            self.live.alloc(self.alloc.as_deref()),
            self.alloc_threads.as_deref(),
            self.wall.as_deref(),
            self.lock.as_deref(),
        )?;
        if self.state {
            opts.push("state".into());
        }
        if self.ttsp {
            opts.push("ttsp".into());
        }
        for (key, f) in [("begin", &self.begin), ("end", &self.end)] {
            if let Some(f) = f {
                no_comma(&format!("--{key} function"), f)?;
                opts.push(format!("{key}={f}"));
            }
        }
        if let Some(every) = &self.loop_every {
            opts.push(format!("loop={every}"));
        }
        if let Some(n) = self.keep {
            opts.push(format!("keep={n}"));
        }
        for (key, v) in [("upload", &self.upload), ("format", &self.store), ("service", &self.service), ("labels", &self.labels), ("auth", &self.auth)] {
            if let Some(v) = v {
                no_comma(&format!("--{} value", if key == "format" { "store" } else { key }), v)?;
                opts.push(format!("{key}={v}"));
            }
        }
        opts.extend(self.live.start_options()?);
        Ok(opts)
    }
}

/// Live-object and leak options, shared by `record` and `attach`.
#[derive(Args, Debug, Clone, Default)]
pub struct LiveArgs {
    /// Track sampled objects until they die: leak report for .txt, live
    /// flame graph for .html/.collapsed (implies --alloc 512k unless given)
    #[arg(long)]
    pub live: bool,
    /// Memory budget for tracked objects; beyond it the tracked set is
    /// thinned without bias [default: 16m]
    #[arg(long, value_name = "SIZE", value_parser = parse_size)]
    pub live_budget: Option<String>,
    /// Do not force a full GC before the live report (it may then count garbage)
    #[arg(long)]
    pub no_gc: bool,
    /// Find paths from GC roots to the top leak suspects, within DURATION
    /// (the JVM is paused meanwhile) [default: 5s when given without a value]
    #[arg(long, value_name = "DURATION", num_args = 0..=1, default_missing_value = "5s", value_parser = parse_wall)]
    pub gc_roots: Option<String>,
}

impl LiveArgs {
    /// The allocation interval to use: the one given, or the default when
    /// only --live was given.
    pub fn alloc<'a>(&self, alloc: Option<&'a str>) -> Option<&'a str> {
        alloc.or(if self.live { Some("512k") } else { None })
    }

    /// Agent options for starting a recording.
    pub fn start_options(&self) -> Result<Vec<String>, String> {
        if !self.live && (self.live_budget.is_some() || self.no_gc || self.gc_roots.is_some()) {
            return Err("--live-budget, --no-gc and --gc-roots need --live".into());
        }
        let mut o = Vec::new();
        if self.live {
            o.push("live".to_string());
        }
        if let Some(b) = &self.live_budget {
            o.push(format!("livemem={b}"));
        }
        o.extend(self.report_options());
        Ok(o)
    }

    /// Agent options that shape a live report (also for `dump`/`stop`).
    pub fn report_options(&self) -> Vec<String> {
        let mut o = Vec::new();
        if self.no_gc {
            o.push("nogc".to_string());
        }
        if let Some(d) = &self.gc_roots {
            o.push(format!("gcroots={d}"));
        }
        o
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct T {
        #[command(flatten)]
        live: LiveArgs,
    }

    fn parse(args: &[&str]) -> Result<LiveArgs, String> {
        let mut v = vec!["t"];
        v.extend_from_slice(args);
        T::try_parse_from(v).map(|t| t.live).map_err(|e| e.to_string())
    }

    #[test]
    fn live_flags() {
        let l = parse(&["--live", "--live-budget", "4m", "--no-gc", "--gc-roots"]).unwrap();
        assert_eq!(l.start_options().unwrap(), ["live", "livemem=4m", "nogc", "gcroots=5s"]);
        assert_eq!(l.alloc(None), Some("512k"));
        assert_eq!(l.alloc(Some("64k")), Some("64k"));
        let l = parse(&["--live", "--gc-roots", "2s"]).unwrap();
        assert_eq!(l.start_options().unwrap(), ["live", "gcroots=2s"]);
        assert!(parse(&["--live-budget", "lots"]).unwrap_err().contains("'lots' is not a size"));
        assert!(parse(&["--gc-roots", "soon"]).unwrap_err().contains("'soon' is not a duration"));
        assert!(parse(&["--no-gc"]).unwrap().start_options().unwrap_err().contains("need --live"));
        assert_eq!(parse(&[]).unwrap().alloc(None), None);
    }
}

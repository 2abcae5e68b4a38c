//! Pieces shared by the subcommands that build agent option strings
//! (`record`, `attach`): value parsers for clap, the comma check, and the
//! options that choose what to sample.

use std::path::{Path, PathBuf};

use clap::Args;
use oxprof_profile::units::{parse_duration_ns, parse_size_bytes, parse_wall_duration_ns};

/// clap parser: a sampling interval such as `10ms` (kept as written).
pub fn parse_interval(s: &str) -> Result<String, String> {
    // `0` is `--event lock`'s "every contended acquisition"; for the
    // sampling events `check_interval` refuses it once the event is known.
    if s.trim() == "0" {
        return Ok("0".to_string());
    }
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
    if event == Some("lock") || (i != "0" && parse_duration_ns(i)? >= MIN_SAMPLING_INTERVAL_NS) {
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

/// The smallest live-object budget the agent takes.
const MIN_LIVE_BUDGET: u64 = 64 * 1024;

/// clap parser for `--live-budget`: a size of at least 64k, as the agent requires.
fn parse_live_budget(s: &str) -> Result<String, String> {
    if parse_size_bytes(s)? < MIN_LIVE_BUDGET {
        return Err(format!("'{s}': the live-object budget must be at least 64k (e.g. 16m)"));
    }
    Ok(s.to_string())
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

/// The output extensions the agent tells a format from.
const OUTPUT_NAMES: &str = ".html, .collapsed, .jfr, .pb.gz or .otlp.pb (also .folded, .txt, .pprof, .pb, .otlp)";

/// Refuses an output name whose format the agent could not tell (`-o
/// x.weird` without `--format`), before a JVM is started or attached to.
/// Raw agent options that name a format leave the choice to them.
pub fn check_output_name(output: &Path, format: Option<&str>, agent_opts: Option<&str>) -> Result<(), String> {
    let format_in_opts = agent_opts.is_some_and(|o| {
        o.split(',').map(str::trim).any(|item| {
            item.starts_with("format=")
                || item.starts_with("file=")
                || ["collapsed", "folded", "flamegraph", "html", "pprof", "jfr", "otlp", "leaks"].contains(&item)
        })
    });
    if format.is_some() || format_in_opts || oxprof_profile::OutputFormat::from_path(output).is_some() {
        return Ok(());
    }
    if output.is_dir() {
        return Err(format!("-o {}: is a directory; name a file in it, e.g. -o {}", output.display(), output.join("profile.html").display()));
    }
    Err(format!(
        "-o {}: cannot tell the format from the name; end it in {OUTPUT_NAMES}, or give --format (flamegraph, collapsed, pprof, jfr, otlp, leaks)",
        output.display()
    ))
}

/// Refuses an output path whose directory does not exist, or that is a
/// directory, before a JVM is started or attached to.
pub fn check_output_dir(output: &Path) -> Result<(), String> {
    let parent = match output.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    if !parent.is_dir() {
        return Err(format!("-o {}: directory {} does not exist; create it or choose another -o", output.display(), parent.display()));
    }
    if output.is_dir() {
        return Err(format!("-o {}: that is a directory; give a file name such as {}", output.display(), output.join("profile.html").display()));
    }
    Ok(())
}

/// An agent's message in the CLI's words: the agent's option names become
/// the flags that set them (`file=` → `-o`, `livemem` → `--live-budget`...).
pub fn agent_words(message: &str) -> String {
    // The option item quoted first: "invalid agent option 'KEY=VALUE': ...".
    let mut text = message.to_string();
    if let Some(rest) = text.strip_prefix("invalid agent option '") {
        if let Some((item, problem)) = rest.split_once("': ") {
            let (key, value) = item.split_once('=').map_or((item, None), |(k, v)| (k, Some(v)));
            let flag = flag_of(key).map_or_else(|| format!("agent option {key}"), str::to_string);
            text = match value {
                Some(v) => format!("{flag} {v}: {problem}"),
                None => format!("{flag}: {problem}"),
            };
        }
    }
    // The option names in the explanation.
    let mut out = String::with_capacity(text.len());
    let mut rest = text.as_str();
    while let Some(i) = rest.find(|c: char| c.is_ascii_lowercase()) {
        out.push_str(&rest[..i]);
        let word_len = rest[i..].find(|c: char| !(c.is_ascii_lowercase() || c == '_' || c.is_ascii_digit())).unwrap_or(rest.len() - i);
        let word = &rest[i..i + word_len];
        let after = &rest[i + word_len..];
        let before_ok = !out.ends_with(|c: char| c.is_alphanumeric() || c == '-' || c == '.' || c == '/');
        // An option as the agent writes it: `livemem`, `file=`, `begin=FUNC`.
        // A placeholder value (FUNC, SIZE) is dropped; a real one kept.
        let (is_option, value) = match after.strip_prefix('=') {
            Some(v) => (true, &v[..v.find(|c: char| !(c.is_ascii_alphanumeric() || c == '_')).unwrap_or(v.len())]),
            None => (["livemem", "gcroots", "nogc", "alloc_threads", "jstackdepth"].contains(&word), ""),
        };
        match flag_of(word).filter(|_| before_ok && is_option) {
            Some(flag) => {
                out.push_str(flag);
                if value.chars().any(|c| c.is_ascii_lowercase() || c.is_ascii_digit()) {
                    out.push(' ');
                    out.push_str(value);
                }
                rest = &after[usize::from(!after.is_empty() && after.starts_with('=')) + value.len()..];
            }
            None => {
                out.push_str(word);
                rest = after;
            }
        }
    }
    out.push_str(rest);
    out
}

/// The CLI flag that sets an agent option.
fn flag_of(key: &str) -> Option<&'static str> {
    Some(match key {
        "file" => "-o",
        "format" => "--format",
        "livemem" => "--live-budget",
        "live" => "--live",
        "nogc" | "live_gc" => "--no-gc",
        "gcroots" => "--gc-roots",
        "begin" => "--begin",
        "end" => "--end",
        "ttsp" => "--ttsp",
        "interval" => "--interval",
        "event" => "--event",
        "alloc" => "--alloc",
        "alloc_threads" => "--alloc-threads",
        "wall" => "--wall",
        "lock" => "--lock",
        "loop" => "--loop",
        "keep" => "--keep",
        "upload" => "--upload",
        "threads" => "--threads",
        "cstack" => "--cstack",
        "jstackdepth" => "--jstackdepth",
        "title" => "--title",
        "total" => "--total",
        "state" => "--state",
        _ => return None,
    })
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
    #[arg(long, value_name = "FUNCTION", requires = "end")]
    pub begin: Option<String>,
    /// Stop keeping CPU samples when the JVM enters this native function
    #[arg(long, value_name = "FUNCTION", requires = "begin")]
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
    /// thinned without bias; at least 64k [default: 16m]
    #[arg(long, value_name = "SIZE", value_parser = parse_live_budget)]
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
    fn agent_messages_in_cli_words() {
        assert_eq!(agent_words("invalid agent option 'livemem=1k': livemem must be at least 64k"), "--live-budget 1k: --live-budget must be at least 64k");
        assert_eq!(
            agent_words("invalid agent option 'begin': begin=FUNC needs end=FUNC: samples are kept from a call of begin until the next call of end"),
            "--begin: --begin needs --end: samples are kept from a call of begin until the next call of end"
        );
        assert_eq!(
            agent_words("directory /nonexist does not exist; create it or choose another file="),
            "directory /nonexist does not exist; create it or choose another -o"
        );
        assert_eq!(agent_words("livemem, nogc and format=leaks need live"), "--live-budget, --no-gc and --format leaks need live");
        assert_eq!(agent_words("profile written to /tmp/a-file=x.html"), "profile written to /tmp/a-file=x.html");
    }

    #[test]
    fn output_names() {
        assert!(check_output_name(Path::new("x.weird"), None, None).unwrap_err().starts_with("-o x.weird: cannot tell the format"));
        assert!(check_output_name(Path::new("x.weird"), Some("pprof"), None).is_ok());
        assert!(check_output_name(Path::new("x.weird"), None, Some("ann,format=jfr")).is_ok());
        assert!(check_output_name(Path::new("x.pb.gz"), None, None).is_ok());
        assert!(check_output_dir(Path::new("/nonexistent-dir/x.html")).unwrap_err().contains("choose another -o"));
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
        let e = parse(&["--live", "--live-budget", "1k"]).unwrap_err();
        assert!(e.contains("--live-budget") && e.contains("at least 64k"), "{e}");
        assert_eq!(parse(&[]).unwrap().alloc(None), None);
    }
}

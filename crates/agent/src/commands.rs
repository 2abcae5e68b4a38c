//! Commands for a running agent: `start`, `stop`, `dump`, `status`, sent by
//! loading the agent again through the attach mechanism (`oxprof attach`).
//! Each returns text lines for the reply file the CLI reads; errors are
//! `Err` with one line.

use std::path::Path;

use crate::jvmti::Jni;
use crate::options::{Command, Config};
use crate::output;
use crate::source::Recording;
use crate::Agent;
use oxprof_profile::OutputFormat;

/// Runs the command in `config` and returns the reply lines.
pub fn run(agent: &'static Agent, config: Config, jni: Jni) -> Result<Vec<String>, String> {
    if config.start {
        return start(agent, config, jni);
    }
    if let Some(f) = config.file.as_deref().filter(|f| config.command.is_some() && crate::options::numbers_intervals(f)) {
        if !output::intervals::is_active() {
            return Err(format!(
                "invalid agent option 'file={}': %n numbers the files of continuous profiling, and no loop= runs; name the file with %p (the JVM's pid) or %t (the time)",
                f.display()
            ));
        }
    }
    match config.command {
        Some(Command::Start) => start(agent, config, jni),
        Some(Command::Stop) => {
            output::intervals::stop_thread();
            let rec = agent.profiler.stop(Some((agent.jvmti, jni))).ok_or("profiling is not running; start it first")?;
            let written = write_recording(agent, &rec, &config, jni, true);
            // Every output of the recording is written: no sample is left to
            // name a set, so the sets no thread holds can retire.
            recycle_label_sets();
            release_freed_memory();
            written.map(for_reply)
        }
        Some(Command::Dump) => {
            let written = agent.profiler.with_recording(|rec| match rec {
                Some(rec) => write_recording(agent, rec, &config, jni, false),
                None => Err("profiling is not running; nothing to dump".into()),
            });
            release_freed_memory();
            written.map(for_reply)
        }
        Some(Command::Status) => Ok(vec![agent.profiler.with_recording(status_line)]),
        None => Ok(vec!["oxprof agent loaded; profiling is not running".into()]),
    }
}

/// Starts a recording. The label sets the earlier recordings made and no
/// thread holds are given back first (they retired when the last one
/// stopped): without this, sets only ever accumulated across recordings
/// (`oxprof attach` sessions, `execute("start")`...`stop`), and once 4096
/// had been named in a JVM's life every new one was over the limit, in
/// every later recording.
fn start(agent: &'static Agent, config: Config, jni: Jni) -> Result<Vec<String>, String> {
    if agent.profiler.with_recording(|rec| rec.is_none()) {
        recycle_label_sets();
    }
    crate::start(agent, config, jni)
}

/// Between recordings, as at an interval's end (`crate::labels::recycle`):
/// ids in no slot retire at a stop and are freed at the next start if no
/// thread asked for them meanwhile (a thread that got an id just before
/// the stop has it in its slot by then).
fn recycle_label_sets() {
    if let Some((retired, freed)) = crate::labels::recycle(&crate::sampling::label_slots::in_use()) {
        crate::log::debug(&format!("label sets recycled between recordings: {retired} retiring, {freed} freed for new sets"));
    }
}

/// The lines of a command's reply: the files written named by absolute
/// paths (a relative one is relative to the JVM's working directory, not
/// the CLI's), and, before them, what went elsewhere than asked
/// (`output::warn_noted`: logged, but an attached JVM's log is quiet).
fn for_reply(lines: Vec<String>) -> Vec<String> {
    let notes = output::take_notes();
    let mut reply: Vec<String> = lines
        .into_iter()
        .map(|l| match l.strip_prefix("profile written to ") {
            Some(p) => format!("profile written to {}", absolute(Path::new(p)).display()),
            None => l,
        })
        .collect();
    let at = reply.iter().position(|l| l.starts_with("profile written to ")).unwrap_or(reply.len());
    reply.splice(at..at, notes.into_iter().map(|n| format!("warning: {n}")));
    reply
}

/// `path` made absolute against the working directory (left as it is if
/// that cannot be read).
fn absolute(path: &Path) -> std::path::PathBuf {
    if path.is_absolute() {
        return path.to_path_buf();
    }
    std::env::current_dir().map(|d| d.join(path.strip_prefix(".").unwrap_or(path))).unwrap_or_else(|_| path.to_path_buf())
}

/// One line saying what runs, since when, and how many samples.
fn status_line(rec: Option<&Recording>) -> String {
    // Idle, the agent's own heap is what it keeps between recordings.
    let Some(rec) = rec else { return format!("idle: profiling is not running; {}", crate::memory::describe()) };
    let mut parts: Vec<String> = rec.sources.iter().map(|s| s.status()).collect();
    if let Some(g) = &rec.gate {
        parts.push(g.status());
    }
    if let Some(l) = output::intervals::status() {
        parts.push(l);
    }
    let output = match rec.config.file.as_deref() {
        Some(p) => p.display().to_string(),
        None if output::intervals::is_upload_only() => "none: intervals are pushed to the store (no file= given)".to_string(),
        None => format!("{} in the JVM's working directory", crate::output::default_path(rec.config.output_format()).display()),
    };
    format!("running: {} for {:.1} s, output {output}; {}", parts.join(" + "), rec.started.elapsed().as_secs_f64(), crate::memory::describe())
}

/// Builds and writes a recording's profiles. A command's `file=`/format
/// overrides the one given at start. A JFR recording is flushed (`last` =
/// false, for dump) or finished (stop); a command naming another format
/// also gets that format, from the same samples.
pub fn write_recording(agent: &Agent, rec: &Recording, command: &Config, jni: Jni, last: bool) -> Result<Vec<String>, String> {
    let result = build_and_write(agent, rec, command, jni, if last { Cut::Last } else { Cut::Dump });
    if last {
        crate::native::symbols::forget_kernel_table();
        crate::native::symbols::keep_between_builds(false);
        crate::source::keep_frame_names(false);
        output::intervals::forget();
    }
    result
}

/// Continuous profiling (`loop=`): writes the interval that ends now to its
/// own file and starts the next (called by the interval thread).
pub fn write_interval(agent: &'static Agent, rec: &Recording, jni: Jni) -> Result<Vec<String>, String> {
    let mut result = build_and_write(agent, rec, &rec.config, jni, Cut::Interval);
    // Logged when they happened; no command waits for them.
    output::take_notes();
    // Names of classes that unloaded are not needed once no stored stack
    // names them. Looking through every stored stack for the methods still
    // sampled is a good part of a cut: forget them when the names doubled
    // since the last prune, or a minute has passed, not when tens of
    // thousands have piled up.
    if agent.symbols.keeps_early_names() && (PRUNE.due() || agent.symbols.needs_prune()) {
        PRUNE.done();
        let dropped = agent.symbols.prune(jni, &agent.profiler.sampled_methods());
        if dropped > 0 {
            crate::log::debug(&format!("forgot {dropped} method names of unloaded classes"));
        }
    }
    // Distinct stacks only accumulate: weeks of intervals need room.
    let emptied = agent.profiler.empty_full_stores(store_reset_fill(), || crate::output::jfr_stream::before_store_reset(agent, jni));
    let trim_due = emptied.is_some() || TRIM.due();
    if let Some(line) = emptied {
        crate::log::info(&line);
        if let Ok(lines) = result.as_mut() {
            lines.push(line);
        }
    }
    // Every store and log has been read: label-set ids no thread holds can
    // start retiring (per-request labels would fill the table otherwise).
    if let Some((retired, freed)) = crate::labels::recycle(&crate::sampling::label_slots::in_use()) {
        crate::log::debug(&format!("label sets recycled: {retired} retiring, {freed} freed for new sets"));
    }
    // Each interval's build frees about what the next one allocates again:
    // handing those pages back every interval only made the next build
    // fault them in (a third of an interval's CPU). Trim after stores were
    // emptied, and otherwise every few minutes.
    if trim_due {
        release_freed_memory();
        TRIM.done();
    }
    result
}

/// Work an interval's end does at most every so often (unless something
/// else asks for it sooner): when it was last done.
struct Periodic {
    every: std::time::Duration,
    last: std::sync::Mutex<Option<std::time::Instant>>,
}

impl Periodic {
    const fn every(secs: u64) -> Periodic {
        Periodic { every: std::time::Duration::from_secs(secs), last: std::sync::Mutex::new(None) }
    }

    /// Never done yet, or done at least `every` ago.
    fn due(&self) -> bool {
        self.last.lock().unwrap_or_else(|e| e.into_inner()).is_none_or(|t| t.elapsed() >= self.every)
    }

    fn done(&self) {
        *self.last.lock().unwrap_or_else(|e| e.into_inner()) = Some(std::time::Instant::now());
    }
}

/// Pruning the names of unloaded classes: at least each minute.
static PRUNE: Periodic = Periodic::every(60);
/// Handing freed memory back ([`release_freed_memory`]) when no store was
/// emptied: every 5 minutes.
static TRIM: Periodic = Periodic::every(300);

/// A sample store fuller than this at the end of an interval is emptied
/// (`Profiler::empty_full_stores`); `OXPROF_STORE_RESET_FILL` overrides it.
const STORE_RESET_FILL: f64 = 0.5;

fn store_reset_fill() -> f64 {
    std::env::var("OXPROF_STORE_RESET_FILL").ok().and_then(|v| v.parse().ok()).unwrap_or(STORE_RESET_FILL)
}

/// How long stop and JVM exit wait for the store to take what is queued.
const PUSH_DEADLINE_AT_STOP: std::time::Duration = std::time::Duration::from_secs(3);

/// Why profiles are written.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Cut {
    /// `dump`: what was recorded so far (in the interval so far with
    /// `loop=`); recording goes on.
    Dump,
    /// The end of an interval (`loop=`).
    Interval,
    /// `stop` or JVM exit.
    Last,
}

/// Hands the dump's freed memory back to the system (after a command, not
/// at JVM exit, where trimming would only cost time: each trimmed range
/// flushes the TLB of every CPU the JVM runs on). A dump's tables (the
/// kernel's symbols alone are ~8 MB) are freed when it ends, but glibc keeps
/// freed heap pages, so without this a JVM that is dumped now and then
/// would carry the largest dump's peak in its RSS for good.
fn release_freed_memory() {
    #[cfg(target_env = "gnu")]
    // SAFETY: malloc_trim only releases free pages of malloc's arenas; it
    // takes each arena's lock itself and is safe to call from any thread.
    unsafe {
        libc::malloc_trim(0);
    }
}

fn build_and_write(agent: &Agent, rec: &Recording, command: &Config, jni: Jni, cut: Cut) -> Result<Vec<String>, String> {
    let started = std::time::Instant::now();
    let mut out = rec.config.clone();
    if rec.config.live.enabled {
        out.live = crate::heap::live_report::effective(&rec.config.live, command);
    }
    let looping = output::intervals::is_active();
    let ends_interval = looping && cut != Cut::Dump;
    let ended_at = (std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_nanos() as u64).unwrap_or(0), std::time::Instant::now());
    rec.set_cut(Some(ended_at.1));
    let built = agent.profiler.build(rec, command, &agent.symbols, agent.vm_structs.as_ref(), agent.jvmti, jni, ends_interval);
    rec.set_cut(None);
    let interval = (rec.interval_start().0, ended_at.0);
    if ends_interval {
        rec.next_interval(ended_at.0, ended_at.1);
    }
    // Pushes the ended interval to the store (`upload=`), if any.
    let push = |lines: &mut Vec<String>, jfr_file: Option<&Path>| {
        if !ends_interval {
            return;
        }
        let profiles: Vec<(&str, &oxprof_profile::Profile)> = built.iter().map(|b| (b.key, &b.profile)).collect();
        let cpu_hz = rec.config.cpu.map(|_| 1_000_000_000 / rec.config.interval_ns.max(1));
        if let Some(line) = output::intervals::push(&profiles, jfr_file, interval.0, interval.1, cpu_hz) {
            crate::log::debug(&line);
        }
        if cut == Cut::Last {
            lines.extend(output::intervals::finish_push(PUSH_DEADLINE_AT_STOP));
        }
    };
    crate::log::debug(&format!("profiles built in {:.1} ms", started.elapsed().as_secs_f64() * 1e3));
    if command.file.is_some() {
        out.file = command.file.clone();
        out.format = command.format;
    } else if command.format.is_some() {
        out.format = command.format;
    }
    if command.counter != out.counter && command.counter != Config::default().counter {
        out.counter = command.counter;
    }
    // Each interval to its own file; a dump, to the interval's file so far.
    // (At an interval's end and at JVM exit the command's options are the
    // recording's own, whose `file=` is the pattern.) An interval's file
    // replaces only a file this recording wrote; a file the command names
    // is the user's choice.
    let interval_file = looping && (command.file.is_none() || command.file == rec.config.file);
    if interval_file {
        out.file = output::intervals::current_path().or(out.file);
    }
    let may_replace: output::files::MayReplace<'_> = if interval_file { &output::intervals::may_replace } else { &output::files::any_file };
    let mut lines: Vec<String> = built.iter().map(|b| b.summary_line.clone()).collect();
    if let Some(g) = &rec.gate {
        lines.push(g.summary_line());
    }
    let jfr = crate::output::jfr_stream::is_active();
    if jfr {
        if let Some(report) = built.iter().find_map(|b| b.leak.as_deref()) {
            crate::output::jfr_stream::live_sites(agent, report);
        }
        let mut finished = None;
        let streamed = match cut {
            Cut::Last => {
                let (lines, file) = crate::output::jfr_stream::finish(agent, jni);
                finished = file;
                lines
            }
            Cut::Dump => crate::output::jfr_stream::flush(agent, jni),
            Cut::Interval => match output::intervals::advance() {
                Some(next) => crate::output::jfr_stream::cut(agent, jni, &next).map(|(summary, ended)| {
                    output::intervals::written(std::slice::from_ref(&ended));
                    vec![summary, format!("profile written to {}", ended.path.display())]
                }),
                None => Err("continuous profiling is not running".into()),
            },
        };
        let jfr_file: Option<std::path::PathBuf> =
            streamed.as_ref().ok().and_then(|l| l.iter().find_map(|l| l.strip_prefix("profile written to "))).map(Into::into);
        if let (true, Some(_), Some(file)) = (looping, &jfr_file, &finished) {
            output::intervals::written(std::slice::from_ref(file));
        }
        if jfr_file.is_some() && out.output_format() == OutputFormat::Jfr {
            push(&mut lines, jfr_file.as_deref());
        }
        match streamed {
            Ok(l) => lines.extend(l),
            Err(e) if out.output_format() == OutputFormat::Jfr => {
                // The recording could not be written (disk full...): keep
                // the samples in a flame graph instead.
                crate::log::error(&e);
                let html = out.file.as_deref().unwrap_or(Path::new("profile.jfr")).with_extension("html");
                lines.push(format!("warning: {e}; writing the samples to {} instead", html.display()));
                out.file = Some(html);
                out.format = Some(OutputFormat::FlameGraph);
            }
            Err(e) => lines.push(format!("warning: {e}")),
        }
    }
    if out.output_format() == OutputFormat::Jfr {
        if jfr {
            // The recording's own file (its pattern under loop=, or at JVM
            // exit) is the one streamed, wherever it went.
            let own_pattern = command.file == rec.config.file;
            if let Some(asked) = command.file.as_deref().filter(|f| !own_pattern && !lines.iter().any(|l| l.ends_with(&*f.to_string_lossy()))) {
                lines.push(format!("note: a JFR recording streams to the file chosen at start; {} was not written", asked.display()));
            }
            return Ok(lines);
        }
        // This recording does not stream JFR: the file is made from its
        // counts (output::render), each sample an event at a time spread
        // over the recording.
        lines.push("note: this recording was not started with a .jfr file, so the JFR file holds its samples without their times (spread evenly over the recording); start with file=....jfr for a timeline".into());
    }
    let files = if looping && !output::intervals::writes_files() { Vec::new() } else { output::write_profiles(&built, &out, may_replace)? };
    push(&mut lines, None);
    if ends_interval {
        output::intervals::written(&files);
        if cut == Cut::Interval {
            output::intervals::advance();
        }
    } else if interval_file {
        output::intervals::dumped(&files);
    }
    for file in files {
        lines.push(format!("profile written to {}", file.path.display()));
    }
    crate::log::debug(&format!("profiles built and written in {:.1} ms", started.elapsed().as_secs_f64() * 1e3));
    Ok(lines)
}

/// Writes a reply for the CLI: the lines, errors prefixed `error: `, to a
/// new file (created exclusively, 0600).
pub fn write_reply(path: &Path, result: &Result<Vec<String>, String>) {
    let text = match result {
        Ok(lines) => lines.iter().map(|l| format!("{l}\n")).collect::<String>(),
        Err(e) => format!("error: {e}\n"),
    };
    // The CLI removed any stale reply: a file already there was planted.
    let written = crate::output::files::open_new(path).and_then(|mut f| std::io::Write::write_all(&mut f, text.as_bytes()));
    if let Err(e) = written {
        crate::log::error(&format!("cannot write the reply to {}: {e}", path.display()));
    }
}

//! `oxprof attach` and `oxprof list`: profile a JVM that is already running,
//! through HotSpot's attach mechanism (see the `oxprof-attach` crate).
//!
//! Every command loads the agent again with options; the first load starts
//! the agent, later ones reach the same agent as commands. The agent answers
//! in a reply file in the target's /tmp, which this module prints.
//!
//! Everything on the target's side belongs to the JVM's user: the reply and
//! status files are read and removed as that user (regular files only,
//! capped, in bounded time; see `oxprof_attach::read_target_file`), and what
//! they say (like the JVM's own messages) is printed without control
//! characters.

use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant, SystemTime};

use clap::{Args, ValueEnum};
use oxprof_attach::{inspect, list_jvms, load_agent, loaded_library, printable, read_target_file, remove_target_file, AgentLibrary, AttachError, Target};
use oxprof_profile::units::parse_wall_duration_ns;

use crate::agent;
use crate::agent_opts::{absolute, agent_words, check_interval, check_output_dir, check_output_name, no_comma, parse_interval, parse_wall, SampleArgs};

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Action {
    /// Start profiling and return
    Start,
    /// Report what runs, since when, samples so far
    Status,
    /// Write what was gathered so far; keep profiling
    Dump,
    /// Stop profiling and write the profile
    Stop,
}

#[derive(Args, Debug)]
#[command(
    about = "Profile a running JVM by process id",
    after_help = "Examples:\n  oxprof attach 4242 --duration 30s -o cpu.html     profile for 30 s, write, detach\n  oxprof attach 4242 start --event cpu --alloc --interval 5ms\n  oxprof attach 4242 status\n  oxprof attach 4242 dump -o now.html               write what was gathered, keep profiling\n  oxprof attach 4242 stop -o final.collapsed\n\nThe profile is written by the JVM itself, as its user; relative paths are made absolute here.\nOn JDK 21 and later the JVM prints a warning when an agent is loaded into it unless it was\nstarted with -XX:+EnableDynamicAgentLoading."
)]
pub struct AttachArgs {
    /// Process id of the JVM
    pub pid: u32,
    /// What to do; without one, --duration profiles for that long and writes the profile
    #[arg(value_enum)]
    pub action: Option<Action>,
    /// Profile for this long, then stop and write (e.g. 30s, 5m); Ctrl-C stops early.
    /// Not with an action: `start` returns at once and profiles until `stop`
    #[arg(short, long, value_parser = parse_wall)]
    pub duration: Option<String>,
    #[command(flatten)]
    pub sample: SampleArgs,
    /// Sampling interval of CPU time (of the wall clock with --event wall,
    /// of lock waits with --event lock), e.g. 10ms [default: 10ms; 50ms with
    /// --event wall; 1ms with --event lock or --ttsp]
    #[arg(short, long, value_parser = parse_interval, allow_hyphen_values = true)]
    pub interval: Option<String>,
    /// One root frame per thread
    #[arg(long)]
    pub threads: bool,
    /// Native and kernel frames under Java ones: fp, dwarf or no [default: fp]
    #[arg(long, value_name = "MODE", value_parser = ["fp", "dwarf", "no"])]
    pub cstack: Option<String>,
    /// Show estimated totals instead of sample counts
    #[arg(long)]
    pub total: bool,
    /// Output file (for --duration, start, stop and dump); the format follows the extension.
    /// [default: with --duration, profile.html in this directory; for stop and dump,
    /// the file the start named, else oxprof-<pid>.html in the JVM's working directory]
    #[arg(short, long)]
    pub output: Option<PathBuf>,
    /// Output format, overriding the extension: flamegraph, collapsed, pprof,
    /// jfr, otlp, or leaks (the text leak report of --live)
    #[arg(long, value_parser = ["flamegraph", "collapsed", "pprof", "jfr", "otlp", "leaks"])]
    pub format: Option<String>,
    /// Extra raw agent options for start and --duration, appended as is
    /// (e.g. "title=My app,ann,loglevel=debug")
    #[arg(long)]
    pub agent_opts: Option<String>,
    /// How long to wait for the JVM at each step of the attach
    #[arg(long, default_value = "10s", value_parser = parse_wall)]
    pub timeout: String,
}

fn wall(s: &str) -> Duration {
    Duration::from_nanos(parse_wall_duration_ns(s).unwrap_or(10_000_000_000))
}

/// Agent options for starting a recording.
fn attach_start_options(args: &AttachArgs) -> Result<Vec<String>, String> {
    if args.format.as_deref() == Some("leaks") && !args.sample.live.live {
        return Err("--format leaks needs --live".into());
    }
    check_interval(args.interval.as_deref(), args.sample.event.as_deref())?;
    let mut opts = args.sample.start_options()?;
    if let Some(i) = &args.interval {
        opts.push(format!("interval={i}"));
    }
    if args.threads {
        opts.push("threads".into());
    }
    if let Some(mode) = &args.cstack {
        opts.push(format!("cstack={mode}"));
    }
    opts.extend(output_options(args)?);
    if let Some(extra) = &args.agent_opts {
        opts.push(extra.clone());
    }
    Ok(opts)
}

/// `file=`, format and counter options.
fn output_options(args: &AttachArgs) -> Result<Vec<String>, String> {
    let mut opts = Vec::new();
    if let Some(o) = &args.output {
        check_output_name(o, args.format.as_deref(), args.agent_opts.as_deref())?;
        let p = absolute(o);
        no_comma("output path", &p.to_string_lossy())?;
        opts.push(format!("file={}", p.display()));
    }
    if let Some(f) = &args.format {
        opts.push(format!("format={f}"));
    }
    if args.total {
        opts.push("total".into());
    }
    Ok(opts)
}

/// The flags given that only a start (or --duration) takes.
fn start_flags(args: &AttachArgs) -> Vec<&'static str> {
    let s = &args.sample;
    let l = &s.live;
    [
        ("--event", s.event.is_some()),
        ("--interval", args.interval.is_some()),
        ("--lock", s.lock.is_some()),
        ("--wall", s.wall.is_some()),
        ("--state", s.state),
        ("--alloc", s.alloc.is_some()),
        ("--ttsp", s.ttsp),
        ("--begin", s.begin.is_some()),
        ("--end", s.end.is_some()),
        ("--alloc-threads", s.alloc_threads.is_some()),
        ("--loop", s.loop_every.is_some()),
        ("--keep", s.keep.is_some()),
        ("--upload", s.upload.is_some()),
        ("--live", l.live),
        ("--live-budget", l.live_budget.is_some()),
        ("--threads", args.threads),
        ("--cstack", args.cstack.is_some()),
        ("--agent-opts", args.agent_opts.is_some()),
    ]
    .into_iter()
    .filter_map(|(flag, given)| given.then_some(flag))
    .collect()
}

/// Refuses the flags an action would ignore: --duration with any action,
/// what to sample with status, dump and stop, output flags with status.
fn check_action_flags(args: &AttachArgs, action: Action) -> Result<(), String> {
    let name = format!("{action:?}").to_lowercase();
    if args.duration.is_some() {
        return Err(match action {
            Action::Start => format!(
                "--duration records for a time and stops: it cannot be used with start; use `oxprof attach {} --duration {}` (or start, then stop)",
                args.pid,
                args.duration.as_deref().unwrap_or("30s")
            ),
            _ => format!("--duration cannot be used with {name}: it is for profiling without an action (`oxprof attach {} --duration 30s`)", args.pid),
        });
    }
    if action == Action::Start {
        return Ok(());
    }
    let mut given = start_flags(args);
    if action == Action::Status {
        let l = &args.sample.live;
        let output = [
            ("-o", args.output.is_some()),
            ("--format", args.format.is_some()),
            ("--total", args.total),
            ("--no-gc", l.no_gc),
            ("--gc-roots", l.gc_roots.is_some()),
        ];
        given.extend(output.into_iter().filter_map(|(flag, g)| g.then_some(flag)));
        if !given.is_empty() {
            return Err(format!("{} cannot be used with status, which only reports what runs", given.join("/")));
        }
        return Ok(());
    }
    if !given.is_empty() {
        return Err(format!(
            "{} apply to start, not to {name}: {name} writes what the running recording sampled (it takes -o, --format, --total, --no-gc and --gc-roots)",
            given.join("/")
        ));
    }
    Ok(())
}

/// The most of a reply or status file we read: the agent's replies are a
/// few lines.
const REPLY_CAP: usize = 64 * 1024;

/// An error of the attach crate, whose text may quote the JVM, for printing.
fn message(e: AttachError) -> String {
    printable(&e.to_string())
}

/// One conversation with the agent: load it with `options` plus a reply
/// file, and return the reply's lines.
struct Session {
    target: Target,
    agent: AgentLibrary,
    timeout: Duration,
    counter: u32,
}

impl Session {
    fn new(pid: u32, timeout: Duration) -> Result<Session, String> {
        let target = inspect(pid).map_err(message)?;
        // Reuse the library already in the JVM, so commands reach that
        // agent. Its path is the JVM's to name: the JVM loads it again, we
        // never read it. Otherwise our own library.
        let agent = match loaded_library(pid, "liboxprof") {
            Some(p) => AgentLibrary::InTarget(p),
            None => AgentLibrary::Ours(agent::find_agent()?),
        };
        Ok(Session { target, agent, timeout, counter: 0 })
    }

    /// A fresh reply file's path inside the target.
    fn reply_path(&mut self) -> PathBuf {
        self.counter += 1;
        Path::new("/tmp").join(format!("oxprof-reply-{}-{}-{}", std::process::id(), self.target.pid, self.counter))
    }

    fn send(&mut self, mut options: Vec<String>) -> Result<Vec<String>, String> {
        let reply_path = self.reply_path();
        let _ = remove_target_file(&self.target, &reply_path);
        options.push(format!("reply={}", reply_path.display()));
        let loaded = load_agent(&self.target, &self.agent, &options.join(","), self.timeout).map_err(message);
        let reply = read_target_file(&self.target, &reply_path, REPLY_CAP);
        let _ = remove_target_file(&self.target, &reply_path);
        let loaded = loaded?;
        match reply {
            Ok(bytes) => {
                let text = printable(&String::from_utf8_lossy(&bytes));
                let lines: Vec<String> = text.lines().map(str::to_string).collect();
                match lines.iter().find_map(|l| l.strip_prefix("error: ")) {
                    Some(e) => Err(agent_words(e)),
                    None => Ok(lines),
                }
            }
            Err(_) if loaded.agent_return_code != 0 => {
                Err(format!("the agent failed (return code {}): {}", loaded.agent_return_code, printable(loaded.text.trim())))
            }
            Err(e) => Err(format!("the agent sent no usable reply ({}); the JVM said: {}", message(e), printable(loaded.text.trim()))),
        }
    }

    /// Whether the JVM sees our files: the same root directory and mount
    /// namespace, so that a path of ours names the same file in it.
    fn shares_our_files(&self) -> bool {
        use std::os::unix::fs::MetadataExt;
        let same = |a: &Path, b: &Path| match (std::fs::metadata(a), std::fs::metadata(b)) {
            (Ok(x), Ok(y)) => x.dev() == y.dev() && x.ino() == y.ino(),
            _ => false,
        };
        same(&self.target.root, Path::new("/")) && same(&PathBuf::from(format!("/proc/{}/ns/mnt", self.target.pid)), Path::new("/proc/self/ns/mnt"))
    }

    /// The sample count in the agent's status file, if it can be read.
    fn samples(&self, status_path: &Path) -> Option<u64> {
        let bytes = read_target_file(&self.target, status_path, REPLY_CAP).ok()?;
        String::from_utf8_lossy(&bytes).split_whitespace().find_map(|kv| kv.strip_prefix("samples=")?.parse::<u64>().ok())
    }
}

static INTERRUPTED: AtomicBool = AtomicBool::new(false);

extern "C" fn on_interrupt(_: libc::c_int) {
    INTERRUPTED.store(true, Ordering::SeqCst);
}

pub fn run(args: AttachArgs) -> Result<ExitCode, String> {
    // Decide what to send before touching the JVM.
    if let Some(action) = args.action {
        check_action_flags(&args, action)?;
    }
    let options = match args.action {
        Some(Action::Status) => vec!["status".to_string()],
        Some(Action::Start) => attach_start_options(&args)?,
        Some(action @ (Action::Dump | Action::Stop)) => {
            let mut o = vec![if action == Action::Dump { "dump" } else { "stop" }.to_string()];
            o.extend(output_options(&args)?);
            o.extend(args.sample.live.report_options());
            o
        }
        None => {
            let d = args.duration.as_deref().ok_or("say what to do: --duration 30s, or one of start, status, dump, stop (see oxprof attach --help)")?;
            attach_start_options(&args)?;
            let mut session = Session::new(args.pid, wall(&args.timeout))?;
            return profile_for(&mut session, &args, wall(d));
        }
    };
    if let Some(action @ (Action::Status | Action::Dump | Action::Stop)) = args.action {
        // A JVM oxprof was never loaded into runs no recording: say so
        // without loading the agent. Loading it to answer a question would
        // change the JVM for its life (the library stays, DebugNonSafepoints
        // is turned on, JDK 21+ warns of a dynamically loaded agent).
        inspect(args.pid).map_err(message)?;
        if agent_not_loaded(args.pid) {
            if action == Action::Status {
                outln!("idle: profiling is not running; oxprof is not loaded in this JVM");
                return Ok(ExitCode::SUCCESS);
            }
            return Err("profiling is not running; start it first (oxprof is not loaded in this JVM)".into());
        }
    }
    let mut session = Session::new(args.pid, wall(&args.timeout))?;
    if let (Some(o), true) = (&args.output, session.shares_our_files()) {
        check_output_dir(&absolute(o)).map_err(in_the_jvm)?;
    }
    let lines = session.send(options)?;
    for l in &lines {
        outln!("{l}");
    }
    // A dump or stop that ran but did not write the file asked for (a JFR
    // recording streams to the file chosen at start) fails, as the Java
    // API's `execute` throws for it: a script's next step would look for
    // a file that is not there.
    if let Some(n) = lines.iter().find_map(|l| l.strip_prefix("note: ").filter(|n| n.ends_with(" was not written"))) {
        return Err(n.to_string());
    }
    Ok(ExitCode::SUCCESS)
}

/// Whether the JVM's memory map, read, holds no oxprof agent: no library
/// named like `liboxprof` (the one [`Session::new`] would reuse) nor like
/// the library we would load. An unreadable map proves nothing: `false`.
fn agent_not_loaded(pid: u32) -> bool {
    if std::fs::File::open(format!("/proc/{pid}/maps")).is_err() || loaded_library(pid, "liboxprof").is_some() {
        return false;
    }
    match agent::find_agent().ok().and_then(|p| p.file_name().map(|n| n.to_string_lossy().into_owned())) {
        Some(ours) => loaded_library(pid, &ours).is_none(),
        None => true,
    }
}

/// An output path's problem, as the agent says it on attach.
fn in_the_jvm(problem: String) -> String {
    format!("{problem} (the JVM writes as its own user)")
}

/// Starts, waits (with progress on a terminal; Ctrl-C stops early), stops
/// and writes. A JVM that exits meanwhile is noticed within 200 ms: its
/// agent wrote the profile at exit, and we say where.
fn profile_for(session: &mut Session, args: &AttachArgs, duration: Duration) -> Result<ExitCode, String> {
    let mut opts = attach_start_options(args)?;
    let output = absolute(args.output.as_deref().unwrap_or(Path::new("profile.html")));
    if args.output.is_none() {
        opts.push(format!("file={}", output.display()));
    }
    let shared = session.shares_our_files();
    if shared {
        check_output_dir(&output).map_err(in_the_jvm)?;
    }
    // The status file feeds the progress line only: without a terminal
    // there is none to leave behind.
    let tty = std::io::stderr().is_terminal();
    let status_path = PathBuf::from(format!("/tmp/oxprof-status-{}-{}", std::process::id(), args.pid));
    if tty {
        opts.push(format!("status={}", status_path.display()));
    }
    let jvm = Jvm::of(args.pid);
    let since = SystemTime::now();
    let start_reply = session.send(opts);
    // The duration counts from the start's reply: a JVM still starting, or
    // a loaded machine, can take longer than a short duration to load the
    // agent and start, and the stop must not follow at once.
    let started = Instant::now();
    let remove_status = |session: &Session| {
        if tty {
            remove_status_file(&session.target, &status_path, shared);
        }
    };
    let lines = match start_reply {
        Ok(lines) => lines,
        Err(e) => {
            remove_status(session);
            return Err(e);
        }
    };
    for l in lines {
        errln!("[oxprof] {l}");
    }
    // SAFETY: installing a handler that only stores to an atomic.
    unsafe { libc::signal(libc::SIGINT, on_interrupt as *const () as libc::sighandler_t) };
    let mut exited = false;
    while started.elapsed() < duration && !INTERRUPTED.load(Ordering::SeqCst) {
        if !jvm.running() {
            exited = true;
            break;
        }
        if tty {
            let samples = session.samples(&status_path).unwrap_or(0);
            err_print!(
                "\r\x1b[K[oxprof] profiling pid {}: {:.0} s of {:.0} s, {samples} samples (Ctrl-C stops early)",
                args.pid,
                started.elapsed().as_secs_f64(),
                duration.as_secs_f64()
            );
        }
        std::thread::sleep(Duration::from_millis(200).min(duration.saturating_sub(started.elapsed())));
    }
    if tty {
        err_print!("\r\x1b[K");
    }
    let result = if exited {
        None
    } else {
        if INTERRUPTED.load(Ordering::SeqCst) {
            errln!("[oxprof] interrupted after {:.1} s; writing the profile", started.elapsed().as_secs_f64());
        }
        match session.send(vec!["stop".into()]) {
            // The JVM ended just as we stopped.
            Err(_) if !jvm.running() => None,
            r => Some(r),
        }
    };
    remove_status(session);
    match result {
        Some(lines) => {
            for l in lines? {
                errln!("[oxprof] {l}");
            }
            Ok(ExitCode::SUCCESS)
        }
        None => exited_during(args.pid, started.elapsed(), duration, &output, shared.then_some(&jvm), since),
    }
}

/// What to say when the JVM exited during `--duration`: its agent writes
/// the profile when the JVM exits, to the output path or, when it cannot,
/// to a private fallback directory (`oxprof-<pid>-XXXXXX` in the JVM's
/// working directory or temporary directory). `jvm` is given when the
/// JVM's files are ours to look at (the same mount namespace).
fn exited_during(pid: u32, after: Duration, duration: Duration, output: &Path, jvm: Option<&Jvm>, since: SystemTime) -> Result<ExitCode, String> {
    let when = format!("JVM {pid} exited {:.1} s into the {:.0} s recording", after.as_secs_f64(), duration.as_secs_f64());
    let Some(jvm) = jvm else {
        errln!(
            "[oxprof] {when}; its agent writes the profile at exit to {} in the JVM's file system (or, when it cannot, to a directory oxprof-{pid}-* there, as the JVM's output says)",
            output.display()
        );
        return Ok(ExitCode::SUCCESS);
    };
    // Modification times may lag the clock by a tick.
    let fresh = |p: &Path| std::fs::metadata(p).and_then(|m| m.modified()).is_ok_and(|t| t + Duration::from_secs(1) >= since);
    if fresh(output) {
        errln!("[oxprof] {when}; its agent wrote the profile at exit");
        errln!("[oxprof] profile written to {}", output.display());
        return Ok(ExitCode::SUCCESS);
    }
    let dirs = [jvm.cwd.clone(), Some(PathBuf::from("/tmp"))];
    let fallback = dirs
        .iter()
        .flatten()
        .filter_map(|d| std::fs::read_dir(d).ok())
        .flat_map(|entries| entries.flatten())
        .filter(|e| e.file_name().to_string_lossy().starts_with(&format!("oxprof-{pid}-")))
        .filter_map(|e| std::fs::read_dir(e.path()).ok())
        .flat_map(|entries| entries.flatten())
        .map(|e| e.path())
        .filter(|p| fresh(p))
        .max_by_key(|p| std::fs::metadata(p).and_then(|m| m.modified()).ok());
    match fallback {
        Some(p) => {
            errln!("[oxprof] {when}; its agent could not write {} and wrote the profile to a fallback file", output.display());
            errln!("[oxprof] profile written to {}", p.display());
            Ok(ExitCode::SUCCESS)
        }
        None => Err(format!(
            "{when}, and no profile was written to {} nor to a fallback directory oxprof-{pid}-* (killed, or it crashed? the JVM's own output says)",
            output.display()
        )),
    }
}

/// The JVM profiled by `--duration`: whether it still runs (the same
/// process: its start time is kept), and its working directory.
struct Jvm {
    pid: u32,
    start_time: Option<String>,
    cwd: Option<PathBuf>,
}

impl Jvm {
    fn of(pid: u32) -> Jvm {
        Jvm { pid, start_time: stat_fields(pid).map(|(_, start)| start), cwd: std::fs::read_link(format!("/proc/{pid}/cwd")).ok() }
    }

    /// Whether the process runs: it exists, is no zombie and started when it did.
    fn running(&self) -> bool {
        match stat_fields(self.pid) {
            Some((state, start)) => !matches!(state.as_str(), "Z" | "X" | "x") && self.start_time.as_ref().is_none_or(|s| *s == start),
            None => false,
        }
    }
}

/// A process's state and start time, from `/proc/<pid>/stat`.
fn stat_fields(pid: u32) -> Option<(String, String)> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // After the command name in parentheses: state is field 3, start time 22.
    let rest: Vec<&str> = s[s.rfind(')')? + 1..].split_whitespace().collect();
    Some((rest.first()?.to_string(), rest.get(19)?.to_string()))
}

/// Removes the status file of `--duration` from the JVM's /tmp. While the
/// JVM runs, through its file system as its user; once it has exited
/// (`/proc/<pid>/root` is gone), when its files are ours (`shared`), as
/// its user still: a regular file of the JVM's user only, never followed.
fn remove_status_file(target: &Target, path: &Path, shared: bool) {
    if remove_target_file(target, path).is_ok() || !shared {
        return;
    }
    let (uid, gid, path) = (target.uid, target.gid, path.to_path_buf());
    // On a thread of its own: only that thread takes the JVM's file-system
    // identity, and it ends with the thread.
    let _ = std::thread::Builder::new()
        .name("oxprof-status".into())
        .spawn(move || {
            use std::os::unix::fs::MetadataExt;
            // SAFETY: geteuid() cannot fail.
            if unsafe { libc::geteuid() } == 0 {
                // SAFETY: setfsgid/setfsuid change this thread's file-system
                // ids only (plain system calls); no memory is involved.
                unsafe {
                    libc::setfsgid(gid);
                    libc::setfsuid(uid);
                }
            }
            if std::fs::symlink_metadata(&path).is_ok_and(|m| m.file_type().is_file() && m.uid() == uid) {
                let _ = std::fs::remove_file(&path);
            }
        })
        .map(|t| t.join());
}

/// `oxprof list`: the JVMs this user can see.
pub fn list() -> Result<ExitCode, String> {
    let jvms = list_jvms();
    if jvms.is_empty() {
        outln!("no running JVMs found");
        return Ok(ExitCode::SUCCESS);
    }
    outln!("{:>8}  {:<10}  {:<7}  MAIN", "PID", "JDK", "OXPROF");
    for j in jvms {
        outln!("{:>8}  {:<10}  {:<7}  {}", j.pid, j.java_version.as_deref().unwrap_or("?"), if j.oxprof.is_some() { "loaded" } else { "-" }, j.main);
    }
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn start_options_carry_the_native_stack_mode() {
        use clap::Parser;
        #[derive(Parser)]
        struct T {
            #[command(flatten)]
            a: AttachArgs,
        }
        let t = T::try_parse_from(["t", "42", "start", "--cstack", "no", "--interval", "5ms"]).unwrap();
        assert_eq!(attach_start_options(&t.a).unwrap(), ["start", "event=cpu", "interval=5ms", "cstack=no"]);
        let t = T::try_parse_from(["t", "42", "start", "--interval", "10us"]).unwrap();
        assert!(attach_start_options(&t.a).unwrap_err().starts_with("--interval 10us: "));
        assert!(T::try_parse_from(["t", "42", "start", "--cstack", "lbr"]).is_err());
        let t = T::try_parse_from(["t", "42", "start", "--cstack", "dwarf"]).unwrap();
        assert_eq!(attach_start_options(&t.a).unwrap(), ["start", "event=cpu", "cstack=dwarf"]);
    }
}

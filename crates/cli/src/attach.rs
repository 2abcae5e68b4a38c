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

use std::io::{IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use clap::{Args, ValueEnum};
use oxprof_attach::{inspect, list_jvms, load_agent, loaded_library, printable, read_target_file, remove_target_file, AgentLibrary, AttachError, Target};
use oxprof_profile::units::parse_wall_duration_ns;

use crate::agent;
use crate::agent_opts::{absolute, check_interval, no_comma, parse_interval, parse_wall, SampleArgs};

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
    after_help = "Examples:\n  oxprof attach 4242 --duration 30s -o cpu.html          profile for 30 s, write, detach\n  oxprof attach 4242 start --event cpu --alloc --interval 5ms\n  oxprof attach 4242 status\n  oxprof attach 4242 dump -o now.html                    write what was gathered, keep profiling\n  oxprof attach 4242 stop -o final.collapsed\n\nThe profile is written by the JVM itself, as its user; relative paths are made absolute here.\nOn JDK 21 and later the JVM prints a warning when an agent is loaded into it unless it was\nstarted with -XX:+EnableDynamicAgentLoading."
)]
pub struct AttachArgs {
    /// Process id of the JVM
    pub pid: u32,
    /// What to do; without one, --duration profiles for that long and writes the profile
    #[arg(value_enum)]
    pub action: Option<Action>,
    /// Profile for this long, then stop and write (e.g. 30s, 5m); Ctrl-C stops early
    #[arg(short, long, value_parser = parse_wall)]
    pub duration: Option<String>,
    #[command(flatten)]
    pub sample: SampleArgs,
    /// Sampling interval of CPU time (of the wall clock with --event wall,
    /// of lock waits with --event lock), e.g. 10ms [default: 10ms; wall 50ms;
    /// lock 1ms]
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
    /// Output file (for --duration, stop and dump); format from the extension
    #[arg(short, long)]
    pub output: Option<PathBuf>,
    /// Output format, overriding the extension: flamegraph, collapsed, pprof,
    /// jfr, otlp, or leaks (the text leak report of --live)
    #[arg(long, value_parser = ["flamegraph", "collapsed", "pprof", "jfr", "otlp", "leaks"])]
    pub format: Option<String>,
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
    Ok(opts)
}

/// `file=`, format and counter options.
fn output_options(args: &AttachArgs) -> Result<Vec<String>, String> {
    let mut opts = Vec::new();
    if let Some(o) = &args.output {
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
                    Some(e) => Err(e.to_string()),
                    None => Ok(lines),
                }
            }
            Err(_) if loaded.agent_return_code != 0 => {
                Err(format!("the agent failed (return code {}): {}", loaded.agent_return_code, printable(loaded.text.trim())))
            }
            Err(e) => Err(format!("the agent sent no usable reply ({}); the JVM said: {}", message(e), printable(loaded.text.trim()))),
        }
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
    let mut session = Session::new(args.pid, wall(&args.timeout))?;
    for l in session.send(options)? {
        println!("{l}");
    }
    Ok(ExitCode::SUCCESS)
}

/// Starts, waits (with progress on a terminal; Ctrl-C stops early), stops and writes.
fn profile_for(session: &mut Session, args: &AttachArgs, duration: Duration) -> Result<ExitCode, String> {
    let mut opts = attach_start_options(args)?;
    if args.output.is_none() {
        opts.push(format!("file={}", absolute(Path::new("profile.html")).display()));
    }
    let status_path = PathBuf::from(format!("/tmp/oxprof-status-{}-{}", std::process::id(), args.pid));
    opts.push(format!("status={}", status_path.display()));
    for l in session.send(opts)? {
        eprintln!("[oxprof] {l}");
    }
    // SAFETY: installing a handler that only stores to an atomic.
    unsafe { libc::signal(libc::SIGINT, on_interrupt as *const () as libc::sighandler_t) };
    let tty = std::io::stderr().is_terminal();
    let started = Instant::now();
    while started.elapsed() < duration && !INTERRUPTED.load(Ordering::SeqCst) {
        if tty {
            let samples = session.samples(&status_path).unwrap_or(0);
            eprint!(
                "\r\x1b[K[oxprof] profiling pid {}: {:.0} s of {:.0} s, {samples} samples (Ctrl-C stops early)",
                args.pid,
                started.elapsed().as_secs_f64(),
                duration.as_secs_f64()
            );
            let _ = std::io::stderr().flush();
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    if tty {
        eprint!("\r\x1b[K");
    }
    if INTERRUPTED.load(Ordering::SeqCst) {
        eprintln!("[oxprof] interrupted after {:.1} s; writing the profile", started.elapsed().as_secs_f64());
    }
    let result = session.send(vec!["stop".into()]);
    let _ = remove_target_file(&session.target, &status_path);
    for l in result? {
        eprintln!("[oxprof] {l}");
    }
    Ok(ExitCode::SUCCESS)
}

/// `oxprof list`: the JVMs this user can see.
pub fn list() -> Result<ExitCode, String> {
    let jvms = list_jvms();
    if jvms.is_empty() {
        println!("no running JVMs found");
        return Ok(ExitCode::SUCCESS);
    }
    println!("{:>8}  {:<10}  {:<7}  MAIN", "PID", "JDK", "OXPROF");
    for j in jvms {
        println!("{:>8}  {:<10}  {:<7}  {}", j.pid, j.java_version.as_deref().unwrap_or("?"), if j.oxprof.is_some() { "loaded" } else { "-" }, j.main);
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

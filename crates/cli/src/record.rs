//! `oxprof record`: runs a Java command with the agent, shows live progress on
//! a terminal, and reports where the profile went.

use std::io::{IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode, ExitStatus};
use std::time::{Duration, Instant};

use crate::agent_opts::{absolute, agent_words, check_interval, check_output_dir, check_output_name, no_comma, parse_interval, SampleArgs};
use clap::Args;
use oxprof_profile::OutputFormat;

use crate::agent;

#[derive(Args, Debug, Clone)]
#[command(
    about = "Run a Java program with the profiler and write a profile when it exits",
    after_help = "Examples:\n  oxprof record -o profile.html -- java -cp app MyMain\n  oxprof record --event itimer -i 5ms -o cpu.collapsed -- java -jar app.jar\n\n  One root per thread:\n  oxprof record --threads -- java -cp app MyMain\n\n  On and off the CPU (wall clock):\n  oxprof record --event wall --threads -o wall.html -- java -jar app.jar\n\n  CPU and wall clock with thread states, to JFR:\n  oxprof record --event cpu --wall 50ms --state -o rec.jfr -- java -jar app.jar\n\n  Lock contention:\n  oxprof record --event lock --lock 1ms -o locks.html -- java -jar app.jar"
)]
pub struct RecordArgs {
    #[command(flatten)]
    pub sample: SampleArgs,
    /// Show estimated totals (CPU time, allocated bytes) instead of sample counts
    #[arg(long)]
    pub total: bool,
    /// Sampling interval of CPU time (of the wall clock with --event wall, of
    /// lock waits with --event lock), e.g. 10ms, 500us (a bare number is
    /// nanoseconds) [default: 10ms; 50ms with --event wall; 1ms with --event lock]
    #[arg(short, long, value_parser = parse_interval, allow_hyphen_values = true)]
    pub interval: Option<String>,
    /// Output file; the format follows the extension (.html, .collapsed, .txt, .pb.gz, .pprof, .jfr, .otlp.pb)
    #[arg(short, long, default_value = "profile.html")]
    pub output: PathBuf,
    /// Output format, overriding the extension: flamegraph, collapsed, pprof,
    /// jfr, otlp, or leaks (the text leak report of --live)
    #[arg(long, value_parser = ["flamegraph", "collapsed", "pprof", "jfr", "otlp", "leaks"])]
    pub format: Option<String>,
    /// One root frame per thread
    #[arg(long)]
    pub threads: bool,
    /// Title of the flame graph
    #[arg(long, value_parser = parse_title)]
    pub title: Option<String>,
    /// Maximum Java stack depth, 1 to 65536 frames
    #[arg(long, default_value_t = 2048, value_parser = clap::value_parser!(u32).range(1..=MAX_JSTACKDEPTH))]
    pub jstackdepth: u32,
    /// Native and kernel frames under Java ones: fp (frame pointers, plus
    /// kernel callchains with perf_events), dwarf (unwind tables instead of
    /// frame pointers) or no [default: fp]
    #[arg(long, value_name = "MODE", value_parser = ["fp", "dwarf", "no"])]
    pub cstack: Option<String>,
    /// Extra raw agent options, appended as is (e.g. "ann,loglevel=debug")
    #[arg(long)]
    pub agent_opts: Option<String>,
    /// The Java command to run: `java ARGS...`
    #[arg(last = true, required = true, value_name = "JAVA COMMAND")]
    pub command: Vec<String>,
}

/// The deepest Java stack the agent walks (its `jstackdepth` limit).
const MAX_JSTACKDEPTH: i64 = 65_536;

/// clap parser for `--title`: some text (the agent refuses an empty title).
fn parse_title(s: &str) -> Result<String, String> {
    if s.is_empty() {
        return Err("the title must not be empty; leave --title out for the default".into());
    }
    Ok(s.to_string())
}

/// The agent option string for these arguments.
pub fn agent_options(args: &RecordArgs, output: &Path, log: &Path, status: &Path) -> Result<String, String> {
    no_comma("output", &output.to_string_lossy())?;
    no_comma("title", args.title.as_deref().unwrap_or(""))?;
    check_interval(args.interval.as_deref(), args.sample.event.as_deref())?;
    let mut opts = args.sample.start_options()?;
    if args.total {
        opts.push("total".into());
    }
    // Only the user's: the agent's defaults are the CPU's (10ms), the wall
    // clock's (50ms) for `--event wall`, 1ms with `--ttsp`, and an interval
    // beside `--alloc`, `--wall` or `--lock` alone asks for CPU sampling too.
    opts.extend(args.interval.as_deref().map(|i| format!("interval={i}")));
    opts.extend([
        format!("file={}", output.display()),
        format!("jstackdepth={}", args.jstackdepth),
        format!("log={}", log.display()),
        format!("status={}", status.display()),
    ]);
    if let Some(f) = &args.format {
        opts.push(format!("format={f}"));
    }
    if args.threads {
        opts.push("threads".into());
    }
    if let Some(mode) = &args.cstack {
        opts.push(format!("cstack={mode}"));
    }
    if let Some(t) = &args.title {
        opts.push(format!("title={t}"));
    }
    if let Some(extra) = &args.agent_opts {
        opts.push(extra.clone());
    }
    Ok(opts.join(","))
}

/// Inserts `-agentpath:` right after the `java` executable.
pub fn java_command(command: &[String], agent_path: &Path, options: &str) -> Result<Command, String> {
    let (java, rest) = command.split_first().ok_or("no Java command given; put it after `--`, e.g. `-- java -cp app Main`")?;
    let mut cmd = Command::new(java);
    let agent = format!("-agentpath:{}={}", agent_path.display(), options);
    if is_java_launcher(java) {
        cmd.arg(agent);
    } else {
        // A wrapper (a script, jython, a build tool) would take the option
        // as its own: the JVMs it starts find the agent in
        // JAVA_TOOL_OPTIONS instead, quoted as the JVM reads it.
        if agent.contains('"') {
            return Err(format!(
                "'{java}' is not the java launcher, so the agent goes in JAVA_TOOL_OPTIONS, which cannot hold a '\"' in the output path or options"
            ));
        }
        let quoted = if agent.contains(char::is_whitespace) { format!("\"{agent}\"") } else { agent };
        let value = match std::env::var("JAVA_TOOL_OPTIONS") {
            Ok(v) if !v.trim().is_empty() => format!("{v} {quoted}"),
            _ => quoted,
        };
        errln!("[oxprof] '{java}' is not the java launcher: the agent goes in JAVA_TOOL_OPTIONS, so every JVM it starts is profiled (into the same output)");
        cmd.env("JAVA_TOOL_OPTIONS", value);
    }
    cmd.args(rest);
    Ok(cmd)
}

/// Whether `program` is a java launcher (`java`, `/usr/lib/jvm/.../bin/java`,
/// `java17`), which takes `-agentpath:` first.
fn is_java_launcher(program: &str) -> bool {
    let name = Path::new(program).file_name().and_then(|n| n.to_str()).unwrap_or(program);
    name == "java" || name == "java.exe" || (name.starts_with("java") && name[4..].chars().all(|c| c.is_ascii_digit() || c == '-' || c == '.'))
}

/// A private directory for our temporary files: made by `mkdtemp` under the
/// temporary directory (a fresh, unpredictable name, mode 0700, ours), so
/// nobody else can have created it or plant anything in it; removed with
/// its contents when dropped.
pub(crate) struct TempFiles {
    pub dir: PathBuf,
}

impl TempFiles {
    /// For `oxprof record`: `oxprof-record-XXXXXX`.
    pub fn new() -> std::io::Result<TempFiles> {
        TempFiles::named("oxprof-record")
    }

    /// `<temporary directory>/<prefix>-XXXXXX`.
    pub fn named(prefix: &str) -> std::io::Result<TempFiles> {
        use std::os::unix::ffi::OsStringExt;
        let mut template = std::env::temp_dir().join(format!("{prefix}-XXXXXX")).into_os_string().into_vec();
        if template.contains(&0) {
            return Err(std::io::Error::new(std::io::ErrorKind::InvalidInput, "the temporary directory's path contains a NUL byte"));
        }
        template.push(0);
        // SAFETY: template is a writable, NUL-terminated path ending in
        // XXXXXX, which mkdtemp replaces in place; it outlives the call.
        let made = unsafe { libc::mkdtemp(template.as_mut_ptr() as *mut libc::c_char) };
        if made.is_null() {
            return Err(std::io::Error::last_os_error());
        }
        template.pop();
        Ok(TempFiles { dir: PathBuf::from(std::ffi::OsString::from_vec(template)) })
    }

    /// Creates the file `name` in the directory with `contents`: a new
    /// file only (O_CREAT|O_EXCL|O_NOFOLLOW), never an existing one or what
    /// a symlink points to.
    pub fn create(&self, name: &str, contents: &[u8]) -> std::io::Result<PathBuf> {
        use std::os::unix::fs::OpenOptionsExt;
        let path = self.dir.join(name);
        let mut f = std::fs::OpenOptions::new().write(true).create_new(true).mode(0o600).custom_flags(libc::O_NOFOLLOW).open(&path)?;
        f.write_all(contents)?;
        Ok(path)
    }
}

impl Drop for TempFiles {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Reads at most 64 KiB of the regular file `path` without waiting on it
/// (a FIFO or a device there is refused), for the files the JVM writes for
/// us (the agent's log and status).
fn read_capped(path: &Path) -> std::io::Result<String> {
    use std::io::Read;
    use std::os::unix::fs::OpenOptionsExt;
    let f = std::fs::OpenOptions::new().read(true).custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_NOCTTY).open(path)?;
    if !f.metadata()?.is_file() {
        return Err(std::io::Error::new(std::io::ErrorKind::InvalidData, format!("{} is not a regular file", path.display())));
    }
    let mut bytes = Vec::new();
    f.take(64 * 1024).read_to_end(&mut bytes)?;
    Ok(String::from_utf8_lossy(&bytes).into_owned())
}

/// Runs `oxprof record`.
pub fn run(args: RecordArgs) -> Result<ExitCode, String> {
    // The flags the agent would refuse only once the JVM starts.
    check_output_name(&args.output, args.format.as_deref(), args.agent_opts.as_deref())?;
    let agent_path = agent::find_agent()?;
    let output = absolute(&args.output);
    check_output_dir(&output)?;
    if let Some(f) = &args.format {
        if f != "leaks" {
            OutputFormat::from_word(f).ok_or_else(|| format!("unknown format '{f}'"))?;
        } else if !args.sample.live.live {
            return Err("--format leaks needs --live".into());
        }
    }
    let tmp = TempFiles::new().map_err(|e| format!("cannot create a temporary directory: {e}"))?;
    let log = tmp.dir.join("agent.log");
    let status = tmp.dir.join("status");
    let options = agent_options(&args, &output, &log, &status)?;
    let mut cmd = java_command(&args.command, &agent_path, &options)?;
    let status_code = run_child(&mut cmd, &status, &args.command[0])?;
    let log_text = read_capped(&log).unwrap_or_default();
    report(&log_text);
    Ok(exit_code(status_code))
}

fn exit_code(status: ExitStatus) -> ExitCode {
    use std::os::unix::process::ExitStatusExt;
    match (status.code(), status.signal()) {
        (Some(c), _) => ExitCode::from(c.clamp(0, 255) as u8),
        (None, Some(sig)) => ExitCode::from((128 + sig).clamp(0, 255) as u8),
        _ => ExitCode::FAILURE,
    }
}

/// Runs the child, showing a status line on a terminal. Ctrl-C reaches the
/// JVM (same process group), which shuts down and writes the profile; oxprof
/// itself ignores it and waits.
pub fn run_child(cmd: &mut Command, status: &Path, program: &str) -> Result<ExitStatus, String> {
    use std::os::unix::process::CommandExt;
    // SAFETY: pre_exec runs in the forked child before exec; signal() is
    // async-signal-safe. The child gets default SIGINT handling back.
    unsafe {
        cmd.pre_exec(|| {
            libc::signal(libc::SIGINT, libc::SIG_DFL);
            Ok(())
        });
    }
    let mut child = cmd.spawn().map_err(|e| format!("cannot run `{program}`: {e}"))?;
    // SAFETY: ignoring SIGINT in oxprof itself; the JVM handles it.
    unsafe { libc::signal(libc::SIGINT, libc::SIG_IGN) };
    let tty = std::io::stderr().is_terminal();
    let started = Instant::now();
    let mut shown = false;
    loop {
        match child.try_wait() {
            Ok(Some(st)) => {
                if shown {
                    err_print!("\r\x1b[K");
                }
                return Ok(st);
            }
            Ok(None) => {}
            Err(e) => return Err(format!("waiting for `{program}`: {e}")),
        }
        if tty {
            let samples = read_capped(status).ok().and_then(|s| parse_status(&s)).unwrap_or(0);
            err_print!("\r\x1b[K[oxprof] recording {:.1}s, {} samples", started.elapsed().as_secs_f64(), samples);
            let _ = std::io::stderr().flush();
            shown = true;
        }
        std::thread::sleep(Duration::from_millis(if tty { 250 } else { 50 }));
    }
}

fn parse_status(s: &str) -> Option<u64> {
    s.split_whitespace().find_map(|kv| kv.strip_prefix("samples=")).and_then(|v| v.parse().ok())
}

/// Prints what the agent said (warnings, summary) and every file it wrote
/// in this run, as its log names them (a file left by an earlier run is
/// never named).
pub fn report(log_text: &str) {
    let mut written: Vec<PathBuf> = Vec::new();
    for line in log_text.lines() {
        if let Some(p) = line.strip_prefix("[oxprof] profile written to ") {
            let p = PathBuf::from(p);
            if !written.contains(&p) {
                written.push(p);
            }
        } else if line.contains("summary:") {
            errln!("{line}");
        } else if line.contains("warning:") || line.contains("error:") {
            errln!("{}", agent_words(line));
        }
    }
    if written.is_empty() {
        errln!("[oxprof] no profile was written (did the JVM start? see the messages above)");
    }
    for p in written {
        errln!("[oxprof] profile written to {}", p.display());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(extra: &[&str]) -> RecordArgs {
        use clap::Parser;
        #[derive(Parser)]
        struct T {
            #[command(flatten)]
            r: RecordArgs,
        }
        let mut v = vec!["t"];
        v.extend_from_slice(extra);
        T::try_parse_from(v).map(|t| t.r).unwrap_or_else(|e| panic!("{e}"))
    }

    #[test]
    fn builds_agent_options_and_command() {
        let a = args(&["--interval", "5ms", "--threads", "-o", "x.collapsed", "--", "java", "-cp", "app", "Main"]);
        let o = agent_options(&a, Path::new("/o/x.collapsed"), Path::new("/l"), Path::new("/s")).unwrap();
        assert_eq!(o, "start,event=cpu,interval=5ms,file=/o/x.collapsed,jstackdepth=2048,log=/l,status=/s,threads");
        let cmd = java_command(&a.command, Path::new("/a/liboxprof.so"), &o).unwrap();
        let argv: Vec<_> = cmd.get_args().map(|s| s.to_string_lossy().into_owned()).collect();
        assert_eq!(argv[0], format!("-agentpath:/a/liboxprof.so={o}"));
        assert_eq!(&argv[1..], ["-cp", "app", "Main"]);
    }

    #[test]
    fn allocation_flags() {
        let a = args(&["--alloc", "--", "java"]);
        let o = agent_options(&a, Path::new("/p.html"), Path::new("/l"), Path::new("/s")).unwrap();
        assert!(o.starts_with("start,alloc,file="), "{o}");
        let a = args(&["--event", "itimer", "--alloc", "1m", "--alloc-threads", "w-*", "--total", "--", "java"]);
        let o = agent_options(&a, Path::new("/p.html"), Path::new("/l"), Path::new("/s")).unwrap();
        assert!(o.starts_with("start,event=itimer,alloc=1m,alloc_threads=w-*,total,file="), "{o}");
        let a = args(&["--live", "--gc-roots", "-o", "leaks.txt", "--", "java"]);
        let o = agent_options(&a, Path::new("/leaks.txt"), Path::new("/l"), Path::new("/s")).unwrap();
        assert!(o.starts_with("start,alloc=512k,live,gcroots=5s,file="), "{o}");
        let a = args(&["--interval", "2ms", "--alloc", "--", "java"]);
        let o = agent_options(&a, Path::new("/p.html"), Path::new("/l"), Path::new("/s")).unwrap();
        assert!(o.starts_with("start,alloc,interval=2ms,"), "CPU too, at 2ms: {o}");
    }

    #[test]
    fn wall_clock_flags() {
        let o = |a: &[&str]| agent_options(&args(a), Path::new("/w.html"), Path::new("/l"), Path::new("/s")).unwrap();
        assert!(o(&["--event", "wall", "--threads", "--", "java"]).starts_with("start,event=wall,file="));
        assert!(o(&["--event", "wall", "--interval", "20ms", "--", "java"]).starts_with("start,event=wall,interval=20ms,"));
        assert!(o(&["--wall", "--", "java"]).starts_with("start,wall,file="));
        assert!(o(&["--event", "cpu", "--wall", "50ms", "--state", "--alloc", "--", "java"]).starts_with("start,event=cpu,wall=50ms,alloc,state,"));
        #[derive(clap::Parser)]
        struct T {
            #[command(flatten)]
            r: RecordArgs,
        }
        use clap::Parser;
        assert!(o(&["--event", "lock", "--", "java"]).starts_with("start,event=lock,file=/w.html,"));
        assert!(o(&["--lock", "0", "--", "java"]).starts_with("start,lock=0,file="));
        assert!(o(&["--ttsp", "--", "java"]).starts_with("start,event=cpu,ttsp,file="));
        let e =
            agent_options(&args(&["--begin", "f(int, long)", "--end", "g", "--", "java"]), Path::new("/w.html"), Path::new("/l"), Path::new("/s")).unwrap_err();
        assert!(e.contains("--begin function") && e.contains("comma"), "{e}");
        assert!(o(&["--begin", "my_begin", "--end", "_ZN3Foo3endEv", "--", "java"]).starts_with("start,event=cpu,begin=my_begin,end=_ZN3Foo3endEv,file="));
        assert!(o(&["--event", "cpu", "--wall", "--lock", "--", "java"]).starts_with("start,event=cpu,lock,wall,"));
        // --begin without --end (or the other way) is refused by clap, naming both.
        let e = T::try_parse_from(["t", "--begin", "f", "--", "java"]).err().unwrap().to_string();
        assert!(e.contains("--end <FUNCTION>"), "{e}");
        let e = T::try_parse_from(["t", "--wall", "20us", "--", "java"]).err().unwrap().to_string();
        assert!(e.contains("--wall") && e.contains("at least 100us"), "{e}");
        let e = T::try_parse_from(["t", "--wall", "abc", "--", "java"]).err().unwrap().to_string();
        assert!(e.contains("--wall"), "{e}");
    }

    #[test]
    fn native_stack_flag() {
        let a = args(&["--cstack", "no", "--", "java"]);
        let o = agent_options(&a, Path::new("/p.html"), Path::new("/l"), Path::new("/s")).unwrap();
        assert!(o.ends_with(",cstack=no"), "{o}");
        let a = args(&["--", "java"]);
        assert!(!agent_options(&a, Path::new("/p.html"), Path::new("/l"), Path::new("/s")).unwrap().contains("cstack"));
        use clap::Parser;
        #[derive(Parser)]
        struct T {
            #[command(flatten)]
            _r: RecordArgs,
        }
        let e = T::try_parse_from(["t", "--cstack", "lbr", "--", "java"]).err().unwrap().to_string();
        assert!(e.contains("invalid value 'lbr' for '--cstack <MODE>'") && e.contains("[possible values: fp, dwarf, no]"), "{e}");
    }

    /// Our temporary directory is never one somebody prepared: not the old
    /// predictable `oxprof-record-<pid>` with a symlink planted in it.
    #[test]
    fn temporary_files_go_to_a_fresh_private_directory() {
        use std::os::unix::fs::{MetadataExt, PermissionsExt};
        let planted = std::env::temp_dir().join(format!("oxprof-record-{}", std::process::id()));
        let victim = std::env::temp_dir().join(format!("oxprof-record-victim-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&planted);
        std::fs::create_dir_all(&planted).unwrap();
        std::fs::set_permissions(&planted, std::fs::Permissions::from_mode(0o777)).unwrap();
        std::fs::write(&victim, "victim").unwrap();
        std::os::unix::fs::symlink(&victim, planted.join("agent.log")).unwrap();
        let tmp = TempFiles::new().unwrap();
        let dir = tmp.dir.clone();
        let meta = std::fs::symlink_metadata(&dir).unwrap();
        let made = tmp.create("agent.log", b"ours");
        let again = tmp.create("agent.log", b"again");
        drop(tmp);
        let planted_left = std::fs::read_link(planted.join("agent.log"));
        let victim_text = std::fs::read_to_string(&victim);
        let _ = std::fs::remove_dir_all(&planted);
        let _ = std::fs::remove_file(&victim);
        assert_ne!(dir, planted, "the predictable directory was used");
        assert!(dir.file_name().unwrap().to_str().unwrap().starts_with("oxprof-record-"), "{}", dir.display());
        // SAFETY: geteuid cannot fail.
        let euid = unsafe { libc::geteuid() };
        assert!(meta.is_dir() && meta.mode() & 0o777 == 0o700 && meta.uid() == euid, "{meta:?}");
        assert_eq!(made.unwrap(), dir.join("agent.log"));
        assert_eq!(again.unwrap_err().kind(), std::io::ErrorKind::AlreadyExists, "an existing file was reused");
        assert!(!dir.exists(), "not removed");
        assert_eq!(planted_left.unwrap(), victim, "the planted symlink was touched");
        assert_eq!(victim_text.unwrap(), "victim");
    }

    #[test]
    fn capped_reads_refuse_fifos_and_symlinks() {
        let tmp = TempFiles::named("oxprof-record-test").unwrap();
        let fifo = std::ffi::CString::new(tmp.dir.join("status").into_os_string().into_encoded_bytes()).unwrap();
        // SAFETY: a NUL-terminated path that outlives the call.
        assert_eq!(unsafe { libc::mkfifo(fifo.as_ptr(), 0o600) }, 0);
        assert!(read_capped(&tmp.dir.join("status")).unwrap_err().to_string().contains("not a regular file"));
        let log = tmp.create("agent.log", "x".repeat(100_000).as_bytes()).unwrap();
        assert_eq!(read_capped(&log).unwrap().len(), 64 * 1024);
        std::os::unix::fs::symlink(&log, tmp.dir.join("link")).unwrap();
        assert!(read_capped(&tmp.dir.join("link")).is_err());
    }

    #[test]
    fn rejects_commas_and_bad_intervals() {
        let a = args(&["--title", "a,b", "--", "java"]);
        assert!(agent_options(&a, Path::new("/o.html"), Path::new("/l"), Path::new("/s")).is_err());
        assert!(parse_interval("-5ms").is_err());
        let e = agent_options(&args(&["--interval", "50us", "--", "java"]), Path::new("/o.html"), Path::new("/l"), Path::new("/s")).unwrap_err();
        assert!(e.starts_with("--interval 50us: ") && e.contains("at least 100us"), "{e}");
        assert!(agent_options(&args(&["--event", "wall", "--interval", "99us", "--", "java"]), Path::new("/o.html"), Path::new("/l"), Path::new("/s")).is_err());
        assert!(agent_options(&args(&["--interval", "100us", "--", "java"]), Path::new("/o.html"), Path::new("/l"), Path::new("/s")).is_ok());
        // For lock profiling alone it is the mean waiting time per sample.
        assert!(agent_options(&args(&["--event", "lock", "--interval", "20us", "--", "java"]), Path::new("/o.html"), Path::new("/l"), Path::new("/s")).is_ok());
        // 0: every contended acquisition for locks; no sampling interval.
        let o = agent_options(&args(&["--event", "lock", "--interval", "0", "--", "java"]), Path::new("/o.html"), Path::new("/l"), Path::new("/s")).unwrap();
        assert!(o.contains("interval=0"), "{o}");
        let e = agent_options(&args(&["--interval", "0", "--", "java"]), Path::new("/o.html"), Path::new("/l"), Path::new("/s")).unwrap_err();
        assert!(e.starts_with("--interval 0: ") && e.contains("at least 100us"), "{e}");
        assert_eq!(parse_status("samples=42 elapsed_ms=7\n"), Some(42));
    }
}

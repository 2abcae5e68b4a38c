//! Helpers for the integration tests: compile Java programs with `javac`, run
//! them under the real agent, and read the profiles back.
#![allow(dead_code)]

pub mod api;

use std::io::BufRead;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};

/// The `oxprof` binary built for this test run.
pub fn oxprof() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_oxprof"))
}

/// `liboxprof.so` as built for this test run. The CLI's dev-dependency on the
/// agent crate makes cargo build it into `deps/`; a `cargo build` may have
/// left an older copy beside the binary, so the newest one wins.
pub fn agent() -> PathBuf {
    let dir = oxprof().parent().unwrap().to_path_buf();
    [dir.join("deps/liboxprof.so"), dir.join("liboxprof.so")]
        .into_iter()
        .filter(|p| p.is_file())
        .max_by_key(|p| std::fs::metadata(p).and_then(|m| m.modified()).ok())
        .unwrap_or_else(|| panic!("liboxprof.so not found next to {}", oxprof().display()))
}

/// `oxprof` as a command that uses this run's agent.
pub fn oxprof_cmd() -> Command {
    let mut c = Command::new(oxprof());
    c.env("OXPROF_AGENT", agent());
    c
}

/// `java`, from $JAVA_HOME or PATH (a JDK is required for these tests).
pub fn java() -> PathBuf {
    tool("java")
}

pub fn tool(name: &str) -> PathBuf {
    if let Some(h) = std::env::var_os("JAVA_HOME") {
        let p = PathBuf::from(h).join("bin").join(name);
        if p.is_file() {
            return p;
        }
    }
    std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default())
        .map(|d| d.join(name))
        .find(|p| p.is_file())
        .unwrap_or_else(|| panic!("`{name}` not found: the integration tests need a JDK (apt-get install openjdk-17-jdk-headless)"))
}

static COUNTER: AtomicUsize = AtomicUsize::new(0);

/// A fresh scratch directory, removed when dropped (kept if the test failed
/// and OXPROF_KEEP_TEST_DIRS is set).
pub struct Scratch(pub PathBuf);

impl Scratch {
    pub fn new(name: &str) -> Scratch {
        let n = COUNTER.fetch_add(1, Ordering::SeqCst);
        let dir = std::env::temp_dir().join(format!("oxprof-test-{}-{name}-{n}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        Scratch(dir)
    }

    pub fn path(&self, name: &str) -> PathBuf {
        self.0.join(name)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        if std::env::var_os("OXPROF_KEEP_TEST_DIRS").is_none() {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }
}

/// Compiles the Java sources in `tests/java/NAMES` into `out` (release 11 so
/// they run on every supported JDK), with `CpuBudget.java`, which the
/// programs that burn CPU share: they run for an amount of CPU time, not of
/// wall time, so their sample counts do not depend on how busy the machine is.
pub fn compile(out: &Path, names: &[&str]) {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/java");
    let mut cmd = Command::new(tool("javac"));
    cmd.arg("--release").arg("11").arg("-d").arg(out);
    for n in names.iter().chain(&["CpuBudget.java"]) {
        cmd.arg(src.join(n));
    }
    let o = cmd.output().expect("run javac");
    assert!(o.status.success(), "javac failed: {}", String::from_utf8_lossy(&o.stderr));
}

/// `oxprof.jar` (the Java API), which the agent's build script writes into
/// the target directory beside the `oxprof` binary.
pub fn jar() -> PathBuf {
    let p = oxprof().parent().unwrap().join("oxprof.jar");
    assert!(p.is_file(), "{} not built: the agent's build needs `javac` and `jar` (a JDK)", p.display());
    p
}

/// [`compile`] with `oxprof.jar` on the class path, for programs that use
/// the Java API.
pub fn compile_with_jar(out: &Path, names: &[&str]) {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/java");
    let mut cmd = Command::new(tool("javac"));
    cmd.arg("--release").arg("11").arg("-cp").arg(jar()).arg("-d").arg(out);
    for n in names.iter().chain(&["CpuBudget.java"]) {
        cmd.arg(src.join(n));
    }
    let o = cmd.output().expect("run javac");
    assert!(o.status.success(), "javac failed: {}", String::from_utf8_lossy(&o.stderr));
}

/// A class path of `dir` and `oxprof.jar`.
pub fn with_jar(dir: &Path) -> String {
    format!("{}:{}", dir.display(), jar().display())
}

/// Runs `java -agentpath:liboxprof.so=OPTS -cp CP ARGS...` in `cwd`.
pub fn run_java(cwd: &Path, opts: &str, jvm_args: &[&str], cp: &Path, main_and_args: &[&str]) -> Output {
    run_java_env(cwd, &[], opts, jvm_args, cp, main_and_args)
}

/// [`run_java`] with environment variables set for the JVM (the agent's
/// diagnostic switches such as `OXPROF_PERF_SIGNAL`).
pub fn run_java_env(cwd: &Path, env: &[(&str, &str)], opts: &str, jvm_args: &[&str], cp: &Path, main_and_args: &[&str]) -> Output {
    let mut cmd = Command::new(java());
    cmd.current_dir(cwd);
    cmd.envs(env.iter().copied());
    cmd.arg(format!("-agentpath:{}={}", agent().display(), opts));
    cmd.args(jvm_args);
    cmd.arg("-cp").arg(cp);
    cmd.args(main_and_args);
    cmd.output().expect("run java")
}

/// A JVM left running for a test, killed when dropped. It runs in the
/// scratch directory, so what a JVM drops in its working directory (the
/// attach handshake's `.attach_pid<pid>`, a fallback profile) never lands in
/// the source tree.
pub struct RunningJvm {
    pub child: Child,
}

impl RunningJvm {
    /// Starts `cmd` in `cwd` with piped stdin, stdout and stderr, and waits
    /// for the program's first line, which must be `ready_line`.
    pub fn spawn(mut cmd: Command, cwd: &Path, ready_line: &str) -> RunningJvm {
        let child = cmd.current_dir(cwd).stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().expect("start java");
        let mut jvm = RunningJvm { child };
        let mut line = String::new();
        std::io::BufReader::new(jvm.child.stdout.as_mut().unwrap()).read_line(&mut line).unwrap();
        assert_eq!(line.trim(), ready_line, "the program's first line");
        jvm.remove_stale_attach_socket();
        jvm
    }

    /// Removes `/tmp/.java_pid<pid>` when it belongs to another user than
    /// this JVM: left by a JVM of another user killed earlier in the run,
    /// whose pid was reused. `oxprof attach` refuses such a socket and says
    /// to remove it, as an operator would (a CI run failed on one).
    fn remove_stale_attach_socket(&self) {
        use std::os::unix::fs::MetadataExt;
        let pid = self.pid();
        let Ok(jvm_uid) = std::fs::metadata(format!("/proc/{pid}")).map(|m| m.uid()) else { return };
        let socket = format!("/tmp/.java_pid{pid}");
        if std::fs::symlink_metadata(&socket).is_ok_and(|m| m.uid() != jvm_uid) {
            let _ = std::fs::remove_file(&socket);
        }
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    pub fn alive(&mut self) -> bool {
        self.child.try_wait().unwrap().is_none()
    }

    /// Waits for the program to end, with what it printed after the ready line.
    pub fn finish(&mut self) -> Output {
        use std::io::Read;
        let err = self.child.stderr.take().map(|mut e| {
            std::thread::spawn(move || {
                let mut v = Vec::new();
                let _ = e.read_to_end(&mut v);
                v
            })
        });
        let mut stdout = Vec::new();
        if let Some(mut o) = self.child.stdout.take() {
            let _ = o.read_to_end(&mut stdout);
        }
        let status = self.child.wait().unwrap();
        let stderr = err.map(|t| t.join().unwrap()).unwrap_or_default();
        Output { status, stdout, stderr }
    }
}

impl Drop for RunningJvm {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `java ARGS...` as a command (start it with [`RunningJvm::spawn`]).
pub fn java_cmd<S: AsRef<std::ffi::OsStr>>(args: impl IntoIterator<Item = S>) -> Command {
    let mut cmd = Command::new(java());
    cmd.args(args);
    cmd
}

pub fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// `jfr summary` reads the file and counts `event` events.
pub fn jfr_count(path: &Path, event: &str) -> u64 {
    let o = Command::new(tool("jfr")).arg("summary").arg(path).output().unwrap();
    assert!(o.status.success(), "jfr summary {}: {}", path.display(), text(&o.stderr));
    text(&o.stdout)
        .lines()
        .find(|l| l.split_whitespace().next() == Some(event))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|n| n.parse().ok())
        .unwrap_or(0)
}

/// The root frames the agent gives a Java thread's sample whose stack walk
/// failed (above them: native frames, or the Java frames of a walk that
/// stopped short).
pub const FAILURE_MARKERS: [&str; 12] = [
    "[no_class_load]",
    "[gc_active]",
    "[unknown_not_Java]",
    "[not_walkable_not_Java]",
    "[unknown_Java]",
    "[not_walkable_Java]",
    "[unknown_state]",
    "[thread_exit]",
    "[deopt]",
    "[safepoint]",
    "[truncated]",
    "[unknown_error]",
];

/// Collapsed stacks: (frames root first, count).
pub type Collapsed = Vec<(Vec<String>, u64)>;

/// Collapsed stacks: (frames root first, count).
pub fn read_collapsed(path: &Path) -> Collapsed {
    let s = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("read {}: {e}", path.display()));
    s.lines()
        .map(|l| {
            let (stack, count) = l.rsplit_once(' ').unwrap_or_else(|| panic!("bad collapsed line {l:?}"));
            (stack.split(';').map(str::to_string).collect(), count.parse().unwrap_or_else(|_| panic!("bad count in {l:?}")))
        })
        .collect()
}

/// Samples whose stack contains a frame equal to `frame`.
pub fn samples_with(stacks: &[(Vec<String>, u64)], frame: &str) -> u64 {
    stacks.iter().filter(|(s, _)| s.iter().any(|f| f == frame)).map(|(_, n)| n).sum()
}

pub fn total(stacks: &[(Vec<String>, u64)]) -> u64 {
    stacks.iter().map(|(_, n)| n).sum()
}

/// The key=value pairs of the agent's `summary:` log line.
pub fn summary(stderr: &str) -> std::collections::HashMap<String, String> {
    summary_line(stderr, "[oxprof] summary:")
}

/// The key=value pairs of the agent's `alloc summary:` log line.
pub fn alloc_summary(stderr: &str) -> std::collections::HashMap<String, u64> {
    summary_line(stderr, "[oxprof] alloc summary:").into_iter().filter_map(|(k, v)| Some((k, v.parse().ok()?))).collect()
}

/// The `key=value` fields of the agent's log line that contains `marker`.
pub fn summary_fields(stderr: &str, marker: &str) -> std::collections::HashMap<String, String> {
    summary_line(stderr, marker)
}

fn summary_line(stderr: &str, marker: &str) -> std::collections::HashMap<String, String> {
    let line = stderr.lines().find(|l| l.contains(marker)).unwrap_or_else(|| panic!("no {marker:?} line in:\n{stderr}"));
    line.split(marker).nth(1).unwrap().split_whitespace().filter_map(|kv| kv.split_once('=')).map(|(k, v)| (k.to_string(), v.to_string())).collect()
}

/// Runs `AllocPaths` (compiled into `cp`) with `java` under allocation
/// sampling, with the agent comparing each of its own allocation-stack walks
/// with JVMTI `GetStackTrace` (`OXPROF_CHECK_ALLOC_WALK=1`). Returns the
/// alloc summary's counts and the collapsed stacks.
pub fn alloc_walk_check(java: &Path, cp: &Path, out: &Path) -> (std::collections::HashMap<String, u64>, Collapsed) {
    let o = Command::new(java)
        .current_dir(cp)
        .env("OXPROF_CHECK_ALLOC_WALK", "1")
        .arg(format!("-agentpath:{}=event=alloc,alloc=8k,file={}", agent().display(), out.display()))
        .args(["-cp", cp.to_str().unwrap(), "AllocPaths", "40000"])
        .output()
        .expect("run java");
    let err = text(&o.stderr);
    assert!(o.status.success(), "{}: {err}", java.display());
    let mut counts = alloc_summary(&err);
    eprintln!("{}: {counts:?}", java.display());
    // Printed only when there was something to check.
    for k in ["walk_checked", "walk_mismatched"] {
        counts.entry(k.to_string()).or_insert(0);
    }
    // The first differences, if any, are in the log.
    assert_eq!(counts["walk_mismatched"], 0, "{}: own walks differ from GetStackTrace:\n{err}", java.display());
    assert_eq!(counts["walk_checked"], counts["own_walks"], "{}", java.display());
    assert_eq!(counts["own_walks"] + counts["jvmti_walks"], counts["samples"], "{}", java.display());
    (counts, read_collapsed(out))
}

/// Asserts that the JVM refused to start because of a bad agent option, with
/// exactly one `oxprof:` line containing `expected`, and that `main` never ran.
pub fn assert_refused(o: &Output, opts: &str, expected: &str) {
    let err = text(&o.stderr);
    assert!(!o.status.success(), "{opts}: the JVM started anyway");
    // The JVM reports the refusal on stdout; anything else there came from the program.
    let stdout = text(&o.stdout);
    let program: Vec<&str> =
        stdout.lines().filter(|l| !l.starts_with("Error occurred during initialization of VM") && !l.starts_with("agent library failed")).collect();
    assert!(program.iter().all(|l| l.trim().is_empty()), "{opts}: the program ran: {stdout}");
    let ours: Vec<&str> = err.lines().filter(|l| l.starts_with("oxprof:")).collect();
    assert_eq!(ours.len(), 1, "{opts}: expected one oxprof line in:\n{err}");
    assert!(ours[0].contains(expected), "{opts}: got {:?}, expected {expected:?}", ours[0]);
}

#[path = "../../../attach/tests/common/jdks.rs"]
mod jdks;
#[allow(unused_imports)]
pub use jdks::extra_jdks;

/// The feature version of the JVM `java` runs (`"21.0.8"` → 21), from
/// `java -version`; 0 when it cannot be read.
pub fn java_major(java: &Path) -> u32 {
    let Ok(o) = Command::new(java).arg("-version").output() else { return 0 };
    text(&o.stderr).split('"').nth(1).and_then(|v| v.split('.').next()).and_then(|m| m.parse().ok()).unwrap_or(0)
}

/// Whether the running kernel is at least `major.minor`.
pub fn kernel_at_least(major: u32, minor: u32) -> bool {
    let release = std::fs::read_to_string("/proc/sys/kernel/osrelease").expect("kernel release");
    let mut parts = release.trim().split(|c: char| !c.is_ascii_digit()).filter_map(|p| p.parse::<u32>().ok());
    (parts.next().unwrap_or(0), parts.next().unwrap_or(0)) >= (major, minor)
}

/// How long a test waits for a program to do the work its checks need. The
/// work is counted (in CPU time, samples, log lines), not the wall time, so
/// a slow or busy machine makes a test slower, not failed; a machine that
/// cannot do the work within this cap fails the test with a message saying so.
pub const WORK_CAP: std::time::Duration = std::time::Duration::from_secs(300);

/// The CPU time (user + system) process `pid` has used so far, in ms.
pub fn process_cpu_ms(pid: u32) -> u64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_else(|e| panic!("process {pid}: {e}"));
    let fields: Vec<&str> = stat.rsplit_once(") ").expect("/proc/PID/stat").1.split_whitespace().collect();
    let ticks = fields[11].parse::<u64>().unwrap() + fields[12].parse::<u64>().unwrap();
    // SAFETY: sysconf only reads a configuration value.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as u64;
    ticks * 1000 / hz
}

/// Waits until process `pid` has used `ms` more CPU time than `from` (a
/// [`process_cpu_ms`] reading), however much wall time that takes up to
/// [`WORK_CAP`]; panics naming `what` past the cap or if the process ends.
pub fn wait_for_cpu(pid: u32, from: u64, ms: u64, what: &str) {
    let started = std::time::Instant::now();
    loop {
        let used = process_cpu_ms(pid).saturating_sub(from);
        if used >= ms {
            return;
        }
        assert!(
            started.elapsed() < WORK_CAP,
            "{what}: process {pid} used only {used} of {ms} ms of CPU time in {} s: the machine is too busy",
            WORK_CAP.as_secs()
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

/// Whether process `pid` catches signal `sig` (its bit in `SigCgt`).
fn catches(pid: u32, sig: i32) -> bool {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let mask = status.lines().find_map(|l| l.strip_prefix("SigCgt:")).and_then(|m| u64::from_str_radix(m.trim(), 16).ok()).unwrap_or(0);
    mask & (1 << (sig - 1)) != 0
}

/// A child process killed when dropped (a test that panics leaves none behind).
struct KillOnDrop(Option<Child>);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        if let Some(c) = self.0.as_mut() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// `oxprof attach PID --duration ... ARGS` (the one-shot profile) run until
/// the JVM has used `cpu_ms` of CPU time while profiled, then stopped early
/// with SIGINT as Ctrl-C stops it, so the profile holds as many samples on a
/// busy machine as on an idle one. Its output, as `Command::output` gives it.
pub fn attach_for_cpu(cmd: Command, pid: u32, cpu_ms: u64, args: &[&str]) -> Output {
    let mut cmd = cmd;
    let child = cmd
        .arg("attach")
        .arg(pid.to_string())
        .args(["--duration", &format!("{}s", WORK_CAP.as_secs())])
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run oxprof attach");
    let mut guard = KillOnDrop(Some(child));
    let cli = guard.0.as_ref().unwrap().id();
    // Profiling has started once the CLI catches SIGINT (before, SIGINT would kill it).
    let started = std::time::Instant::now();
    while !catches(cli, libc::SIGINT) {
        if guard.0.as_mut().unwrap().try_wait().unwrap().is_some() {
            return guard.0.take().unwrap().wait_with_output().unwrap();
        }
        assert!(started.elapsed() < WORK_CAP, "oxprof attach {pid} did not start profiling in {} s", WORK_CAP.as_secs());
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    wait_for_cpu(pid, process_cpu_ms(pid), cpu_ms, &format!("oxprof attach {pid} {args:?}"));
    // SAFETY: kill takes a pid and a signal by value; the child is not reaped yet.
    unsafe { libc::kill(cli as i32, libc::SIGINT) };
    guard.0.take().unwrap().wait_with_output().unwrap()
}

/// One run of `AllocBias` (many threads interleaving 48-byte and 1–17 KiB
/// arrays; per-site truth from each thread's own allocation counter) under
/// allocation sampling to JFR, and `oxprof report` on the recording.
pub struct AllocBiasRun {
    pub truth: std::collections::HashMap<String, f64>,
    /// The agent's alloc summary line, as key=value strings.
    pub summary: std::collections::HashMap<String, String>,
    pub report: String,
    pub stderr: String,
}

impl AllocBiasRun {
    /// Runs it with `java` and `jvm_args`; `cp` holds the compiled `AllocBias`.
    pub fn run(java: &Path, cp: &Path, jvm_args: &[&str], threads: u32, total_rounds: u64) -> AllocBiasRun {
        let rec = cp.join(format!("bias-{}.jfr", std::process::id()));
        let o = Command::new(java)
            .args(jvm_args)
            .arg(format!("-agentpath:{}=start,event=alloc,file={}", agent().display(), rec.display()))
            .args(["-cp", cp.to_str().unwrap(), "AllocBias", &threads.to_string(), &total_rounds.to_string()])
            .output()
            .expect("run java");
        let (stdout, stderr) = (text(&o.stdout), text(&o.stderr));
        assert!(o.status.success(), "{stderr}");
        let line = stdout.lines().find(|l| l.starts_with("TRUTH ")).unwrap_or_else(|| panic!("no truth line in {stdout}"));
        let truth = line.split_whitespace().filter_map(|kv| kv.split_once('=')).filter_map(|(k, v)| Some((k.to_string(), v.parse().ok()?))).collect();
        let summary = summary_line(&stderr, "[oxprof] alloc summary:");
        let r = oxprof_cmd().args(["report", rec.to_str().unwrap(), "--top", "4"]).output().expect("run oxprof report");
        assert!(r.status.success(), "report: {}", text(&r.stderr));
        let _ = std::fs::remove_file(&rec);
        AllocBiasRun { truth, summary, report: text(&r.stdout), stderr }
    }

    /// The report's row for allocations of `byte[]` in `AllocBias.<site>`.
    fn row(&self, site: &str) -> &str {
        let tail = format!("byte[]  <-  AllocBias.{site}");
        self.report.lines().find(|l| l.ends_with(&tail)).unwrap_or_else(|| panic!("no {tail} row in:\n{}", self.report))
    }

    /// The site's share of the estimated bytes over its true share.
    pub fn share_ratio(&self, site: &str) -> f64 {
        let est: f64 = self.row(site).split_whitespace().find_map(|w| w.trim_end_matches('~').strip_suffix('%')?.parse().ok()).expect("share column");
        let t = |k: &str| self.truth[k];
        est / (100.0 * t(site) / (t("tiny") + t("large")))
    }

    /// Whether the report marks the site's figure as unreliable.
    pub fn marked(&self, site: &str) -> bool {
        self.row(site).contains("%~")
    }

    /// The agent's estimated bytes over every thread's exact allocated
    /// bytes, as the program measured them.
    pub fn total_ratio(&self) -> f64 {
        self.summary["estimated_bytes"].parse::<f64>().unwrap() / self.truth["threads_all"]
    }

    pub fn sampler_vs_exact(&self) -> f64 {
        self.summary["sampler_vs_exact"].parse().unwrap_or_else(|_| panic!("no sampler_vs_exact in {}", self.stderr))
    }
}

/// Wall nanoseconds per (thread name, state) from a collapsed file written
/// with `threads,state,total` (the state frame first, then the thread's).
pub fn by_thread_and_state(path: &Path) -> std::collections::HashMap<(String, String), f64> {
    let mut out = std::collections::HashMap::new();
    for (stack, n) in read_collapsed(path) {
        let (Some(state), Some(thread)) = (stack.first(), stack.get(1)) else { continue };
        let name = thread.trim_start_matches('[').split(" tid=").next().unwrap_or("").to_string();
        *out.entry((name, state.trim_matches(['[', ']']).to_string())).or_default() += n as f64;
    }
    out
}

/// Checks one WallStates run (see tests/java/WallStates.java): the mixed
/// thread's share of each state within 3 points of its own nanoTime truth,
/// the blocked and accepting threads' states, and that each thread's
/// samples add up to the time it lived.
pub fn check_wall_states(java: &Path, label: &str) {
    let s = Scratch::new("wall-states");
    compile(&s.0, &["WallStates.java"]);
    let out = s.path("w.collapsed");
    let o = run_java_in(java, &s.0, &format!("start,event=wall,interval=5ms,threads,state,total,file={}", out.display()), &["WallStates", "5"]);
    let err = text(&o.stderr);
    assert!(o.status.success(), "{label}: {err}");
    let t = truth_line(&text(&o.stdout));
    let got = by_thread_and_state(&out);
    let of = |thread: &str, state: &str| got.get(&(thread.to_string(), state.to_string())).copied().unwrap_or(0.0);
    let total_of = |thread: &str| got.iter().filter(|((t, _), _)| t == thread).map(|(_, v)| v).sum::<f64>();
    let mixed = total_of("mixed");
    let phases = t["burn"] + t["sleep"] + t["wait"] + t["park"];
    for (state, key) in [("running", "burn"), ("sleeping", "sleep"), ("waiting", "wait"), ("parked", "park")] {
        let (share, truth_share) = (100.0 * of("mixed", state) / mixed, 100.0 * t[key] / phases);
        eprintln!("{label}: mixed {state}: {share:.1}% of its wall time, truth {truth_share:.1}%");
        assert!((share - truth_share).abs() <= 3.0, "{label}: mixed {state} {share:.1}% vs truth {truth_share:.1}%\n{got:?}");
    }
    let blocked = 100.0 * of("blocked", "blocked") / total_of("blocked");
    let native = 100.0 * of("acceptor", "native") / total_of("acceptor");
    eprintln!("{label}: blocked thread {blocked:.1}% blocked, acceptor {native:.1}% native");
    assert!(blocked >= 95.0, "{label}: the thread blocked on a monitor is blocked in {blocked:.1}% of its samples\n{got:?}");
    assert!(native >= 95.0, "{label}: the thread in accept() is native in {native:.1}% of its samples\n{got:?}");
    // Totals: each thread's samples sum to its time alive (the mixed
    // thread's phases; the blocked one lives as long, less its start).
    let ratio = mixed / phases;
    eprintln!("{label}: mixed thread sampled {:.0} ms of {:.0} ms lived", mixed / 1e6, phases / 1e6);
    assert!((0.95..=1.03).contains(&ratio), "{label}: the mixed thread's samples sum to {ratio:.3} of its time");
    let w = summary_line(&err, "[oxprof] wall summary:");
    let (reused, signalled): (u64, u64) = (w["reused"].parse().unwrap(), w["signalled"].parse().unwrap());
    assert!(reused > signalled, "{label}: idle threads should be counted without a signal: {err}");
    // Issue 24's bound: at most 0.1% of samples may fail (a thread caught at
    // its very start or end, say).
    let failed: f64 = w["failed_pct"].parse().unwrap();
    assert!(failed <= 0.1, "{label}: {failed}% failed walks: {err}");
}

/// The `TRUTH k=v ...` line a test program prints, as numbers.
pub fn truth_line(stdout: &str) -> std::collections::HashMap<String, f64> {
    let line = stdout.lines().find(|l| l.starts_with("TRUTH ")).unwrap_or_else(|| panic!("no truth in {stdout}"));
    line.split_whitespace().filter_map(|kv| kv.split_once('=')).filter_map(|(k, v)| Some((k.to_string(), v.parse().ok()?))).collect()
}

/// Runs `main_and_args` from the classes in `cp` under the JVM `java` (one of
/// the supported JDKs) with the agent and its options `opts`.
pub fn run_java_in(java: &Path, cp: &Path, opts: &str, main_and_args: &[&str]) -> Output {
    Command::new(java).arg(format!("-agentpath:{}={opts}", agent().display())).arg("-cp").arg(cp).args(main_and_args).output().expect("run java")
}

/// Runs LockContention under `event=lock,lock=INTERVAL` with `java`; checks
/// each site's estimated waiting time against the program's truth (10%),
/// the leaf classes, and that the JVM printed no warning.
pub fn check_lock_sites(java: &Path, interval: &str, label: &str) {
    let s = Scratch::new("lock-sites");
    compile(&s.0, &["LockContention.java"]);
    let out = s.path("l.collapsed");
    let o = run_java_in(java, &s.0, &format!("start,event=lock,lock={interval},total,file={}", out.display()), &["LockContention", "3"]);
    let (stdout, err) = (text(&o.stdout), text(&o.stderr));
    assert!(o.status.success(), "{label}: {err}");
    // HotSpot warns when a platform native method is rebound from another
    // class loader; oxprof rebinds Unsafe.park through a boot-loader class.
    assert!(!stdout.contains("warning") && !err.contains("[warning]"), "{label}: the JVM warned:\n{stdout}\n{err}");
    assert!(err.contains("monitors and java.util.concurrent locks"), "{label}: {err}");
    let t = truth_line(&stdout);
    let stacks = read_collapsed(&out);
    for (site, key, class) in [
        ("LockContention.monitorSite", "monitor_wait", "java.lang.Object"),
        ("LockContention.reentrantSite", "lock_wait", "java.util.concurrent.locks.ReentrantLock$NonfairSync"),
    ] {
        let est = samples_with(&stacks, site) as f64;
        let err_pct = 100.0 * (est - t[key]).abs() / t[key];
        eprintln!("{label} lock={interval}: {site} waited {:.0} ms, truth {:.0} ms ({err_pct:.1}% off)", est / 1e6, t[key] / 1e6);
        assert!(err_pct <= 10.0, "{label} lock={interval}: {site} estimated {est:.0} ns, truth {:.0}", t[key]);
        // The lock's class is the leaf. Other monitors contended now and then
        // on the same path (the JDK's own, such as ThreadGroup's) are real
        // waits too, but small.
        let under_class: u64 = stacks.iter().filter(|(st, _)| st.iter().any(|f| f == site) && st.last().is_some_and(|l| l == class)).map(|(_, n)| n).sum();
        assert!(under_class as f64 >= 0.95 * est, "{label}: {site}: only {under_class} of {est:.0} ns under {class}\n{stacks:?}");
    }
}

/// Runs `LockOwners` (tests/java/LockOwners.java) under `java` with every
/// lock wait recorded, and checks that the waits of each site are split
/// by the `lock_owner` label as the program's own notes split them
/// (within 10 points, and within half of each holder's share), and that the totals hold (within 10%). `all_sites`:
/// also lock A, whose two holders share it only on some JDKs (see the
/// program); otherwise lock B (`java.util.concurrent`, one holder) and
/// monitor M (two holders in turns).
pub fn check_lock_owners(java: &Path, label: &str, all_sites: bool) {
    let s = Scratch::new("lock-owners");
    compile(&s.0, &["LockOwners.java"]);
    let col = s.path("o.collapsed");
    let o = run_java_in(java, &s.0, &format!("start,event=lock,lock=0,total,file={}", col.display()), &["LockOwners", "3"]);
    let (stdout, err) = (text(&o.stdout), text(&o.stderr));
    assert!(o.status.success(), "{label}: {err}");
    let t = truth_line(&stdout);
    let stacks = read_collapsed(&col);
    let sites = [
        ("LockOwners.waitOnB", "holder-B", "waitB"),
        ("LockOwners.waitOnM", "holder-M1", "waitM"),
        ("LockOwners.waitOnM", "holder-M2", "waitM"),
        ("LockOwners.waitOnA", "holder-A1", "waitA"),
        ("LockOwners.waitOnA", "holder-A2", "waitA"),
    ];
    for (site, holder, key) in sites.into_iter().take(if all_sites { 5 } else { 3 }) {
        let all = samples_with(&stacks, site) as f64;
        let owner = format!("[lock_owner={holder}]");
        let by_holder: u64 = stacks.iter().filter(|(st, _)| st.iter().any(|f| f == site) && st.contains(&owner)).map(|(_, n)| n).sum();
        let unlabelled: u64 =
            stacks.iter().filter(|(st, _)| st.iter().any(|f| f == site) && !st.iter().any(|f| f.starts_with("[lock_owner="))).map(|(_, n)| n).sum();
        let share = by_holder as f64 / all.max(1.0);
        let truth = t[&format!("{key}_by_{holder}")] / t[key];
        eprintln!(
            "{label}: {site}: {:.0} ms waited, {:.1}% of it with {holder} as owner (truth {:.1}%), {:.1}% without an owner",
            all / 1e6,
            100.0 * share,
            100.0 * truth,
            100.0 * unlabelled as f64 / all.max(1.0)
        );
        // B's holder and M's two (in turns) hold their lock for a part of
        // the waits worth checking by the program's design. A's split is the
        // scheduler's (its second holder got 0%, 17% and up to 50% in runs on
        // JDK 17): checked as it came out, so the allowed error shrinks with
        // the share: 10 points, at most half the holder's true share, at
        // least 1 point (a holder that never held it is not named).
        if !site.ends_with("waitOnA") {
            assert!(truth > 0.2, "{label}: the program's own truth: {holder} held the lock for only {:.0}% of the waits", 100.0 * truth);
        }
        assert!(
            (share - truth).abs() <= 0.10f64.min(truth / 2.0).max(0.01),
            "{label}: {site}: {:.1}% of the waiting time names {holder}, truth {:.1}%\n{stacks:?}",
            100.0 * share,
            100.0 * truth
        );
        assert!((all - t[key]).abs() <= 0.10 * t[key], "{label}: {site}: {all} ns waited, truth {}", t[key]);
    }
}

/// Times to safepoint from a `-Xlog:safepoint` file, in ns, in order:
/// "Reaching safepoint: N ns" (JDK 13 and later) or "Stopping threads
/// took: S seconds" (JDK 11).
pub fn jvm_safepoint_log(path: &Path) -> Vec<u64> {
    let log = std::fs::read_to_string(path).expect("read the safepoint log");
    let mut out = Vec::new();
    for line in log.lines() {
        if let Some(rest) = line.split("Reaching safepoint: ").nth(1) {
            out.push(rest.split(' ').next().unwrap().parse::<u64>().unwrap());
        } else if let Some(rest) = line.split("Stopping threads took: ").nth(1) {
            let s: f64 = rest.split(' ').next().unwrap().parse().unwrap();
            out.push((s * 1e9).round() as u64);
        }
    }
    out
}

/// Share of the samples in a collapsed file whose stack holds `frame`.
pub fn share_with(stacks: &[(Vec<String>, u64)], frame: &str) -> f64 {
    samples_with(stacks, frame) as f64 / total(stacks).max(1) as f64
}

/// Runs `main_and_args` (classes in the scratch directory, which is also
/// the working directory) with `java` under the JDK's own flight recorder
/// (`settings=profile`) and returns the recording, `name` in the scratch
/// directory.
pub fn jdk_flight_recording(java: &Path, s: &Scratch, name: &str, main_and_args: &[&str]) -> PathBuf {
    let jfr = s.path(name);
    let o = Command::new(java)
        .current_dir(&s.0)
        .arg(format!("-XX:StartFlightRecording=filename={},settings=profile", jfr.display()))
        .arg("-cp")
        .arg(&s.0)
        .args(main_and_args)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", text(&o.stderr));
    jfr
}

/// Times to safepoint in a JFR file (`jdk.SafepointStateSynchronization`
/// durations, in time order), read by the JDK's own `jfr` tool.
pub fn jfr_safepoint_times(path: &Path) -> Vec<u64> {
    let o = std::process::Command::new(tool("jfr")).args(["print", "--json", "--events", "jdk.SafepointStateSynchronization"]).arg(path).output().unwrap();
    assert!(o.status.success(), "jfr print: {}", text(&o.stderr));
    let json = text(&o.stdout);
    let mut out = Vec::new();
    for part in json.split("\"duration\": \"PT").skip(1) {
        let secs = part.split('S').next().unwrap();
        out.push((secs.parse::<f64>().unwrap() * 1e9).round() as u64);
    }
    out
}

/// Time-to-safepoint profiling of `TtspLoop` on `java`: the samples name
/// the loop that holds safepoints up (the plain CPU profile of the same
/// program, for contrast, gives it far less), and every safepoint recorded
/// agrees with the JVM's own `-Xlog:safepoint` (count, and each time to
/// safepoint of a millisecond or more within 10%).
pub fn check_ttsp(java: &Path, label: &str) {
    let s = Scratch::new("ttsp");
    compile(&s.0, &["TtspLoop.java"]);
    let run = |opts: &str, name: &str, ext: &str| {
        let out = s.path(&format!("{name}.{ext}"));
        let log = s.path(&format!("{name}.safepoints.log"));
        let o = std::process::Command::new(java)
            .current_dir(&s.0)
            .arg(format!("-agentpath:{}={opts},file={}", agent().display(), out.display()))
            .args(["-XX:-UseCountedLoopSafepoints", "-XX:LoopStripMiningIter=0"])
            .arg(format!("-Xlog:safepoint:file={}", log.display()))
            .args(["-cp", s.0.to_str().unwrap(), "TtspLoop", "3"])
            .output()
            .unwrap();
        let err = text(&o.stderr);
        assert!(o.status.success(), "{label} {opts}: {err}");
        (out, jvm_safepoint_log(&log), err)
    };
    let (jfr, jvm, err) = run("ttsp", "ttsp", "jfr");
    let collapsed = s.path("ttsp.collapsed");
    let o = oxprof_cmd().arg("convert").arg(&jfr).arg("-o").arg(&collapsed).output().unwrap();
    assert!(o.status.success(), "{label}: convert: {}", text(&o.stderr));
    let ttsp = read_collapsed(&collapsed);
    let (plain_out, _, _) = run("interval=1ms", "plain", "collapsed");
    let plain = read_collapsed(&plain_out);
    let (in_window, in_plain) = (share_with(&ttsp, "TtspLoop.spinLoop"), share_with(&plain, "TtspLoop.spinLoop"));
    eprintln!(
        "{label}: TtspLoop.spinLoop holds {:.1}% of the ttsp samples ({} samples), {:.1}% of a plain CPU profile",
        100.0 * in_window,
        total(&ttsp),
        100.0 * in_plain
    );
    assert!(total(&ttsp) >= 100, "{label}: {} ttsp samples\n{err}", total(&ttsp));
    assert!(in_window >= 0.8, "{label}: the loop holds {:.1}% of the ttsp samples", 100.0 * in_window);
    assert!(in_plain < in_window - 0.2, "{label}: the plain profile gives the loop {:.1}%, the ttsp one {:.1}%", 100.0 * in_plain, 100.0 * in_window);
    // The busy threads reach each safepoint within microseconds of its
    // request: a sample may catch one on its way, no more.
    let quick = share_with(&ttsp, "TtspLoop.shortWork");
    assert!(quick <= 0.05, "{label}: the threads that stop at once hold {:.1}% of the ttsp samples", 100.0 * quick);
    let sp = summary_fields(&err, "[oxprof] safepoint summary:");
    assert_eq!(sp["code"], "restored", "{err}");
    // Each safepoint against the JVM's log. oxprof may miss the first one
    // or two (before its breakpoints were in): align the two lists at the end.
    let ours = jfr_safepoint_times(&jfr);
    assert!(jvm.len() >= 15, "{label}: only {} safepoints in 3 s", jvm.len());
    assert!(ours.len() <= jvm.len() && ours.len() + 2 >= jvm.len(), "{label}: {} safepoints recorded, {} in the JVM's log\n{err}", ours.len(), jvm.len());
    let theirs = &jvm[jvm.len() - ours.len()..];
    let mut compared = 0;
    let mut worst: f64 = 0.0;
    let mut descheduled = Vec::new();
    for (i, (&a, &b)) in ours.iter().zip(theirs).enumerate() {
        if b < 1_000_000 {
            continue; // under a millisecond: microseconds of trap and log overhead dominate
        }
        compared += 1;
        // oxprof's clock starts at the function's entry, the JVM's a few
        // statements later: on a loaded machine the VM thread can be
        // descheduled in between (up to ~0.2 ms seen with every core busy),
        // so a fixed 0.3 ms is allowed beside the 10%; a longer preemption
        // there (4 ms seen once in 23 on a loaded 2-core CI machine) makes
        // oxprof's time the longer one. At the end it is the other way
        // round: oxprof's clock stops at `record_safepoint_synchronized`'s
        // entry, the JVM's inside it, and a preemption in between (2.6 ms
        // and 1.2 ms seen, on JDK 11, with a benchmark running beside the
        // tests) makes the JVM's the longer. One in ten may show either.
        if a.abs_diff(b) > b / 10 + 300_000 {
            descheduled.push((i, a, b));
            continue;
        }
        let r = a as f64 / b as f64;
        worst = worst.max((r - 1.0).abs());
    }
    assert!(descheduled.len() <= (compared / 10).max(1), "{label}: oxprof's time off the log's at {descheduled:?} (index, ns, ns)\nours {ours:?}\nlog {jvm:?}");
    if !descheduled.is_empty() {
        eprintln!("{label}: oxprof's time off the log's (the VM thread preempted between the two clocks?) at {descheduled:?}");
    }
    let (sum_ours, sum_log) = (ours.iter().sum::<u64>() as f64, theirs.iter().sum::<u64>() as f64);
    eprintln!(
        "{label}: {} safepoints ({} in the JVM's log); {compared} of a millisecond or more, the worst {:.2}% from the log; total {:.1} ms vs {:.1} ms",
        ours.len(),
        jvm.len(),
        100.0 * worst,
        sum_ours / 1e6,
        sum_log / 1e6
    );
    assert!(compared >= 10, "{label}: only {compared} safepoints of 1 ms or more");
    assert!((sum_ours / sum_log - 1.0).abs() <= 0.02, "{label}: ttsp total {sum_ours} ns vs the JVM's {sum_log} ns");
}

/// The lines `child` writes to its standard error, as they come (read on a
/// thread of their own, so the child never blocks on a full pipe).
#[allow(dead_code)]
pub fn stderr_lines(child: &mut std::process::Child) -> std::sync::mpsc::Receiver<String> {
    use std::io::BufRead;
    let stderr = child.stderr.take().expect("stderr piped");
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(stderr).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    rx
}

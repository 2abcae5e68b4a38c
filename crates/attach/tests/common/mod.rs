//! Helpers for the attach tests: scratch directories, real JVMs that are
//! killed whatever happens, a test agent built with `cc`, and the checks
//! every JDK must pass.
#![allow(dead_code)]

use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::time::{Duration, Instant};

use oxprof_attach::*;

pub const TIMEOUT: Duration = Duration::from_secs(10);

/// `name` from $JAVA_HOME/bin or PATH.
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
        .unwrap_or_else(|| panic!("`{name}` not found: these tests need a JDK (apt-get install openjdk-17-jdk-headless)"))
}

mod jdks;
#[allow(unused_imports)]
pub use jdks::extra_jdks;

pub fn euid() -> u32 {
    // SAFETY: geteuid cannot fail.
    unsafe { libc::geteuid() }
}

pub fn egid() -> u32 {
    // SAFETY: getegid cannot fail.
    unsafe { libc::getegid() }
}

pub fn alive(pid: u32) -> bool {
    Path::new(&format!("/proc/{pid}")).exists()
        && std::fs::read_to_string(format!("/proc/{pid}/stat")).map(|s| !s.rsplit(')').next().unwrap_or("").trim_start().starts_with('Z')).unwrap_or(false)
}

pub fn signal(pid: u32, sig: i32) {
    // SAFETY: kill takes a pid and a signal by value.
    unsafe { libc::kill(pid as i32, sig) };
}

static COUNTER: AtomicUsize = AtomicUsize::new(0);

/// A fresh scratch directory (mode 0755, so other users can read it), removed when dropped.
pub struct Scratch(pub PathBuf);

impl Scratch {
    pub fn new(name: &str) -> Scratch {
        let n = COUNTER.fetch_add(1, Ordering::SeqCst);
        let dir = std::env::temp_dir().join(format!("oxprof-attach-test-{}-{name}-{n}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        set_mode(&dir, 0o755);
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

pub fn set_mode(p: &Path, mode: u32) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(p, std::fs::Permissions::from_mode(mode)).unwrap();
}

/// Compiles tests/java/Sleeper.java into `dir` (release 11: runs on every JDK).
pub fn compile_sleeper(dir: &Path) {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/java/Sleeper.java");
    let o = Command::new(tool("javac")).args(["--release", "11", "-d"]).arg(dir).arg(src).output().expect("run javac");
    assert!(o.status.success(), "javac failed: {}", String::from_utf8_lossy(&o.stderr));
    set_mode(&dir.join("Sleeper.class"), 0o644);
}

/// Builds tests/c/NAME.c into `dir/libNAME.so` with the C compiler Rust links with.
pub fn build_lib(dir: &Path, name: &str) -> PathBuf {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("tests/c/{name}.c"));
    let out = dir.join(format!("lib{name}.so"));
    let cc = std::env::var_os("CC").unwrap_or_else(|| "cc".into());
    let o = Command::new(&cc).args(["-shared", "-fPIC", "-O1", "-Wl,-z,noexecstack", "-o"]).arg(&out).arg(&src).output().expect("run cc");
    assert!(o.status.success(), "cc failed: {}", String::from_utf8_lossy(&o.stderr));
    set_mode(&out, 0o755);
    out
}

/// A running JVM (or a wrapper around it), killed when dropped.
pub struct Jvm {
    child: Child,
    /// The JVM's pid (the child's, unless the child is a wrapper).
    pub pid: u32,
    pub stdout: Arc<Mutex<String>>,
    pub stderr: Arc<Mutex<String>>,
}

impl Jvm {
    /// Starts `cmd` and waits until it prints "ready".
    pub fn start(mut cmd: Command) -> Jvm {
        cmd.stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped());
        let mut child = cmd.spawn().unwrap_or_else(|e| panic!("starting {cmd:?}: {e}"));
        let (stdout, stderr) = (Arc::new(Mutex::new(String::new())), Arc::new(Mutex::new(String::new())));
        let (tx, rx) = mpsc::channel();
        let out = child.stdout.take().unwrap();
        let buf = stdout.clone();
        std::thread::spawn(move || {
            for line in BufReader::new(out).lines().map_while(Result::ok) {
                if line == "ready" {
                    let _ = tx.send(());
                }
                let mut b = buf.lock().unwrap();
                b.push_str(&line);
                b.push('\n');
            }
        });
        let mut err = child.stderr.take().unwrap();
        let buf = stderr.clone();
        std::thread::spawn(move || {
            let mut chunk = [0u8; 4096];
            while let Ok(n) = err.read(&mut chunk) {
                if n == 0 {
                    break;
                }
                buf.lock().unwrap().push_str(&String::from_utf8_lossy(&chunk[..n]));
            }
        });
        let pid = child.id();
        let mut jvm = Jvm { child, pid, stdout, stderr };
        if rx.recv_timeout(Duration::from_secs(60)).is_err() {
            let _ = jvm.child.kill();
            std::thread::sleep(Duration::from_millis(200));
            panic!("{cmd:?} did not get ready; stderr: {}", jvm.stderr.lock().unwrap());
        }
        jvm
    }

    /// `java [opts] -cp dir Sleeper` in `dir`.
    pub fn sleeper(java: &Path, dir: &Path, opts: &[&str]) -> Jvm {
        let mut cmd = Command::new(java);
        cmd.current_dir(dir).args(opts).arg("-cp").arg(dir).arg("Sleeper");
        Jvm::start(cmd)
    }

    pub fn stderr(&self) -> String {
        self.stderr.lock().unwrap().clone()
    }
}

impl Drop for Jvm {
    /// SIGTERM first, so the JVM removes its socket and hsperfdata file;
    /// SIGKILL if it has not exited after 3 s.
    fn drop(&mut self) {
        signal(self.pid, libc::SIGCONT);
        signal(self.pid, libc::SIGTERM);
        let deadline = Instant::now() + Duration::from_secs(3);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        if self.pid != self.child.id() {
            signal(self.pid, libc::SIGKILL);
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `java -version`'s first line.
pub fn version_of(java: &Path) -> String {
    let o = Command::new(java).arg("-version").output().unwrap();
    String::from_utf8_lossy(&o.stderr).lines().next().unwrap_or("").to_string()
}

/// The value of `key` in a `properties` reply.
pub fn property(text: &str, key: &str) -> Option<String> {
    text.lines().find_map(|l| l.strip_prefix(key)?.strip_prefix('=')).map(|v| v.replace("\\:", ":"))
}

/// Attaches twice with `properties` (the first attach starts the listener
/// with SIGQUIT, the second finds its socket) and returns both latencies,
/// each from `inspect` to the reply.
pub fn properties_twice(jvm: &Jvm, cwd: &Path) -> (Duration, Duration) {
    let pid = jvm.pid;
    let start = Instant::now();
    let target = inspect(pid).unwrap();
    let socket = target.socket_path();
    assert!(!socket.exists(), "{} exists before the first attach", socket.display());
    let reply = execute(&target, "properties", &[], TIMEOUT).unwrap_or_else(|e| panic!("first attach: {e}"));
    let first = start.elapsed();
    assert_eq!(reply.status, 0, "{}", reply.text);
    assert!(property(&reply.text, "java.version").is_some(), "no java.version in {}", reply.text);
    assert!(socket.exists(), "no socket after attaching");
    let trigger = format!(".attach_pid{}", target.ns_pid);
    assert!(!cwd.join(&trigger).exists() && !target.root.join("tmp").join(&trigger).exists(), "trigger file left behind");

    let start = Instant::now();
    let target = inspect(pid).unwrap();
    let reply = execute(&target, "properties", &[], TIMEOUT).unwrap_or_else(|e| panic!("second attach: {e}"));
    let second = start.elapsed();
    assert_eq!(reply.status, 0);
    assert!(reply.text.contains("java.version="));
    (first, second)
}

/// Failed loads are errors, and the JVM lives on and still answers.
pub fn failed_loads(jvm: &Jvm, libs: &Path) {
    let pid = jvm.pid;
    let target = inspect(pid).unwrap();
    let missing = Path::new("/nonexistent/liboxprof.so");
    match load_agent(&target, &AgentLibrary::Ours(missing.into()), "", TIMEOUT) {
        Err(AttachError::LoadFailed(text)) => assert!(text.contains("/nonexistent/liboxprof.so"), "{text}"),
        other => panic!("loading a missing agent: {other:?}"),
    }
    // What the JVM itself answers when dlopen fails (load_agent checks first).
    let reply = execute(&target, "load", &["/nonexistent/liboxprof.so", "true", ""], TIMEOUT).unwrap();
    match parse_load_reply(&reply) {
        Err(AttachError::LoadFailed(text)) => assert!(text.contains("was not loaded") && text.contains("cannot open shared object file"), "{text}"),
        other => panic!("JVM reply {reply:?} parsed as {other:?}"),
    }
    let no_entry = build_lib(libs, "noattach");
    match load_agent(&target, &AgentLibrary::Ours(no_entry), "", TIMEOUT) {
        Err(e @ AttachError::LoadFailed(_)) => assert!(e.to_string().contains("Agent_OnAttach is not available"), "{e}"),
        other => panic!("loading a library without Agent_OnAttach: {other:?}"),
    }
    assert!(alive(pid), "the JVM died");
    let reply = execute(&inspect(pid).unwrap(), "properties", &[], TIMEOUT).unwrap();
    assert!(reply.text.contains("java.version="));
}

/// The test agent's return code comes back; it ran with our options.
pub fn agent_return_codes(jvm: &Jvm, libs: &Path) {
    let agent = build_lib(libs, "testagent");
    let out = libs.join("agent-calls.txt");
    let target = inspect(jvm.pid).unwrap();
    let r = load_agent(&target, &AgentLibrary::Ours(agent.clone()), &format!("0,{}", out.display()), TIMEOUT).unwrap();
    assert_eq!(r.agent_return_code, 0, "{}", r.text);
    assert_eq!(loaded_library(jvm.pid, "libtestagent").as_deref(), Some(agent.as_path()));
    let r = load_agent(&target, &AgentLibrary::InTarget(agent.clone()), &format!("42,{}", out.display()), TIMEOUT).unwrap();
    assert_eq!(r.agent_return_code, 42, "{}", r.text);
    let calls = std::fs::read_to_string(&out).unwrap();
    assert_eq!(calls, format!("0,{0}\n42,{0}\n", out.display()));
    assert!(alive(jvm.pid));
}

/// `list_jvms` shows the JVM with its main class and its runtime's version.
pub fn listed(jvm: &Jvm, main: &str) -> JvmInfo {
    let jvms = list_jvms();
    let info = jvms.iter().find(|j| j.pid == jvm.pid).unwrap_or_else(|| panic!("JVM {} not in {jvms:?}", jvm.pid)).clone();
    assert_eq!(info.main, main);
    assert_eq!(info.user, euid());
    assert_eq!(info.oxprof, None);
    let reply = execute(&inspect(jvm.pid).unwrap(), "properties", &[], TIMEOUT).unwrap();
    let version = property(&reply.text, "java.version").unwrap();
    assert_eq!(info.java_version.as_deref(), Some(version.as_str()), "release file vs java.version");
    info
}

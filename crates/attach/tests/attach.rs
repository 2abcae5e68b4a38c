//! The attach protocol against real JVMs of the machine's JDK (17 here):
//! commands, agent loading, refusals, time-outs, other users and namespaces.

mod common;

use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use common::*;
use oxprof_attach::*;

fn java() -> PathBuf {
    tool("java")
}

#[test]
fn properties_on_first_and_second_attach() {
    let s = Scratch::new("props");
    compile_sleeper(&s.0);
    let jvm = Jvm::sleeper(&java(), &s.0, &[]);
    let (first, second) = properties_twice(&jvm, &s.0);
    eprintln!("{}: attach latency, inspect to reply: first (SIGQUIT) {first:?}, second {second:?}", version_of(&java()));
    // Commands other than properties, and an unknown one.
    let target = inspect(jvm.pid).unwrap();
    let r = execute(&target, "jcmd", &["VM.version"], TIMEOUT).unwrap();
    assert_eq!(r.status, 0);
    assert!(r.text.contains("JDK "), "{}", r.text);
    let r = execute(&target, "threaddump", &[], TIMEOUT).unwrap();
    assert!(r.text.contains("\"main\""), "{}", r.text);
    let r = execute(&target, "bogus", &[], TIMEOUT).unwrap();
    assert_ne!(r.status, 0);
    assert!(r.text.contains("not recognized"), "{}", r.text);
}

/// Not a test of behaviour: measures attach latency over several fresh JVMs.
#[test]
fn attach_latency() {
    let s = Scratch::new("latency");
    compile_sleeper(&s.0);
    let (mut firsts, mut seconds) = (Vec::new(), Vec::new());
    for _ in 0..5 {
        let jvm = Jvm::sleeper(&java(), &s.0, &["-Xshare:auto"]);
        let (a, b) = properties_twice(&jvm, &s.0);
        firsts.push(a);
        seconds.push(b);
    }
    firsts.sort();
    seconds.sort();
    eprintln!(
        "{}: attach latency over 5 JVMs, inspect to properties reply: first attach (SIGQUIT) min {:?} median {:?} max {:?}; second attach min {:?} median {:?} max {:?}",
        version_of(&java()),
        firsts[0],
        firsts[2],
        firsts[4],
        seconds[0],
        seconds[2],
        seconds[4]
    );
    assert!(firsts[2] < Duration::from_secs(3) && seconds[2] < Duration::from_secs(1));
}

#[test]
fn failed_loads_leave_the_jvm_running() {
    let s = Scratch::new("failed-load");
    compile_sleeper(&s.0);
    let jvm = Jvm::sleeper(&java(), &s.0, &[]);
    failed_loads(&jvm, &s.0);
}

#[test]
fn agent_return_code_and_options() {
    let s = Scratch::new("agent");
    compile_sleeper(&s.0);
    let jvm = Jvm::sleeper(&java(), &s.0, &[]);
    agent_return_codes(&jvm, &s.0);
}

#[test]
fn dynamic_agent_loading_disabled() {
    let s = Scratch::new("no-dynamic");
    compile_sleeper(&s.0);
    let jvm = Jvm::sleeper(&java(), &s.0, &["-XX:-EnableDynamicAgentLoading"]);
    let agent = build_lib(&s.0, "testagent");
    match load_agent(&inspect(jvm.pid).unwrap(), &AgentLibrary::Ours(agent), "0", TIMEOUT) {
        Err(e @ AttachError::LoadFailed(_)) => assert!(e.to_string().contains("-XX:+EnableDynamicAgentLoading"), "{e}"),
        other => panic!("{other:?}"),
    }
}

#[test]
fn non_jvm_is_refused_without_a_signal() {
    let s = Scratch::new("sleep");
    let mut sleep = Command::new("sleep").arg("30").current_dir(&s.0).spawn().unwrap();
    let pid = sleep.id();
    std::thread::sleep(Duration::from_millis(100));
    let r = inspect(pid);
    assert!(matches!(r, Err(AttachError::NotAJvm { pid: p, .. }) if p == pid), "{r:?}");
    eprintln!("{}", r.unwrap_err());
    // Even with a hand-made Target, execute checks SigCgt before signalling.
    let target = Target { pid, ns_pid: pid, uid: euid(), gid: egid(), root: format!("/proc/{pid}/root").into(), cwd: format!("/proc/{pid}/cwd").into() };
    let r = execute(&target, "properties", &[], Duration::from_secs(2));
    assert!(matches!(r, Err(AttachError::NotAJvm { .. })), "{r:?}");
    std::thread::sleep(Duration::from_millis(100));
    assert!(sleep.try_wait().unwrap().is_none(), "sleep died: we signalled it");
    assert!(!s.path(&format!(".attach_pid{pid}")).exists());
    let _ = sleep.kill();
    let _ = sleep.wait();
}

#[test]
fn missing_process() {
    let pid_max: u32 = std::fs::read_to_string("/proc/sys/kernel/pid_max").unwrap().trim().parse().unwrap();
    for pid in [pid_max, u32::MAX] {
        let r = inspect(pid);
        assert!(matches!(r, Err(AttachError::NoSuchProcess(p)) if p == pid), "{r:?}");
    }
    assert_eq!(loaded_library(pid_max, "libjvm"), None);
    eprintln!("{}", AttachError::NoSuchProcess(pid_max));
}

#[test]
fn list_finds_main_class_and_jar() {
    let s = Scratch::new("list");
    compile_sleeper(&s.0);
    let jvm = Jvm::sleeper(&java(), &s.0, &["-Xmx64m", "-Dx=y"]);
    let info = listed(&jvm, "Sleeper");
    eprintln!("{info:?}");

    std::fs::write(s.path("manifest.txt"), "Main-Class: Sleeper\n").unwrap();
    let o = Command::new(tool("jar"))
        .current_dir(&s.0)
        .args(["--create", "--file", "sleeper.jar", "--manifest", "manifest.txt", "Sleeper.class"])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let mut cmd = Command::new(java());
    cmd.current_dir(&s.0).args(["-cp", "ignored", "-jar", "sleeper.jar", "100"]);
    let jar = Jvm::start(cmd);
    listed(&jar, "sleeper.jar");
}

#[test]
fn disable_attach_mechanism() {
    let s = Scratch::new("disabled");
    compile_sleeper(&s.0);
    // Seen on the command line: refused at once, no signal.
    let jvm = Jvm::sleeper(&java(), &s.0, &["-XX:+DisableAttachMechanism"]);
    let start = Instant::now();
    let r = execute(&inspect(jvm.pid).unwrap(), "properties", &[], TIMEOUT);
    assert!(matches!(r, Err(AttachError::AttachDisabled { .. })), "{r:?}");
    assert!(start.elapsed() < Duration::from_secs(1));
    eprintln!("{}", r.unwrap_err());

    // Hidden in an @argfile: the JVM never answers; a time-out that names the flag.
    std::fs::write(s.path("opts.txt"), "-XX:+DisableAttachMechanism\n").unwrap();
    let jvm = Jvm::sleeper(&java(), &s.0, &["@opts.txt"]);
    let target = inspect(jvm.pid).unwrap();
    let r = execute(&target, "properties", &[], Duration::from_millis(1500));
    match &r {
        Err(AttachError::Timeout { what, after }) => {
            assert!(what.contains("-XX:+DisableAttachMechanism"), "{what}");
            assert_eq!(*after, Duration::from_millis(1500));
        }
        other => panic!("{other:?}"),
    }
    eprintln!("{}", r.unwrap_err());
    assert!(!s.path(&format!(".attach_pid{}", target.ns_pid)).exists(), "trigger file left behind");
    assert!(alive(jvm.pid));
}

/// With -Xrs the JVM does not catch SIGQUIT (it would die of it) and opens
/// its attach socket at start-up instead. If that socket is removed, we
/// refuse rather than signal.
#[test]
fn reduced_signal_usage() {
    let s = Scratch::new("xrs");
    compile_sleeper(&s.0);
    let jvm = Jvm::sleeper(&java(), &s.0, &["-Xrs"]);
    let target = inspect(jvm.pid).unwrap();
    assert!(target.socket_path().exists(), "no attach socket at start-up with -Xrs");
    let r = execute(&target, "properties", &[], TIMEOUT).unwrap();
    assert!(r.text.contains("java.version="));

    std::fs::remove_file(target.socket_path()).unwrap();
    let r = execute(&target, "properties", &[], TIMEOUT);
    match &r {
        Err(AttachError::NotAJvm { why, .. }) => assert!(why.contains("-Xrs"), "{why}"),
        other => panic!("{other:?}"),
    }
    eprintln!("{}", r.unwrap_err());
    std::thread::sleep(Duration::from_millis(100));
    assert!(alive(jvm.pid), "the JVM died: it was sent SIGQUIT");
    assert!(!s.path(&format!(".attach_pid{}", target.ns_pid)).exists());
}

#[test]
fn stopped_jvm_times_out_at_the_step_it_is_at() {
    let s = Scratch::new("stopped");
    compile_sleeper(&s.0);
    let jvm = Jvm::sleeper(&java(), &s.0, &[]);
    let target = inspect(jvm.pid).unwrap();

    // Stopped before its listener runs: the socket never appears.
    stop(jvm.pid);
    let r = execute(&target, "properties", &[], Duration::from_millis(800));
    signal(jvm.pid, libc::SIGCONT);
    match &r {
        Err(AttachError::Timeout { what, .. }) => assert!(what.contains("attach listener"), "{what}"),
        other => panic!("{other:?}"),
    }
    eprintln!("{}", r.unwrap_err());

    // Stopped with its listener running: connected, but no reply.
    execute(&target, "properties", &[], TIMEOUT).unwrap();
    stop(jvm.pid);
    let r = execute(&target, "properties", &[], Duration::from_millis(800));
    signal(jvm.pid, libc::SIGCONT);
    match &r {
        Err(AttachError::Timeout { what, .. }) => assert!(what.contains("reply to 'properties'"), "{what}"),
        other => panic!("{other:?}"),
    }
    eprintln!("{}", r.unwrap_err());
    let r = execute(&target, "properties", &[], TIMEOUT).unwrap();
    assert!(r.text.contains("java.version="));
}

/// Sends SIGSTOP and waits until every thread has stopped (a busy machine
/// may take a while to schedule them into the stop).
fn stop(pid: u32) {
    signal(pid, libc::SIGSTOP);
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let states: Vec<String> = std::fs::read_dir(format!("/proc/{pid}/task"))
            .unwrap()
            .filter_map(|t| std::fs::read_to_string(t.ok()?.path().join("stat")).ok())
            .map(|s| s.rsplit(')').next().unwrap_or("").trim_start().chars().take(1).collect())
            .collect();
        if states.iter().all(|s| s == "T") {
            return;
        }
        assert!(Instant::now() < deadline, "JVM {pid} did not stop: {states:?}");
        std::thread::sleep(Duration::from_millis(5));
    }
}

#[test]
fn stale_socket_is_replaced() {
    let s = Scratch::new("stale");
    compile_sleeper(&s.0);
    let jvm = Jvm::sleeper(&java(), &s.0, &[]);
    let target = inspect(jvm.pid).unwrap();
    // A socket nobody listens on, as a dead process with this pid leaves it.
    drop(std::os::unix::net::UnixListener::bind(target.socket_path()).unwrap());
    let r = execute(&target, "properties", &[], TIMEOUT).unwrap();
    assert!(r.text.contains("java.version="));
}

/// As root, attaching to a JVM of another user takes its identity (on this
/// thread only) and leaves no root-owned files behind.
#[test]
#[ignore = "needs root; scripts/test.sh runs it when run as root"]
fn jvm_of_another_user() {
    assert_eq!(euid(), 0, "jvm_of_another_user needs root (to start a JVM of another user)");
    let s = Scratch::new("nobody");
    compile_sleeper(&s.0);
    let agent = build_lib(&s.0, "testagent");
    // The JVM's working directory is not writable by it: the trigger file goes to /tmp.
    let mut cmd = Command::new("setpriv");
    cmd.current_dir(&s.0).args(["--reuid=65534", "--regid=65534", "--clear-groups"]).arg(java()).arg("-cp").arg(&s.0).arg("Sleeper");
    let jvm = Jvm::start(cmd);
    let target = inspect(jvm.pid).unwrap();
    assert_eq!((target.uid, target.gid), (65534, 65534));
    // A stale root-owned socket at its path (an earlier root JVM with this
    // pid was killed): the JVM cannot replace it in the sticky /tmp, and
    // neither may we as the JVM's user. A clear error; root unlinks nothing.
    drop(std::os::unix::net::UnixListener::bind(target.socket_path()).unwrap());
    match execute(&target, "properties", &[], TIMEOUT) {
        Err(e @ AttachError::Protocol(_)) => assert!(e.to_string().contains("belongs to uid 0"), "{e}"),
        other => panic!("{other:?}"),
    }
    assert_eq!(std::fs::symlink_metadata(target.socket_path()).unwrap().uid(), 0);
    std::fs::remove_file(target.socket_path()).unwrap();
    let r = execute(&target, "properties", &[], TIMEOUT).unwrap();
    assert_eq!(property(&r.text, "user.name").as_deref(), Some("nobody"));
    let sock = std::fs::symlink_metadata(target.socket_path()).unwrap();
    assert!(sock.file_type().is_socket() && sock.uid() == 65534);
    assert!(!Path::new(&format!("/tmp/.attach_pid{}", target.ns_pid)).exists());
    assert_eq!(thread_euid(), 0, "still running as the JVM's user");

    let out = PathBuf::from(format!("/tmp/oxprof-attach-test-{}-nobody.txt", std::process::id()));
    let r = load_agent(&target, &AgentLibrary::Ours(agent), &format!("7,{}", out.display()), TIMEOUT).unwrap();
    assert_eq!(r.agent_return_code, 7);
    let written = std::fs::metadata(&out).unwrap();
    let _ = std::fs::remove_file(&out);
    assert_eq!(written.uid(), 65534);
    assert_eq!(thread_euid(), 0);
}

/// A process of user nobody without supplementary groups, for the tests
/// that act as another user (killed on drop).
struct Nobody(std::process::Child);

impl Nobody {
    fn start(cwd: &Path) -> Nobody {
        let child = Command::new("setpriv").current_dir(cwd).args(["--reuid=65534", "--regid=65534", "--clear-groups", "sleep", "60"]).spawn().unwrap();
        let pid = child.id();
        let nobody = Nobody(child);
        let deadline = Instant::now() + Duration::from_secs(5);
        // Until setpriv has exec'd sleep, the process is still root's.
        while std::fs::metadata(format!("/proc/{pid}")).map(|m| m.uid()).unwrap_or(0) != 65534 {
            assert!(Instant::now() < deadline, "setpriv did not switch to uid 65534");
            std::thread::sleep(Duration::from_millis(5));
        }
        // And until it runs `sleep` itself: between its uid switch and the
        // exec, the process is not dumpable and its /proc files are root's.
        while !std::fs::read_link(format!("/proc/{pid}/exe")).is_ok_and(|e| e.file_name().is_some_and(|n| n.to_string_lossy().starts_with("sleep"))) {
            assert!(Instant::now() < deadline, "setpriv did not exec sleep");
            std::thread::sleep(Duration::from_millis(5));
        }
        nobody
    }

    /// As a target; `root` stands for its root directory.
    fn target(&self, root: &Path) -> Target {
        let pid = self.0.id();
        Target { pid, ns_pid: pid, uid: 65534, gid: 65534, root: root.to_path_buf(), cwd: format!("/proc/{pid}/cwd").into() }
    }
}

impl Drop for Nobody {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Root does not probe or unlink a foreign stale socket at a JVM's socket
/// path: that path is in the JVM's user's hands (a symlinked /tmp in a
/// container could lead anywhere). Acting as that user, a socket the user
/// may not remove stays where it is.
#[test]
#[ignore = "needs root; scripts/test.sh runs it when run as root"]
fn foreign_stale_socket_is_left_to_the_targets_user() {
    assert_eq!(euid(), 0, "foreign_stale_socket_is_left_to_the_targets_user needs root (to act as another user)");
    let s = Scratch::new("foreign-socket");
    // The target's "root": its tmp/ is root's, 0755 (root may write there, the target's user may not).
    std::fs::create_dir_all(s.path("root/tmp")).unwrap();
    set_mode(&s.path("root/tmp"), 0o755);
    let nobody = Nobody::start(&s.0);
    let mut target = nobody.target(&s.path("root"));
    target.ns_pid = 4242;
    // A root-owned socket nobody listens on.
    drop(std::os::unix::net::UnixListener::bind(target.socket_path()).unwrap());
    let r = execute(&target, "properties", &[], Duration::from_secs(2));
    assert!(r.is_err(), "{r:?}");
    eprintln!("{}", r.unwrap_err());
    let sock = std::fs::symlink_metadata(target.socket_path()).expect("the socket was unlinked");
    assert!(sock.file_type().is_socket() && sock.uid() == 0);
}

/// Files of a target are read as its user, with its groups only: a file
/// root (or one of root's groups) may read but the target's user may not
/// stays closed, even when our thread has supplementary groups of its own.
#[test]
#[ignore = "needs root; scripts/test.sh runs it when run as root"]
fn target_files_are_read_as_the_targets_user() {
    assert_eq!(euid(), 0, "target_files_are_read_as_the_targets_user needs root (to act as another user)");
    let s = Scratch::new("target-files");
    std::fs::write(s.path("open"), "open").unwrap();
    set_mode(&s.path("open"), 0o644);
    std::fs::write(s.path("group"), "root's group only").unwrap();
    set_mode(&s.path("group"), 0o640);
    std::fs::write(s.path("private"), "root only").unwrap();
    set_mode(&s.path("private"), 0o600);
    let nobody = Nobody::start(&s.0);
    let target = nobody.target(Path::new(&format!("/proc/{}/root", nobody.0.id())));
    let results = std::thread::spawn(move || {
        // Root with its group 0 as a supplementary group, on this thread
        // (and the threads it starts) only.
        let groups = [0u32];
        // SAFETY: setgroups reads one gid from a valid pointer; the raw call affects this thread only.
        assert_eq!(unsafe { libc::syscall(libc::SYS_setgroups, 1 as libc::c_long, groups.as_ptr()) }, 0);
        let read = |name: &str| read_target_file(&target, &s.path(name), 1024).map(|b| String::from_utf8_lossy(&b).into_owned()).map_err(|e| e.to_string());
        ["open", "group", "private"].map(read)
    })
    .join()
    .unwrap();
    assert_eq!(results[0].as_deref(), Ok("open"));
    for r in &results[1..] {
        assert!(matches!(r, Err(e) if e.contains("Permission denied")), "{r:?}");
    }
}

/// A non-root user may not attach to another user's JVM: a clear refusal,
/// before anything is sent.
#[test]
#[ignore = "needs root; scripts/test.sh runs it when run as root"]
fn permission_denied_for_another_users_jvm() {
    assert_eq!(euid(), 0, "permission_denied_for_another_users_jvm needs root (to start a JVM of another user)");
    let s = Scratch::new("denied");
    compile_sleeper(&s.0);
    let jvm = Jvm::sleeper(&java(), &s.0, &[]);
    let target = inspect(jvm.pid).unwrap();
    // Become nobody on this thread only, as a non-root oxprof would be.
    let set_euid = |uid: u32| {
        // SAFETY: setresuid with -1 for the ids to keep; the raw call affects this thread only.
        let r = unsafe { libc::syscall(libc::SYS_setresuid, -1 as libc::c_long, uid as libc::c_long, -1 as libc::c_long) };
        assert_eq!(r, 0, "setresuid: {}", std::io::Error::last_os_error());
    };
    set_euid(65534);
    let by_inspect = inspect(jvm.pid);
    let by_execute = execute(&target, "properties", &[], TIMEOUT);
    set_euid(0);
    for r in [by_inspect.map(|_| ()), by_execute.map(|_| ())] {
        match r {
            Err(e @ AttachError::PermissionDenied { .. }) => {
                let msg = e.to_string();
                assert!(msg.contains("sudo") && msg.contains("uid 0"), "{msg}");
                eprintln!("{msg}");
            }
            other => panic!("{other:?}"),
        }
    }
    assert!(!s.path(&format!(".attach_pid{}", target.ns_pid)).exists());
    assert!(!target.socket_path().exists(), "the JVM was signalled");
}

/// This thread's effective uid (credentials are per thread on Linux).
fn thread_euid() -> u32 {
    let status = std::fs::read_to_string("/proc/thread-self/status").unwrap();
    let line = status.lines().find(|l| l.starts_with("Uid:")).unwrap();
    line.split_whitespace().nth(2).unwrap().parse().unwrap()
}

/// A JVM in its own pid and mount namespaces under another root, like a
/// container (`pivot_root`): nspid 1, socket in its /tmp, agent copied into
/// its /tmp once, library paths as the container names them.
#[test]
fn jvm_in_a_container() {
    jvm_in_other_namespaces("container", true);
}

/// The same under a chroot, where /proc/<pid>/maps shows paths with the
/// chroot directory in front.
#[test]
fn jvm_in_a_chroot() {
    jvm_in_other_namespaces("chroot", false);
}

fn jvm_in_other_namespaces(name: &str, pivot: bool) {
    let s = Scratch::new(name);
    let root = s.path("root");
    std::fs::create_dir_all(root.join("app")).unwrap();
    compile_sleeper(&root.join("app"));
    let agent = build_lib(&s.0, "testagent");
    let java = std::fs::canonicalize(java()).unwrap();
    let jvm = start_in_namespaces(&root, pivot, &[java.to_str().unwrap(), "-cp", "/app", "Sleeper"])
        .unwrap_or_else(|| panic!("{name}: cannot create pid and mount namespaces here (unshare failed)"));
    let target = inspect(jvm.pid).unwrap();
    assert_eq!(target.ns_pid, 1);
    assert_ne!(target.pid, 1);
    let r = execute(&target, "properties", &[], TIMEOUT).unwrap();
    assert!(r.text.contains("java.version="));
    assert!(root.join("tmp/.java_pid1").exists(), "socket not in the JVM's /tmp");

    // The agent is not visible at our path there: it is copied into its /tmp, once.
    for round in 1..=2 {
        let r = load_agent(&target, &AgentLibrary::Ours(agent.clone()), "0,/tmp/agent-calls.txt", TIMEOUT).unwrap();
        assert_eq!(r.agent_return_code, 0, "{}", r.text);
        let calls = std::fs::read_to_string(root.join("tmp/agent-calls.txt")).unwrap();
        assert_eq!(calls.lines().count(), round);
    }
    let inside = loaded_library(jvm.pid, "libtestagent").unwrap();
    assert_eq!(inside.parent(), Some(Path::new("/tmp")), "{}", inside.display());
    assert!(inside.file_name().unwrap().to_str().unwrap().starts_with("libtestagent-"), "{}", inside.display());
    let copies = std::fs::read_dir(root.join("tmp")).unwrap().filter(|e| e.as_ref().unwrap().file_name().to_str().unwrap().starts_with("libtestagent")).count();
    assert_eq!(copies, 1);
    // The path the JVM reports works too (what `oxprof attach` passes on later commands).
    let r = load_agent(&target, &AgentLibrary::InTarget(inside), "0,/tmp/agent-calls.txt", TIMEOUT).unwrap();
    assert_eq!(r.agent_return_code, 0);
    assert_eq!(std::fs::read_to_string(root.join("tmp/agent-calls.txt")).unwrap().lines().count(), 3);
    let mapped = std::fs::read_to_string(format!("/proc/{}/maps", jvm.pid)).unwrap();
    let paths: std::collections::BTreeSet<&str> = mapped.lines().filter(|l| l.contains("libtestagent")).filter_map(|l| l.split_whitespace().last()).collect();
    assert_eq!(paths.len(), 1, "{paths:?}");
    let copies = std::fs::read_dir(root.join("tmp")).unwrap().filter(|e| e.as_ref().unwrap().file_name().to_str().unwrap().starts_with("libtestagent")).count();
    assert_eq!(copies, 1);

    let info = list_jvms().into_iter().find(|j| j.pid == jvm.pid).unwrap();
    assert_eq!(info.main, "Sleeper");
    assert_eq!(info.java_version.as_deref(), property(&r_props(&target), "java.version").as_deref());
}

fn r_props(target: &Target) -> String {
    execute(target, "properties", &[], TIMEOUT).unwrap().text
}

/// Runs `argv` in new pid and mount namespaces (and a user namespace when
/// not root) with `root` as its root directory, by `pivot_root` like a
/// container or by chroot. `root` gets /usr, /etc, /dev binds and its own
/// /proc and /tmp. `None` if namespaces are unavailable.
fn start_in_namespaces(root: &Path, pivot: bool, argv: &[&str]) -> Option<Jvm> {
    let script = include_str!("container.sh");
    let probe =
        |extra: &[&str]| Command::new("unshare").args(extra).args(["--mount", "--pid", "--fork", "true"]).status().map(|s| s.success()).unwrap_or(false);
    let user: &[&str] = if euid() == 0 { &[] } else { &["--user", "--map-root-user"] };
    if !probe(user) {
        return None;
    }
    let mut cmd = Command::new("unshare");
    cmd.args(user)
        .args(["--mount", "--pid", "--fork", "--kill-child", "sh", "-c", script, "sh"])
        .arg(root)
        .arg(if pivot { "pivot" } else { "chroot" })
        .args(argv);
    let mut jvm = Jvm::start(cmd);
    // The JVM is unshare's child (sh exec'd java, or chroot which exec'd java).
    let children = std::fs::read_to_string(format!("/proc/{0}/task/{0}/children", jvm.pid)).unwrap();
    jvm.pid = children.split_whitespace().next().expect("unshare has no child").parse().unwrap();
    Some(jvm)
}

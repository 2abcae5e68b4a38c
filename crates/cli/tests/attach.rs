//! `oxprof attach` and `oxprof list` against real running JVMs.

mod common;

use common::*;
use std::process::{Child, Command};

/// A JVM running `Spin forever`, killed on drop.
fn spin(dir: &std::path::Path) -> RunningJvm {
    RunningJvm::spawn(java_cmd(["-cp", dir.to_str().unwrap(), "Spin", "forever"]), dir, "ready")
}

fn rss_kb(pid: u32) -> u64 {
    let s = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    s.lines().find_map(|l| l.strip_prefix("VmRSS:")).unwrap().trim().trim_end_matches(" kB").trim().parse().unwrap()
}

fn attach(pid: u32, args: &[&str]) -> std::process::Output {
    oxprof_cmd().arg("attach").arg(pid.to_string()).args(args).output().unwrap()
}

#[test]
fn attach_twice_gives_two_profiles() {
    let s = Scratch::new("attach-twice");
    compile(&s.0, &["Spin.java"]);
    let mut jvm = spin(&s.0);
    for i in 0..2 {
        let out = s.path(&format!("p{i}.collapsed"));
        // Until the JVM has had 1 s of CPU: about 500 samples at 2 ms.
        let o = attach_for_cpu(oxprof_cmd(), jvm.pid(), 1000, &["--interval", "2ms", "-o", out.to_str().unwrap()]);
        let err = text(&o.stderr);
        assert!(o.status.success(), "attach {i}: {err}");
        assert!(err.contains(&format!("profile written to {}", out.display())), "{err}");
        assert!(samples_with(&read_collapsed(&out), "Spin.loop") > 100, "attach {i}: Spin.loop missing");
        // Each recording's summary counts its own walks, not the JVM's so far.
        let line = err.lines().find(|l| l.contains("summary: samples=")).unwrap_or_else(|| panic!("no summary: {err}"));
        let count =
            |k: &str| -> u64 { line.split_whitespace().find_map(|kv| kv.strip_prefix(k).and_then(|v| v.strip_prefix('='))).map_or(0, |v| v.parse().unwrap()) };
        assert!(count("own_walks") + count("own_left") <= count("samples"), "attach {i}: more walks than samples: {err}");
    }
    assert!(jvm.alive());
}

/// Threads running before the attach are named as the JVM names them, not
/// by their kernel names cut to 15 characters, and are Java threads.
#[test]
fn threads_running_before_the_attach_keep_their_java_names() {
    let s = Scratch::new("attach-names");
    compile(&s.0, &["LongNames.java"]);
    let jvm = RunningJvm::spawn(java_cmd(["-cp", s.0.to_str().unwrap(), "LongNames", "60"]), &s.0, "ready");
    let out = s.path("names.collapsed");
    let o = attach(jvm.pid(), &["--duration", "1s", "--event", "wall", "--threads", "-o", out.to_str().unwrap()]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let stacks = read_collapsed(&out);
    let roots: std::collections::BTreeSet<String> = stacks.iter().map(|(f, _)| f[0].split(" tid=").next().unwrap_or("").to_string()).collect();
    for name in ["[spinner-with-a-long-name", "[sleeper-with-a-long-name", "[main-renamed-before-attach"] {
        assert!(roots.contains(name), "no thread {name}]: {roots:?}");
    }
    assert!(!roots.iter().any(|r| r.starts_with("[spinner-with-a") && r.len() == 16), "a kernel name cut short: {roots:?}");
    let spin: u64 =
        stacks.iter().filter(|(f, _)| f[0].starts_with("[spinner-with-a-long-name") && f.iter().any(|x| x.contains("LongNames"))).map(|(_, n)| n).sum();
    assert!(spin > 0, "the spinner's samples lack its Java frames: {stacks:?}");
}

/// A recording started to pprof (where thread states are a label) and
/// stopped to collapsed stacks gets no state frames nobody asked for; one
/// started to collapsed stacks and dumped to pprof gets the state label.
#[test]
fn the_format_written_decides_state_frames_not_the_one_started_with() {
    let s = Scratch::new("attach-states");
    compile(&s.0, &["Spin.java"]);
    let jvm = spin(&s.0);
    let pid = jvm.pid();
    let o = attach(pid, &["start", "--interval", "2ms", "-o", s.path("start.pb.gz").to_str().unwrap()]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    wait_for_cpu(pid, process_cpu_ms(pid), 400, "pprof recording");
    let collapsed = s.path("stop.collapsed");
    let o = attach(pid, &["stop", "-o", collapsed.to_str().unwrap()]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let stacks = read_collapsed(&collapsed);
    assert!(samples_with(&stacks, "Spin.loop") > 50, "{stacks:?}");
    assert!(!stacks.iter().any(|(st, _)| st[0].starts_with("[running") || st[0].starts_with("[sleeping")), "state frames: {stacks:?}");
    let o = attach(pid, &["start", "--interval", "2ms", "-o", s.path("start.collapsed").to_str().unwrap()]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    wait_for_cpu(pid, process_cpu_ms(pid), 400, "collapsed recording");
    let pprof = s.path("dump.pb.gz");
    let o = attach(pid, &["stop", "-o", pprof.to_str().unwrap()]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let tags = std::process::Command::new("go").args(["tool", "pprof", "-tags"]).arg(&pprof).output().unwrap();
    let tags = text(&tags.stdout);
    assert!(tags.contains("state:") && tags.contains("running"), "no state label in the pprof file: {tags}");
}

#[test]
fn start_status_dump_stop_in_separate_invocations() {
    let s = Scratch::new("attach-cmds");
    compile(&s.0, &["Spin.java"]);
    let mut jvm = spin(&s.0);
    let pid = jvm.pid();
    let o = attach(pid, &["status"]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert!(text(&o.stdout).contains("not running"), "{}", text(&o.stdout));

    let o = attach(pid, &["start", "--event", "cpu", "--interval", "2ms", "--alloc", "64k"]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert!(text(&o.stdout).contains("started cpu profiling"), "{}", text(&o.stdout));
    // 800 ms of the JVM's CPU time: about 400 samples at 2 ms.
    wait_for_cpu(pid, process_cpu_ms(pid), 800, "attach start");

    let o = attach(pid, &["status"]);
    let out = text(&o.stdout);
    assert!(out.starts_with("running: cpu"), "{out}");
    assert!(out.contains("alloc"), "{out}");

    let dump = s.path("dump.collapsed");
    let o = attach(pid, &["dump", "-o", dump.to_str().unwrap()]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert!(samples_with(&read_collapsed(&dump), "Spin.loop") > 50);

    let again = attach(pid, &["start"]);
    assert!(!again.status.success(), "a second start must be refused");
    assert!(text(&again.stderr).contains("already running"), "{}", text(&again.stderr));

    let fin = s.path("final.html");
    let o = attach(pid, &["stop", "-o", fin.to_str().unwrap()]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert!(text(&o.stdout).contains(&format!("profile written to {}", fin.display())));
    let page = std::fs::read_to_string(&fin).unwrap();
    assert!(page.contains("Spin.loop") && page.contains("Allocations"));
    let o = attach(pid, &["stop"]);
    assert!(!o.status.success());
    assert!(text(&o.stderr).contains("not running"), "{}", text(&o.stderr));
    assert!(jvm.alive());
}

/// JEP 331's CSR: re-enabling sampling uses the last interval set. A restart
/// with a bare `--alloc` keeps the previous recording's interval; an explicit
/// size still wins.
#[test]
fn restarting_allocation_sampling_keeps_the_last_interval() {
    let s = Scratch::new("attach-alloc-restart");
    compile(&s.0, &["Spin.java"]);
    let mut jvm = spin(&s.0);
    let pid = jvm.pid();
    let out = s.path("a.collapsed");
    let status_after_start = |args: &[&str]| {
        let o = attach(pid, args);
        assert!(o.status.success(), "{args:?}: {}", text(&o.stderr));
        let st = attach(pid, &["status"]);
        let line = text(&st.stdout);
        let o = attach(pid, &["stop", "-o", out.to_str().unwrap()]);
        assert!(o.status.success(), "stop: {}", text(&o.stderr));
        line
    };
    let first = status_after_start(&["start", "--alloc"]);
    assert!(first.contains("mean interval 524288 bytes"), "no earlier recording: the default applies: {first}");
    let explicit = status_after_start(&["start", "--alloc", "1m"]);
    assert!(explicit.contains("mean interval 1048576 bytes"), "{explicit}");
    let again = status_after_start(&["start", "--event", "cpu", "--alloc"]);
    assert!(again.contains("mean interval 1048576 bytes"), "a bare --alloc must reuse the last interval: {again}");
    let changed = status_after_start(&["start", "--alloc", "64k"]);
    assert!(changed.contains("mean interval 65536 bytes"), "{changed}");
    assert!(jvm.alive());
}

#[test]
fn fifty_start_stop_cycles_without_crash_or_growth() {
    let s = Scratch::new("attach-cycles");
    compile(&s.0, &["Spin.java"]);
    // A small, pre-touched heap: otherwise the attach operations' own
    // garbage touches fresh eden pages and RSS grows until the first GC,
    // which says nothing about the agent.
    let cmd = java_cmd(["-Xms64m", "-Xmx64m", "-XX:+AlwaysPreTouch", "-cp", s.0.to_str().unwrap(), "Spin", "forever"]);
    let mut jvm = RunningJvm::spawn(cmd, &s.0, "ready");
    let out = s.path("c.collapsed");
    let mut series = Vec::new();
    for i in 1..=50 {
        let o = attach(jvm.pid(), &["start", "--interval", "1ms"]);
        assert!(o.status.success(), "cycle {i} start: {}", text(&o.stderr));
        let o = attach(jvm.pid(), &["stop", "-o", out.to_str().unwrap()]);
        assert!(o.status.success(), "cycle {i} stop: {}", text(&o.stderr));
        series.push(rss_kb(jvm.pid()));
    }
    assert!(jvm.alive());
    // A leak raises every reading; a one-time step does not repeat. Steps
    // happen at any cycle: the kernel symbol table is read when a cycle
    // lasts over a second (a loaded machine), and glibc keeps freed memory
    // for reuse (fresh-clone CI runs: +3.5 MB at cycle 15 and +2.4 MB at 18;
    // +4.2 MB at 27 and +1.9 MB at 29; flat otherwise). So the growth from
    // cycle 10 on is summed without its three largest single-cycle rises:
    // a leak of 60 KB a cycle still adds over 2 MB; a few steps add nothing.
    series.push(rss_kb(jvm.pid()));
    let rises: Vec<i64> = series[9..].windows(2).map(|w| w[1] as i64 - w[0] as i64).collect();
    let mut sorted = rises.clone();
    sorted.sort_unstable();
    let steps: i64 = sorted.iter().rev().take(3).filter(|&&d| d > 0).sum();
    let total: i64 = rises.iter().sum();
    let growth = total - steps;
    eprintln!("RSS from cycle 10 to 50: {total} kB, {growth} kB without the three largest steps ({steps} kB)");
    assert!(
        growth < 2 * 1024,
        "the JVM grew by {growth} kB over 40 start/stop cycles besides its three largest steps ({steps} kB); RSS per cycle (kB): {series:?}"
    );
}

#[test]
fn bad_options_on_attach_leave_the_jvm_alive_and_quiet() {
    let s = Scratch::new("attach-bad");
    compile(&s.0, &["Spin.java"]);
    let mut jvm = spin(&s.0);
    let o = oxprof_cmd().args(["attach", &jvm.pid().to_string(), "start", "--interval", "-3ms"]).output().unwrap();
    assert_eq!(o.status.code(), Some(2));
    // --format leaks without --live: refused as `record` refuses it, naming
    // the options given, before anything is loaded into the JVM.
    let leaks = s.path("leaks.txt");
    for args in [&["start", "--format", "leaks", "-o", leaks.to_str().unwrap()][..], &["--duration", "1s", "--format", "leaks", "-o", leaks.to_str().unwrap()]]
    {
        let o = attach(jvm.pid(), args);
        let err = text(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {err}");
        assert_eq!(err.trim(), "oxprof: --format leaks needs --live", "{args:?}");
    }
    let maps = std::fs::read_to_string(format!("/proc/{}/maps", jvm.pid())).unwrap();
    assert!(!maps.contains("liboxprof"), "the agent was loaded for a refused command");
    // Options the CLI cannot check reach the agent, which refuses them.
    let o = attach(jvm.pid(), &["start", "-o", "/nonexistent-oxprof-dir/x.html"]);
    assert!(!o.status.success());
    assert!(text(&o.stderr).contains("does not exist"), "{}", text(&o.stderr));
    assert!(text(&o.stderr).contains("the JVM writes as its own user"), "{}", text(&o.stderr));
    // The JVM still runs and can be profiled.
    let out = s.path("ok.collapsed");
    let o = attach(jvm.pid(), &["--duration", "500ms", "-o", out.to_str().unwrap()]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert!(jvm.alive());
    let _ = jvm.child.kill();
    let out = jvm.child.wait_with_output_ref();
    assert!(!out.contains("[oxprof]"), "the JVM printed oxprof messages: {out}");
}

trait OutputOf {
    fn wait_with_output_ref(&mut self) -> String;
}

impl OutputOf for Child {
    fn wait_with_output_ref(&mut self) -> String {
        let _ = self.wait();
        let mut s = String::new();
        if let Some(mut e) = self.stderr.take() {
            use std::io::Read;
            let _ = e.read_to_string(&mut s);
        }
        s
    }
}

#[test]
fn attaching_to_a_non_jvm_fails_cleanly_without_killing_it() {
    let mut sleep = Command::new("sleep").arg("30").spawn().unwrap();
    let o = attach(sleep.id(), &["status"]);
    assert!(!o.status.success());
    assert!(text(&o.stderr).contains("is not a HotSpot JVM"), "{}", text(&o.stderr));
    std::thread::sleep(std::time::Duration::from_millis(200));
    assert!(sleep.try_wait().unwrap().is_none(), "the process was killed");
    let _ = sleep.kill();
    let _ = sleep.wait();

    let o = attach(4_000_000, &["status"]);
    assert!(!o.status.success());
    assert!(text(&o.stderr).contains("4000000"), "{}", text(&o.stderr));
}

#[test]
fn list_shows_the_jvm_and_whether_oxprof_is_loaded() {
    let s = Scratch::new("attach-list");
    compile(&s.0, &["Spin.java"]);
    let jvm = spin(&s.0);
    let line = |out: &str| out.lines().find(|l| l.trim_start().starts_with(&format!("{} ", jvm.pid()))).map(str::to_string);
    let o = oxprof_cmd().arg("list").output().unwrap();
    let before = line(&text(&o.stdout)).unwrap_or_else(|| panic!("pid missing from:\n{}", text(&o.stdout)));
    assert!(before.contains("Spin") && before.contains(" - "), "{before}");
    // A status asks; it does not load the agent into a JVM that never had it.
    let o = attach(jvm.pid(), &["status"]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert!(text(&o.stdout).contains("not loaded in this JVM"), "{}", text(&o.stdout));
    let maps = || std::fs::read_to_string(format!("/proc/{}/maps", jvm.pid())).unwrap();
    assert!(!maps().contains("liboxprof"), "status loaded the agent");
    for cmd in ["dump", "stop"] {
        let o = attach(jvm.pid(), &[cmd]);
        assert!(!o.status.success(), "{cmd} succeeded in a JVM without the agent");
        assert!(text(&o.stderr).contains("not running"), "{cmd}: {}", text(&o.stderr));
    }
    assert!(!maps().contains("liboxprof"), "dump or stop loaded the agent");
    let o = oxprof_cmd().arg("list").output().unwrap();
    assert!(line(&text(&o.stdout)).unwrap().contains(" - "), "listed as loaded before any start");
    let o = attach(jvm.pid(), &["start"]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let o = attach(jvm.pid(), &["stop", "-o", s.path("list.collapsed").to_str().unwrap()]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let o = oxprof_cmd().arg("list").output().unwrap();
    let after = line(&text(&o.stdout)).unwrap();
    assert!(after.contains("loaded"), "{after}");
}

/// Builds tests/c/planted.c as `dir/liboxprof-planted.so`.
fn build_planted(dir: &std::path::Path) -> std::path::PathBuf {
    let src = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/c/planted.c");
    let out = dir.join("liboxprof-planted.so");
    let cc = std::env::var_os("CC").unwrap_or_else(|| "cc".into());
    let o = Command::new(&cc).args(["-shared", "-fPIC", "-O1", "-Wall", "-Wl,-z,noexecstack", "-o"]).arg(&out).arg(&src).output().expect("run cc");
    assert!(o.status.success(), "cc failed: {}", text(&o.stderr));
    out
}

/// `oxprof attach PID status`, killed if it has not finished after 30 s (`None`).
fn status_within_30s(pid: u32) -> Option<std::process::Output> {
    let child =
        oxprof_cmd().args(["attach", &pid.to_string(), "status"]).stdout(std::process::Stdio::piped()).stderr(std::process::Stdio::piped()).spawn().unwrap();
    let oxprof_pid = child.id();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(child.wait_with_output());
    });
    match rx.recv_timeout(std::time::Duration::from_secs(30)) {
        Ok(o) => Some(o.unwrap()),
        Err(_) => {
            // SAFETY: kill takes a pid and a signal by value; the child is not reaped yet.
            unsafe { libc::kill(oxprof_pid as i32, libc::SIGKILL) };
            let _ = rx.recv();
            None
        }
    }
}

/// The reply file is the JVM's user's to plant: a FIFO, a symlink to a file
/// that user may not read, a file with escape sequences, a huge sparse file.
/// `oxprof attach` finishes in bounded time, reads none of root's files,
/// prints no control characters and at most 64 KiB.
fn planted_replies(jvm_cmd: impl Fn(&[String]) -> Command, name: &str) {
    let s = Scratch::new(name);
    compile(&s.0, &["Idle.java"]);
    let lib = build_planted(&s.0);
    let control = s.path("plant");
    let secret = s.path("secret");
    std::fs::write(&secret, "SECRET-CONTENTS\n").unwrap();
    std::fs::set_permissions(&secret, std::os::unix::fs::PermissionsExt::from_mode(0o600)).unwrap();
    let mut cmd = jvm_cmd(&[format!("-agentpath:{}", lib.display()), "-cp".into(), s.0.display().to_string(), "Idle".into()]);
    cmd.env("OXPROF_TEST_PLANT", &control);
    let jvm = RunningJvm::spawn(cmd, &s.0, "ready");
    let pid = jvm.pid();
    let status_with = |plant: &str| {
        std::fs::write(&control, format!("{plant}\n")).unwrap();
        let o = status_within_30s(pid).unwrap_or_else(|| panic!("oxprof attach hung with the reply file planted as {plant:?}"));
        (o.status.success(), text(&o.stdout), text(&o.stderr))
    };

    let (ok, out, err) = status_with("fifo");
    assert!(!ok && out.is_empty(), "{out}{err}");
    assert!(err.contains("not a regular file"), "{err}");

    let (ok, out, err) = status_with(&format!("symlink {}", secret.display()));
    assert!(!ok, "{out}{err}");
    assert!(!out.contains("SECRET") && !err.contains("SECRET"), "the target of a planted symlink was read: {out}{err}");
    assert!(err.contains("symbolic link"), "{err}");

    let (ok, out, err) = status_with("escape");
    assert!(ok, "{err}");
    assert!(!out.chars().any(|c| c.is_control() && c != '\n'), "control characters reached the terminal: {out:?}");
    assert_eq!(out, "running: ]0;owned[2J[31mcpu[0m\nline two\n");

    let (ok, out, err) = status_with("huge");
    assert!(ok, "{err}");
    assert_eq!(out, "running: cpu\n");

    // The planted files are gone (removed as the JVM's user).
    let left: Vec<String> = std::fs::read_dir("/tmp")
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter(|n| n.starts_with("oxprof-reply-") && n.contains(&format!("-{pid}-")))
        .collect();
    assert!(left.is_empty(), "{left:?}");
    drop(jvm);
}

#[test]
fn planted_reply_files_are_read_safely() {
    planted_replies(|args| java_cmd(args), "attach-planted");
}

/// The same with the JVM of another user than oxprof's (root): the symlink
/// leads to a file only root may read.
#[test]
#[ignore = "needs root; scripts/test.sh runs it when run as root"]
fn planted_reply_files_of_another_users_jvm() {
    // SAFETY: geteuid cannot fail.
    assert_eq!(unsafe { libc::geteuid() }, 0, "planted_reply_files_of_another_users_jvm needs root (to start a JVM of another user)");
    planted_replies(
        |args| {
            let mut cmd = Command::new("setpriv");
            cmd.args(["--reuid=65534", "--regid=65534", "--clear-groups"]).arg(java()).args(args);
            cmd
        },
        "attach-planted-nobody",
    );
}

/// The MAIN column is the JVM's command line, the user's to choose: no
/// escape sequences from it reach the terminal.
#[test]
fn list_prints_no_control_characters() {
    let s = Scratch::new("attach-list-escape");
    compile(&s.0, &["Idle.java"]);
    let jar = s.path("idle\x1b]0;owned\x07\x1b[2J\r.jar");
    let o =
        Command::new(tool("jar")).arg("--create").arg("--file").arg(&jar).args(["--main-class", "Idle", "-C"]).arg(&s.0).arg("Idle.class").output().unwrap();
    assert!(o.status.success(), "{}", text(&o.stderr));
    let jvm = RunningJvm::spawn(java_cmd([std::ffi::OsStr::new("-jar"), jar.as_os_str()]), &s.0, "ready");
    let o = oxprof_cmd().arg("list").output().unwrap();
    let out = text(&o.stdout);
    assert!(!out.chars().any(|c| c.is_control() && c != '\n'), "control characters reached the terminal: {out:?}");
    let line = out.lines().find(|l| l.trim_start().starts_with(&format!("{} ", jvm.pid()))).unwrap_or_else(|| panic!("pid missing from:\n{out}"));
    assert!(line.ends_with("idle]0;owned[2J.jar"), "{line}");
}

/// A JVM attached to while it is still starting. Two races of HotSpot's
/// start-up: its working directory is its hsperfdata directory for a few
/// milliseconds (with SIGQUIT already caught), so a trigger file put there
/// is never found; and its attach listener can answer before the JVM enters
/// its live phase, when no JVMTI environment is given out. Every attach, at
/// delays from launch that cover the whole start-up (finely the first 60 ms,
/// where the first race was seen one time in three), records the program's
/// own loop; none fails, and no trigger file is left anywhere.
#[test]
fn attach_to_a_jvm_still_starting() {
    let s = Scratch::new("attach-starting");
    compile(&s.0, &["Spin.java"]);
    let mut failures = Vec::new();
    let delays = (0..60).step_by(4).chain((80..=300).step_by(40));
    for delay_ms in delays {
        let mut child = java_cmd(["-cp", s.0.to_str().unwrap(), "Spin", "forever"])
            .current_dir(&s.0)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let child_pid = child.id();
        std::thread::sleep(std::time::Duration::from_millis(delay_ms));
        let out = s.path(&format!("d{delay_ms}.collapsed"));
        let o = attach(child.id(), &["--duration", "1s", "--interval", "2ms", "-o", out.to_str().unwrap()]);
        let alive = child.try_wait().unwrap().is_none();
        let _ = child.kill();
        let jvm = child.wait_with_output().unwrap();
        let err = text(&o.stderr);
        let loops = if out.exists() { samples_with(&read_collapsed(&out), "Spin.loop") } else { 0 };
        eprintln!("attach {delay_ms} ms after launch: success={} Spin.loop samples={loops}", o.status.success());
        if !o.status.success() || loops == 0 || !alive {
            failures.push(format!("{delay_ms} ms: attach {}, {loops} samples, JVM alive {alive}: {err} / JVM: {}", o.status, text(&jvm.stderr)));
        }
        let trigger = format!(".attach_pid{}", child_pid);
        let hsperf = std::env::temp_dir().join(format!("hsperfdata_{}", whoami()));
        for dir in [s.0.clone(), std::path::PathBuf::from("/tmp"), hsperf] {
            if dir.join(&trigger).exists() {
                failures.push(format!("{delay_ms} ms: {} left behind", dir.join(&trigger).display()));
            }
        }
    }
    assert!(failures.is_empty(), "attaching to a starting JVM failed:\n{}", failures.join("\n"));
}

/// The name of the user running the tests (hsperfdata directories carry it).
fn whoami() -> String {
    let o = Command::new("id").arg("-un").output().unwrap();
    text(&o.stdout).trim().to_string()
}

/// `--duration` counts from the start's reply, not from the request: a JVM
/// still starting, or a loaded machine, can take longer than a short
/// duration to load the agent and start (CI saw a 1 s recording of a JVM
/// attached during its start-up come back with 0 samples: the stop had
/// followed the start's late reply at once). Here the JVM is held still
/// with SIGSTOP for 1.5 s while the start is under way; the recording still
/// lasts its second of the program's spinning.
#[test]
fn duration_counts_from_the_start_not_from_the_request() {
    let s = Scratch::new("attach-slow-start");
    compile(&s.0, &["Spin.java"]);
    for attempt in 0..5 {
        let jvm = spin(&s.0);
        let pid = jvm.pid();
        let out = s.path(&format!("slow{attempt}.collapsed"));
        let mut cli = oxprof_cmd()
            .arg("attach")
            .arg(pid.to_string())
            .args(["--duration", "1s", "--interval", "2ms", "-o", out.to_str().unwrap()])
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let lines = stderr_lines(&mut cli);
        // The agent is mapped within the start request's handling, before
        // it starts the recording and replies.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
        while !std::fs::read_to_string(format!("/proc/{pid}/maps")).unwrap_or_default().contains("liboxprof") {
            assert!(std::time::Instant::now() < deadline, "the agent never loaded");
            std::thread::sleep(std::time::Duration::from_micros(500));
        }
        // SAFETY: plain signals to the test's own child.
        unsafe { libc::kill(pid as i32, libc::SIGSTOP) };
        std::thread::sleep(std::time::Duration::from_millis(100));
        let early: Vec<String> = lines.try_iter().collect();
        let replied = early.iter().any(|l| l.contains("started"));
        std::thread::sleep(std::time::Duration::from_millis(1400));
        // SAFETY: as above.
        unsafe { libc::kill(pid as i32, libc::SIGCONT) };
        let status = cli.wait().unwrap();
        let err: Vec<String> = early.into_iter().chain(lines.iter()).collect();
        let err = err.join("\n");
        assert!(status.success(), "{err}");
        if replied {
            // The start had replied before the JVM was stopped: not the case tested.
            eprintln!("attempt {attempt}: the start replied before the JVM was held; again");
            continue;
        }
        let loops = samples_with(&read_collapsed(&out), "Spin.loop");
        eprintln!("attempt {attempt}: {loops} Spin.loop samples in a 1 s recording whose start took 1.5 s");
        // 1 s of one spinning thread at 2 ms is up to 500 samples; a stop
        // sent at once gets almost none.
        assert!(loops >= 100, "only {loops} samples: the recording did not last its second\n{err}");
        return;
    }
    panic!("in 5 attempts the start always replied within 100 ms of the agent's loading");
}

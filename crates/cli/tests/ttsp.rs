//! Native-function triggers end to end: time-to-safepoint profiling against
//! the JVM's own safepoint log, begin/end on a JNI library's functions,
//! start/stop cycles that must leave no patched byte, and bad names.

mod common;

use common::*;
use std::path::{Path, PathBuf};

#[test]
fn ttsp_names_the_loop_that_delays_safepoints() {
    check_ttsp(&java(), "JDK 17");
}

/// Builds tests/c/window.c against the test JDK's JNI headers.
fn build_window_lib(dir: &Path) -> PathBuf {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/c/window.c");
    let out = dir.join("libwindow.so");
    let javac = std::fs::canonicalize(tool("javac")).expect("javac");
    let include = javac.parent().unwrap().parent().unwrap().join("include");
    assert!(include.join("jni.h").exists(), "no JNI headers in {}", include.display());
    let cc = std::env::var_os("CC").unwrap_or_else(|| "cc".into());
    let o = std::process::Command::new(&cc)
        .args(["-shared", "-fPIC", "-O2", "-Wall", "-Wl,-z,noexecstack"])
        .arg(format!("-I{}", include.display()))
        .arg(format!("-I{}", include.join("linux").display()))
        .arg("-o")
        .arg(&out)
        .arg(&src)
        .output()
        .expect("run cc");
    assert!(o.status.success(), "cc failed: {}", text(&o.stderr));
    out
}

/// begin=/end= on the two JNI functions: CPU samples land only between
/// them, never in the identical work done outside, and the timers run only
/// inside the windows.
#[test]
fn begin_end_on_jni_functions_keep_only_the_window() {
    let s = Scratch::new("trigger-jni");
    compile(&s.0, &["JniWindow.java"]);
    let lib = build_window_lib(&s.0);
    let jvm = RunningJvm::spawn(java_cmd(["-cp", s.0.to_str().unwrap(), "JniWindow", lib.to_str().unwrap(), "300"]), &s.0, "ready");
    let out = s.path("window.collapsed");
    let o = attach_for_cpu(
        oxprof_cmd(),
        jvm.pid(),
        3000,
        &["--interval", "1ms", "--begin", "Java_JniWindow_windowBegin", "--end", "Java_JniWindow_windowEnd", "-o", out.to_str().unwrap()],
    );
    let said = format!("{}{}", text(&o.stdout), text(&o.stderr));
    assert!(o.status.success(), "{said}");
    assert!(said.contains("triggers armed") && said.contains("begin=Java_JniWindow_windowBegin"), "{said}");
    let stacks = read_collapsed(&out);
    let (inside, outside) = (samples_with(&stacks, "JniWindow.inside"), samples_with(&stacks, "JniWindow.outside"));
    eprintln!("inside {inside} samples, outside {outside}, of {}", total(&stacks));
    assert!(inside >= 300, "{inside} samples inside the window: {stacks:?}");
    assert_eq!(outside, 0, "samples outside the window were kept: {stacks:?}");
    let t = summary_fields(&said, "trigger summary:");
    let windows: u64 = t["windows"].parse().unwrap();
    let switches: u64 = t["timer_switches"].parse().unwrap();
    // Windows last milliseconds: the timers are switched on in each (after
    // a quarter interval) and off after it, so the work outside never even
    // gets a signal.
    assert!(windows >= 50 && switches >= windows, "{said}");
    assert_eq!(t["code"], "restored", "{said}");
}

/// The bytes of `len` at `addr` in process `pid` and in the file the
/// address is mapped from.
fn memory_and_file_bytes(pid: u32, addr: u64, len: usize) -> (Vec<u8>, Vec<u8>) {
    use std::io::{Read, Seek, SeekFrom};
    let maps = std::fs::read_to_string(format!("/proc/{pid}/maps")).unwrap();
    let (path, file_off) = maps
        .lines()
        .find_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            let (lo, hi) = f[0].split_once('-').unwrap();
            let (lo, hi) = (u64::from_str_radix(lo, 16).unwrap(), u64::from_str_radix(hi, 16).unwrap());
            (addr >= lo && addr < hi && f.len() >= 6).then(|| (f[5].to_string(), u64::from_str_radix(f[2], 16).unwrap() + addr - lo))
        })
        .expect("the address is mapped from a file");
    let mut mem = vec![0u8; len];
    let mut m = std::fs::File::open(format!("/proc/{pid}/mem")).unwrap();
    m.seek(SeekFrom::Start(addr)).unwrap();
    m.read_exact(&mut mem).unwrap();
    let mut file = vec![0u8; len];
    let mut f = std::fs::File::open(&path).unwrap();
    f.seek(SeekFrom::Start(file_off)).unwrap();
    f.read_exact(&mut file).unwrap();
    (mem, file)
}

/// 100 attach start/stop cycles with ttsp on a JVM that keeps asking for
/// safepoints while a thread holds them up:
/// the JVM survives, every stop says the code was restored, and the bytes
/// of the three patched functions equal the library file's afterwards.
#[test]
fn ttsp_start_stop_cycles_leave_no_patched_byte() {
    let s = Scratch::new("ttsp-cycles");
    compile(&s.0, &["TtspLoop.java"]);
    let mut jvm = RunningJvm::spawn(
        java_cmd(["-XX:-UseCountedLoopSafepoints", "-XX:LoopStripMiningIter=0", "-cp", s.0.to_str().unwrap(), "TtspLoop", "600"]),
        &s.0,
        "ready",
    );
    let pid = jvm.pid();
    let mut addrs: Vec<u64> = Vec::new();
    let mut mid_window = 0;
    for round in 0..100 {
        let out = s.path("c.collapsed");
        let o = oxprof_cmd().args(["attach", &pid.to_string(), "start", "--ttsp"]).output().unwrap();
        let started = text(&o.stdout);
        assert!(o.status.success(), "round {round}: {started}{}", text(&o.stderr));
        if addrs.is_empty() {
            addrs =
                started.split(" at 0x").skip(1).map(|a| u64::from_str_radix(a.split(|c: char| !c.is_ascii_hexdigit()).next().unwrap(), 16).unwrap()).collect();
            assert_eq!(addrs.len(), 3, "{started}");
        }
        std::thread::sleep(std::time::Duration::from_millis(10 + (round % 7) * 13));
        let o = oxprof_cmd().args(["attach", &pid.to_string(), "stop", "-o", out.to_str().unwrap()]).output().unwrap();
        let stopped = text(&o.stdout);
        assert!(o.status.success(), "round {round}: {stopped}{}", text(&o.stderr));
        let sp = summary_fields(&stopped, "safepoint summary:");
        assert_eq!(sp["code"], "restored", "round {round}: {stopped}");
        mid_window += usize::from(sp["open_at_stop"] == "yes");
        assert!(jvm.alive(), "round {round}: the JVM died");
        for &a in &addrs {
            let (mem, file) = memory_and_file_bytes(pid, a, 16);
            assert_eq!(mem, file, "round {round}: code at 0x{a:x} differs from the library file after stop");
        }
    }
    // The attach listener is a Java thread, so a stop command is rarely
    // taken while threads are being stopped; the agent's unit test
    // `trigger::traps::tests::arm_and_disarm_while_threads_run_the_code`
    // covers removal mid-window and mid-call.
    eprintln!("100 cycles; {mid_window} stopped while threads were being brought to a safepoint");
    assert!(jvm.alive());
    // Stopped to a JFR file (the recording was not streaming JFR): the
    // safepoints timed are in it as the JDK's events, as many as the
    // summary counts, with the same times to safepoint.
    let o = oxprof_cmd().args(["attach", &pid.to_string(), "start", "--ttsp"]).output().unwrap();
    assert!(o.status.success(), "{}{}", text(&o.stdout), text(&o.stderr));
    std::thread::sleep(std::time::Duration::from_millis(1500));
    let jfr = s.path("stopped.jfr");
    let o = oxprof_cmd().args(["attach", &pid.to_string(), "stop", "-o", jfr.to_str().unwrap()]).output().unwrap();
    let stopped = text(&o.stdout);
    assert!(o.status.success(), "{stopped}{}", text(&o.stderr));
    let counted: usize = summary_fields(&stopped, "safepoint summary:")["safepoints"].parse().unwrap();
    let times = jfr_safepoint_times(&jfr);
    assert!(counted > 0, "no safepoint in 1.5 s of TtspLoop: {stopped}");
    assert_eq!(times.len(), counted, "the JFR file's safepoints against the summary's: {stopped}");
    assert!(jvm.alive());
}

/// Names that are missing or name several functions are refused in one
/// line naming what was meant; the JVM runs on without profiling.
#[test]
fn bad_trigger_names_are_refused_with_close_matches() {
    let s = Scratch::new("trigger-bad");
    for (opts, expected) in [
        ("begin=SafepointSynchronize::begn,end=SafepointSynchronize::end", "close matches: SafepointSynchronize::begin()"),
        ("begin=SafepointSynchronize::begin,end=os::malloc", "'os::malloc' names 2 functions: os::malloc(unsigned long, MEMFLAGS)"),
        ("begin=no_such_function_xyzzy_at_all,end=SafepointSynchronize::end", "no function named 'no_such_function_xyzzy_at_all'"),
    ] {
        let o = run_java(&s.0, &format!("{opts},file={}", s.path("x.collapsed").display()), &[], &s.0, &["-version"]);
        let err = text(&o.stderr);
        assert!(o.status.success(), "{opts}: the JVM failed: {err}");
        let ours: Vec<&str> = err.lines().filter(|l| l.starts_with("[oxprof] error:")).collect();
        assert_eq!(ours.len(), 1, "{opts}: {err}");
        assert!(ours[0].contains(expected), "{opts}: {}", ours[0]);
        assert!(!s.path("x.collapsed").exists(), "{opts}: profiling started anyway");
    }
    for (opts, expected) in [
        ("ttsp,begin=f", "either ttsp or begin"),
        ("ttsp=maybe", "'ttsp' takes no value, or true/false"),
        ("begin=SafepointSynchronize::begin", "begin=FUNC needs end=FUNC"),
    ] {
        let o = run_java(&s.0, opts, &[], &s.0, &["-version"]);
        assert_refused(&o, opts, expected);
    }
}

/// With `loop=`, each interval's page lists the safepoints requested in
/// that interval only: together they are every safepoint of the
/// recording, once.
#[test]
fn each_interval_lists_its_own_safepoints() {
    let s = Scratch::new("ttsp-loop");
    compile(&s.0, &["TtspLoop.java"]);
    let pattern = s.path("iv-%n.html");
    let o = std::process::Command::new(java())
        .current_dir(&s.0)
        .arg(format!("-agentpath:{}=start,ttsp,loop=1s,file={}", agent().display(), pattern.display()))
        .args(["-XX:-UseCountedLoopSafepoints", "-XX:LoopStripMiningIter=0"])
        .args(["-cp", s.0.to_str().unwrap(), "TtspLoop", "4"])
        .output()
        .unwrap();
    let err = text(&o.stderr);
    assert!(o.status.success(), "{err}");
    let recorded: u64 = summary_fields(&err, "[oxprof] safepoint summary:").get("safepoints").and_then(|v| v.parse().ok()).expect("safepoint summary");
    let mut per_interval = Vec::new();
    for e in std::fs::read_dir(&s.0).unwrap().filter_map(Result::ok) {
        let name = e.file_name().to_string_lossy().to_string();
        if !(name.starts_with("iv-") && name.ends_with(".html")) {
            continue;
        }
        let page = std::fs::read_to_string(e.path()).unwrap();
        // "<summary><b>Safepoints</b> N · time to safepoint ..."; no block without safepoints.
        let n = page.split("<b>Safepoints</b> ").nth(1).and_then(|r| r.split(' ').next()).map_or(0, |n| n.replace(',', "").parse::<u64>().unwrap_or(0));
        per_interval.push(n);
    }
    let listed: u64 = per_interval.iter().sum();
    eprintln!("{} intervals list {per_interval:?} safepoints, {listed} in all; the recording counted {recorded}", per_interval.len());
    assert!(per_interval.len() >= 4, "{per_interval:?}");
    assert!(recorded >= 20, "{recorded} safepoints in 4 s");
    assert!(listed <= recorded && listed + 2 >= recorded, "the intervals list {listed} safepoints, the recording counted {recorded}: {per_interval:?}");
}

/// More safepoints than the agent's record ring holds (16,384) between a
/// start and a stop: every one is in the page, not only the last 16,384.
#[test]
fn a_recording_keeps_more_safepoints_than_the_ring_holds() {
    let s = Scratch::new("ttsp-many");
    compile(&s.0, &["ManySafepoints.java"]);
    let page = s.path("many.html");
    let o = std::process::Command::new(java())
        .current_dir(&s.0)
        .arg(format!("-agentpath:{}=start,ttsp,file={}", agent().display(), page.display()))
        .args(["-cp", s.0.to_str().unwrap(), "ManySafepoints", "25000"])
        .output()
        .unwrap();
    let err = text(&o.stderr);
    assert!(o.status.success(), "{err}");
    let requests = truth_line(&text(&o.stdout))["requests"] as u64;
    let summary = summary_fields(&err, "[oxprof] safepoint summary:");
    let recorded: u64 = summary.get("safepoints").and_then(|v| v.parse().ok()).expect("safepoint summary");
    let html = std::fs::read_to_string(&page).unwrap();
    let listed = html.split("<b>Safepoints</b> ").nth(1).and_then(|r| r.split(' ').next()).map_or(0, |n| n.replace(',', "").parse::<u64>().unwrap_or(0));
    eprintln!("{requests} requests, {recorded} safepoints recorded, {listed} on the page; {summary:?}");
    assert!(recorded >= requests, "{recorded} safepoints recorded for {requests} requests: {err}");
    assert_eq!(listed, recorded, "the page lists {listed} of the {recorded} safepoints: {err}");
    assert_eq!(summary.get("dropped_records").map(String::as_str), Some("0"), "{err}");
    // A page shared later says its samples are gated.
    assert!(html.contains("CPU profile while threads are stopped for safepoints"), "no gated title on the page");
    assert!(html.contains("only while threads were being stopped for a safepoint"), "no gated header line on the page");
}

/// A window opened and never closed (begin entered, end never called) has
/// no record, but its samples are in the profile: the summary counts them
/// as kept (it said `samples_kept=0` beside a profile of hundreds).
#[test]
fn a_window_open_at_stop_counts_its_samples() {
    let s = Scratch::new("trigger-open");
    compile(&s.0, &["OpenWindow.java"]);
    let out = s.path("open.collapsed");
    let o = run_java(&s.0, &format!("start,event=cpu,interval=2ms,begin=JVM_Sleep,end=JVM_Yield,file={}", out.display()), &[], &s.0, &["OpenWindow", "800"]);
    let err = text(&o.stderr);
    assert!(o.status.success(), "{err}");
    let t = summary_fields(&err, "trigger summary:");
    assert_eq!(t["open_at_stop"], "yes", "{err}");
    let kept: u64 = t["samples_kept"].parse().unwrap();
    let profile = total(&read_collapsed(&out));
    assert!(profile > 50, "{profile} samples in the open window: {err}");
    assert_eq!(kept, profile, "the summary's kept samples against the profile's: {err}");
}

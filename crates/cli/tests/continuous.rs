//! Continuous profiling (`loop=`): the recording cut into consecutive
//! interval files, each complete on its own, together holding every sample
//! once; `keep=`; status, dump and stop during a loop.

mod common;

use std::path::{Path, PathBuf};

use common::*;

/// The interval files in `dir` named `prefix<N>.ext` (one extension, so
/// `r-3.wall.collapsed` is not `r-3.collapsed`), ordered by N.
fn numbered(dir: &Path, prefix: &str) -> Vec<(u64, PathBuf)> {
    let mut v: Vec<(u64, PathBuf)> = std::fs::read_dir(dir)
        .unwrap()
        .filter_map(|e| {
            let p = e.ok()?.path();
            let name = p.file_name()?.to_str()?.to_string();
            let (n, ext) = name.strip_prefix(prefix)?.split_once('.')?;
            let n: u64 = n.parse().ok().filter(|_| !ext.contains('.'))?;
            Some((n, p))
        })
        .collect();
    v.sort();
    v
}

fn cpu_ns(stdout: &str) -> f64 {
    stdout.lines().find_map(|l| l.strip_prefix("CPU_NS ")).expect("CPU_NS line").trim().parse().unwrap()
}

#[test]
fn intervals_are_whole_files_that_together_hold_every_sample_once() {
    let s = Scratch::new("loop-collapsed");
    compile(&s.0, &["CpuBurn.java"]);
    let pattern = s.path("iv-%n.collapsed");
    let opts = format!("start,event=cpu,interval=1ms,total,loop=1s,file={}", pattern.display());
    let o = run_java(&s.0, &opts, &[], &s.0, &["CpuBurn", "5"]);
    let err = text(&o.stderr);
    assert!(o.status.success(), "{err}");
    let truth = cpu_ns(&text(&o.stdout));
    let files = numbered(&s.0, "iv-");
    assert!(files.len() >= 5, "{} interval files\n{err}", files.len());
    assert_eq!(files.iter().map(|(n, _)| *n).collect::<Vec<_>>(), (0..files.len() as u64).collect::<Vec<_>>(), "numbers in sequence");
    let mut spin = 0;
    let mut with_samples = 0;
    for (n, f) in &files {
        let stacks = read_collapsed(f);
        let here = samples_with(&stacks, "CpuBurn.spin");
        spin += here;
        with_samples += (here > 0) as usize;
        // Each file is one interval, not the recording so far: no interval
        // holds more than ~1 s of the burner's CPU (1e9 ns + slack).
        assert!(here < 1_400_000_000, "interval {n} holds {here} ns of CpuBurn.spin");
    }
    // The burner's samples are spread over the intervals, not in one file
    // (on a loaded machine it may get no CPU for a whole second).
    assert!(with_samples >= 3.min(files.len()), "only {with_samples} of {} intervals hold the burner's samples\n{err}", files.len());
    // Every sample in exactly one file: the intervals add up to the CPU time
    // the program measured itself (a gap or an overlap would show here).
    let ratio = spin as f64 / truth;
    eprintln!("CpuBurn.spin over {} intervals: {spin} ns, ThreadMXBean {truth:.0} ns, ratio {ratio:.3}", files.len());
    assert!((0.93..=1.05).contains(&ratio), "intervals add up to {ratio:.3} of the program's CPU time\n{err}");
}

/// `jfr print --json` start times (ISO text, same format in every file).
fn sample_times(jfr: &Path) -> Vec<String> {
    let o = std::process::Command::new(tool("jfr")).args(["print", "--json", "--events", "jdk.ExecutionSample"]).arg(jfr).output().unwrap();
    assert!(o.status.success(), "jfr print {}: {}", jfr.display(), text(&o.stderr));
    let mut v: Vec<String> =
        text(&o.stdout).lines().filter_map(|l| l.trim().strip_prefix("\"startTime\": \"")).map(|t| t.trim_end_matches([',', ' ', '"']).to_string()).collect();
    v.sort();
    v
}

#[test]
fn jfr_intervals_are_recordings_of_their_own_in_consecutive_time() {
    let s = Scratch::new("loop-jfr");
    compile(&s.0, &["CpuBurn.java"]);
    let pattern = s.path("rec-%n.jfr");
    let opts = format!("start,event=cpu,interval=1ms,alloc,loop=1s,file={}", pattern.display());
    let o = run_java(&s.0, &opts, &[], &s.0, &["CpuBurn", "4"]);
    let err = text(&o.stderr);
    assert!(o.status.success(), "{err}");
    let truth = cpu_ns(&text(&o.stdout));
    let files = numbered(&s.0, "rec-");
    assert!(files.len() >= 4, "{} interval files\n{err}", files.len());
    let mut previous_last: Option<String> = None;
    let mut samples = 0usize;
    for (n, f) in &files {
        // Each file is read by the JDK's tool on its own.
        let summary = std::process::Command::new(tool("jfr")).arg("summary").arg(f).output().unwrap();
        assert!(summary.status.success(), "jfr summary of interval {n}: {}", text(&summary.stderr));
        let times = sample_times(f);
        if let (Some(prev), Some(first)) = (&previous_last, times.first()) {
            assert!(prev <= first, "interval {n} starts at {first}, before the previous one ended ({prev})");
        }
        if let Some(last) = times.last() {
            previous_last = Some(last.clone());
        }
        samples += times.len();
    }
    // All execution samples (every thread) at 1 ms: at least the burner's CPU time.
    let ratio = samples as f64 * 1e6 / truth;
    eprintln!("{} JFR intervals: {samples} execution samples, ratio to the burner's CPU time {ratio:.3}", files.len());
    assert!((0.93..=1.3).contains(&ratio), "execution samples {samples} for {truth:.0} ns of the burner's CPU time\n{err}");
}

#[test]
fn keep_status_dump_and_stop_during_a_loop() {
    let s = Scratch::new("loop-attach");
    compile(&s.0, &["CpuBurn.java"]);
    let pattern = s.path("k-%n.html");
    let opts = format!("start,event=cpu,interval=5ms,loop=1s,keep=2,file={}", pattern.display());
    let cmd = java_cmd([format!("-agentpath:{}={opts}", agent().display()), "-cp".into(), s.0.display().to_string(), "CpuBurn".into(), "30".into()]);
    let jvm = RunningJvm::spawn(cmd, &s.0, "ready");
    std::thread::sleep(std::time::Duration::from_millis(4500));
    let status = oxprof_cmd().args(["attach", &jvm.pid().to_string(), "status"]).output().unwrap();
    let st = text(&status.stdout) + &text(&status.stderr);
    assert!(status.status.success(), "{st}");
    assert!(st.contains("loop=1s") && st.contains("deleted="), "status: {st}");
    // A dump writes the interval so far where it is asked, and the loop goes on.
    let dumped = s.path("now.collapsed");
    let o = oxprof_cmd().args(["attach", &jvm.pid().to_string(), "dump", "-o", dumped.to_str().unwrap()]).output().unwrap();
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert!(samples_with(&read_collapsed(&dumped), "CpuBurn.spin") > 0, "dump without the burner");
    std::thread::sleep(std::time::Duration::from_millis(1500));
    let o = oxprof_cmd().args(["attach", &jvm.pid().to_string(), "stop"]).output().unwrap();
    let out = text(&o.stdout) + &text(&o.stderr);
    assert!(o.status.success(), "{out}");
    // keep=2: the last two intervals, the one stop ended among them.
    let files = numbered(&s.0, "k-");
    assert_eq!(files.len(), 2, "files kept: {files:?}\n{out}");
    assert!(files[0].0 >= 4 && files[1].0 == files[0].0 + 1, "{files:?}");
    assert!(out.contains(&files[1].1.display().to_string()), "stop names the last interval's file: {out}");
    for (_, f) in &files {
        let page = std::fs::read_to_string(f).unwrap();
        assert!(page.contains("CpuBurn.spin") && page.trim_end().ends_with("</html>"), "{} is not a whole page", f.display());
    }
    // Stopped: no more intervals.
    std::thread::sleep(std::time::Duration::from_millis(1500));
    assert_eq!(numbered(&s.0, "k-").len(), 2);
    let status = oxprof_cmd().args(["attach", &jvm.pid().to_string(), "status"]).output().unwrap();
    assert!(text(&status.stdout).contains("idle") || text(&status.stderr).contains("idle"), "{}", text(&status.stdout));
}

#[test]
fn stores_emptied_between_intervals_lose_no_sample() {
    // Every interval empties the stores (as a weeks-long recording does
    // when they fill): CPU and wall-clock intervals still add up.
    let s = Scratch::new("loop-reset");
    compile(&s.0, &["CpuBurn.java"]);
    let pattern = s.path("r-%n.collapsed");
    let opts = format!("start,event=cpu,interval=1ms,wall=10ms,total,loop=1s,file={}", pattern.display());
    let o = run_java_env(&s.0, &[("OXPROF_STORE_RESET_FILL", "0")], &opts, &[], &s.0, &["CpuBurn", "4"]);
    let err = text(&o.stderr);
    assert!(o.status.success(), "{err}");
    let emptied = err.lines().filter(|l| l.contains("sample stores emptied")).count();
    assert!(emptied >= 3, "stores emptied {emptied} times\n{err}");
    let truth = cpu_ns(&text(&o.stdout));
    let cpu: u64 = numbered(&s.0, "r-").iter().map(|(_, f)| samples_with(&read_collapsed(f), "CpuBurn.spin")).sum();
    let ratio = cpu as f64 / truth;
    eprintln!("with the stores emptied {emptied} times: CpuBurn.spin {ratio:.3} of the program's CPU time");
    assert!((0.93..=1.05).contains(&ratio), "CPU intervals add up to {ratio:.3}\n{err}");
    // Wall clock: the main thread's time in all intervals (collapsed files
    // of the second profile are `r-N.wall.collapsed`), about the run's length.
    let mut wall_files: Vec<PathBuf> =
        std::fs::read_dir(&s.0).unwrap().filter_map(|e| e.ok().map(|e| e.path())).filter(|p| p.to_string_lossy().ends_with(".wall.collapsed")).collect();
    wall_files.sort();
    assert!(wall_files.len() >= 4, "{wall_files:?}");
    let main_wall: u64 = wall_files.iter().map(|f| samples_with(&read_collapsed(f), "CpuBurn.main")).sum();
    assert!(main_wall as f64 >= 0.9 * truth, "main thread's wall time {main_wall} ns in the intervals, CPU alone {truth:.0} ns");
}

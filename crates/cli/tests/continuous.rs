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

/// The `kept frame names: forgot N of unloaded classes` debug lines, summed.
fn kept_names_forgotten(lines: &[String]) -> usize {
    lines.iter().filter_map(|l| l.split("kept frame names: forgot ").nth(1)?.split(' ').next()?.parse::<usize>().ok()).sum()
}

/// Frame names kept from one interval to the next (`loop=`) give each
/// interval the profiles that naming every frame afresh gives: with
/// `OXPROF_CHECK_KEPT_NAMES=1` the agent builds every interval's CPU and
/// allocation profile both ways and logs whether they are the same. Classes
/// unload meanwhile (a new loader per Worker, stores emptied every interval
/// so their names can be pruned): the kept names of pruned methods must be
/// forgotten, and the JIT's code heap grows (native names kept across it).
#[test]
fn kept_frame_names_give_the_profiles_fresh_names_give() {
    use std::io::Write;
    use std::process::{Command, Stdio};
    let s = Scratch::new("loop-kept-names");
    let (app, workers) = (s.path("app"), s.path("workers"));
    std::fs::create_dir_all(&app).unwrap();
    std::fs::create_dir_all(&workers).unwrap();
    compile(&app, &["Unload.java"]);
    compile(&workers, &["Worker.java"]);
    let pattern = s.path("iv-%n.collapsed");
    let mut child = Command::new(java())
        .current_dir(&s.0)
        .env("OXPROF_CHECK_KEPT_NAMES", "1")
        .env("OXPROF_STORE_RESET_FILL", "0.000001")
        .arg(format!("-agentpath:{}=start,event=cpu,alloc,interval=1ms,loop=1s,loglevel=debug,file={}", agent().display(), pattern.display()))
        .arg("-cp")
        .arg(&app)
        .args(["Unload", workers.to_str().unwrap(), "3", "stdin"])
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start java");
    let rx = stderr_lines(&mut child);
    let started = std::time::Instant::now();
    let mut lines: Vec<String> = Vec::new();
    let checked_after = |lines: &[String]| {
        let at = lines.iter().position(|l| l.contains("kept frame names: forgot ") && !l.contains("forgot 0 of unloaded"));
        at.map_or(0, |i| lines[i..].iter().filter(|l| l.contains("kept names check (cpu)")).count())
    };
    // Until kept names of unloaded classes were forgotten and two more
    // intervals were checked after that.
    while checked_after(&lines) < 2 {
        match rx.recv_timeout(WORK_CAP.saturating_sub(started.elapsed())) {
            Ok(line) => lines.push(line),
            Err(_) => {
                let _ = child.kill();
                let tail = lines[lines.len().saturating_sub(30)..].join("\n");
                panic!("no kept name of an unloaded class was forgotten in {:.0} s:\n{tail}", started.elapsed().as_secs_f64());
            }
        }
    }
    child.stdin.as_mut().unwrap().write_all(b"stop\n").unwrap();
    lines.extend(rx.iter());
    let status = child.wait().unwrap();
    let err = lines.join("\n");
    assert!(status.success(), "the JVM failed: {status:?}\n{err}");
    let differ: Vec<&String> = lines.iter().filter(|l| l.contains("kept names check") && !l.contains("): same,")).collect();
    assert!(differ.is_empty(), "kept names built other profiles than fresh ones:\n{}", differ.iter().map(|l| l.as_str()).collect::<Vec<_>>().join("\n"));
    let same = |key: &str| lines.iter().filter(|l| l.contains(&format!("kept names check ({key}): same,"))).count();
    assert!(same("cpu") >= 4 && same("alloc") >= 4, "only {} CPU and {} allocation intervals checked\n{err}", same("cpu"), same("alloc"));
    // Names were kept from interval to interval, not made anew each time.
    let kept: Vec<usize> = lines.iter().filter_map(|l| l.split("; ").nth(1)?.strip_suffix(" intervals")?.split(" names kept").next()?.parse().ok()).collect();
    assert!(kept.iter().any(|&n| n > 0), "no names kept\n{err}");
    let forgot = kept_names_forgotten(&lines);
    eprintln!(
        "{} CPU and {} allocation intervals the same both ways; {forgot} kept names forgotten; up to {} names kept",
        same("cpu"),
        same("alloc"),
        kept.iter().max().unwrap_or(&0)
    );
}

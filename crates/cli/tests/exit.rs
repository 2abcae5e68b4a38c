//! JVM exit paths under the agent: System.exit from many threads at once,
//! SIGTERM while an attach dump runs, a JVM that fails to start after the
//! agent loaded (only `Agent_OnUnload` runs). No crash, no hs_err file, and
//! the recordings on disk are whole.

mod common;

use common::*;

fn no_crash_report(dir: &std::path::Path) {
    let crashes: Vec<_> = std::fs::read_dir(dir).unwrap().filter_map(|e| e.ok()).filter(|e| e.file_name().to_string_lossy().starts_with("hs_err")).collect();
    assert!(crashes.is_empty(), "the JVM crashed: {:?}", crashes.iter().map(|e| e.path()).collect::<Vec<_>>());
}

#[test]
fn system_exit_from_sixteen_threads_at_once() {
    let s = Scratch::new("exit-many");
    compile(&s.0, &["ManyExits.java"]);
    for round in 0..3 {
        let out = s.path(&format!("m{round}.jfr"));
        let o = run_java(&s.0, &format!("start,event=cpu,interval=1ms,alloc,live,wall=10ms,lock,file={}", out.display()), &[], &s.0, &["ManyExits"]);
        let err = text(&o.stderr);
        assert_eq!(o.status.code(), Some(0), "round {round}: {err}");
        no_crash_report(&s.0);
        assert!(err.contains("[oxprof] jfr summary:"), "round {round}: {err}");
        assert!(jfr_count(&out, "jdk.ExecutionSample") > 0 && jfr_count(&out, "jdk.ObjectAllocationSample") > 0, "round {round}");
    }
}

/// A JVM that fails during its own initialisation, after `Agent_OnLoad`
/// (a heap too small, an initial heap larger than the maximum): no
/// VMInit, no VMDeath, only `Agent_OnUnload`. The JVM's own error and exit
/// status reach the user; the agent neither crashes nor hangs it, and
/// writes no profile of a recording that never started.
#[test]
fn a_jvm_that_fails_to_start_exits_with_its_own_error() {
    let s = Scratch::new("exit-init");
    for opts in ["", "start,event=cpu,file=a.jfr", "start,event=cpu,interval=1ms,alloc,live,wall=10ms,lock,file=b.collapsed"] {
        for (flags, says) in [(&["-Xmx1k"][..], "Too small maximum heap"), (&["-Xms64m", "-Xmx32m"][..], "larger value than the maximum heap size")] {
            let flag = flags.join(" ");
            let o = std::process::Command::new(java())
                .current_dir(&s.0)
                .arg(format!("-agentpath:{}={opts}", agent().display()))
                .args(flags)
                .arg("-version")
                .output()
                .unwrap();
            // HotSpot prints its initialisation error on stdout.
            let err = format!("{}{}", text(&o.stdout), text(&o.stderr));
            assert_eq!(o.status.code(), Some(1), "{opts} {flag}: {err}");
            assert!(err.contains("Error occurred during initialization of VM") && err.contains(says), "{opts} {flag}: {err}");
            assert!(!err.contains("panic"), "{opts} {flag}: {err}");
            no_crash_report(&s.0);
            let left: Vec<_> = std::fs::read_dir(&s.0).unwrap().map(|e| e.unwrap().file_name()).collect();
            assert!(left.is_empty(), "{opts} {flag}: files left {left:?}");
        }
    }
}

#[test]
fn sigterm_during_an_attach_dump() {
    let s = Scratch::new("exit-term");
    compile(&s.0, &["ManyExits.java", "Hot.java"]);
    for round in 0..4u64 {
        let out = s.path(&format!("final{round}.html"));
        let dump = s.path(&format!("dump{round}.html"));
        let mut cmd = java_cmd([
            format!("-agentpath:{}=start,event=cpu,interval=1ms,alloc,live,file={}", agent().display(), out.display()),
            "-cp".into(),
            s.0.to_string_lossy().into_owned(),
            "Hot".into(),
            "60".into(),
        ]);
        cmd.current_dir(&s.0);
        let mut jvm = cmd.stdout(std::process::Stdio::null()).stderr(std::process::Stdio::piped()).spawn().unwrap();
        let pid = jvm.id();
        wait_for_cpu(pid, process_cpu_ms(pid), 1000, "Hot");
        let dumper = oxprof_cmd()
            .args(["attach", &pid.to_string(), "dump", "-o"])
            .arg(&dump)
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        std::thread::sleep(std::time::Duration::from_millis(5 + round * 15));
        // SAFETY: kill takes a pid and a signal by value.
        unsafe { libc::kill(pid as i32, libc::SIGTERM) };
        let status = jvm.wait().unwrap();
        let _ = dumper.wait_with_output();
        let mut err = String::new();
        std::io::Read::read_to_string(jvm.stderr.as_mut().unwrap(), &mut err).unwrap();
        assert_eq!(status.code(), Some(143), "round {round}: {err}");
        no_crash_report(&s.0);
        // The exit dump is whole: a page that names the hot method.
        let page = std::fs::read_to_string(&out).unwrap_or_else(|e| panic!("round {round}: {}: {e}\n{err}", out.display()));
        assert!(page.contains("Hot.sqrtSin") && page.trim_end().ends_with("</html>"), "round {round}: {err}");
        // The attach dump, if it ran before the JVM went away, is whole too.
        if let Ok(page) = std::fs::read_to_string(&dump) {
            assert!(page.trim_end().ends_with("</html>"), "round {round}: a partial dump");
        }
    }
}

/// At the shortest CPU interval accepted (100 us) a program that creates
/// 2,000 threads and 200 processes, one after another, finishes with every
/// engine (at 50 us and 25 us with `cpu` it never did: clone() restarted by
/// each signal); shorter intervals are refused in one line, `itimer`'s too.
/// `itimer` runs at 100 us and 1 ms: its process-wide timer signals whichever
/// thread runs, often one HotSpot has just created, and a handler calling
/// `GetEnv` there deadlocked in malloc (1 in 4 runs at 100 us, 2 in 8 at
/// 1 ms before `hotspot::thread_key`).
#[test]
fn thread_and_process_creation_progress_at_the_shortest_interval() {
    let s = Scratch::new("spawner");
    compile(&s.0, &["Spawner.java"]);
    for (engine, interval) in [("cpu", "100us"), ("ctimer", "100us"), ("itimer", "100us"), ("itimer", "1ms")] {
        let out = s.path(&format!("{engine}-{interval}.collapsed"));
        let mut child = java_cmd([
            format!("-agentpath:{}=start,event={engine},interval={interval},file={}", agent().display(), out.display()),
            "-cp".into(),
            s.0.to_string_lossy().into_owned(),
            "Spawner".into(),
            "2000".into(),
            "200".into(),
        ])
        .current_dir(&s.0)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
        let started = std::time::Instant::now();
        let status = loop {
            if let Some(st) = child.try_wait().unwrap() {
                break st;
            }
            if started.elapsed() > WORK_CAP {
                let _ = child.kill();
                panic!("{engine}: the program made no progress in {} s at interval={interval}", WORK_CAP.as_secs());
            }
            std::thread::sleep(std::time::Duration::from_millis(50));
        };
        let o = child.wait_with_output().unwrap();
        assert!(status.success(), "{engine} at {interval}: {}", text(&o.stderr));
        let t = truth_line(&text(&o.stdout));
        eprintln!("{engine} at {interval}: 2,000 threads in {} ms, 200 processes in {} ms", t["threads_ms"], t["procs_ms"]);
        assert!(samples_with(&read_collapsed(&out), "Spawner.main") > 0, "{engine} at {interval}: no samples of the program");
    }
    for event in ["cpu", "itimer"] {
        let opts = format!("start,event={event},interval=50us");
        let o = run_java(&s.0, &opts, &[], &s.0, &["Spawner", "1", "1"]);
        assert_refused(&o, &opts, "'interval=50us': the CPU interval must be at least 100us");
    }
}

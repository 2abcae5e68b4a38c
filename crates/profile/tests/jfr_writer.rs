//! The JFR writer's output read back by the JDK's own `jfr` tool: every
//! event kind, two chunks, names, frames, weights and times.

use std::path::PathBuf;
use std::process::Command;

use oxprof_profile::jfr::writer::event_type;
use oxprof_profile::jfr::{FrameType, JfrFrame, JfrWriter, OldObject, ThreadState};

/// The `jfr` tool of the JDK the tests run with (JAVA_HOME, then PATH).
fn jfr_tool() -> PathBuf {
    if let Ok(home) = std::env::var("JAVA_HOME") {
        let p = PathBuf::from(home).join("bin/jfr");
        if p.exists() {
            return p;
        }
    }
    PathBuf::from("jfr")
}

fn run_jfr(args: &[&str]) -> String {
    let out = Command::new(jfr_tool()).args(args).output().expect("the JDK's `jfr` tool must be installed (set JAVA_HOME or PATH) for this test");
    assert!(out.status.success(), "jfr {args:?} failed: {}\n{}", String::from_utf8_lossy(&out.stderr), String::from_utf8_lossy(&out.stdout));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn frame(class: &str, method: &str, line: i32, kind: FrameType) -> JfrFrame {
    JfrFrame { class: class.into(), method: method.into(), descriptor: "(I)V".into(), line, bci: 7, kind }
}

#[test]
fn the_jdk_reads_what_the_writer_wrote() {
    let dir = std::env::temp_dir().join(format!("oxprof-jfr-writer-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("w.jfr");
    let file = std::fs::File::create(&path).unwrap();
    let mut w = JfrWriter::new(file);
    let t0: i64 = 5_000_000_000;
    let wall0: i64 = 1_700_000_000_000_000_000;
    let hot = vec![
        frame("com.example.Hot", "spin", 42, FrameType::Jit),
        frame("com.example.Hot", "run", 10, FrameType::Inlined),
        frame("com.example.Main", "main", 3, FrameType::Interpreted),
    ];
    let alloc = vec![frame("com.example.Alloc", "make", 20, FrameType::Jit), frame("com.example.Main", "main", 4, FrameType::Interpreted)];
    // Chunk 1: settings, 3 CPU samples on two threads, 2 allocations.
    w.begin_chunk(t0, wall0).unwrap();
    w.thread(100, "main", Some("main"));
    w.setting(t0, 100, event_type::EXECUTION_SAMPLE, "period", "10 ms").unwrap();
    w.recording(t0, 100, "oxprof", "w.jfr", wall0 / 1_000_000, 0).unwrap();
    w.stack(1, &hot, false);
    w.execution_sample(t0 + 10_000_000, 100, 1, ThreadState::Running, 0).unwrap();
    w.execution_sample(t0 + 20_000_000, 100, 1, ThreadState::Running, 0).unwrap();
    w.execution_sample(t0 + 30_000_000, 101, 1, ThreadState::Running, 0).unwrap();
    assert_eq!(w.unnamed_threads(), vec![101]);
    w.thread(101, "worker-1", Some("worker-1"));
    w.stack(2, &alloc, false);
    w.allocation_sample(t0 + 40_000_000, 100, 2, "byte[]", 1000, 0).unwrap();
    w.allocation_sample(t0 + 41_000_000, 100, 2, "java.lang.String", 24, 0).unwrap();
    w.end_chunk(t0 + 50_000_000, false).unwrap();
    // Chunk 2: pools start afresh; one CPU sample, one old object.
    w.begin_chunk(t0 + 50_000_000, wall0 + 50_000_000).unwrap();
    assert!(!w.has_stack(1));
    w.stack(1, &hot, true);
    w.execution_sample(t0 + 60_000_000, 100, 1, ThreadState::Running, 0).unwrap();
    // While a chunk is open the file holds only complete chunks: readers
    // never meet a half-written one.
    let first_chunk = w.stats().bytes;
    assert_eq!(std::fs::metadata(&path).unwrap().len(), first_chunk);
    let partial = run_jfr(&["summary", path.to_str().unwrap()]);
    assert!(partial.contains("Chunks: 1"), "{partial}");
    w.stack(2, &alloc, false);
    let obj = OldObject {
        allocation_ticks: t0 + 40_000_000,
        address: 0x7f00_1000,
        class: "byte[]",
        array_elements: 1000,
        heap_used: 1 << 20,
        description: None,
        size: 1016,
    };
    w.old_object_sample(t0 + 70_000_000, 100, 2, &obj).unwrap();
    w.end_chunk(t0 + 80_000_000, true).unwrap();
    let stats = w.stats();
    assert_eq!(stats.chunks, 2);
    drop(w);

    let summary = run_jfr(&["summary", path.to_str().unwrap()]);
    let count = |name: &str| -> u64 {
        summary
            .lines()
            .find_map(|l| {
                let mut it = l.split_whitespace();
                (it.next() == Some(name)).then(|| it.next().and_then(|n| n.parse().ok())).flatten()
            })
            .unwrap_or(0)
    };
    assert_eq!(count("jdk.ExecutionSample"), 4, "{summary}");
    assert_eq!(count("jdk.ObjectAllocationSample"), 2, "{summary}");
    assert_eq!(count("jdk.OldObjectSample"), 1, "{summary}");
    assert_eq!(count("jdk.ActiveSetting"), 1, "{summary}");
    assert!(summary.contains("Chunks: 2"), "{summary}");

    let text = run_jfr(&["print", "--events", "jdk.ExecutionSample", path.to_str().unwrap()]);
    assert_eq!(text.matches("com.example.Hot.spin(int)").count(), 4, "{text}");
    assert!(text.contains("line: 42"), "{text}");
    assert!(text.contains("\"worker-1\""), "{text}");

    let json = run_jfr(&["print", "--json", path.to_str().unwrap()]);
    assert!(json.contains("\"type\": \"JIT compiled\""), "{json}");
    assert!(json.contains("\"type\": \"Inlined\""), "{json}");
    assert!(json.contains("\"type\": \"Interpreted\""), "{json}");
    assert!(json.contains("\"name\": \"byte[]\"") || json.contains("\"name\": \"[B\""), "{json}");
    assert!(json.contains("\"weight\": 1000"), "{json}");
    assert!(json.contains("\"arrayElements\": 1000"), "{json}");
    assert!(json.contains("\"package\""), "{json}");
    // Times: the first sample is 10 ms after the chunk's wall-clock start.
    assert!(json.contains("2023-11-14T22:13:20.01"), "{json}");
    if std::env::var_os("OXPROF_KEEP").is_none() {
        std::fs::remove_dir_all(&dir).ok();
    }
}

/// Wall-clock samples both ways the agent writes them, read back by the
/// JDK's tool (states, the weight) and by oxprof's reader (wall samples
/// with their states and weights, CPU samples with theirs).
#[test]
fn wall_samples_and_states_read_back() {
    use oxprof_profile::jfr_read;
    let dir = std::env::temp_dir().join(format!("oxprof-jfr-wall-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let t0: i64 = 5_000_000_000;
    let wall0: i64 = 1_700_000_000_000_000_000;
    let sleep = vec![frame("java.lang.Thread", "sleep", -1, FrameType::Native), frame("com.example.Main", "nap", 3, FrameType::Interpreted)];
    let accept = vec![frame("sun.nio.ch.Net", "poll", -1, FrameType::Native), frame("com.example.Main", "serve", 9, FrameType::Interpreted)];
    let read = |path: &std::path::Path| jfr_read::read_file(path, &mut |_, _| {}).unwrap();

    // Alone: the JDK's events, with event=wall.
    let alone = dir.join("alone.jfr");
    let mut w = JfrWriter::new(std::fs::File::create(&alone).unwrap());
    w.begin_chunk(t0, wall0).unwrap();
    w.thread(100, "main", Some("main"));
    for (id, k, v) in [(event_type::EXECUTION_SAMPLE, "period", "20 ms"), (event_type::EXECUTION_SAMPLE, "event", "wall")] {
        w.setting(t0, 100, id, k, v).unwrap();
    }
    w.stack(1, &sleep, false);
    w.stack(2, &accept, false);
    for i in 0..3 {
        w.execution_sample(t0 + i * 20_000_000, 100, 1, ThreadState::Sleeping, 0).unwrap();
    }
    w.native_method_sample(t0 + 60_000_000, 100, 2, ThreadState::Native, 0).unwrap();
    w.end_chunk(t0 + 80_000_000, true).unwrap();
    drop(w);
    let printed = run_jfr(&["print", "--events", "jdk.ExecutionSample,jdk.NativeMethodSample", alone.to_str().unwrap()]);
    assert_eq!(printed.matches("state = \"STATE_SLEEPING\"").count(), 3, "{printed}");
    assert_eq!(printed.matches("state = \"STATE_IN_NATIVE\"").count(), 1, "{printed}");
    let rec = read(&alone);
    assert!(rec.cpu.is_empty() && rec.native.is_empty());
    assert_eq!(rec.wall.len(), 4);
    assert_eq!(rec.wall_period_ns, Some(20_000_000));
    assert!(rec.wall.iter().all(|s| s.weight_ns == 20_000_000));
    assert_eq!(rec.wall.iter().filter(|s| s.state == ThreadState::Sleeping).count(), 3);
    assert_eq!(rec.wall.iter().filter(|s| s.state == ThreadState::Native).count(), 1);

    // Beside CPU samples: oxprof.WallClockSample with weights.
    let both = dir.join("both.jfr");
    let mut w = JfrWriter::new(std::fs::File::create(&both).unwrap());
    w.begin_chunk(t0, wall0).unwrap();
    w.thread(100, "main", Some("main"));
    w.setting(t0, 100, event_type::EXECUTION_SAMPLE, "period", "5 ms").unwrap();
    w.setting(t0, 100, event_type::WALL_CLOCK_SAMPLE, "period", "20 ms").unwrap();
    w.stack(1, &sleep, false);
    w.stack(2, &accept, false);
    w.execution_sample(t0, 100, 2, ThreadState::Vm, 0).unwrap();
    w.wall_clock_sample(t0 + 1, 100, 1, ThreadState::Sleeping, 45_000_000, 0).unwrap();
    w.wall_clock_sample(t0 + 2, 100, 2, ThreadState::Blocked, 20_000_000, 0).unwrap();
    w.end_chunk(t0 + 80_000_000, true).unwrap();
    drop(w);
    let printed = run_jfr(&["print", "--events", "oxprof.WallClockSample", both.to_str().unwrap()]);
    assert!(printed.contains("STATE_BLOCKED_ON_MONITOR_ENTER") && printed.contains("weight = 45.0 ms"), "{printed}");
    let rec = read(&both);
    assert_eq!(rec.cpu.len(), 1);
    assert_eq!(rec.cpu[0].state, ThreadState::Vm);
    assert_eq!(rec.cpu_period_ns, Some(5_000_000));
    assert_eq!(rec.wall_period_ns, Some(20_000_000));
    let weights: Vec<(ThreadState, u64)> = rec.wall.iter().map(|s| (s.state, s.weight_ns)).collect();
    assert_eq!(weights, [(ThreadState::Sleeping, 45_000_000), (ThreadState::Blocked, 20_000_000)]);

    // convert: the wall profile, its state filter and state frames.
    use oxprof_profile::convert::{profiles, Options};
    use oxprof_profile::Counter;
    let opts = Options { wall: true, state: Some(vec![ThreadState::Sleeping]), show_state: true, ..Options::default() };
    let ps = profiles(&rec, &opts);
    assert_eq!(ps.len(), 1);
    let (key, p) = &ps[0];
    assert_eq!(*key, "wall");
    assert_eq!(p.meta.total_unit, "ns");
    assert_eq!((p.sum(Counter::Samples), p.sum(Counter::Total)), (2, 45_000_000)); // 45 ms = 2 ticks of 20 ms
    let s = &p.samples()[0];
    assert_eq!(p.frame(s.stack[0]), &ThreadState::Sleeping.frame());
    assert_eq!(p.frame(s.stack[1]).name, "com.example.Main.nap");
    let _ = std::fs::remove_dir_all(&dir);
}

/// The JDK's own metadata of each named type, as `jfr metadata` prints it:
/// from its `@Name("...")` line to the closing brace.
fn metadata_blocks(file: &std::path::Path, names: &[&str]) -> Vec<String> {
    let text = run_jfr(&["metadata", file.to_str().unwrap()]);
    names
        .iter()
        .map(|name| {
            let open = text.find(&format!("@Name(\"{name}\")")).unwrap_or_else(|| panic!("no {name} in the metadata of {}", file.display()));
            let close = text[open..].find("\n}\n").unwrap_or_else(|| panic!("{name} has no closing brace"));
            text[open..open + close + 2].to_string()
        })
        .collect()
}

/// Safepoints written by the agent's call: the JDK's tool prints the four
/// events with the JDK's own type definitions and the right fields, and
/// oxprof's reader joins them back into safepoints.
#[test]
fn safepoint_events_are_the_jdks_and_read_back() {
    use oxprof_profile::jfr::SafepointEvent;
    use oxprof_profile::jfr_read;
    use oxprof_profile::safepoint::Safepoint;
    let dir = std::env::temp_dir().join(format!("oxprof-jfr-safepoint-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("sp.jfr");
    let t0: i64 = 5_000_000_000;
    let wall0: i64 = 1_700_000_000_000_000_000;
    let mut w = JfrWriter::new(std::fs::File::create(&path).unwrap());
    w.begin_chunk(t0, wall0).unwrap();
    w.thread(7, "VM Thread", None);
    let dump = SafepointEvent {
        id: 41,
        begin_ticks: t0 + 1_000_000,
        sync_ticks: t0 + 1_250_000,
        end_ticks: Some(t0 + 3_000_000),
        operation: Some("ThreadDump"),
        threads: Some(12),
        vm_tid: 7,
    };
    w.safepoint(&dump).unwrap();
    // Still stopping threads when the recording ended: no end, no operation.
    w.safepoint(&SafepointEvent {
        id: 42,
        begin_ticks: t0 + 10_000_000,
        sync_ticks: t0 + 14_000_000,
        end_ticks: None,
        operation: None,
        threads: None,
        vm_tid: 7,
    })
    .unwrap();
    // CPU samples: one inside safepoint 41's time to safepoint, one after it.
    let spin = vec![frame("com.example.Spin", "loop", 9, FrameType::Jit)];
    w.stack(1, &spin, false);
    w.execution_sample(t0 + 1_100_000, 7, 1, ThreadState::Running, 0).unwrap();
    w.execution_sample(t0 + 2_000_000, 7, 1, ThreadState::Running, 0).unwrap();
    w.end_chunk(t0 + 20_000_000, false).unwrap();
    // A second chunk: the operation's pool starts afresh.
    w.begin_chunk(t0 + 20_000_000, wall0 + 20_000_000).unwrap();
    w.safepoint(&SafepointEvent {
        id: 43,
        begin_ticks: t0 + 21_000_000,
        sync_ticks: t0 + 21_000_500,
        end_ticks: Some(t0 + 40_000_000),
        operation: Some("G1CollectFull"),
        threads: Some(3),
        vm_tid: 7,
    })
    .unwrap();
    w.safepoint(&SafepointEvent {
        id: 44,
        operation: Some("ThreadDump"),
        begin_ticks: t0 + 50_000_000,
        sync_ticks: t0 + 50_000_100,
        end_ticks: Some(t0 + 50_100_000),
        ..dump
    })
    .unwrap();
    w.end_chunk(t0 + 60_000_000, true).unwrap();
    drop(w);

    let summary = run_jfr(&["summary", path.to_str().unwrap()]);
    let count = |name: &str| summary.lines().find_map(|l| l.split_whitespace().collect::<Vec<_>>().get(..2).filter(|v| v[0] == name).map(|v| v[1].to_string()));
    assert_eq!(count("jdk.SafepointBegin").as_deref(), Some("4"), "{summary}");
    assert_eq!(count("jdk.SafepointStateSynchronization").as_deref(), Some("4"), "{summary}");
    assert_eq!(count("jdk.SafepointEnd").as_deref(), Some("3"), "{summary}");
    assert_eq!(count("jdk.ExecuteVMOperation").as_deref(), Some("3"), "{summary}");

    let printed =
        run_jfr(&["print", "--events", "jdk.SafepointBegin,jdk.SafepointStateSynchronization,jdk.SafepointEnd,jdk.ExecuteVMOperation", path.to_str().unwrap()]);
    let event = |name: &str, id: u64| -> String {
        printed
            .split("\n\n")
            .find(|e| e.trim_start().starts_with(&format!("{name} {{")) && e.contains(&format!("safepointId = {id}\n")))
            .unwrap_or_else(|| panic!("no {name} of safepoint {id} in\n{printed}"))
            .to_string()
    };
    let begin = event("jdk.SafepointBegin", 41);
    for field in ["duration = 0.250 ms", "totalThreadCount = 12", "jniCriticalThreadCount = 0", "eventThread = \"VM Thread\"", "startTime = 22:13:20.001"] {
        assert!(begin.contains(field), "{field} in {begin}");
    }
    let sync = event("jdk.SafepointStateSynchronization", 41);
    for field in ["duration = 0.250 ms", "initialThreadCount = 0", "runningThreadCount = 0", "iterations = 0"] {
        assert!(sync.contains(field), "{field} in {sync}");
    }
    let end = event("jdk.SafepointEnd", 41);
    // A zero-length event: `jfr print` leaves its duration out.
    assert!(!end.contains("duration") && end.contains("startTime = 22:13:20.003"), "{end}");
    let op = event("jdk.ExecuteVMOperation", 41);
    for field in ["operation = \"ThreadDump\"", "safepoint = true", "blocking = true", "caller = N/A", "duration = 1.75 ms", "startTime = 22:13:20.001"] {
        assert!(op.contains(field), "{field} in {op}");
    }
    assert!(event("jdk.ExecuteVMOperation", 43).contains("operation = \"G1CollectFull\""));
    assert!(event("jdk.ExecuteVMOperation", 44).contains("operation = \"ThreadDump\""));
    assert!(event("jdk.SafepointBegin", 42).contains("totalThreadCount = 0"));
    assert!(!printed.contains("jdk.SafepointEnd {\n  startTime = 22:13:20.014"), "safepoint 42 has no end: {printed}");

    // The type definitions are the JDK's own, annotation for annotation.
    let jdk = dir.join("jdk.jfr");
    let o =
        Command::new(jfr_tool().with_file_name("java")).arg(format!("-XX:StartFlightRecording:filename={}", jdk.display())).arg("-version").output().unwrap();
    assert!(o.status.success() && jdk.exists(), "java -XX:StartFlightRecording -version: {}", String::from_utf8_lossy(&o.stderr));
    let types = ["jdk.SafepointBegin", "jdk.SafepointStateSynchronization", "jdk.SafepointEnd", "jdk.ExecuteVMOperation", "jdk.types.VMOperationType"];
    for (ours, theirs) in metadata_blocks(&path, &types).iter().zip(metadata_blocks(&jdk, &types)) {
        assert_eq!(*ours, theirs);
    }

    // oxprof's reader: joined by id, in time order.
    let rec = jfr_read::read_file(&path, &mut |_, _| {}).unwrap();
    let sp = |id, start, ttsp_ns, total_ns, operation: Option<&str>, threads, samples| Safepoint {
        id,
        start_ns: wall0 as u64 + start,
        ttsp_ns,
        total_ns,
        operation: operation.map(str::to_string),
        threads,
        samples,
    };
    assert_eq!(
        rec.safepoints,
        [
            sp(41, 1_000_000, 250_000, Some(2_000_000), Some("ThreadDump"), Some(12), 1),
            sp(42, 10_000_000, 4_000_000, None, None, None, 0),
            sp(43, 21_000_000, 500, Some(19_000_000), Some("G1CollectFull"), Some(3), 0),
            sp(44, 50_000_000, 100, Some(100_000), Some("ThreadDump"), Some(12), 0),
        ]
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// Context labels: a pooled `labels` field on every sample event, printed
/// by the JDK's tool (odd characters and all), read back by oxprof's reader
/// into label sets, and turned into root frames by convert.
#[test]
fn context_labels_are_read_by_the_jdk_and_back() {
    use oxprof_profile::convert::{profiles, Options};
    use oxprof_profile::{labels, Counter};
    let dir = std::env::temp_dir().join(format!("oxprof-jfr-labels-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("l.jfr");
    let t0: i64 = 5_000_000_000;
    let wall0: i64 = 1_700_000_000_000_000_000;
    let odd = "GET /a?b=c;d \"quoted\" \u{1F600}";
    let set: Vec<(String, String)> = vec![("endpoint".into(), odd.into()), ("tenant".into(), "t1".into())];
    let hot = vec![frame("com.example.Hot", "spin", 42, FrameType::Jit)];
    let mut w = JfrWriter::new(std::fs::File::create(&path).unwrap());
    for chunk in 0..2 {
        let t = t0 + chunk * 100_000_000;
        w.begin_chunk(t, wall0 + chunk * 100_000_000).unwrap();
        w.thread(100, "main", Some("main"));
        w.stack(1, &hot, false);
        assert!(!w.has_labels(7), "pools start afresh in each chunk");
        w.labels(7, &set);
        w.execution_sample(t + 1, 100, 1, ThreadState::Running, 7).unwrap();
        w.execution_sample(t + 2, 100, 1, ThreadState::Running, 0).unwrap();
        w.wall_clock_sample(t + 3, 100, 1, ThreadState::Sleeping, 20_000_000, 7).unwrap();
        w.allocation_sample(t + 4, 100, 1, "byte[]", 512, 7).unwrap();
        w.lock_wait(true, t + 5, 3, 100, 1, "java.lang.Object", 7, None).unwrap();
        w.end_chunk(t + 50_000_000, chunk == 1).unwrap();
    }
    drop(w);
    let printed = run_jfr(&["print", "--events", "jdk.ExecutionSample", path.to_str().unwrap()]);
    assert!(printed.contains("labels = \"endpoint=GET /a?b=c;d") && printed.contains(", tenant=t1\""), "{printed}");
    assert!(printed.contains("labels = N/A"), "a sample without labels: {printed}");
    let rec = oxprof_profile::jfr_read::read_file(&path, &mut |_, _| {}).unwrap();
    assert_eq!(rec.label_sets, vec![Vec::new(), set.clone()]);
    assert_eq!(rec.cpu.iter().map(|s| s.labels).collect::<Vec<_>>(), [1, 0, 1, 0]);
    assert!(rec.wall.iter().chain(&rec.native).all(|s| s.labels == 1));
    assert!(rec.alloc.iter().all(|s| s.labels == 1) && rec.lock.iter().all(|s| s.labels == 1));
    let ps = profiles(&rec, &Options { cpu: true, alloc: true, lock: true, wall: true, ..Options::default() });
    for (key, p) in &ps {
        let labelled: u64 = p.samples().iter().filter(|s| labels::value_of(p, s, "endpoint") == Some(odd)).map(|s| s.samples).sum();
        assert!(labelled > 0, "{key}: no labelled samples");
        let s = p.samples().iter().find(|s| labels::value_of(p, s, "endpoint").is_some()).unwrap();
        assert_eq!(p.frame(s.stack[0]).name, format!("[endpoint={odd}]"), "{key}: label frames lead");
        assert_eq!(p.frame(s.stack[1]).name, "[tenant=t1]", "{key}");
    }
    let cpu = &ps.iter().find(|(k, _)| *k == "cpu").unwrap().1;
    assert_eq!(cpu.sum(Counter::Samples), 4);
    assert_eq!(labels::by_value(cpu, "endpoint").iter().map(|r| r.1).collect::<Vec<_>>(), [2, 2]);
    let _ = std::fs::remove_dir_all(&dir);
}

/// Tester's finding: a dump to JFR wrote `truncated = false` for every
/// stack, also for the agent's cut stacks (`[truncated]` at the root). The
/// JDK sees those as truncated, and oxprof reads them back with one
/// marker, of the marker's kind, where it was.
#[test]
fn dumped_cut_stacks_say_truncated() {
    use oxprof_profile::model::{Frame, FrameKind, Meta, Profile};
    let dir = std::env::temp_dir().join(format!("oxprof-jfr-cut-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("cut.jfr");
    let mut p = Profile::new(Meta { interval: 10_000_000, total_unit: "ns".into(), ..Meta::default() });
    let thread = Frame::new("[main tid=7]", FrameKind::Thread);
    let cut = [thread.clone(), Frame::new("[truncated]", FrameKind::Error), Frame::new("A.deep", FrameKind::Jit), Frame::new("A.leaf", FrameKind::Jit)];
    p.add_frames(cut, 3, 30_000_000);
    p.add_frames([thread, Frame::new("A.main", FrameKind::Interpreted), Frame::new("A.leaf", FrameKind::Jit)], 2, 20_000_000);
    let start = 1_700_000_000_000_000_000u64;
    oxprof_profile::jfr::from_profiles::write(std::fs::File::create(&path).unwrap(), &[("cpu", &p)], start, start + 1_000_000_000).unwrap();
    let printed = run_jfr(&["print", "--json", "--events", "jdk.ExecutionSample", path.to_str().unwrap()]);
    let flags = |v: &str| printed.matches(&format!("\"truncated\": {v}")).count();
    assert_eq!((flags("true"), flags("false")), (3, 2), "{printed}");
    let rec = oxprof_profile::jfr_read::read_file(&path, &mut |_, _| {}).unwrap();
    let ps = oxprof_profile::convert::profiles(&rec, &oxprof_profile::convert::Options { cpu: true, threads: true, ..Default::default() });
    let back = &ps[0].1;
    let mut lines: Vec<String> = back
        .samples()
        .iter()
        .map(|s| {
            let names: Vec<String> = s.stack.iter().map(|&f| format!("{}:{:?}", back.frame(f).name, back.frame(f).kind)).collect();
            format!("{} {}", names.join(";"), s.samples)
        })
        .collect();
    lines.sort();
    assert_eq!(lines, ["[main]:Thread;A.main:Interpreted;A.leaf:Jit 2", "[main]:Thread;[truncated]:Error;A.deep:Jit;A.leaf:Jit 3"]);
    let _ = std::fs::remove_dir_all(&dir);
}

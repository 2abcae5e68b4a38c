//! JFR output read back by the JDK's own tools: the `jfr` command and
//! `jdk.jfr.consumer.RecordingFile` (tests/java/JfrCheck.java), compared
//! with oxprof's own collapsed output of the same samples.

mod common;

use common::*;
use std::collections::BTreeMap;
use std::io::Write;
use std::path::Path;
use std::process::Command;

/// What JfrCheck printed, by line kind.
struct Check {
    counts: BTreeMap<String, u64>,
    cpu: BTreeMap<String, u64>,
    alloc: BTreeMap<String, u64>,
    weight: u64,
    lines: BTreeMap<String, i64>,
    frame_types: BTreeMap<String, u64>,
    threads: BTreeMap<String, u64>,
    settings: BTreeMap<String, String>,
}

fn jfr_check(java: &Path, classes: &Path, file: &Path) -> Check {
    let o = Command::new(java).args(["-cp", classes.to_str().unwrap(), "JfrCheck", file.to_str().unwrap()]).output().unwrap();
    assert!(o.status.success(), "JfrCheck failed on {}: {}", file.display(), text(&o.stderr));
    let mut c = Check {
        counts: BTreeMap::new(),
        cpu: BTreeMap::new(),
        alloc: BTreeMap::new(),
        weight: 0,
        lines: BTreeMap::new(),
        frame_types: BTreeMap::new(),
        threads: BTreeMap::new(),
        settings: BTreeMap::new(),
    };
    for l in text(&o.stdout).lines() {
        let (kind, rest) = l.split_once(' ').unwrap();
        match kind {
            "COUNT" => {
                let (k, n) = rest.rsplit_once(' ').unwrap();
                c.counts.insert(k.into(), n.parse().unwrap());
            }
            "CPU" | "ALLOC" => {
                let (n, stack) = rest.split_once(' ').unwrap();
                let map = if kind == "CPU" { &mut c.cpu } else { &mut c.alloc };
                map.insert(stack.into(), n.parse().unwrap());
            }
            "WEIGHT" => c.weight = rest.parse().unwrap(),
            "LINE" | "FRAMETYPE" | "THREAD" => {
                let (k, n) = rest.rsplit_once(' ').unwrap();
                match kind {
                    "LINE" => c.lines.insert(k.into(), n.parse().unwrap()).map(|_| ()),
                    "FRAMETYPE" => c.frame_types.insert(k.into(), n.parse().unwrap()).map(|_| ()),
                    _ => c.threads.insert(k.into(), n.parse().unwrap()).map(|_| ()),
                };
            }
            "SETTING" => {
                let (k, v) = rest.split_once('=').unwrap();
                c.settings.insert(k.into(), v.into());
            }
            _ => panic!("unexpected JfrCheck line {l:?}"),
        }
    }
    c
}

/// Collapsed stacks with identical text merged (frames differing only in
/// kind print the same without annotations).
fn collapsed_map(path: &Path) -> BTreeMap<String, u64> {
    let mut m = BTreeMap::new();
    for (stack, n) in read_collapsed(path) {
        *m.entry(stack.join(";")).or_default() += n;
    }
    m
}

/// Event counts from `jfr summary`.
fn jfr_summary(jfr: &Path, file: &Path) -> (BTreeMap<String, u64>, String) {
    let o = Command::new(jfr).arg("summary").arg(file).output().unwrap();
    assert!(o.status.success(), "jfr summary {}: {}", file.display(), text(&o.stderr));
    let out = text(&o.stdout);
    let counts = out
        .lines()
        .filter_map(|l| {
            let mut it = l.split_whitespace();
            let (name, n) = (it.next()?, it.next()?.parse().ok()?);
            name.starts_with("jdk.").then(|| (name.to_string(), n))
        })
        .collect();
    (counts, out)
}

/// key=value pairs of a `PREFIX summary:` line.
fn kv_line(text: &str, prefix: &str) -> BTreeMap<String, String> {
    let line = text.lines().find(|l| l.contains(&format!("{prefix} summary:"))).unwrap_or_else(|| panic!("no '{prefix} summary:' line in:\n{text}"));
    line.split("summary:").nth(1).unwrap().split_whitespace().filter_map(|kv| kv.split_once('=')).map(|(k, v)| (k.to_string(), v.to_string())).collect()
}

/// Lines of `JfrWork.spin`'s body in the source.
fn spin_lines() -> std::ops::RangeInclusive<i64> {
    let src = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/java/JfrWork.java")).unwrap();
    let at = |needle: &str| src.lines().position(|l| l.contains(needle)).unwrap() as i64 + 1;
    at("static double spin")..=at("return x;")
}

#[test]
fn jfr_holds_the_same_samples_as_the_collapsed_profile_of_the_same_run() {
    let s = Scratch::new("jfr-same");
    compile(&s.0, &["JfrWork.java", "JfrCheck.java"]);
    let rec = s.path("rec.jfr");
    let agent_arg = format!("-agentpath:{}=start,event=cpu,alloc=64k,interval=1ms,file={}", agent().display(), rec.display());
    let mut jvm = RunningJvm::spawn(java_cmd([agent_arg.as_str(), "-cp", s.0.to_str().unwrap(), "JfrWork", "2", "wait"]), &s.0, "done");
    let pid = jvm.pid().to_string();

    // dump: the file on disk is a complete recording while profiling goes on.
    let o = oxprof_cmd().args(["attach", &pid, "dump"]).output().unwrap();
    assert!(o.status.success(), "dump: {}", text(&o.stderr));
    let (mid, _) = jfr_summary(&tool("jfr"), &rec);
    assert!(mid.get("jdk.ExecutionSample").copied().unwrap_or(0) > 100, "{mid:?}");

    // stop, also asking for collapsed stacks of the same samples.
    let same = s.path("same.collapsed");
    let o = oxprof_cmd().args(["attach", &pid, "stop", "-o", same.to_str().unwrap()]).output().unwrap();
    let reply = text(&o.stdout);
    assert!(o.status.success(), "stop: {}{}", reply, text(&o.stderr));
    jvm.child.stdin.as_mut().unwrap().write_all(b"\n").unwrap();
    assert!(jvm.child.wait().unwrap().success());

    let jfr = kv_line(&reply, "jfr");
    assert_eq!(jfr["dropped"], "0", "{reply}");
    assert_eq!(jfr["missing"], "0", "{reply}");
    let cpu_collapsed = collapsed_map(&same);
    let alloc_collapsed = collapsed_map(&s.path("same.alloc.collapsed"));
    let check = jfr_check(&java(), &s.0, &rec);

    // Every sample, stack by stack, as the collapsed profile has it. JVM
    // threads that are not Java threads (rooted at `[Attach Listener]`,
    // `[GC Thread]`, ...) are compared by count only: the agent's own stop
    // command runs on the attach listener while both outputs are built, and
    // a thread first seen then may be named a moment later in one of them.
    let java_only = |m: &BTreeMap<String, u64>| m.iter().filter(|(k, _)| !k.starts_with('[')).map(|(k, v)| (k.clone(), *v)).collect::<BTreeMap<_, _>>();
    // Kernel-only stacks read from a recording with two chunks very rarely
    // come back without their kernel frame types (1 sample in ~4,000 seen):
    // allow 0.5% of samples to differ, and show them.
    let (jfr_java, collapsed_java) = (java_only(&check.cpu), java_only(&cpu_collapsed));
    let differing: u64 = jfr_java
        .keys()
        .chain(collapsed_java.keys())
        .collect::<std::collections::BTreeSet<_>>()
        .into_iter()
        .map(|k| jfr_java.get(k).copied().unwrap_or(0).abs_diff(collapsed_java.get(k).copied().unwrap_or(0)))
        .sum();
    let all: u64 = collapsed_java.values().sum();
    assert!(differing * 200 <= all, "CPU stacks differ in {differing} of {all} samples:\nJFR: {jfr_java:?}\ncollapsed: {collapsed_java:?}");
    assert_eq!(check.cpu.values().sum::<u64>(), cpu_collapsed.values().sum::<u64>(), "CPU sample counts differ");
    assert!(check.cpu.len() > 10 && java_only(&check.cpu).len() > 5, "too few distinct stacks: {:?}", check.cpu.keys().collect::<Vec<_>>());
    assert_eq!(check.alloc, alloc_collapsed, "allocation stacks differ");
    let cpu_total: u64 = cpu_collapsed.values().sum();
    let alloc_total: u64 = alloc_collapsed.values().sum();
    assert_eq!(jfr["execution_samples"].parse::<u64>().unwrap(), cpu_total);
    let cpu_summary = reply.lines().find(|l| l.starts_with("summary:")).unwrap_or_else(|| panic!("no CPU summary in {reply}"));
    assert!(cpu_summary.contains(&format!(" samples={cpu_total} ")), "{cpu_summary}");
    // Allocation weights are the agent's unbiased estimates, summed.
    assert_eq!(check.weight.to_string(), kv_line(&reply, "alloc")["estimated_bytes"], "{reply}");
    assert_eq!(check.counts["jdk.ObjectAllocationSample"], alloc_total);
    assert!(check.alloc.keys().any(|k| k.ends_with("JfrWork.allocBytes;byte[]")), "{:?}", check.alloc.keys().collect::<Vec<_>>());
    assert!(check.alloc.keys().any(|k| k.contains("JfrWork.allocStrings;")), "{:?}", check.alloc.keys().collect::<Vec<_>>());

    // The JDK's jfr tool counts the same.
    let (counts, _) = jfr_summary(&tool("jfr"), &rec);
    assert_eq!(counts["jdk.ExecutionSample"], cpu_total);
    assert_eq!(counts["jdk.ObjectAllocationSample"], alloc_total);

    // Frames carry line numbers inside the sampled methods, threads their names.
    let spin = check.lines["JfrWork.spin"];
    assert!(spin_lines().contains(&spin), "JfrWork.spin at line {spin}, body is {:?}", spin_lines());
    assert!(check.threads.get("jfr-worker").copied().unwrap_or(0) > 50, "{:?}", check.threads);
    assert_eq!(check.settings.get("period").map(String::as_str), Some("1 ms"));
    assert!(check.settings.contains_key("engine"), "{:?}", check.settings);
    assert!(!check.frame_types.is_empty());

    // jfr print --json names methods and classes as the JDK does.
    let o = Command::new(tool("jfr")).args(["print", "--json", "--events", "jdk.ExecutionSample"]).arg(&rec).output().unwrap();
    let json = text(&o.stdout);
    assert!(o.status.success());
    assert!(json.contains("\"name\": \"spin\""), "no spin method in the JSON");
    assert!(json.contains("\"name\": \"JfrWork\""), "no JfrWork class in the JSON");
    assert!(json.contains("\"lineNumber\""));
}

#[test]
fn long_recordings_stream_in_chunks() {
    let s = Scratch::new("jfr-chunks");
    compile(&s.0, &["JfrWork.java", "JfrCheck.java"]);
    let rec = s.path("rec.jfr");
    let o = Command::new(java())
        .env("OXPROF_JFR_CHUNK_BYTES", "20000")
        .arg(format!("-agentpath:{}=start,event=cpu,alloc=64k,interval=1ms,file={}", agent().display(), rec.display()))
        .args(["-cp", s.0.to_str().unwrap(), "JfrWork", "2"])
        .output()
        .unwrap();
    let err = text(&o.stderr);
    assert!(o.status.success(), "{err}");
    let jfr = kv_line(&err, "jfr");
    let chunks: u64 = jfr["chunks"].parse().unwrap();
    assert!(chunks >= 3, "{err}");
    let (counts, out) = jfr_summary(&tool("jfr"), &rec);
    assert!(out.contains(&format!("Chunks: {chunks}")), "{out}");
    assert_eq!(counts["jdk.ExecutionSample"].to_string(), jfr["execution_samples"]);
    assert_eq!(counts["jdk.ExecutionSample"].to_string(), summary(&err)["samples"]);
    assert_eq!(counts["jdk.ObjectAllocationSample"].to_string(), jfr["allocation_samples"]);
    let check = jfr_check(&java(), &s.0, &rec);
    assert_eq!(check.counts["jdk.ExecutionSample"], counts["jdk.ExecutionSample"]);
    assert_eq!(check.weight.to_string(), jfr["allocation_bytes"]);
    // Every chunk says how it was recorded.
    assert_eq!(counts["jdk.ActiveRecording"], chunks);
}

#[test]
fn record_and_attach_write_jfr() {
    let s = Scratch::new("jfr-cli");
    compile(&s.0, &["JfrWork.java", "JfrCheck.java", "Spin.java"]);
    let rec = s.path("rec.jfr");
    let o = oxprof_cmd()
        .args(["record", "--event", "cpu", "--alloc", "--interval", "2ms", "-o", rec.to_str().unwrap(), "--"])
        .arg(java())
        .args(["-cp", s.0.to_str().unwrap(), "JfrWork", "1"])
        .output()
        .unwrap();
    let err = text(&o.stderr);
    assert!(o.status.success(), "{err}");
    assert!(err.contains(&format!("profile written to {}", rec.display())), "{err}");
    let check = jfr_check(&java(), &s.0, &rec);
    let cpu: u64 = check.cpu.values().sum();
    let spin: u64 = check.cpu.iter().filter(|(k, _)| k.contains("JfrWork.spin")).map(|(_, n)| n).sum();
    assert!(spin * 2 > cpu, "JfrWork.spin has {spin} of {cpu} samples");
    assert!(check.counts.get("jdk.ObjectAllocationSample").copied().unwrap_or(0) > 10, "{:?}", check.counts);
    assert_main_has_java_id_1(&rec);

    let jvm = RunningJvm::spawn(java_cmd(["-cp", s.0.to_str().unwrap(), "Spin", "forever"]), &s.0, "ready");
    let attached = s.path("attached.jfr");
    // Until the JVM has had 1 s of CPU: about 500 samples at 2 ms.
    let o = attach_for_cpu(oxprof_cmd(), jvm.pid(), 1000, &["--interval", "2ms", "-o", attached.to_str().unwrap()]);
    drop(jvm);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let check = jfr_check(&java(), &s.0, &attached);
    let cpu: u64 = check.cpu.values().sum();
    let spin: u64 = check.cpu.iter().filter(|(k, _)| k.contains("Spin.loop")).map(|(_, n)| n).sum();
    assert!(cpu > 100 && spin * 10 > cpu * 8, "Spin.loop has {spin} of {cpu} samples");
    assert_main_has_java_id_1(&attached);
}

/// The JDK's `jfr` tool shows the main thread's samples with its Java name
/// and `Thread.getId()`, 1, not its kernel thread id.
fn assert_main_has_java_id_1(rec: &Path) {
    let o = std::process::Command::new(tool("jfr")).args(["print", "--events", "jdk.ExecutionSample"]).arg(rec).output().unwrap();
    assert!(o.status.success(), "jfr print: {}", text(&o.stderr));
    let out = text(&o.stdout);
    let main: Vec<&str> = out.lines().filter(|l| l.contains("sampledThread = \"main\"")).collect();
    assert!(!main.is_empty(), "no sample of the main thread in {}", rec.display());
    assert!(main.iter().all(|l| l.contains("(javaThreadId = 1)")), "{:?}", &main[..main.len().min(3)]);
}

#[test]
#[ignore = "needs OXPROF_EXTRA_JDKS; run by scripts/test.sh"]
fn every_supported_jdk_reads_the_recording() {
    let s = Scratch::new("jfr-jdks");
    compile(&s.0, &["JfrWork.java", "JfrCheck.java"]);
    for home in extra_jdks() {
        let java = home.join("bin/java");
        let version = text(&Command::new(&java).arg("-version").output().unwrap().stderr);
        let rec = s.path("rec.jfr");
        let o = Command::new(&java)
            .arg(format!("-agentpath:{}=start,event=cpu,alloc=64k,interval=1ms,file={}", agent().display(), rec.display()))
            .args(["-cp", s.0.to_str().unwrap(), "JfrWork", "1.5"])
            .output()
            .unwrap();
        let err = text(&o.stderr);
        assert!(o.status.success(), "{version}: {err}");
        let jfr = kv_line(&err, "jfr");
        // This JDK's RecordingFile reads what oxprof wrote on this JDK.
        let check = jfr_check(&java, &s.0, &rec);
        assert_eq!(check.counts["jdk.ExecutionSample"].to_string(), summary(&err)["samples"], "{version}");
        assert_eq!(check.counts["jdk.ObjectAllocationSample"].to_string(), jfr["allocation_samples"], "{version}");
        assert_eq!(check.weight.to_string(), kv_line(&err, "alloc")["estimated_bytes"], "{version}");
        assert!(check.cpu.keys().any(|k| k.ends_with("JfrWork.spin")), "{version}");
        // And so does its jfr tool.
        let (counts, _) = jfr_summary(&home.join("bin/jfr"), &rec);
        assert_eq!(counts["jdk.ExecutionSample"], check.counts["jdk.ExecutionSample"], "{version}");
        eprintln!("ok: {}", version.lines().next().unwrap_or(""));
    }
}

/// `live` in a JFR recording: the leak sites become `jdk.OldObjectSample`
/// events that the JDK's `jfr` tool prints and `oxprof convert --live` turns
/// back into a live profile with the leaking site on top.
#[test]
fn live_sites_are_old_object_samples() {
    let s = Scratch::new("jfr-live");
    compile(&s.0, &["LeakChurn.java"]);
    let rec = s.path("live.jfr");
    let o = run_java(&s.0, &format!("event=alloc,alloc=64k,live,file={}", rec.display()), &["-Xmx256m"], &s.0, &["LeakChurn", "48"]);
    let err = text(&o.stderr);
    assert!(o.status.success(), "{err}");
    let summary = kv_line(&err, "jfr");
    let sites: u64 = summary["old_object_samples"].parse().unwrap();
    assert!(sites >= 1, "{err}");

    let p = Command::new(tool("jfr")).args(["print", "--events", "jdk.OldObjectSample"]).arg(&rec).output().unwrap();
    let printed = text(&p.stdout);
    assert!(p.status.success(), "{}", text(&p.stderr));
    assert_eq!(printed.matches("jdk.OldObjectSample {").count() as u64, sites, "{printed}");
    assert!(printed.contains("LeakChurn.leakSite"), "{printed}");

    let live = s.path("live.collapsed");
    let c = oxprof_cmd().args(["convert"]).arg(&rec).args(["--live", "--total", "-o"]).arg(&live).output().unwrap();
    assert!(c.status.success(), "{}", text(&c.stderr));
    let stacks = read_collapsed(&live);
    let total: u64 = stacks.iter().map(|(_, n)| n).sum();
    let leak = samples_with(&stacks, "LeakChurn.leakSite");
    // 48 MiB retained: the converted live bytes of the leak site are the
    // agent's estimate, which tests/live.rs holds within 15% of the truth.
    assert!(leak as f64 > 0.9 * total as f64, "leak site {leak} of {total} live bytes: {stacks:?}");
    assert!((leak as f64 - (48u64 << 20) as f64).abs() < 0.15 * (48u64 << 20) as f64, "leak site {leak} bytes, retained 48 MiB");
}

/// The named files in `dir`, and the hidden ones.
fn names_in(dir: &Path) -> (Vec<String>, Vec<String>) {
    let mut names: Vec<String> = std::fs::read_dir(dir).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
    names.sort();
    names.into_iter().partition(|n| !n.starts_with('.'))
}

/// Samples of frames containing `method` in a JfrCheck result.
fn cpu_in(check: &Check, method: &str) -> u64 {
    check.cpu.iter().filter(|(k, _)| k.contains(method)).map(|(_, n)| n).sum()
}

/// A JVM killed outright (`kill -9`) keeps what it recorded up to its last
/// whole chunk: chunks end on time as well as on size
/// (`OXPROF_JFR_CHUNK_SECONDS`, 60 s by default; 1 s here), so the file is a
/// recording the JDK's reader takes, with the samples of the chunks before
/// the kill.
#[test]
fn a_killed_jvm_leaves_its_whole_chunks() {
    let s = Scratch::new("jfr-killed");
    compile(&s.0, &["JfrCheck.java", "CpuBurn.java"]);
    let rec = s.path("killed.jfr");
    let mut cmd = java_cmd([
        format!("-agentpath:{}=start,event=cpu,interval=2ms,file={}", agent().display(), rec.display()).as_str(),
        "-cp",
        s.0.to_str().unwrap(),
        "CpuBurn",
        "60",
    ]);
    cmd.env("OXPROF_JFR_CHUNK_SECONDS", "1");
    let mut jvm = RunningJvm::spawn(cmd, &s.0, "ready");
    // Well past two chunk ends, counted in the JVM's own CPU time.
    wait_for_cpu(jvm.pid(), 0, 3000, "CpuBurn");
    jvm.child.kill().unwrap();
    jvm.child.wait().unwrap();
    let check = jfr_check(&java(), &s.0, &rec);
    assert!(cpu_in(&check, "CpuBurn.spin") > 100, "the killed JVM's recording lacks its samples: {:?}", check.cpu);
}

/// A recording given the name of an existing file never truncates it: the
/// new recording is written beside it and takes its place once its first
/// chunk is whole (a dump, a rotation, the stop). A JVM killed before that
/// leaves the previous recording byte for byte; a dump puts the new one in
/// place while the JVM runs on; nothing is left beside it.
#[test]
fn an_existing_recording_is_replaced_only_by_a_whole_new_one() {
    let s = Scratch::new("jfr-replace");
    compile(&s.0, &["JfrWork.java", "JfrCheck.java", "CpuBurn.java"]);
    let dir = s.path("out");
    std::fs::create_dir(&dir).unwrap();
    let rec = dir.join("rec.jfr");
    let cp = s.0.to_str().unwrap();
    let o = run_java(&s.0, &format!("start,event=cpu,interval=2ms,file={}", rec.display()), &[], &s.0, &["JfrWork", "0.5"]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let previous = std::fs::read(&rec).unwrap();
    assert!(cpu_in(&jfr_check(&java(), &s.0, &rec), "JfrWork.spin") > 20, "the first recording lacks its samples");

    // Killed while recording into the same name, before any chunk ended.
    let agent_opts = |file: &Path| format!("-agentpath:{}=start,event=cpu,interval=1ms,file={}", agent().display(), file.display());
    let mut jvm = RunningJvm::spawn(java_cmd([agent_opts(&rec).as_str(), "-cp", cp, "CpuBurn", "60"]), &s.0, "ready");
    wait_for_cpu(jvm.pid(), 0, 1000, "CpuBurn");
    jvm.child.kill().unwrap();
    jvm.child.wait().unwrap();
    assert!(std::fs::read(&rec).unwrap() == previous, "the previous recording was changed by a JVM killed while recording");
    let (named, hidden) = names_in(&dir);
    assert_eq!(named, ["rec.jfr"]);
    assert!(hidden.len() == 1 && hidden[0].starts_with(".rec.jfr.") && hidden[0].ends_with(".tmp"), "{hidden:?}");
    std::fs::remove_file(dir.join(&hidden[0])).unwrap();

    // A dump while the JVM runs: the new recording is in place.
    let mut jvm = RunningJvm::spawn(java_cmd([agent_opts(&rec).as_str(), "-cp", cp, "CpuBurn", "60"]), &s.0, "ready");
    wait_for_cpu(jvm.pid(), 0, 1000, "CpuBurn");
    let o = oxprof_cmd().args(["attach", &jvm.pid().to_string(), "dump"]).output().unwrap();
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert!(jvm.alive());
    let dumped = jfr_check(&java(), &s.0, &rec);
    assert!(cpu_in(&dumped, "CpuBurn.spin") > 100 && cpu_in(&dumped, "JfrWork") == 0, "after the dump: {:?}", dumped.cpu);
    assert_eq!(names_in(&dir), (vec!["rec.jfr".to_string()], vec![]));
    let o = oxprof_cmd().args(["attach", &jvm.pid().to_string(), "stop"]).output().unwrap();
    assert!(o.status.success(), "{}", text(&o.stderr));
    let stopped = jfr_check(&java(), &s.0, &rec);
    assert!(cpu_in(&stopped, "CpuBurn.spin") >= cpu_in(&dumped, "CpuBurn.spin"), "the stop lost the dumped chunk");
    assert_eq!(names_in(&dir), (vec!["rec.jfr".to_string()], vec![]));
}

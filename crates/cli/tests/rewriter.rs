//! oxprof beside a Java agent that rewrites bytecode, as coverage, APM and
//! tracing agents do (`tests/java/EntryCounter.java`: `java.lang.instrument`
//! with ASM, Debian's `libasm-java`): the rewritten class's methods keep
//! their names in CPU and allocation samples, their line numbers still point
//! at the lines the program itself reports from inside its loops (the code
//! moved, the line tables with it), the JVM ends normally, and the rewrite
//! really ran (the inserted counter counted every call). With oxprof
//! loaded at start, with the class retransformed every 100 ms while it is
//! sampled, and attached late, after the class was rewritten.

mod common;

use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;

use common::*;

/// ASM, from Debian's libasm-java (`scripts/test.sh` installs it).
fn asm_jar() -> PathBuf {
    let p = PathBuf::from("/usr/share/java/asm.jar");
    assert!(p.is_file(), "{} not found: install ASM (apt-get install libasm-java; scripts/test.sh does)", p.display());
    p
}

/// Compiles the program into `dir/classes` and the agent into
/// `dir/entry-counter.jar`; returns the class path to run with (the
/// program and ASM, which the agent's classes use).
fn build(dir: &Path) -> (String, PathBuf) {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/java");
    let (classes, agent_classes) = (dir.join("classes"), dir.join("agent-classes"));
    let javac = |cp: Option<&Path>, out: &Path, files: &[&str]| {
        let mut cmd = Command::new(tool("javac"));
        cmd.args(["--release", "11", "-d"]).arg(out);
        if let Some(cp) = cp {
            cmd.arg("-cp").arg(cp);
        }
        let o = cmd.args(files.iter().map(|f| src.join(f))).output().unwrap();
        assert!(o.status.success(), "javac: {}", text(&o.stderr));
    };
    javac(None, &classes, &["Instrumented.java", "CpuBudget.java"]);
    javac(Some(&asm_jar()), &agent_classes, &["EntryCounter.java"]);
    let manifest = dir.join("manifest.txt");
    std::fs::write(&manifest, "Premain-Class: EntryCounter\nCan-Retransform-Classes: true\n").unwrap();
    let jar = dir.join("entry-counter.jar");
    let o = Command::new(tool("jar"))
        .arg("--create")
        .arg("--file")
        .arg(&jar)
        .arg("--manifest")
        .arg(&manifest)
        .arg("-C")
        .arg(&agent_classes)
        .arg(".")
        .output()
        .unwrap();
    assert!(o.status.success(), "jar: {}", text(&o.stderr));
    (format!("{}:{}", classes.display(), asm_jar().display()), jar)
}

/// What the program printed at the end (`KEY n` lines).
fn facts(stdout: &str) -> BTreeMap<String, i64> {
    stdout.lines().filter_map(|l| l.split_once(' ')).filter_map(|(k, v)| Some((k.to_string(), v.trim().parse().ok()?))).collect()
}

/// The Java frames of each event of `event` in a JFR file, top first, as
/// the JDK's `jfr print` shows them: `Class.method(params) line: N`.
fn jfr_stacks(rec: &Path, event: &str) -> Vec<Vec<String>> {
    let o = Command::new(tool("jfr")).args(["print", "--stack-depth", "64", "--events", event]).arg(rec).output().unwrap();
    assert!(o.status.success(), "jfr print {}: {}", rec.display(), text(&o.stderr));
    let mut stacks = Vec::new();
    let mut current: Option<Vec<String>> = None;
    for line in text(&o.stdout).lines().map(str::trim) {
        match line {
            "stackTrace = [" => current = Some(Vec::new()),
            "]" => stacks.extend(current.take()),
            frame => {
                if let Some(c) = current.as_mut() {
                    c.push(frame.to_string());
                }
            }
        }
    }
    stacks
}

/// The line of `frame` (`Class.method(params) line: N`), if it is that method's.
fn line_of(frame: &str, method: &str) -> Option<i64> {
    frame.strip_prefix(method)?.strip_prefix(" line: ")?.parse().ok()
}

/// Of the frames of `method` in `stacks` (the first in each stack), how
/// many are at `line`, and all lines seen.
fn lines_of(stacks: &[Vec<String>], method: &str) -> (usize, BTreeMap<i64, usize>) {
    let mut seen = BTreeMap::new();
    for st in stacks {
        if let Some(line) = st.iter().find_map(|f| line_of(f, method)) {
            *seen.entry(line).or_default() += 1;
        }
    }
    (seen.values().sum(), seen)
}

/// Checks a run's recording and output: names, lines, exit, the rewrite.
fn check(label: &str, dir: &Path, rec: &Path, out: &std::process::Output) {
    let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
    assert!(out.status.success(), "{label}: the JVM failed\n{stdout}\n{stderr}");
    let crashes: Vec<PathBuf> = std::fs::read_dir(dir).unwrap().map(|e| e.unwrap().path()).filter(|p| p.to_string_lossy().contains("hs_err")).collect();
    assert!(crashes.is_empty(), "{label}: {crashes:?}");
    assert!(!stderr.contains("EntryCounter: cannot rewrite"), "{label}: {stderr}");
    let f = facts(&stdout);
    let fact = |k: &str| *f.get(k).unwrap_or_else(|| panic!("{label}: no {k} line in\n{stdout}"));
    // (d) The rewrite ran: the inserted code counted every call.
    assert!(fact("ENTRIES") > 0 && fact("ENTRIES") == fact("CALLS"), "{label}: {f:?}");
    assert!(fact("REWRITES") > fact("RETRANSFORMS"), "{label}: {f:?}");

    // (a) oxprof's own reading: the rewritten methods by their own names.
    let collapsed = dir.join(format!("{label}.collapsed"));
    let o = oxprof_cmd().arg("convert").arg(rec).arg("-o").arg(&collapsed).output().unwrap();
    assert!(o.status.success(), "{label}: convert: {}", text(&o.stderr));
    let cpu = read_collapsed(&collapsed);
    let hot = samples_with(&cpu, "Instrumented.hot");
    let under_main: u64 = cpu.iter().filter(|(st, _)| st.windows(2).any(|w| w[0] == "Instrumented.main" && w[1] == "Instrumented.hot")).map(|(_, n)| n).sum();
    assert!(hot > 300, "{label}: {hot} CPU samples in Instrumented.hot\n{stderr}");
    assert!(under_main as f64 >= 0.95 * hot as f64, "{label}: {under_main} of {hot} Instrumented.hot samples called from Instrumented.main");
    let alloc = read_collapsed(&dir.join(format!("{label}.alloc.collapsed")));
    assert!(samples_with(&alloc, "Instrumented.allocate") > 10, "{label}: allocation samples in Instrumented.allocate: {alloc:?}");

    // (b) The JDK's reading of oxprof's recording: lines where the program
    // says its loops are.
    let cpu_stacks = jfr_stacks(rec, "jdk.ExecutionSample");
    let alloc_stacks = jfr_stacks(rec, "jdk.ObjectAllocationSample");
    for (stacks, method, key) in [
        (&cpu_stacks, "Instrumented.hot(int)", "HOT_LINE"),
        (&alloc_stacks, "Instrumented.allocate(int)", "ALLOC_LINE"),
        (&cpu_stacks, "Instrumented.main(String[])", "MAIN_LINE"),
    ] {
        let (n, seen) = lines_of(stacks, method);
        let at = seen.get(&fact(key)).copied().unwrap_or(0);
        eprintln!("{label}: {method}: {at} of {n} frames at line {} ({key}); lines seen {seen:?}", fact(key));
        assert!(n > 0 && at as f64 >= 0.9 * n as f64, "{label}: {method} at line {} in {at} of {n} frames: {seen:?}", fact(key));
    }
}

fn run_with_both_agents(label: &str, retransform: bool) {
    let s = Scratch::new(label);
    let (cp, jar) = build(&s.0);
    let rec = s.path(&format!("{label}.jfr"));
    let mut cmd = Command::new(java());
    cmd.current_dir(&s.0)
        .arg(format!("-javaagent:{}=Instrumented", jar.display()))
        .arg(format!("-agentpath:{}=start,event=cpu,interval=1ms,alloc=64k,file={}", agent().display(), rec.display()))
        .args(["-cp", &cp, "Instrumented", "3"]);
    if retransform {
        cmd.arg("retransform");
    }
    let o = cmd.output().unwrap();
    check(label, &s.0, &rec, &o);
    if retransform {
        let f = facts(&text(&o.stdout));
        assert!(f["RETRANSFORMS"] >= 10, "{f:?}");
    }
}

#[test]
fn a_bytecode_rewriting_agent_beside_oxprof_keeps_names_and_lines() {
    run_with_both_agents("rewritten", false);
}

/// The class rewritten again every 100 ms while oxprof samples it: frames
/// of the old versions still on the stack (the running main, a hot call
/// in progress) and of the new ones, all named and lined.
#[test]
fn a_class_retransformed_while_sampled_keeps_names_and_lines() {
    run_with_both_agents("retransformed", true);
}

/// oxprof attached to a JVM whose class the Java agent rewrote at load
/// (and goes on retransforming while oxprof starts and samples).
#[test]
fn oxprof_attached_late_to_a_rewritten_class_keeps_names_and_lines() {
    let label = "attached";
    let s = Scratch::new("rewritten-attach");
    let (cp, jar) = build(&s.0);
    let rec = s.path(&format!("{label}.jfr"));
    let cmd = java_cmd([format!("-javaagent:{}=Instrumented", jar.display()), "-cp".into(), cp, "Instrumented".into(), "stdin".into(), "retransform".into()]);
    let mut jvm = RunningJvm::spawn(cmd, &s.0, "ready");
    let o = attach_for_cpu(oxprof_cmd(), jvm.pid(), 3000, &["--event", "cpu", "--interval", "1ms", "--alloc", "64k", "-o", rec.to_str().unwrap()]);
    assert!(o.status.success(), "attach: {}", text(&o.stderr));
    assert!(text(&o.stderr).contains(&format!("profile written to {}", rec.display())), "{}", text(&o.stderr));
    jvm.child.stdin.as_mut().unwrap().write_all(b"done\n").unwrap();
    let out = jvm.finish();
    check(label, &s.0, &rec, &out);
}

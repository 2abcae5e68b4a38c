//! A streamed JFR recording whose file is deleted, or whose directory is
//! removed, while it records: nothing recorded is lost. The deleted file's
//! descriptor still holds every chunk; the agent copies them out to the
//! name asked for (made again) or to its private fallback directory, goes
//! on there, and says where.

mod common;

use common::*;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;

/// `jdk.ExecutionSample` events in `rec` whose stack holds `method`
/// (`TwoPhases.before`), checking first that the JDK's `jfr summary` reads it.
fn samples_in(rec: &Path, method: &str) -> usize {
    let s = Command::new(tool("jfr")).arg("summary").arg(rec).output().unwrap();
    assert!(s.status.success(), "jfr summary {}: {}", rec.display(), text(&s.stderr));
    let o = Command::new(tool("jfr")).args(["print", "--events", "jdk.ExecutionSample"]).arg(rec).output().unwrap();
    assert!(o.status.success(), "jfr print {}: {}", rec.display(), text(&o.stderr));
    text(&o.stdout).split("jdk.ExecutionSample {").filter(|e| e.contains(method)).count()
}

/// The path in the line of `out` that starts with `prefix`.
fn path_after(out: &str, prefix: &str) -> PathBuf {
    let line = out.lines().find_map(|l| l.find(prefix).map(|i| &l[i + prefix.len()..])).unwrap_or_else(|| panic!("no '{prefix}' in:\n{out}"));
    PathBuf::from(line.trim())
}

fn send_line(jvm: &mut RunningJvm, line: &str) {
    let stdin = jvm.child.stdin.as_mut().unwrap();
    stdin.write_all(format!("{line}\n").as_bytes()).unwrap();
    stdin.flush().unwrap();
}

/// Chunks end every 0.2 s, so the first phase's samples are on disk, in the
/// file that is then removed, before the removal.
const CHUNKS: (&str, &str) = ("OXPROF_JFR_CHUNK_SECONDS", "0.2");

#[test]
fn a_recording_whose_directory_is_removed_goes_on_in_the_fallback_directory_whole() {
    let s = Scratch::new("jfr-rmdir");
    compile(&s.0, &["TwoPhases.java"]);
    let dir = s.path("rm3");
    std::fs::create_dir(&dir).unwrap();
    let wanted = dir.join("r.jfr");
    let mut cmd = java_cmd([
        format!("-agentpath:{}=start,interval=5ms,file={}", agent().display(), wanted.display()),
        "-cp".into(),
        s.0.display().to_string(),
        "TwoPhases".into(),
        "0.4".into(),
    ]);
    cmd.env(CHUNKS.0, CHUNKS.1);
    let mut jvm = RunningJvm::spawn(cmd, &s.0, "ready");
    let pid = jvm.pid();
    wait_for_cpu(pid, process_cpu_ms(pid), 500, "first phase");
    // A few chunk ends (every 0.2 s, drained every 0.1 s) reach the file.
    std::thread::sleep(std::time::Duration::from_millis(600));
    assert!(std::fs::metadata(&wanted).unwrap().len() > 0, "no chunk was written before the removal");
    std::fs::remove_dir_all(&dir).unwrap();
    send_line(&mut jvm, "next");
    let o = jvm.finish();
    let err = text(&o.stderr);
    assert!(o.status.success(), "{err}");
    let written = path_after(&err, "profile written to ");
    assert!(!written.starts_with(&dir), "reported as written to the removed directory: {err}");
    assert!(written.starts_with(&s.0) && written.parent().unwrap().file_name().unwrap().to_string_lossy().starts_with(&format!("oxprof-{pid}-")), "{err}");
    assert!(written.is_file(), "{} does not exist: {err}", written.display());
    // The log says what happened and where the recording went.
    let warning = err.lines().find(|l| l.contains("warning:") && l.contains("was removed while recording")).unwrap_or_else(|| panic!("no warning in:\n{err}"));
    assert!(warning.contains(&wanted.display().to_string()) && warning.contains(&written.display().to_string()), "{warning}");
    assert!(warning.contains("its directory was removed"), "{warning}");
    let before = samples_in(&written, "TwoPhases.before");
    let after = samples_in(&written, "TwoPhases.after");
    eprintln!("before the removal: {before} samples, after: {after}");
    assert!(before >= 40, "{before} samples of the first phase (0.5 s of CPU at 5 ms) in {}", written.display());
    assert!(after >= 30, "{after} samples of the second phase (0.4 s of CPU at 5 ms) in {}", written.display());
}

#[test]
fn a_deleted_recording_file_is_written_again_at_its_name_at_dump_and_stop() {
    let s = Scratch::new("jfr-rm");
    compile(&s.0, &["TwoPhases.java"]);
    let wanted = s.path("r.jfr");
    let mut cmd = java_cmd(["-cp", s.0.to_str().unwrap(), "TwoPhases", "0.4", "wait"]);
    cmd.env(CHUNKS.0, CHUNKS.1);
    let mut jvm = RunningJvm::spawn(cmd, &s.0, "ready");
    let pid = jvm.pid();
    let attach = |args: &[&str]| {
        let o = oxprof_cmd().arg("attach").arg(pid.to_string()).args(args).output().unwrap();
        let out = format!("{}{}", text(&o.stdout), text(&o.stderr));
        assert!(o.status.success(), "attach {args:?}: {out}");
        out
    };
    attach(&["start", "--interval", "5ms", "-o", wanted.to_str().unwrap()]);
    wait_for_cpu(pid, process_cpu_ms(pid), 500, "first phase");
    std::thread::sleep(std::time::Duration::from_millis(600));
    assert!(std::fs::metadata(&wanted).unwrap().len() > 0, "no chunk was written before the removal");
    std::fs::remove_file(&wanted).unwrap();
    // The dump finds the file gone and writes it again, whole.
    let reply = attach(&["dump"]);
    assert!(reply.contains("was removed while recording (it was deleted)") && reply.contains(&wanted.display().to_string()), "{reply}");
    let before = samples_in(&wanted, "TwoPhases.before");
    assert!(before >= 40, "{before} samples of the first phase in the file written again at the dump");
    send_line(&mut jvm, "next");
    let mut line = String::new();
    std::io::BufRead::read_line(&mut std::io::BufReader::new(jvm.child.stdout.as_mut().unwrap()), &mut line).unwrap();
    assert_eq!(line.trim(), "after done");
    // Deleted again before the stop: the same.
    std::fs::remove_file(&wanted).unwrap();
    let reply = attach(&["stop"]);
    assert!(reply.contains("was removed while recording"), "{reply}");
    assert_eq!(path_after(&reply, "profile written to "), wanted, "{reply}");
    let (before_stop, after) = (samples_in(&wanted, "TwoPhases.before"), samples_in(&wanted, "TwoPhases.after"));
    eprintln!("before the removal: {before_stop} samples, after: {after}");
    assert!(before_stop >= before, "{before_stop} samples of the first phase at the stop, {before} at the dump");
    assert!(after >= 30, "{after} samples of the second phase (0.4 s of CPU at 5 ms)");
    drop(jvm.child.stdin.take());
    assert!(jvm.finish().status.success());
}

//! Classes unloading while being sampled at 1 ms must neither crash the JVM
//! nor lose the names of their methods.

mod common;

use common::*;
use std::io::{Read, Write};
use std::process::{Command, Stdio};
use std::time::Instant;

/// Method names the agent's `forgot N method names` debug lines add up to.
fn forgotten(lines: &[String]) -> usize {
    lines.iter().filter_map(|l| l.split("forgot ").nth(1)?.split(' ').next()?.parse::<usize>().ok()).sum()
}

#[test]
fn unloaded_classes_keep_their_method_names_under_1ms_sampling() {
    let s = Scratch::new("unload");
    let app = s.path("app");
    let workers = s.path("workers");
    std::fs::create_dir_all(&app).unwrap();
    std::fs::create_dir_all(&workers).unwrap();
    compile(&app, &["Unload.java"]);
    compile(&workers, &["Worker.java"]);
    let out = s.path("unload.collapsed");
    let unload_log = s.path("unload.log");
    // The agent prunes the names of unloaded classes once it holds more
    // than 20,000 of them: how many loaders that takes in wall time depends
    // on the machine and its load, so Unload runs until the agent says it
    // pruned (it stops on a line on stdin), and at least until its main
    // thread has had 3 s of CPU time, most of it in Worker.spin (at 1 ms,
    // some 2,000 samples there).
    let mut child = Command::new(java())
        .current_dir(&s.0)
        .arg(format!("-agentpath:{}=start,event=cpu,interval=1ms,loglevel=debug,file={}", agent().display(), out.display()))
        .arg(format!("-Xlog:class+unload=info:file={}", unload_log.display()))
        .arg("-cp")
        .arg(&app)
        .args(["Unload", workers.to_str().unwrap(), "3", "stdin"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start java");
    let rx = stderr_lines(&mut child);
    let mut stdout = child.stdout.take().unwrap();
    let stdout = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = stdout.read_to_string(&mut s);
        s
    });
    let started = Instant::now();
    let mut lines = Vec::new();
    while forgotten(&lines) <= 1000 {
        match rx.recv_timeout(WORK_CAP.saturating_sub(started.elapsed())) {
            Ok(line) => lines.push(line),
            Err(e) => {
                let _ = child.kill();
                let status = child.wait().unwrap();
                let tail = lines[lines.len().saturating_sub(20)..].join("\n");
                let why = match e {
                    std::sync::mpsc::RecvTimeoutError::Timeout => format!("the machine did not run enough class loaders in {} s", WORK_CAP.as_secs()),
                    std::sync::mpsc::RecvTimeoutError::Disconnected => format!("the JVM ended first ({status})"),
                };
                panic!("early method names were never pruned ({} forgotten after {:.0} s): {why}:\n{tail}", forgotten(&lines), started.elapsed().as_secs_f64());
            }
        }
    }
    let pruned_after = started.elapsed();
    child.stdin.as_mut().unwrap().write_all(b"stop\n").unwrap();
    lines.extend(rx.iter());
    let status = child.wait().unwrap();
    let err = lines.join("\n");
    assert!(status.success(), "the JVM failed: {status:?}\n{err}");
    let stdout = stdout.join().unwrap();
    let field =
        |k: &str| -> u64 { stdout.split_whitespace().find_map(|kv| kv.strip_prefix(k)).unwrap_or_else(|| panic!("no {k} in {stdout:?}")).parse().unwrap() };
    let (loaders, cpu_ms) = (field("loaders="), field("cpu_ms="));
    let unloaded = std::fs::read_to_string(&unload_log).unwrap().lines().filter(|l| l.contains("Worker")).count();
    assert!(loaders > 200, "only {loaders} loaders were created");
    assert!(unloaded > 100, "only {unloaded} Worker classes unloaded; the test did not exercise unloading");
    let stacks = read_collapsed(&out);
    let named = samples_with(&stacks, "Worker.spin");
    assert!(named > 1000, "Worker.spin has only {named} samples of {} (main had {cpu_ms} ms of CPU)", total(&stacks));
    let unknown: u64 = stacks.iter().filter(|(st, _)| st.iter().any(|f| f.contains("[unknown"))).map(|(_, n)| n).sum();
    assert!(unknown * 50 < total(&stacks), "{unknown} samples with unknown frames");
    // Names of unloaded classes that were never sampled are forgotten, so
    // memory stays bounded however many classes come and go.
    let forgot = forgotten(&lines);
    assert!(forgot > 1000, "early method names were never pruned:\n{err}");
    eprintln!(
        "{loaders} loaders, {unloaded} unloads, {forgot} names pruned (first after {:.1} s), Worker.spin in {named} of {} samples (main had {cpu_ms} ms of CPU), {:.1} s in all",
        pruned_after.as_secs_f64(),
        total(&stacks),
        started.elapsed().as_secs_f64()
    );
}

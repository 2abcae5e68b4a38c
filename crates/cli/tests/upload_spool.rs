//! Continuous profiling that only pushes to a profile store (`loop=` with
//! `upload=`, no `file=`) loses no interval when the store is down or
//! refuses: what it did not take is kept in the agent's private directory
//! (`oxprof-<pid>-XXXXXX` in the working directory), one file per payload
//! named after its interval, that `oxprof convert` reads; together they hold
//! the program's CPU time. The stores here are a closed port and a tiny
//! server that answers every request with HTTP 500.

mod common;

use std::io::{Read, Write};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use common::*;

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

fn cpu_ns(stdout: &str) -> f64 {
    stdout.lines().find_map(|l| l.strip_prefix("CPU_NS ")).expect("CPU_NS line").trim().parse().unwrap()
}

/// The directory and count of `N kept in DIR/ (oxprof convert reads them)`
/// in the agent's last upload line.
fn kept(err: &str) -> (u64, PathBuf) {
    let line = err
        .lines()
        .rev()
        .find(|l| l.contains("upload: stopped:") && l.contains(" kept in "))
        .unwrap_or_else(|| panic!("no line says where the payloads are kept:\n{err}"));
    let (before, after) = line.split_once(" kept in ").unwrap();
    let n: u64 = before.rsplit(' ').next().unwrap().parse().unwrap_or_else(|_| panic!("no count in {line:?}"));
    let dir = after.split_once("/ (oxprof convert reads them)").unwrap_or_else(|| panic!("{line:?}")).0;
    (n, PathBuf::from(dir))
}

/// The files in `dir`, sorted by name.
fn files_in(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display())).map(|e| e.unwrap().path()).collect();
    v.sort();
    v
}

/// Converts each kept file to collapsed stacks weighed in nanoseconds and
/// returns the nanoseconds of stacks through `frame`.
fn ns_with(s: &Scratch, files: &[PathBuf], frame: &str) -> u64 {
    let mut sum = 0;
    for (i, f) in files.iter().enumerate() {
        let out = s.path(&format!("kept-{i}.collapsed"));
        let o = oxprof_cmd().arg("convert").arg(f).arg("--total").arg("-o").arg(&out).output().unwrap();
        assert!(o.status.success(), "oxprof convert {}: {}", f.display(), text(&o.stderr));
        sum += samples_with(&read_collapsed(&out), frame);
    }
    sum
}

/// Checks what a run left: the directory the log names is this JVM's
/// private directory in its working directory, holding `n` files (no other
/// file was written) named `interval-N-YYYYMMDD-HHMMSS<suffix>`, numbered
/// from 0; returns them.
fn check_kept(s: &Scratch, err: &str, pid: u32, suffix: &str) -> Vec<PathBuf> {
    let (n, dir) = kept(err);
    assert_eq!(dir.parent(), Some(s.0.as_path()), "kept in {}", dir.display());
    assert!(dir.file_name().unwrap().to_string_lossy().starts_with(&format!("oxprof-{pid}-")), "{}", dir.display());
    let files = files_in(&dir);
    assert_eq!(files.len() as u64, n, "{files:?}\n{err}");
    assert!(n >= 4, "{n} intervals kept for a run of 4 s with loop=1s\n{err}");
    let mut numbers: Vec<u64> = files
        .iter()
        .map(|f| {
            let name = f.file_name().unwrap().to_string_lossy().into_owned();
            let rest = name.strip_suffix(suffix).and_then(|r| r.strip_prefix("interval-")).unwrap_or_else(|| panic!("{name}"));
            let (num, time) = rest.split_once('-').unwrap_or_else(|| panic!("{name}"));
            assert!(time.len() == 15 && time.as_bytes()[8] == b'-', "{name}: the interval's start");
            num.parse().unwrap()
        })
        .collect();
    numbers.sort();
    assert_eq!(numbers, (0..n).collect::<Vec<_>>(), "every interval, numbered");
    // No interval file anywhere else: file= was not given.
    let others: Vec<String> = std::fs::read_dir(&s.0)
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter(|n| n.starts_with("oxprof-") && !dir.ends_with(n))
        .collect();
    assert!(others.is_empty(), "{others:?}");
    files
}

/// The store is down for the whole run: every interval is kept, and the
/// kept files add up to the CPU time the program measured itself.
fn check_closed_port(store: &str, suffix: &str) {
    let s = Scratch::new(&format!("spool-closed-{store}"));
    compile(&s.0, &["CpuBurn.java"]);
    let opts = format!("start,event=cpu,interval=5ms,loop=1s,upload=http://127.0.0.1:{},format={store}", free_port());
    let t0 = Instant::now();
    let cmd = java_cmd([format!("-agentpath:{}={opts}", agent().display()), "-cp".into(), s.0.display().to_string(), "CpuBurn".into(), "4".into()]);
    let mut jvm = RunningJvm::spawn(cmd, &s.0, "ready");
    let pid = jvm.pid();
    let o = jvm.finish();
    let err = text(&o.stderr);
    assert!(o.status.success(), "{err}");
    let took = t0.elapsed();
    assert!(took < Duration::from_secs(15), "the run took {took:?}\n{err}");
    let truth = cpu_ns(&text(&o.stdout));
    let files = check_kept(&s, &err, pid, suffix);
    let spin = ns_with(&s, &files, "CpuBurn.spin") as f64;
    let ratio = spin / truth;
    eprintln!("{store}: {} files kept; CpuBurn.spin {spin:.0} ns, ThreadMXBean {truth:.0} ns, ratio {ratio:.3}", files.len());
    assert!((0.85..=1.1).contains(&ratio), "the kept intervals hold {ratio:.3} of the program's CPU time\n{err}");
}

#[test]
fn otlp_intervals_a_closed_port_did_not_take_are_kept_and_read_by_convert() {
    check_closed_port("otlp", ".otlp.pb");
}

#[test]
fn pyroscope_intervals_a_closed_port_did_not_take_are_kept_and_read_by_convert() {
    check_closed_port("pyroscope", ".cpu.pb.gz");
}

/// A store that answers every request with HTTP 500, counting them.
struct Always500 {
    port: u16,
    requests: Arc<AtomicUsize>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl Always500 {
    fn start() -> Always500 {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        listener.set_nonblocking(true).unwrap();
        let port = listener.local_addr().unwrap().port();
        let (requests, stop) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicBool::new(false)));
        let (r, st) = (requests.clone(), stop.clone());
        let thread = std::thread::spawn(move || {
            while !st.load(Ordering::Relaxed) {
                let Ok((mut conn, _)) = listener.accept() else {
                    std::thread::sleep(Duration::from_millis(10));
                    continue;
                };
                conn.set_nonblocking(false).unwrap();
                conn.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
                // The headers, then Content-Length bytes of body.
                let mut got = Vec::new();
                let mut buf = [0u8; 65536];
                let head_end = loop {
                    if let Some(p) = got.windows(4).position(|w| w == b"\r\n\r\n") {
                        break Some(p + 4);
                    }
                    match conn.read(&mut buf) {
                        Ok(0) | Err(_) => break None,
                        Ok(n) => got.extend_from_slice(&buf[..n]),
                    }
                };
                let Some(head_end) = head_end else { continue };
                let head = String::from_utf8_lossy(&got[..head_end]).to_ascii_lowercase();
                let length: usize = head.lines().find_map(|l| l.strip_prefix("content-length:")).and_then(|v| v.trim().parse().ok()).unwrap_or(0);
                while got.len() < head_end + length {
                    match conn.read(&mut buf) {
                        Ok(0) | Err(_) => break,
                        Ok(n) => got.extend_from_slice(&buf[..n]),
                    }
                }
                r.fetch_add(1, Ordering::SeqCst);
                let body = "the store is broken";
                let _ = write!(
                    conn,
                    "HTTP/1.1 500 Internal Server Error\r\nContent-Type: text/plain\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                    body.len()
                );
            }
        });
        Always500 { port, requests, stop, thread: Some(thread) }
    }
}

impl Drop for Always500 {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// A store that answers 500: OTLP does not retry it, so each interval is
/// given up as it comes and kept at once, while the JVM runs (`status`
/// says so), not only at exit.
#[test]
fn intervals_a_failing_store_refused_are_kept_while_the_jvm_runs() {
    let s = Scratch::new("spool-500");
    compile(&s.0, &["CpuBurn.java"]);
    let store = Always500::start();
    let opts = format!("start,event=cpu,interval=5ms,loop=1s,upload=http://127.0.0.1:{},format=otlp", store.port);
    let cmd = java_cmd([format!("-agentpath:{}={opts}", agent().display()), "-cp".into(), s.0.display().to_string(), "CpuBurn".into(), "4".into()]);
    let mut jvm = RunningJvm::spawn(cmd, &s.0, "ready");
    let pid = jvm.pid();
    // Two intervals refused and kept while the program runs.
    let t0 = Instant::now();
    let dir = loop {
        let kept: Vec<PathBuf> = std::fs::read_dir(&s.0)
            .unwrap()
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.file_name().is_some_and(|n| n.to_string_lossy().starts_with(&format!("oxprof-{pid}-"))))
            .collect();
        if let Some(d) = kept.first().filter(|d| std::fs::read_dir(d).map(|r| r.count()).unwrap_or(0) >= 2) {
            break d.clone();
        }
        assert!(
            t0.elapsed() < Duration::from_secs(10) && jvm.alive(),
            "no interval kept while the JVM ran ({} requests)",
            store.requests.load(Ordering::SeqCst)
        );
        std::thread::sleep(Duration::from_millis(50));
    };
    let o = oxprof_cmd().args(["attach", &pid.to_string(), "status"]).output().unwrap();
    let status = text(&o.stdout);
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert!(status.contains(&format!(" kept in {}/ (oxprof convert reads them)", dir.display())), "{status}");
    assert!(status.contains("HTTP 500"), "{status}");
    let o = jvm.finish();
    let err = text(&o.stderr);
    assert!(o.status.success(), "{err}");
    let files = check_kept(&s, &err, pid, ".otlp.pb");
    assert_eq!(kept(&err).1, dir);
    // Each was sent once and refused: the store saw every interval.
    let requests = store.requests.load(Ordering::SeqCst);
    assert!(requests >= files.len(), "{requests} requests for {} intervals", files.len());
    assert!(err.contains("HTTP 500 from") && err.contains("kept in "), "{err}");
    let truth = cpu_ns(&text(&o.stdout));
    let ratio = ns_with(&s, &files, "CpuBurn.spin") as f64 / truth;
    assert!((0.85..=1.1).contains(&ratio), "the kept intervals hold {ratio:.3} of the program's CPU time\n{err}");
}

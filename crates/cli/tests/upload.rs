//! Continuous profiling pushed to a profile store (`loop=` with `upload=`):
//! a store on loopback (tests/py/store.py) records what the agent sends; the
//! official `opentelemetry-proto` package decodes OTLP payloads, the JDK's
//! `jfr` and `oxprof convert` read Pyroscope's JFR bodies; and the JVM and
//! the files it writes come through a store that is absent, throttles,
//! fails and hangs.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::time::{Duration, Instant};

use common::*;
use serde_json::Value;

fn store_py() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/py/store.py")
}

/// The loopback store, killed when dropped.
struct Store {
    child: Child,
    dir: PathBuf,
    port: u16,
}

impl Store {
    fn start(dir: &Path, port: Option<u16>) -> Store {
        std::fs::create_dir_all(dir).unwrap();
        let _ = std::fs::remove_file(dir.join("port"));
        let mut cmd = Command::new("python3");
        cmd.arg(store_py()).arg("serve").arg(dir);
        if let Some(p) = port {
            cmd.arg(p.to_string());
        }
        let child = cmd.spawn().expect("python3");
        let t0 = Instant::now();
        let port = loop {
            if let Ok(p) = std::fs::read_to_string(dir.join("port")) {
                break p.trim().parse().unwrap();
            }
            assert!(t0.elapsed() < Duration::from_secs(20), "the store did not start");
            std::thread::sleep(Duration::from_millis(50));
        };
        Store { child, dir: dir.to_path_buf(), port }
    }

    fn set_mode(&self, mode: &str) {
        std::fs::write(self.dir.join("mode"), mode).unwrap();
    }

    fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// The requests answered 200, in order: (metadata, body file).
    fn requests(&self) -> Vec<(Value, PathBuf)> {
        let mut v: Vec<(u64, Value, PathBuf)> = std::fs::read_dir(&self.dir)
            .unwrap()
            .filter_map(|e| {
                let p = e.ok()?.path();
                let n: u64 = p.file_name()?.to_str()?.strip_prefix("req-")?.strip_suffix(".json")?.parse().ok()?;
                let meta: Value = serde_json::from_str(&std::fs::read_to_string(&p).ok()?).ok()?;
                Some((n, meta, p.with_extension("body")))
            })
            .collect();
        v.sort_by_key(|(n, _, _)| *n);
        v.into_iter().map(|(_, m, b)| (m, b)).collect()
    }

    fn log(&self) -> String {
        std::fs::read_to_string(self.dir.join("log")).unwrap_or_default()
    }
}

impl Drop for Store {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn decode_otlp(body: &Path) -> Value {
    let o = Command::new("python3").arg(store_py()).arg("otlp").arg(body).output().unwrap();
    assert!(
        o.status.success(),
        "the opentelemetry-proto package could not read {} (pip install opentelemetry-proto==1.45.2 protobuf==7.36.2): {}",
        body.display(),
        text(&o.stderr)
    );
    serde_json::from_slice(&o.stdout).unwrap()
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

#[test]
fn otlp_intervals_reach_the_collector_with_their_resource_and_one_profile_per_kind() {
    let s = Scratch::new("upload-otlp");
    compile(&s.0, &["Matrix.java"]);
    let store = Store::start(&s.path("store"), None);
    let opts = format!("start,event=cpu,interval=2ms,alloc=64k,loop=1s,upload={},format=otlp,service=checkout,labels=env=prod;zone=b", store.url());
    let mut cmd = Command::new(java());
    cmd.current_dir(&s.0).arg(format!("-agentpath:{}={opts}", agent().display())).arg("-cp").arg(&s.0).args(["Matrix", "4"]);
    let child = cmd.stdout(std::process::Stdio::piped()).stderr(std::process::Stdio::piped()).spawn().unwrap();
    let pid = child.id() as i64;
    let o = child.wait_with_output().unwrap();
    let err = text(&o.stderr);
    assert!(o.status.success(), "{err}");
    // upload= without file=: nothing on disk.
    let files: Vec<String> =
        std::fs::read_dir(&s.0).unwrap().filter_map(|e| e.ok()?.file_name().into_string().ok()).filter(|n| n.starts_with("oxprof-")).collect();
    assert!(files.is_empty(), "files written without file=: {files:?}");
    let reqs = store.requests();
    assert!(reqs.len() >= 4, "{} requests\n{err}\n{}", reqs.len(), store.log());
    let mut previous_end: Option<u64> = None;
    let mut with_burn = 0;
    for (i, (meta, body)) in reqs.iter().enumerate() {
        assert_eq!(meta["path"], "/v1development/profiles");
        assert_eq!(meta["headers"]["content-type"], "application/x-protobuf");
        assert_eq!(meta["headers"]["content-encoding"], "gzip");
        let d = decode_otlp(body);
        let r = &d["resource"];
        assert_eq!(r["service.name"], "checkout", "{r}");
        assert_eq!((r["env"].as_str(), r["zone"].as_str()), (Some("prod"), Some("b")), "{r}");
        assert_eq!(r["process.pid"].as_i64(), Some(pid), "{r}");
        assert!(r["host.name"].is_string() && r["process.runtime.version"].is_string(), "{r}");
        // OpenTelemetry's names: the runtime's (java.runtime.name), the VM in the description.
        assert_eq!(r["process.runtime.name"], "OpenJDK Runtime Environment", "{r}");
        assert!(r["process.runtime.description"].as_str().is_some_and(|d| d.contains("VM")), "{r}");
        let profiles = d["profiles"].as_array().unwrap();
        let types: Vec<&str> = profiles.iter().map(|p| p["sample_type"].as_str().unwrap()).collect();
        // One CPU and one allocation profile per interval (each as its
        // total and its count), never two of a kind.
        for kind in ["cpu/nanoseconds", "alloc_space/bytes"] {
            assert!(types.iter().filter(|t| **t == kind).count() <= 1, "request {i}: {types:?}");
        }
        let cpu = profiles.iter().find(|p| p["sample_type"] == "cpu/nanoseconds");
        if let Some(cpu) = cpu {
            with_burn += cpu["functions"].get("Matrix.burn").is_some() as usize;
            let start = cpu["time_unix_nano"].as_u64().unwrap();
            let end = start + cpu["duration_nano"].as_u64().unwrap();
            // Consecutive intervals: each starts where the previous ended
            // (the first too, though starting the sources took a while).
            if let Some(prev) = previous_end {
                assert!(start.abs_diff(prev) < 2_000_000, "request {i} starts {} us away from the previous end", (start as i64 - prev as i64) / 1_000);
            }
            previous_end = Some(end);
        }
        if i == 1 {
            assert!(types.contains(&"cpu/nanoseconds") && types.contains(&"alloc_space/bytes"), "request {i}: {types:?}");
        }
    }
    assert!(with_burn + 1 >= reqs.len(), "Matrix.burn in {with_burn} of {} CPU profiles", reqs.len());
    assert!(err.contains("upload summary:"), "{err}");
}

/// Without `service=`, uploads are filed as OpenTelemetry's variables say,
/// as the same run's OTLP files are, and else under the main class.
#[test]
fn uploads_and_files_take_the_service_from_opentelemetry_variables() {
    let s = Scratch::new("upload-service");
    compile(&s.0, &["Matrix.java"]);
    for (env, want) in [(Some("from-env"), "from-env"), (None, "Matrix")] {
        let store = Store::start(&s.path(&format!("store-{want}")), None);
        let file = s.path(&format!("{want}-%n.otlp.pb"));
        let opts = format!("start,event=cpu,interval=5ms,loop=1s,file={},upload={},format=otlp", file.display(), store.url());
        let mut cmd = Command::new(java());
        cmd.current_dir(&s.0).env_remove("OTEL_SERVICE_NAME").env_remove("OTEL_RESOURCE_ATTRIBUTES");
        if let Some(name) = env {
            cmd.env("OTEL_SERVICE_NAME", name);
        }
        let o = cmd.arg(format!("-agentpath:{}={opts}", agent().display())).arg("-cp").arg(&s.0).args(["Matrix", "2"]).output().unwrap();
        assert!(o.status.success(), "{}", text(&o.stderr));
        let reqs = store.requests();
        assert!(!reqs.is_empty(), "{}", text(&o.stderr));
        for (_, body) in &reqs {
            assert_eq!(decode_otlp(body)["resource"]["service.name"], want, "upload");
        }
        assert_eq!(decode_otlp(&s.path(&format!("{want}-0.otlp.pb")))["resource"]["service.name"], want, "file");
    }
}

/// `status` of a recording that only pushes its intervals names no file.
#[test]
fn status_of_an_upload_only_loop_names_no_file() {
    let s = Scratch::new("upload-status");
    compile(&s.0, &["Spin.java"]);
    let store = Store::start(&s.path("store"), None);
    let opts = format!("start,event=cpu,loop=1s,upload={},format=otlp", store.url());
    let cmd = java_cmd([format!("-agentpath:{}={opts}", agent().display()), "-cp".into(), s.0.display().to_string(), "Spin".into(), "forever".into()]);
    let jvm = RunningJvm::spawn(cmd, &s.0, "ready");
    let o = oxprof_cmd().args(["attach", &jvm.pid().to_string(), "status"]).output().unwrap();
    let out = text(&o.stdout);
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert!(out.contains("pushed only, no file= given") && out.contains("output none"), "{out}");
    assert!(!out.contains("working directory") && !out.contains(".html"), "a file that is never written: {out}");
}

/// A credential the JVM cannot read, or upload options without a store,
/// refuse the start like any bad option: the JVM does not run unprofiled.
#[test]
fn a_credential_the_jvm_cannot_read_refuses_the_start() {
    let s = Scratch::new("upload-auth");
    compile(&s.0, &["Hot.java"]);
    let base = "start,event=cpu,loop=1s,upload=http://127.0.0.1:9,format=otlp";
    for (opts, expected) in [
        (
            format!("{base},auth=env:OXPROF_SURELY_UNSET"),
            "invalid agent option 'auth=env:OXPROF_SURELY_UNSET': the variable is not set in the JVM's environment",
        ),
        (format!("{base},auth=file:{}", s.path("missing").display()), "cannot read it: no such file"),
        ("start,event=cpu,loop=1s,labels=a=b".to_string(), "invalid agent option 'labels': needs upload=URL"),
    ] {
        assert_refused(&run_java(&s.0, &opts, &[], &s.0, &["Hot", "0.1"]), &opts, expected);
    }
}

#[test]
fn pyroscope_gets_each_interval_as_jfr_read_by_jfr_and_oxprof() {
    let s = Scratch::new("upload-pyroscope");
    compile(&s.0, &["Matrix.java"]);
    let store = Store::start(&s.path("store"), None);
    let pattern = s.path("iv-%n.jfr");
    let opts = format!(
        "start,event=cpu,interval=2ms,alloc=64k,loop=1s,file={},upload={},format=pyroscope,service=checkout,labels=env=prod",
        pattern.display(),
        store.url()
    );
    let o = run_java(&s.0, &opts, &[], &s.0, &["Matrix", "3"]);
    let err = text(&o.stderr);
    assert!(o.status.success(), "{err}");
    let reqs = store.requests();
    assert!(reqs.len() >= 3, "{} requests\n{err}", reqs.len());
    // file= and upload= together: every interval on disk too.
    let on_disk = std::fs::read_dir(&s.0).unwrap().filter(|e| e.as_ref().unwrap().file_name().to_string_lossy().starts_with("iv-")).count();
    assert_eq!(on_disk, reqs.len(), "files on disk vs intervals uploaded");
    let mut burn = 0;
    for (i, (meta, body)) in reqs.iter().enumerate() {
        let q = &meta["query"];
        assert_eq!(meta["path"], "/ingest");
        assert_eq!(q["name"], "checkout{env=prod}", "{q}");
        assert_eq!((q["format"].as_str(), q["spyName"].as_str()), (Some("jfr"), Some("javaspy")), "{q}");
        assert_eq!(q["sampleRate"], "500", "{q}");
        let (from, until): (u64, u64) = (q["from"].as_str().unwrap().parse().unwrap(), q["until"].as_str().unwrap().parse().unwrap());
        assert!(until >= from && until - from <= 3, "request {i}: from {from} until {until}");
        let jfr = s.path(&format!("got-{i}.jfr"));
        let o = Command::new("python3").arg(store_py()).arg("jfr-part").arg(body).arg(&jfr).output().unwrap();
        assert!(o.status.success(), "{}", text(&o.stderr));
        let summary = Command::new(tool("jfr")).arg("summary").arg(&jfr).output().unwrap();
        assert!(summary.status.success(), "jfr summary of request {i}: {}", text(&summary.stderr));
        let collapsed = s.path(&format!("got-{i}.collapsed"));
        let c = oxprof_cmd().arg("convert").arg(&jfr).arg("-o").arg(&collapsed).output().unwrap();
        assert!(c.status.success(), "oxprof convert of request {i}: {}", text(&c.stderr));
        burn += samples_with(&read_collapsed(&collapsed), "Matrix.burn");
    }
    assert!(burn > 500, "Matrix.burn samples in the uploaded recordings: {burn}");
}

#[test]
fn a_store_that_is_absent_throttles_and_hangs_costs_no_interval_on_disk() {
    let s = Scratch::new("upload-faults");
    compile(&s.0, &["CpuBurn.java"]);
    let port = free_port();
    let pattern = s.path("f-%n.collapsed");
    let opts = format!(
        "start,event=cpu,interval=5ms,loop=1s,file={},upload=http://127.0.0.1:{port},format=otlp,upload_timeout=1s,upload_connect_timeout=500ms,upload_queue=4",
        pattern.display()
    );
    let cmd = java_cmd([format!("-agentpath:{}={opts}", agent().display()), "-cp".into(), s.0.display().to_string(), "CpuBurn".into(), "25".into()]);
    let mut jvm = RunningJvm::spawn(cmd, &s.0, "ready");
    let started = Instant::now();
    // Absent for 2 s, then throttling with Retry-After, then hanging, then
    // fine; each phase lasts until the store has seen a request in it (the
    // sender backs off with jitter, so phases of fixed length could be
    // skipped on a slow machine).
    std::thread::sleep(Duration::from_secs(2));
    let store_dir = s.path("store");
    std::fs::create_dir_all(&store_dir).unwrap();
    std::fs::write(store_dir.join("mode"), "429:1").unwrap();
    let store = Store::start(&store_dir, Some(port));
    for (mode, next) in [(" 429:1 ", "hang"), (" hang ", "ok")] {
        let t0 = Instant::now();
        while !store.log().contains(mode) {
            assert!(t0.elapsed() < Duration::from_secs(60), "no request reached the store in mode{mode}within 60 s:\n{}", store.log());
            std::thread::sleep(Duration::from_millis(100));
        }
        std::thread::sleep(Duration::from_millis(1500));
        store.set_mode(next);
    }
    let o = std::mem::replace(&mut jvm.child, Command::new("true").spawn().unwrap()).wait_with_output().unwrap();
    let err = text(&o.stderr);
    assert!(o.status.success(), "{err}");
    let out = text(&o.stdout);
    assert!(out.contains("CPU_NS"), "the program did not finish its work: {out}");
    eprintln!("ran {:.1} s; store log:\n{}", started.elapsed().as_secs_f64(), store.log());
    // The store saw the throttled and hung requests, then took uploads again.
    let log = store.log();
    assert!(log.contains(" 429:1 ") && log.contains(" hang "), "{log}");
    let reqs = store.requests();
    assert!(!reqs.is_empty(), "no upload got through after the store came back\n{err}");
    for (_, body) in &reqs {
        decode_otlp(body);
    }
    // Every interval is on disk, whatever the store did.
    let files = std::fs::read_dir(&s.0).unwrap().filter(|e| e.as_ref().unwrap().file_name().to_string_lossy().starts_with("f-")).count();
    let intervals = err.lines().filter(|l| l.contains("profile written to") && l.contains("/f-")).count();
    assert!(files >= 20 && files >= intervals, "{files} interval files for {intervals} intervals\n{err}");
    // One log line per kind of failure at most (rate-limited), not one per retry.
    let failure_lines = err.lines().filter(|l| l.contains("upload") && (l.contains("warning") || l.contains("error"))).count();
    assert!(failure_lines <= 6, "{failure_lines} upload failure lines:\n{err}");
    assert!(err.contains("upload summary:"), "{err}");
}

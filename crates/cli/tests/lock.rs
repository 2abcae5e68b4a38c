//! Lock profiling end to end: threads contending for a monitor and a
//! ReentrantLock, each summing its own waiting time (tests/java/LockContention.java).

mod common;

use common::*;

#[test]
fn every_contended_acquisition_at_lock_0() {
    check_lock_sites(&java(), "0", "JDK 17");
}

#[test]
fn a_threshold_keeps_the_estimate_unbiased() {
    check_lock_sites(&java(), "2ms", "JDK 17");
}

#[test]
fn bad_lock_options_are_refused_in_one_line() {
    let s = Scratch::new("lock-bad");
    let o = run_java(&s.0, "lock=abc", &[], &s.0, &["-version"]);
    assert_refused(&o, "lock=abc", "invalid agent option 'lock=abc'");
}

/// JFR output: `jdk.JavaMonitorEnter` and `jdk.ThreadPark` events the JDK's
/// `jfr` reads, converted back to a lock profile whose sites match the
/// program's truth, and pprof with Go's mutex-profile sample types.
#[test]
fn lock_waits_in_jfr_and_pprof() {
    let s = Scratch::new("lock-jfr");
    compile(&s.0, &["LockContention.java"]);
    let rec = s.path("l.jfr");
    let o = run_java(&s.0, &format!("event=lock,lock=0,file={}", rec.display()), &[], &s.0, &["LockContention", "3"]);
    let (stdout, err) = (text(&o.stdout), text(&o.stderr));
    assert!(o.status.success(), "{err}");
    let t = truth_line(&stdout);
    let summary = std::process::Command::new(tool("jfr")).arg("summary").arg(&rec).output().unwrap();
    let summary = text(&summary.stdout);
    assert!(summary.contains("jdk.JavaMonitorEnter") && summary.contains("jdk.ThreadPark"), "{summary}");
    let parks = std::process::Command::new(tool("jfr")).args(["print", "--stack-depth", "64", "--events", "jdk.ThreadPark"]).arg(&rec).output().unwrap();
    let parks = text(&parks.stdout);
    assert!(parks.contains("parkedClass = java.util.concurrent.locks.ReentrantLock$NonfairSync"), "{}", &parks[..parks.len().min(2000)]);
    assert!(parks.contains("LockContention.reentrantSite()"), "{}", &parks[..parks.len().min(2000)]);
    // Back to a lock profile: per-site waiting within 10% of the truth.
    let col = s.path("l.collapsed");
    let c = oxprof_cmd().args(["convert", rec.to_str().unwrap(), "--lock", "-o", col.to_str().unwrap()]).output().unwrap();
    assert!(c.status.success(), "{}", text(&c.stderr));
    let pb = s.path("l.pb.gz");
    let c = oxprof_cmd().args(["convert", rec.to_str().unwrap(), "--lock", "--total", "-o", pb.to_str().unwrap()]).output().unwrap();
    assert!(c.status.success(), "{}", text(&c.stderr));
    let c = oxprof_cmd().args(["convert", rec.to_str().unwrap(), "--lock", "--total", "-o", col.to_str().unwrap()]).output().unwrap();
    assert!(c.status.success(), "{}", text(&c.stderr));
    let stacks = read_collapsed(&col);
    for (site, key) in [("LockContention.monitorSite", "monitor_wait"), ("LockContention.reentrantSite", "lock_wait")] {
        let est = samples_with(&stacks, site) as f64;
        let off = 100.0 * (est - t[key]).abs() / t[key];
        eprintln!("JFR {site}: {:.0} ms vs truth {:.0} ms ({off:.1}% off)", est / 1e6, t[key] / 1e6);
        assert!(off <= 10.0, "{site}: {est} vs {}", t[key]);
    }
    // A collapsed diff of lock waits compares time waited, as the page does
    // (it compared event counts unless --total was given): the recording
    // against itself gives each stack its nanoseconds on both sides.
    let d = s.path("d.collapsed");
    let c = oxprof_cmd().args(["diff", rec.to_str().unwrap(), rec.to_str().unwrap(), "--lock", "-o", d.to_str().unwrap()]).output().unwrap();
    assert!(c.status.success(), "{}", text(&c.stderr));
    let waited: f64 = std::fs::read_to_string(&d)
        .unwrap()
        .lines()
        .filter(|l| l.contains("LockContention.monitorSite"))
        .map(|l| l.rsplit(' ').nth(1).unwrap().parse::<f64>().unwrap())
        .sum();
    let off = (waited - t["monitor_wait"]).abs() / t["monitor_wait"];
    assert!(off <= 0.10, "the lock diff's before column holds {waited} for {} ns waited", t["monitor_wait"]);
    // pprof: Go's mutex-profile names, read back as a lock profile.
    let r = oxprof_cmd().args(["report", pb.to_str().unwrap(), "--top", "3"]).output().unwrap();
    let report = text(&r.stdout);
    assert!(r.status.success() && report.contains("Top contended locks"), "{report}{}", text(&r.stderr));
    assert!(report.contains("java.util.concurrent.locks.ReentrantLock$NonfairSync"), "{report}");
}

/// Attach, profile locks, stop, and again: each stop binds `Unsafe.park`
/// back to the JVM's own function (the log says so), a restart works, and
/// the JVM prints no warning about the rebinding.
#[test]
fn attach_start_stop_undoes_the_park_hook_each_time() {
    use std::io::Read;
    let s = Scratch::new("lock-attach");
    compile(&s.0, &["LockContention.java"]);
    let mut jvm = RunningJvm::spawn(java_cmd(["-cp", s.0.to_str().unwrap(), "LockContention", "8"]), &s.0, "ready");
    let pid = jvm.pid().to_string();
    let mut stops = String::new();
    for round in ["a", "b"] {
        let o = oxprof_cmd().args(["attach", &pid, "start", "--event", "lock", "--lock", "0", "--total"]).output().unwrap();
        assert!(o.status.success(), "{}", text(&o.stderr));
        assert!(text(&o.stdout).contains("monitors and java.util.concurrent locks"), "{}", text(&o.stdout));
        std::thread::sleep(std::time::Duration::from_millis(1500));
        let out = s.path(&format!("{round}.collapsed"));
        let o = oxprof_cmd().args(["attach", &pid, "stop", "-o", out.to_str().unwrap()]).output().unwrap();
        assert!(o.status.success(), "{}", text(&o.stderr));
        stops.push_str(&text(&o.stdout));
        stops.push_str(&text(&o.stderr));
        let stacks = read_collapsed(&out);
        let parked: u64 = stacks
            .iter()
            .filter(|(st, _)| {
                st.iter().any(|f| f == "LockContention.reentrantSite") && st.last().is_some_and(|l| l == "java.util.concurrent.locks.ReentrantLock$NonfairSync")
            })
            .map(|(_, n)| n)
            .sum();
        assert!(parked > 100_000_000, "round {round}: {parked} ns of ReentrantLock waits: {stacks:?}");
    }
    let status = jvm.child.wait().unwrap();
    let mut err = String::new();
    jvm.child.stderr.take().unwrap().read_to_string(&mut err).unwrap();
    assert!(status.success(), "{err}");
    // Each stop's reply: the summary, built after the stop, finds
    // Unsafe.park bound to the JVM's own function again.
    assert_eq!(stops.matches("park_hook=unbound").count(), 2, "{stops}\n{err}");
    assert!(!err.contains("[warning]") && !stops.contains("[warning]"), "{err}");
}

/// The owner of a lock when a recorded wait for it began is the sample's
/// `lock_owner` label, for `java.util.concurrent` locks and Java monitors:
/// in collapsed stacks (a root frame), and through JFR in `report --by
/// lock_owner` and `convert --label`. Truth: each waiter notes the lock's
/// owner before every wait and sums the waits by owner
/// (tests/java/LockOwners.java; `check_lock_owners`).
#[test]
fn lock_waits_name_the_owner_of_the_lock() {
    let s = Scratch::new("lock-owner");
    compile(&s.0, &["LockOwners.java"]);
    check_lock_owners(&java(), "JDK 17", true);

    // Through JFR: the owner is a label report and convert select by.
    let rec = s.path("o.jfr");
    let o = run_java(&s.0, &format!("event=lock,lock=0,file={}", rec.display()), &[], &s.0, &["LockOwners", "2"]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let r = oxprof_cmd().args(["report", rec.to_str().unwrap(), "--lock", "--by", "lock_owner"]).output().unwrap();
    let report = text(&r.stdout);
    assert!(r.status.success(), "{report}{}", text(&r.stderr));
    assert!(["holder-A1", "holder-A2", "holder-B", "holder-M1", "holder-M2"].iter().all(|h| report.contains(h)), "{report}");
    // The JDK's own reader finds a monitor's owner as `previousOwner`.
    let p = std::process::Command::new(tool("jfr")).args(["print", "--json", "--events", "jdk.JavaMonitorEnter"]).arg(&rec).output().unwrap();
    assert!(p.status.success(), "{}", text(&p.stderr));
    let json: serde_json::Value = serde_json::from_slice(&p.stdout).unwrap();
    let events = json["recording"]["events"].as_array().cloned().unwrap_or_default();
    let thread_name = |v: &serde_json::Value| v["javaName"].as_str().or(v["osName"].as_str()).unwrap_or("").to_string();
    let waits: Vec<String> =
        events.iter().filter(|e| thread_name(&e["values"]["eventThread"]) == "waiter-M").map(|e| thread_name(&e["values"]["previousOwner"])).collect();
    let named = waits.iter().filter(|o| *o == "holder-M1" || *o == "holder-M2").count();
    assert!(
        waits.len() >= 20 && named as f64 >= 0.9 * waits.len() as f64,
        "{named} of {} monitor waits of waiter-M name a holder as previousOwner: {waits:?}",
        waits.len()
    );
    let only_b = s.path("b.collapsed");
    let c = oxprof_cmd().args(["convert", rec.to_str().unwrap(), "--lock", "--label", "lock_owner=holder-B", "-o", only_b.to_str().unwrap()]).output().unwrap();
    assert!(c.status.success(), "{}", text(&c.stderr));
    let b = read_collapsed(&only_b);
    let (on_b, total) = (samples_with(&b, "LockOwners.waitOnB"), total(&b));
    assert!(on_b > 0 && on_b as f64 >= 0.9 * total as f64, "convert --label lock_owner=holder-B: {on_b} of {total} samples wait for B\n{b:?}");
}

/// The JDK's own recording of a thread parking with no blocker (a bare
/// `LockSupport.parkNanos`) beside threads contending for a ReentrantLock:
/// its `jdk.ThreadPark` events without a `parkedClass` are no lock
/// contention. `report` and `convert --lock` show only the parks on the
/// lock, and the report counts those left out, as many as `jfr print` shows.
#[test]
fn parks_without_a_blocker_are_no_lock_contention() {
    let s = Scratch::new("lock-unblocked");
    compile(&s.0, &["IdlePark.java"]);
    let rec = jdk_flight_recording(&java(), &s, "own.jfr", &["IdlePark", "2"]);
    let parks = std::process::Command::new(tool("jfr")).args(["print", "--events", "jdk.ThreadPark"]).arg(&rec).output().unwrap();
    let parks = text(&parks.stdout);
    let unblocked = parks.lines().filter(|l| l.trim() == "parkedClass = N/A").count();
    let on_lock = parks.lines().filter(|l| l.trim().starts_with("parkedClass = java.util.concurrent.locks.ReentrantLock$NonfairSync")).count();
    assert!(unblocked >= 5 && on_lock >= 5, "{unblocked} parks without a blocker, {on_lock} on the lock");

    let r = oxprof_cmd().args(["report", rec.to_str().unwrap(), "--lock"]).output().unwrap();
    let report = text(&r.stdout);
    assert!(r.status.success(), "{}", text(&r.stderr));
    assert!(!report.contains("[unknown class]") && !report.contains("IdlePark.idle"), "{report}");
    let first = report.lines().skip_while(|l| !l.starts_with("Top contended locks")).nth(2).unwrap_or("");
    assert!(first.contains("java.util.concurrent.locks.ReentrantLock$NonfairSync  <-  "), "{report}");
    assert!(report.contains(&format!("not counted: {unblocked} jdk.ThreadPark events without a parkedClass")), "{report}");

    let col = s.path("lock.collapsed");
    let c = oxprof_cmd().args(["convert", rec.to_str().unwrap(), "--lock", "-o", col.to_str().unwrap()]).output().unwrap();
    assert!(c.status.success(), "{}", text(&c.stderr));
    let stacks = read_collapsed(&col);
    assert_eq!(samples_with(&stacks, "IdlePark.idle"), 0, "{stacks:?}");
    // Every park on the lock is there (the JDK's monitor waits too, none here).
    assert_eq!(samples_with(&stacks, "java.util.concurrent.locks.ReentrantLock$NonfairSync"), on_lock as u64);
    assert_eq!(total(&stacks), on_lock as u64, "{stacks:?}");
}

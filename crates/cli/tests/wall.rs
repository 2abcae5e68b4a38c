//! Wall-clock profiling end to end: every thread sampled whatever it does,
//! with its state, against what the Java program measures itself.

mod common;

use common::*;
use std::collections::HashMap;

#[test]
fn wall_samples_have_the_states_threads_measure() {
    check_wall_states(&java(), "JDK 17");
}

#[test]
fn cpu_and_wall_in_one_recording() {
    let s = Scratch::new("wall-cpu");
    compile(&s.0, &["WallStates.java"]);
    let out = s.path("both.collapsed");
    let o = run_java(&s.0, &format!("event=cpu,interval=5ms,wall=20ms,threads,state,total,file={}", out.display()), &[], &s.0, &["WallStates", "2"]);
    let err = text(&o.stderr);
    assert!(o.status.success(), "{err}");
    assert!(err.contains("started wall-clock profiling: interval 20ms"), "{err}");
    let wall = by_thread_and_state(&s.path("both.wall.collapsed"));
    let cpu = by_thread_and_state(&out);
    let sum = |m: &HashMap<(String, String), f64>, thread: &str, state: &str| {
        m.iter().filter(|((t, st), _)| t == thread && (state.is_empty() || st == state)).map(|(_, v)| v).sum::<f64>()
    };
    // CPU samples land where the thread burns CPU; wall samples everywhere.
    assert!(sum(&cpu, "mixed", "running") > 0.8 * sum(&cpu, "mixed", ""), "{cpu:?}");
    assert!(sum(&wall, "mixed", "sleeping") > 0.25 * sum(&wall, "mixed", ""), "{wall:?}");
    assert!(sum(&wall, "blocked", "blocked") > 0.0 && sum(&cpu, "blocked", "") < 0.05 * sum(&wall, "blocked", ""), "cpu {cpu:?}\nwall {wall:?}");
}

#[test]
fn bad_wall_options_are_refused_in_one_line() {
    let s = Scratch::new("wall-bad");
    for (opts, expected) in [
        ("wall=abc", "invalid agent option 'wall=abc'"),
        ("wall=20us", "the wall-clock interval must be at least 100us"),
        ("event=wall,interval=50us", "the wall-clock interval must be at least 100us"),
        ("event=walls", "accepted: cpu, itimer, ctimer, alloc, wall"),
    ] {
        let o = run_java(&s.0, opts, &[], &s.0, &["-version"]);
        assert_refused(&o, opts, expected);
    }
}

/// Work in the interval's rhythm (busy 2 ms of every 20 ms, four threads 5
/// ms apart, sampled every 40 ms): a sampler ticking at fixed times sees
/// each thread at the same point of its cycle, always busy or never, and
/// called them running 0–25% of the time for about 10% (at 50 ms: 13–33%).
/// The running share must be the threads' own, within 4 points.
#[test]
fn periodic_work_is_not_aliased_by_the_interval() {
    let s = Scratch::new("wall-periodic");
    compile(&s.0, &["Periodic.java"]);
    let out = s.path("p.collapsed");
    let o =
        run_java(&s.0, &format!("start,event=wall,interval=40ms,threads,state,total,file={}", out.display()), &[], &s.0, &["Periodic", "4", "2", "8000", "5"]);
    let err = text(&o.stderr);
    assert!(o.status.success(), "{err}");
    let truth = truth_line(&text(&o.stdout))["busy_share"];
    let got = by_thread_and_state(&out);
    let periodic =
        |state: Option<&str>| got.iter().filter(|((t, st), _)| t.starts_with("periodic-") && state.is_none_or(|s| s == st)).map(|(_, v)| v).sum::<f64>();
    let share = periodic(Some("running")) / periodic(None);
    eprintln!("running share {share:.4}, truth {truth:.4}");
    assert!((share - truth).abs() < 0.04, "the periodic threads ran {:.1}% of their time, the profile says {:.1}%: {got:?}", 100.0 * truth, 100.0 * share);
}

/// Threads started between two readings of the thread list are sampled
/// from their first tick: with 600 idle threads the sampler reads
/// `/proc/self/task` only every second or so (listing costs the kernel
/// about 2 µs a thread), and Java threads started meanwhile join from the
/// thread registry. 30 short-lived threads, each sleeping 200 ms and timing
/// its own life: their wall samples sum to that time. Reading the list
/// every 100 ms, as the sampler did before, found each up to 100 ms late
/// and lost that time; not joining from the registry would lose most of
/// them.
#[test]
fn threads_started_between_two_listings_are_sampled_whole() {
    let s = Scratch::new("wall-churn");
    compile(&s.0, &["WallChurn.java"]);
    let out = s.path("churn.collapsed");
    let o =
        run_java(&s.0, &format!("start,event=wall,interval=20ms,threads,state,total,file={}", out.display()), &[], &s.0, &["WallChurn", "600", "30", "200"]);
    let err = text(&o.stderr);
    assert!(o.status.success(), "{err}");
    let truth = truth_line(&text(&o.stdout))["churn"];
    let got = by_thread_and_state(&out);
    let churn: f64 = got.iter().filter(|((t, _), _)| t == "churner").map(|(_, v)| v).sum();
    let ratio = churn / truth;
    eprintln!("churners sampled {:.0} ms of {:.0} ms lived: {ratio:.3}", churn / 1e6, truth / 1e6);
    assert!((0.9..=1.05).contains(&ratio), "the churners' samples sum to {ratio:.3} of their lives\n{err}");
}

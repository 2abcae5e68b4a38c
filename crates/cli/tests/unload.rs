//! Classes unloading while being sampled at 1 ms must neither crash the JVM
//! nor lose the names of their methods.

mod common;

use common::*;

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
    let o = run_java(
        &s.0,
        &format!("start,event=cpu,interval=1ms,loglevel=debug,file={}", out.display()),
        &[&format!("-Xlog:class+unload=info:file={}", unload_log.display())],
        &app,
        &["Unload", workers.to_str().unwrap(), "20"],
    );
    let err = text(&o.stderr);
    assert!(o.status.success(), "the JVM failed: {:?}\n{err}", o.status);
    let loaders: u64 = text(&o.stdout).trim().strip_prefix("loaders=").expect("loaders line").parse().unwrap();
    let unloaded = std::fs::read_to_string(&unload_log).unwrap().lines().filter(|l| l.contains("Worker")).count();
    assert!(loaders > 200, "only {loaders} loaders were created");
    assert!(unloaded > 100, "only {unloaded} Worker classes unloaded; the test did not exercise unloading");
    let stacks = read_collapsed(&out);
    let named = samples_with(&stacks, "Worker.spin");
    assert!(named > 1000, "Worker.spin has only {named} samples of {}", total(&stacks));
    let unknown: u64 = stacks.iter().filter(|(st, _)| st.iter().any(|f| f.contains("[unknown"))).map(|(_, n)| n).sum();
    assert!(unknown * 50 < total(&stacks), "{unknown} samples with unknown frames");
    // Names of unloaded classes that were never sampled are forgotten, so
    // memory stays bounded however many classes come and go.
    let forgot: usize = err.lines().filter_map(|l| l.split("forgot ").nth(1)?.split(' ').next()?.parse::<usize>().ok()).sum();
    assert!(forgot > 1000, "early method names were never pruned:\n{err}");
    eprintln!("{loaders} loaders, {unloaded} unloads, {forgot} names pruned, Worker.spin in {named} of {} samples", total(&stacks));
}

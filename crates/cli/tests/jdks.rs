//! The agent on the other supported HotSpot versions (11, 21, 25), from the
//! runtimes `scripts/test.sh` installs and lists in OXPROF_EXTRA_JDKS.

mod common;

use common::*;
use std::path::Path;
use std::process::Command;

fn java_in(home: &Path) -> Command {
    Command::new(home.join("bin/java"))
}

#[test]
#[ignore = "needs OXPROF_EXTRA_JDKS; run by scripts/test.sh"]
fn cpu_profiling_works_on_every_supported_jdk() {
    let s = Scratch::new("jdks");
    compile(&s.0, &["Hot.java", "Inline.java"]);
    for home in extra_jdks() {
        let version = text(&java_in(&home).arg("-version").output().unwrap().stderr);
        let out = s.path("hot.collapsed");
        let o = java_in(&home)
            .arg(format!("-agentpath:{}=start,interval=1ms,file={}", agent().display(), out.display()))
            .args(["-cp", s.0.to_str().unwrap(), "Hot", "1.5"])
            .output()
            .unwrap();
        let err = text(&o.stderr);
        assert!(o.status.success(), "{version}: {err}");
        let stacks = read_collapsed(&out);
        let hot = samples_with(&stacks, "Hot.sqrtSin") + samples_with(&stacks, "Hot.logs");
        assert!(hot * 10 > total(&stacks) * 8, "{version}: hot methods have {hot} of {} samples", total(&stacks));
        let failed: f64 = summary(&err)["failed_pct"].parse().unwrap();
        assert!(failed < 5.0, "{version}: {failed}% failed walks");

        // DebugNonSafepoints is switched on on this JDK too: inlined frames are named.
        let o = java_in(&home)
            .arg(format!("-agentpath:{}=start,interval=1ms,file={}", agent().display(), out.display()))
            .args(["-cp", s.0.to_str().unwrap(), "Inline", "1"])
            .output()
            .unwrap();
        assert!(o.status.success(), "{version}: {}", text(&o.stderr));
        let stacks = read_collapsed(&out);
        let (inner, outer) = (samples_with(&stacks, "Inline.inner"), samples_with(&stacks, "Inline.outer"));
        // 10%: see inlined_methods_get_their_own_samples in tests/cpu.rs.
        assert!(inner * 10 > outer, "{version}: inlined Inline.inner has {inner} of {outer} samples");

        let o = java_in(&home).arg(format!("-agentpath:{}=start,bogus", agent().display())).arg("-version").output().unwrap();
        assert!(!o.status.success(), "{version}: started with a bad option");
        assert!(text(&o.stderr).contains("oxprof: invalid agent option 'bogus'"), "{version}: {}", text(&o.stderr));
        eprintln!("ok: {}", version.lines().next().unwrap_or(""));
    }
}

#[test]
#[ignore = "needs OXPROF_EXTRA_JDKS; run by scripts/test.sh"]
fn class_unloading_is_safe_on_every_supported_jdk() {
    let s = Scratch::new("jdks-unload");
    let (app, workers) = (s.path("app"), s.path("workers"));
    std::fs::create_dir_all(&app).unwrap();
    std::fs::create_dir_all(&workers).unwrap();
    compile(&app, &["Unload.java"]);
    compile(&workers, &["Worker.java"]);
    for home in extra_jdks() {
        let out = s.path("u.collapsed");
        let o = java_in(&home)
            .arg(format!("-agentpath:{}=start,interval=1ms,file={}", agent().display(), out.display()))
            // Until main has had 3 s of CPU, most of it in Worker.spin.
            .args(["-cp", app.to_str().unwrap(), "Unload", workers.to_str().unwrap(), "3"])
            .output()
            .unwrap();
        assert!(o.status.success(), "{}: {}", home.display(), text(&o.stderr));
        assert!(samples_with(&read_collapsed(&out), "Worker.spin") > 500, "{}", home.display());
    }
}

#[test]
#[ignore = "needs OXPROF_EXTRA_JDKS; run by scripts/test.sh"]
fn allocation_profiling_works_on_every_supported_jdk() {
    let s = Scratch::new("jdks-alloc");
    compile(&s.0, &["AllocSites.java", "AllocFilter.java"]);
    for home in extra_jdks() {
        let out = s.path("a.collapsed");
        let o = java_in(&home)
            .arg(format!("-agentpath:{}=event=alloc,total,file={}", agent().display(), out.display()))
            .args(["-cp", s.0.to_str().unwrap(), "AllocSites", "512"])
            .output()
            .unwrap();
        assert!(o.status.success(), "{}: {}", home.display(), text(&o.stderr));
        let stdout = text(&o.stdout);
        let truth = stdout.lines().find(|l| l.starts_with("TRUTH")).expect("truth line");
        let large: f64 = truth.split_whitespace().find_map(|kv| kv.strip_prefix("large=")).unwrap().parse().unwrap();
        let est = samples_with(&read_collapsed(&out), "AllocSites.largeSite") as f64;
        // JDK 11's own heap sampler over-samples objects allocated outside a
        // TLAB (measured +16..19% for 256-KiB arrays; JDK 17 and later are
        // unbiased), so it gets a wider bound. See the README's limitations.
        let version = text(&java_in(&home).arg("-version").output().unwrap().stderr);
        let bound = if version.contains("\"11.") { 0.30 } else { 0.10 };
        let error = (est - large).abs() / large;
        eprintln!("{}: large site estimated {est:.0}, truth {large:.0}, error {:.1}%", home.display(), 100.0 * error);
        assert!(error < bound, "{}: large site estimated {est}, truth {large}", home.display());

        let o = java_in(&home)
            .arg(format!("-agentpath:{}=event=alloc,alloc=0,alloc_threads=main,file={}", agent().display(), out.display()))
            .args(["-cp", s.0.to_str().unwrap(), "AllocFilter", "5000"])
            .output()
            .unwrap();
        assert!(o.status.success(), "{}: {}", home.display(), text(&o.stderr));
        assert_eq!(samples_with(&read_collapsed(&out), "AllocFilter$CountedThing"), 5000, "{}", home.display());

        let o = java_in(&home)
            .arg(format!("-agentpath:{}=event=alloc,alloc=16k,alloc_threads=worker-*,file={}", agent().display(), out.display()))
            .args(["-cp", s.0.to_str().unwrap(), "AllocFilter", "10"])
            .output()
            .unwrap();
        assert!(o.status.success(), "{}: {}", home.display(), text(&o.stderr));
        let stacks = read_collapsed(&out);
        assert!(samples_with(&stacks, "AllocFilter$WorkerThing") > 100, "{}: worker-1 not sampled", home.display());
        assert_eq!(samples_with(&stacks, "AllocFilter$OtherThing"), 0, "{}: other-1 sampled", home.display());
    }
}

#[test]
#[ignore = "needs OXPROF_EXTRA_JDKS; run by scripts/test.sh"]
fn own_allocation_stacks_equal_get_stack_trace_on_every_supported_jdk() {
    let s = Scratch::new("jdks-alloc-paths");
    compile(&s.0, &["AllocPaths.java"]);
    for home in extra_jdks() {
        let (counts, stacks) = alloc_walk_check(&home.join("bin/java"), &s.0, &s.path("paths.collapsed"));
        assert!(samples_with(&stacks, "AllocPaths.recurse") > 0, "{}", home.display());
        // Every JDK, 25 too (its debug information on the C heap).
        let own = counts["own_walks"] as f64 / counts["samples"] as f64;
        assert!(own > 0.95, "{}: own walks {own:.3}: {counts:?}", home.display());
    }
}

#[test]
#[ignore = "needs OXPROF_EXTRA_JDKS; run by scripts/test.sh"]
fn attach_works_on_every_supported_jdk() {
    let s = Scratch::new("jdks-attach");
    compile(&s.0, &["Spin.java"]);
    for home in extra_jdks() {
        let mut cmd = java_in(&home);
        cmd.args(["-XX:+EnableDynamicAgentLoading", "-cp", s.0.to_str().unwrap(), "Spin", "forever"]);
        let mut jvm = RunningJvm::spawn(cmd, &s.0, "ready");
        let pid = jvm.pid().to_string();
        let out = s.path("a.collapsed");
        let run = |args: &[&str]| oxprof_cmd().arg("attach").arg(&pid).args(args).output().unwrap();
        let o = run(&["start", "--interval", "2ms"]);
        let ok = o.status.success();
        if ok {
            // 700 ms of the JVM's CPU time: about 350 samples at 2 ms.
            wait_for_cpu(jvm.pid(), process_cpu_ms(jvm.pid()), 700, &format!("{}: attach start", home.display()));
        }
        let o2 = if ok { run(&["stop", "-o", out.to_str().unwrap()]) } else { o.clone() };
        let alive = jvm.alive();
        drop(jvm);
        assert!(ok && o2.status.success(), "{}: {} {}", home.display(), text(&o.stderr), text(&o2.stderr));
        assert!(alive, "{}: the JVM died", home.display());
        assert!(samples_with(&read_collapsed(&out), "Spin.loop") > 20, "{}", home.display());
    }
}

/// Mixed-mode stacks: native zlib frames under `Deflater.deflateBytes*` and
/// kernel frames, on every JDK (their zlib is bundled or the system's).
#[test]
#[ignore = "needs OXPROF_EXTRA_JDKS; run by scripts/test.sh"]
fn native_frames_under_deflater_on_every_supported_jdk() {
    let s = Scratch::new("jdks-mixed");
    compile(&s.0, &["Deflate.java"]);
    for home in extra_jdks() {
        let version = text(&java_in(&home).arg("-version").output().unwrap().stderr);
        let out = s.path("deflate.collapsed");
        let o = java_in(&home)
            .arg(format!("-agentpath:{}=start,interval=1ms,file={}", agent().display(), out.display()))
            .args(["-cp", s.0.to_str().unwrap(), "Deflate", "15"])
            .arg(s.path("deflate.out"))
            .output()
            .unwrap();
        assert!(o.status.success(), "{version}: {}", text(&o.stderr));
        let stacks = read_collapsed(&out);
        let (mut all, mut native) = (0, 0);
        for (st, n) in &stacks {
            if let Some(i) = st.iter().position(|f| f.starts_with("java.util.zip.Deflater.deflateBytes")) {
                all += n;
                if st[i + 1..].iter().any(|f| f.contains("libz") || f.contains("deflate") || f.contains("longest_match") || f.contains("libzip")) {
                    native += n;
                }
            }
        }
        assert!(all >= 100, "{version}: only {all} samples in Deflater.deflateBytes");
        assert!(native * 10 >= all * 8, "{version}: {native} of {all} deflateBytes samples have zlib frames beneath");
        assert!(stacks.iter().any(|(st, _)| st.iter().any(|f| f.ends_with("_[k]"))), "{version}: no kernel frames");

        // cstack=dwarf reaches the JNI function beneath zlib on every JDK.
        let o = java_in(&home)
            .arg(format!("-agentpath:{}=start,interval=1ms,cstack=dwarf,file={}", agent().display(), out.display()))
            .args(["-cp", s.0.to_str().unwrap(), "Deflate", "15"])
            .arg(s.path("deflate.out"))
            .output()
            .unwrap();
        assert!(o.status.success(), "{version} cstack=dwarf: {}", text(&o.stderr));
        let stacks = read_collapsed(&out);
        let (mut dall, mut jni) = (0, 0);
        for (st, n) in &stacks {
            if let Some(i) = st.iter().position(|f| f.starts_with("java.util.zip.Deflater.deflateBytes")) {
                dall += n;
                if st.get(i + 1).is_some_and(|f| f.starts_with("Java_java_util_zip_Deflater_deflateBytes")) && st.len() > i + 2 {
                    jni += n;
                }
            }
        }
        assert!(dall >= 100 && jni * 10 >= dall * 8, "{version} cstack=dwarf: {jni} of {dall} deflateBytes samples reach the JNI function");
        eprintln!("ok: {} ({native} of {all}; dwarf {jni} of {dall})", version.lines().next().unwrap_or(""));
    }
}

#[test]
#[ignore = "needs OXPROF_EXTRA_JDKS; run by scripts/test.sh"]
fn live_leak_report_on_every_supported_jdk() {
    let s = Scratch::new("jdks-live");
    compile(&s.0, &["LeakChurn.java"]);
    for home in extra_jdks() {
        let version = text(&java_in(&home).arg("-version").output().unwrap().stderr);
        let out = s.path("leaks.txt");
        let collapsed = s.path("live.collapsed");
        for (file, extra) in [(&out, ",gcroots"), (&collapsed, ",total")] {
            let o = java_in(&home)
                .arg(format!("-agentpath:{}=event=alloc,alloc=64k,live{extra},file={}", agent().display(), file.display()))
                .args(["-Xmx256m", "-cp", s.0.to_str().unwrap(), "LeakChurn", "48"])
                .output()
                .unwrap();
            assert!(o.status.success(), "{version}: {}", text(&o.stderr));
        }
        let report = std::fs::read_to_string(&out).unwrap();
        let first = report.lines().find(|l| l.starts_with("#1 ")).unwrap_or_else(|| panic!("{version}: no sites\n{report}"));
        assert!(first.starts_with("#1 byte[]"), "{version}: {report}");
        assert!(report.contains("static field LeakChurn.RETAINED"), "{version}: {report}");
        let stacks = read_collapsed(&collapsed);
        let leak: u64 = stacks.iter().filter(|(st, _)| st.ends_with(&["LeakChurn.leakSite".to_string(), "byte[]".to_string()])).map(|(_, n)| n).sum();
        let share = leak as f64 / total(&stacks) as f64;
        assert!(share >= 0.90, "{version}: the leak site holds {:.1}% of live bytes", 100.0 * share);
        eprintln!("ok: {} leak share {:.1}%", version.lines().next().unwrap_or(""), 100.0 * share);
    }
}

/// Allocation accuracy on 11, 21 and 25 with small TLABs: 25's sampler
/// counts exactly (per-site shares right, level `exact`); 11 and 21 are
/// biased and say so; on every JDK the byte count measured from the
/// threads' counters matches the program's truth.
#[test]
#[ignore = "needs OXPROF_EXTRA_JDKS; run by scripts/test.sh"]
fn allocation_accuracy_on_every_supported_jdk() {
    let s = Scratch::new("jdks-bias");
    compile(&s.0, &["AllocBias.java"]);
    for home in extra_jdks() {
        let version = text(&java_in(&home).arg("-version").output().unwrap().stderr);
        let feature: u32 = version.split('"').nth(1).and_then(|v| v.split('.').next()).and_then(|v| v.parse().ok()).expect("version");
        let run = AllocBiasRun::run(&home.join("bin/java"), &s.0, &["-XX:TLABSize=16k", "-XX:-ResizeTLAB"], 200, 200 * 1000);
        let (tiny, large, total, clock) = (run.share_ratio("tiny"), run.share_ratio("large"), run.total_ratio(), run.sampler_vs_exact());
        eprintln!(
            "JDK {feature}: tiny {tiny:.2}, large {large:.2}, estimate/truth {total:.3}, sampler_vs_exact {clock:.3}, accuracy {}",
            run.summary["accuracy"]
        );
        assert!((clock - total).abs() < 0.03, "JDK {feature}: sampler_vs_exact {clock:.3}, estimate/truth {total:.3}");
        if feature >= 25 {
            assert_eq!(run.summary["accuracy"], "exact", "{}", run.stderr);
            assert!((tiny - 1.0).abs() < 0.06 && (large - 1.0).abs() < 0.02, "JDK {feature}: tiny {tiny:.3} large {large:.3}");
            assert!(!run.marked("tiny"), "{}", run.report);
        } else {
            assert!(tiny > 1.5, "JDK {feature}: expected the known bias, got tiny {tiny:.2}");
            assert!(["fair", "poor"].contains(&run.summary["accuracy"].as_str()), "{}", run.stderr);
            assert!(run.marked("tiny"), "JDK {feature}: the over-estimated site is not marked:\n{}", run.report);
        }
    }
}

/// Wall-clock states and totals on 11, 21 and 25 (see `tests/wall.rs`).
#[test]
#[ignore = "needs OXPROF_EXTRA_JDKS; run by scripts/test.sh"]
fn wall_clock_on_every_supported_jdk() {
    for home in extra_jdks() {
        let version = text(&java_in(&home).arg("-version").output().unwrap().stderr);
        check_wall_states(&home.join("bin/java"), version.lines().next().unwrap_or("?"));
    }
}

/// Lock profiling on 11, 21 and 25 (see `tests/lock.rs`), with the owners
/// of locks and monitors (read from a `JavaThread*` up to JDK 21, from a
/// `java.lang.Thread` id on 25).
#[test]
#[ignore = "needs OXPROF_EXTRA_JDKS; run by scripts/test.sh"]
fn lock_profiling_on_every_supported_jdk() {
    for home in extra_jdks() {
        let version = text(&java_in(&home).arg("-version").output().unwrap().stderr);
        let label = version.lines().next().unwrap_or("?");
        check_lock_sites(&home.join("bin/java"), "0", label);
        check_lock_owners(&home.join("bin/java"), label, false);
    }
}

/// Time-to-safepoint profiling on 11, 21 and 25 (see `tests/ttsp.rs`):
/// `record_safepoint_synchronized` takes no argument on 11 and a `long`
/// later; both are found by name, and the JVM's own log (which reads
/// "Stopping threads took" on 11) is the truth.
#[test]
#[ignore = "needs OXPROF_EXTRA_JDKS; run by scripts/test.sh"]
fn ttsp_on_every_supported_jdk() {
    for home in extra_jdks() {
        let version = text(&java_in(&home).arg("-version").output().unwrap().stderr);
        check_ttsp(&home.join("bin/java"), version.lines().next().unwrap_or("?"));
    }
}

#[test]
#[ignore = "needs OXPROF_EXTRA_JDKS; run by scripts/test.sh"]
fn java_api_works_on_every_supported_jdk() {
    for home in extra_jdks() {
        let java = home.join("bin/java");
        let version = text(&java_in(&home).arg("-version").output().unwrap().stderr);
        let label = version.lines().next().unwrap_or("").to_string();
        common::api::jar_alone_scenario(&java, &label);
        common::api::agentpath_status_scenario(&java, &label);
        common::api::check_nested_labels(&java, &label);
        eprintln!("ok: {label}");
    }
}

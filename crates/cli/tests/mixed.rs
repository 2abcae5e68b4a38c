//! Mixed-mode stacks: native (C/C++) and kernel frames under the Java frames
//! that called them, for real programs under the real agent.

mod common;

use common::*;

type Stacks = Vec<(Vec<String>, u64)>;

/// Index of the `Deflater.deflateBytes*` frame (the JNI method; its name
/// differs between JDKs: `deflateBytes`, `deflateBytesBytes`, ...).
fn deflate_frame(stack: &[String]) -> Option<usize> {
    stack.iter().position(|f| f.starts_with("java.util.zip.Deflater.deflateBytes"))
}

/// (samples in deflateBytes, of them with frames beneath, of them with a
/// zlib frame beneath).
fn deflate_shares(stacks: &Stacks) -> (u64, u64, u64) {
    let zlib = |f: &String| f.contains("libz") || f.contains("deflate") || f.contains("longest_match") || f.contains("libzip");
    let (mut all, mut native, mut named) = (0, 0, 0);
    for (st, n) in stacks {
        let Some(i) = deflate_frame(st) else { continue };
        all += n;
        if i + 1 < st.len() {
            native += n;
            if st[i + 1..].iter().any(zlib) {
                named += n;
            }
        }
    }
    (all, native, named)
}

fn run_deflate(s: &Scratch, opts: &str, env: &[(&str, &str)]) -> (Stacks, std::collections::HashMap<String, String>) {
    let out = s.path("deflate.collapsed");
    let mut cmd = std::process::Command::new(java());
    cmd.current_dir(&s.0).envs(env.iter().copied());
    cmd.arg(format!("-agentpath:{}=start,interval=1ms,file={},{opts}", agent().display(), out.display()));
    cmd.arg("-cp").arg(&s.0).args(["Deflate", "20"]).arg(s.path("deflate.out"));
    let o = cmd.output().expect("run java");
    let err = text(&o.stderr);
    assert!(o.status.success(), "java failed: {err}");
    (read_collapsed(&out), summary(&err))
}

#[test]
fn deflater_samples_carry_zlib_frames_and_file_writes_kernel_frames() {
    let s = Scratch::new("mixed-deflate");
    compile(&s.0, &["Deflate.java"]);
    let (stacks, sum) = run_deflate(&s, "", &[]);
    assert_eq!(sum["engine"], "perf_events", "this test needs perf_events: {sum:?}");
    let (all, native, named) = deflate_shares(&stacks);
    assert!(all >= 200, "only {all} samples in Deflater.deflateBytes");
    assert!(native * 10 >= all * 8, "{native} of {all} deflateBytes samples have native frames beneath");
    assert!(named * 10 >= all * 8, "{named} of {all} deflateBytes samples name zlib beneath");
    // Kernel frames (marked _[k]) under the file writes and fsync.
    let io: Vec<_> =
        stacks.iter().filter(|(st, _)| st.iter().any(|f| f == "java.io.RandomAccessFile.writeBytes" || f == "java.io.FileDescriptor.sync")).collect();
    let in_kernel: u64 = io.iter().filter(|(st, _)| st.last().is_some_and(|f| f.ends_with("_[k]"))).map(|(_, n)| n).sum();
    assert!(in_kernel >= 3, "only {in_kernel} write/fsync samples end in kernel frames: {io:?}");
    let syscall = io.iter().flat_map(|(st, _)| st.iter()).any(|f| f.ends_with("_[k]") && (f.contains("write") || f.contains("sync")));
    assert!(syscall, "no kernel write/fsync function named: {io:?}");
    // Kernel frames are leafward of the user frames, never above them.
    for (st, _) in &stacks {
        if let Some(k) = st.iter().position(|f| f.ends_with("_[k]")) {
            assert!(st[k..].iter().all(|f| f.ends_with("_[k]")), "user frame under a kernel frame: {st:?}");
        }
    }
    let native_samples: u64 = sum["native_samples"].parse().unwrap();
    assert!(native_samples >= native, "summary counts {native_samples} native samples, the profile {native}");
}

#[test]
fn gc_worker_threads_show_jvm_frames() {
    let s = Scratch::new("mixed-gc");
    compile(&s.0, &["GcChurn.java"]);
    let out = s.path("gc.collapsed");
    let o = run_java(
        &s.0,
        &format!("start,interval=1ms,file={}", out.display()),
        &["-Xms256m", "-Xmx256m", "-XX:+UseParallelGC", "-XX:ParallelGCThreads=2"],
        &s.0,
        &["GcChurn", "100"],
    );
    assert!(o.status.success(), "java failed: {}", text(&o.stderr));
    let stacks = read_collapsed(&out);
    let gc: Vec<_> = stacks.iter().filter(|(st, _)| st[0] == "[GC Thread]").collect();
    let all: u64 = gc.iter().map(|(_, n)| n).sum();
    assert!(all >= 20, "only {all} GC thread samples");
    // libjvm's C++ functions, demangled (`Class::method`).
    let cpp: u64 = gc.iter().filter(|(st, _)| st[1..].iter().any(|f| f.contains("::"))).map(|(_, n)| n).sum();
    assert!(cpp * 10 >= all * 8, "{cpp} of {all} GC thread samples have libjvm C++ frames: {gc:?}");
}

/// Share of deflateBytes samples whose native part reaches the JNI function
/// (`Java_java_util_zip_Deflater_deflateBytes*`) with zlib frames beneath it.
fn jni_reached(stacks: &Stacks) -> (u64, u64) {
    let (mut all, mut reached) = (0, 0);
    for (st, n) in stacks {
        let Some(i) = deflate_frame(st) else { continue };
        all += n;
        if st.get(i + 1).is_some_and(|f| f.starts_with("Java_java_util_zip_Deflater_deflateBytes")) && st.len() > i + 2 {
            reached += n;
        }
    }
    (all, reached)
}

/// DWARF unwinding finds the callers inside libraries built without frame
/// pointers (Debian's libz): the walk from the zlib leaf reaches the JNI
/// function, and kernel frames still come first.
#[test]
fn cstack_dwarf_unwinds_through_zlib_to_the_jni_function() {
    let s = Scratch::new("mixed-dwarf");
    compile(&s.0, &["Deflate.java"]);
    let (stacks, sum) = run_deflate(&s, "cstack=dwarf", &[]);
    let (all, reached) = jni_reached(&stacks);
    assert!(all >= 200, "only {all} samples in Deflater.deflateBytes");
    assert!(reached * 10 >= all * 8, "{reached} of {all} deflateBytes samples reach the JNI function with DWARF");
    assert!(stacks.iter().any(|(st, _)| st.iter().any(|f| f.ends_with("_[k]"))), "no kernel frames");
    assert_eq!(sum["engine"], "perf_events");
    // JVM threads are unwound down to their thread entry (clone), past
    // libc functions without frame pointers.
    let gc_like: Vec<_> = stacks.iter().filter(|(st, _)| st[0].starts_with("[C2 CompilerThread") || st[0].starts_with("[C1 CompilerThread")).collect();
    assert!(!gc_like.is_empty(), "no JIT compiler samples");
    let entry: u64 = gc_like.iter().filter(|(st, _)| st.iter().any(|f| f == "thread_native_entry")).map(|(_, n)| n).sum();
    let n: u64 = gc_like.iter().map(|(_, n)| n).sum();
    assert!(entry * 10 >= n * 8, "{entry} of {n} compiler thread samples reach thread_native_entry");
}

#[test]
fn ctimer_fallback_still_gives_native_frames() {
    let s = Scratch::new("mixed-ctimer");
    compile(&s.0, &["Deflate.java"]);
    let (stacks, sum) = run_deflate(&s, "", &[("OXPROF_DISABLE_PERF_EVENTS", "1")]);
    assert_eq!(sum["engine"], "ctimer");
    let (all, native, _) = deflate_shares(&stacks);
    assert!(all >= 200, "only {all} samples in Deflater.deflateBytes");
    assert!(native * 10 >= all * 8, "{native} of {all} deflateBytes samples have native frames beneath");
    assert!(stacks.iter().all(|(st, _)| !st.iter().any(|f| f.ends_with("_[k]"))), "kernel frames without perf_events");
}

#[test]
fn cstack_no_gives_java_frames_only() {
    let s = Scratch::new("mixed-no");
    compile(&s.0, &["Deflate.java"]);
    let out = s.path("no.collapsed");
    let o = oxprof_cmd()
        .current_dir(&s.0)
        .args(["record", "--cstack", "no", "--interval", "1ms", "-o"])
        .arg(&out)
        .arg("--")
        .arg(java())
        .arg("-cp")
        .arg(&s.0)
        .args(["Deflate", "15"])
        .arg(s.path("deflate.out"))
        .output()
        .unwrap();
    let err = text(&o.stderr);
    assert!(o.status.success(), "record failed: {err}");
    let stacks = read_collapsed(&out);
    let (all, native, _) = deflate_shares(&stacks);
    assert!(all >= 100, "only {all} samples in Deflater.deflateBytes");
    let beneath: Vec<String> =
        stacks.iter().filter(|(st, _)| deflate_frame(st).is_some_and(|i| i + 1 < st.len())).map(|(st, n)| format!("{n} {}", st.join(";"))).collect();
    assert_eq!(native, 0, "frames beneath deflateBytes with cstack=no:\n{}", beneath.join("\n"));
    assert_eq!(summary(&err)["native_samples"], "0");
    // JVM threads are back to one marker frame each.
    for (st, _) in stacks.iter().filter(|(st, _)| st[0].starts_with("[C2 CompilerThread") || st[0].starts_with("[GC Thread")) {
        assert_eq!(st.len(), 1, "{st:?}");
    }
}

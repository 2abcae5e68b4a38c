//! Native code under the CPU profiler, checked against what the program
//! measures itself: `tests/java/NativeSweep.java` calls JNI functions of
//! `tests/c/native_sweep.c` (built here with gcc) that burn a known amount of
//! their thread's CPU time (CLOCK_THREAD_CPUTIME_ID) in leaf functions of
//! their own, and libraries of `tests/c/native_sweep_lib.c` opened (and
//! closed) with dlopen mid-run.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use common::*;

/// The JDK's `include` directory (for `jni.h`), beside the `javac` in use.
fn jdk_include() -> PathBuf {
    let javac = std::fs::canonicalize(tool("javac")).expect("javac");
    javac.parent().and_then(Path::parent).expect("JDK home").join("include")
}

fn gcc(args: &[&str]) {
    let o = Command::new("gcc").args(args).output().expect("run gcc (the native tests need a C compiler)");
    assert!(o.status.success(), "gcc {args:?}: {}", text(&o.stderr));
}

/// Compiles NativeSweep.java and its JNI library into `dir`, and the
/// dlopen'ed library as `lib<prefix>.so` for each (prefix, gcc flags).
fn build(dir: &Path, libs: &[(&str, &[&str])]) {
    compile(dir, &["NativeSweep.java"]);
    let c = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/c");
    let inc = jdk_include();
    let (inc, inc_linux) = (format!("-I{}", inc.display()), format!("-I{}", inc.join("linux").display()));
    let out = dir.join("libnative_sweep.so");
    let src = c.join("native_sweep.c");
    gcc(&["-O2", "-fno-omit-frame-pointer", "-g", "-shared", "-fPIC", &inc, &inc_linux, "-o", out.to_str().unwrap(), src.to_str().unwrap(), "-lpthread"]);
    let lib_src = c.join("native_sweep_lib.c");
    for (prefix, flags) in libs {
        let out = dir.join(format!("lib{prefix}.so"));
        let define = format!("-DPFX={prefix}");
        let mut args = vec!["-O2", "-shared", "-fPIC", define.as_str(), "-o", out.to_str().unwrap(), lib_src.to_str().unwrap()];
        args.extend_from_slice(flags);
        gcc(&args);
    }
}

/// Runs NativeSweep from `dir` with the agent's options `opts`, each phase
/// burning `ms` of CPU; `wrap` is a command (and its arguments) to run `java`
/// under.
fn run(dir: &Path, wrap: &[&str], opts: &str, ms: u32, phases: &[&str]) -> Output {
    let mut cmd = match wrap.split_first() {
        Some((first, rest)) => {
            let mut c = Command::new(first);
            c.args(rest).arg(java());
            c
        }
        None => Command::new(java()),
    };
    cmd.current_dir(dir).arg(format!("-agentpath:{}={opts}", agent().display())).arg("-cp").arg(dir).arg("NativeSweep").arg(dir).arg(ms.to_string());
    cmd.args(phases);
    cmd.output().expect("run java")
}

/// Samples whose stack holds `frames` one after the other (root first).
fn with_chain(stacks: &Collapsed, frames: &[&str]) -> u64 {
    stacks.iter().filter(|(s, _)| s.windows(frames.len()).any(|w| w.iter().zip(frames).all(|(a, b)| a == b))).map(|(_, n)| n).sum()
}

/// Samples with a frame satisfying `pred`.
fn samples_where(stacks: &Collapsed, pred: impl Fn(&str) -> bool) -> u64 {
    stacks.iter().filter(|(s, _)| s.iter().any(|f| pred(f))).map(|(_, n)| n).sum()
}

/// Every frame of a recursive JNI function is named by its symbol (GCC's
/// local alias `ns_rec.localalias`, listed first in the symbol table, named
/// them all), and the recursion shows at its depth.
#[test]
fn recursive_native_frames_are_named_by_their_function() {
    let s = Scratch::new("native-rec");
    build(&s.0, &[]);
    let out = s.path("deep.collapsed");
    let o = run(&s.0, &[], &format!("start,event=cpu,interval=10ms,file={}", out.display()), 400, &["deep"]);
    let err = text(&o.stderr);
    assert!(o.status.success(), "{err}");
    let stacks = read_collapsed(&out);
    let leaf = samples_with(&stacks, "ns_deep_leaf");
    assert!(leaf >= 10, "{leaf} samples in ns_deep_leaf: {err}");
    let aliased = samples_where(&stacks, |f| f.contains(".localalias"));
    assert_eq!(aliased, 0, "frames named by a compiler alias: {:?}", stacks.iter().find(|(s, _)| s.iter().any(|f| f.contains(".localalias"))));
    // ns_rec(40) .. ns_rec(2) (the last call and the JNI entry may be tail calls).
    for (st, n) in stacks.iter().filter(|(s, _)| s.last().is_some_and(|f| f == "ns_deep_leaf")) {
        let recs = st.iter().filter(|f| *f == "ns_rec").count();
        assert!((38..=41).contains(&recs), "{recs} ns_rec frames ({n} samples): {st:?}");
    }
}

/// A library loaded mid-run is unwound with its DWARF tables from its first
/// samples: the watcher checked for new libraries every 500 ms, and until
/// then a library built without frame pointers lost its callers (half of a
/// 1 s phase's samples showed `NativeSweep.dl;nofpg_leaf`, a fifth of these
/// 400 ms phases').
#[test]
fn dwarf_unwinds_libraries_loaded_mid_run_at_once() {
    let s = Scratch::new("native-dwarf-load");
    let nofp: &[&str] = &["-fomit-frame-pointer", "-g"];
    build(&s.0, &[("nofpg", nofp)]);
    // Four copies: four loads, each at its own moment.
    let phases: Vec<String> = (0..4)
        .map(|i| {
            let name = format!("libnofpg{i}.so");
            std::fs::copy(s.path("libnofpg.so"), s.path(&name)).unwrap();
            format!("dl:{name}:nofpg")
        })
        .collect();
    let phases: Vec<&str> = phases.iter().map(String::as_str).collect();
    let out = s.path("dwarf.collapsed");
    let o = run(&s.0, &[], &format!("start,event=cpu,interval=10ms,cstack=dwarf,file={}", out.display()), 400, &phases);
    let err = text(&o.stderr);
    assert!(o.status.success(), "{err}");
    let stacks = read_collapsed(&out);
    let leaf = samples_with(&stacks, "nofpg_leaf");
    let whole = with_chain(&stacks, &["NativeSweep.dl", "Java_NativeSweep_dl", "nofpg_outer", "nofpg_middle", "nofpg_leaf"]);
    eprintln!("{whole} of {leaf} samples in nofpg_leaf unwound whole");
    assert!(leaf >= 60, "{leaf} samples in nofpg_leaf: {err}");
    // 157-158 of 160 here; 126-130 of 161 when the watcher looked every 500 ms
    // (a sample lost per 10 ms of CPU before the library's tables were in).
    assert!(
        whole as f64 >= 0.92 * leaf as f64,
        "{whole} of {leaf} samples unwound through the new libraries: {:?}",
        stacks.iter().filter(|(s, _)| s.iter().any(|f| f == "nofpg_leaf")).collect::<Vec<_>>()
    );
}

/// Frames of a library unloaded (dlclose) before the dump keep their names:
/// they were `[unknown]` (the names came from the mappings at dump time).
/// With `cstack=dwarf`, whose watcher sees every library load, and with the
/// default `cstack=fp`, whose names are kept by the thread registry's
/// 100 ms watcher (the library is loaded for 500 ms of CPU here).
#[test]
fn frames_of_an_unloaded_library_keep_their_names() {
    let s = Scratch::new("native-unload");
    build(&s.0, &[("unl", &["-fno-omit-frame-pointer", "-g"])]);
    for cstack in ["dwarf", "fp"] {
        let out = s.path(&format!("unl-{cstack}.collapsed"));
        let o = run(&s.0, &[], &format!("start,event=cpu,interval=10ms,cstack={cstack},file={}", out.display()), 500, &["dlclose:libunl.so:unl", "burn"]);
        let err = text(&o.stderr);
        assert!(o.status.success(), "{err}");
        let stacks = read_collapsed(&out);
        let phase = samples_with(&stacks, "NativeSweep.dl");
        let named = with_chain(&stacks, &["Java_NativeSweep_dl", "unl_outer", "unl_middle", "unl_leaf"]);
        eprintln!("cstack={cstack}: {named} of {phase} samples of the unloaded library named");
        assert!(phase >= 25, "cstack={cstack}: {phase} samples in NativeSweep.dl: {err}");
        assert!(
            named as f64 >= 0.8 * phase as f64,
            "cstack={cstack}: {named} of {phase}: {:?}",
            stacks.iter().filter(|(s, _)| s.iter().any(|f| f == "NativeSweep.dl")).collect::<Vec<_>>()
        );
    }
}

/// A C++ library's frames are demangled (`sweep::Burner<int>::spin`, from
/// the `.isra.0` clone GCC made of it), and native threads, attached to the
/// JVM or not, show with the CPU time they used (ctimer, weighed by its
/// overruns: `total`).
#[test]
fn cpp_frames_and_native_threads_match_their_cpu_time() {
    let s = Scratch::new("native-cpp");
    build(&s.0, &[]);
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/c/native_sweep_cpp.cpp");
    let lib = s.path("libcpp.so");
    let o = Command::new("g++")
        .args(["-O2", "-fno-omit-frame-pointer", "-shared", "-fPIC", "-o", lib.to_str().unwrap(), src.to_str().unwrap()])
        .output()
        .expect("run g++");
    assert!(o.status.success(), "g++: {}", text(&o.stderr));
    let out = s.path("cpp.collapsed");
    let o = run(&s.0, &[], &format!("start,event=ctimer,interval=10ms,total,file={}", out.display()), 500, &["dl:libcpp.so:cpp", "threads"]);
    let (stdout, err) = (text(&o.stdout), text(&o.stderr));
    assert!(o.status.success(), "{err}");
    let truth = truth_line(&stdout);
    let stacks = read_collapsed(&out);
    let ms = |n: u64| n as f64 / 1e6;
    let cpp = ms(with_chain(&stacks, &["Java_NativeSweep_dl", "cpp_outer", "sweep::run", "sweep::Burner<int>::spin"]));
    let attached =
        ms(stacks.iter().filter(|(s, _)| s.first().is_some_and(|f| f == "[ns-attached]") && s.iter().any(|f| f == "ns_thread")).map(|(_, n)| n).sum());
    let raw = ms(stacks.iter().filter(|(s, _)| s.iter().any(|f| f == "ns_raw_leaf")).map(|(_, n)| n).sum());
    let raw_named = ms(stacks.iter().filter(|(s, _)| s.first().is_some_and(|f| f == "[ns-raw]")).map(|(_, n)| n).sum());
    eprintln!(
        "cpp {cpp:.0} ms (truth {}), attached {attached:.0} (truth {}), raw {raw:.0} (truth {}, {raw_named:.0} named)",
        truth["cpp"], truth["threads"], truth["raw"]
    );
    for (name, got, want) in [("cpp", cpp, truth["cpp"]), ("attached", attached, truth["threads"]), ("raw", raw, truth["raw"])] {
        assert!(got > 0.7 * want && got < 1.3 * want, "{name}: {got:.0} ms in the profile, {want:.0} ms of CPU measured: {err}");
    }
    // The unattached thread is named by the name it gave itself, even when
    // the registry saw it first under the one it inherited (`[java]`).
    assert!(raw_named > 0.95 * raw, "{raw_named:.0} of {raw:.0} ms of the unattached thread under [ns-raw]: {err}");
}

/// A native stack deeper than the agent keeps (128 frames) is never passed
/// off as whole: its leaf-most frames stand under `[truncated]` and the
/// sample counts as failed. Before, 300 frames of recursion showed as
/// `NativeSweep.recurse` calling `ns_rec` 127 deep, with `failed=0`. The
/// same program 40 frames deep stays whole, with its Java caller.
#[test]
fn native_stacks_deeper_than_kept_are_marked_truncated() {
    let s = Scratch::new("native-deep-cut");
    build(&s.0, &[]);
    for cstack in ["fp", "dwarf"] {
        for depth in [300, 40] {
            let out = s.path(&format!("deep-{cstack}-{depth}.collapsed"));
            let o = Command::new(java())
                .current_dir(&s.0)
                .arg(format!("-Dns.depth={depth}"))
                .arg(format!("-agentpath:{}=start,event=cpu,interval=10ms,cstack={cstack},file={}", agent().display(), out.display()))
                .args(["-cp", s.0.to_str().unwrap(), "NativeSweep", s.0.to_str().unwrap(), "400", "deep"])
                .output()
                .expect("run java");
            let err = text(&o.stderr);
            assert!(o.status.success(), "{err}");
            let stacks = read_collapsed(&out);
            let label = format!("cstack={cstack}, {depth} frames deep");
            let leaf: Vec<_> = stacks.iter().filter(|(st, _)| st.last().is_some_and(|f| f == "ns_deep_leaf")).collect();
            let total: u64 = leaf.iter().map(|(_, n)| n).sum();
            assert!(total >= 10, "{label}: {total} samples in ns_deep_leaf\n{err}");
            let marked: u64 = leaf.iter().filter(|(st, _)| st.first().is_some_and(|f| f == "[truncated]")).map(|(_, n)| n).sum();
            let whole: u64 = leaf.iter().filter(|(st, _)| st.iter().any(|f| f == "NativeSweep.recurse")).map(|(_, n)| n).sum();
            let failed: u64 = summary(&err).get("failed").and_then(|v| v.parse().ok()).unwrap_or_else(|| panic!("{label}: no failed= in\n{err}"));
            if depth > 128 {
                assert_eq!(
                    marked,
                    total,
                    "{label}: {} of {total} samples not marked: {:?}",
                    total - marked,
                    leaf.iter().find(|(st, _)| st[0] != "[truncated]")
                );
                assert!(failed >= marked, "{label}: failed={failed} below the {marked} truncated samples\n{err}");
                for (st, _) in &leaf {
                    assert!(st.iter().skip(1).all(|f| f == "ns_rec" || f == "ns_deep_leaf"), "{label}: frames not contiguous from the leaf: {st:?}");
                }
            } else {
                assert_eq!((marked, whole), (0, total), "{label}: a stack that fits was cut or lost its Java caller\n{err}");
            }
        }
    }
}

//! Names the JVM gives in modified UTF-8 (characters beyond U+FFFF, NUL),
//! an allocation store that fills up, and the wall summary's counts: each
//! checked on a real program under the real agent, against what the
//! program knows of itself.

mod common;

use std::path::Path;
use std::process::{Command, Output};

use common::*;

/// Writes `source` as `dir/NAME.java` and compiles it (UTF-8 source and
/// file names whatever the machine's locale).
fn compile_source(dir: &Path, name: &str, source: &str) {
    let file = dir.join(format!("{name}.java"));
    std::fs::write(&file, source).unwrap();
    let o = Command::new(tool("javac"))
        .env("LC_ALL", "C.UTF-8")
        .args(["-encoding", "UTF-8", "--release", "11", "-d"])
        .arg(dir)
        .arg(&file)
        .output()
        .expect("run javac");
    assert!(o.status.success(), "javac failed: {}", text(&o.stderr));
}

fn run(dir: &Path, env: &[(&str, &str)], opts: &str, main_and_args: &[&str]) -> Output {
    let mut all = vec![("LC_ALL", "C.UTF-8")];
    all.extend_from_slice(env);
    let o = run_java_env(dir, &all, opts, &[], dir, main_and_args);
    assert!(o.status.success(), "java failed: {}", text(&o.stderr));
    o
}

/// U+1D465 (𝑥) in a class, a method, an allocated class and a thread name,
/// and a thread name holding NUL: the JVM hands them over in modified UTF-8
/// (two encoded surrogates; `C0 80`), and every output must show them as
/// the program spells them.
const SUPP_NAMES: &str = r#"
public class SuppNames {
    static volatile long sink;
    static volatile Object keep;
    static class \uD835\uDC65Class {
        static void \uD835\uDC65method(long ms) {
            long end = System.nanoTime() + ms * 1_000_000L, x = 0;
            while (System.nanoTime() < end) { for (int i = 0; i < 1000; i++) x += i * 31 ^ x; keep = new \uD835\uDC65Obj(); }
            sink += x;
        }
    }
    static class \uD835\uDC65Obj { long a, b, c; }
    public static void main(String[] a) throws Exception {
        Thread t = new Thread(() -> \uD835\uDC65Class.\uD835\uDC65method(700), "thread-\uD835\uDC65-\u0000-end");
        t.start();
        t.join();
        StringBuilder cps = new StringBuilder();
        for (String s : new String[] { t.getName(), \uD835\uDC65Class.class.getName(), \uD835\uDC65Obj.class.getName() }) {
            cps.append(' ');
            s.codePoints().forEach(c -> cps.append(Integer.toHexString(c)).append(','));
        }
        System.out.println("NAMES" + cps);
    }
}
"#;

#[test]
fn supplementary_characters_and_nul_in_names_survive() {
    let s = Scratch::new("supp-names");
    compile_source(&s.0, "SuppNames", SUPP_NAMES);
    let (thread, class, obj) = ("thread-\u{1D465}-\0-end", "SuppNames$\u{1D465}Class", "SuppNames$\u{1D465}Obj");
    let out = s.path("n.collapsed");
    let o = run(&s.0, &[], &format!("start,event=cpu,interval=5ms,alloc=64k,threads,file={}", out.display()), &["SuppNames"]);
    // The program's own view of its names (code points), so the test checks
    // what the JVM really holds.
    let hex = |t: &str| t.chars().map(|c| format!("{:x},", c as u32)).collect::<String>();
    let truth = text(&o.stdout).lines().find(|l| l.starts_with("NAMES")).map(str::to_string).unwrap_or_default();
    assert_eq!(truth, format!("NAMES {} {} {}", hex(thread), hex(class), hex(obj)));

    let cpu = read_collapsed(&out);
    let method = format!("{class}.\u{1D465}method");
    // The collapsed format shows control characters escaped (NUL as `\x00`).
    let root = format!("[{} tid=", thread.replace('\0', "\\x00"));
    let on_thread: u64 = cpu.iter().filter(|(st, _)| st[0].starts_with(&root)).map(|(_, n)| n).sum();
    assert!(samples_with(&cpu, &method) > 5, "no samples in {method:?}:\n{:?}", &cpu[..cpu.len().min(20)]);
    assert!(on_thread > 5, "no samples under thread {root:?}:\n{:?}", &cpu[..cpu.len().min(20)]);
    let raw = std::fs::read_to_string(&out).unwrap();
    assert!(!raw.contains('\u{fffd}'), "replacement characters in {raw}");
    let alloc = read_collapsed(&s.path("n.alloc.collapsed"));
    assert!(alloc.iter().any(|(st, _)| st.last().map(String::as_str) == Some(obj) && st.contains(&method)), "no {obj} allocated in {method}");

    // JFR, as the JDK's own tool prints it.
    let jfr = s.path("n.jfr");
    run(&s.0, &[], &format!("start,event=cpu,interval=5ms,alloc=64k,file={}", jfr.display()), &["SuppNames"]);
    let p = Command::new(tool("jfr"))
        .env("LC_ALL", "C.UTF-8")
        .args(["print", "--events", "jdk.ExecutionSample,jdk.ObjectAllocationSample"])
        .arg(&jfr)
        .output()
        .unwrap();
    let printed = text(&p.stdout);
    assert!(p.status.success(), "jfr print: {}", text(&p.stderr));
    // `jfr print` names the class as the JVM does: package (none) + name.
    assert!(printed.contains(&format!("{class}.\u{1D465}method(")), "{method} not in jfr print output:\n{}", &printed[..printed.len().min(3000)]);
    assert!(printed.contains(&format!("objectClass = {obj} ")), "{obj} not in jfr print output");
    assert!(printed.contains("thread-\u{1D465}-"), "thread name not in jfr print output");
    assert!(!printed.contains('\u{fffd}'), "replacement characters in jfr print output");
}

/// Many distinct allocation stacks: a 3,072-stack store (the real one
/// holds 196,608; `OXPROF_ALLOC_STORE_STACKS` shrinks it so the test is
/// quick) fills early. Every later sample must keep its bytes, under
/// `[dropped]`, and the summary must not call the profile good.
const MANY_STACKS: &str = r#"
public class ManyStacks {
    static volatile Object sink;
    static Object a(int d, long s) {
        if (d == 0) return new byte[64 + (int) ((s >>> 50) & 7) * 32];
        s = s * 6364136223846793005L + 1442695040888963407L;
        switch ((int) ((s >>> 40) & 7)) {
            case 0: return a0(d - 1, s); case 1: return a1(d - 1, s); case 2: return a2(d - 1, s); case 3: return a3(d - 1, s);
            case 4: return a4(d - 1, s); case 5: return a5(d - 1, s); case 6: return a6(d - 1, s); default: return a7(d - 1, s);
        }
    }
    static Object a0(int d, long s) { return a(d, s); }
    static Object a1(int d, long s) { return a(d, s); }
    static Object a2(int d, long s) { return a(d, s); }
    static Object a3(int d, long s) { return a(d, s); }
    static Object a4(int d, long s) { return a(d, s); }
    static Object a5(int d, long s) { return a(d, s); }
    static Object a6(int d, long s) { return a(d, s); }
    static Object a7(int d, long s) { return a(d, s); }
    public static void main(String[] args) {
        int n = Integer.parseInt(args[0]);
        com.sun.management.ThreadMXBean mx = (com.sun.management.ThreadMXBean) java.lang.management.ManagementFactory.getThreadMXBean();
        long me = Thread.currentThread().getId();
        long s = 99, b0 = mx.getThreadAllocatedBytes(me);
        for (int i = 0; i < n; i++) { s = s * 6364136223846793005L + 1442695040888963407L; sink = a(6, s); }
        long bytes = mx.getThreadAllocatedBytes(me) - b0;
        System.out.println("TRUTH allocations=" + n + " bytes=" + bytes);
    }
}
"#;

#[test]
fn a_full_allocation_store_keeps_the_bytes_and_says_so() {
    let s = Scratch::new("alloc-full");
    compile_source(&s.0, "ManyStacks", MANY_STACKS);
    let out = s.path("a.collapsed");
    let env = [("OXPROF_ALLOC_STORE_STACKS", "4096")];
    let o = run(&s.0, &env, &format!("start,event=alloc,alloc=0,file={}", out.display()), &["ManyStacks", "40000"]);
    let (stdout, err) = (text(&o.stdout), text(&o.stderr));
    let truth = truth_line(&stdout);
    let sum = summary_fields(&err, "[oxprof] alloc summary:");
    let num = |k: &str| sum.get(k).and_then(|v| v.parse::<f64>().ok()).unwrap_or_else(|| panic!("no {k} in {err}"));
    eprintln!("truth {truth:?}\nsummary {sum:?}");
    // 8^6 paths: nearly every allocation's stack is new, the store fills.
    assert!(num("dropped") > 0.5 * truth["allocations"], "the store should have dropped most samples: {err}");
    // Every allocation is sampled (alloc=0), kept or dropped: the estimate
    // covers the program's bytes (plus the JVM's own, a little).
    let ratio = num("estimated_bytes") / truth["bytes"];
    assert!((0.98..1.08).contains(&ratio), "estimated bytes {ratio:.3} of the program's: {err}");
    let stacks = read_collapsed(&out);
    let dropped = samples_with(&stacks, "[dropped]");
    assert_eq!(dropped as f64, num("dropped"), "the [dropped] stack holds the dropped samples");
    assert_eq!(total(&stacks) as f64, num("samples"));
    // Not "good", and the share dropped is said.
    assert_eq!(sum["accuracy"], "poor", "{err}");
    assert!(num("dropped_share") > 0.5, "{err}");

    // The same through JFR and `oxprof report`.
    let jfr = s.path("a.jfr");
    let o = run(&s.0, &env, &format!("start,event=alloc,alloc=0,file={}", jfr.display()), &["ManyStacks", "40000"]);
    let (stdout, err) = (text(&o.stdout), text(&o.stderr));
    let truth = truth_line(&stdout);
    let sum = summary_fields(&err, "[oxprof] alloc summary:");
    let num = |k: &str| sum.get(k).and_then(|v| v.parse::<f64>().ok()).unwrap_or_else(|| panic!("no {k} in {err}"));
    // The streamed recording keeps the dropped samples as events, under
    // `[dropped]` with their class and weight: its samples and bytes are
    // the profile's.
    for (flags, what) in [(&["--alloc"][..], "samples"), (&["--alloc", "--total"][..], "estimated_bytes")] {
        let c = s.path("from-jfr.collapsed");
        let r = oxprof_cmd().arg("convert").arg(&jfr).args(flags).arg("-o").arg(&c).output().unwrap();
        assert!(r.status.success(), "{}", text(&r.stderr));
        let stacks = read_collapsed(&c);
        let ratio = total(&stacks) as f64 / num(what);
        assert!((0.995..1.005).contains(&ratio), "the JFR's {what} are {ratio:.4} of the summary's: {err}");
        if what == "estimated_bytes" {
            let ratio = total(&stacks) as f64 / truth["bytes"];
            assert!((0.98..1.08).contains(&ratio), "the JFR's bytes are {ratio:.3} of the program's: {err}");
        } else {
            let ratio = samples_with(&stacks, "[dropped]") as f64 / num("dropped");
            assert!((0.995..1.005).contains(&ratio), "the JFR's [dropped] samples are {ratio:.4} of the summary's dropped: {err}");
            let with_class = stacks.iter().filter(|(st, _)| st.iter().any(|f| f == "[dropped]") && st.iter().any(|f| f.contains("byte[]"))).count();
            assert!(with_class > 0, "the dropped samples should keep their class (byte[])");
        }
    }
    let r = oxprof_cmd().arg("report").arg(&jfr).output().unwrap();
    let report = text(&r.stdout);
    assert!(r.status.success(), "{}", text(&r.stderr));
    let line = report.lines().find(|l| l.contains("allocation accuracy:")).unwrap_or_else(|| panic!("no accuracy in\n{report}"));
    assert!(line.contains("allocation accuracy: poor: ") && line.contains("of the estimate") && line.contains("was dropped"), "{line}");
    assert!(report.contains("allocation samples dropped: "), "{report}");
}

/// Threads that run every 2 ms, sampled every 1 ms with 16 signals a tick:
/// most are signalled only every few ticks, each sample standing for
/// several intervals. The summary's `samples=` is what the profile holds
/// (the intervals of wall time), not the stack records behind them.
const WAKERS: &str = r#"
import java.util.concurrent.locks.LockSupport;
public class Wakers {
    public static void main(String[] args) throws Exception {
        int n = Integer.parseInt(args[0]);
        long ms = Long.parseLong(args[1]);
        Thread[] ts = new Thread[n];
        long[] alive = new long[n];
        for (int i = 0; i < n; i++) {
            final int k = i;
            ts[i] = new Thread(() -> {
                long t0 = System.nanoTime(), end = t0 + ms * 1_000_000L;
                while (System.nanoTime() < end) LockSupport.parkNanos(2_000_000L);
                alive[k] = System.nanoTime() - t0;
            }, "w-" + i);
        }
        for (Thread t : ts) t.start();
        for (Thread t : ts) t.join();
        long sum = 0;
        for (long a : alive) sum += a;
        System.out.println("TRUTH alive_ns=" + sum);
    }
}
"#;

#[test]
fn the_wall_summary_counts_what_the_profile_holds() {
    let s = Scratch::new("wall-counts");
    compile_source(&s.0, "Wakers", WAKERS);
    let out = s.path("w.collapsed");
    let o = run(&s.0, &[], &format!("start,event=wall,wall=1ms,threads,file={}", out.display()), &["Wakers", "48", "1200"]);
    let (stdout, err) = (text(&o.stdout), text(&o.stderr));
    let w = summary_fields(&err, "[oxprof] wall summary:");
    let num = |k: &str| w.get(k).and_then(|v| v.parse::<u64>().ok()).unwrap_or_else(|| panic!("no {k} in {err}"));
    let stacks = read_collapsed(&out);
    assert_eq!(num("samples"), total(&stacks), "samples= must be the profile's total: {err}");
    assert_eq!(num("recorded"), num("walked") + num("reused"), "{err}");
    assert!(num("deferred") > 0 && num("samples") > num("recorded"), "each record should stand for several intervals here: {err}");
    // The workers' samples add up to the time they lived.
    let workers: u64 = stacks.iter().filter(|(st, _)| st[0].starts_with("[w-")).map(|(_, n)| n).sum();
    let expected = truth_line(&stdout)["alive_ns"] / 1e6;
    let ratio = workers as f64 / expected;
    assert!((0.85..1.1).contains(&ratio), "workers sampled {workers} ms of {expected:.0} ms alive ({ratio:.3}): {err}");
}

//! Continuous profiling of a JFR recording while the disk fills up and is
//! freed again, under a real JVM on a real small tmpfs (root only, like the
//! full-disk cases of `files.rs`): every file left where the intervals go
//! is readable by the JDK's `jfr summary` (a file that hit the full disk is
//! cut back to its whole chunks or removed, and no empty file is left), the
//! intervals that did not fit are in private fallback files named after
//! them, in JFR, with their samples, `%n` counts intervals whatever failed,
//! and writing goes back to the intervals' own names once there is room.

mod common;

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::mpsc::Receiver;
use std::time::{Duration, Instant};

use common::*;

/// How long any one step may take before the test gives up.
const CAP: Duration = Duration::from_secs(60);

/// Unmounts a tmpfs when dropped.
struct Mount(PathBuf);

impl Drop for Mount {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(&self.0).status();
    }
}

/// A tmpfs of `kib` KiB mounted at the scratch directory's `name`.
fn small_tmpfs(s: &Scratch, name: &str, kib: u32) -> Mount {
    let dir = s.path(name);
    std::fs::create_dir(&dir).unwrap();
    let st = Command::new("mount").args(["-t", "tmpfs", "-o", &format!("size={kib}k,mode=0777"), "tmpfs"]).arg(&dir).status().unwrap();
    assert!(st.success(), "mount tmpfs (root needed)");
    Mount(dir)
}

fn is_root() -> bool {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata("/proc/self").is_ok_and(|m| m.uid() == 0)
}

/// Fills the file system of `dir` to the brim (a file `filler`).
fn fill(dir: &Path) -> PathBuf {
    let path = dir.join("filler");
    let mut f = std::fs::File::create(&path).unwrap();
    let block = vec![0u8; 4096];
    while f.write_all(&block).is_ok() {}
    // What a partial block left.
    while f.write_all(&[0u8]).is_ok() {}
    path
}

/// Waits until interval `n` has begun: something named `n.*` in `dir`.
fn wait_for(dir: &Path, n: u64, jvm: &mut RunningJvm, lines: &Receiver<String>, log: &mut Vec<String>) {
    let started = Instant::now();
    let prefix = format!("{n}.");
    while !std::fs::read_dir(dir).unwrap().any(|e| e.unwrap().file_name().to_string_lossy().starts_with(&prefix)) {
        log.extend(lines.try_iter());
        assert!(jvm.alive(), "the JVM ended before interval {n} began\n{}", log.join("\n"));
        assert!(started.elapsed() < CAP, "interval {n} not begun within {} s\n{}", CAP.as_secs(), log.join("\n"));
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// `jfr summary FILE`: the events per type, or why the JDK cannot read it.
fn jfr_summary(file: &Path) -> Result<std::collections::HashMap<String, u64>, String> {
    let o = Command::new(tool("jfr")).arg("summary").arg(file).output().unwrap();
    if !o.status.success() {
        return Err(format!("{}{}", text(&o.stdout), text(&o.stderr)));
    }
    Ok(text(&o.stdout)
        .lines()
        .filter_map(|l| {
            let mut w = l.split_whitespace();
            let (name, count) = (w.next()?, w.next()?.parse().ok()?);
            name.contains('.').then(|| (name.to_string(), count))
        })
        .collect())
}

/// The fallbacks the log names: "cannot write the JFR recording to WANTED:
/// WHY; ...; writing the JFR recording to FALLBACK instead".
fn fallbacks(log: &[String]) -> Vec<(PathBuf, PathBuf, String)> {
    log.iter()
        .filter_map(|l| {
            let rest = l.split_once("cannot write the JFR recording to ")?.1;
            let (head, fallback) = rest.rsplit_once("; writing the JFR recording to ")?;
            let (wanted, why) = head.split_once(": ")?;
            Some((PathBuf::from(wanted), PathBuf::from(fallback.trim_end_matches(" instead")), why.to_string()))
        })
        .collect()
}

/// Every file under `dir`, however deep.
fn files_under(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            out.extend(files_under(&p));
        } else {
            out.push(p);
        }
    }
    out.sort();
    out
}

/// A JFR recording under `loop=1s` into a 300 KiB tmpfs: filled to the
/// brim while interval 2 runs, freed once interval 6 has begun, then three
/// more intervals and a normal exit. `kinds` are the event types each file
/// must hold.
fn full_then_freed(opts: &str, kinds: &[&str]) {
    if !is_root() {
        eprintln!("not root: cannot mount a small tmpfs; skipped");
        return;
    }
    let s = Scratch::new("full-disk-loop");
    compile(&s.0, &["SpinUntilEof.java"]);
    let mount = small_tmpfs(&s, "small", 300);
    let small = mount.0.clone();
    let cwd = s.path("cwd");
    std::fs::create_dir(&cwd).unwrap();
    let at = |n: u64| small.join(format!("{n}.jfr"));

    let opts = format!("start,{opts},loop=1s,file={}", small.join("%n.jfr").display());
    let mut cmd = java_cmd([format!("-agentpath:{}={opts}", agent().display())]);
    cmd.arg("-cp").arg(&s.0).arg("SpinUntilEof");
    let mut jvm = RunningJvm::spawn(cmd, &cwd, "ready");
    let lines = stderr_lines(&mut jvm.child);
    let mut log = Vec::new();
    wait_for(&small, 2, &mut jvm, &lines, &mut log);
    let filler = fill(&small);
    wait_for(&small, 6, &mut jvm, &lines, &mut log);
    std::fs::remove_file(&filler).unwrap();
    wait_for(&small, 9, &mut jvm, &lines, &mut log);
    drop(jvm.child.stdin.take());
    let o = jvm.finish();
    log.extend(lines.iter());
    let log_text = log.join("\n");
    assert!(o.status.success(), "{log_text}");

    // Every file left where the intervals go is an interval's, and whole.
    let left = files_under(&small);
    for f in &left {
        let name = f.file_name().unwrap().to_string_lossy().into_owned();
        assert!(name.strip_suffix(".jfr").is_some_and(|n| n.parse::<u64>().is_ok()), "{} is not an interval's file\n{log_text}", f.display());
        if let Err(e) = jfr_summary(f) {
            panic!("{} ({} bytes) is not readable: {e}\n{log_text}", f.display(), std::fs::metadata(f).unwrap().len());
        }
    }

    // Each interval once, at its own name or in the fallback the log names,
    // numbered as the intervals are: no gap, nothing past the last.
    let moved = fallbacks(&log);
    let mut numbers: Vec<(u64, PathBuf, bool)> = Vec::new();
    for n in 0.. {
        let here = left.contains(&at(n));
        let elsewhere: Vec<&(PathBuf, PathBuf, String)> = moved.iter().filter(|(w, _, _)| *w == at(n)).collect();
        assert!(elsewhere.len() <= 1, "interval {n} went to two fallbacks: {elsewhere:?}");
        let file = match (here, elsewhere.first()) {
            (true, None) => at(n),
            (false, Some((_, f, why))) => {
                assert!(why.contains("No space left on device"), "{why}");
                // In a private directory of the working directory, named
                // after the interval.
                assert_eq!(f.parent().and_then(Path::parent), Some(cwd.as_path()), "{}", f.display());
                assert_eq!(f.file_name(), at(n).file_name(), "the fallback of interval {n} is not named after it");
                f.clone()
            }
            (true, Some(f)) => panic!("interval {n} is both at {} and in the fallback {f:?}\n{log_text}", at(n).display()),
            (false, None) => break,
        };
        numbers.push((n, file, here));
    }
    let count = numbers.len() as u64;
    assert!(count >= 10, "only {count} intervals\n{log_text}");
    for f in &left {
        let n: u64 = f.file_stem().unwrap().to_string_lossy().parse().unwrap();
        assert!(n < count, "{} is past the last interval ({count} intervals)\n{log_text}", f.display());
    }
    // Each holds its samples (but the last, cut short by the exit).
    for (n, file, _) in &numbers[..numbers.len() - 1] {
        let summary = jfr_summary(file).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
        for kind in kinds {
            assert!(summary.get(*kind).is_some_and(|&c| c > 0), "interval {n} ({}) holds no {kind}: {summary:?}", file.display());
        }
    }

    // The full disk sent intervals to fallbacks; once freed, they came back.
    let moved_n: Vec<u64> = numbers.iter().filter(|(_, _, here)| !here).map(|(n, _, _)| *n).collect();
    assert!(moved_n.len() >= 3, "{moved_n:?} went to fallbacks while the disk was full (intervals 2 to 5)\n{log_text}");
    assert!(moved_n[0] >= 2, "interval {} moved before the disk was full\n{log_text}", moved_n[0]);
    assert!(numbers.iter().any(|&(n, _, here)| here && n >= 7), "writing did not resume once there was room: moved {moved_n:?}\n{log_text}");

    // Nothing else was left in the working directory: the fallbacks are
    // all JFR (no flame graph made instead), each named for the log.
    for f in files_under(&cwd) {
        assert!(moved.iter().any(|m| m.1 == f), "{} was left in the working directory, and the log does not name it\n{log_text}", f.display());
    }
    assert!(!log_text.contains("is incomplete"), "{log_text}");
}

#[test]
#[ignore = "needs root; scripts/test.sh runs it when run as root"]
fn a_full_disk_costs_no_jfr_interval_and_leaves_only_readable_files() {
    full_then_freed("event=cpu,interval=5ms", &["jdk.ExecutionSample"]);
}

#[test]
#[ignore = "needs root; scripts/test.sh runs it when run as root"]
fn a_full_disk_costs_no_jfr_interval_with_allocations_and_wall_clock_either() {
    full_then_freed("event=cpu,interval=5ms,alloc,wall=50ms", &["jdk.ExecutionSample", "oxprof.WallClockSample", "jdk.ObjectAllocationSample"]);
}

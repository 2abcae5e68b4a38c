//! Hostile neighbours for the paths oxprof touches beyond a plain
//! recording's `file=` (which `files.rs` covers): continuous profiling's
//! interval files (`loop=`, `%n` patterns, `keep=`), the JFR stream's
//! interval files, the `log=` file, and the agent library copied into a
//! JVM's mount namespace on attach.
//!
//! Things planted at the names the JVM will write (a symbolic link to a file
//! the JVM's user may write, a FIFO, a directory, a file of the user's own)
//! are never followed, waited on, replaced or deleted; every interval still
//! lands whole somewhere safe and the log says where; `keep=` deletes only
//! files the recording wrote and that are still what it wrote. The output
//! directory is world-writable but not sticky, so the kernel's
//! `protected_symlinks`/`protected_fifos` do not apply: only oxprof stands
//! between a planted link and its target.
//!
//! Each case runs as the test's user; as root (`scripts/test.sh`), also
//! with the JVM of another user (`nobody`), attached by root and by that
//! user.

mod common;

use std::ffi::OsStr;
use std::os::unix::fs::{symlink, FileTypeExt, MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use common::*;

const NOBODY: u32 = 65534;
const PRECIOUS: &str = "precious: not the JVM's to truncate\n";
const USERS_OWN: &str = "a file of the user's own, not the recording's\n";

/// Whose process: the test's user, or `nobody`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Who {
    Me,
    Nobody,
}

fn euid() -> u32 {
    // SAFETY: geteuid cannot fail.
    unsafe { libc::geteuid() }
}

impl Who {
    fn uid(self) -> u32 {
        match self {
            Who::Me => euid(),
            Who::Nobody => NOBODY,
        }
    }

    /// `program` as a command run as this user.
    fn command(self, program: impl AsRef<OsStr>) -> Command {
        match self {
            Who::Me => Command::new(program),
            Who::Nobody => {
                assert_eq!(euid(), 0, "running a process as nobody needs root");
                let mut c = Command::new("setpriv");
                c.args(["--reuid=65534", "--regid=65534", "--clear-groups"]).arg(program);
                c
            }
        }
    }

    /// Makes `path` this user's.
    fn own(self, path: &Path) {
        if self == Who::Nobody {
            std::os::unix::fs::lchown(path, Some(NOBODY), Some(NOBODY)).unwrap();
        }
    }
}

fn chmod(p: &Path, mode: u32) {
    std::fs::set_permissions(p, std::fs::Permissions::from_mode(mode)).unwrap();
}

fn mode(p: &Path) -> u32 {
    std::fs::symlink_metadata(p).unwrap().permissions().mode() & 0o7777
}

fn mkfifo(p: &Path) {
    let c = std::ffi::CString::new(p.as_os_str().as_encoded_bytes()).unwrap();
    // SAFETY: mkfifo with a NUL-terminated path that outlives the call.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o666) }, 0, "mkfifo {}: {}", p.display(), std::io::Error::last_os_error());
    // Open to any writer (past the umask): the JVM's user could open it.
    chmod(p, 0o666);
}

/// The directories of one case: classes (readable by all), `out` (where
/// the JVM writes: world-writable, not sticky), `cwd` (the JVM's working
/// directory, its user's: fallbacks go there) and a victim file the JVM's
/// user may write.
struct Place {
    s: Scratch,
    out: PathBuf,
    cwd: PathBuf,
    victim: PathBuf,
}

fn place(name: &str, jvm: Who) -> Place {
    let s = Scratch::new(name);
    chmod(&s.0, 0o755);
    compile(&s.0, &["CpuBurn.java"]);
    let out = s.path("out");
    std::fs::create_dir(&out).unwrap();
    chmod(&out, 0o777);
    let cwd = s.path("cwd");
    std::fs::create_dir(&cwd).unwrap();
    jvm.own(&cwd);
    let victim = s.path("victim.txt");
    std::fs::write(&victim, PRECIOUS).unwrap();
    chmod(&victim, 0o666);
    jvm.own(&victim);
    Place { s, out, cwd, victim }
}

/// Waits for a JVM to end, killing it and failing the test if it has not
/// ended within `limit` (a FIFO opened for writing blocks until a reader
/// comes: a hang is what such a plant causes).
fn finish_within(jvm: &mut RunningJvm, limit: Duration, what: &str) -> std::process::Output {
    let started = Instant::now();
    while jvm.alive() {
        if started.elapsed() > limit {
            let _ = jvm.child.kill();
            let o = jvm.finish();
            panic!("{what}: the JVM did not end within {} s (hung on a planted file?)\n{}", limit.as_secs(), text(&o.stderr));
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    jvm.finish()
}

/// `out/PREFIX<n>.EXT` for interval `n`.
fn interval(out: &Path, prefix: &str, n: u64, ext: &str) -> PathBuf {
    out.join(format!("{prefix}{n}.{ext}"))
}

/// Waits until `path` exists (as anything), up to [`WORK_CAP`].
fn wait_for(path: &Path, jvm: &mut RunningJvm) {
    let started = Instant::now();
    while std::fs::symlink_metadata(path).is_err() {
        assert!(jvm.alive(), "the JVM ended before {} was written", path.display());
        assert!(started.elapsed() < WORK_CAP, "{} not written within {} s", path.display(), WORK_CAP.as_secs());
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// The fallbacks the log names: wanted path → (fallback, why).
fn fallbacks(log: &str) -> Vec<(PathBuf, PathBuf, String)> {
    log.lines()
        .filter_map(|l| {
            // Profiles: "could not write the profile to W: WHY; wrote it to F instead".
            // JFR: "cannot create W: WHY; writing the JFR recording to F instead".
            let (rest, verb) = if let Some(r) = l.split_once("could not write the profile to ").map(|x| x.1) {
                (r, "; wrote it to ")
            } else {
                (l.split_once("cannot create ")?.1, "; writing the JFR recording to ")
            };
            let (head, fallback) = rest.rsplit_once(verb)?;
            let (wanted, why) = head.split_once(": ")?;
            Some((PathBuf::from(wanted), PathBuf::from(fallback.trim_end_matches(" instead")), why.to_string()))
        })
        .collect()
}

/// A fallback is a new file (0600, the JVM user's) in a private directory
/// `oxprof-<pid>-XXXXXX` (0700, the JVM user's) of the JVM's working directory.
fn assert_private(fallback: &Path, cwd: &Path, jvm: Who) {
    let dir = fallback.parent().unwrap();
    assert_eq!(dir.parent(), Some(cwd), "fallback {} not in the working directory", fallback.display());
    assert!(dir.file_name().unwrap().to_string_lossy().starts_with("oxprof-"), "{}", dir.display());
    let (d, f) = (std::fs::symlink_metadata(dir).unwrap(), std::fs::symlink_metadata(fallback).unwrap());
    assert!(d.is_dir() && f.is_file(), "{}", fallback.display());
    assert_eq!((mode(dir), d.uid()), (0o700, jvm.uid()), "{}", dir.display());
    assert_eq!((mode(fallback), f.uid()), (0o600, jvm.uid()), "{}", fallback.display());
}

/// What was planted, to check afterwards that it is all still there as it was.
struct Plants {
    victim: PathBuf,
    links: Vec<PathBuf>,
    fifos: Vec<PathBuf>,
    dirs: Vec<PathBuf>,
    users: Vec<PathBuf>,
}

impl Plants {
    fn check(&self) {
        assert_eq!(std::fs::read_to_string(&self.victim).unwrap(), PRECIOUS, "the JVM wrote through a planted link");
        for l in &self.links {
            let m = std::fs::symlink_metadata(l).unwrap_or_else(|e| panic!("the planted link {} is gone: {e}", l.display()));
            assert!(m.file_type().is_symlink(), "{} is no longer the planted link", l.display());
        }
        for f in &self.fifos {
            assert!(std::fs::symlink_metadata(f).unwrap().file_type().is_fifo(), "{}", f.display());
        }
        for d in &self.dirs {
            assert_eq!(std::fs::read_to_string(d.join("inside")).unwrap(), "inside\n", "{}", d.display());
        }
        for u in &self.users {
            let got = std::fs::read_to_string(u).unwrap_or_else(|e| panic!("the user's file {} is gone: {e}", u.display()));
            assert_eq!(got, USERS_OWN, "the user's file {} was overwritten", u.display());
        }
    }
}

/// Plants at the names of intervals 1 (a link to the victim), 2 (a FIFO),
/// 3 (a directory) and 4 (a file of the JVM's user), and user files that
/// match the pattern but that this recording never reaches.
fn plant(p: &Place, prefix: &str, ext: &str, jvm: Who) -> Plants {
    let at = |n| interval(&p.out, prefix, n, ext);
    symlink(&p.victim, at(1)).unwrap();
    mkfifo(&at(2));
    std::fs::create_dir(at(3)).unwrap();
    std::fs::write(at(3).join("inside"), "inside\n").unwrap();
    let mut users = vec![at(4), p.out.join(format!("{prefix}old.{ext}")), at(99)];
    for u in &users {
        std::fs::write(u, USERS_OWN).unwrap();
        jvm.own(u);
    }
    users.sort();
    Plants { victim: p.victim.clone(), links: vec![at(1)], fifos: vec![at(2)], dirs: vec![at(3)], users }
}

/// Where each interval `0..` went: its own name or the fallback the log
/// names for it. Every number from 0 to the last appears exactly once.
fn where_intervals_went(p: &Place, prefix: &str, ext: &str, log: &str, jvm: Who, planted: &Plants) -> Vec<PathBuf> {
    let moved = fallbacks(log);
    let skip: Vec<&PathBuf> = planted.links.iter().chain(&planted.fifos).chain(&planted.dirs).chain(&planted.users).collect();
    let mut files = Vec::new();
    for n in 0.. {
        let wanted = interval(&p.out, prefix, n, ext);
        let elsewhere: Vec<&(PathBuf, PathBuf, String)> = moved.iter().filter(|(w, _, _)| *w == wanted).collect();
        assert!(elsewhere.len() <= 1, "interval {n} written to two fallbacks: {elsewhere:?}");
        let here = !skip.contains(&&wanted) && std::fs::symlink_metadata(&wanted).is_ok_and(|m| m.is_file());
        match (here, elsewhere.first()) {
            (true, None) => {
                let m = std::fs::symlink_metadata(&wanted).unwrap();
                assert_eq!((m.mode() & 0o777, m.uid(), m.nlink()), (0o600, jvm.uid(), 1), "{}", wanted.display());
                files.push(wanted);
            }
            (false, Some((_, fallback, _))) => {
                assert_private(fallback, &p.cwd, jvm);
                files.push(fallback.clone());
            }
            (true, Some(f)) => panic!("interval {n} is both at {} and in the fallback {f:?}", wanted.display()),
            (false, None) => break,
        }
    }
    // Nothing past the last interval found.
    for n in files.len() as u64..files.len() as u64 + 5 {
        let w = interval(&p.out, prefix, n, ext);
        assert!(skip.contains(&&w) || std::fs::symlink_metadata(&w).is_err(), "interval {n} after a gap: {}\n{log}", w.display());
    }
    files
}

/// Plants at interval names (before the run and, while it runs, at the next
/// interval's name), then a 7 s CPU burn under `loop=1s` as `jvm`. The JVM
/// ends normally, the plants are as they were, every interval is whole in
/// its place or in a private fallback the log names, and the intervals
/// together hold the burner's CPU time (nothing recorded lost).
fn planted_interval_names(jvm: Who, ext: &str) {
    let p = place(&format!("hostile-loop-{ext}-{jvm:?}"), jvm);
    let prefix = "iv-";
    let mut planted = plant(&p, prefix, ext, jvm);
    let pattern = p.out.join(format!("{prefix}%n.{ext}"));
    let opts = format!("start,event=cpu,interval=1ms,total,loop=1s,file={}", pattern.display());
    let mut cmd = jvm.command(java());
    cmd.arg(format!("-agentpath:{}={opts}", agent().display())).arg("-cp").arg(&p.s.0).args(["CpuBurn", "7"]);
    let mut run = RunningJvm::spawn(cmd, &p.cwd, "ready");
    // While it runs: a link at the name of the interval after the newest
    // file (the one being recorded, for collapsed files written at its end;
    // the next, for JFR, whose file is created when the interval begins).
    wait_for(&interval(&p.out, prefix, 5, ext), &mut run);
    let next = interval(&p.out, prefix, 6, ext);
    symlink(&p.victim, &next).unwrap();
    planted.links.push(next);
    let o = finish_within(&mut run, WORK_CAP, &format!("{jvm:?} {ext}"));
    let log = text(&o.stderr);
    assert!(o.status.success(), "{log}");
    planted.check();
    let files = where_intervals_went(&p, prefix, ext, &log, jvm, &planted);
    assert!(files.len() >= 7, "{} intervals\n{log}", files.len());
    // The log says why each planted name was not used.
    let why = |n: u64| {
        let w = interval(&p.out, prefix, n, ext);
        fallbacks(&log).into_iter().find(|(x, _, _)| *x == w).map(|(_, _, why)| why).unwrap_or_else(|| panic!("no warning for {}\n{log}", w.display()))
    };
    for n in [1, 6] {
        assert_eq!(why(n), "it is a symbolic link, which oxprof does not follow");
    }
    assert_eq!(why(2), "it exists and is not a regular file");
    assert!(why(3).contains("directory"), "{}", why(3));
    assert!(why(4).contains("this recording did not write it"), "{}", why(4));

    let truth: f64 = text(&o.stdout).lines().find_map(|l| l.strip_prefix("CPU_NS ")).expect("CPU_NS").trim().parse().unwrap();
    // Every interval file read whole: JFR by oxprof's reader (and the moved
    // ones by the JDK's tool too), the burner's samples added up.
    let moved: Vec<PathBuf> = fallbacks(&log).into_iter().map(|(_, f, _)| f).collect();
    let mut spin = 0u64;
    for f in &files {
        if ext == "jfr" {
            let c = p.s.path("interval.collapsed");
            let o = oxprof_cmd().arg("convert").arg(f).arg("-o").arg(&c).output().unwrap();
            // An interval without a sample (the last, cut short at exit) has nothing to convert.
            let empty = !o.status.success() && text(&o.stderr).contains("no samples");
            if moved.contains(f) || empty {
                let o = Command::new(tool("jfr")).arg("summary").arg(f).output().unwrap();
                assert!(o.status.success(), "jfr summary {}: {}", f.display(), text(&o.stderr));
            }
            if empty {
                continue;
            }
            assert!(o.status.success(), "convert {}: {}", f.display(), text(&o.stderr));
            // Samples at 1 ms, as nanoseconds.
            spin += samples_with(&read_collapsed(&c), "CpuBurn.spin") * 1_000_000;
            for sibling in std::fs::read_dir(&p.s.0).unwrap().map(|e| e.unwrap().path()).filter(|q| q.to_string_lossy().contains("interval.")) {
                std::fs::remove_file(sibling).unwrap();
            }
        } else {
            spin += samples_with(&read_collapsed(f), "CpuBurn.spin");
        }
    }
    let ratio = spin as f64 / truth;
    eprintln!("{jvm:?} {ext}: {} intervals, {} in fallbacks; samples {ratio:.3} of the burner's CPU time", files.len(), moved.len());
    let range = if ext == "jfr" { 0.9..=1.1 } else { 0.93..=1.05 };
    assert!(range.contains(&ratio), "the intervals hold {ratio:.3} of the program's CPU time\n{log}");
}

#[test]
fn interval_names_planted_as_link_fifo_directory_or_user_file_lose_nothing() {
    planted_interval_names(Who::Me, "collapsed");
}

#[test]
fn jfr_interval_names_planted_as_link_fifo_directory_or_user_file_lose_nothing() {
    planted_interval_names(Who::Me, "jfr");
}

#[test]
#[ignore = "needs root; scripts/test.sh runs it when run as root"]
fn interval_names_planted_in_another_users_jvm_lose_nothing() {
    planted_interval_names(Who::Nobody, "collapsed");
    planted_interval_names(Who::Nobody, "jfr");
}

/// `oxprof attach PID ARGS` as `cli`.
fn attach_as(cli: Who, pid: u32, args: &[&str]) -> std::process::Output {
    let mut c = cli.command(oxprof());
    c.env("OXPROF_AGENT", agent()).arg("attach").arg(pid.to_string()).args(args);
    c.output().unwrap()
}

/// `keep=2` on a loop started by `oxprof attach` (as `cli`) in a JVM of
/// `jvm`: it deletes the intervals it wrote past the last two, and nothing
/// else: not files of the user's that match the pattern, not a link swapped
/// in for an old interval file (nor the link's target), not a file of the
/// user's moved in place of another. Intervals 4 and 5, whose names hold a
/// link and a FIFO, go to private fallbacks, which `status` reports (an
/// attached agent logs only errors).
fn keep_deletes_only_what_it_wrote(jvm: Who, cli: Who) {
    let p = place(&format!("hostile-keep-{jvm:?}-{cli:?}"), jvm);
    let (prefix, ext) = ("k-", "collapsed");
    let at = |n| interval(&p.out, prefix, n, ext);
    let users = [p.out.join("k-old.collapsed"), at(99)];
    for u in &users {
        std::fs::write(u, USERS_OWN).unwrap();
        jvm.own(u);
    }
    symlink(&p.victim, at(4)).unwrap();
    mkfifo(&at(5));
    let mut cmd = jvm.command(java());
    cmd.arg("-cp").arg(&p.s.0).args(["CpuBurn", "600"]);
    let mut run = RunningJvm::spawn(cmd, &p.cwd, "ready");
    let pid = run.pid();
    let pattern = p.out.join("k-%n.collapsed");
    let o = attach_as(cli, pid, &["start", "--event", "cpu", "--interval", "5ms", "--loop", "1s", "--keep", "2", "-o", pattern.to_str().unwrap()]);
    assert!(o.status.success(), "{}{}", text(&o.stdout), text(&o.stderr));
    // Interval 1 is whole once interval 2's file appears: swap it for a
    // link to the victim. Interval 2, once 3's appears: swap it for a file
    // of the user's. keep=2 would delete them when 3 and 4 are written.
    wait_for(&at(2), &mut run);
    std::fs::remove_file(at(1)).unwrap();
    symlink(&p.victim, at(1)).unwrap();
    wait_for(&at(3), &mut run);
    std::fs::remove_file(at(2)).unwrap();
    std::fs::write(at(2), USERS_OWN).unwrap();
    jvm.own(&at(2));
    wait_for(&at(6), &mut run);
    // An attached agent logs only errors: status says what keep= left.
    let o = attach_as(cli, pid, &["status"]);
    let status = text(&o.stdout);
    assert!(o.status.success(), "{status}{}", text(&o.stderr));
    let field =
        |name: &str| status.split(&format!(" {name}=")).nth(1).and_then(|r| r.split([' ', ')']).next()).unwrap_or_else(|| panic!("no {name}= in {status}"));
    assert_eq!((field("left"), field("fallbacks")), ("2", "2"), "{status}");
    assert!(field("deleted").parse::<u64>().unwrap() >= 2, "{status}");
    // The fallbacks' private directory: the JVM user's, in its working directory.
    let fallback_dir = PathBuf::from(field("last_fallback")).parent().unwrap().to_path_buf();
    assert_eq!(fallback_dir.parent(), Some(p.cwd.as_path()), "{status}");
    let m = std::fs::symlink_metadata(&fallback_dir).unwrap();
    assert_eq!((m.is_dir(), m.mode() & 0o777, m.uid()), (true, 0o700, jvm.uid()), "{}", fallback_dir.display());
    let o = attach_as(cli, pid, &["stop"]);
    let reply = text(&o.stdout) + &text(&o.stderr);
    assert!(o.status.success(), "{reply}");
    let _ = run.child.kill();
    let log = text(&run.finish().stderr);
    assert!(!log.contains("[oxprof]"), "an attached agent printed to the JVM's console: {log}");

    assert_eq!(std::fs::read_to_string(&p.victim).unwrap(), PRECIOUS);
    for n in [1, 4] {
        assert!(std::fs::symlink_metadata(at(n)).unwrap().file_type().is_symlink(), "the link at interval {n}'s name is gone\n{log}");
    }
    assert!(std::fs::symlink_metadata(at(5)).unwrap().file_type().is_fifo());
    for u in users.iter().chain([&at(2)]) {
        assert_eq!(std::fs::read_to_string(u).unwrap_or_else(|e| panic!("{}: {e}\n{log}", u.display())), USERS_OWN, "{}", u.display());
    }
    // What is left: the plants and the last two intervals, the JVM user's.
    let mut left: Vec<String> = std::fs::read_dir(&p.out).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
    left.sort();
    let intervals: Vec<u64> =
        left.iter().filter_map(|n| n.strip_prefix(prefix)?.strip_suffix(".collapsed")?.parse().ok()).filter(|n| ![1, 2, 4, 5, 99].contains(n)).collect();
    assert_eq!(intervals.len(), 2, "files left: {left:?}\n{log}");
    assert!(intervals[0] >= 6 && intervals[1] == intervals[0] + 1, "{left:?}");
    assert_eq!(left.len(), 2 + 4 + users.len(), "files left: {left:?}");
    for n in &intervals {
        let m = std::fs::symlink_metadata(at(*n)).unwrap();
        assert_eq!((m.mode() & 0o777, m.uid()), (0o600, jvm.uid()));
    }
    // The last interval ends at `stop`, a moment after it began: on a busy
    // machine the burner may not have run in it. The whole one before has.
    assert!(samples_with(&read_collapsed(&at(intervals[0])), "CpuBurn.spin") > 0, "interval {}", intervals[0]);
    read_collapsed(&at(intervals[1]));
    assert!(reply.contains(&at(intervals[1]).display().to_string()), "stop names the last interval: {reply}");
}

#[test]
fn keep_deletes_only_what_the_recording_wrote() {
    keep_deletes_only_what_it_wrote(Who::Me, Who::Me);
}

#[test]
#[ignore = "needs root; scripts/test.sh runs it when run as root"]
fn keep_in_another_users_jvm_attached_by_root_and_by_that_user() {
    keep_deletes_only_what_it_wrote(Who::Nobody, Who::Me);
    keep_deletes_only_what_it_wrote(Who::Nobody, Who::Nobody);
}

/// `log=` naming a FIFO (with no reader, and with a reader waiting) or a
/// directory: the JVM refuses the option at once, with one line saying why,
/// and writes nothing into the FIFO.
fn log_planted_as_fifo_or_directory(jvm: Who) {
    let p = place(&format!("hostile-log-{jvm:?}"), jvm);
    let run = |log: &Path| {
        let mut cmd = jvm.command(java());
        cmd.current_dir(&p.cwd).arg(format!("-agentpath:{}=start,log={}", agent().display(), log.display())).arg("-cp").arg(&p.s.0).args(["CpuBurn", "1"]);
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let _ = tx.send(cmd.output());
        });
        let o = rx.recv_timeout(Duration::from_secs(60)).unwrap_or_else(|_| panic!("the JVM hung on log={}", log.display()));
        o.unwrap()
    };
    let fifo = p.out.join("agent.log");
    mkfifo(&fifo);
    let opts = format!("start,log={}", fifo.display());
    let refused = format!("invalid agent option 'log={}': cannot open the log file: it exists and is not a regular file", fifo.display());
    assert_refused(&run(&fifo), &opts, &refused);
    // A reader waiting at the other end (opened without blocking): the
    // agent's open succeeds and it must still refuse, writing nothing.
    let reader = std::fs::OpenOptions::new().read(true).custom_flags(libc::O_NONBLOCK).open(&fifo).unwrap();
    assert_refused(&run(&fifo), &opts, &refused);
    let mut got = Vec::new();
    let _ = std::io::Read::read_to_end(&mut &reader, &mut got);
    assert!(got.is_empty(), "the agent wrote {} bytes into the FIFO", got.len());
    assert!(std::fs::symlink_metadata(&fifo).unwrap().file_type().is_fifo());

    let dir = p.out.join("logdir");
    std::fs::create_dir(&dir).unwrap();
    let o = run(&dir);
    assert!(!o.status.success(), "{}", text(&o.stderr));
    let line = text(&o.stderr).lines().find(|l| l.starts_with("oxprof:")).map(str::to_string).unwrap_or_default();
    assert!(line.contains(&format!("'log={}': cannot open the log file: Is a directory", dir.display())), "{line}");
    assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 0);
}

use std::os::unix::fs::OpenOptionsExt;

#[test]
fn log_file_planted_as_fifo_or_directory_is_refused_at_once() {
    log_planted_as_fifo_or_directory(Who::Me);
}

#[test]
#[ignore = "needs root; scripts/test.sh runs it when run as root"]
fn log_file_planted_as_fifo_or_directory_in_another_users_jvm() {
    log_planted_as_fifo_or_directory(Who::Nobody);
}

/// Runs `argv` in new pid and mount namespaces with `root` as its root
/// directory (`pivot_root`, as a container runtime does): `root` gets
/// /usr, /etc, /dev, /bin and /lib binds and its own /proc and /tmp
/// (sticky, world-writable). Needs root. The attach crate's container
/// test uses the same script.
fn spawn_in_container(root: &Path, argv: &[&OsStr]) -> Container {
    let script = include_str!("../../attach/tests/container.sh");
    let mut cmd = Command::new("unshare");
    cmd.args(["--mount", "--pid", "--fork", "--kill-child", "sh", "-c", script, "sh"]).arg(root).arg("pivot").args(argv);
    let unshare = RunningJvm::spawn(cmd, root, "ready");
    let jvm = container_jvm_pid(unshare.pid());
    Container { unshare, jvm }
}

/// A JVM in a container, killed on drop with its `unshare`: `--kill-child`
/// gives the JVM a parent-death signal, but setpriv's change of user clears
/// it, so the JVM (pid 1 of its namespace) would outlive a failed test.
struct Container {
    unshare: RunningJvm,
    jvm: u32,
}

impl Container {
    /// The JVM's pid, as we see it.
    fn pid(&self) -> u32 {
        self.jvm
    }

    fn alive(&mut self) -> bool {
        self.unshare.alive()
    }
}

impl Drop for Container {
    fn drop(&mut self) {
        // SAFETY: kill takes a pid and a signal number by value.
        unsafe { libc::kill(self.jvm as libc::pid_t, libc::SIGKILL) };
    }
}

/// The pid of `unshare`'s child (the JVM, once setpriv exec'd it).
fn container_jvm_pid(unshare: u32) -> u32 {
    let children = std::fs::read_to_string(format!("/proc/{unshare}/task/{unshare}/children")).unwrap();
    children.split_whitespace().next().expect("unshare has no child").parse().unwrap()
}

/// The name `oxprof attach` first gives its agent's copy in a JVM's /tmp:
/// `liboxprof-<FNV-1a of its bytes, 16 hex digits>.so` (crates/attach,
/// `copy_name`); the test checks below that the plant was met there.
fn copy_name(agent: &Path) -> String {
    let hash = std::fs::read(agent).unwrap().iter().fold(0xcbf2_9ce4_8422_2325u64, |h, &b| (h ^ b as u64).wrapping_mul(0x0100_0000_01b3));
    format!("liboxprof-{hash:016x}.so")
}

/// The agent library a JVM mapped, as the JVM names it.
fn mapped_agent(pid: u32) -> Option<String> {
    let maps = std::fs::read_to_string(format!("/proc/{pid}/maps")).ok()?;
    maps.lines().filter_map(|l| l.split_whitespace().nth(5)).find(|p| p.contains("liboxprof")).map(str::to_string)
}

/// A JVM of nobody's in a container (its own mount and pid namespaces,
/// another root) does not see our agent, so `oxprof attach` copies it into
/// the JVM's /tmp, as the JVM's user. Something planted at the copy's name
/// (a link to a file of nobody's, a FIFO, a directory, another library of
/// nobody's) is never followed, opened for writing, waited on or
/// overwritten: the copy goes to a fresh name, and profiling works.
/// Attached by root and by nobody.
#[test]
#[ignore = "needs root; scripts/test.sh runs it when run as root"]
fn agent_copy_in_a_container_meets_a_planted_name() {
    assert_eq!(euid(), 0, "needs root (namespaces, a JVM of another user)");
    let name = copy_name(&agent());
    let classes = Scratch::new("hostile-copy-classes");
    compile(&classes.0, &["CpuBurn.java"]);
    for cli in [Who::Me, Who::Nobody] {
        // "none" first: the copy takes `name` when nothing is there, so
        // the plants below are met where the copy would go.
        for plant in ["none", "symlink", "fifo", "directory", "other library"] {
            let s = Scratch::new(&format!("hostile-copy-{cli:?}-{}", plant.replace(' ', "-")));
            chmod(&s.0, 0o755);
            let root = s.path("root");
            std::fs::create_dir_all(root.join("app")).unwrap();
            std::fs::create_dir_all(root.join("tmp")).unwrap();
            chmod(&root.join("tmp"), 0o1777);
            for class in std::fs::read_dir(&classes.0).unwrap() {
                let class = class.unwrap().path();
                std::fs::copy(&class, root.join("app").join(class.file_name().unwrap())).unwrap();
            }
            // A file of nobody's inside the container, which nobody may write.
            let victim = root.join("home-nobody.txt");
            std::fs::write(&victim, PRECIOUS).unwrap();
            Who::Nobody.own(&victim);
            let planted = root.join("tmp").join(&name);
            match plant {
                "symlink" => symlink("/home-nobody.txt", &planted).unwrap(),
                "fifo" => mkfifo(&planted),
                "directory" => std::fs::create_dir(&planted).unwrap(),
                "other library" => std::fs::write(&planted, "\x7fELF not oxprof's\n").unwrap(),
                _ => {}
            }
            if plant != "none" {
                Who::Nobody.own(&planted);
            }
            let java = std::fs::canonicalize(java()).unwrap();
            let argv: Vec<&OsStr> = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]
                .iter()
                .map(OsStr::new)
                .chain([java.as_os_str()])
                .chain(["-cp", "/app", "CpuBurn", "600"].iter().map(OsStr::new))
                .collect();
            let mut container = spawn_in_container(&root, &argv);
            let pid = container.pid();
            let what = format!("{plant}, attached by {cli:?}");
            let o = attach_as(cli, pid, &["start", "--interval", "2ms", "-o", "/tmp/p.collapsed"]);
            assert!(o.status.success(), "{what}: {}{}", text(&o.stdout), text(&o.stderr));
            wait_for_cpu(pid, process_cpu_ms(pid), 500, &what);
            let o = attach_as(cli, pid, &["stop"]);
            assert!(o.status.success(), "{what}: {}{}", text(&o.stdout), text(&o.stderr));
            // The copy went to another name; it is nobody's and not writable by others.
            let mapped = mapped_agent(pid).unwrap_or_else(|| panic!("{what}: the agent is not mapped"));
            let copy = Path::new(&mapped).file_name().unwrap().to_string_lossy().into_owned();
            assert!(mapped.starts_with("/tmp/liboxprof-") && (copy == name) == (plant == "none"), "{what}: the JVM loaded {mapped}, the name planted {name}");
            let m = std::fs::symlink_metadata(root.join("tmp").join(&copy)).unwrap();
            assert_eq!((m.is_file(), m.uid(), m.mode() & 0o777), (true, NOBODY, 0o644), "{what}");
            assert_eq!(std::fs::read(root.join("tmp").join(&copy)).unwrap(), std::fs::read(agent()).unwrap(), "{what}");
            // The plant is as it was.
            let m = std::fs::symlink_metadata(&planted).unwrap();
            match plant {
                "none" => {}
                "symlink" => assert!(m.file_type().is_symlink(), "{what}"),
                "fifo" => assert!(m.file_type().is_fifo(), "{what}"),
                "directory" => assert!(m.is_dir() && std::fs::read_dir(&planted).unwrap().count() == 0, "{what}"),
                _ => assert_eq!(std::fs::read(&planted).unwrap(), b"\x7fELF not oxprof's\n", "{what}"),
            }
            assert_eq!(std::fs::read_to_string(&victim).unwrap(), PRECIOUS, "{what}");
            let profile = root.join("tmp/p.collapsed");
            assert!(samples_with(&read_collapsed(&profile), "CpuBurn.spin") > 50, "{what}");
            assert_eq!(std::fs::metadata(&profile).unwrap().uid(), NOBODY, "{what}");
            assert!(container.alive(), "{what}");
        }
    }
}

/// `%t` in local time, as the agent writes it (`YYYYMMDD-HHMMSS`).
fn timestamp(secs: i64) -> String {
    // SAFETY: all-zero is a valid `tm`; localtime_r fills it from `t`.
    let mut tm: libc::tm = unsafe { std::mem::zeroed() };
    let t = secs as libc::time_t;
    // SAFETY: both pointers are to live locals.
    assert!(!unsafe { libc::localtime_r(&t, &mut tm) }.is_null());
    format!("{:04}{:02}{:02}-{:02}{:02}{:02}", tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec)
}

/// A pattern of `%p` and `%t`: once the JVM's pid is known, every name
/// the next ten seconds can give is kept planted as a link to the victim
/// while the JVM runs. No link is followed, every interval lands in a
/// private fallback (or, for the first, named before the plants, in its
/// place), and together they hold the burner's CPU time.
#[test]
fn time_and_pid_named_intervals_planted_ahead_lose_nothing() {
    let p = place("hostile-loop-time", Who::Me);
    let pattern = p.out.join("t-%p-%t.collapsed");
    let opts = format!("start,event=cpu,interval=1ms,total,loop=1s,file={}", pattern.display());
    let mut cmd = java_cmd([format!("-agentpath:{}={opts}", agent().display()), "-cp".into(), p.s.0.display().to_string(), "CpuBurn".into(), "5".into()]);
    cmd.current_dir(&p.cwd);
    let mut run = RunningJvm::spawn(cmd, &p.cwd, "ready");
    let pid = run.pid();
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let planter = {
        let (stop, out, victim) = (stop.clone(), p.out.clone(), p.victim.clone());
        std::thread::spawn(move || {
            let mut links = Vec::new();
            while !stop.load(std::sync::atomic::Ordering::SeqCst) {
                let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs() as i64;
                for secs in now..now + 10 {
                    let name = out.join(format!("t-{pid}-{}.collapsed", timestamp(secs)));
                    if symlink(&victim, &name).is_ok() {
                        links.push(name);
                    }
                }
                std::thread::sleep(Duration::from_millis(200));
            }
            links
        })
    };
    let o = finish_within(&mut run, WORK_CAP, "%p-%t");
    stop.store(true, std::sync::atomic::Ordering::SeqCst);
    let links = planter.join().unwrap();
    let log = text(&o.stderr);
    assert!(o.status.success(), "{log}");
    let planted = Plants { victim: p.victim.clone(), links, fifos: vec![], dirs: vec![], users: vec![] };
    planted.check();
    let moved = fallbacks(&log);
    for (wanted, fallback, why) in &moved {
        assert!(planted.links.contains(wanted), "{} was not planted\n{log}", wanted.display());
        assert_eq!(why, "it is a symbolic link, which oxprof does not follow");
        assert_private(fallback, &p.cwd, Who::Me);
    }
    let in_place: Vec<PathBuf> = std::fs::read_dir(&p.out)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|f| f.to_string_lossy().contains(&format!("t-{pid}-")) && std::fs::symlink_metadata(f).unwrap().is_file())
        .collect();
    assert!(in_place.len() <= 1, "intervals written in place of planted names: {in_place:?}");
    let files: Vec<PathBuf> = in_place.into_iter().chain(moved.iter().map(|(_, f, _)| f.clone())).collect();
    assert!(files.len() >= 5 && moved.len() + 1 >= files.len(), "{} intervals, {} moved\n{log}", files.len(), moved.len());
    let truth: f64 = text(&o.stdout).lines().find_map(|l| l.strip_prefix("CPU_NS ")).expect("CPU_NS").trim().parse().unwrap();
    let ratio = files.iter().map(|f| samples_with(&read_collapsed(f), "CpuBurn.spin")).sum::<u64>() as f64 / truth;
    eprintln!("%p-%t: {} intervals, {} moved to fallbacks, samples {ratio:.3} of the burner's CPU time", files.len(), moved.len());
    assert!((0.93..=1.05).contains(&ratio), "the intervals hold {ratio:.3} of the program's CPU time\n{log}");
}

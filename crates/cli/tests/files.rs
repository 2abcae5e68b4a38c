//! The agent's own files under the real agent: a symbolic link planted where
//! the JVM writes is never followed (the file it points to is untouched, the
//! profile goes to a private fallback directory and the run says where), an
//! existing regular file is reused, new files are 0600.

mod common;

use std::os::unix::fs::{symlink, MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};

use common::*;

const PRECIOUS: &str = "precious: not the JVM's to truncate\n";

/// A file of someone else's the JVM's user can write, and the test dir the
/// JVM runs in.
fn victim_and_cwd(s: &Scratch) -> (PathBuf, PathBuf) {
    let victim = s.path("victim.txt");
    std::fs::write(&victim, PRECIOUS).unwrap();
    let cwd = s.path("cwd");
    std::fs::create_dir(&cwd).unwrap();
    (victim, cwd)
}

fn mode(p: &Path) -> u32 {
    std::fs::symlink_metadata(p).unwrap().permissions().mode() & 0o7777
}

/// The fallback path a warning names: `... to WANTED: WHY; <verb> FALLBACK instead`.
fn fallback_in(err: &str, wanted: &Path, verb: &str) -> PathBuf {
    let line = err
        .lines()
        .find(|l| l.contains(&format!("{}: ", wanted.display())) && l.contains(verb))
        .unwrap_or_else(|| panic!("no fallback message for {}:\n{err}", wanted.display()));
    assert!(line.contains("it is a symbolic link, which oxprof does not follow"), "{line}");
    PathBuf::from(line.rsplit(verb).next().unwrap().trim_end_matches(" instead"))
}

/// The fallback is in a new private directory `oxprof-<pid>-XXXXXX` (0700)
/// under the working directory, and is 0600.
fn assert_private_fallback(fallback: &Path, cwd: &Path) {
    let dir = fallback.parent().unwrap();
    assert_eq!(dir.parent(), Some(cwd), "fallback {} not in a directory of the working directory", fallback.display());
    let name = dir.file_name().unwrap().to_string_lossy().into_owned();
    assert!(name.starts_with("oxprof-") && name.rsplit('-').next().is_some_and(|r| r.len() == 6), "{name}");
    let meta = std::fs::symlink_metadata(dir).unwrap();
    assert!(meta.is_dir());
    assert_eq!(mode(dir), 0o700, "{}", dir.display());
    assert_eq!(mode(fallback), 0o600, "{}", fallback.display());
}

fn assert_untouched(victim: &Path, link: &Path) {
    assert_eq!(std::fs::read_to_string(victim).unwrap(), PRECIOUS, "the JVM wrote through the symbolic link {}", link.display());
    assert!(std::fs::symlink_metadata(link).unwrap().file_type().is_symlink());
}

#[test]
fn an_output_file_planted_as_a_symlink_is_not_followed_and_the_profile_goes_to_a_private_fallback() {
    let s = Scratch::new("symlink-out");
    compile(&s.0, &["Hot.java"]);
    let (victim, cwd) = victim_and_cwd(&s);

    // Collapsed stacks, written at exit.
    let link = cwd.join("p.collapsed");
    symlink(&victim, &link).unwrap();
    let o = run_java(&cwd, &format!("start,interval=2ms,file={}", link.display()), &[], &s.0, &["Hot", "0.5"]);
    let err = text(&o.stderr);
    assert!(o.status.success(), "{err}");
    assert_untouched(&victim, &link);
    let fallback = fallback_in(&err, &link, "wrote it to ");
    assert_private_fallback(&fallback, &cwd);
    assert!(samples_with(&read_collapsed(&fallback), "Hot.main") > 0, "{err}");
    assert!(err.contains(&format!("profile written to {}", fallback.display())), "{err}");

    // A JFR recording, created when profiling starts.
    let link = cwd.join("r.jfr");
    symlink(&victim, &link).unwrap();
    let o = run_java(&cwd, &format!("start,interval=2ms,file={}", link.display()), &[], &s.0, &["Hot", "0.5"]);
    let err = text(&o.stderr);
    assert!(o.status.success(), "{err}");
    assert_untouched(&victim, &link);
    let fallback = fallback_in(&err, &link, "writing the JFR recording to ");
    assert_private_fallback(&fallback, &cwd);
    let jfr = std::fs::read(&fallback).unwrap();
    assert!(jfr.starts_with(b"FLR\0") && jfr.len() > 1000, "{} is not a JFR recording ({} bytes)", fallback.display(), jfr.len());

    // oxprof record passes the warning on and names the fallback.
    let link = cwd.join("rec.html");
    symlink(&victim, &link).unwrap();
    let o = oxprof_cmd()
        .current_dir(&cwd)
        .args(["record", "--interval", "2ms", "-o"])
        .arg(&link)
        .arg("--")
        .arg(java())
        .args(["-cp", s.0.to_str().unwrap(), "Hot", "0.5"])
        .output()
        .unwrap();
    let err = text(&o.stderr);
    assert!(o.status.success(), "{err}");
    assert_untouched(&victim, &link);
    let fallback = fallback_in(&err, &link, "wrote it to ");
    assert_private_fallback(&fallback, &cwd);
    assert!(err.contains(&format!("profile written to {}", fallback.display())), "{err}");
    assert!(std::fs::read_to_string(&fallback).unwrap().contains("Hot.sqrtSin"));
}

#[test]
fn a_log_file_planted_as_a_symlink_is_refused_and_existing_regular_files_are_reused() {
    let s = Scratch::new("symlink-log");
    compile(&s.0, &["Hot.java"]);
    let (victim, cwd) = victim_and_cwd(&s);

    let link = cwd.join("agent.log");
    symlink(&victim, &link).unwrap();
    let opts = format!("start,log={}", link.display());
    assert_refused(
        &run_java(&cwd, &opts, &[], &s.0, &["Hot", "0.1"]),
        &opts,
        &format!("invalid agent option 'log={}': cannot open the log file: it is a symbolic link, which oxprof does not follow", link.display()),
    );
    assert_untouched(&victim, &link);

    // An existing log is appended to and an existing output overwritten,
    // with a line saying so.
    let log = cwd.join("old.log");
    std::fs::write(&log, "an earlier run\n").unwrap();
    let out = cwd.join("old.collapsed");
    std::fs::write(&out, "Stale.stack 99999\n").unwrap();
    let o = run_java(&cwd, &format!("start,interval=2ms,file={},log={}", out.display(), log.display()), &[], &s.0, &["Hot", "0.5"]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let logged = std::fs::read_to_string(&log).unwrap();
    assert!(logged.starts_with("an earlier run\n[oxprof] "), "{logged}");
    assert!(logged.contains(&format!("[oxprof] overwriting the existing file {}\n", out.display())), "{logged}");
    let stacks = read_collapsed(&out);
    assert!(samples_with(&stacks, "Hot.main") > 0 && samples_with(&stacks, "Stale.stack") == 0);

    // New files are the JVM user's alone.
    let (log, out) = (cwd.join("new.log"), cwd.join("new.collapsed"));
    let o = run_java(&cwd, &format!("start,interval=2ms,file={},log={}", out.display(), log.display()), &[], &s.0, &["Hot", "0.3"]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert!(!std::fs::read_to_string(&log).unwrap().contains("overwriting"));
    for p in [&log, &out] {
        let meta = std::fs::metadata(p).unwrap();
        assert_eq!((meta.mode() & 0o777, meta.nlink()), (0o600, 1), "{}", p.display());
    }
}

/// Unmounts a tmpfs when dropped.
struct Mount(PathBuf);

impl Drop for Mount {
    fn drop(&mut self) {
        let _ = std::process::Command::new("umount").arg(&self.0).status();
    }
}

/// A 1 MiB tmpfs mounted at the scratch directory's `full` (root only),
/// unmounted when dropped.
fn small_tmpfs(s: &Scratch) -> Mount {
    let full = s.path("full");
    std::fs::create_dir(&full).unwrap();
    let st = std::process::Command::new("mount").args(["-t", "tmpfs", "-o", "size=1m,mode=0777", "tmpfs"]).arg(&full).status().unwrap();
    assert!(st.success(), "mount tmpfs (root needed)");
    Mount(full)
}

/// Fills what is left of the file system holding `dir` (a file `filler`).
fn fill(dir: &Path) {
    let mut f = std::fs::File::create(dir.join("filler")).unwrap();
    let _ = std::io::Write::write_all(&mut f, &vec![0u8; 1 << 20]);
}

/// A full disk at exit: the previous profile at the chosen path is left
/// whole (the new one is written beside it and renamed only once
/// complete), the log says the write failed and where the profile went
/// instead, and nothing recorded is lost. Needs root (mounts a 1 MiB tmpfs).
#[test]
#[ignore = "needs root; scripts/test.sh runs it when run as root"]
fn a_full_disk_leaves_the_previous_profile_whole_and_the_new_one_in_a_fallback() {
    let s = Scratch::new("full-disk");
    compile(&s.0, &["Hot.java"]);
    let mount = small_tmpfs(&s);
    let full = mount.0.clone();
    let out = full.join("profile.html");
    let previous = "<html>the previous profile, kept whole</html>\n";
    std::fs::write(&out, previous).unwrap();
    // Fill the rest: an HTML profile (about 100 KiB at least) cannot fit.
    fill(&full);
    let cwd = s.path("cwd");
    std::fs::create_dir(&cwd).unwrap();
    let o = run_java(&cwd, &format!("start,interval=2ms,file={}", out.display()), &[], &s.0, &["Hot", "0.5"]);
    let err = text(&o.stderr);
    assert!(o.status.success(), "{err}");
    assert_eq!(std::fs::read_to_string(&out).unwrap(), previous, "the previous profile was damaged\n{err}");
    let names: Vec<String> = std::fs::read_dir(&full).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
    assert_eq!(names.len(), 2, "a temporary file was left behind: {names:?}");
    let line = err.lines().find(|l| l.contains(&format!("could not write the profile to {}", out.display()))).unwrap_or_else(|| panic!("{err}"));
    assert!(line.contains("No space left on device"), "{line}");
    let fallback = PathBuf::from(line.rsplit("wrote it to ").next().unwrap().trim_end_matches(" instead"));
    assert_private_fallback(&fallback, &cwd);
    assert!(std::fs::read_to_string(&fallback).unwrap().contains("Hot.sqrtSin"), "the fallback lacks the samples");
}

/// A full disk while a JFR recording streams over an existing recording:
/// the previous recording is left byte for byte (the new one goes beside
/// it and would take its place only once a chunk is whole), the JVM runs
/// to its end, and the log says the new recording is incomplete and where
/// what fitted is. Needs root (mounts a 1 MiB tmpfs).
#[test]
#[ignore = "needs root; scripts/test.sh runs it when run as root"]
fn a_full_disk_leaves_the_previous_jfr_recording_whole() {
    let s = Scratch::new("full-disk-jfr");
    compile(&s.0, &["Hot.java"]);
    let mount = small_tmpfs(&s);
    let full = mount.0.clone();
    let rec = full.join("rec.jfr");
    let o = run_java(&s.0, &format!("start,interval=2ms,file={}", rec.display()), &[], &s.0, &["Hot", "0.3"]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let previous = std::fs::read(&rec).unwrap();
    assert!(previous.starts_with(b"FLR\0"), "the first recording is not JFR");
    // Fill the rest: a chunk with its metadata (tens of KiB) cannot fit.
    fill(&full);
    let o = run_java(&s.0, &format!("start,interval=1ms,file={}", rec.display()), &[], &s.0, &["Hot", "0.5"]);
    let err = text(&o.stderr);
    assert!(o.status.success(), "{err}");
    assert!(std::fs::read(&rec).unwrap() == previous, "the previous recording was damaged\n{err}");
    let line = err.lines().find(|l| l.contains("is incomplete")).unwrap_or_else(|| panic!("no word of the incomplete recording:\n{err}"));
    assert!(line.contains("No space left on device") && line.contains("/.rec.jfr."), "{line}");
}

//! What `/proc` tells about a process: its identity and namespaces
//! ([`inspect`]), the libraries it has mapped ([`loaded_library`]), its
//! command line and whether it catches `SIGQUIT`.

use std::io;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use crate::error::AttachError;

pub(crate) fn our_euid() -> u32 {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() }
}

pub(crate) fn our_egid() -> u32 {
    // SAFETY: getegid has no preconditions and cannot fail.
    unsafe { libc::getegid() }
}

/// A process we may attach to, as [`inspect`] found it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    /// Its pid in our pid namespace.
    pub pid: u32,
    /// Its pid in its own pid namespace (the number in `/tmp/.java_pid<N>`).
    pub ns_pid: u32,
    /// Its effective uid and gid (the JVM accepts only peers with these, or root).
    pub uid: u32,
    pub gid: u32,
    /// `/proc/<pid>/root`: its root directory, in its mount namespace.
    pub root: PathBuf,
    /// `/proc/<pid>/cwd`: its working directory.
    pub cwd: PathBuf,
}

impl Target {
    /// Process `pid` as `/proc` shows it: reached through its root and
    /// working directory links there.
    pub(crate) fn seen_in_proc(pid: u32, status: &Status) -> Target {
        Target {
            pid,
            ns_pid: status.ns_pid,
            uid: status.uid,
            gid: status.gid,
            root: PathBuf::from(format!("/proc/{pid}/root")),
            cwd: PathBuf::from(format!("/proc/{pid}/cwd")),
        }
    }

    /// The attach listener's socket, as we reach it.
    pub fn socket_path(&self) -> PathBuf {
        self.root.join(format!("tmp/.java_pid{}", self.ns_pid))
    }
}

/// Looks at process `pid`: who it runs as, its namespaces, and whether it
/// is a HotSpot JVM (`libjvm.so` mapped). Sends it nothing.
pub fn inspect(pid: u32) -> Result<Target, AttachError> {
    let status = read_status(pid)?;
    if status.state == 'Z' || status.state == 'X' {
        return Err(AttachError::NotAJvm { pid, why: "it has exited (zombie)".into() });
    }
    let our_uid = our_euid();
    if our_uid != 0 && our_uid != status.uid {
        return Err(AttachError::PermissionDenied {
            pid,
            target_uid: status.uid,
            our_uid,
            why: "the JVM only accepts attach requests from its own user or root".into(),
        });
    }
    let mut maps = match mapped_files(pid) {
        Ok(m) => m,
        Err(e) => return Err(proc_error(pid, &format!("reading /proc/{pid}/maps"), e, status.uid)),
    };
    // The `java` launcher in its first milliseconds has not loaded libjvm
    // yet: give it up to LAUNCHER_WAIT to do so.
    let since = std::time::Instant::now();
    while !maps.iter().any(|p| file_name_is(p, "libjvm.so")) && is_java_launcher(pid, &maps) && since.elapsed() < LAUNCHER_WAIT {
        std::thread::sleep(std::time::Duration::from_millis(5));
        maps = mapped_files(pid).unwrap_or_default();
    }
    if maps.is_empty() {
        return Err(AttachError::NotAJvm { pid, why: "it has no memory mappings (a kernel thread?)".into() });
    }
    if maps.iter().any(|p| file_name_contains(p, "libj9vm")) {
        return Err(AttachError::NotAJvm {
            pid,
            why: "it is an OpenJ9 (Semeru) JVM, whose attach mechanism differs from HotSpot's; only HotSpot JVMs are supported".into(),
        });
    }
    if !maps.iter().any(|p| file_name_is(p, "libjvm.so")) {
        let exe = std::fs::read_link(format!("/proc/{pid}/exe")).map(|p| p.display().to_string()).unwrap_or_else(|_| "?".into());
        return Err(AttachError::NotAJvm { pid, why: format!("no libjvm.so is mapped into it (its executable is {exe})") });
    }
    Ok(Target::seen_in_proc(pid, &status))
}

/// How long [`inspect`] waits for a `java` launcher to load libjvm.
const LAUNCHER_WAIT: std::time::Duration = std::time::Duration::from_secs(5);

/// Whether `pid` is HotSpot's `java` launcher (its executable is named
/// `java`, or it maps the launcher's `libjli.so`), which loads libjvm.
fn is_java_launcher(pid: u32, maps: &[PathBuf]) -> bool {
    maps.iter().any(|p| file_name_is(p, "libjli.so")) || std::fs::read_link(format!("/proc/{pid}/exe")).is_ok_and(|e| file_name_is(&e, "java"))
}

/// The path (in the process's own mount namespace) of the first mapped file
/// whose file name contains `name_contains`, e.g. an already-loaded
/// `liboxprof.so`. `None` if there is none or the maps are unreadable.
/// The process's user chose that path: load it again only as
/// [`crate::AgentLibrary::InTarget`], never open it as a path of ours.
pub fn loaded_library(pid: u32, name_contains: &str) -> Option<PathBuf> {
    mapped_files(pid).ok()?.into_iter().find(|p| file_name_contains(p, name_contains))
}

fn file_name_contains(p: &Path, s: &str) -> bool {
    p.file_name().is_some_and(|n| n.to_string_lossy().contains(s))
}

fn file_name_is(p: &Path, s: &str) -> bool {
    p.file_name().is_some_and(|n| n == s)
}

/// The fields of `/proc/<pid>/status` we use.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Status {
    pub state: char,
    pub ns_pid: u32,
    pub uid: u32,
    pub gid: u32,
    /// `SigCgt`: the signals it catches, bit `n - 1` for signal `n`.
    pub caught: u64,
    /// `Groups`: its supplementary groups.
    pub groups: Vec<u32>,
}

impl Status {
    pub fn catches_sigquit(&self) -> bool {
        self.caught & (1 << (libc::SIGQUIT - 1)) != 0
    }
}

pub(crate) fn read_status(pid: u32) -> Result<Status, AttachError> {
    let path = format!("/proc/{pid}/status");
    match std::fs::read_to_string(&path) {
        Ok(text) => parse_status(pid, &text).ok_or_else(|| AttachError::Protocol(format!("cannot parse {path}"))),
        Err(e) => Err(proc_error(pid, &format!("reading {path}"), e, u32::MAX)),
    }
}

/// Parses `/proc/<pid>/status`. `NSpid` is missing before Linux 4.1: the pid
/// is then the same in every namespace we can see.
pub(crate) fn parse_status(pid: u32, text: &str) -> Option<Status> {
    let mut state = None;
    let mut ns_pid = pid;
    let (mut uid, mut gid, mut caught) = (None, None, None);
    let mut groups = Vec::new();
    for line in text.lines() {
        let Some((key, value)) = line.split_once(':') else { continue };
        let mut fields = value.split_whitespace();
        match key {
            "State" => state = fields.next().and_then(|s| s.chars().next()),
            "NSpid" => ns_pid = fields.last().and_then(|s| s.parse().ok())?,
            // Real, effective, saved, filesystem: the JVM compares peers with its effective ids.
            "Uid" => uid = fields.nth(1).and_then(|s| s.parse().ok()),
            "Gid" => gid = fields.nth(1).and_then(|s| s.parse().ok()),
            "SigCgt" => caught = fields.next().and_then(|s| u64::from_str_radix(s, 16).ok()),
            "Groups" => groups = fields.filter_map(|s| s.parse().ok()).collect(),
            _ => {}
        }
    }
    Some(Status { state: state?, ns_pid, uid: uid?, gid: gid?, caught: caught?, groups })
}

/// Maps an error reading `/proc/<pid>/...` to what it means.
pub(crate) fn proc_error(pid: u32, what: &str, e: io::Error, target_uid: u32) -> AttachError {
    match e.raw_os_error() {
        Some(libc::ENOENT) | Some(libc::ESRCH) => AttachError::NoSuchProcess(pid),
        Some(libc::EACCES) | Some(libc::EPERM) => AttachError::PermissionDenied { pid, target_uid, our_uid: our_euid(), why: format!("{what}: {e}") },
        _ => AttachError::io(what, e),
    }
}

pub(crate) fn exists(pid: u32) -> bool {
    Path::new(&format!("/proc/{pid}")).exists()
}

/// The distinct files mapped into `pid`, in mapping order, as `pid` names
/// them.
///
/// The kernel writes the paths in `/proc/<pid>/maps` relative to the
/// reader's root when it can, else relative to the root of the process's
/// mount namespace (a container set up with `pivot_root`: the paths are
/// then already the container's). For a process under a chroot we can see
/// into, `/proc/<pid>/root` reads as that directory, which we remove.
pub(crate) fn mapped_files(pid: u32) -> io::Result<Vec<PathBuf>> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/maps"))?;
    let root = std::fs::read_link(format!("/proc/{pid}/root")).ok().filter(|r| r != Path::new("/"));
    Ok(parse_maps(&text).into_iter().map(|p| in_root(p, root.as_deref())).collect())
}

/// `path` (as we see it) as a process whose root directory is `root` sees it.
fn in_root(path: PathBuf, root: Option<&Path>) -> PathBuf {
    match root.and_then(|r| path.strip_prefix(r).ok()) {
        Some(rest) => Path::new("/").join(rest),
        None => path,
    }
}

pub(crate) fn parse_maps(text: &str) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = Vec::new();
    for line in text.lines() {
        // address perms offset dev inode path; the path may contain spaces.
        let Some(start) = line.find(" /") else { continue };
        let path = line[start + 1..].trim_end();
        let path = path.strip_suffix(" (deleted)").unwrap_or(path);
        let path = PathBuf::from(path);
        if !out.contains(&path) {
            out.push(path);
        }
    }
    out
}

/// The command line of `pid`, one string per argument.
pub(crate) fn cmdline(pid: u32) -> io::Result<Vec<String>> {
    let raw = std::fs::read(format!("/proc/{pid}/cmdline"))?;
    Ok(split_nul(&raw))
}

/// The value of environment variable `name` in `pid`'s initial environment.
pub(crate) fn environ_var(pid: u32, name: &str) -> Option<String> {
    let raw = std::fs::read(format!("/proc/{pid}/environ")).ok()?;
    split_nul(&raw).into_iter().find_map(|kv| kv.strip_prefix(name).and_then(|rest| rest.strip_prefix('=')).map(str::to_string))
}

pub(crate) fn split_nul(raw: &[u8]) -> Vec<String> {
    let raw = raw.strip_suffix(&[0]).unwrap_or(raw);
    if raw.is_empty() {
        return Vec::new();
    }
    raw.split(|&b| b == 0).map(|a| String::from_utf8_lossy(a).into_owned()).collect()
}

/// Whether `pid` sees the same root directory as we do (no chroot, no
/// container): then paths in our mount namespace mean the same to it.
pub(crate) fn same_root(target: &Target) -> Result<bool, AttachError> {
    let ours = std::fs::metadata("/proc/self/root").map_err(|e| AttachError::io("stat /proc/self/root", e))?;
    let theirs = std::fs::metadata(&target.root).map_err(|e| proc_error(target.pid, &format!("stat {}", target.root.display()), e, target.uid))?;
    Ok(ours.dev() == theirs.dev() && ours.ino() == theirs.ino())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_fields() {
        let text = "Name:\tjava\nUmask:\t0022\nState:\tS (sleeping)\nTgid:\t4242\nNgid:\t0\nPid:\t4242\nPPid:\t1\n\
                    Uid:\t1000\t1001\t1001\t1001\nGid:\t50\t51\t51\t51\nGroups:\t24 27 \nNSpid:\t4242\t7\n\
                    SigQ:\t0/63422\nSigPnd:\t0000000000000000\nShdPnd:\t0000000000000000\nSigBlk:\t0000000000000000\n\
                    SigIgn:\t0000000000000000\nSigCgt:\t2000000181005ccf\n";
        let s = parse_status(4242, text).unwrap();
        assert_eq!(s, Status { state: 'S', ns_pid: 7, uid: 1001, gid: 51, caught: 0x2000000181005ccf, groups: vec![24, 27] });
        assert!(s.catches_sigquit());
        // `sleep` catches nothing; no NSpid line on old kernels.
        let s = parse_status(9, "State:\tS (sleeping)\nUid:\t0\t0\t0\t0\nGid:\t0\t0\t0\t0\nSigCgt:\t0000000000000000\n").unwrap();
        assert_eq!(s.ns_pid, 9);
        assert!(s.groups.is_empty());
        assert!(!s.catches_sigquit());
        assert!(parse_status(9, "garbage").is_none());
    }

    #[test]
    fn maps_paths() {
        let text = "7f0000000000-7f0000001000 r--p 00000000 08:01 123 /usr/lib/jvm/java-17/lib/server/libjvm.so\n\
                    7f0000001000-7f0000002000 r-xp 00001000 08:01 123 /usr/lib/jvm/java-17/lib/server/libjvm.so\n\
                    7f0000002000-7f0000003000 rw-p 00000000 00:00 0 \n\
                    7f0000003000-7f0000004000 rw-p 00000000 00:00 0 [heap]\n\
                    7f0000004000-7f0000005000 r-xp 00000000 08:01 456 /tmp/my dir/liboxprof.so (deleted)\n";
        let files = parse_maps(text);
        assert_eq!(files, vec![PathBuf::from("/usr/lib/jvm/java-17/lib/server/libjvm.so"), PathBuf::from("/tmp/my dir/liboxprof.so")]);
        assert!(files.iter().any(|p| file_name_is(p, "libjvm.so")));
        assert!(!files.iter().any(|p| file_name_is(p, "jvm.so")));
    }

    #[test]
    fn chroot_paths() {
        let root = Path::new("/srv/jail");
        assert_eq!(in_root("/srv/jail/tmp/liboxprof.so".into(), Some(root)), PathBuf::from("/tmp/liboxprof.so"));
        assert_eq!(in_root("/srv/jailbreak/x.so".into(), Some(root)), PathBuf::from("/srv/jailbreak/x.so"));
        assert_eq!(in_root("/usr/lib/x.so".into(), None), PathBuf::from("/usr/lib/x.so"));
    }

    #[test]
    fn nul_separated() {
        assert_eq!(split_nul(b"java\0-cp\0x\0Main\0"), vec!["java", "-cp", "x", "Main"]);
        assert!(split_nul(b"").is_empty());
    }

    #[test]
    fn ourselves() {
        let pid = std::process::id();
        let s = read_status(pid).unwrap();
        assert_eq!(s.uid, our_euid());
        assert!(matches!(inspect(pid), Err(AttachError::NotAJvm { .. })));
        assert!(loaded_library(pid, "libc").is_some() || loaded_library(pid, "ld-").is_some());
        let t = Target { pid, ns_pid: pid, uid: 0, gid: 0, root: "/proc/self/root".into(), cwd: "/proc/self/cwd".into() };
        assert!(same_root(&t).unwrap());
    }
}

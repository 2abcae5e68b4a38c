//! Loading a JVMTI agent library into a running JVM (the `load` attach
//! command), including making the library visible to a JVM in another
//! mount namespace (a container, a chroot).

use std::io::{self, Read, Write};
use std::os::fd::OwnedFd;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::creds;
use crate::error::AttachError;
use crate::process::{self, Target};
use crate::protocol::{execute, Reply};
use crate::target_files::{metadata_in_target, open_at, open_in_target, remove_target_file, unlink_at};

/// What the JVM said after loading an agent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LoadReply {
    /// What `Agent_OnAttach` returned (0 is success; the JVM unloads an
    /// agent that returns anything else).
    pub agent_return_code: i32,
    /// The JVM's whole reply text.
    pub text: String,
}

/// The agent library to load, and in whose file system its path is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AgentLibrary {
    /// A library of ours, in our file system, that we trust: the one
    /// installed beside our program. When the JVM runs under another root
    /// directory, we read it and copy it into the JVM's `/tmp`.
    Ours(PathBuf),
    /// An absolute path as the JVM names it, in its own mount namespace,
    /// e.g. from [`crate::loaded_library`]: whoever runs the JVM controls
    /// it, so it is only looked up there, as the JVM's user, and passed to
    /// the JVM as is; never opened, read or copied by us.
    InTarget(PathBuf),
}

/// Loads `agent` into the JVM, calling its `Agent_OnAttach` with `options`.
///
/// When the JVM runs under another root directory than ours, our library
/// ([`AgentLibrary::Ours`]) is copied into the JVM's `/tmp` under a name
/// derived from its contents (so loading the same library again reuses the
/// copy, and the JVM's loader sees the same library), readable by the JVM's
/// user.
pub fn load_agent(target: &Target, agent: &AgentLibrary, options: &str, timeout: Duration) -> Result<LoadReply, AttachError> {
    let started = Instant::now();
    let placed = place_agent(target, agent)?;
    let path = placed.in_target.to_str().ok_or_else(|| AttachError::LoadFailed(format!("agent path {} is not valid UTF-8", placed.in_target.display())))?;
    let result = execute(target, "load", &[path, "true", options], timeout.saturating_sub(started.elapsed())).and_then(|r| parse_load_reply(&r));
    match result {
        Err(AttachError::LoadFailed(text)) if placed.copied => {
            let _ = remove_target_file(target, &placed.in_target);
            Err(AttachError::LoadFailed(format!(
                "{}\n(the agent was copied to {path} in the JVM's mount namespace; if its /tmp is mounted noexec, put the agent in an executable directory there and pass that path)",
                text.trim_end()
            )))
        }
        result => result,
    }
}

/// Reads the JVM's reply to `load`. HotSpot answers `return code: N` when it
/// called `Agent_OnAttach`; otherwise its text says why not (the library
/// was not loaded, has no `Agent_OnAttach`, dynamic loading is disabled).
/// JDK 11 and 17 answer those failures with status -1, JDK 21 and later with
/// status 0, so the text decides.
pub fn parse_load_reply(reply: &Reply) -> Result<LoadReply, AttachError> {
    let code = reply.text.lines().find_map(|l| l.trim().strip_prefix("return code:")).and_then(|c| c.trim().parse::<i32>().ok());
    match code {
        Some(agent_return_code) => Ok(LoadReply { agent_return_code, text: reply.text.clone() }),
        None if reply.text.trim().is_empty() => Err(AttachError::LoadFailed(format!("the JVM answered status {} without text", reply.status))),
        None => Err(AttachError::LoadFailed(reply.text.clone())),
    }
}

/// The agent's path as the JVM names it, and whether this call copied it there.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Placed {
    pub in_target: PathBuf,
    pub copied: bool,
}

pub(crate) fn place_agent(target: &Target, agent: &AgentLibrary) -> Result<Placed, AttachError> {
    match agent {
        AgentLibrary::InTarget(path) => in_target(target, path),
        AgentLibrary::Ours(path) => ours(target, path),
    }
}

/// A path in the JVM's namespace: it must name a file there, as the JVM's user sees it.
fn in_target(target: &Target, path: &Path) -> Result<Placed, AttachError> {
    if !path.is_absolute() {
        return Err(AttachError::LoadFailed(format!("agent library {} in JVM {}'s file system: not an absolute path", path.display(), target.pid)));
    }
    let as_target = creds::assume_for_files(target)?;
    match metadata_in_target(&as_target, target, path) {
        Ok(m) if m.is_file() => Ok(Placed { in_target: path.to_path_buf(), copied: false }),
        Ok(_) => Err(AttachError::LoadFailed(format!("agent library {} in JVM {}'s file system is not a file", path.display(), target.pid))),
        Err(_) if !process::exists(target.pid) => Err(AttachError::NoSuchProcess(target.pid)),
        Err(e) => Err(AttachError::LoadFailed(format!("agent library {} in JVM {}'s file system: {e}", path.display(), target.pid))),
    }
}

/// Our library: used by its path where the JVM sees the same file there,
/// else copied into the JVM's /tmp.
fn ours(target: &Target, agent: &Path) -> Result<Placed, AttachError> {
    let abs = std::path::absolute(agent).map_err(|e| AttachError::LoadFailed(format!("agent library {}: {e}", agent.display())))?;
    let failed = |e: io::Error| AttachError::LoadFailed(format!("agent library {}: {e}", abs.display()));
    let file = std::fs::OpenOptions::new().read(true).custom_flags(libc::O_NONBLOCK).open(&abs).map_err(failed)?;
    let meta = file.metadata().map_err(failed)?;
    if !meta.is_file() {
        return Err(AttachError::LoadFailed(format!("agent library {} is not a file", abs.display())));
    }
    if process::same_root(target)? {
        return Ok(Placed { in_target: abs, copied: false });
    }
    {
        // The same file visible at the same path there (a shared mount)?
        let as_target = creds::assume_for_files(target)?;
        if let Ok(theirs) = metadata_in_target(&as_target, target, &abs) {
            if theirs.dev() == meta.dev() && theirs.ino() == meta.ino() {
                return Ok(Placed { in_target: abs, copied: false });
            }
        }
    }
    let mut contents = Vec::new();
    (&file).read_to_end(&mut contents).map_err(failed)?;
    copy_into(target, &abs, &contents)
}

/// `liboxprof.so` → `liboxprof-<hash of contents>.so`.
pub(crate) fn copy_name(agent: &Path, contents: &[u8]) -> String {
    let name = agent.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_else(|| "agent".into());
    let hash = fnv1a(contents);
    // Already a copy of ours (a path from loaded_library): keep its name.
    if name.contains(&format!("-{hash:016x}")) {
        return name;
    }
    match name.split_once('.') {
        Some((stem, ext)) if !stem.is_empty() => format!("{stem}-{hash:016x}.{ext}"),
        _ => format!("{name}-{hash:016x}"),
    }
}

fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, &b| (h ^ b as u64).wrapping_mul(0x0100_0000_01b3))
}

/// Copies our agent's `contents` into the target's /tmp, as the target's user.
fn copy_into(target: &Target, agent: &Path, contents: &[u8]) -> Result<Placed, AttachError> {
    let name = copy_name(agent, contents);
    let as_target = creds::assume(target)?;
    let dir = open_in_target(&as_target, target, Path::new("/tmp"), libc::O_PATH | libc::O_DIRECTORY, 0).map_err(|e| {
        AttachError::LoadFailed(format!(
            "cannot copy the agent into JVM {}'s /tmp: {e}; copy it into the JVM's file system yourself and pass that path",
            target.pid
        ))
    });
    let dir = match dir {
        Ok(d) => d,
        Err(_) if !process::exists(target.pid) => return Err(AttachError::NoSuchProcess(target.pid)),
        Err(e) => return Err(e),
    };
    let mut candidates = vec![name.clone()];
    let unique = format!("{}-{}", std::process::id(), now_nanos());
    candidates.push(match name.rsplit_once('.') {
        Some((stem, ext)) => format!("{stem}-{unique}.{ext}"),
        None => format!("{name}-{unique}"),
    });
    let mut last_error = None;
    for n in candidates {
        let in_target = Path::new("/tmp").join(&n);
        match existing_copy(&dir, &n, target.uid, contents) {
            Existing::Same => return Ok(Placed { in_target, copied: false }),
            Existing::Other => continue,
            Existing::Absent => {}
        }
        match write_new(&dir, &n, contents) {
            Ok(()) => return Ok(Placed { in_target, copied: true }),
            // Another attacher raced us: its copy is fine if complete.
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {
                if existing_copy(&dir, &n, target.uid, contents) == Existing::Same {
                    return Ok(Placed { in_target, copied: false });
                }
            }
            Err(e) => last_error = Some(format!("{}: {e}", in_target.display())),
        }
    }
    if !process::exists(target.pid) {
        return Err(AttachError::NoSuchProcess(target.pid));
    }
    Err(AttachError::LoadFailed(format!(
        "cannot copy the agent into JVM {}'s /tmp ({}); copy it into the JVM's file system yourself and pass that path",
        target.pid,
        last_error.unwrap_or_else(|| "names taken".into())
    )))
}

fn now_nanos() -> u128 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_nanos()).unwrap_or(0)
}

#[derive(Debug, PartialEq, Eq)]
enum Existing {
    Absent,
    /// Our library, owned by the JVM's user (or root), writable only by its owner.
    Same,
    /// Something else: never overwrite it (the JVM may have it mapped).
    Other,
}

/// What `name` in the target's /tmp (`dir`) is; a symlink is never followed.
fn existing_copy(dir: &OwnedFd, name: &str, uid: u32, contents: &[u8]) -> Existing {
    let f = match open_at(dir, name, libc::O_RDONLY | libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_NOCTTY, 0) {
        Ok(f) => f,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Existing::Absent,
        Err(_) => return Existing::Other,
    };
    let Ok(m) = f.metadata() else { return Existing::Other };
    let trusted = m.is_file() && (m.uid() == uid || m.uid() == 0) && m.mode() & 0o022 == 0 && m.len() == contents.len() as u64;
    let mut theirs = Vec::new();
    if trusted && f.take(contents.len() as u64 + 1).read_to_end(&mut theirs).is_ok() && theirs == contents {
        Existing::Same
    } else {
        Existing::Other
    }
}

/// Creates `name` in the target's /tmp (`dir`), never over an existing file or symlink.
fn write_new(dir: &OwnedFd, name: &str, contents: &[u8]) -> io::Result<()> {
    let mut f = open_at(dir, name, libc::O_WRONLY | libc::O_CREAT | libc::O_EXCL | libc::O_NOFOLLOW, 0o644)?;
    let written = f.write_all(contents).and_then(|()| f.set_permissions(std::fs::Permissions::from_mode(0o644)));
    if written.is_err() {
        let _ = unlink_at(dir, name);
    }
    written
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reply(status: i32, text: &str) -> Reply {
        Reply { status, text: text.into() }
    }

    #[test]
    fn load_replies() {
        // JDK 11, 17, 21, 25 on success.
        assert_eq!(parse_load_reply(&reply(0, "return code: 0\n")).unwrap().agent_return_code, 0);
        assert_eq!(parse_load_reply(&reply(0, "return code: 42\n")).unwrap().agent_return_code, 42);
        assert_eq!(parse_load_reply(&reply(0, "return code: -1\n")).unwrap().agent_return_code, -1);
        // JDK 17: status -1; JDK 21+: status 0, same text.
        for status in [-1, 0] {
            let r = parse_load_reply(&reply(status, "/x.so was not loaded.\n/x.so: cannot open shared object file: No such file or directory\n"));
            assert!(matches!(r, Err(AttachError::LoadFailed(ref t)) if t.contains("cannot open shared object file")), "{r:?}");
            let r = parse_load_reply(&reply(status, "Agent_OnAttach is not available in /x.so\n"));
            assert!(matches!(r, Err(AttachError::LoadFailed(_))));
            let r = parse_load_reply(&reply(status, "Dynamic agent loading is not enabled. Use -XX:+EnableDynamicAgentLoading to launch target VM.\n"));
            assert!(matches!(r, Err(AttachError::LoadFailed(ref t)) if t.contains("EnableDynamicAgentLoading")));
        }
        assert!(matches!(parse_load_reply(&reply(-1, "")), Err(AttachError::LoadFailed(_))));
    }

    #[test]
    fn copy_names() {
        let a = copy_name(Path::new("/opt/oxprof/liboxprof.so"), b"abc");
        let b = copy_name(Path::new("/elsewhere/liboxprof.so"), b"abc");
        let c = copy_name(Path::new("/opt/oxprof/liboxprof.so"), b"abd");
        assert_eq!(a, b);
        assert_ne!(a, c);
        assert!(a.starts_with("liboxprof-") && a.ends_with(".so") && a.len() == "liboxprof-".len() + 16 + 3, "{a}");
        assert!(copy_name(Path::new("/x/agent"), b"").starts_with("agent-"));
        assert_eq!(copy_name(&Path::new("/jail/tmp").join(&a), b"abc"), a);
    }

    use crate::test_support::FakeRoot;

    fn ours(p: &Path) -> AgentLibrary {
        AgentLibrary::Ours(p.to_path_buf())
    }

    fn theirs(p: &Path) -> AgentLibrary {
        AgentLibrary::InTarget(p.to_path_buf())
    }

    #[test]
    fn agent_paths_in_another_root() {
        let fake = FakeRoot::new("paths");
        let target = fake.target();
        let agent = fake.0.join("liboxprof.so");
        std::fs::write(&agent, b"\x7fELF pretend").unwrap();

        // Our agent is copied into the target's /tmp, named by contents.
        let first = place_agent(&target, &ours(&agent)).unwrap();
        let name = copy_name(&agent, b"\x7fELF pretend");
        assert_eq!(first, Placed { in_target: Path::new("/tmp").join(&name), copied: true });
        let host = target.root.join("tmp").join(&name);
        assert_eq!(std::fs::read(&host).unwrap(), b"\x7fELF pretend");
        assert_eq!(std::fs::metadata(&host).unwrap().mode() & 0o777, 0o644);

        // Loading it again reuses that copy (the same library for the JVM).
        let again = place_agent(&target, &ours(&agent)).unwrap();
        assert_eq!(again, Placed { in_target: first.in_target.clone(), copied: false });

        // A path in the target (from loaded_library) is used as is.
        let inside = place_agent(&target, &theirs(&first.in_target)).unwrap();
        assert_eq!(inside, Placed { in_target: first.in_target.clone(), copied: false });

        // A different file under that name is never overwritten.
        std::fs::write(&agent, b"\x7fELF other").unwrap();
        let other_name = copy_name(&agent, b"\x7fELF other");
        std::fs::write(target.root.join("tmp").join(&other_name), b"squatter").unwrap();
        let third = place_agent(&target, &ours(&agent)).unwrap();
        assert_ne!(third.in_target, Path::new("/tmp").join(&other_name));
        assert!(third.in_target.starts_with("/tmp") && third.copied);
        assert_eq!(std::fs::read(target.root.join(third.in_target.strip_prefix("/").unwrap())).unwrap(), b"\x7fELF other");
        assert_eq!(std::fs::read(target.root.join("tmp").join(&other_name)).unwrap(), b"squatter");

        // Nowhere at all.
        assert!(matches!(place_agent(&target, &ours(Path::new("/nonexistent/liboxprof.so"))), Err(AttachError::LoadFailed(_))));
        assert!(matches!(place_agent(&target, &theirs(Path::new("/nonexistent/liboxprof.so"))), Err(AttachError::LoadFailed(_))));
    }

    /// A path the target gave us (its maps) names a file in the target's
    /// file system: a host file at that path, e.g. a symlink to a file only
    /// root may read, is neither read nor copied into the target.
    #[test]
    fn paths_from_the_target_are_never_read_here() {
        let fake = FakeRoot::new("planted");
        let target = fake.target();
        let secret = fake.0.join("secret");
        std::fs::write(&secret, b"SECRET").unwrap();
        std::fs::set_permissions(&secret, std::fs::Permissions::from_mode(0o600)).unwrap();
        let planted = fake.0.join("liboxprof-planted.so");
        std::os::unix::fs::symlink(&secret, &planted).unwrap();
        // Files directly in the target's /tmp (the copies' place).
        let copies = || std::fs::read_dir(target.root.join("tmp")).unwrap().filter(|e| e.as_ref().unwrap().file_type().unwrap().is_file()).count();

        // Only on our side: refused, nothing copied.
        let r = place_agent(&target, &theirs(&planted));
        assert!(matches!(&r, Err(AttachError::LoadFailed(m)) if m.contains("in JVM")), "{r:?}");
        assert_eq!(copies(), 0);
        // The same path exists inside the target too: its file, as is.
        let inside = target.root.join(planted.strip_prefix("/").unwrap());
        std::fs::create_dir_all(inside.parent().unwrap()).unwrap();
        std::fs::write(&inside, b"\x7fELF theirs").unwrap();
        assert_eq!(place_agent(&target, &theirs(&planted)).unwrap(), Placed { in_target: planted.clone(), copied: false });
        assert_eq!(copies(), 0);
    }

    #[test]
    fn agent_paths_in_our_root() {
        let pid = std::process::id();
        let target = Target { pid, ns_pid: pid, uid: creds::our_euid(), gid: creds::our_egid(), root: "/proc/self/root".into(), cwd: "/proc/self/cwd".into() };
        let exe = std::env::current_exe().unwrap();
        assert_eq!(place_agent(&target, &ours(&exe)).unwrap(), Placed { in_target: exe.clone(), copied: false });
        assert_eq!(place_agent(&target, &theirs(&exe)).unwrap(), Placed { in_target: exe, copied: false });
        for agent in [
            ours(Path::new("/nonexistent/liboxprof.so")),
            ours(Path::new("/")),
            theirs(Path::new("/nonexistent/liboxprof.so")),
            theirs(Path::new("/")),
            theirs(Path::new("liboxprof.so")),
        ] {
            assert!(matches!(place_agent(&target, &agent), Err(AttachError::LoadFailed(_))), "{agent:?}");
        }
    }
}

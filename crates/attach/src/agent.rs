//! Loading a JVMTI agent library into a running JVM (the `load` attach
//! command), including making the library visible to a JVM in another
//! mount namespace (a container, a chroot).

use std::fs::OpenOptions;
use std::io::{self, Write};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::creds;
use crate::error::AttachError;
use crate::process::{self, Target};
use crate::protocol::{execute, Reply};

/// What the JVM said after loading an agent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LoadReply {
    /// What `Agent_OnAttach` returned (0 is success; the JVM unloads an
    /// agent that returns anything else).
    pub agent_return_code: i32,
    /// The JVM's whole reply text.
    pub text: String,
}

/// Loads the agent library `agent_path` into the JVM, calling its
/// `Agent_OnAttach` with `options`.
///
/// When the JVM runs under another root directory than ours, the library is
/// copied into the JVM's `/tmp` under a name derived from its contents (so
/// loading the same library again reuses the copy, and the JVM's loader sees
/// the same library), readable by the JVM's user. A path that exists only
/// in the JVM's namespace (e.g. from [`crate::loaded_library`]) is used as is.
pub fn load_agent(target: &Target, agent_path: &Path, options: &str, timeout: Duration) -> Result<LoadReply, AttachError> {
    let started = Instant::now();
    let placed = place_agent(target, agent_path)?;
    let path = placed.in_target.to_str().ok_or_else(|| AttachError::LoadFailed(format!("agent path {} is not valid UTF-8", placed.in_target.display())))?;
    let result = execute(target, "load", &[path, "true", options], timeout.saturating_sub(started.elapsed())).and_then(|r| parse_load_reply(&r));
    match (result, placed.copy) {
        (Err(AttachError::LoadFailed(text)), Some(copy)) => {
            let _ = std::fs::remove_file(&copy);
            Err(AttachError::LoadFailed(format!(
                "{}\n(the agent was copied to {path} in the JVM's mount namespace; if its /tmp is mounted noexec, put the agent in an executable directory there and pass that path)",
                text.trim_end()
            )))
        }
        (result, _) => result,
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

/// The agent's path as the JVM names it, and the copy we made for it, if any.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Placed {
    pub in_target: PathBuf,
    /// The copy as we reach it, when this call created it.
    pub copy: Option<PathBuf>,
}

pub(crate) fn place_agent(target: &Target, agent: &Path) -> Result<Placed, AttachError> {
    let abs = std::path::absolute(agent).map_err(|e| AttachError::LoadFailed(format!("agent library {}: {e}", agent.display())))?;
    let ours = std::fs::metadata(&abs);
    if process::same_root(target)? {
        return match ours {
            Ok(m) if m.is_file() => Ok(Placed { in_target: abs, copy: None }),
            Ok(_) => Err(AttachError::LoadFailed(format!("agent library {} is not a file", abs.display()))),
            Err(e) => Err(AttachError::LoadFailed(format!("agent library {}: {e}", abs.display()))),
        };
    }
    let ours = ours.ok().filter(|m| m.is_file());
    let theirs = std::fs::metadata(target.root.join(abs.strip_prefix("/").unwrap_or(&abs))).ok().filter(|m| m.is_file());
    match (ours, theirs) {
        // The same file is visible at the same path there (a shared mount).
        (Some(o), Some(t)) if o.dev() == t.dev() && o.ino() == t.ino() => Ok(Placed { in_target: abs, copy: None }),
        (Some(_), _) => copy_into(target, &abs),
        // A path in the JVM's namespace only, e.g. from loaded_library.
        (None, Some(_)) => Ok(Placed { in_target: abs, copy: None }),
        (None, None) => Err(AttachError::LoadFailed(format!(
            "agent library {} exists neither here nor in JVM {}'s mount namespace",
            abs.display(),
            target.pid
        ))),
    }
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

/// Copies the agent into the target's /tmp, as the target's user.
fn copy_into(target: &Target, agent: &Path) -> Result<Placed, AttachError> {
    let contents = std::fs::read(agent).map_err(|e| AttachError::LoadFailed(format!("reading agent library {}: {e}", agent.display())))?;
    let name = copy_name(agent, &contents);
    let _as_target = creds::assume(target)?;
    let dir = target.root.join("tmp");
    let mut candidates = vec![name.clone()];
    let unique = format!("{}-{}", std::process::id(), now_nanos());
    candidates.push(match name.rsplit_once('.') {
        Some((stem, ext)) => format!("{stem}-{unique}.{ext}"),
        None => format!("{name}-{unique}"),
    });
    let mut last_error = None;
    for n in candidates {
        let host = dir.join(&n);
        let in_target = Path::new("/tmp").join(&n);
        match existing_copy(&host, target.uid, &contents) {
            Existing::Same => return Ok(Placed { in_target, copy: None }),
            Existing::Other => continue,
            Existing::Absent => {}
        }
        match write_new(&host, &contents) {
            Ok(()) => return Ok(Placed { in_target, copy: Some(host) }),
            // Another attacher raced us: its copy is fine if complete.
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {
                if existing_copy(&host, target.uid, &contents) == Existing::Same {
                    return Ok(Placed { in_target, copy: None });
                }
            }
            Err(e) => last_error = Some(format!("{}: {e}", host.display())),
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

fn existing_copy(path: &Path, uid: u32, contents: &[u8]) -> Existing {
    let m = match std::fs::symlink_metadata(path) {
        Ok(m) => m,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Existing::Absent,
        Err(_) => return Existing::Other,
    };
    let trusted = m.is_file() && (m.uid() == uid || m.uid() == 0) && m.mode() & 0o022 == 0 && m.len() == contents.len() as u64;
    if trusted && std::fs::read(path).is_ok_and(|c| c == contents) {
        Existing::Same
    } else {
        Existing::Other
    }
}

fn write_new(path: &Path, contents: &[u8]) -> io::Result<()> {
    let mut f = OpenOptions::new().write(true).create_new(true).mode(0o644).custom_flags(libc::O_NOFOLLOW).open(path)?;
    let written = f.write_all(contents).and_then(|()| f.set_permissions(std::fs::Permissions::from_mode(0o644)));
    if written.is_err() {
        let _ = std::fs::remove_file(path);
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

    /// A scratch directory standing for another process's root: the path
    /// logic of a JVM in another mount namespace, without the namespace.
    struct FakeRoot(PathBuf);

    impl FakeRoot {
        fn new(name: &str) -> FakeRoot {
            let dir = std::env::temp_dir().join(format!("oxprof-attach-{name}-{}", std::process::id()));
            let _ = std::fs::remove_dir_all(&dir);
            std::fs::create_dir_all(dir.join("root/tmp")).unwrap();
            FakeRoot(dir)
        }

        fn target(&self) -> Target {
            let pid = std::process::id();
            Target { pid, ns_pid: 1, uid: creds::our_euid(), gid: creds::our_egid(), root: self.0.join("root"), cwd: self.0.join("root/tmp") }
        }
    }

    impl Drop for FakeRoot {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    #[test]
    fn agent_paths_in_another_root() {
        let fake = FakeRoot::new("paths");
        let target = fake.target();
        let agent = fake.0.join("liboxprof.so");
        std::fs::write(&agent, b"\x7fELF pretend").unwrap();

        // Our agent is copied into the target's /tmp, named by contents.
        let first = place_agent(&target, &agent).unwrap();
        let name = copy_name(&agent, b"\x7fELF pretend");
        assert_eq!(first.in_target, Path::new("/tmp").join(&name));
        let host = target.root.join("tmp").join(&name);
        assert_eq!(first.copy.as_deref(), Some(host.as_path()));
        assert_eq!(std::fs::read(&host).unwrap(), b"\x7fELF pretend");
        assert_eq!(std::fs::metadata(&host).unwrap().mode() & 0o777, 0o644);

        // Loading it again reuses that copy (the same library for the JVM).
        let again = place_agent(&target, &agent).unwrap();
        assert_eq!(again, Placed { in_target: first.in_target.clone(), copy: None });

        // A path that exists only in the target (from loaded_library) is used as is.
        let inside = place_agent(&target, &first.in_target).unwrap();
        assert_eq!(inside, Placed { in_target: first.in_target.clone(), copy: None });

        // A different file under that name is never overwritten.
        std::fs::write(&agent, b"\x7fELF other").unwrap();
        let other_name = copy_name(&agent, b"\x7fELF other");
        std::fs::write(target.root.join("tmp").join(&other_name), b"squatter").unwrap();
        let third = place_agent(&target, &agent).unwrap();
        assert_ne!(third.in_target, Path::new("/tmp").join(&other_name));
        assert!(third.in_target.starts_with("/tmp"));
        assert_eq!(std::fs::read(third.copy.unwrap()).unwrap(), b"\x7fELF other");
        assert_eq!(std::fs::read(target.root.join("tmp").join(&other_name)).unwrap(), b"squatter");

        // Nowhere at all.
        assert!(matches!(place_agent(&target, Path::new("/nonexistent/liboxprof.so")), Err(AttachError::LoadFailed(_))));
    }

    #[test]
    fn agent_paths_in_our_root() {
        let pid = std::process::id();
        let target = Target { pid, ns_pid: pid, uid: creds::our_euid(), gid: creds::our_egid(), root: "/proc/self/root".into(), cwd: "/proc/self/cwd".into() };
        let exe = std::env::current_exe().unwrap();
        assert_eq!(place_agent(&target, &exe).unwrap(), Placed { in_target: exe, copy: None });
        assert!(matches!(place_agent(&target, Path::new("/nonexistent/liboxprof.so")), Err(AttachError::LoadFailed(_))));
        assert!(matches!(place_agent(&target, Path::new("/")), Err(AttachError::LoadFailed(_))));
    }
}

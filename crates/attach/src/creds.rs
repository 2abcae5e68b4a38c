//! Taking the target JVM's identity for the attach conversation.
//!
//! HotSpot accepts a peer only with its own effective uid and gid (JDK 11
//! and later also root), checks that the attach trigger file is owned by its
//! user or root, and files we leave in its directories should belong to it.
//! As root we therefore switch the supplementary groups, the effective gid,
//! then the uid to the target's while we create files, connect and read its
//! files, and switch back afterwards: we then reach no file the target's
//! user could not (root's groups are not kept, and the kernel drops the
//! effective capabilities with the uid).
//!
//! The switch uses the raw `setgroups`/`setresgid`/`setresuid` system calls,
//! which change only the calling thread's credentials (glibc's `seteuid` and
//! `setgroups` would change every thread's): other threads of the program
//! (the test harness, a UI) keep running as root meanwhile.

use crate::error::AttachError;
use crate::process::{self, Target};

/// Our effective ids (read by `process`, which sits below this module).
pub(crate) use crate::process::{our_egid, our_euid};

#[cfg(any(target_arch = "x86", target_arch = "arm"))]
const SYS_SETRESUID: libc::c_long = libc::SYS_setresuid32;
#[cfg(any(target_arch = "x86", target_arch = "arm"))]
const SYS_SETRESGID: libc::c_long = libc::SYS_setresgid32;
#[cfg(any(target_arch = "x86", target_arch = "arm"))]
const SYS_SETGROUPS: libc::c_long = libc::SYS_setgroups32;
#[cfg(not(any(target_arch = "x86", target_arch = "arm")))]
const SYS_SETRESUID: libc::c_long = libc::SYS_setresuid;
#[cfg(not(any(target_arch = "x86", target_arch = "arm")))]
const SYS_SETRESGID: libc::c_long = libc::SYS_setresgid;
#[cfg(not(any(target_arch = "x86", target_arch = "arm")))]
const SYS_SETGROUPS: libc::c_long = libc::SYS_setgroups;

/// `-1` for the ids `setres[ug]id` should leave alone.
const KEEP: libc::c_long = -1;

fn set_thread_euid(uid: u32) -> std::io::Result<()> {
    // SAFETY: setresuid takes three ids by value; -1 leaves the real and
    // saved ids unchanged. The raw call affects only this thread.
    let r = unsafe { libc::syscall(SYS_SETRESUID, KEEP, uid as libc::c_long, KEEP) };
    if r == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

fn set_thread_egid(gid: u32) -> std::io::Result<()> {
    // SAFETY: as in set_thread_euid, for the group ids.
    let r = unsafe { libc::syscall(SYS_SETRESGID, KEEP, gid as libc::c_long, KEEP) };
    if r == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

/// Sets the calling thread's supplementary groups (needs root).
fn set_thread_groups(groups: &[u32]) -> std::io::Result<()> {
    // SAFETY: setgroups reads groups.len() gid_t values (u32 on Linux) from
    // a pointer valid for that many. The raw call affects only this thread.
    let r = unsafe { libc::syscall(SYS_SETGROUPS, groups.len() as libc::c_long, groups.as_ptr()) };
    if r == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

/// The calling thread's supplementary groups.
fn thread_groups() -> std::io::Result<Vec<u32>> {
    // SAFETY: with a size of 0 getgroups only counts, writing nothing.
    let n = unsafe { libc::getgroups(0, std::ptr::null_mut()) };
    if n < 0 {
        return Err(std::io::Error::last_os_error());
    }
    let mut groups = vec![0u32; n as usize];
    // SAFETY: groups has room for n gid_t values; getgroups writes at most that many.
    let n = unsafe { libc::getgroups(n, groups.as_mut_ptr()) };
    if n < 0 {
        return Err(std::io::Error::last_os_error());
    }
    groups.truncate(n as usize);
    Ok(groups)
}

/// While alive, the calling thread runs with the target's effective ids
/// and supplementary groups (if it had to switch). Dropping it switches
/// back.
#[must_use]
pub(crate) struct AsTarget {
    /// The uid, gid and groups to restore, if we switched.
    saved: Option<(u32, u32, Vec<u32>)>,
}

/// Checks that we may talk to `target` and takes its identity on this
/// thread if we are root and it is not us.
pub(crate) fn assume(target: &Target) -> Result<AsTarget, AttachError> {
    let (uid, gid) = (our_euid(), our_egid());
    if uid == target.uid && gid == target.gid {
        return Ok(AsTarget { saved: None });
    }
    if uid != 0 {
        let why = if uid != target.uid {
            "the JVM only accepts attach requests from its own user or root".to_string()
        } else {
            format!("the JVM runs with effective gid {} and only accepts peers with that gid (ours is {gid})", target.gid)
        };
        return Err(AttachError::PermissionDenied { pid: target.pid, target_uid: target.uid, our_uid: uid, why });
    }
    switch(target, uid, gid)
}

/// Like [`assume`], for reading the target's files: a user other than root
/// reads them as itself (it has no more rights than the target's user
/// would lend it), whatever ids the target runs with.
pub(crate) fn assume_for_files(target: &Target) -> Result<AsTarget, AttachError> {
    if our_euid() != 0 {
        return Ok(AsTarget { saved: None });
    }
    assume(target)
}

/// As root: takes the target's groups, gid and uid on this thread.
fn switch(target: &Target, uid: u32, gid: u32) -> Result<AsTarget, AttachError> {
    // The target's supplementary groups, if its pid still runs as the
    // target's ids; otherwise none (never more than it has).
    let groups = process::read_status(target.pid)?;
    let groups = if groups.uid == target.uid && groups.gid == target.gid { groups.groups } else { Vec::new() };
    let saved_groups = thread_groups().map_err(|e| AttachError::io("reading our supplementary groups", e))?;
    set_thread_groups(&groups).map_err(|e| AttachError::io(format!("switching to the supplementary groups {groups:?}"), e))?;
    if let Err(e) = set_thread_egid(target.gid) {
        restore_or_abort(&saved_groups, gid, None);
        return Err(AttachError::io(format!("switching to gid {}", target.gid), e));
    }
    if let Err(e) = set_thread_euid(target.uid) {
        restore_or_abort(&saved_groups, gid, None);
        return Err(AttachError::io(format!("switching to uid {}", target.uid), e));
    }
    Ok(AsTarget { saved: Some((uid, gid, saved_groups)) })
}

/// Switches back to `uid` (if given), then `groups` and `gid`. Going on
/// under the wrong identity would be worse than stopping.
fn restore_or_abort(groups: &[u32], gid: u32, uid: Option<u32>) {
    // The real and saved uids are still root's, so switching the uid back
    // is permitted, and as root again so are the groups and gid.
    let restored = uid.map_or(Ok(()), set_thread_euid).and_then(|()| set_thread_groups(groups)).and_then(|()| set_thread_egid(gid));
    if let Err(e) = restored {
        eprintln!("oxprof: cannot switch back to uid {}, gid {gid}, groups {groups:?}: {e}", uid.unwrap_or_else(our_euid));
        std::process::abort();
    }
}

impl Drop for AsTarget {
    fn drop(&mut self) {
        if let Some((uid, gid, groups)) = &self.saved {
            restore_or_abort(groups, *gid, Some(*uid));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::process::Command;
    use std::time::{Duration, Instant};

    /// The calling thread's `Groups:` and effective uid, as the kernel shows them.
    fn thread_status() -> (Vec<u32>, u32) {
        let status = std::fs::read_to_string("/proc/thread-self/status").unwrap();
        let field = |key: &str| status.lines().find_map(|l| l.strip_prefix(key)).unwrap_or("").to_string();
        let groups = field("Groups:").split_whitespace().map(|g| g.parse().unwrap()).collect();
        let euid = field("Uid:").split_whitespace().nth(1).unwrap().parse().unwrap();
        (groups, euid)
    }

    /// While acting as another user, the thread has that user's groups, not
    /// root's (which would open root's group-readable files to it); root's
    /// come back afterwards.
    #[test]
    #[ignore = "needs root; scripts/test.sh runs it when run as root"]
    fn assumed_identity_has_only_the_targets_groups() {
        assert_eq!(our_euid(), 0, "assumed_identity_has_only_the_targets_groups needs root (to switch identities)");
        let mut child = Command::new("setpriv").args(["--reuid=65534", "--regid=65534", "--groups=4242,4343", "sleep", "30"]).spawn().unwrap();
        let pid = child.id();
        // Until setpriv has exec'd sleep, the process is still root's.
        let deadline = Instant::now() + Duration::from_secs(5);
        while process::read_status(pid).map(|s| s.uid).unwrap_or(0) != 65534 {
            assert!(Instant::now() < deadline, "setpriv did not switch to uid 65534");
            std::thread::sleep(Duration::from_millis(5));
        }
        let target = Target { pid, ns_pid: pid, uid: 65534, gid: 65534, root: format!("/proc/{pid}/root").into(), cwd: format!("/proc/{pid}/cwd").into() };
        let seen = std::thread::spawn(move || {
            // Root with supplementary groups of its own, on this thread only.
            set_thread_groups(&[0, 27]).unwrap();
            let before = thread_status();
            let assumed = assume(&target).unwrap();
            let during = thread_status();
            drop(assumed);
            let after = thread_status();
            let _ = set_thread_groups(&[]);
            (before, during, after)
        })
        .join()
        .unwrap();
        let _ = child.kill();
        let _ = child.wait();
        assert_eq!(seen.0, (vec![0, 27], 0));
        assert_eq!(seen.1, (vec![4242, 4343], 65534), "the target's groups while acting as it");
        assert_eq!(seen.2, (vec![0, 27], 0), "root's groups back afterwards");
    }
}

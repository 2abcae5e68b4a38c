//! Taking the target JVM's identity for the attach conversation.
//!
//! HotSpot accepts a peer only with its own effective uid and gid (JDK 11
//! and later also root), checks that the attach trigger file is owned by its
//! user or root, and files we leave in its directories should belong to it.
//! As root we therefore switch the effective gid, then uid, to the target's
//! while we create files and connect, and switch back afterwards.
//!
//! The switch uses the raw `setresgid`/`setresuid` system calls, which
//! change only the calling thread's credentials (glibc's `seteuid` would
//! change every thread's): other threads of the program (the test harness,
//! a UI) keep running as root meanwhile.

use crate::error::AttachError;
use crate::process::Target;

pub(crate) fn our_euid() -> u32 {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() }
}

pub(crate) fn our_egid() -> u32 {
    // SAFETY: getegid has no preconditions and cannot fail.
    unsafe { libc::getegid() }
}

#[cfg(any(target_arch = "x86", target_arch = "arm"))]
const SYS_SETRESUID: libc::c_long = libc::SYS_setresuid32;
#[cfg(any(target_arch = "x86", target_arch = "arm"))]
const SYS_SETRESGID: libc::c_long = libc::SYS_setresgid32;
#[cfg(not(any(target_arch = "x86", target_arch = "arm")))]
const SYS_SETRESUID: libc::c_long = libc::SYS_setresuid;
#[cfg(not(any(target_arch = "x86", target_arch = "arm")))]
const SYS_SETRESGID: libc::c_long = libc::SYS_setresgid;

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

/// While alive, the calling thread runs with the target's effective ids
/// (if it had to switch). Dropping it switches back.
#[must_use]
pub(crate) struct AsTarget {
    /// The ids to restore, if we switched.
    saved: Option<(u32, u32)>,
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
    set_thread_egid(target.gid).map_err(|e| AttachError::io(format!("switching to gid {}", target.gid), e))?;
    if let Err(e) = set_thread_euid(target.uid) {
        let _ = set_thread_egid(gid);
        return Err(AttachError::io(format!("switching to uid {}", target.uid), e));
    }
    Ok(AsTarget { saved: Some((uid, gid)) })
}

impl Drop for AsTarget {
    fn drop(&mut self) {
        if let Some((uid, gid)) = self.saved {
            // The real and saved uids are still root's, so both calls are
            // permitted. Going on under the wrong identity would be worse
            // than stopping.
            if let Err(e) = set_thread_euid(uid).and_then(|()| set_thread_egid(gid)) {
                eprintln!("oxprof: cannot switch back to uid {uid}, gid {gid}: {e}");
                std::process::abort();
            }
        }
    }
}

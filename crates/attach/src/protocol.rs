//! The conversation with a JVM's attach listener: starting the listener if
//! needed (trigger file + `SIGQUIT`), connecting to its socket, sending one
//! request and reading the reply, each step within the caller's time limit.

use std::fs::OpenOptions;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::fs::{FileTypeExt, MetadataExt, OpenOptionsExt};
use std::path::Path;
use std::time::{Duration, Instant};

use crate::creds;
use crate::error::AttachError;
use crate::process::{self, Target};

/// The JVM's answer to an attach command.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reply {
    /// The status line: 0 when the command ran (for `load`, even on some
    /// failures: see [`crate::parse_load_reply`]), else a JNI error code.
    pub status: i32,
    /// Everything after the status line.
    pub text: String,
}

/// HotSpot's limits on a version 1 request (`AttachOperation`).
const NAME_MAX: usize = 16;
const ARG_MAX: usize = 1024;
const ARG_COUNT: usize = 3;

/// The longest reply we take (256 MiB): far beyond a thread dump of tens of
/// thousands of threads, and a bound on what a process posing as the JVM can
/// make us hold.
const MAX_REPLY: usize = 256 << 20;

/// Sends `command` with up to three `args` to the JVM and returns its reply,
/// starting its attach listener first if needed. Commands include
/// `properties`, `agentProperties`, `threaddump`, `jcmd <line>` and `load`
/// (see [`crate::load_agent`]). `timeout` bounds the whole operation.
pub fn execute(target: &Target, command: &str, args: &[&str], timeout: Duration) -> Result<Reply, AttachError> {
    let deadline = Deadline { end: Instant::now() + timeout, total: timeout };
    let request = encode_request(command, args)?;
    let _as_target = creds::assume(target)?;
    remove_foreign_stale_socket(target);
    let conn = connect(target, &deadline)?;
    conn.send_all(&request, &deadline, target, command)?;
    let raw = conn.read_all(&deadline, target, command, MAX_REPLY)?;
    parse_reply(target.pid, &raw)
}

/// The end of the caller's time budget, and the budget (for messages).
pub(crate) struct Deadline {
    end: Instant,
    total: Duration,
}

impl Deadline {
    fn remaining(&self) -> Option<Duration> {
        self.end.checked_duration_since(Instant::now()).filter(|d| !d.is_zero())
    }

    fn timeout(&self, what: String) -> AttachError {
        AttachError::Timeout { what, after: self.total }
    }
}

pub(crate) fn encode_request(command: &str, args: &[&str]) -> Result<Vec<u8>, AttachError> {
    if command.is_empty() || command.len() > NAME_MAX {
        return Err(AttachError::Protocol(format!("attach command {command:?} must be 1 to {NAME_MAX} bytes long")));
    }
    if args.len() > ARG_COUNT {
        return Err(AttachError::Protocol(format!("attach command {command:?} takes at most {ARG_COUNT} arguments, not {}", args.len())));
    }
    if let Some(a) = args.iter().find(|a| a.len() > ARG_MAX) {
        return Err(AttachError::Protocol(format!("an argument of {command:?} is {} bytes long; HotSpot accepts at most {ARG_MAX}", a.len())));
    }
    if command.contains('\0') || args.iter().any(|a| a.contains('\0')) {
        return Err(AttachError::Protocol(format!("the command {command:?} or an argument contains a NUL byte")));
    }
    let mut parts = vec![command];
    parts.extend_from_slice(args);
    parts.resize(1 + ARG_COUNT, "");
    let mut out = b"1\0".to_vec();
    for part in parts {
        out.extend_from_slice(part.as_bytes());
        out.push(0);
    }
    Ok(out)
}

pub(crate) fn parse_reply(pid: u32, raw: &[u8]) -> Result<Reply, AttachError> {
    if raw.is_empty() {
        if !process::exists(pid) {
            return Err(AttachError::NoSuchProcess(pid));
        }
        return Err(AttachError::Protocol(format!(
            "JVM {pid} closed the connection without replying (it answers only peers with its own effective uid and gid, or root)"
        )));
    }
    let text = String::from_utf8_lossy(raw);
    let (first, rest) = text.split_once('\n').unwrap_or((&text, ""));
    match first.trim().parse::<i32>() {
        Ok(status) => Ok(Reply { status, text: rest.to_string() }),
        Err(_) => {
            let head: String = text.chars().take(200).collect();
            Err(AttachError::Protocol(format!("JVM {pid} sent a reply without a status line: {head:?}")))
        }
    }
}

/// Connects to the attach listener, starting it if its socket is missing or
/// stale (left by an earlier process with the same pid).
fn connect(target: &Target, deadline: &Deadline) -> Result<Conn, AttachError> {
    let sock = target.socket_path();
    if socket_present(target, &sock)? {
        match Conn::open(target, &sock, deadline)? {
            Some(conn) => return Ok(conn),
            None => {
                // Refused: nobody listens there. The JVM replaces it when its
                // listener starts; removing it lets us see when that happens.
                let _ = std::fs::remove_file(&sock);
            }
        }
    }
    start_listener(target, &sock, deadline)?;
    Conn::open(target, &sock, deadline)?
        .ok_or_else(|| AttachError::Protocol(format!("JVM {} created {} but refuses connections on it", target.pid, in_target(target, &sock))))
}

/// Removes a socket at the listener's path that belongs to another user
/// than the JVM's, if nobody listens on it: a stale one left by an earlier
/// process with the same pid, which the JVM would not replace. Runs as the
/// JVM's user (the caller holds its identity): the path is in a directory
/// that user controls, so root never probes or unlinks there. Where that
/// user may not remove the socket (the sticky host /tmp), it stays and
/// `socket_present` explains.
fn remove_foreign_stale_socket(target: &Target) {
    let sock = target.socket_path();
    let Ok(m) = std::fs::symlink_metadata(&sock) else { return };
    if !m.file_type().is_socket() || m.uid() == target.uid {
        return;
    }
    let Ok((addr, len)) = sockaddr(&sock) else { return };
    // SAFETY: socket takes constants by value and returns a new fd or -1.
    let fd = unsafe { libc::socket(libc::AF_UNIX, libc::SOCK_STREAM | libc::SOCK_CLOEXEC | libc::SOCK_NONBLOCK, 0) };
    if fd < 0 {
        return;
    }
    // SAFETY: a descriptor we just created and own alone.
    let fd = unsafe { OwnedFd::from_raw_fd(fd) };
    // SAFETY: addr is a valid sockaddr_un of length len that outlives the call.
    let r = unsafe { libc::connect(fd.as_raw_fd(), &addr as *const libc::sockaddr_un as *const libc::sockaddr, len) };
    if r != 0 && io::Error::last_os_error().raw_os_error() == Some(libc::ECONNREFUSED) {
        let _ = std::fs::remove_file(&sock);
    }
}

/// `path` (under `/proc/<pid>/root`) as the target names it, for messages.
fn in_target(target: &Target, path: &Path) -> String {
    match path.strip_prefix(&target.root) {
        Ok(p) => format!("/{}", p.display()),
        Err(_) => path.display().to_string(),
    }
}

/// Whether the listener's socket exists. Refuses a socket that belongs to
/// another user than the JVM's: it is not the JVM's.
fn socket_present(target: &Target, sock: &Path) -> Result<bool, AttachError> {
    match std::fs::symlink_metadata(sock) {
        Ok(m) if !m.file_type().is_socket() => Err(AttachError::Protocol(format!(
            "{} exists but is not a socket; remove it if JVM {} is the only process with that pid",
            in_target(target, sock),
            target.pid
        ))),
        Ok(m) if m.uid() != target.uid => Err(AttachError::Protocol(format!(
            "refusing to use {}: it belongs to uid {}, but JVM {} runs as uid {} (left by another process? remove it)",
            in_target(target, sock),
            m.uid(),
            target.pid,
            target.uid
        ))),
        Ok(_) => Ok(true),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(false),
        Err(e) => Err(process::proc_error(target.pid, &format!("looking for {}", sock.display()), e, target.uid)),
    }
}

/// Makes the JVM start its attach listener and waits for the socket.
fn start_listener(target: &Target, sock: &Path, deadline: &Deadline) -> Result<(), AttachError> {
    let pid = target.pid;
    if crate::list::jvm_flag(pid, "DisableAttachMechanism") == Some(true) {
        return Err(AttachError::AttachDisabled { pid });
    }
    // Before touching its directories: will it survive the signal?
    sigquit_when_caught(target, deadline, false)?;
    let _trigger = TriggerFile::create(target)?;
    send_sigquit(target, deadline)?;
    let mut resent = false;
    // HotSpot creates the socket within a millisecond of the signal
    // (measured on JDK 11 to 25): look early, then back off to 200 ms.
    let mut pause = Duration::from_millis(1);
    loop {
        if socket_present(target, sock)? {
            return Ok(());
        }
        if !process::exists(pid) {
            return Err(AttachError::NoSuchProcess(pid));
        }
        let Some(left) = deadline.remaining() else {
            return Err(deadline.timeout(format!(
                "waiting for JVM {pid} to start its attach listener ({} did not appear after SIGQUIT): was it started with -XX:+DisableAttachMechanism, or is it stopped or hung? Otherwise retry with a longer timeout",
                in_target(target, sock)
            )));
        };
        // Like the JDK's own attacher, signal once more half-way: the first
        // signal may have arrived while the JVM was not ready for it.
        if !resent && left <= deadline.total / 2 {
            send_sigquit(target, deadline)?;
            resent = true;
        }
        std::thread::sleep(pause.min(left));
        pause = (pause * 2).min(Duration::from_millis(200));
    }
}

/// `.attach_pid<nspid>`, created for the duration of the trigger in both
/// places HotSpot looks (its working directory, then its /tmp), and removed
/// afterwards.
///
/// Both, because the working directory is not stable while a JVM starts:
/// HotSpot moves into its hsperfdata directory for a few milliseconds to
/// create its performance-data file, with its SIGQUIT handler already
/// installed, and a trigger put there is not found when the signal is
/// handled (measured: one attach in three within the first 40 ms of a
/// JDK 17 timed out). Each file is made and removed through a descriptor of
/// the directory it went into, so a later change of directory cannot leave
/// it behind.
struct TriggerFile {
    made: Vec<(OwnedFd, std::ffi::CString)>,
}

impl TriggerFile {
    fn create(target: &Target) -> Result<TriggerFile, AttachError> {
        let name = format!(".attach_pid{}", target.ns_pid);
        let mut trigger = TriggerFile { made: Vec::new() };
        let in_cwd = trigger.create_in(&target.cwd, &name);
        let in_tmp = trigger.create_in(&target.root.join("tmp"), &name);
        match (in_cwd, in_tmp) {
            (Ok(()), _) | (_, Ok(())) => Ok(trigger),
            _ if !process::exists(target.pid) => Err(AttachError::NoSuchProcess(target.pid)),
            (Err(cwd), Err(tmp)) => Err(AttachError::io(
                format!("creating the attach trigger file {name} for JVM {} (in its working directory: {cwd}; in its /tmp)", target.pid),
                tmp,
            )),
        }
    }

    /// Creates `name` in `dir`; one that exists already (someone else is
    /// attaching right now) serves us too and is left to its owner.
    fn create_in(&mut self, dir: &Path, name: &str) -> io::Result<()> {
        let dir = OpenOptions::new().read(true).custom_flags(libc::O_DIRECTORY | libc::O_CLOEXEC).open(dir)?;
        let dir = OwnedFd::from(dir);
        let cname = std::ffi::CString::new(name).map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
        // SAFETY: `dir` is an open directory descriptor and `cname` a
        // NUL-terminated name; openat returns a new descriptor or -1.
        let fd = unsafe {
            libc::openat(
                dir.as_raw_fd(),
                cname.as_ptr(),
                libc::O_WRONLY | libc::O_CREAT | libc::O_EXCL | libc::O_NOFOLLOW | libc::O_CLOEXEC,
                0o600 as libc::c_uint,
            )
        };
        if fd < 0 {
            let e = io::Error::last_os_error();
            return if e.kind() == io::ErrorKind::AlreadyExists { Ok(()) } else { Err(e) };
        }
        // SAFETY: the kernel just gave us this descriptor; closing it at once.
        drop(unsafe { OwnedFd::from_raw_fd(fd) });
        self.made.push((dir, cname));
        Ok(())
    }
}

impl Drop for TriggerFile {
    fn drop(&mut self) {
        for (dir, name) in &self.made {
            // SAFETY: an open directory descriptor and a NUL-terminated name.
            unsafe { libc::unlinkat(dir.as_raw_fd(), name.as_ptr(), 0) };
        }
    }
}

/// Sends SIGQUIT to the target, but only once it catches it: HotSpot's
/// handler starts the listener, while the default action would kill the
/// process. A pidfd, opened before the check, makes sure the process we
/// checked is the one we signal even if the pid is reused meanwhile.
fn send_sigquit(target: &Target, deadline: &Deadline) -> Result<(), AttachError> {
    sigquit_when_caught(target, deadline, true)
}

/// Waits until the target catches SIGQUIT (or refuses), and sends it if `send`.
fn sigquit_when_caught(target: &Target, deadline: &Deadline, send: bool) -> Result<(), AttachError> {
    let pid = target.pid;
    loop {
        let pidfd = if send { pidfd_open(pid)? } else { None };
        let status = process::read_status(pid)?;
        if status.catches_sigquit() {
            return if send { signal(pid, pidfd.as_ref(), target.uid) } else { Ok(()) };
        }
        let is_jvm = process::mapped_files(pid).map(|m| m.iter().any(|p| p.file_name().is_some_and(|n| n == "libjvm.so"))).unwrap_or(false);
        if !is_jvm {
            return Err(AttachError::NotAJvm {
                pid,
                why: "no libjvm.so is mapped into it and it does not catch SIGQUIT, which would kill it; nothing was sent".into(),
            });
        }
        if crate::list::reduces_signal_usage(pid) {
            return Err(AttachError::NotAJvm {
                pid,
                why: format!(
                    "it was started with -Xrs (-XX:+ReduceSignalUsage), so HotSpot opened its attach socket at start-up and cannot be asked to open it again (SIGQUIT would kill it), but {} is gone (removed by a /tmp cleaner?); restart the JVM",
                    in_target(target, &target.socket_path())
                ),
            });
        }
        // A JVM installs its handler early in start-up: wait for it.
        let Some(left) = deadline.remaining() else {
            return Err(AttachError::NotAJvm {
                pid,
                why: "it maps libjvm.so but does not catch SIGQUIT (still starting?), and SIGQUIT would kill it; nothing was sent, retry in a moment".into(),
            });
        };
        std::thread::sleep(left.min(Duration::from_millis(20)));
    }
}

/// A pidfd for `pid`, or `None` on kernels without pidfds (before 5.3).
fn pidfd_open(pid: u32) -> Result<Option<OwnedFd>, AttachError> {
    // SAFETY: pidfd_open takes a pid and flags by value and returns a new fd
    // or -1.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid as libc::c_long, 0 as libc::c_long) };
    if fd >= 0 {
        // SAFETY: the kernel just gave us this descriptor; nobody else owns it.
        return Ok(Some(unsafe { OwnedFd::from_raw_fd(fd as i32) }));
    }
    let e = io::Error::last_os_error();
    match e.raw_os_error() {
        Some(libc::ENOSYS) | Some(libc::EPERM) | Some(libc::EINVAL) => Ok(None),
        _ => Err(process::proc_error(pid, "pidfd_open", e, u32::MAX)),
    }
}

fn signal(pid: u32, pidfd: Option<&OwnedFd>, target_uid: u32) -> Result<(), AttachError> {
    let r = match pidfd {
        // SAFETY: a valid pidfd, a signal number, no siginfo, no flags.
        Some(fd) => unsafe {
            libc::syscall(libc::SYS_pidfd_send_signal, fd.as_raw_fd() as libc::c_long, libc::SIGQUIT as libc::c_long, 0 as libc::c_long, 0 as libc::c_long)
        },
        // SAFETY: kill takes a pid and a signal number by value.
        None => libc::c_long::from(unsafe { libc::kill(pid as libc::pid_t, libc::SIGQUIT) }),
    };
    if r == 0 {
        return Ok(());
    }
    Err(process::proc_error(pid, "sending SIGQUIT", io::Error::last_os_error(), target_uid))
}

/// A connected socket to the attach listener.
struct Conn {
    fd: OwnedFd,
}

impl Conn {
    /// Connects to `sock`; `None` if the connection is refused (a stale
    /// socket: nobody listens on it).
    fn open(target: &Target, sock: &Path, deadline: &Deadline) -> Result<Option<Conn>, AttachError> {
        let pid = target.pid;
        let (addr, len) = sockaddr(sock)?;
        // SAFETY: socket takes constants by value and returns a new fd or -1.
        let fd = unsafe { libc::socket(libc::AF_UNIX, libc::SOCK_STREAM | libc::SOCK_CLOEXEC | libc::SOCK_NONBLOCK, 0) };
        if fd < 0 {
            return Err(AttachError::io("creating a Unix socket", io::Error::last_os_error()));
        }
        // SAFETY: a descriptor we just created and own alone.
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        loop {
            // SAFETY: addr is a valid sockaddr_un of length len that outlives the call.
            let r = unsafe { libc::connect(fd.as_raw_fd(), &addr as *const libc::sockaddr_un as *const libc::sockaddr, len) };
            if r == 0 {
                return Ok(Some(Conn { fd }));
            }
            let e = io::Error::last_os_error();
            match e.raw_os_error() {
                Some(libc::EINTR) => continue,
                // The listener's backlog is full: it is busy with other clients.
                Some(libc::EAGAIN) => match deadline.remaining() {
                    Some(left) => std::thread::sleep(left.min(Duration::from_millis(10))),
                    None => {
                        return Err(deadline.timeout(format!(
                            "connecting to JVM {pid}'s attach listener {} (it accepts no connections: is the JVM hung or overloaded?)",
                            in_target(target, sock)
                        )))
                    }
                },
                Some(libc::EINPROGRESS) => {
                    let conn = Conn { fd };
                    conn.wait(libc::POLLOUT, deadline, || format!("connecting to JVM {pid}'s attach listener {}", in_target(target, sock)))?;
                    return match conn.so_error() {
                        0 => Ok(Some(conn)),
                        libc::ECONNREFUSED => Ok(None),
                        err => Err(AttachError::io(format!("connecting to {}", sock.display()), io::Error::from_raw_os_error(err))),
                    };
                }
                Some(libc::ECONNREFUSED) => return Ok(None),
                Some(libc::ENOENT) if !process::exists(pid) => return Err(AttachError::NoSuchProcess(pid)),
                _ => return Err(process::proc_error(pid, &format!("connecting to {}", sock.display()), e, target.uid)),
            }
        }
    }

    fn so_error(&self) -> i32 {
        let mut err: libc::c_int = 0;
        let mut len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
        // SAFETY: err and len are valid for writing and len holds err's size.
        let r = unsafe { libc::getsockopt(self.fd.as_raw_fd(), libc::SOL_SOCKET, libc::SO_ERROR, &mut err as *mut libc::c_int as *mut libc::c_void, &mut len) };
        if r == 0 {
            err
        } else {
            io::Error::last_os_error().raw_os_error().unwrap_or(libc::EIO)
        }
    }

    /// Waits until the socket is ready for `events`, or the deadline.
    fn wait(&self, events: libc::c_short, deadline: &Deadline, what: impl Fn() -> String) -> Result<(), AttachError> {
        loop {
            let Some(left) = deadline.remaining() else { return Err(deadline.timeout(what())) };
            let ms = left.as_millis().clamp(1, i32::MAX as u128) as libc::c_int;
            let mut pfd = libc::pollfd { fd: self.fd.as_raw_fd(), events, revents: 0 };
            // SAFETY: one valid pollfd, and its count.
            let r = unsafe { libc::poll(&mut pfd, 1, ms) };
            if r > 0 {
                return Ok(());
            }
            if r < 0 {
                let e = io::Error::last_os_error();
                if e.raw_os_error() != Some(libc::EINTR) {
                    return Err(AttachError::io("poll on the attach socket", e));
                }
            }
        }
    }

    fn send_all(&self, mut buf: &[u8], deadline: &Deadline, target: &Target, command: &str) -> Result<(), AttachError> {
        let pid = target.pid;
        while !buf.is_empty() {
            // SAFETY: buf is valid for reading buf.len() bytes. MSG_NOSIGNAL:
            // a closed peer gives EPIPE instead of killing us with SIGPIPE.
            let n = unsafe { libc::send(self.fd.as_raw_fd(), buf.as_ptr() as *const libc::c_void, buf.len(), libc::MSG_NOSIGNAL) };
            if n >= 0 {
                buf = &buf[n as usize..];
                continue;
            }
            let e = io::Error::last_os_error();
            match e.raw_os_error() {
                Some(libc::EINTR) => {}
                Some(libc::EAGAIN) => self.wait(libc::POLLOUT, deadline, || format!("sending the '{command}' request to JVM {pid}"))?,
                Some(libc::EPIPE) | Some(libc::ECONNRESET) => {
                    if !process::exists(pid) {
                        return Err(AttachError::NoSuchProcess(pid));
                    }
                    return Err(AttachError::Protocol(format!(
                        "JVM {pid} hung up before reading the '{command}' request (it answers only peers with its own effective uid and gid, or root)"
                    )));
                }
                _ => return Err(AttachError::io(format!("sending the '{command}' request to JVM {pid}"), e)),
            }
        }
        Ok(())
    }

    /// Reads until the JVM closes the connection, which ends its reply, of
    /// at most `max` bytes.
    fn read_all(&self, deadline: &Deadline, target: &Target, command: &str, max: usize) -> Result<Vec<u8>, AttachError> {
        let pid = target.pid;
        let mut out = Vec::new();
        let mut buf = [0u8; 16384];
        loop {
            // SAFETY: buf is valid for writing buf.len() bytes.
            let n = unsafe { libc::read(self.fd.as_raw_fd(), buf.as_mut_ptr() as *mut libc::c_void, buf.len()) };
            if n > 0 {
                if out.len() + n as usize > max {
                    return Err(AttachError::Protocol(format!("JVM {pid}'s reply to '{command}' is longer than {} MiB; refusing the rest", max >> 20)));
                }
                out.extend_from_slice(&buf[..n as usize]);
                continue;
            }
            if n == 0 {
                return Ok(out);
            }
            let e = io::Error::last_os_error();
            match e.raw_os_error() {
                Some(libc::EINTR) => {}
                Some(libc::EAGAIN) => {
                    let got = out.len();
                    self.wait(libc::POLLIN, deadline, || {
                        format!("waiting for JVM {pid}'s reply to '{command}' ({got} bytes received so far; is the JVM stopped, hung or in a long pause?)")
                    })?
                }
                Some(libc::ECONNRESET) => return Ok(out),
                _ => return Err(AttachError::io(format!("reading JVM {pid}'s reply to '{command}'"), e)),
            }
        }
    }
}

fn sockaddr(path: &Path) -> Result<(libc::sockaddr_un, libc::socklen_t), AttachError> {
    use std::os::unix::ffi::OsStrExt;
    // SAFETY: sockaddr_un is plain data; all zeroes is a valid value.
    let mut addr: libc::sockaddr_un = unsafe { std::mem::zeroed() };
    let bytes = path.as_os_str().as_bytes();
    if bytes.len() >= addr.sun_path.len() || bytes.contains(&0) {
        return Err(AttachError::Protocol(format!("socket path {} is too long for a Unix socket address", path.display())));
    }
    addr.sun_family = libc::AF_UNIX as libc::sa_family_t;
    for (dst, &src) in addr.sun_path.iter_mut().zip(bytes) {
        *dst = src as libc::c_char;
    }
    let len = std::mem::size_of::<libc::sa_family_t>() + bytes.len() + 1;
    Ok((addr, len as libc::socklen_t))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

    #[test]
    fn requests() {
        assert_eq!(encode_request("properties", &[]).unwrap(), b"1\0properties\0\0\0\0");
        assert_eq!(encode_request("load", &["/a/lib.so", "true", "x=1"]).unwrap(), b"1\0load\0/a/lib.so\0true\0x=1\0");
        assert_eq!(encode_request("jcmd", &["VM.version"]).unwrap(), b"1\0jcmd\0VM.version\0\0\0");
        assert!(matches!(encode_request("", &[]), Err(AttachError::Protocol(_))));
        assert!(matches!(encode_request("averyveryverylongname", &[]), Err(AttachError::Protocol(_))));
        assert!(matches!(encode_request("load", &["a", "b", "c", "d"]), Err(AttachError::Protocol(_))));
        assert!(matches!(encode_request("load", &["a\0b"]), Err(AttachError::Protocol(_))));
        let long = "x".repeat(ARG_MAX + 1);
        assert!(matches!(encode_request("load", &[&long]), Err(AttachError::Protocol(_))));
    }

    #[test]
    fn replies() {
        let pid = std::process::id();
        assert_eq!(parse_reply(pid, b"0\nreturn code: 0\n").unwrap(), Reply { status: 0, text: "return code: 0\n".into() });
        assert_eq!(parse_reply(pid, b"-1\nOperation bogus not recognized!").unwrap(), Reply { status: -1, text: "Operation bogus not recognized!".into() });
        assert_eq!(parse_reply(pid, b"0").unwrap(), Reply { status: 0, text: String::new() });
        assert!(matches!(parse_reply(pid, b"hello\n"), Err(AttachError::Protocol(_))));
        assert!(matches!(parse_reply(pid, b""), Err(AttachError::Protocol(_))));
    }

    /// Review finding (attach): the reply was read into memory without
    /// bound until the JVM closed the connection or the time ran out, so a
    /// process posing as the JVM could make us hold gigabytes.
    #[test]
    fn replies_are_bounded() {
        let mut fds = [0; 2];
        // SAFETY: fds has room for the two descriptors socketpair writes.
        assert_eq!(unsafe { libc::socketpair(libc::AF_UNIX, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0, fds.as_mut_ptr()) }, 0);
        // SAFETY: descriptors just created, each owned once.
        let (ours, theirs) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
        let writer = std::thread::spawn(move || {
            let mut f = std::fs::File::from(theirs);
            // Stops when we stop reading and close our end.
            while std::io::Write::write_all(&mut f, &[b'x'; 65536]).is_ok() {}
        });
        let root = crate::test_support::FakeRoot::new("reply-cap");
        let deadline = Deadline { end: Instant::now() + Duration::from_secs(20), total: Duration::from_secs(20) };
        let conn = Conn { fd: ours };
        let err = conn.read_all(&deadline, &root.target(), "threaddump", 3 << 20).unwrap_err().to_string();
        assert!(err.contains("reply to 'threaddump' is longer than 3 MiB"), "{err}");
        drop(conn);
        writer.join().unwrap();
    }

    #[test]
    fn socket_address() {
        let (addr, len) = sockaddr(Path::new("/proc/42/root/tmp/.java_pid42")).unwrap();
        assert_eq!(len as usize, 2 + 29 + 1);
        assert_eq!(addr.sun_path[0], b'/' as libc::c_char);
        assert!(sockaddr(&PathBuf::from(format!("/{}", "x".repeat(200)))).is_err());
    }
}

//! The one error type of the crate: every failure is a value with a one-line,
//! actionable message.

use std::fmt;
use std::io;
use std::time::Duration;

/// Why an attach operation failed.
#[derive(Debug)]
pub enum AttachError {
    /// No process has this pid (or it exited while we talked to it).
    NoSuchProcess(u32),
    /// The process is not a HotSpot JVM we can attach to; `why` says what
    /// we saw. Nothing was sent to it.
    NotAJvm { pid: u32, why: String },
    /// We may not talk to the JVM as the user we run as.
    PermissionDenied { pid: u32, target_uid: u32, our_uid: u32, why: String },
    /// A step did not finish in time; `what` names the step.
    Timeout { what: String, after: Duration },
    /// The JVM was started with `-XX:+DisableAttachMechanism` (seen in its
    /// command line or options variables): it never answers.
    AttachDisabled { pid: u32 },
    /// The JVM answered something we do not understand, or hung up.
    Protocol(String),
    /// The JVM could not load the agent; the text is the JVM's (or ours when
    /// the library does not exist).
    LoadFailed(String),
    /// An operating-system call failed; `what` says which.
    Io { what: String, source: io::Error },
}

impl AttachError {
    pub(crate) fn io(what: impl Into<String>, source: io::Error) -> AttachError {
        AttachError::Io { what: what.into(), source }
    }
}

/// Multi-line JVM text on one line.
fn one_line(s: &str) -> String {
    s.lines().map(str::trim).filter(|l| !l.is_empty()).collect::<Vec<_>>().join("; ")
}

impl fmt::Display for AttachError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            AttachError::NoSuchProcess(pid) => {
                write!(f, "no process with pid {pid} (has it exited? `oxprof list` or `jps -l` shows running JVMs)")
            }
            AttachError::NotAJvm { pid, why } => write!(f, "process {pid} is not a HotSpot JVM that accepts attach requests: {why}"),
            AttachError::PermissionDenied { pid, target_uid, our_uid, why } => {
                let user = user_name(*target_uid).unwrap_or_else(|| format!("'#{target_uid}'"));
                write!(f, "cannot attach to process {pid} (uid {target_uid}) as uid {our_uid}: {why}; ")?;
                if *our_uid == 0 {
                    // sudo would change nothing.
                    write!(f, "the kernel refused root too: the process may be in another container, or a ptrace policy forbids it (Yama's kernel.yama.ptrace_scope=3)")
                } else if *target_uid == 0 {
                    write!(f, "run oxprof with sudo")
                } else {
                    write!(f, "run oxprof as the JVM's user (sudo -u {user} oxprof ...) or with sudo")
                }
            }
            AttachError::Timeout { what, after } => write!(f, "timed out after {} {what}", fmt_duration(*after)),
            AttachError::AttachDisabled { pid } => write!(
                f,
                "JVM {pid} was started with -XX:+DisableAttachMechanism and never answers attach requests; restart it without that flag, or with -agentpath:<liboxprof.so>=... to profile it from the start"
            ),
            AttachError::Protocol(s) => write!(f, "attach protocol error: {}", one_line(s)),
            AttachError::LoadFailed(s) => write!(f, "the JVM did not load the agent: {}", one_line(s)),
            AttachError::Io { what, source } => write!(f, "{what}: {source}"),
        }
    }
}

/// The name of `uid` in /etc/passwd, if it has one.
fn user_name(uid: u32) -> Option<String> {
    let passwd = std::fs::read_to_string("/etc/passwd").ok()?;
    passwd.lines().find_map(|l| {
        let mut f = l.split(':');
        let name = f.next()?;
        (f.nth(1)?.parse::<u32>().ok()? == uid).then(|| name.to_string())
    })
}

fn fmt_duration(d: Duration) -> String {
    if d.as_millis() < 1000 {
        format!("{} ms", d.as_millis())
    } else {
        format!("{:.1} s", d.as_secs_f64())
    }
}

impl std::error::Error for AttachError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            AttachError::Io { source, .. } => Some(source),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_are_one_line() {
        let errors = [
            AttachError::NoSuchProcess(7),
            AttachError::NotAJvm { pid: 7, why: "no libjvm.so".into() },
            AttachError::PermissionDenied { pid: 7, target_uid: 1000, our_uid: 1001, why: "different users".into() },
            AttachError::Timeout { what: "waiting".into(), after: Duration::from_millis(1500) },
            AttachError::AttachDisabled { pid: 7 },
            AttachError::Protocol("a\nb\n".into()),
            AttachError::LoadFailed("/x.so was not loaded.\n/x.so: cannot open shared object file\n".into()),
            AttachError::io("reading /proc/7/maps", io::Error::from(io::ErrorKind::NotFound)),
        ];
        for e in errors {
            let s = e.to_string();
            assert!(!s.contains('\n'), "{s:?}");
        }
        assert_eq!(
            AttachError::LoadFailed("/x.so was not loaded.\n/x.so: no such file\n".into()).to_string(),
            "the JVM did not load the agent: /x.so was not loaded.; /x.so: no such file"
        );
        assert!(AttachError::Timeout { what: "w".into(), after: Duration::from_millis(1500) }.to_string().contains("1.5 s"));
        let denied = |target_uid| AttachError::PermissionDenied { pid: 7, target_uid, our_uid: 1001, why: "w".into() }.to_string();
        assert!(denied(0).ends_with("run oxprof with sudo"), "{}", denied(0));
        let as_root = AttachError::PermissionDenied { pid: 1, target_uid: 0, our_uid: 0, why: "w".into() }.to_string();
        assert!(!as_root.contains("sudo") && as_root.contains("refused root too"), "{as_root}");
        assert!(denied(4_000_000_000).contains("sudo -u '#4000000000' oxprof"), "{}", denied(4_000_000_000));
        assert_eq!(user_name(0).as_deref(), Some("root"));
    }
}

//! Thread states of CPU and wall-clock samples: the words profiles,
//! filters and options use (`running`, `sleeping`, ...), their numbering
//! (`ThreadState as u8`, which the agent stores with every
//! sample), the names the JDK gives them in `jdk.types.ThreadState`, and
//! the root frames (`[sleeping]`) that show them in a profile.

use crate::model::{Frame, FrameKind};

/// A sampled thread's state. The numbering is the agent's (a stored
/// sample's state byte) and must not change.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ThreadState {
    /// Not known (no structure table, not a Java thread, or a JFR state
    /// this reader does not map).
    Unknown = 0,
    /// Running Java code.
    Running = 1,
    /// In native code or a system call.
    Native = 2,
    /// In the JVM itself.
    Vm = 3,
    /// Waiting to enter a contended monitor.
    Blocked = 4,
    /// In `Object.wait()`.
    Waiting = 5,
    /// Parked (`LockSupport.park`).
    Parked = 6,
    /// In `Thread.sleep()`.
    Sleeping = 7,
}

/// The words `--state` accepts, in the order messages list them.
pub const STATE_WORDS: &str = "running, native, vm, blocked, waiting, parked, sleeping, unknown";

impl ThreadState {
    pub const ALL: [ThreadState; 8] = [
        ThreadState::Unknown,
        ThreadState::Running,
        ThreadState::Native,
        ThreadState::Vm,
        ThreadState::Blocked,
        ThreadState::Waiting,
        ThreadState::Parked,
        ThreadState::Sleeping,
    ];

    /// The state of a stored sample's state byte (unknown when out of range).
    pub fn from_u8(v: u8) -> ThreadState {
        ThreadState::ALL.get(v as usize).copied().unwrap_or(ThreadState::Unknown)
    }

    /// Its word in profiles, filters and options.
    pub const fn name(self) -> &'static str {
        match self {
            ThreadState::Unknown => "unknown",
            ThreadState::Running => "running",
            ThreadState::Native => "native",
            ThreadState::Vm => "vm",
            ThreadState::Blocked => "blocked",
            ThreadState::Waiting => "waiting",
            ThreadState::Parked => "parked",
            ThreadState::Sleeping => "sleeping",
        }
    }

    /// The state a word names.
    pub fn from_word(w: &str) -> Option<ThreadState> {
        ThreadState::ALL.into_iter().find(|s| s.name() == w)
    }

    /// A comma-separated list of words (`sleeping,parked`); the error names
    /// the bad word and the accepted ones.
    pub fn parse_list(s: &str) -> Result<Vec<ThreadState>, String> {
        let mut out = Vec::new();
        for w in s.split(',').map(str::trim).filter(|w| !w.is_empty()) {
            let st = ThreadState::from_word(&w.to_ascii_lowercase()).ok_or_else(|| format!("unknown thread state '{w}'; accepted: {STATE_WORDS}"))?;
            if !out.contains(&st) {
                out.push(st);
            }
        }
        if out.is_empty() {
            return Err(format!("no thread state given; accepted: {STATE_WORDS}"));
        }
        Ok(out)
    }

    /// Its name in `jdk.types.ThreadState`, as the JDK's JFR names states.
    pub const fn jfr_name(self) -> &'static str {
        match self {
            ThreadState::Unknown => "STATE_UNKNOWN",
            ThreadState::Running => "STATE_RUNNABLE",
            ThreadState::Native => "STATE_IN_NATIVE",
            ThreadState::Vm => "STATE_IN_VM",
            ThreadState::Blocked => "STATE_BLOCKED_ON_MONITOR_ENTER",
            ThreadState::Waiting => "STATE_IN_OBJECT_WAIT",
            ThreadState::Parked => "STATE_PARKED",
            ThreadState::Sleeping => "STATE_SLEEPING",
        }
    }

    /// The state a `jdk.types.ThreadState` name stands for (the JDK's timed
    /// variants included).
    pub fn from_jfr_name(name: &str) -> ThreadState {
        match name {
            "STATE_RUNNABLE" => ThreadState::Running,
            "STATE_IN_NATIVE" => ThreadState::Native,
            "STATE_IN_VM" => ThreadState::Vm,
            "STATE_BLOCKED_ON_MONITOR_ENTER" => ThreadState::Blocked,
            "STATE_IN_OBJECT_WAIT" | "STATE_IN_OBJECT_WAIT_TIMED" => ThreadState::Waiting,
            "STATE_PARKED" | "STATE_PARKED_TIMED" => ThreadState::Parked,
            "STATE_SLEEPING" => ThreadState::Sleeping,
            _ => ThreadState::Unknown,
        }
    }

    /// The state told apart by the sample's innermost Java frame
    /// (`class`, `method`), where HotSpot's own states do not: from JDK 17
    /// `Thread.sleep` waits like a park, so a thread parked or in the VM
    /// under `java.lang.Thread.sleep…` is sleeping.
    pub fn refine(self, innermost_java: Option<(&str, &str)>) -> ThreadState {
        match (self, innermost_java) {
            (ThreadState::Parked | ThreadState::Vm, Some(("java.lang.Thread", method))) if method.starts_with("sleep") => ThreadState::Sleeping,
            _ => self,
        }
    }

    /// The root frame naming it (`[sleeping]`).
    pub fn frame(self) -> Frame {
        Frame::new(format!("[{}]", self.name()), FrameKind::State)
    }

    /// The state a state frame's name (`[sleeping]`) stands for.
    pub fn from_frame_name(name: &str) -> Option<ThreadState> {
        ThreadState::from_word(name.strip_prefix('[')?.strip_suffix(']')?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn words_numbers_and_jfr_names_round_trip() {
        for (i, s) in ThreadState::ALL.into_iter().enumerate() {
            assert_eq!(s as usize, i);
            assert_eq!(ThreadState::from_u8(i as u8), s);
            assert_eq!(ThreadState::from_word(s.name()), Some(s));
            assert_eq!(ThreadState::from_jfr_name(s.jfr_name()), s);
            assert_eq!(ThreadState::from_frame_name(&s.frame().name), Some(s));
            assert!(STATE_WORDS.contains(s.name()));
        }
        assert_eq!(ThreadState::from_u8(200), ThreadState::Unknown);
        assert_eq!(ThreadState::from_jfr_name("STATE_PARKED_TIMED"), ThreadState::Parked);
        assert_eq!(ThreadState::from_frame_name("[main tid=1]"), None);
    }

    #[test]
    fn lists_parse_and_name_bad_words() {
        assert_eq!(ThreadState::parse_list("sleeping, Parked,sleeping"), Ok(vec![ThreadState::Sleeping, ThreadState::Parked]));
        let e = ThreadState::parse_list("sleeping,bogus").unwrap_err();
        assert!(e.contains("'bogus'") && e.contains(STATE_WORDS), "{e}");
        assert!(ThreadState::parse_list(",").is_err());
    }
}

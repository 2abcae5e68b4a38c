//! The one shape every event source has. A source (CPU samples in
//! `sampling::cpu`, allocations and live objects in `heap::sources`; wall
//! clock, locks and safepoints next) is started from the recording's options
//! by a [`Starter`], records into stores of its own, is stopped, and builds
//! its profile, whose [`Meta`] says what it records and how a sample is
//! weighed (event, engine, interval, unit of its totals). The lifecycle in
//! `profiler.rs` runs the starters in order and the started sources as
//! trait objects, without knowing what they are; a new event is a new module
//! with a starter added to [`crate::profiler::STARTERS`].
//!
//! Also here, for every source's build: the recording the sources belong to,
//! and turning stored frames into named profile frames.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Instant;

use jvmti_sys::asgct::{AsyncGetCallTraceFn, BCI_NATIVE_FRAME};
use jvmti_sys::{jmethodID, JavaVM};
use oxprof_profile::{Frame, FrameKind, Meta, Profile};

use crate::heap::alloc::AllocSampler;
use crate::hotspot::vmstructs::VmStructs;
use crate::jvmti::{Jni, Jvmti};
use crate::locks::sampler::LockSampler;
use crate::native::symbols as native_symbols;
use crate::options::Config;
use crate::output::Built;
use crate::sampling::store::{JavaFrameType, RawFrame};
use crate::sampling::threads::Threads;
use crate::symbols::Symbols;

/// What a starter gets: the recording's options and the JVM's handles.
pub struct StartContext<'a> {
    pub config: &'a Config,
    /// The process's JavaVM (valid for the process's life).
    pub vm: *mut JavaVM,
    pub asgct: Option<AsyncGetCallTraceFn>,
    /// The starting thread's environments.
    pub env: (Jvmti, Jni),
    /// Whether objects may be tagged.
    pub can_tag: bool,
    /// The sampled threads.
    pub threads: &'a Arc<Threads>,
    /// The allocation sampler the JVMTI callbacks feed.
    pub alloc: &'static AllocSampler,
    /// The lock sampler the monitor events and the park hook feed.
    pub locks: &'static LockSampler,
    /// HotSpot's structure table, when this JVM's may be used.
    pub vm_structs: Option<&'a VmStructs>,
}

/// A started source and one line for the log; `None` when the options do
/// not ask for it.
pub type Started = Option<(Box<dyn EventSource>, String)>;

/// Starts one kind of event source if the options ask for it.
pub type Starter = fn(&StartContext) -> Result<Started, String>;

/// What a build gets: the recording, the command that asked for it, and
/// what names frames.
pub struct BuildContext<'a> {
    pub rec: &'a Recording,
    /// The `dump`/`stop` command's options (the start options at JVM exit).
    pub command: &'a Config,
    pub symbols: &'a Symbols,
    pub jvmti: Jvmti,
    pub jni: Jni,
    pub threads: &'a Threads,
    pub vm_structs: Option<&'a VmStructs>,
    /// Continuous profiling (`loop=`): this build ends the current interval,
    /// so the next one counts from what it read (see `sampling::interval`).
    pub close_interval: bool,
}

/// A started event source.
pub trait EventSource: Send {
    /// Short name, used in the file names of extra outputs and summaries:
    /// "cpu", "alloc", "live".
    fn key(&self) -> &'static str;
    /// Its part of the status line, e.g. "cpu (perf_events, interval 10ms)".
    fn status(&self) -> String;
    /// Its settings for a JFR recording: (event type id, name, value).
    fn jfr_settings(&self) -> Vec<(u64, &'static str, String)> {
        Vec::new()
    }
    /// Called once every source of the recording has started (nothing can
    /// fail any more).
    fn all_started(&self) {}
    /// Stops sampling; what was recorded stays for [`EventSource::build`].
    /// Without a JNI environment (the VM is unloading) only what needs none
    /// is stopped.
    fn stop(&mut self, env: Option<(Jvmti, Jni)>);
    /// Builds its profile from what it recorded (also while it runs).
    fn build(&self, cx: &BuildContext) -> Built;
}

/// A recording in progress: its options, when it started, its sources.
pub struct Recording {
    pub config: Config,
    pub started: Instant,
    pub start_wall_ns: u64,
    pub sources: Vec<Box<dyn EventSource>>,
    /// The triggers that choose when CPU samples are kept (`begin=`,
    /// `end=`, `ttsp`), armed before the sources started.
    pub gate: Option<Arc<crate::trigger::gate::Gate>>,
    /// When the current interval began (`loop=`; the recording's start
    /// until the first interval ends): wall-clock ns and the same instant.
    pub interval_start: std::sync::Mutex<(u64, Instant)>,
}

impl Recording {
    /// When the current interval began (the recording's start without `loop=`).
    pub fn interval_start(&self) -> (u64, Instant) {
        *self.interval_start.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The current interval ends now; the next begins.
    pub fn next_interval(&self, wall_ns: u64, at: Instant) {
        *self.interval_start.lock().unwrap_or_else(|e| e.into_inner()) = (wall_ns, at);
    }

    /// The running source with this key.
    pub fn source(&self, key: &str) -> Option<&dyn EventSource> {
        self.sources.iter().find(|s| s.key() == key).map(|s| &**s)
    }

    /// A profile's metadata: what it shows and how its samples are weighed.
    pub fn meta(&self, title: &str, event: &str, engine: &str, interval: u64, unit: &str) -> Meta {
        Meta {
            title: self.config.title.clone().unwrap_or_else(|| title.to_string()),
            event: event.to_string(),
            engine: engine.to_string(),
            interval,
            total_unit: unit.to_string(),
            start_ns: self.interval_start().0,
            duration_ns: self.interval_start().1.elapsed().as_nanos() as u64,
            extra: Vec::new(),
        }
    }
}

impl BuildContext<'_> {
    /// The root frame of a thread (option `threads`).
    pub fn thread_root(&self, tid: u32) -> Frame {
        let name = self.threads.name(tid).unwrap_or_else(|| "thread".into());
        Frame::new(format!("[{name} tid={tid}]"), FrameKind::Thread)
    }

    /// Appends the root frames of a stored sample's context-label set
    /// (`labels.rs`; none for 0), outermost first: every source's stacks
    /// start with them.
    pub fn label_roots(&self, profile: &mut Profile, labels: u32, out: &mut Vec<u32>) {
        if labels != crate::labels::NONE {
            out.extend(crate::labels::frames(labels).into_iter().map(|f| profile.intern(f)));
        }
    }

    /// # Safety
    /// As [`Symbols::resolve`]'s `method`.
    unsafe fn java_frame(&self, method: usize, native: bool) -> Frame {
        // SAFETY: as this function's contract.
        let name = unsafe { self.symbols.resolve(self.jvmti, self.jni, method as jmethodID) };
        Frame::new(name.frame_name(), if native { FrameKind::Native } else { FrameKind::Java })
    }

    /// Turns one stored frame into a model frame (see [`RawFrame`]'s encoding).
    pub fn frame(&self, f: &RawFrame) -> Frame {
        match f.bci {
            RawFrame::NATIVE_PC => native_symbols::resolver().frame(f.method, false),
            RawFrame::KERNEL_PC => native_symbols::resolver().frame(f.method, true),
            // SAFETY: a stored Java frame's `method` is a jmethodID the
            // sampler recorded; Symbols keeps the names of those whose class
            // may unload, so the JVM is asked only about the others.
            BCI_NATIVE_FRAME => unsafe { self.java_frame(f.method, true) },
            _ => {
                // SAFETY: as above.
                let mut frame = unsafe { self.java_frame(f.method, false) };
                frame.kind = match f.java_type() {
                    JavaFrameType::Unknown => FrameKind::Java,
                    JavaFrameType::Interpreted => FrameKind::Interpreted,
                    JavaFrameType::Compiled => FrameKind::Jit,
                    JavaFrameType::Inlined => FrameKind::Inlined,
                };
                frame
            }
        }
    }
}

/// Stored frames already turned into profile frames during one build: a
/// deep profile repeats the same few thousand frames hundreds of thousands
/// of times, and naming one means a symbol lookup and a new string.
#[derive(Default)]
pub struct FrameMemo(HashMap<RawFrame, u32>);

impl FrameMemo {
    pub fn id(&mut self, profile: &mut Profile, f: &RawFrame, make: impl FnOnce() -> Frame) -> u32 {
        *self.0.entry(*f).or_insert_with(|| profile.intern(make()))
    }
}

/// An interval for people: `10ms`, `250us`, `2s`, `1234ns`.
pub fn fmt_interval(ns: u64) -> String {
    if ns.is_multiple_of(1_000_000_000) {
        format!("{}s", ns / 1_000_000_000)
    } else if ns.is_multiple_of(1_000_000) {
        format!("{}ms", ns / 1_000_000)
    } else if ns.is_multiple_of(1000) {
        format!("{}us", ns / 1000)
    } else {
        format!("{ns}ns")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn intervals() {
        assert_eq!(fmt_interval(10_000_000), "10ms");
        assert_eq!(fmt_interval(250_000), "250us");
        assert_eq!(fmt_interval(2_000_000_000), "2s");
        assert_eq!(fmt_interval(1234), "1234ns");
    }
}

//! The profile model: interned frames, stacks (root first) with two counters
//! each, and metadata describing how the profile was recorded.

use std::collections::HashMap;
use std::hash::BuildHasher;

/// What kind of code a frame stands for. Writers use it for colour and for
/// the frame-type annotations of collapsed stacks.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum FrameKind {
    /// A Java method running in the interpreter.
    Interpreted,
    /// A Java method compiled by the JIT.
    Jit,
    /// A Java method inlined into a compiled caller.
    Inlined,
    /// A Java method whose frame type is not known (plain AsyncGetCallTrace).
    Java,
    /// A Java `native` method, or a native (C) function.
    Native,
    /// A C++ function (for example inside libjvm).
    Cpp,
    /// A kernel function.
    Kernel,
    /// A synthetic root naming a thread.
    Thread,
    /// A synthetic frame naming why a stack could not be walked.
    Error,
    /// The class of an allocated object (leaf of allocation stacks).
    Alloc,
    /// A synthetic root naming a thread's state (running, sleeping, ...).
    State,
    /// The class of a lock waited for (leaf of lock stacks).
    Lock,
    /// A synthetic root naming a context label of the sample
    /// (`[endpoint=GET /orders]`, see [`crate::labels`]).
    Label,
}

impl FrameKind {
    /// async-profiler's collapsed-stack annotation suffix for this kind.
    pub fn annotation(self) -> &'static str {
        match self {
            FrameKind::Interpreted => "_[0]",
            FrameKind::Jit => "_[j]",
            FrameKind::Inlined => "_[i]",
            FrameKind::Kernel => "_[k]",
            FrameKind::Alloc => "_[a]",
            _ => "",
        }
    }

    /// A short stable name, used in the HTML legend and in tooltips.
    pub fn label(self) -> &'static str {
        match self {
            FrameKind::Interpreted => "interpreted",
            FrameKind::Jit => "JIT-compiled",
            FrameKind::Inlined => "inlined",
            FrameKind::Java => "Java",
            FrameKind::Native => "native",
            FrameKind::Cpp => "C++",
            FrameKind::Kernel => "kernel",
            FrameKind::Thread => "thread",
            FrameKind::Error => "failed walk",
            FrameKind::Alloc => "allocated class",
            FrameKind::State => "thread state",
            FrameKind::Lock => "lock class",
            FrameKind::Label => "context label",
        }
    }

    /// All kinds, in a stable order (used for legends and encodings).
    pub const ALL: [FrameKind; 13] = [
        FrameKind::Interpreted,
        FrameKind::Jit,
        FrameKind::Inlined,
        FrameKind::Java,
        FrameKind::Native,
        FrameKind::Cpp,
        FrameKind::Kernel,
        FrameKind::Thread,
        FrameKind::Error,
        FrameKind::Alloc,
        FrameKind::State,
        FrameKind::Lock,
        FrameKind::Label,
    ];

    /// Index of this kind in [`FrameKind::ALL`].
    pub fn index(self) -> usize {
        FrameKind::ALL.iter().position(|k| *k == self).unwrap_or(0)
    }
}

/// One frame: a display name, its kind and, where a source told it, the
/// source line (0 = unknown). Frames differing only in line are distinct;
/// writers that show methods rather than lines use [`Profile::without_lines`].
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Frame {
    pub name: String,
    pub kind: FrameKind,
    pub line: u32,
}

impl Frame {
    pub fn new(name: impl Into<String>, kind: FrameKind) -> Frame {
        Frame { name: name.into(), kind, line: 0 }
    }

    /// The same frame at a source line (0 = unknown).
    pub fn with_line(mut self, line: u32) -> Frame {
        self.line = line;
        self
    }
}

/// A thread root's name (`[name]`, or the agent's `[name tid=N]`): the
/// thread's name and, in the agent's form, its id.
pub fn thread_of_root(frame: &str) -> (&str, Option<u64>) {
    let inner = frame.strip_prefix('[').and_then(|n| n.strip_suffix(']')).unwrap_or(frame);
    match inner.rsplit_once(" tid=") {
        Some((name, tid)) if !tid.is_empty() && tid.bytes().all(|b| b.is_ascii_digit()) => (name, tid.parse().ok()),
        _ => (inner, None),
    }
}

/// Which of a sample's two counters a writer shows.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Counter {
    /// Number of samples (the default).
    #[default]
    Samples,
    /// The estimated total: nanoseconds of CPU, or bytes allocated.
    Total,
}

/// A distinct stack with its counters.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Sample {
    /// Frame ids into [`Profile::frames`], root first.
    pub stack: Vec<u32>,
    /// How many samples hit this stack.
    pub samples: u64,
    /// The estimated total (CPU nanoseconds, allocated bytes, ...).
    pub total: u64,
}

/// How the profile was recorded. Writers show it as title and metadata.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Meta {
    /// Title shown by the flame graph.
    pub title: String,
    /// The event sampled: `cpu`, `itimer`, `ctimer`, `alloc`, ...
    pub event: String,
    /// The engine that produced samples, e.g. `perf_events cpu-clock`.
    pub engine: String,
    /// Sampling interval, in the unit of `total` (ns for CPU, bytes for alloc).
    pub interval: u64,
    /// Unit of the `total` counter: `ns` or `bytes`; empty when the
    /// profile holds counts only (collapsed stacks), see [`Meta::counts_only`].
    pub total_unit: String,
    /// Recording start, nanoseconds since the Unix epoch.
    pub start_ns: u64,
    /// Recording length in nanoseconds.
    pub duration_ns: u64,
    /// Free-form key/value facts (failed-walk counts, dropped samples, ...).
    pub extra: Vec<(String, String)>,
}

impl Meta {
    /// Whether the profile holds counts only, its total no quantity of
    /// its own (collapsed stacks: no unit, no interval).
    pub fn counts_only(&self) -> bool {
        self.total_unit.is_empty()
    }
}

/// The sample and period type a profile of counts only is written with
/// (pprof, OTLP) and known by when read back: a count of samples, each
/// standing for one.
pub const COUNTS_TYPE: (&str, &str) = ("samples", "count");

/// A hasher for keys that are hashes already: passes a `u64` through.
#[derive(Clone, Copy, Debug, Default)]
struct HashedKey(u64);

impl std::hash::Hasher for HashedKey {
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = self.0.rotate_left(8) ^ u64::from(b);
        }
    }
    fn write_u64(&mut self, n: u64) {
        self.0 = n;
    }
    fn finish(&self) -> u64 {
        self.0
    }
}

/// A profile: interned frames and distinct stacks with counters.
#[derive(Clone, Debug, Default)]
pub struct Profile {
    pub meta: Meta,
    frames: Vec<Frame>,
    /// The newest frame id by its frame's hash (`hasher`); per frame id, the
    /// next older id with the same hash (`u32::MAX`: none). Each frame is
    /// held once, and hashed once.
    frame_ids: HashMap<u64, u32, std::hash::BuildHasherDefault<HashedKey>>,
    same_hash: Vec<u32>,
    hasher: crate::hash::FastState,
    samples: Vec<Sample>,
    stack_ids: crate::hash::FastMap<Vec<u32>, usize>,
    /// The safepoints recorded beside the samples (time-to-safepoint
    /// recordings, JFR files with safepoint events); empty otherwise.
    pub safepoints: Vec<crate::safepoint::Safepoint>,
}

impl Profile {
    pub fn new(meta: Meta) -> Profile {
        Profile { meta, ..Profile::default() }
    }

    /// Interns a frame and returns its id.
    pub fn intern(&mut self, frame: Frame) -> u32 {
        let hash = self.hasher.hash_one(&frame);
        if let Some(id) = self.find(hash, &frame) {
            return id;
        }
        let id = self.frames.len() as u32;
        let older = self.frame_ids.insert(hash, id);
        self.same_hash.push(older.unwrap_or(u32::MAX));
        self.frames.push(frame);
        id
    }

    /// The id of `frame`, whose hash is `hash`, if interned.
    fn find(&self, hash: u64, frame: &Frame) -> Option<u32> {
        let mut at = self.frame_ids.get(&hash).copied();
        while let Some(id) = at {
            if self.frames.get(id as usize) == Some(frame) {
                return Some(id);
            }
            at = self.same_hash.get(id as usize).copied().filter(|&next| next != u32::MAX);
        }
        None
    }

    /// Adds counts to a stack of frame ids (root first), merging identical
    /// stacks. Counts saturate: they come from files, which may say anything.
    pub fn add(&mut self, stack: Vec<u32>, samples: u64, total: u64) {
        if let Some(&i) = self.stack_ids.get(&stack) {
            let s = &mut self.samples[i];
            s.samples = s.samples.saturating_add(samples);
            s.total = s.total.saturating_add(total);
            return;
        }
        self.stack_ids.insert(stack.clone(), self.samples.len());
        self.samples.push(Sample { stack, samples, total });
    }

    /// Adds counts to a stack given as frames (root first).
    pub fn add_frames(&mut self, frames: impl IntoIterator<Item = Frame>, samples: u64, total: u64) {
        let stack: Vec<u32> = frames.into_iter().map(|f| self.intern(f)).collect();
        self.add(stack, samples, total);
    }

    pub fn frames(&self) -> &[Frame] {
        &self.frames
    }

    pub fn frame(&self, id: u32) -> &Frame {
        &self.frames[id as usize]
    }

    pub fn samples(&self) -> &[Sample] {
        &self.samples
    }

    /// The value of a sample for the chosen counter.
    pub fn value(sample: &Sample, counter: Counter) -> u64 {
        match counter {
            Counter::Samples => sample.samples,
            Counter::Total => sample.total,
        }
    }

    /// Sum of a counter over all stacks.
    pub fn sum(&self, counter: Counter) -> u64 {
        self.samples.iter().fold(0, |sum, s| sum.saturating_add(Profile::value(s, counter)))
    }

    /// Number of samples whose stack contains a frame of the given kind.
    pub fn samples_with_kind(&self, kind: FrameKind) -> u64 {
        self.samples.iter().filter(|s| s.stack.iter().any(|&f| self.frame(f).kind == kind)).fold(0, |sum, s| sum.saturating_add(s.samples))
    }

    pub fn is_empty(&self) -> bool {
        self.samples.is_empty()
    }

    /// Whether any frame carries a source line.
    pub fn has_lines(&self) -> bool {
        self.frames.iter().any(|f| f.line != 0)
    }

    /// The same profile with line numbers dropped, so that frames of one
    /// method merge (what flame graphs and collapsed stacks show); the
    /// safepoints stay.
    pub fn without_lines(&self) -> Profile {
        if !self.has_lines() {
            return self.clone();
        }
        let mut out = Profile { meta: self.meta.clone(), safepoints: self.safepoints.clone(), ..Profile::default() };
        let map: Vec<u32> = self.frames.iter().map(|f| out.intern(Frame::new(f.name.clone(), f.kind))).collect();
        for s in &self.samples {
            out.add(s.stack.iter().map(|&f| map[f as usize]).collect(), s.samples, s.total);
        }
        out
    }

    /// The same samples with every frame replaced by what `f` makes of it;
    /// stacks that become equal are merged.
    pub fn map_frames(&self, f: impl Fn(&Frame) -> Frame) -> Profile {
        let mut out = Profile { meta: self.meta.clone(), safepoints: self.safepoints.clone(), ..Profile::default() };
        let map: Vec<u32> = self.frames.iter().map(|fr| out.intern(f(fr))).collect();
        for s in &self.samples {
            out.add(s.stack.iter().map(|&id| map[id as usize]).collect(), s.samples, s.total);
        }
        out
    }

    /// Keeps only the stacks for which `keep` is true (frame ids as given).
    pub fn retain(&mut self, mut keep: impl FnMut(&Profile, &Sample) -> bool) {
        let samples = std::mem::take(&mut self.samples);
        self.stack_ids.clear();
        for s in samples {
            if keep(self, &s) {
                self.add(s.stack, s.samples, s.total);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn identical_stacks_merge_and_frames_intern() {
        let mut p = Profile::new(Meta::default());
        let a = Frame::new("A.main", FrameKind::Jit);
        let b = Frame::new("A.hot", FrameKind::Inlined);
        p.add_frames([a.clone(), b.clone()], 2, 20);
        p.add_frames([a.clone(), b.clone()], 3, 30);
        p.add_frames([a.clone()], 1, 10);
        assert_eq!(p.frames().len(), 2);
        assert_eq!(p.samples().len(), 2);
        assert_eq!(p.samples()[0].samples, 5);
        assert_eq!(p.samples()[0].total, 50);
        assert_eq!(p.sum(Counter::Samples), 6);
        assert_eq!(p.sum(Counter::Total), 60);
        assert_eq!(p.samples_with_kind(FrameKind::Inlined), 5);
    }

    #[test]
    fn lines_are_distinct_until_dropped() {
        let mut p = Profile::new(Meta::default());
        let main = Frame::new("A.main", FrameKind::Jit);
        p.add_frames([main.clone(), Frame::new("A.f", FrameKind::Jit).with_line(3)], 1, 10);
        p.add_frames([main.clone(), Frame::new("A.f", FrameKind::Jit).with_line(4)], 2, 20);
        assert_eq!(p.samples().len(), 2);
        assert!(p.has_lines());
        p.safepoints = vec![crate::safepoint::Safepoint { id: 3, ttsp_ns: 10, ..Default::default() }];
        let q = p.without_lines();
        assert_eq!(q.safepoints, p.safepoints);
        assert!(!q.has_lines());
        assert_eq!(q.samples().len(), 1);
        assert_eq!(q.samples()[0].samples, 3);
        assert_eq!(q.sum(Counter::Total), 30);
    }

    #[test]
    fn retain_drops_stacks() {
        let mut p = Profile::new(Meta::default());
        p.add_frames([Frame::new("A.main", FrameKind::Jit)], 1, 10);
        p.add_frames([Frame::new("B.main", FrameKind::Jit)], 2, 20);
        p.retain(|p, s| p.frame(s.stack[0]).name.starts_with('B'));
        assert_eq!(p.sum(Counter::Samples), 2);
        p.add_frames([Frame::new("B.main", FrameKind::Jit)], 1, 1);
        assert_eq!(p.samples().len(), 1);
    }

    /// Frames whose hashes collide stay distinct and are found again.
    #[test]
    fn frames_with_equal_hashes_chain() {
        let mut p = Profile::new(Meta::default());
        let frames: Vec<Frame> = (0..50).map(|i| Frame::new(format!("F.f{i}"), FrameKind::Jit)).collect();
        let ids: Vec<u32> = frames.iter().map(|f| p.intern(f.clone())).collect();
        // Every frame under one hash: the chain alone tells them apart.
        let (mut q, hash) = (Profile::new(Meta::default()), 7u64);
        for (i, f) in frames.iter().enumerate() {
            let older = q.frame_ids.insert(hash, i as u32);
            q.same_hash.push(older.unwrap_or(u32::MAX));
            q.frames.push(f.clone());
        }
        assert!(frames.iter().enumerate().all(|(i, f)| q.find(hash, f) == Some(i as u32)));
        assert_eq!(q.find(hash, &Frame::new("F.other", FrameKind::Jit)), None);
        assert_eq!(ids, (0..50).collect::<Vec<u32>>());
        assert!(frames.iter().zip(&ids).all(|(f, &id)| p.intern(f.clone()) == id));
        assert_eq!(p.frames().len(), 50);
    }

    #[test]
    fn same_name_different_kind_are_distinct_frames() {
        let mut p = Profile::new(Meta::default());
        let x = p.intern(Frame::new("A.f", FrameKind::Jit));
        let y = p.intern(Frame::new("A.f", FrameKind::Interpreted));
        assert_ne!(x, y);
    }
}

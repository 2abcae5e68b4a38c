//! A JFR recording made from built profiles, for a dump to `.jfr` of a
//! recording that was not streaming JFR (started with another format, or
//! none): the agent keeps counts per stack, not events, so each sample
//! becomes one event of its kind, its time spread evenly over the
//! recording (the times are not when samples were taken: a setting says
//! so), its weight the stack's total shared among its samples. Threads,
//! thread states and context labels come back from the profiles' root
//! frames; the allocated class and the lock class from their leaf frames.
//! Safepoints timed by `ttsp` are written at their real times, as the JDK's
//! own safepoint events. Live objects are not written (they are a report,
//! not events).
//!
//! Readers see what a streamed recording of the same samples would show
//! in aggregate (`jfr summary`, `oxprof convert`, `report`, `--by`), not
//! when things happened.

use crate::hash::FastMap as HashMap;
use std::io::{self, Write};

use crate::jfr::writer::{event_type, SafepointEvent};
use crate::jfr::{FrameType, JfrFrame, JfrWriter, ThreadState};
use crate::model::{FrameKind, Profile, Sample};

/// Events written per kind.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Written {
    pub cpu: u64,
    pub wall: u64,
    pub alloc: u64,
    pub lock: u64,
    pub safepoints: u64,
}

/// The thread given to samples whose profile has no thread roots.
const ALL_THREADS: u64 = 1;

/// Writes a one-chunk recording of `parts` (the agent's source keys
/// `cpu`, `wall`, `alloc`, `lock`; others are left out) covering
/// `start_ns..end_ns` (Unix epoch nanoseconds) to `out`.
pub fn write<W: Write>(out: W, parts: &[(&str, &Profile)], start_ns: u64, end_ns: u64) -> io::Result<Written> {
    let mut w = JfrWriter::new(out);
    let duration = end_ns.saturating_sub(start_ns).max(1) as i64;
    w.begin_chunk(0, start_ns as i64)?;
    w.recording(0, ALL_THREADS, "oxprof", "", (start_ns / 1_000_000) as i64, duration / 1_000_000)?;
    let mut cx = Cx::default();
    let mut written = Written::default();
    for &(key, p) in parts {
        let (id, count) = match key {
            "cpu" => (event_type::EXECUTION_SAMPLE, &mut written.cpu),
            "wall" => (event_type::WALL_CLOCK_SAMPLE, &mut written.wall),
            "alloc" => (event_type::OBJECT_ALLOCATION_SAMPLE, &mut written.alloc),
            "lock" => (event_type::JAVA_MONITOR_ENTER, &mut written.lock),
            _ => continue,
        };
        if matches!(key, "cpu" | "wall") && p.meta.interval > 0 {
            w.setting(0, ALL_THREADS, id, "period", &format!("{} ns", p.meta.interval))?;
        }
        w.setting(0, ALL_THREADS, id, "times", "spread over the recording: written from aggregated samples by a dump")?;
        let events: u64 = p.samples().iter().fold(0u64, |n, s| n.saturating_add(s.samples));
        let mut i: u64 = 0;
        for s in p.samples() {
            let e = cx.event(&mut w, p, s);
            for k in 0..s.samples {
                // Spread over the recording, in sample order.
                let ticks = ((i as u128 * duration as u128) / events.max(1) as u128) as i64;
                i += 1;
                let share = s.total / s.samples.max(1) + u64::from(k < s.total % s.samples.max(1));
                match key {
                    "cpu" if e.state == ThreadState::Native => w.native_method_sample(ticks, e.tid, e.stack, e.state, e.labels)?,
                    "cpu" => w.execution_sample(ticks, e.tid, e.stack, e.state, e.labels)?,
                    "wall" => w.wall_clock_sample(ticks, e.tid, e.stack, e.state, share, e.labels)?,
                    "alloc" => w.allocation_sample(ticks, e.tid, e.stack, e.leaf_class.as_deref().unwrap_or("java.lang.Object"), share, e.labels)?,
                    _ => {
                        let wait = share.min(i64::MAX as u64) as i64;
                        w.lock_wait(
                            e.park,
                            ticks.saturating_add(wait),
                            wait,
                            e.tid,
                            e.stack,
                            e.leaf_class.as_deref().unwrap_or("java.lang.Object"),
                            e.labels,
                            None,
                        )?
                    }
                }
                *count += 1;
            }
        }
    }
    // The safepoints timed beside the samples (`ttsp`), once each, as the
    // JDK's own safepoint events, at their real times.
    let mut seen = std::collections::HashSet::new();
    for sp in parts.iter().flat_map(|(_, p)| &p.safepoints).filter(|sp| seen.insert(sp.id)) {
        if written.safepoints == 0 {
            w.thread(VM_THREAD, "VM Thread", None);
        }
        let begin = sp.start_ns.saturating_sub(start_ns).min(i64::MAX as u64) as i64;
        let at = |ns: u64| begin.saturating_add(ns.min(i64::MAX as u64) as i64);
        let e = SafepointEvent {
            id: sp.id,
            begin_ticks: begin,
            sync_ticks: at(sp.ttsp_ns),
            end_ticks: sp.total_ns.map(at),
            operation: sp.operation.as_deref(),
            threads: sp.threads,
            vm_tid: VM_THREAD,
        };
        w.safepoint(&e)?;
        written.safepoints += 1;
    }
    w.end_chunk(duration, true)?;
    w.into_inner().flush()?;
    Ok(written)
}

/// The thread the safepoint events name (HotSpot's VM thread runs them);
/// not a real thread id, as for threads known only by name.
const VM_THREAD: u64 = 1 << 32 | 0xFFFF_FFFF;

/// What one stack of a profile becomes in the recording.
struct Event {
    tid: u64,
    state: ThreadState,
    labels: u64,
    stack: u64,
    /// The allocated class or the lock's class (the stack's leaf).
    leaf_class: Option<String>,
    /// A lock wait under `LockSupport.park` (a `jdk.ThreadPark`).
    park: bool,
}

#[derive(Default)]
struct Cx {
    stacks: u64,
    label_sets: HashMap<String, u64>,
    threads: HashMap<String, u64>,
}

impl Cx {
    fn event<W: Write>(&mut self, w: &mut JfrWriter<W>, p: &Profile, s: &Sample) -> Event {
        let mut e = Event { tid: ALL_THREADS, state: ThreadState::Unknown, labels: 0, stack: 0, leaf_class: None, park: false };
        let mut labels = Vec::new();
        let mut frames = Vec::new();
        // A stack cut short has the agent's marker at its root, under the
        // thread's and the labels' roots: JFR says so with `truncated`.
        let mut truncated = false;
        for &id in &s.stack {
            let f = p.frame(id);
            match f.kind {
                FrameKind::Label => {
                    if let Some((k, v)) = crate::labels::parse_frame(&f.name) {
                        labels.push((k.to_string(), v.to_string()));
                    }
                }
                FrameKind::State => e.state = ThreadState::from_frame_name(&f.name).unwrap_or(ThreadState::Unknown),
                FrameKind::Thread => e.tid = self.thread(w, &f.name),
                FrameKind::Alloc | FrameKind::Lock => e.leaf_class = Some(f.name.clone()),
                _ => {
                    e.park |= f.name.ends_with("LockSupport.park") || f.name.ends_with("LockSupport.parkNanos") || f.name.ends_with("Unsafe.park");
                    truncated |= frames.is_empty() && f.kind == FrameKind::Error && f.name == crate::jfr_read::TRUNCATED_MARKER;
                    frames.push(jfr_frame(&f.name, f.kind, f.line));
                }
            }
        }
        if !labels.is_empty() {
            let text = crate::labels::encode_set(&labels);
            let next = self.label_sets.len() as u64 + 1;
            e.labels = *self.label_sets.entry(text).or_insert(next);
            w.labels(e.labels, &labels);
        }
        frames.reverse(); // JFR stores the leaf first
        e.stack = self.stacks;
        self.stacks += 1;
        w.stack(e.stack, &frames, truncated);
        e
    }

    /// The id of the thread a root frame (`[name tid=N]` or `[name]`) names.
    fn thread<W: Write>(&mut self, w: &mut JfrWriter<W>, frame: &str) -> u64 {
        if let Some(&t) = self.threads.get(frame) {
            return t;
        }
        let (name, tid) = crate::model::thread_of_root(frame);
        // Thread ids of the file: the agent's when it wrote them, else new
        // ones above any real tid.
        let t = tid.unwrap_or(1 << 32 | self.threads.len() as u64);
        self.threads.insert(frame.to_string(), t);
        w.thread(t, name, Some(name));
        t
    }
}

/// A profile frame as a JFR frame: Java methods split into class and
/// method at the last dot, everything else a native frame of its name.
fn jfr_frame(name: &str, kind: FrameKind, line: u32) -> JfrFrame {
    let line = if line == 0 { -1 } else { line.min(i32::MAX as u32) as i32 };
    let java = match kind {
        FrameKind::Interpreted => Some(FrameType::Interpreted),
        FrameKind::Jit => Some(FrameType::Jit),
        FrameKind::Inlined => Some(FrameType::Inlined),
        FrameKind::Java => Some(FrameType::Unknown),
        _ => None,
    };
    if let (Some(ty), Some((class, method))) = (java, name.rsplit_once('.')) {
        return JfrFrame { class: class.to_string(), method: method.to_string(), descriptor: String::new(), line, bci: -1, kind: ty };
    }
    let ty = match kind {
        FrameKind::Cpp => FrameType::Cpp,
        FrameKind::Kernel => FrameType::Kernel,
        _ => FrameType::Native,
    };
    JfrFrame { class: String::new(), method: name.to_string(), descriptor: String::new(), line: -1, bci: -1, kind: ty }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{Frame, Meta};

    /// (frames root first, samples, total).
    type Stack<'a> = (&'a [(&'a str, FrameKind)], u64, u64);

    fn profile(stacks: &[Stack<'_>], interval: u64) -> Profile {
        let mut p = Profile::new(Meta { interval, ..Meta::default() });
        for (frames, samples, total) in stacks {
            let ids = frames.iter().map(|(n, k)| p.intern(Frame::new(*n, *k))).collect();
            p.add(ids, *samples, *total);
        }
        p
    }

    /// Written, then read back by oxprof's reader: the same stacks, counts,
    /// weights, threads, states, labels and classes.
    #[test]
    fn dumped_profiles_read_back_as_the_same_profiles() {
        use FrameKind::*;
        let cpu = profile(
            &[
                (&[("[endpoint=GET /x]", Label), ("[running]", State), ("[main tid=7]", Thread), ("A.run", Interpreted), ("A.hot", Jit)], 30, 300_000_000),
                (&[("[main tid=7]", Thread), ("A.run", Interpreted), ("write", Native), ("vfs_write", Kernel)], 5, 50_000_000),
            ],
            10_000_000,
        );
        let alloc = profile(&[(&[("[worker tid=9]", Thread), ("B.make", Jit), ("byte[]", Alloc)], 4, 4_000_003)], 524_288);
        let lock = profile(&[(&[("C.wait", Jit), ("java.util.concurrent.locks.LockSupport.park", Native), ("java.lang.Object", Lock)], 2, 9_000)], 0);
        let mut bytes = Vec::new();
        let n = write(&mut bytes, &[("cpu", &cpu), ("alloc", &alloc), ("lock", &lock), ("live", &cpu)], 1_700_000_000_000_000_000, 1_700_000_010_000_000_000)
            .unwrap();
        assert_eq!(n, Written { cpu: 35, wall: 0, alloc: 4, lock: 2, safepoints: 0 });
        let rec = crate::jfr_read::read_from(&mut &bytes[..], bytes.len() as u64, &mut |_, _| {}).unwrap();
        assert_eq!(rec.cpu_period_ns, Some(10_000_000));
        let opts = crate::convert::Options { cpu: true, alloc: true, lock: true, threads: true, ..Default::default() };
        let got = crate::convert::profiles(&rec, &opts);
        let find = |key: &str| got.iter().find(|(k, _)| *k == key).map(|(_, p)| p).unwrap_or_else(|| panic!("no {key} profile"));
        let names = |p: &Profile, s: &Sample| s.stack.iter().map(|&f| p.frame(f).name.clone()).collect::<Vec<_>>().join(";");
        let c = find("cpu");
        let mut lines: Vec<String> = c.samples().iter().map(|s| format!("{} {}", names(c, s), s.samples)).collect();
        lines.sort();
        assert_eq!(lines.len(), 2, "{lines:?}");
        assert!(lines.iter().any(|l| l.contains("[endpoint=GET /x]") && l.contains("[main") && l.ends_with("A.run;A.hot 30")), "{lines:?}");
        assert!(lines.iter().any(|l| l.ends_with("A.run;write;vfs_write 5")), "{lines:?}");
        let a = find("alloc");
        assert_eq!(a.samples().iter().map(|s| s.total).sum::<u64>(), 4_000_003);
        assert!(a.samples().iter().all(|s| names(a, s).ends_with("B.make;byte[]")));
        let l = find("lock");
        assert_eq!(l.samples().iter().map(|s| s.total).sum::<u64>(), 9_000);
        assert!(l.samples().iter().all(|s| names(l, s).ends_with("java.lang.Object")), "{:?}", l.samples().iter().map(|s| names(l, s)).collect::<Vec<_>>());
    }

    /// The safepoints a `ttsp` recording timed come back from the dump with
    /// their times, operations and thread counts, once each however many
    /// profiles carry them.
    #[test]
    fn dumped_safepoints_read_back_with_their_times() {
        use crate::safepoint::Safepoint;
        let start = 1_700_000_000_000_000_000u64;
        let mut cpu = profile(&[(&[("A.run", FrameKind::Jit)], 1, 10_000_000)], 10_000_000);
        cpu.safepoints = vec![
            Safepoint {
                id: 41,
                start_ns: start + 2_000_000_000,
                ttsp_ns: 150_000,
                total_ns: Some(3_000_000),
                operation: Some("G1CollectForAllocation".into()),
                threads: Some(12),
                samples: 0,
            },
            Safepoint { id: 42, start_ns: start + 5_000_000_000, ttsp_ns: 2_500_000, total_ns: None, operation: None, threads: None, samples: 0 },
        ];
        let wall = cpu.clone();
        let mut bytes = Vec::new();
        let n = write(&mut bytes, &[("cpu", &cpu), ("wall", &wall)], start, start + 10_000_000_000).unwrap();
        assert_eq!(n.safepoints, 2);
        let rec = crate::jfr_read::read_from(&mut &bytes[..], bytes.len() as u64, &mut |_, _| {}).unwrap();
        let mut got = crate::convert::safepoints(&rec, &crate::convert::Options::default());
        got.sort_by_key(|s| s.id);
        assert_eq!(got.len(), 2, "{got:?}");
        assert_eq!((got[0].id, got[0].start_ns, got[0].ttsp_ns, got[0].total_ns), (41, start + 2_000_000_000, 150_000, Some(3_000_000)), "{got:?}");
        assert_eq!((got[0].operation.as_deref(), got[0].threads), (Some("G1CollectForAllocation"), Some(12)), "{got:?}");
        assert_eq!((got[1].id, got[1].start_ns, got[1].ttsp_ns), (42, start + 5_000_000_000, 2_500_000), "{got:?}");
    }
}

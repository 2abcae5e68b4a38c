//! Turning a JFR [`Recording`] into profiles of the model, one per kind
//! (CPU, wall clock, allocation, lock waits without the parks that wait for
//! no lock, live objects), with the converter's
//! filters: thread roots, thread states (a filter and root frames), a time
//! range and frame-name predicates. Samples with context labels get their
//! label frames at the root (see [`crate::labels`]). Every profile carries the recording's
//! safepoints within the time range.

use crate::jfr_read::Recording;
use crate::model::{Frame, FrameKind, Meta, Profile};
use crate::safepoint::Safepoint;
use crate::state::ThreadState;

/// The JDK's default `jdk.ExecutionSample` period, assumed when the
/// recording does not say.
pub const DEFAULT_CPU_PERIOD_NS: u64 = crate::jfr_read::DEFAULT_CPU_PERIOD_NS;

/// The lock profile's `extra` key saying how many parks without a blocker
/// (`Recording::parks`) it leaves out.
pub const PARKS_LEFT_OUT: &str = "parks without a blocker, left out";

/// Which events become profiles, and how.
#[derive(Default)]
pub struct Options<'a> {
    pub cpu: bool,
    /// Wall-clock samples (key `wall`, totals in ns of wall time).
    pub wall: bool,
    /// Count the JDK's own `jdk.NativeMethodSample`s (threads in native
    /// code) as wall samples; callers set it only when wall samples are
    /// asked for by name, since they cover only threads in native code.
    pub jdk_native: bool,
    pub alloc: bool,
    pub live: bool,
    /// Lock waits (`jdk.JavaMonitorEnter`, `jdk.ThreadPark` on a blocker;
    /// key `lock`, totals in ns waited, the lock's class as the leaf).
    pub lock: bool,
    /// One root frame per thread (`[name]`).
    pub threads: bool,
    /// Keep only CPU and wall samples in these states (when given).
    pub state: Option<Vec<ThreadState>>,
    /// One root frame per thread state (`[sleeping]`) in CPU and wall
    /// profiles, above the thread's root.
    pub show_state: bool,
    /// Keep events with from <= time < to (ns since the epoch).
    pub from_ns: Option<i64>,
    pub to_ns: Option<i64>,
    /// Keep a stack only if some frame matches (when given).
    pub include: Option<&'a dyn Fn(&str) -> bool>,
    /// Drop a stack if some frame matches (when given).
    pub exclude: Option<&'a dyn Fn(&str) -> bool>,
}

/// The profiles of a recording: for each kind asked for that has events,
/// `(key, profile)` with key `cpu`, `wall`, `alloc`, `lock` or `live`.
pub fn profiles(rec: &Recording, opts: &Options) -> Vec<(&'static str, Profile)> {
    let in_range = |t: i64| !matches!(opts.from_ns, Some(f) if t < f) && !matches!(opts.to_ns, Some(to) if t >= to);
    let state_ok = |s: ThreadState| opts.state.as_ref().is_none_or(|keep| keep.contains(&s));
    let shown = |s: ThreadState| if opts.show_state { s as u8 } else { NO_STATE };
    let start = if rec.start_ns == i64::MAX { 0 } else { rec.start_ns };
    let from = opts.from_ns.unwrap_or(start).max(start);
    let to = opts.to_ns.unwrap_or(rec.end_ns).min(rec.end_ns);
    let meta = |title: &str, event: &str, engine: &str, interval: u64, unit: &str| Meta {
        title: title.into(),
        event: event.into(),
        engine: engine.into(),
        interval,
        total_unit: unit.into(),
        start_ns: from.max(0) as u64,
        duration_ns: (to - from).max(0) as u64,
        extra: vec![("source".into(), format!("JFR, {} chunk(s)", rec.chunks))],
    };
    let mut out = Vec::new();
    let mut b = Builder::new(rec, opts);
    if opts.cpu && !rec.cpu.is_empty() {
        let period = rec.cpu_period_ns.unwrap_or(DEFAULT_CPU_PERIOD_NS);
        let mut p = Profile::new(meta("CPU profile", "cpu", "JFR jdk.ExecutionSample", period, "ns"));
        if rec.cpu_period_ns.is_none() {
            p.meta.extra.push(("period".into(), "not recorded; assumed the JDK default of 20 ms".into()));
        }
        let mut agg = Aggregate::default();
        let mut periods: Vec<u64> = Vec::new();
        for s in rec.cpu.iter().filter(|s| in_range(s.time) && state_ok(s.state)) {
            agg.add((s.thread, s.stack, u32::MAX, shown(s.state), s.labels), 1, s.weight_ns);
            if !periods.contains(&s.weight_ns) {
                periods.push(s.weight_ns);
            }
        }
        if periods.len() > 1 {
            periods.sort_unstable();
            let list: Vec<String> = periods.iter().map(|&ns| period_text(ns)).collect();
            p.meta.extra.push((
                "periods".into(),
                format!("{} (changed during the recording; each sample weighs the period in force when it was taken)", list.join(", ")),
            ));
        }
        b.flush(&mut p, agg);
        out.push(("cpu", p));
    }
    let jdk_native = if opts.jdk_native { &rec.native[..] } else { &[] };
    if opts.wall && !(rec.wall.is_empty() && jdk_native.is_empty()) {
        let period = rec.wall_period_ns.or(rec.native_period_ns.filter(|_| !jdk_native.is_empty())).unwrap_or(DEFAULT_CPU_PERIOD_NS);
        let engine = if rec.wall.is_empty() { "JFR jdk.NativeMethodSample (threads in native code only)" } else { "JFR wall-clock samples" };
        let mut p = Profile::new(meta("Wall-clock profile", "wall", engine, period, "ns"));
        if !jdk_native.is_empty() {
            p.meta.extra.push(("native samples".into(), format!("{} jdk.NativeMethodSample events counted as wall time in native code", jdk_native.len())));
        }
        let mut agg = Aggregate::default();
        for s in rec.wall.iter().chain(jdk_native).filter(|s| in_range(s.time) && state_ok(s.state)) {
            agg.add((s.thread, s.stack, u32::MAX, shown(s.state), s.labels), wall_ticks(s.weight_ns, period), s.weight_ns);
        }
        b.flush(&mut p, agg);
        out.push(("wall", p));
    }
    if opts.alloc && !rec.alloc.is_empty() {
        let mut p = Profile::new(meta("Allocation profile", "alloc", "JFR allocation samples", 0, "bytes"));
        p.meta.extra.extend(rec.alloc_facts.iter().cloned());
        let mut agg = Aggregate::default();
        for s in rec.alloc.iter().filter(|s| in_range(s.time)) {
            agg.add((s.thread, s.stack, s.class, NO_STATE, s.labels), 1, s.bytes);
        }
        b.flush(&mut p, agg);
        out.push(("alloc", p));
    }
    if opts.lock && !rec.lock.is_empty() {
        let mut p = Profile::new(meta("Lock profile", "lock", "JFR jdk.JavaMonitorEnter + jdk.ThreadPark", 0, "ns"));
        let unblocked = rec.parks.iter().filter(|s| in_range(s.time)).count();
        if unblocked > 0 {
            p.meta.extra.push((PARKS_LEFT_OUT.into(), format!("{unblocked} jdk.ThreadPark events without a parkedClass (no lock contention)")));
        }
        let mut agg = Aggregate::default();
        for s in rec.lock.iter().filter(|s| in_range(s.time)) {
            agg.add((s.thread, s.stack, s.class, NO_STATE, s.labels), 1, s.duration_ns);
        }
        b.class_kind = FrameKind::Lock;
        b.flush(&mut p, agg);
        b.class_kind = FrameKind::Alloc;
        out.push(("lock", p));
    }
    if opts.live && !rec.live.is_empty() {
        let mut p = Profile::new(meta("Live objects", "live", "JFR jdk.OldObjectSample", 0, "bytes"));
        // oxprof writes one jdk.OldObjectSample per site of each leak report,
        // beside its oxprof.LiveSite: the last report before `to` is the
        // heap then, and each site weighs the tracked objects behind it
        // (its `samples`), as the agent's own live profile has it. The
        // JDK's own events are one sampled object each.
        let last_report = rec.live_sites.iter().map(|s| s.time).filter(|&t| opts.to_ns.is_none_or(|to| t < to)).max();
        let tracked: std::collections::HashMap<(i64, u32, u32), u64> =
            rec.live_sites.iter().filter(|s| Some(s.time) == last_report).map(|s| ((s.time, s.stack, s.class), s.samples)).collect();
        let mut agg = Aggregate::default();
        for s in rec.live.iter().filter(|s| in_range(s.allocated)) {
            let samples = match last_report {
                Some(last) if s.time != last => continue,
                Some(_) => tracked.get(&(s.time, s.stack, s.class)).copied().unwrap_or(1),
                None => 1,
            };
            agg.add((s.thread, s.stack, s.class, NO_STATE, 0), samples, s.bytes);
        }
        b.flush(&mut p, agg);
        out.push(("live", p));
    }
    let safepoints = safepoints(rec, opts);
    for (_, p) in &mut out {
        p.safepoints = safepoints.clone();
    }
    out
}

/// The recording's safepoints requested within the time range of `opts`
/// (all of them without one), in time order.
pub fn safepoints(rec: &Recording, opts: &Options) -> Vec<Safepoint> {
    let in_range = |t: u64| !matches!(opts.from_ns, Some(f) if (t as i64) < f) && !matches!(opts.to_ns, Some(to) if t as i64 >= to);
    rec.safepoints.iter().filter(|s| in_range(s.start_ns)).cloned().collect()
}

/// A sampling period as the JDK writes it: `10 ms`, `1 s`, `250 us`.
fn period_text(ns: u64) -> String {
    match ns {
        0 => "0 ns".into(),
        n if n % 1_000_000_000 == 0 => format!("{} s", n / 1_000_000_000),
        n if n % 1_000_000 == 0 => format!("{} ms", n / 1_000_000),
        n if n % 1_000 == 0 => format!("{} us", n / 1_000),
        n => format!("{n} ns"),
    }
}

/// A wall sample's weight as ticks of the wall clock (as the agent counts
/// them): the nearest whole number of intervals, at least one.
fn wall_ticks(weight_ns: u64, interval: u64) -> u64 {
    (weight_ns.saturating_add(interval / 2) / interval.max(1)).max(u64::from(weight_ns > 0))
}

/// The state part of an [`Aggregate`] key when no state frame is shown.
const NO_STATE: u8 = u8::MAX;

/// (thread, stack, class, state, label set) of an [`Aggregate`]: class
/// `u32::MAX` means none, state [`NO_STATE`] no state frame, label set 0 no
/// labels.
type Key = (u32, u32, u32, u8, u32);

/// Counts per key before any frame is interned.
#[derive(Default)]
struct Aggregate {
    counts: std::collections::HashMap<Key, (u64, u64)>,
}

impl Aggregate {
    fn add(&mut self, key: Key, samples: u64, total: u64) {
        let e = self.counts.entry(key).or_default();
        e.0 = e.0.saturating_add(samples);
        e.1 = e.1.saturating_add(total);
    }
}

/// Adds recording stacks to profiles, remembering per stack whether the
/// frame filters keep it.
struct Builder<'r, 'o> {
    rec: &'r Recording,
    opts: &'o Options<'o>,
    /// Per recording stack: unknown (0), kept (1), dropped (2).
    verdict: Vec<u8>,
    frames: Vec<Frame>,
    /// Recording frame id → profile frame id, per profile being built.
    ids: Vec<u32>,
    /// The kind of the leaf frame naming a class (allocated, or waited on).
    class_kind: FrameKind,
}

impl<'r, 'o> Builder<'r, 'o> {
    fn new(rec: &'r Recording, opts: &'o Options<'o>) -> Builder<'r, 'o> {
        let frames = rec.frames.iter().map(|f| Frame::new(f.name.clone(), f.kind).with_line(f.line)).collect();
        Builder { rec, opts, verdict: vec![0; rec.stacks.len()], frames, ids: Vec::new(), class_kind: FrameKind::Alloc }
    }

    fn keep(&mut self, stack: u32) -> bool {
        let Some(v) = self.verdict.get(stack as usize).copied() else { return false };
        if v != 0 {
            return v == 1;
        }
        let frames = &self.rec.stacks[stack as usize];
        let name = |f: &u32| self.rec.frames[*f as usize].name.as_str();
        let included = self.opts.include.is_none() || self.opts.include.is_some_and(|inc| frames.iter().any(|f| inc(name(f))));
        let excluded = self.opts.exclude.is_some_and(|exc| frames.iter().any(|f| exc(name(f))));
        let keep = included && !excluded;
        self.verdict[stack as usize] = if keep { 1 } else { 2 };
        keep
    }

    /// Adds aggregated counts to a profile, in a stable order.
    fn flush(&mut self, p: &mut Profile, agg: Aggregate) {
        self.ids = vec![u32::MAX; self.frames.len()];
        let mut entries: Vec<_> = agg.counts.into_iter().collect();
        entries.sort_unstable_by_key(|e| e.0);
        for ((thread, stack, class, state, labels), (samples, total)) in entries {
            let state = (state != NO_STATE).then(|| ThreadState::from_u8(state));
            self.add(p, (thread, stack, (class != u32::MAX).then_some(class), state, labels), samples, total);
        }
    }

    fn add(&mut self, p: &mut Profile, (thread, stack, class, state, labels): (u32, u32, Option<u32>, Option<ThreadState>, u32), samples: u64, total: u64) {
        if !self.keep(stack) {
            return;
        }
        let mut ids = Vec::with_capacity(self.rec.stacks[stack as usize].len() + 3);
        for f in crate::labels::frames(self.rec.label_sets.get(labels as usize).map_or(&[][..], Vec::as_slice)) {
            ids.push(p.intern(f));
        }
        if let Some(s) = state {
            ids.push(p.intern(s.frame()));
        }
        if self.opts.threads {
            let name = self.rec.threads.get(thread as usize).map_or("thread", String::as_str);
            ids.push(p.intern(Frame::new(format!("[{name}]"), FrameKind::Thread)));
        }
        for &f in &self.rec.stacks[stack as usize] {
            let slot = &mut self.ids[f as usize];
            if *slot == u32::MAX {
                *slot = p.intern(self.frames[f as usize].clone());
            }
            ids.push(*slot);
        }
        if let Some(c) = class {
            let name = self.rec.classes.get(c as usize).map_or("[unknown class]", String::as_str);
            ids.push(p.intern(Frame::new(name, self.class_kind)));
        }
        p.add(ids, samples, total);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::jfr::writer::event_type;
    use crate::jfr::{FrameType, JfrFrame, JfrWriter};
    use crate::model::Counter;

    /// Review finding (jfr_read): weights from a file were summed unchecked:
    /// three allocations of i64::MAX bytes on one stack, or wall samples
    /// weighing a period of u64::MAX ns, overflowed (a panic with overflow
    /// checks, wrapped totals otherwise). They saturate.
    #[test]
    fn totals_saturate() {
        let mut w = JfrWriter::new(Vec::new());
        w.begin_chunk(0, 1_700_000_000_000_000_000).unwrap();
        w.thread(1, "main", Some("main"));
        w.stack(1, &[JfrFrame { class: "Main".into(), method: "main".into(), descriptor: "()V".into(), line: 1, bci: 0, kind: FrameType::Jit }], false);
        w.setting(0, 1, event_type::EXECUTION_SAMPLE, "period", "18446744073709551615 ns").unwrap();
        w.setting(0, 1, event_type::EXECUTION_SAMPLE, "event", "wall").unwrap();
        for t in 1..=3 {
            w.allocation_sample(t, 1, 1, "byte[]", i64::MAX as u64, 0).unwrap();
            w.execution_sample(t, 1, 1, crate::jfr::ThreadState::Running, 0).unwrap();
        }
        w.end_chunk(10, true).unwrap();
        let bytes = w.into_inner();
        let rec = crate::jfr_read::read_from(&mut &bytes[..], bytes.len() as u64, &mut |_, _| {}).unwrap();
        let ps = profiles(&rec, &Options { alloc: true, wall: true, ..Options::default() });
        let get = |key: &str| &ps.iter().find(|(k, _)| *k == key).unwrap().1;
        assert_eq!((get("alloc").sum(Counter::Samples), get("alloc").sum(Counter::Total)), (3, u64::MAX));
        assert_eq!((get("wall").sum(Counter::Samples), get("wall").sum(Counter::Total)), (3, u64::MAX));
    }
}

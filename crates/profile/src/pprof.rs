//! pprof output (gzipped `profile.proto`), readable by `go tool pprof`,
//! Pyroscope and Grafana, and reading such files back into a [`Profile`].
//!
//! One pprof file holds one profile (or, as Go's heap profiles do,
//! allocations and live objects together: [`encode_parts`]). Its two sample types are named as Go's
//! tools expect for the profile's event: CPU `samples/count` +
//! `cpu/nanoseconds`, wall clock `samples/count` + `wall/nanoseconds`,
//! allocation `alloc_objects/count` + `alloc_space/bytes`, live objects
//! `inuse_objects/count` + `inuse_space/bytes`. The first value of a sample
//! is the model's sample count, the second its total. A profile of counts
//! only (collapsed stacks, [`Meta::counts_only`]) has one sample type,
//! `samples/count`, and is read back with its counts as both counters. Each distinct frame
//! (name, kind, line) is one location with one line; each distinct name one
//! function. JFR gives no source file names, so functions carry none. A
//! thread-state frame (`[sleeping]`) is no location but the sample's label
//! `state` (`sleeping`), so pprof's tools can filter and group by it
//! (`-tagfocus=state=sleeping`); reading turns the label back into the
//! frame. Context labels (`[endpoint=GET /orders]` frames, see
//! [`crate::labels`]) are sample labels likewise (`-tagfocus=endpoint=...`,
//! `-tags`), read back as label frames (a `state` label whose value is no
//! thread state too). A heap profile reads back as two profiles
//! ([`read_all`]: allocations and live objects), and in oxprof's own
//! allocation, live and lock profiles the leaf frame is the class again.

use std::collections::HashMap;
use std::io::{self, Read, Write};

use flate2::read::GzDecoder;
use flate2::write::GzEncoder;
use flate2::Compression;
use prost::Message;

use crate::model::{Frame, FrameKind, Meta, Profile};
use crate::pprof_proto as pb;
use crate::state::ThreadState;

/// The label a thread-state frame becomes.
pub const STATE_LABEL: &str = "state";

/// What a profile measures, as pprof names it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Cpu,
    Wall,
    Alloc,
    Live,
    Lock,
}

impl Kind {
    /// The kind a profile's event names (`alloc`, `live`, anything else is CPU-like).
    pub fn of(meta: &Meta) -> Kind {
        match meta.event.as_str() {
            "alloc" => Kind::Alloc,
            "wall" => Kind::Wall,
            "lock" => Kind::Lock,
            "live" | "inuse" | "leak" => Kind::Live,
            _ => Kind::Cpu,
        }
    }

    /// (type, unit) of the two sample types.
    pub fn sample_types(self) -> [(&'static str, &'static str); 2] {
        match self {
            Kind::Cpu => [("samples", "count"), ("cpu", "nanoseconds")],
            Kind::Wall => [("samples", "count"), ("wall", "nanoseconds")],
            Kind::Alloc => [("alloc_objects", "count"), ("alloc_space", "bytes")],
            Kind::Live => [("inuse_objects", "count"), ("inuse_space", "bytes")],
            // Go's mutex profile names.
            Kind::Lock => [("contentions", "count"), ("delay", "nanoseconds")],
        }
    }

    fn period_type(self) -> (&'static str, &'static str) {
        match self {
            Kind::Cpu => ("cpu", "nanoseconds"),
            Kind::Wall => ("wall", "nanoseconds"),
            Kind::Alloc | Kind::Live => ("space", "bytes"),
            Kind::Lock => ("contentions", "count"),
        }
    }
}

/// A string table: index 0 is "".
struct Strings {
    table: Vec<String>,
    index: HashMap<String, i64>,
}

impl Strings {
    fn new() -> Strings {
        Strings { table: vec![String::new()], index: HashMap::from([(String::new(), 0)]) }
    }

    fn id(&mut self, s: &str) -> i64 {
        if let Some(&i) = self.index.get(s) {
            return i;
        }
        let i = self.table.len() as i64;
        self.table.push(s.to_string());
        self.index.insert(s.to_string(), i);
        i
    }
}

/// Builds the protobuf message of a profile.
pub fn encode(profile: &Profile) -> pb::Profile {
    encode_parts(&[profile])
}

/// Builds one message from several profiles of the same run, each adding
/// its two sample types (Go's heap profile: allocations and live objects,
/// `alloc_objects alloc_space inuse_objects inuse_space`). Stacks equal in
/// every part (by frame name, kind and line, and thread state) are one
/// sample with all the values; a stack absent from a part has 0 there. The
/// default sample type is the last part's second (`inuse_space`), as Go
/// writes heap profiles; the period is the first part's.
pub fn encode_parts(parts: &[&Profile]) -> pb::Profile {
    let Some(first) = parts.first() else { return pb::Profile::default() };
    let mut strings = Strings::new();
    let mut sample_type = Vec::new();
    // Each part's first value's index: counts-only parts have one value.
    let mut offsets = Vec::with_capacity(parts.len());
    for p in parts {
        offsets.push(sample_type.len());
        let types = Kind::of(&p.meta).sample_types();
        let types = if p.meta.counts_only() { &types[..1] } else { &types[..] };
        for (t, u) in types {
            sample_type.push(pb::ValueType { r#type: strings.id(t), unit: strings.id(u) });
        }
    }
    // Counts only: each sample stands for one count, not a CPU period.
    let ((pt, pu), period) =
        if first.meta.counts_only() { (crate::model::COUNTS_TYPE, 1) } else { (Kind::of(&first.meta).period_type(), first.meta.interval as i64) };
    let period_type = Some(pb::ValueType { r#type: strings.id(pt), unit: strings.id(pu) });

    let mut functions: Vec<pb::Function> = Vec::new();
    let mut function_ids: HashMap<String, u64> = HashMap::new();
    let mut locations: Vec<pb::Location> = Vec::new();
    let mut location_ids: HashMap<(String, FrameKind, u32), u64> = HashMap::new();
    let state_key = strings.id(STATE_LABEL);
    // (locations leaf first, labels as (key, value) string ids) → values of every part.
    type Labels = Vec<(i64, i64)>;
    type SampleKey = (Vec<u64>, Labels);
    let mut samples: Vec<(Vec<u64>, Labels, Vec<i64>)> = Vec::new();
    let mut sample_ids: HashMap<SampleKey, usize> = HashMap::new();
    let width = sample_type.len();
    for (k, p) in parts.iter().enumerate() {
        // This part's frame ids → location ids (0 for a state or label frame).
        let ids: Vec<u64> = p
            .frames()
            .iter()
            .map(|frame| {
                if matches!(frame.kind, FrameKind::State | FrameKind::Label) {
                    return 0;
                }
                let key = (frame.name.clone(), frame.kind, frame.line);
                if let Some(&id) = location_ids.get(&key) {
                    return id;
                }
                let function_id = *function_ids.entry(frame.name.clone()).or_insert_with(|| {
                    let name = strings.id(&frame.name);
                    functions.push(pb::Function { id: functions.len() as u64 + 1, name, system_name: name, filename: 0, start_line: 0 });
                    functions.len() as u64
                });
                let id = locations.len() as u64 + 1;
                locations.push(pb::Location { id, line: vec![pb::Line { function_id, line: frame.line as i64, column: 0 }], ..pb::Location::default() });
                location_ids.insert(key, id);
                id
            })
            .collect();
        for s in p.samples().iter().filter(|s| s.samples != 0 || s.total != 0) {
            let stack: Vec<u64> = s.stack.iter().rev().map(|&f| ids[f as usize]).filter(|&id| id != 0).collect();
            let labels: Vec<(i64, i64)> = s
                .stack
                .iter()
                .map(|&f| p.frame(f))
                .filter_map(|frame| match frame.kind {
                    FrameKind::State => {
                        let name = &frame.name;
                        Some((state_key, strings.id(name.strip_prefix('[').and_then(|n| n.strip_suffix(']')).unwrap_or(name))))
                    }
                    FrameKind::Label => crate::labels::parse_frame(&frame.name).map(|(k, v)| (strings.id(k), strings.id(v))),
                    _ => None,
                })
                .collect();
            let key = (stack, labels);
            let i = match sample_ids.get(&key) {
                Some(&i) => i,
                None => {
                    samples.push((key.0.clone(), key.1.clone(), vec![0; width]));
                    sample_ids.insert(key, samples.len() - 1);
                    samples.len() - 1
                }
            };
            // pprof values are signed: counts past i64::MAX saturate.
            let v = &mut samples[i].2;
            let at = offsets[k];
            v[at] = v[at].saturating_add(s.samples.min(i64::MAX as u64) as i64);
            if !p.meta.counts_only() {
                v[at + 1] = v[at + 1].saturating_add(s.total.min(i64::MAX as u64) as i64);
            }
        }
    }
    let sample = samples
        .into_iter()
        .map(|(location_id, labels, value)| pb::Sample {
            location_id,
            value,
            label: labels.into_iter().map(|(key, str)| pb::Label { key, str, ..pb::Label::default() }).collect(),
        })
        .collect();
    let mut comment = Vec::new();
    for text in [
        format!("oxprof: {}", first.meta.title),
        format!("event: {}", parts.iter().map(|p| p.meta.event.as_str()).collect::<Vec<_>>().join("+")),
        format!("engine: {}", first.meta.engine),
    ] {
        if !text.ends_with(": ") {
            comment.push(strings.id(&text));
        }
    }
    let default_sample_type = if parts.len() > 1 { sample_type.last().map(|t| t.r#type).unwrap_or(0) } else { 0 };
    pb::Profile {
        sample_type,
        sample,
        location: locations,
        function: functions,
        time_nanos: first.meta.start_ns as i64,
        duration_nanos: parts.iter().map(|p| p.meta.duration_ns).max().unwrap_or(0) as i64,
        period_type,
        period,
        comment,
        default_sample_type,
        string_table: strings.table,
        ..pb::Profile::default()
    }
}

/// Writes several profiles of one run as one gzipped pprof file (see [`encode_parts`]).
pub fn write_parts<W: Write>(parts: &[&Profile], out: W) -> io::Result<()> {
    let bytes = encode_parts(parts).encode_to_vec();
    let mut gz = GzEncoder::new(out, Compression::default());
    gz.write_all(&bytes)?;
    gz.finish()?.flush()
}

/// Writes the profile as gzipped pprof.
pub fn write<W: Write>(profile: &Profile, out: W) -> io::Result<()> {
    let bytes = encode(profile).encode_to_vec();
    let mut gz = GzEncoder::new(out, Compression::default());
    gz.write_all(&bytes)?;
    gz.finish()?.flush()
}

/// Whether bytes look like gzipped data (pprof files usually are).
pub fn is_gzip(bytes: &[u8]) -> bool {
    bytes.starts_with(&[0x1f, 0x8b])
}

/// The most a gzipped pprof file may decompress to (1 GiB): gzip expands
/// up to a thousand times, so a small file could otherwise fill memory.
const MAX_DECOMPRESSED: u64 = 1 << 30;

/// How many bytes of frames and names the profile read from `len` bytes may
/// expand to: 32 times its size and 64 MiB. A sample's stack lists
/// locations that each expand to their lines, and a frame or state label
/// copies its name: in a corrupt file, many references to a location with
/// thousands of lines, or to one long name, would make gigabytes of a
/// megabyte.
fn expansion_budget(len: usize) -> usize {
    len.saturating_mul(32).saturating_add(64 << 20)
}

/// What a protobuf profile read from `len` bytes (pprof, or an OTLP
/// request) may still expand to, see [`expansion_budget`]; `what` names
/// the input in the error.
pub(crate) struct Expansion {
    left: usize,
    len: usize,
    what: &'static str,
}

impl Expansion {
    pub(crate) fn new(len: usize, what: &'static str) -> Expansion {
        Expansion { left: expansion_budget(len), len, what }
    }

    /// Takes `bytes` of frames or names from the budget; an error when spent.
    pub(crate) fn charge(&mut self, bytes: usize) -> Result<(), String> {
        self.left = self
            .left
            .checked_sub(bytes)
            .ok_or_else(|| format!("the {} expands to more than {} MiB of frames and names (corrupt?)", self.what, expansion_budget(self.len) >> 20))?;
        Ok(())
    }
}

/// `bytes` decompressed when gzipped (see [`gunzip`], at most
/// [`MAX_DECOMPRESSED`]), else as they are.
pub fn decompressed(bytes: &[u8]) -> Result<std::borrow::Cow<'_, [u8]>, String> {
    if is_gzip(bytes) {
        gunzip(bytes, MAX_DECOMPRESSED).map(std::borrow::Cow::Owned)
    } else {
        Ok(std::borrow::Cow::Borrowed(bytes))
    }
}

/// Decompresses a gzip stream of at most `max` bytes.
fn gunzip(bytes: &[u8], max: u64) -> Result<Vec<u8>, String> {
    let mut raw = Vec::new();
    GzDecoder::new(bytes).take(max + 1).read_to_end(&mut raw).map_err(|e| format!("the gzip stream is truncated or corrupt ({e})"))?;
    if raw.len() as u64 > max {
        return Err(format!("the gzip stream decompresses to more than {} MiB", max >> 20));
    }
    Ok(raw)
}

/// Reads a pprof file (gzipped or not) into a profile: the first sample type
/// becomes the sample count, the second (if any) the total. Frame kinds are
/// not stored in pprof: frames come back as [`FrameKind::Java`].
pub fn read(bytes: &[u8]) -> Result<Profile, String> {
    read_all(bytes).map(|mut all| all.swap_remove(0))
}

/// The kind a pprof sample type pair (count, total) stands for.
fn event_of(count: Option<&str>, total: Option<&str>) -> &'static str {
    match (count, total) {
        (Some("alloc_objects" | "alloc_space"), _) => "alloc",
        (Some("inuse_objects" | "inuse_space"), _) => "live",
        (Some("wall"), _) | (_, Some("wall")) => "wall",
        (Some("contentions"), _) | (_, Some("delay")) => "lock",
        _ => "cpu",
    }
}

/// Reads a pprof file (gzipped or not) into one profile per kind it holds
/// (never none): a heap profile as Go writes it (`alloc_objects`,
/// `alloc_space`, `inuse_objects`, `inuse_space`; oxprof's `alloc` with
/// `live`) gives an allocation and a live profile; any other file one
/// profile, as [`read`] reads it.
pub fn read_all(bytes: &[u8]) -> Result<Vec<Profile>, String> {
    let data = decompressed(bytes)?;
    let mut budget = Expansion::new(data.len(), "profile");
    let mut charge = |bytes: usize| budget.charge(bytes);
    let p = pb::Profile::decode(&*data).map_err(|e| format!("not a pprof profile: {e}"))?;
    let s = |i: i64| p.string_table.get(i as usize).map(String::as_str).unwrap_or("");
    let types: Vec<&str> = p.sample_type.iter().map(|t| s(t.r#type)).collect();
    // Pairs of (count, total) sample types, when they name distinct kinds.
    let pairs: Vec<(usize, &'static str)> = (0..types.len()).step_by(2).map(|i| (i, event_of(types.get(i).copied(), types.get(i + 1).copied()))).collect();
    let distinct = pairs.iter().enumerate().all(|(i, (_, e))| pairs.iter().skip(i + 1).all(|(_, f)| f != e));
    let pairs =
        if types.len() >= 4 && types.len().is_multiple_of(2) && distinct { pairs } else { vec![(0, event_of(types.first().copied(), types.get(1).copied()))] };
    let split = pairs.len() > 1;
    // oxprof's allocation, live and lock profiles end every stack in the
    // allocated or locked class (Go's end in the allocating function).
    let by_oxprof = p.comment.iter().any(|&c| s(c).starts_with("oxprof: "));
    let mut out = Vec::with_capacity(pairs.len());
    let functions: HashMap<u64, &str> = p.function.iter().map(|f| (f.id, s(f.name))).collect();
    for (first, event) in pairs {
        let unit = p.sample_type.get(first + 1).map(|t| s(t.unit)).unwrap_or("");
        let meta = Meta {
            title: "pprof profile".into(),
            event: event.into(),
            interval: p.period.max(0) as u64,
            total_unit: match unit {
                "nanoseconds" => "ns".into(),
                u => u.into(),
            },
            start_ns: p.time_nanos.max(0) as u64,
            duration_ns: p.duration_nanos.max(0) as u64,
            ..Meta::default()
        };
        let mut profile = Profile::new(meta);
        // A location with inlined lines expands to several frames, callee first.
        let mut locations: HashMap<u64, Vec<u32>> = HashMap::new();
        for loc in &p.location {
            let mut frames = Vec::with_capacity(loc.line.len());
            for l in &loc.line {
                let name = functions.get(&l.function_id).copied().unwrap_or("[unknown]");
                charge(name.len())?;
                frames.push(profile.intern(Frame::new(name, FrameKind::Java).with_line(l.line.clamp(0, u32::MAX as i64) as u32)));
            }
            let frames = if frames.is_empty() { vec![profile.intern(Frame::new(format!("0x{:x}", loc.address), FrameKind::Native))] } else { frames };
            locations.insert(loc.id, frames);
        }
        for sample in &p.sample {
            let v = |i: usize| sample.value.get(i).copied().unwrap_or(0).max(0) as u64;
            // One sample type (counts only): the count is the total too.
            let (count, total) = if first + 1 < types.len() { (v(first), v(first + 1)) } else { (v(first), v(first)) };
            // Of a heap profile, each part holds the samples of its kind
            // (a live object's sample has no allocation values, and a dead
            // one's no live values).
            if split && count == 0 && total == 0 {
                continue;
            }
            let mut stack = Vec::new();
            // Context labels first (outermost), then the thread state, as the
            // agent builds stacks.
            let state = |l: &&pb::Label| s(l.key) == STATE_LABEL && ThreadState::from_word(s(l.str)).is_some();
            for l in sample.label.iter().filter(|l| !state(l) && l.num == 0 && crate::labels::valid_key(s(l.key))) {
                charge(s(l.key).len() + s(l.str).len())?;
                stack.push(profile.intern(crate::labels::frame(s(l.key), s(l.str))));
            }
            for l in sample.label.iter().filter(state) {
                charge(s(l.str).len())?;
                stack.push(
                    profile
                        .intern(ThreadState::from_word(s(l.str)).map_or_else(|| Frame::new(format!("[{}]", s(l.str)), FrameKind::State), ThreadState::frame)),
                );
            }
            for id in sample.location_id.iter().rev() {
                let frames = locations.get(id).ok_or_else(|| format!("sample refers to missing location {id}"))?;
                charge(std::mem::size_of_val(frames.as_slice()))?;
                stack.extend(frames.iter().rev());
            }
            let class_kind = match event {
                "alloc" | "live" => Some(FrameKind::Alloc),
                "lock" => Some(FrameKind::Lock),
                _ => None,
            };
            if let (true, Some(kind), Some(leaf)) = (by_oxprof, class_kind, stack.last_mut()) {
                let f = profile.frame(*leaf);
                if f.kind == FrameKind::Java {
                    let class = Frame::new(f.name.clone(), kind).with_line(f.line);
                    *leaf = profile.intern(class);
                }
            }
            profile.add(stack, count, total);
        }
        out.push(profile);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cpu() -> Profile {
        let mut p = Profile::new(Meta { event: "cpu".into(), total_unit: "ns".into(), interval: 10_000_000, start_ns: 5, duration_ns: 7, ..Meta::default() });
        p.add_frames([Frame::new("Main.main", FrameKind::Interpreted), Frame::new("Main.hot", FrameKind::Jit).with_line(12)], 7, 70_000_000);
        p.add_frames([Frame::new("Main.main", FrameKind::Interpreted)], 1, 10_000_000);
        p
    }

    #[test]
    fn encodes_sample_types_locations_leaf_first_and_strings() {
        let m = encode(&cpu());
        let s = |i: i64| m.string_table[i as usize].as_str();
        assert_eq!(m.string_table[0], "");
        let types: Vec<(&str, &str)> = m.sample_type.iter().map(|t| (s(t.r#type), s(t.unit))).collect();
        assert_eq!(types, [("samples", "count"), ("cpu", "nanoseconds")]);
        assert_eq!(m.period, 10_000_000);
        assert_eq!(m.time_nanos, 5);
        assert_eq!(m.duration_nanos, 7);
        assert_eq!(m.sample.len(), 2);
        assert_eq!(m.sample[0].value, [7, 70_000_000]);
        // Leaf first: Main.hot, then Main.main.
        let loc = |id: u64| m.location.iter().find(|l| l.id == id).unwrap();
        let func = |id: u64| m.function.iter().find(|f| f.id == id).unwrap();
        let leaf = loc(m.sample[0].location_id[0]);
        assert_eq!(s(func(leaf.line[0].function_id).name), "Main.hot");
        assert_eq!(leaf.line[0].line, 12);
        assert_eq!(s(func(loc(m.sample[0].location_id[1]).line[0].function_id).name), "Main.main");
        assert!(m.location.iter().all(|l| l.id != 0) && m.function.iter().all(|f| f.id != 0));

        let mut alloc = cpu();
        alloc.meta.event = "alloc".into();
        let m = encode(&alloc);
        let names: Vec<&str> = m.sample_type.iter().map(|t| m.string_table[t.r#type as usize].as_str()).collect();
        assert_eq!(names, ["alloc_objects", "alloc_space"]);
        alloc.meta.event = "live".into();
        let m = encode(&alloc);
        assert_eq!(m.string_table[m.sample_type[1].r#type as usize], "inuse_space");
    }

    /// Collapsed stacks (counts only) become `samples/count` alone, with
    /// a period of one count, and read back with the counts as totals.
    #[test]
    fn counts_only_profiles_have_one_sample_type() {
        let p = crate::collapsed::read("Main.main;Main.hot 7\nMain.main 1\n", Meta { event: "cpu".into(), ..Meta::default() }).unwrap();
        assert!(p.meta.counts_only());
        let m = encode(&p);
        let s = |i: i64| m.string_table[i as usize].as_str();
        let types: Vec<(&str, &str)> = m.sample_type.iter().map(|t| (s(t.r#type), s(t.unit))).collect();
        assert_eq!(types, [("samples", "count")]);
        let period_type = m.period_type.as_ref().map(|t| (s(t.r#type), s(t.unit)));
        assert_eq!((period_type, m.period), (Some(("samples", "count")), 1));
        assert_eq!(m.sample.iter().map(|x| x.value.clone()).collect::<Vec<_>>(), [vec![7], vec![1]]);
        let mut out = Vec::new();
        write(&p, &mut out).unwrap();
        let back = read(&out).unwrap();
        assert!(back.meta.counts_only());
        let mut got: Vec<(u64, u64)> = back.samples().iter().map(|x| (x.samples, x.total)).collect();
        got.sort();
        assert_eq!(got, [(1, 1), (7, 7)]);
    }

    #[test]
    fn wall_profiles_carry_state_labels() {
        let mut p = Profile::new(Meta { event: "wall".into(), total_unit: "ns".into(), interval: 20_000_000, ..Meta::default() });
        let main = Frame::new("Main.main", FrameKind::Interpreted);
        p.add_frames([ThreadState::Sleeping.frame(), main.clone(), Frame::new("Main.nap", FrameKind::Jit)], 3, 60_000_000);
        p.add_frames([ThreadState::Running.frame(), main.clone()], 1, 20_000_000);
        let m = encode(&p);
        let s = |i: i64| m.string_table[i as usize].as_str();
        let types: Vec<(&str, &str)> = m.sample_type.iter().map(|t| (s(t.r#type), s(t.unit))).collect();
        assert_eq!(types, [("samples", "count"), ("wall", "nanoseconds")]);
        assert_eq!(m.sample[0].location_id.len(), 2, "the state frame is no location");
        let labels: Vec<(&str, &str)> = m.sample.iter().flat_map(|x| x.label.iter().map(|l| (s(l.key), s(l.str)))).collect();
        assert_eq!(labels, [("state", "sleeping"), ("state", "running")]);
        assert!(m.function.iter().all(|f| !s(f.name).starts_with('[')));
        let mut out = Vec::new();
        write(&p, &mut out).unwrap();
        let back = read(&out).unwrap();
        assert_eq!(back.meta.event, "wall");
        let sleeping = back.samples().iter().find(|x| x.samples == 3).unwrap();
        assert_eq!(back.frame(sleeping.stack[0]), &ThreadState::Sleeping.frame());
        assert_eq!(back.frame(sleeping.stack[2]).name, "Main.nap");
    }

    #[test]
    fn context_labels_are_sample_labels_and_read_back() {
        use crate::labels;
        let mut p = Profile::new(Meta { event: "cpu".into(), total_unit: "ns".into(), interval: 10_000_000, ..Meta::default() });
        let main = Frame::new("Main.main", FrameKind::Jit);
        let odd = "GET /a;b=c \u{1F600}\n";
        p.add_frames([labels::frame("endpoint", odd), labels::frame("state", "checkout"), ThreadState::Running.frame(), main.clone()], 4, 40);
        p.add_frames([main.clone()], 1, 10);
        let m = encode(&p);
        let s = |i: i64| m.string_table[i as usize].as_str();
        let labels: Vec<(&str, &str)> = m.sample[0].label.iter().map(|l| (s(l.key), s(l.str))).collect();
        assert_eq!(labels, [("endpoint", odd), ("state", "checkout"), ("state", "running")]);
        assert_eq!(m.sample[0].location_id.len(), 1, "label frames are no locations");
        assert!(m.sample[1].label.is_empty());
        let mut out = Vec::new();
        write(&p, &mut out).unwrap();
        let back = read(&out).unwrap();
        let labelled = back.samples().iter().find(|x| x.samples == 4).unwrap();
        let names: Vec<&str> = labelled.stack.iter().map(|&f| back.frame(f).name.as_str()).collect();
        assert_eq!(names, [format!("[endpoint={odd}]").as_str(), "[state=checkout]", "[running]", "Main.main"]);
        assert_eq!(labels::value_of(&back, labelled, "endpoint"), Some(odd));
    }

    #[test]
    fn gzip_round_trip() {
        let mut out = Vec::new();
        write(&cpu(), &mut out).unwrap();
        assert!(is_gzip(&out));
        let back = read(&out).unwrap();
        assert_eq!(back.meta.event, "cpu");
        assert_eq!(back.meta.total_unit, "ns");
        assert_eq!(back.sum(crate::Counter::Samples), 8);
        assert_eq!(back.sum(crate::Counter::Total), 80_000_000);
        let hot = back.samples().iter().find(|s| s.stack.len() == 2).unwrap();
        assert_eq!(back.frame(hot.stack[1]).name, "Main.hot");
        assert_eq!(back.frame(hot.stack[1]).line, 12);
        assert!(read(b"\x1f\x8bgarbage").unwrap_err().contains("gzip"));
    }

    /// Review finding (pprof_read): a small gzip stream decompressed
    /// without bound (gzip expands up to a thousand times).
    #[test]
    fn decompression_is_bounded() {
        let mut gz = GzEncoder::new(Vec::new(), Compression::best());
        gz.write_all(&vec![0u8; 4 << 20]).unwrap();
        let bomb = gz.finish().unwrap();
        assert!(bomb.len() < 16 << 10);
        assert_eq!(gunzip(&bomb, 4 << 20).unwrap().len(), 4 << 20);
        assert_eq!(gunzip(&bomb, 2 << 20).unwrap_err(), "the gzip stream decompresses to more than 2 MiB");
    }

    /// Review finding (pprof_read): 5000 references to one location of 4000
    /// inlined lines made a stack of 20 million frames (80 MB) from 33 KB,
    /// and more references or samples as many times that.
    #[test]
    fn stacks_expand_within_a_budget() {
        let mut m = pb::Profile { string_table: vec!["".into(), "f".into()], ..pb::Profile::default() };
        m.function.push(pb::Function { id: 1, name: 1, ..pb::Function::default() });
        let line = |n: i64| pb::Line { function_id: 1, line: n, ..pb::Line::default() };
        m.location.push(pb::Location { id: 1, line: (1..=4000).map(line).collect(), ..pb::Location::default() });
        m.sample.push(pb::Sample { location_id: vec![1; 5000], value: vec![1], ..pb::Sample::default() });
        let bytes = m.encode_to_vec();
        assert!(bytes.len() < 40_000, "{}", bytes.len());
        assert_eq!(read(&bytes).unwrap_err(), "the profile expands to more than 65 MiB of frames and names (corrupt?)");
        // The same with 500 references is 2 million frames: read.
        m.sample[0].location_id.truncate(500);
        let p = read(&m.encode_to_vec()).unwrap();
        assert_eq!(p.samples()[0].stack.len(), 2_000_000);
    }

    /// Allocations and live objects of one run in one message: Go's four
    /// heap sample types, one sample per distinct stack with 0 where a
    /// part has none, `inuse_space` the default.
    #[test]
    fn heap_parts_share_stacks_and_fill_absent_values_with_zero() {
        let meta =
            |event: &str| Meta { title: "Allocation profile".into(), event: event.into(), interval: 512 << 10, total_unit: "bytes".into(), ..Meta::default() };
        let (main, churn, keep) = (Frame::new("Main.main", FrameKind::Jit), Frame::new("Main.churn", FrameKind::Jit), Frame::new("Main.keep", FrameKind::Jit));
        let mut alloc = Profile::new(meta("alloc"));
        alloc.add_frames([main.clone(), churn.clone(), Frame::new("byte[]", FrameKind::Alloc)], 10, 5_000_000);
        alloc.add_frames([main.clone(), keep.clone(), Frame::new("int[]", FrameKind::Alloc)], 2, 1_000_000);
        let mut live = Profile::new(meta("live"));
        live.add_frames([main.clone(), keep.clone(), Frame::new("int[]", FrameKind::Alloc)], 2, 1_000_000);
        let m = encode_parts(&[&alloc, &live]);
        let s = |i: i64| m.string_table[i as usize].as_str();
        let types: Vec<&str> = m.sample_type.iter().map(|t| s(t.r#type)).collect();
        assert_eq!(types, ["alloc_objects", "alloc_space", "inuse_objects", "inuse_space"]);
        assert_eq!(s(m.default_sample_type), "inuse_space");
        let leaf = |smp: &pb::Sample| {
            let loc = &m.location[smp.location_id[0] as usize - 1];
            s(m.function[loc.line[0].function_id as usize - 1].name).to_string()
        };
        let mut got: Vec<(String, Vec<i64>)> = m.sample.iter().map(|smp| (leaf(smp), smp.value.clone())).collect();
        got.sort();
        assert_eq!(got, vec![("byte[]".to_string(), vec![10, 5_000_000, 0, 0]), ("int[]".to_string(), vec![2, 1_000_000, 2, 1_000_000])]);
        // One location per distinct frame, shared by both parts.
        assert_eq!(m.location.len(), 5);
        // Read back as two profiles, the class the leaf of each stack.
        let back = read_all(&m.encode_to_vec()).unwrap();
        let stacks = |p: &Profile| {
            type Stack = Vec<(String, FrameKind)>;
            let mut v: Vec<(Stack, u64, u64)> =
                p.samples().iter().map(|x| (x.stack.iter().map(|&f| (p.frame(f).name.clone(), p.frame(f).kind)).collect(), x.samples, x.total)).collect();
            v.sort_by(|a, b| format!("{a:?}").cmp(&format!("{b:?}")));
            v
        };
        let plain = |p: &Profile| {
            let mut out = Profile::new(p.meta.clone());
            for x in p.samples() {
                let n = x.stack.len();
                out.add_frames(
                    x.stack.iter().enumerate().map(|(i, &f)| Frame::new(p.frame(f).name.clone(), if i + 1 == n { FrameKind::Alloc } else { FrameKind::Java })),
                    x.samples,
                    x.total,
                );
            }
            out
        };
        assert_eq!(back.iter().map(|p| p.meta.event.as_str()).collect::<Vec<_>>(), ["alloc", "live"]);
        assert_eq!(stacks(&back[0]), stacks(&plain(&alloc)));
        assert_eq!(stacks(&back[1]), stacks(&plain(&live)));
        // A file of one part reads as one profile, as before.
        assert_eq!(read_all(&encode_parts(&[&alloc]).encode_to_vec()).unwrap().len(), 1);
    }
}

//! OpenTelemetry profiles (OTLP, `v1development`): the body of an
//! `ExportProfilesServiceRequest` (uncompressed protobuf; the sender
//! gzips it and POSTs it to `/v1development/profiles`) made from profiles
//! of the model, and read back.
//!
//! One request holds one resource (`service.name` and the caller's
//! attributes), one scope (`oxprof` and its version) and, for each model
//! profile, two OTLP profiles, since an OTLP profile has one sample type:
//! first the estimated total (`cpu`/`wall`/`delay` in nanoseconds,
//! `alloc_space`/`inuse_space` in bytes), then the sample count
//! (`samples`, `alloc_objects`, `inuse_objects`, `contentions`, in
//! `count`): the names [`crate::pprof`] gives Go's tools, so that a pprof
//! file and this payload of the same profile read alike. A value whose
//! profile is all zero (no totals known) is left out. Both carry the
//! recording's start, length and period, and the profile attribute
//! `oxprof.event` (the event sampled: `cpu`, `itimer`, `alloc`, ...).
//!
//! All profiles of the request share one dictionary: strings, functions
//! (one per frame name), locations, stacks and attributes appear once
//! however many profiles use them. A Java frame inlined into its caller
//! (`FrameKind::Inlined`) is a line of the caller's location (callee
//! first), as the proto describes inlining; every location carries
//! `profile.frame.type` (`jvm`, `native`, `kernel`, per the semantic
//! conventions for profiles; none for failed-walk frames) and
//! `oxprof.frame.kind` (the model's kind of its physical frame:
//! `interpreted`, `jit`, `alloc`, ...). Thread roots and thread-state
//! frames are no locations but the sample attributes `thread.name` (the
//! agent's ` tid=N` dropped) and `oxprof.thread.state` (`running`,
//! `sleeping`, ...: the semantic conventions' `jvm.thread.state` has
//! `java.lang.Thread.State`'s values, which cannot tell running from in
//! native or a park from a timed wait). Samples are aggregated (one value
//! each, no timestamps).

use crate::hash::FastMap as HashMap;

use prost::Message;

use crate::model::{Frame, FrameKind, Meta, Profile};
use crate::otlp_proto as pb;
use crate::pprof::Kind;
use crate::state::ThreadState;

/// Resource attribute naming the service (required by OTLP receivers).
pub const SERVICE_NAME: &str = "service.name";
/// Sample attribute: the thread's name (semantic conventions).
pub const THREAD_NAME: &str = "thread.name";
/// Sample attribute: the thread's state, as oxprof names states.
pub const THREAD_STATE: &str = "oxprof.thread.state";
/// Location attribute: the runtime a frame belongs to (semantic conventions).
pub const FRAME_TYPE: &str = "profile.frame.type";
/// Location attribute: the model's kind of the frame.
pub const FRAME_KIND: &str = "oxprof.frame.kind";
/// Profile attribute: the event sampled (the model's `Meta::event`).
pub const EVENT: &str = "oxprof.event";
/// The instrumentation scope's name.
pub const SCOPE_NAME: &str = "oxprof";

/// A resource attribute's value.
#[derive(Clone, Debug, PartialEq)]
pub enum Value {
    Str(String),
    Int(i64),
    Bool(bool),
}

impl From<&str> for Value {
    fn from(s: &str) -> Value {
        Value::Str(s.to_string())
    }
}

impl From<String> for Value {
    fn from(s: String) -> Value {
        Value::Str(s)
    }
}

impl From<i64> for Value {
    fn from(v: i64) -> Value {
        Value::Int(v)
    }
}

impl From<u32> for Value {
    fn from(v: u32) -> Value {
        Value::Int(v as i64)
    }
}

impl From<bool> for Value {
    fn from(v: bool) -> Value {
        Value::Bool(v)
    }
}

/// What produced the profiles: `service.name` and further resource
/// attributes (`host.name`, `process.pid` as an integer,
/// `process.runtime.name`/`.version`, user labels).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Resource {
    pub service: String,
    pub attributes: Vec<(String, Value)>,
}

impl Resource {
    pub fn new(service: impl Into<String>) -> Resource {
        Resource { service: service.into(), attributes: Vec::new() }
    }

    /// The same resource with one more attribute.
    pub fn with(mut self, key: impl Into<String>, value: impl Into<Value>) -> Resource {
        self.attributes.push((key.into(), value.into()));
        self
    }

    /// The resource OpenTelemetry's environment variables describe:
    /// `OTEL_RESOURCE_ATTRIBUTES` (`key=value,...`, values percent-encoded)
    /// and `OTEL_SERVICE_NAME`, which wins over a `service.name` there;
    /// without either the service is `unknown_service:<executable>`, as
    /// the OpenTelemetry SDKs name it.
    pub fn from_env(executable: &str) -> Resource {
        Resource::from_vars(executable, |k| std::env::var(k).ok())
    }

    /// As [`Resource::from_env`], with the variables from `var`.
    pub fn from_vars(executable: &str, var: impl Fn(&str) -> Option<String>) -> Resource {
        let mut r = Resource::new(format!("unknown_service:{executable}"));
        for item in var("OTEL_RESOURCE_ATTRIBUTES").unwrap_or_default().split(',') {
            let Some((k, v)) = item.split_once('=') else { continue };
            let (k, v) = (k.trim(), percent_decode(v.trim()));
            if k.is_empty() {
                continue;
            }
            if k == SERVICE_NAME {
                r.service = v;
            } else {
                r.attributes.retain(|(key, _)| key != k);
                r.attributes.push((k.to_string(), Value::Str(v)));
            }
        }
        if let Some(name) = var("OTEL_SERVICE_NAME").filter(|n| !n.trim().is_empty()) {
            r.service = name.trim().to_string();
        }
        r
    }
}

/// `%XX` escapes decoded (an invalid escape stays as written).
fn percent_decode(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        let hex = b.get(i + 1..i + 3).and_then(|h| std::str::from_utf8(h).ok()).and_then(|h| u8::from_str_radix(h, 16).ok());
        match (b[i], hex) {
            (b'%', Some(v)) => {
                out.push(v);
                i += 3;
            }
            (c, _) => {
                out.push(c);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// The bytes of an `ExportProfilesServiceRequest` holding the profiles
/// (uncompressed protobuf).
pub fn encode(profiles: &[&Profile], resource: &Resource) -> Vec<u8> {
    request(profiles, resource).encode_to_vec()
}

/// Writes the request's bytes (uncompressed, as [`encode`]).
pub fn write<W: std::io::Write>(profiles: &[&Profile], resource: &Resource, mut out: W) -> std::io::Result<()> {
    out.write_all(&encode(profiles, resource))?;
    out.flush()
}

/// `profile.frame.type` of a physical frame of this kind.
fn frame_type(kind: FrameKind) -> Option<&'static str> {
    match kind {
        FrameKind::Interpreted | FrameKind::Jit | FrameKind::Inlined | FrameKind::Java | FrameKind::Alloc | FrameKind::Lock => Some("jvm"),
        FrameKind::Native | FrameKind::Cpp => Some("native"),
        FrameKind::Kernel => Some("kernel"),
        FrameKind::Thread | FrameKind::State | FrameKind::Error | FrameKind::Label => None,
    }
}

/// `oxprof.frame.kind` of a kind.
fn kind_word(kind: FrameKind) -> &'static str {
    match kind {
        FrameKind::Interpreted => "interpreted",
        FrameKind::Jit => "jit",
        FrameKind::Inlined => "inlined",
        FrameKind::Java => "java",
        FrameKind::Native => "native",
        FrameKind::Cpp => "cpp",
        FrameKind::Kernel => "kernel",
        FrameKind::Thread => "thread",
        FrameKind::Error => "error",
        FrameKind::Alloc => "alloc",
        FrameKind::State => "state",
        FrameKind::Lock => "lock",
        FrameKind::Label => "label",
    }
}

fn kind_of_word(word: &str) -> Option<FrameKind> {
    FrameKind::ALL.into_iter().find(|k| kind_word(*k) == word)
}

/// Whether an inlined frame can be a line of a location of this kind.
fn hosts_inlined(kind: FrameKind) -> bool {
    matches!(kind, FrameKind::Jit | FrameKind::Inlined | FrameKind::Java)
}

/// The thread name of a thread root: `[name]` or the agent's `[name tid=N]`.
fn thread_name(frame: &str) -> &str {
    crate::model::thread_of_root(frame).0
}

/// The sample-count and total sample types, and the period type, of a kind.
fn types(kind: Kind) -> [(&'static str, &'static str); 3] {
    let [count, total] = kind.sample_types();
    let period = match kind {
        Kind::Cpu => ("cpu", "nanoseconds"),
        Kind::Wall => ("wall", "nanoseconds"),
        Kind::Alloc | Kind::Live => ("space", "bytes"),
        Kind::Lock => ("delay", "nanoseconds"),
    };
    [count, total, period]
}

/// The request's dictionary while it is built: every table with its
/// index, entry 0 the zero value.
struct Dict {
    strings: Vec<String>,
    string_ids: HashMap<String, i32>,
    functions: Vec<pb::Function>,
    function_ids: HashMap<i32, i32>,
    locations: Vec<pb::Location>,
    location_ids: HashMap<(Vec<(i32, i64)>, FrameKind), i32>,
    attributes: Vec<pb::KeyValueAndUnit>,
    attribute_ids: HashMap<(i32, String), i32>,
    stacks: Vec<pb::Stack>,
    stack_ids: HashMap<Vec<i32>, i32>,
    /// A location's attribute indices by its frame kind, once made.
    kind_attributes: [Option<Vec<i32>>; FrameKind::ALL.len()],
}

impl Dict {
    fn new() -> Dict {
        Dict {
            strings: vec![String::new()],
            string_ids: [(String::new(), 0)].into_iter().collect(),
            functions: vec![pb::Function::default()],
            function_ids: HashMap::default(),
            locations: vec![pb::Location::default()],
            location_ids: HashMap::default(),
            attributes: vec![pb::KeyValueAndUnit::default()],
            attribute_ids: HashMap::default(),
            stacks: vec![pb::Stack::default()],
            stack_ids: [(Vec::new(), 0)].into_iter().collect(),
            kind_attributes: Default::default(),
        }
    }

    fn string(&mut self, s: &str) -> i32 {
        if let Some(&i) = self.string_ids.get(s) {
            return i;
        }
        let i = self.strings.len() as i32;
        self.strings.push(s.to_string());
        self.string_ids.insert(s.to_string(), i);
        i
    }

    fn function(&mut self, name: &str) -> i32 {
        let name = self.string(name);
        *self.function_ids.entry(name).or_insert_with(|| {
            self.functions.push(pb::Function { name_strindex: name, ..pb::Function::default() });
            self.functions.len() as i32 - 1
        })
    }

    /// A string-valued attribute.
    fn attribute(&mut self, key: &str, value: &str) -> i32 {
        let key = self.string(key);
        if let Some(&i) = self.attribute_ids.get(&(key, value.to_string())) {
            return i;
        }
        let i = self.attributes.len() as i32;
        self.attributes.push(pb::KeyValueAndUnit { key_strindex: key, value: Some(string_value(value)), unit_strindex: 0 });
        self.attribute_ids.insert((key, value.to_string()), i);
        i
    }

    /// A location of lines (callee first) whose physical frame is of `kind`.
    fn location(&mut self, lines: Vec<(i32, i64)>, kind: FrameKind) -> i32 {
        let key = (lines, kind);
        if let Some(&i) = self.location_ids.get(&key) {
            return i;
        }
        let attribute_indices = match &self.kind_attributes[kind.index()] {
            Some(known) => known.clone(),
            None => {
                let mut made = Vec::with_capacity(2);
                if let Some(t) = frame_type(kind) {
                    made.push(self.attribute(FRAME_TYPE, t));
                }
                made.push(self.attribute(FRAME_KIND, kind_word(kind)));
                self.kind_attributes[kind.index()] = Some(made.clone());
                made
            }
        };
        let lines = key.0.iter().map(|&(function_index, line)| pb::Line { function_index, line, column: 0 }).collect();
        let i = self.locations.len() as i32;
        self.locations.push(pb::Location { mapping_index: 0, address: 0, lines, attribute_indices });
        self.location_ids.insert(key, i);
        i
    }

    /// A stack of location indices, leaf first.
    fn stack(&mut self, locations: Vec<i32>) -> i32 {
        if let Some(&i) = self.stack_ids.get(&locations) {
            return i;
        }
        let i = self.stacks.len() as i32;
        self.stacks.push(pb::Stack { location_indices: locations.clone() });
        self.stack_ids.insert(locations, i);
        i
    }

    fn value_type(&mut self, (t, unit): (&str, &str)) -> Option<pb::ValueType> {
        Some(pb::ValueType { type_strindex: self.string(t), unit_strindex: self.string(unit) })
    }

    /// The dictionary message, with the profiles' indices into it
    /// renumbered. Tables are put in orders that let gzip find what
    /// neighbouring entries share: strings in lexical order (the names of a
    /// package or class together), functions in the order of their names,
    /// stacks root first in the order of their locations (stacks sharing
    /// callers together), and each profile's samples in the order of their
    /// stacks; locations by use (below). Entry 0 of each table stays the
    /// zero value.
    fn finish(mut self, profiles: &mut [pb::Profile]) -> pb::ProfilesDictionary {
        let (order, new_string) = reorder(self.strings.len(), |a, b| self.strings[a].cmp(&self.strings[b]));
        permute(&mut self.strings, &order);
        let s = |i: &mut i32| *i = new_string.get(*i as usize).copied().unwrap_or(0);
        for f in &mut self.functions {
            s(&mut f.name_strindex);
            s(&mut f.system_name_strindex);
            s(&mut f.filename_strindex);
        }
        for a in &mut self.attributes {
            s(&mut a.key_strindex);
            s(&mut a.unit_strindex);
        }
        for p in profiles.iter_mut() {
            for vt in [&mut p.sample_type, &mut p.period_type].into_iter().flatten() {
                s(&mut vt.type_strindex);
                s(&mut vt.unit_strindex);
            }
        }
        let (order, new_function) = reorder(self.functions.len(), |a, b| self.functions[a].name_strindex.cmp(&self.functions[b].name_strindex));
        permute(&mut self.functions, &order);
        for l in &mut self.locations {
            for line in &mut l.lines {
                line.function_index = new_function[line.function_index as usize];
            }
        }
        // Locations by how many stacks use them, most used first: the stack
        // table, the bulk of a request, then spends one varint byte instead
        // of two on the frames most stacks share (indices below 128).
        let mut uses = vec![0u32; self.locations.len()];
        for st in &self.stacks {
            for &l in &st.location_indices {
                if let Some(u) = uses.get_mut(l as usize) {
                    *u += 1;
                }
            }
        }
        let (order, new_location) = reorder(self.locations.len(), |a, b| {
            let (la, lb) = (&self.locations[a].lines, &self.locations[b].lines);
            uses[b].cmp(&uses[a]).then_with(|| la.iter().map(|x| (x.function_index, x.line)).cmp(lb.iter().map(|x| (x.function_index, x.line))))
        });
        permute(&mut self.locations, &order);
        for st in &mut self.stacks {
            for l in &mut st.location_indices {
                *l = new_location[*l as usize];
            }
        }
        let (order, new_stack) =
            reorder(self.stacks.len(), |a, b| self.stacks[a].location_indices.iter().rev().cmp(self.stacks[b].location_indices.iter().rev()));
        permute(&mut self.stacks, &order);
        for p in profiles.iter_mut() {
            for sample in &mut p.samples {
                sample.stack_index = new_stack[sample.stack_index as usize];
            }
            p.samples.sort_by(|a, b| (a.stack_index, &a.attribute_indices).cmp(&(b.stack_index, &b.attribute_indices)));
        }
        pb::ProfilesDictionary {
            mapping_table: vec![pb::Mapping::default()],
            location_table: self.locations,
            function_table: self.functions,
            // Zero-filled ids rather than empty ones, as the proto advises
            // for codecs that expect 16- and 8-byte ids.
            link_table: vec![pb::Link { trace_id: vec![0; 16], span_id: vec![0; 8] }],
            string_table: self.strings,
            attribute_table: self.attributes,
            stack_table: self.stacks,
        }
    }
}

/// A table's new order (old indices, entry 0 first, the rest sorted by
/// `cmp`) and, for each old index, its new one.
fn reorder(len: usize, cmp: impl Fn(usize, usize) -> std::cmp::Ordering) -> (Vec<usize>, Vec<i32>) {
    let mut order: Vec<usize> = (0..len).collect();
    if let Some(rest) = order.get_mut(1..) {
        rest.sort_by(|&a, &b| cmp(a, b));
    }
    let mut new_index = vec![0i32; len];
    for (new, &old) in order.iter().enumerate() {
        new_index[old] = new as i32;
    }
    (order, new_index)
}

/// Puts `table` in `order` (old indices, as [`reorder`] gives).
fn permute<T: Default>(table: &mut Vec<T>, order: &[usize]) {
    let mut old = std::mem::take(table);
    *table = order.iter().map(|&i| std::mem::take(&mut old[i])).collect();
}

fn string_value(s: &str) -> pb::AnyValue {
    pb::AnyValue { value: Some(pb::any_value::Value::StringValue(s.to_string())) }
}

/// What a model frame becomes.
#[derive(Clone, Copy)]
enum Role {
    /// A sample attribute (thread name or state).
    Thread(i32),
    State(i32),
    /// A context label (`[key=value]` root frame): an attribute of its own.
    Label(i32),
    /// A line: function index, line, kind.
    Code(i32, i64, FrameKind),
}

/// The request message of the profiles (see the module's description).
fn request(profiles: &[&Profile], resource: &Resource) -> pb::ExportProfilesServiceRequest {
    let mut dict = Dict::new();
    let mut out = Vec::with_capacity(2 * profiles.len());
    for p in profiles {
        let kind = Kind::of(&p.meta);
        let roles: Vec<Role> = p
            .frames()
            .iter()
            .map(|f| match f.kind {
                FrameKind::Thread => Role::Thread(dict.attribute(THREAD_NAME, thread_name(&f.name))),
                FrameKind::State => {
                    let word = ThreadState::from_frame_name(&f.name).map_or_else(|| f.name.trim_matches(['[', ']']).to_string(), |s| s.name().to_string());
                    Role::State(dict.attribute(THREAD_STATE, &word))
                }
                FrameKind::Label => match crate::labels::parse_frame(&f.name) {
                    Some((k, v)) => Role::Label(dict.attribute(k, v)),
                    None => Role::Code(dict.function(&f.name), f.line as i64, f.kind),
                },
                k => Role::Code(dict.function(&f.name), f.line as i64, k),
            })
            .collect();
        // (stack index, attribute indices) → (samples, total), in first-seen order.
        let mut samples: Vec<((i32, Vec<i32>), u64, u64)> = Vec::new();
        let mut sample_ids: HashMap<(i32, Vec<i32>), usize> = HashMap::default();
        // The location of a model frame that is a physical frame of its
        // own (nothing inlined into it), 0 until met: most are, and they
        // are met again in most stacks.
        let mut alone: Vec<i32> = vec![0; p.frames().len()];
        // Physical frames of a stack, root first: (kind, model frame, first
        // of its lines in `lines`, caller first).
        let mut physical: Vec<(FrameKind, u32, usize)> = Vec::new();
        let mut lines: Vec<(i32, i64)> = Vec::new();
        for s in p.samples().iter().filter(|s| s.samples != 0 || s.total != 0) {
            let (mut thread, mut state) = (None, None);
            let mut labels: Vec<i32> = Vec::new();
            physical.clear();
            lines.clear();
            for &f in &s.stack {
                match roles[f as usize] {
                    Role::Thread(a) => thread = thread.or(Some(a)),
                    Role::State(a) => state = state.or(Some(a)),
                    Role::Label(a) => labels.push(a),
                    Role::Code(func, line, k) => {
                        if !matches!(physical.last(), Some(&(host, _, _)) if k == FrameKind::Inlined && hosts_inlined(host)) {
                            physical.push((k, f, lines.len()));
                        }
                        lines.push((func, line));
                    }
                }
            }
            let mut stack: Vec<i32> = Vec::with_capacity(physical.len());
            for (i, &(k, f, start)) in physical.iter().enumerate().rev() {
                let end = physical.get(i + 1).map_or(lines.len(), |next| next.2);
                let location = if end - start == 1 {
                    let known = &mut alone[f as usize];
                    if *known == 0 {
                        *known = dict.location(vec![lines[start]], k);
                    }
                    *known
                } else {
                    dict.location(lines[start..end].iter().rev().copied().collect(), k)
                };
                stack.push(location);
            }
            let key = (dict.stack(stack), thread.into_iter().chain(state).chain(labels).collect::<Vec<i32>>());
            let i = *sample_ids.entry(key.clone()).or_insert_with(|| {
                samples.push((key, 0, 0));
                samples.len() - 1
            });
            samples[i].1 += s.samples;
            samples[i].2 += s.total;
        }
        let [count_type, total_type, period_type] = types(kind);
        let event = dict.attribute(EVENT, &p.meta.event);
        // Counts only (collapsed stacks): their totals are the counts again,
        // no quantity of their own, so one profile of counts.
        let counts_only = p.meta.counts_only();
        let has_total = !counts_only && samples.iter().any(|s| s.2 != 0);
        let has_count = samples.iter().any(|s| s.1 != 0) || !has_total;
        for (wanted, value_type, total) in [(has_total, total_type, true), (has_count, count_type, false)] {
            if !wanted {
                continue;
            }
            out.push(pb::Profile {
                sample_type: dict.value_type(value_type),
                samples: samples
                    .iter()
                    .map(|((stack, attrs), n, t)| (stack, attrs, if total { *t } else { *n }))
                    .filter(|(_, _, v)| *v != 0)
                    .map(|(stack, attrs, v)| pb::Sample {
                        stack_index: *stack,
                        attribute_indices: attrs.clone(),
                        values: vec![v.min(i64::MAX as u64) as i64],
                        ..pb::Sample::default()
                    })
                    .collect(),
                time_unix_nano: p.meta.start_ns,
                duration_nano: p.meta.duration_ns,
                period_type: dict.value_type(if counts_only { crate::model::COUNTS_TYPE } else { period_type }),
                period: if counts_only { 1 } else { p.meta.interval.min(i64::MAX as u64) as i64 },
                attribute_indices: vec![event],
                ..pb::Profile::default()
            });
        }
    }
    let dictionary = dict.finish(&mut out);
    let mut attributes = vec![pb::KeyValue { key: SERVICE_NAME.into(), value: Some(string_value(&resource.service)), key_strindex: 0 }];
    for (k, v) in resource.attributes.iter().filter(|(k, _)| k != SERVICE_NAME) {
        let value = match v {
            Value::Str(s) => pb::any_value::Value::StringValue(s.clone()),
            Value::Int(i) => pb::any_value::Value::IntValue(*i),
            Value::Bool(b) => pb::any_value::Value::BoolValue(*b),
        };
        attributes.push(pb::KeyValue { key: k.clone(), value: Some(pb::AnyValue { value: Some(value) }), key_strindex: 0 });
    }
    pb::ExportProfilesServiceRequest {
        resource_profiles: vec![pb::ResourceProfiles {
            resource: Some(pb::Resource { attributes, dropped_attributes_count: 0 }),
            scope_profiles: vec![pb::ScopeProfiles {
                scope: Some(pb::InstrumentationScope {
                    name: SCOPE_NAME.into(),
                    version: env!("CARGO_PKG_VERSION").into(),
                    ..pb::InstrumentationScope::default()
                }),
                profiles: out,
                schema_url: String::new(),
            }],
            schema_url: String::new(),
        }],
        dictionary: Some(dictionary),
    }
}

/// A request read back: its resource and its profiles in the model.
#[derive(Debug)]
pub struct Decoded {
    pub resource: Resource,
    pub profiles: Vec<Profile>,
}

/// Reads a file's bytes as an OTLP request: gzipped (as sent, or an
/// interval spooled with `file=…pb.gz`) or not (`.otlp.pb`).
pub fn read(bytes: &[u8]) -> Result<Decoded, String> {
    decode(&crate::pprof::decompressed(bytes)?)
}

/// The kind of an OTLP profile and whether its values are totals (else
/// sample counts), from its sample and period types: oxprof's own names
/// exactly (see [`types`]), else a reading of common names (`*_space`,
/// `inuse_*`, `delay`, `contentions`, `wall`/`off_cpu` in nanoseconds,
/// anything else in nanoseconds is CPU time, anything else a CPU sample
/// count), so that other profilers' requests can be read.
fn kind_of(sample: (&str, &str), period: &str) -> (Kind, bool) {
    const KINDS: [Kind; 5] = [Kind::Cpu, Kind::Wall, Kind::Alloc, Kind::Live, Kind::Lock];
    for k in KINDS {
        let [count, total, p] = types(k);
        if p.0 == period && sample == total {
            return (k, true);
        }
        if p.0 == period && sample == count {
            return (k, false);
        }
    }
    let (t, unit) = (sample.0.to_ascii_lowercase(), sample.1.to_ascii_lowercase());
    let has = |w: &str| t.contains(w) || period.to_ascii_lowercase().contains(w);
    let total = unit != "count" && !unit.is_empty();
    let kind = if t.contains("inuse") {
        Kind::Live
    } else if unit == "bytes" || t.contains("alloc") {
        Kind::Alloc
    } else if t.contains("contention") || t.contains("delay") || t.contains("lock") {
        Kind::Lock
    } else if has("wall") || has("off_cpu") || has("offcpu") {
        Kind::Wall
    } else {
        Kind::Cpu
    };
    (kind, total)
}

/// Nanoseconds in one of a time unit (`ns`, `nanoseconds`, `us`, `ms`,
/// `s`, ...), none for other units.
fn time_unit_ns(unit: &str) -> Option<u64> {
    Some(match unit.to_ascii_lowercase().as_str() {
        "ns" | "nanos" | "nanosecond" | "nanoseconds" => 1,
        "us" | "micros" | "microsecond" | "microseconds" => 1_000,
        "ms" | "millis" | "millisecond" | "milliseconds" => 1_000_000,
        "s" | "second" | "seconds" => 1_000_000_000,
        _ => return None,
    })
}

/// A function's name as a frame of kind `kind`: async-profiler's
/// frame-type suffix (`_[k]` of kernel functions, `_[j]`, `_[i]`, `_[0]`)
/// becomes the kind, and Java names lose their per-run and slashed forms
/// ([`crate::names`]).
fn frame_name(name: &str, kind: FrameKind) -> (String, FrameKind) {
    let (name, kind) = [FrameKind::Kernel, FrameKind::Jit, FrameKind::Inlined, FrameKind::Interpreted]
        .into_iter()
        .find_map(|k| Some((name.strip_suffix(k.annotation())?, k)))
        .unwrap_or((name, kind));
    let name = match kind {
        FrameKind::Interpreted | FrameKind::Jit | FrameKind::Inlined | FrameKind::Java => crate::names::method(name),
        FrameKind::Alloc | FrameKind::Lock => crate::names::class(name),
        _ => std::borrow::Cow::Borrowed(name),
    };
    (name.into_owned(), kind)
}

/// Reads an `ExportProfilesServiceRequest` (uncompressed) back into the
/// model: the OTLP profiles of one recording (same kind, start, length
/// and period) become one model profile, the count sample type its sample
/// counts and the other its totals; thread-name and state attributes
/// become root frames (`[name]`, `[sleeping]`), other sample attributes
/// context-label frames (`[key=value]`, outermost), a location's inlined
/// lines frames of kind `Inlined`. A recording of counts only whose
/// period is a time (async-profiler's) gets totals of count × period; a
/// sample without values counts one per timestamp; frame names as
/// [`frame_name`] reads them. Every index is checked.
pub fn decode(bytes: &[u8]) -> Result<Decoded, String> {
    let req = pb::ExportProfilesServiceRequest::decode(bytes).map_err(|e| format!("not an OTLP ExportProfilesServiceRequest: {e}"))?;
    let dict = req.dictionary.unwrap_or_default();
    let get = |table: &str, len: usize, i: i32| -> Result<usize, String> {
        usize::try_from(i).ok().filter(|&i| i < len).ok_or_else(|| format!("{table} index {i} out of range (table has {len})"))
    };
    let string = |i: i32| -> Result<&str, String> { get("string", dict.string_table.len(), i).map(|i| dict.string_table[i].as_str()) };
    let attribute = |i: i32| -> Result<(&str, String), String> {
        let a = &dict.attribute_table[get("attribute", dict.attribute_table.len(), i)?];
        let value = match a.value.as_ref().and_then(|v| v.value.as_ref()) {
            Some(pb::any_value::Value::StringValue(s)) => s.clone(),
            Some(pb::any_value::Value::StringValueStrindex(s)) => string(*s)?.to_string(),
            Some(pb::any_value::Value::IntValue(v)) => v.to_string(),
            Some(pb::any_value::Value::BoolValue(v)) => v.to_string(),
            _ => String::new(),
        };
        Ok((string(a.key_strindex)?, value))
    };
    // As for pprof: a corrupt request could refer to a location of
    // thousands of lines from millions of samples.
    let mut budget = crate::pprof::Expansion::new(bytes.len(), "request");
    let mut charge = |n: usize| budget.charge(n);
    let mut resource = Resource::default();
    let mut out: Vec<Profile> = Vec::new();
    // (kind, start, length, period) of each profile of `out`.
    let mut keys: Vec<(Kind, u64, u64, i64)> = Vec::new();
    // For each profile of `out`, each location's frames in it (root
    // first), once made.
    let mut located: Vec<Vec<Option<Vec<u32>>>> = Vec::new();
    // The recordings (as `keys`) whose totals an OTLP profile of totals
    // gives; the others' totals are their counts times a period of time.
    let mut with_totals: Vec<(Kind, u64, u64, i64)> = Vec::new();
    for p in req.resource_profiles.iter().flat_map(|rp| &rp.scope_profiles).flat_map(|s| &s.profiles) {
        let (st, pt) = (p.sample_type.clone().unwrap_or_default(), p.period_type.clone().unwrap_or_default());
        let (kind, total) = kind_of((string(st.type_strindex)?, string(st.unit_strindex)?), string(pt.type_strindex).unwrap_or(""));
        if total {
            with_totals.push((kind, p.time_unix_nano, p.duration_nano, p.period));
        }
    }
    for rp in &req.resource_profiles {
        for kv in rp.resource.iter().flat_map(|r| &r.attributes) {
            let value = match kv.value.as_ref().and_then(|v| v.value.as_ref()) {
                Some(pb::any_value::Value::StringValue(s)) => Value::Str(s.clone()),
                Some(pb::any_value::Value::IntValue(v)) => Value::Int(*v),
                Some(pb::any_value::Value::BoolValue(v)) => Value::Bool(*v),
                _ => continue,
            };
            match value {
                Value::Str(s) if kv.key == SERVICE_NAME => resource.service = s,
                v => resource.attributes.push((kv.key.clone(), v)),
            }
        }
        for p in rp.scope_profiles.iter().flat_map(|s| &s.profiles) {
            let st = p.sample_type.clone().unwrap_or_default();
            let pt = p.period_type.clone().unwrap_or_default();
            let (kind, total) = kind_of((string(st.type_strindex)?, string(st.unit_strindex)?), string(pt.type_strindex).unwrap_or(""));
            // Counts of nothing more (collapsed stacks, as written above):
            // read back counts only, the counts their totals too.
            let counts_only = !total && (string(pt.type_strindex).unwrap_or(""), string(pt.unit_strindex).unwrap_or("")) == crate::model::COUNTS_TYPE;
            let key = (kind, p.time_unix_nano, p.duration_nano, p.period);
            // A period of time (async-profiler's `otlp`: `count` samples of
            // a 10 ms period in `ns`) makes CPU and wall counts times.
            let period_ns = time_unit_ns(string(pt.unit_strindex).unwrap_or(""))
                .filter(|_| matches!(kind, Kind::Cpu | Kind::Wall))
                .and_then(|unit| u64::try_from(p.period).ok().filter(|&n| n > 0)?.checked_mul(unit));
            let derive = |n: u64| if with_totals.contains(&key) { 0 } else { period_ns.map_or(0, |ns| n.saturating_mul(ns)) };
            let slot = match keys.iter().position(|k| *k == key) {
                Some(i) => i,
                None => {
                    let mut event = match kind {
                        Kind::Cpu => "cpu",
                        Kind::Wall => "wall",
                        Kind::Alloc => "alloc",
                        Kind::Live => "live",
                        Kind::Lock => "lock",
                    }
                    .to_string();
                    for &a in &p.attribute_indices {
                        if let (EVENT, v) = attribute(a)? {
                            event = v;
                        }
                    }
                    let meta = Meta {
                        title: "OTLP profile".into(),
                        event,
                        interval: period_ns.unwrap_or(p.period.max(0) as u64),
                        total_unit: if counts_only {
                            ""
                        } else if types(kind)[1].1 == "bytes" {
                            "bytes"
                        } else {
                            "ns"
                        }
                        .into(),
                        start_ns: p.time_unix_nano,
                        duration_ns: p.duration_nano,
                        ..Meta::default()
                    };
                    keys.push(key);
                    out.push(Profile::new(meta));
                    located.push(vec![None; dict.location_table.len()]);
                    out.len() - 1
                }
            };
            let (profile, located) = (&mut out[slot], &mut located[slot]);
            for s in &p.samples {
                let mut stack: Vec<u32> = Vec::new();
                let (mut thread, mut state) = (None, None);
                for &a in &s.attribute_indices {
                    match attribute(a)? {
                        (THREAD_NAME, v) => thread = Some(v),
                        (THREAD_STATE, v) => state = Some(v),
                        (k, v) if crate::labels::valid_key(k) => {
                            charge(k.len() + v.len())?;
                            stack.push(profile.intern(crate::labels::frame(k, &v)));
                        }
                        _ => {}
                    }
                }
                if let Some(st) = state {
                    charge(st.len())?;
                    stack.push(profile.intern(ThreadState::from_word(&st).map_or_else(|| Frame::new(format!("[{st}]"), FrameKind::State), ThreadState::frame)));
                }
                if let Some(name) = thread {
                    charge(name.len())?;
                    // Already a thread root (`[name tid=N]`, as some converters write it).
                    let root = if name.starts_with('[') && name.ends_with(']') { name } else { format!("[{name}]") };
                    stack.push(profile.intern(Frame::new(root, FrameKind::Thread)));
                }
                let st = &dict.stack_table[get("stack", dict.stack_table.len(), s.stack_index)?];
                for &l in st.location_indices.iter().rev() {
                    let i = get("location", dict.location_table.len(), l)?;
                    if located[i].is_none() {
                        let loc = &dict.location_table[i];
                        let mut kind = FrameKind::Java;
                        for &a in &loc.attribute_indices {
                            match attribute(a)? {
                                (FRAME_KIND, v) => kind = kind_of_word(&v).unwrap_or(kind),
                                (FRAME_TYPE, v) if v == "native" => kind = FrameKind::Native,
                                (FRAME_TYPE, v) if v == "kernel" => kind = FrameKind::Kernel,
                                _ => {}
                            }
                        }
                        let mut frames = Vec::with_capacity(loc.lines.len().max(1));
                        for (j, line) in loc.lines.iter().enumerate().rev() {
                            let f = &dict.function_table[get("function", dict.function_table.len(), line.function_index)?];
                            let name = string(f.name_strindex)?;
                            charge(name.len())?;
                            let k = if j + 1 == loc.lines.len() { kind } else { FrameKind::Inlined };
                            let (name, k) = frame_name(name, k);
                            frames.push(profile.intern(Frame::new(name, k).with_line(line.line.clamp(0, u32::MAX as i64) as u32)));
                        }
                        // A location without lines (an unsymbolized address).
                        if frames.is_empty() {
                            frames.push(profile.intern(Frame::new(format!("0x{:x}", loc.address), FrameKind::Native)));
                        }
                        located[i] = Some(frames);
                    }
                    let frames = located[i].as_deref().unwrap_or(&[]);
                    charge(std::mem::size_of_val(frames))?;
                    stack.extend_from_slice(frames);
                }
                // Without values, each timestamp is one sample (OTLP).
                let timestamps = s.timestamps_unix_nano.len() as u64;
                let v = s.values.iter().fold(0u64, |a, &v| a.saturating_add(v.max(0) as u64));
                let (n, t) = if s.values.is_empty() {
                    (timestamps, if counts_only { timestamps } else { derive(timestamps) })
                } else if total {
                    (0, v)
                } else if counts_only {
                    (v, v)
                } else {
                    (v, derive(v))
                };
                profile.add(stack, n, t);
            }
        }
    }
    Ok(Decoded { resource, profiles: out })
}

/// What a collector answered to an export: profiles rejected and its
/// message (both zero/empty on full success).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Response {
    pub rejected_profiles: i64,
    pub error_message: String,
}

/// Reads an `ExportProfilesServiceResponse` (an empty body is full success).
pub fn parse_response(bytes: &[u8]) -> Result<Response, String> {
    let r = pb::ExportProfilesServiceResponse::decode(bytes).map_err(|e| format!("not an OTLP ExportProfilesServiceResponse: {e}"))?;
    let p = r.partial_success.unwrap_or_default();
    Ok(Response { rejected_profiles: p.rejected_profiles, error_message: p.error_message })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Counter;

    fn meta(event: &str, unit: &str, interval: u64) -> Meta {
        Meta { event: event.into(), total_unit: unit.into(), interval, start_ns: 1_700_000_000_000_000_000, duration_ns: 10_000_000_000, ..Meta::default() }
    }

    /// A CPU profile with threads, states, an inlined frame and a kernel
    /// frame, and an allocation profile sharing its Java frames.
    fn cpu_and_alloc() -> (Profile, Profile) {
        let main = Frame::new("Main.main", FrameKind::Interpreted).with_line(3);
        let run = Frame::new("Main.run", FrameKind::Jit).with_line(10);
        let hot = Frame::new("Main.hot", FrameKind::Inlined).with_line(12);
        let mut cpu = Profile::new(meta("itimer", "ns", 10_000_000));
        let t1 = Frame::new("[main tid=101]", FrameKind::Thread);
        let t2 = Frame::new("[worker-1 tid=102]", FrameKind::Thread);
        cpu.add_frames([ThreadState::Running.frame(), t1.clone(), main.clone(), run.clone(), hot.clone()], 7, 70_000_000);
        cpu.add_frames([ThreadState::Running.frame(), t2.clone(), main.clone(), run.clone(), hot.clone()], 5, 50_000_000);
        cpu.add_frames(
            [ThreadState::Native.frame(), t2.clone(), main.clone(), Frame::new("write", FrameKind::Native), Frame::new("ksys_write", FrameKind::Kernel)],
            2,
            20_000_000,
        );
        cpu.add_frames([Frame::new("no_Java_frame", FrameKind::Error)], 1, 10_000_000);
        let mut alloc = Profile::new(meta("alloc", "bytes", 512 << 10));
        alloc.add_frames([t1.clone(), main.clone(), run.clone(), hot.clone(), Frame::new("byte[]", FrameKind::Alloc)], 3, 3 << 20);
        alloc.add_frames([t1.clone(), main.clone(), Frame::new("java.lang.String", FrameKind::Alloc)], 1, 1 << 19);
        (cpu, alloc)
    }

    fn resource() -> Resource {
        Resource::new("checkout").with("host.name", "h1").with("process.pid", 4242u32).with("deployment.environment", "test")
    }

    #[test]
    fn dictionary_is_shared_deduplicated_and_indices_are_valid() {
        let (cpu, alloc) = cpu_and_alloc();
        let req = request(&[&cpu, &alloc], &resource());
        let d = req.dictionary.as_ref().unwrap();
        // Zero values at index 0.
        assert_eq!(d.string_table[0], "");
        assert_eq!(d.location_table[0], pb::Location::default());
        assert_eq!(d.function_table[0], pb::Function::default());
        assert_eq!(d.stack_table[0], pb::Stack::default());
        assert_eq!(d.attribute_table[0], pb::KeyValueAndUnit::default());
        assert_eq!(d.mapping_table, [pb::Mapping::default()]);
        assert_eq!(d.link_table.len(), 1);
        // No duplicates in any table.
        fn distinct<T: PartialEq + std::fmt::Debug>(t: &[T]) {
            for (i, a) in t.iter().enumerate() {
                assert!(!t[..i].contains(a), "duplicate {a:?}");
            }
        }
        distinct(&d.string_table);
        distinct(&d.function_table);
        distinct(&d.location_table);
        distinct(&d.stack_table);
        distinct(&d.attribute_table);
        // Main.main is one function and its location serves both profiles;
        // the inlined Main.hot is a line of Main.run's location.
        let s = |i: i32| d.string_table[i as usize].as_str();
        let names: Vec<&str> = d.function_table[1..].iter().map(|f| s(f.name_strindex)).collect();
        assert_eq!(names.iter().filter(|n| **n == "Main.main").count(), 1);
        assert!(!names.iter().any(|n| n.starts_with('[')), "thread and state frames are no functions: {names:?}");
        let lines = |l: &pb::Location| l.lines.iter().map(|x| (s(d.function_table[x.function_index as usize].name_strindex), x.line)).collect::<Vec<_>>();
        let inl = d.location_table.iter().find(|l| l.lines.len() == 2).expect("a location with an inlined line");
        assert_eq!(lines(inl), [("Main.hot", 12), ("Main.run", 10)]);
        // Every index in range.
        let profiles = &req.resource_profiles[0].scope_profiles[0].profiles;
        for p in profiles {
            for smp in &p.samples {
                let st = &d.stack_table[smp.stack_index as usize];
                assert!(!st.location_indices.is_empty());
                for &l in &st.location_indices {
                    let loc = &d.location_table[l as usize];
                    assert!(!loc.lines.is_empty());
                    assert!(loc.lines.iter().all(|x| (x.function_index as usize) < d.function_table.len() && x.function_index > 0));
                    assert!(loc.attribute_indices.iter().all(|&a| a > 0 && (a as usize) < d.attribute_table.len()));
                }
                assert!(smp.attribute_indices.iter().all(|&a| a > 0 && (a as usize) < d.attribute_table.len()));
            }
        }
        assert!(d.attribute_table[1..].iter().all(|a| a.key_strindex > 0 && (a.key_strindex as usize) < d.string_table.len()));
        // Resource and scope.
        let r = req.resource_profiles[0].resource.as_ref().unwrap();
        assert_eq!(r.attributes[0].key, "service.name");
        assert_eq!(r.attributes[0].value, Some(string_value("checkout")));
        let pid = r.attributes.iter().find(|a| a.key == "process.pid").unwrap();
        assert_eq!(pid.value.as_ref().unwrap().value, Some(pb::any_value::Value::IntValue(4242)));
        assert_eq!(req.resource_profiles[0].scope_profiles[0].scope.as_ref().unwrap().name, "oxprof");
    }

    /// Tables in the order gzip compresses best, each entry still what it
    /// was: strings lexical, functions by name, locations most used first,
    /// stacks root first, samples by stack.
    #[test]
    fn tables_are_ordered_for_compression() {
        let (cpu, alloc) = cpu_and_alloc();
        let req = request(&[&cpu, &alloc], &resource());
        let d = req.dictionary.as_ref().unwrap();
        assert!(d.string_table[1..].windows(2).all(|w| w[0] < w[1]), "{:?}", d.string_table);
        assert!(d.function_table[1..].windows(2).all(|w| w[0].name_strindex < w[1].name_strindex));
        let mut uses = vec![0; d.location_table.len()];
        for st in &d.stack_table {
            for &l in &st.location_indices {
                uses[l as usize] += 1;
            }
        }
        assert!(uses[1..].windows(2).all(|w| w[0] >= w[1]), "{uses:?}");
        assert!(d.stack_table[1..].windows(2).all(|w| w[0].location_indices.iter().rev().lt(w[1].location_indices.iter().rev())));
        for p in &req.resource_profiles[0].scope_profiles[0].profiles {
            assert!(p.samples.windows(2).all(|w| (w[0].stack_index, &w[0].attribute_indices) < (w[1].stack_index, &w[1].attribute_indices)));
        }
    }

    #[test]
    fn sample_types_values_attributes_and_frame_types() {
        let (cpu, alloc) = cpu_and_alloc();
        let req = pb::ExportProfilesServiceRequest::decode(encode(&[&cpu, &alloc], &resource()).as_slice()).unwrap();
        let d = req.dictionary.as_ref().unwrap();
        let s = |i: i32| d.string_table[i as usize].as_str();
        let attr = |i: i32| {
            let a = &d.attribute_table[i as usize];
            let Some(pb::any_value::Value::StringValue(v)) = a.value.as_ref().unwrap().value.clone() else { panic!("not a string") };
            (s(a.key_strindex).to_string(), v)
        };
        let profiles = &req.resource_profiles[0].scope_profiles[0].profiles;
        let vt = |v: &Option<pb::ValueType>| {
            let v = v.as_ref().unwrap();
            (s(v.type_strindex), s(v.unit_strindex))
        };
        let types: Vec<_> = profiles.iter().map(|p| vt(&p.sample_type)).collect();
        assert_eq!(types, [("cpu", "nanoseconds"), ("samples", "count"), ("alloc_space", "bytes"), ("alloc_objects", "count")]);
        let periods: Vec<_> = profiles.iter().map(|p| (vt(&p.period_type), p.period)).collect();
        assert_eq!(periods[0], (("cpu", "nanoseconds"), 10_000_000));
        assert_eq!(periods[3], (("space", "bytes"), 512 << 10));
        assert!(profiles.iter().all(|p| p.time_unix_nano == 1_700_000_000_000_000_000 && p.duration_nano == 10_000_000_000));
        assert_eq!(attr(profiles[0].attribute_indices[0]), ("oxprof.event".into(), "itimer".into()));
        let sum = |p: &pb::Profile| p.samples.iter().flat_map(|x| &x.values).sum::<i64>() as u64;
        assert_eq!(sum(&profiles[0]), cpu.sum(Counter::Total));
        assert_eq!(sum(&profiles[1]), cpu.sum(Counter::Samples));
        assert_eq!(sum(&profiles[2]), alloc.sum(Counter::Total));
        assert_eq!(sum(&profiles[3]), alloc.sum(Counter::Samples));
        // Thread names without tid, states as words; one of each at most.
        let mut seen: Vec<(String, String)> = profiles[0].samples.iter().flat_map(|x| x.attribute_indices.iter().map(|&a| attr(a))).collect();
        seen.sort();
        seen.dedup();
        let want = [("oxprof.thread.state", "native"), ("oxprof.thread.state", "running"), ("thread.name", "main"), ("thread.name", "worker-1")];
        assert_eq!(seen, want.map(|(k, v)| (k.to_string(), v.to_string())));
        // Frame types of locations by leaf function.
        let loc_attrs: HashMap<&str, Vec<(String, String)>> = d.location_table[1..]
            .iter()
            .map(|l| (s(d.function_table[l.lines[0].function_index as usize].name_strindex), l.attribute_indices.iter().map(|&a| attr(a)).collect()))
            .collect();
        let kv = |k: &str, v: &str| (k.to_string(), v.to_string());
        assert_eq!(loc_attrs["Main.hot"], [kv(FRAME_TYPE, "jvm"), kv(FRAME_KIND, "jit")]);
        assert_eq!(loc_attrs["Main.main"], [kv(FRAME_TYPE, "jvm"), kv(FRAME_KIND, "interpreted")]);
        assert_eq!(loc_attrs["write"], [kv(FRAME_TYPE, "native"), kv(FRAME_KIND, "native")]);
        assert_eq!(loc_attrs["ksys_write"], [kv(FRAME_TYPE, "kernel"), kv(FRAME_KIND, "kernel")]);
        assert_eq!(loc_attrs["byte[]"], [kv(FRAME_TYPE, "jvm"), kv(FRAME_KIND, "alloc")]);
        assert_eq!(loc_attrs["no_Java_frame"], [kv(FRAME_KIND, "error")]);
        // Leaf first: the kernel frame leads its stack.
        let native = profiles[0].samples.iter().find(|x| x.values == [20_000_000]).unwrap();
        let st = &d.stack_table[native.stack_index as usize].location_indices;
        let leaf = &d.location_table[st[0] as usize];
        assert_eq!(s(d.function_table[leaf.lines[0].function_index as usize].name_strindex), "ksys_write");
        assert_eq!(st.len(), 3);
    }

    /// A frame that is a physical frame alone in one stack and hosts
    /// inlined frames in another gets a location for each (the encoder
    /// remembers only the first kind), and both decode back.
    #[test]
    fn frames_alone_and_hosting_inlined_frames() {
        let mut p = Profile::new(meta("cpu", "ns", 10_000_000));
        let main = Frame::new("A.main", FrameKind::Jit);
        let host = Frame::new("A.host", FrameKind::Jit);
        let inlined = Frame::new("A.inlined", FrameKind::Inlined);
        p.add_frames([main.clone(), host.clone()], 1, 10);
        p.add_frames([main.clone(), host.clone(), inlined.clone()], 2, 20);
        p.add_frames([main.clone(), host.clone()], 3, 30);
        p.add_frames([host.clone(), inlined.clone(), main.clone()], 4, 40);
        let bytes = encode(&[&p], &resource());
        let back = decode(&bytes).unwrap();
        let stacks = |p: &Profile| {
            let mut v: Vec<(Vec<Frame>, u64)> = p.samples().iter().map(|s| (s.stack.iter().map(|&f| p.frame(f).clone()).collect(), s.samples)).collect();
            v.sort_by(|a, b| format!("{a:?}").cmp(&format!("{b:?}")));
            v
        };
        assert_eq!(stacks(&back.profiles[0]), stacks(&p));
        let request = pb::ExportProfilesServiceRequest::decode(&bytes[..]).unwrap();
        // main and host alone; host with inlined; main again is the same location.
        assert_eq!(request.dictionary.unwrap().location_table.len(), 1 + 3);
    }

    /// Decoding gives back the model's profiles: frames (inlined ones
    /// included), states, thread names, counts and totals.
    #[test]
    fn round_trip_through_decode() {
        let (cpu, alloc) = cpu_and_alloc();
        let bytes = encode(&[&cpu, &alloc], &resource());
        let back = decode(&bytes).unwrap();
        assert_eq!(back.resource, resource());
        assert_eq!(back.profiles.len(), 2);
        // The agent's ` tid=N` is not carried.
        let rename = |p: &Profile| {
            let mut out = Profile::new(p.meta.clone());
            for s in p.samples() {
                let frames = s.stack.iter().map(|&f| {
                    let f = p.frame(f).clone();
                    if f.kind == FrameKind::Thread {
                        Frame::new(format!("[{}]", thread_name(&f.name)), f.kind)
                    } else {
                        f
                    }
                });
                out.add_frames(frames, s.samples, s.total);
            }
            out
        };
        for (orig, got) in [(&cpu, &back.profiles[0]), (&alloc, &back.profiles[1])] {
            let want = rename(orig);
            assert_eq!(got.meta.event, orig.meta.event);
            assert_eq!(got.meta.interval, orig.meta.interval);
            assert_eq!(got.meta.total_unit, orig.meta.total_unit);
            assert_eq!((got.meta.start_ns, got.meta.duration_ns), (orig.meta.start_ns, orig.meta.duration_ns));
            let stacks = |p: &Profile| {
                let mut v: Vec<(Vec<Frame>, u64, u64)> =
                    p.samples().iter().map(|s| (s.stack.iter().map(|&f| p.frame(f).clone()).collect(), s.samples, s.total)).collect();
                v.sort_by(|a, b| format!("{a:?}").cmp(&format!("{b:?}")));
                v
            };
            assert_eq!(stacks(got), stacks(&want));
        }
    }

    /// Collapsed stacks (counts only, their totals the counts again) become
    /// one profile of `samples/count`, period 1: no CPU time made up.
    #[test]
    fn counts_only_profiles_are_one_profile_of_counts() {
        let mut p = Profile::new(meta("cpu", "", 0));
        p.add_frames([Frame::new("A.main", FrameKind::Java), Frame::new("A.f", FrameKind::Java)], 7, 7);
        let req = request(&[&p], &Resource::new("s"));
        let dict = req.dictionary.as_ref().unwrap();
        let profiles = &req.resource_profiles[0].scope_profiles[0].profiles;
        assert_eq!(profiles.len(), 1);
        let name = |vt: &Option<pb::ValueType>| {
            let vt = vt.as_ref().unwrap();
            (dict.string_table[vt.type_strindex as usize].clone(), dict.string_table[vt.unit_strindex as usize].clone())
        };
        assert_eq!(name(&profiles[0].sample_type), ("samples".to_string(), "count".to_string()));
        assert_eq!(name(&profiles[0].period_type), ("samples".to_string(), "count".to_string()));
        assert_eq!((profiles[0].period, profiles[0].samples[0].values.as_slice()), (1, &[7i64][..]));
        // Read back as counts only again.
        let back = decode(&encode(&[&p], &Resource::new("s"))).unwrap().profiles;
        assert_eq!(back.len(), 1);
        assert!(back[0].meta.counts_only(), "{:?}", back[0].meta);
        assert_eq!((back[0].samples()[0].samples, back[0].samples()[0].total), (7, 7));
    }

    #[test]
    fn same_stack_and_attributes_merge_and_zero_totals_are_left_out() {
        // Two threads of one name: one OTLP sample.
        let mut p = Profile::new(meta("wall", "ns", 0));
        let f = Frame::new("A.f", FrameKind::Java);
        p.add_frames([Frame::new("[pool tid=1]", FrameKind::Thread), f.clone()], 2, 0);
        p.add_frames([Frame::new("[pool tid=2]", FrameKind::Thread), f.clone()], 3, 0);
        let req = request(&[&p], &Resource::new("s"));
        let profiles = &req.resource_profiles[0].scope_profiles[0].profiles;
        assert_eq!(profiles.len(), 1, "no totals: only the count profile");
        assert_eq!(profiles[0].samples.len(), 1);
        assert_eq!(profiles[0].samples[0].values, [5]);
        assert_eq!(profiles[0].period, 0);
        let empty = request(&[], &Resource::new("s"));
        assert!(empty.resource_profiles[0].scope_profiles[0].profiles.is_empty());
        assert_eq!(empty.dictionary.unwrap().string_table, [""]);
    }

    #[test]
    fn resource_from_opentelemetry_variables() {
        let vars = |pairs: &'static [(&'static str, &'static str)]| move |k: &str| pairs.iter().find(|(n, _)| *n == k).map(|(_, v)| v.to_string());
        assert_eq!(Resource::from_vars("java", vars(&[])), Resource::new("unknown_service:java"));
        let r = Resource::from_vars("java", vars(&[("OTEL_RESOURCE_ATTRIBUTES", "service.name=shop, team=a%2Cb%3D ,bad,=x,team=c%20d")]));
        assert_eq!(r, Resource::new("shop").with("team", "c d"));
        let r = Resource::from_vars("java", vars(&[("OTEL_RESOURCE_ATTRIBUTES", "service.name=shop,k=%zz%41"), ("OTEL_SERVICE_NAME", "cart")]));
        assert_eq!(r, Resource::new("cart").with("k", "%zzA"));
        assert_eq!(percent_decode("a%2Cb%3D"), "a,b=");
    }

    #[test]
    fn thread_names_and_bad_input() {
        assert_eq!(thread_name("[main tid=12]"), "main");
        assert_eq!(thread_name("[main]"), "main");
        assert_eq!(thread_name("[a tid=b]"), "a tid=b");
        assert_eq!(thread_name("[pool-1 tid=x tid=7]"), "pool-1 tid=x");
        assert!(decode(b"\xff\xff").unwrap_err().contains("not an OTLP"));
        // A stack index past the table is an error, not a panic.
        let (cpu, _) = cpu_and_alloc();
        let mut req = request(&[&cpu], &Resource::new("s"));
        req.resource_profiles[0].scope_profiles[0].profiles[0].samples[0].stack_index = 999;
        assert!(decode(&req.encode_to_vec()).unwrap_err().contains("stack index 999"));
        assert_eq!(parse_response(b"").unwrap(), Response::default());
        let r =
            pb::ExportProfilesServiceResponse { partial_success: Some(pb::ExportProfilesPartialSuccess { rejected_profiles: 2, error_message: "x".into() }) };
        assert_eq!(parse_response(&r.encode_to_vec()).unwrap(), Response { rejected_profiles: 2, error_message: "x".into() });
    }

    #[test]
    fn labels_gzip_and_other_profilers_names_read_back() {
        // Context labels are sample attributes, read back as the outermost
        // frames; a gzipped request reads as the plain one.
        let mut cpu = Profile::new(meta("cpu", "ns", 10_000_000));
        let main = Frame::new("Main.main", FrameKind::Interpreted);
        cpu.add_frames([crate::labels::frame("route", "/a"), Frame::new("[main]", FrameKind::Thread), main.clone()], 3, 30_000_000);
        cpu.add_frames([Frame::new("[main]", FrameKind::Thread), main.clone()], 1, 10_000_000);
        let bytes = encode(&[&cpu], &Resource::new("s"));
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
        std::io::Write::write_all(&mut gz, &bytes).unwrap();
        let gz = gz.finish().unwrap();
        for input in [&bytes, &gz] {
            let back = read(input).unwrap();
            let p = &back.profiles[0];
            let mut got: Vec<(Vec<String>, u64)> =
                p.samples().iter().map(|s| (s.stack.iter().map(|&f| p.frame(f).name.clone()).collect(), s.samples)).collect();
            got.sort();
            assert_eq!(got, vec![(vec!["[main]".into(), "Main.main".into()], 1), (vec!["[route=/a]".into(), "[main]".into(), "Main.main".into()], 3)]);
        }
        // Other profilers' sample types map to the nearest kind.
        assert_eq!(kind_of(("samples", "count"), "cpu"), (Kind::Cpu, false));
        assert_eq!(kind_of(("cpu", "nanoseconds"), "cpu"), (Kind::Cpu, true));
        assert_eq!(kind_of(("samples", "count"), ""), (Kind::Cpu, false));
        assert_eq!(kind_of(("off_cpu", "nanoseconds"), ""), (Kind::Wall, true));
        assert_eq!(kind_of(("alloc_space", "bytes"), "space"), (Kind::Alloc, true));
        assert_eq!(kind_of(("inuse_objects", "count"), ""), (Kind::Live, false));
        assert_eq!(kind_of(("contentions", "count"), "contentions"), (Kind::Lock, false));
    }

    /// A request as async-profiler's `otlp` output and its converter write
    /// them: counts (`perf_events`/`count`) of a period in `ns`, samples
    /// with values or with timestamps only, slashed and hidden-class Java
    /// names, kernel functions with `_[k]`, thread roots as attribute
    /// values. (The strings are async-profiler's, the request built here.)
    fn profiler_request(values: bool) -> pb::ExportProfilesServiceRequest {
        let strings = [
            "",
            "perf_events",
            "count",
            "ns",
            "java/lang/Thread.run",
            "Truth$$Lambda$14.0x00007f41bc000a08.run",
            "Truth.spin",
            "os::current_thread_cpu_time",
            "do_syscall_64_[k]",
            "thread.name",
            "[cpu-worker tid=28690]",
        ];
        let function = |i: i32| pb::Function { name_strindex: i, ..Default::default() };
        let location = |f: i32| pb::Location { lines: vec![pb::Line { function_index: f, ..Default::default() }], ..Default::default() };
        let dict = pb::ProfilesDictionary {
            string_table: strings.iter().map(|s| s.to_string()).collect(),
            function_table: [0, 4, 5, 6, 7, 8].into_iter().map(function).collect(),
            location_table: (0..=5).map(location).collect(),
            stack_table: vec![pb::Stack::default(), pb::Stack { location_indices: vec![5, 4, 3, 2, 1] }, pb::Stack { location_indices: vec![3, 2, 1] }],
            attribute_table: vec![
                pb::KeyValueAndUnit::default(),
                pb::KeyValueAndUnit { key_strindex: 9, value: Some(string_value("[cpu-worker tid=28690]")), unit_strindex: 0 },
            ],
            ..Default::default()
        };
        let sample = |stack: i32, n: usize| pb::Sample {
            stack_index: stack,
            attribute_indices: vec![1],
            values: if values { vec![n as i64] } else { Vec::new() },
            timestamps_unix_nano: if values { Vec::new() } else { (0..n as u64).map(|i| 1_700_000_000_000_000_000 + i).collect() },
            ..Default::default()
        };
        let profile = pb::Profile {
            sample_type: Some(pb::ValueType { type_strindex: 1, unit_strindex: 2 }),
            period_type: Some(pb::ValueType { type_strindex: 1, unit_strindex: 3 }),
            period: 10_000_000,
            samples: vec![sample(1, 3), sample(2, 4)],
            ..Default::default()
        };
        pb::ExportProfilesServiceRequest {
            resource_profiles: vec![pb::ResourceProfiles {
                scope_profiles: vec![pb::ScopeProfiles { profiles: vec![profile], ..Default::default() }],
                ..Default::default()
            }],
            dictionary: Some(dict),
        }
    }

    /// Tester's findings: async-profiler's counts of a 10 ms period read
    /// as 0 ns; samples with timestamps and no values as none; kernel
    /// functions kept their `_[k]`; Java names their slashes and per-run
    /// suffixes; a thread root given as the attribute got a second pair
    /// of brackets.
    #[test]
    fn other_profilers_counts_timestamps_and_names() {
        for values in [true, false] {
            let back = decode(&profiler_request(values).encode_to_vec()).unwrap();
            let p = &back.profiles[0];
            assert_eq!((p.sum(Counter::Samples), p.sum(Counter::Total), p.meta.interval), (7, 70_000_000, 10_000_000), "values: {values}");
            let mut lines: Vec<String> = p
                .samples()
                .iter()
                .map(|s| s.stack.iter().map(|&f| format!("{}:{:?}", p.frame(f).name, p.frame(f).kind)).collect::<Vec<_>>().join(";"))
                .collect();
            lines.sort();
            assert_eq!(
                lines,
                [
                    "[cpu-worker tid=28690]:Thread;java.lang.Thread.run:Java;Truth$$Lambda.run:Java;Truth.spin:Java",
                    "[cpu-worker tid=28690]:Thread;java.lang.Thread.run:Java;Truth$$Lambda.run:Java;Truth.spin:Java;os::current_thread_cpu_time:Java;do_syscall_64:Kernel",
                ]
            );
        }
        // oxprof's own pair (totals and counts) is not counted twice.
        let (cpu, _) = cpu_and_alloc();
        let back = decode(&encode(&[&cpu], &resource())).unwrap();
        assert_eq!((back.profiles[0].sum(Counter::Samples), back.profiles[0].sum(Counter::Total)), (cpu.sum(Counter::Samples), cpu.sum(Counter::Total)));
    }

    #[test]
    fn a_request_that_expands_without_bound_is_refused() {
        // One location of 2,000 inlined lines of a 200-byte name, used by
        // 50,000 samples: a few hundred kilobytes that would become
        // gigabytes of frames.
        let (cpu, _) = cpu_and_alloc();
        let mut req = request(&[&cpu], &Resource::new("s"));
        let d = req.dictionary.as_mut().unwrap();
        d.string_table.push("x".repeat(200));
        let name = d.string_table.len() as i32 - 1;
        d.function_table.push(pb::Function { name_strindex: name, ..pb::Function::default() });
        let f = d.function_table.len() as i32 - 1;
        d.location_table.push(pb::Location { lines: vec![pb::Line { function_index: f, line: 1, column: 0 }; 2000], ..pb::Location::default() });
        let l = d.location_table.len() as i32 - 1;
        d.stack_table.push(pb::Stack { location_indices: vec![l] });
        let st = d.stack_table.len() as i32 - 1;
        let p = &mut req.resource_profiles[0].scope_profiles[0].profiles[0];
        p.samples = (0..50_000).map(|i| pb::Sample { stack_index: st, values: vec![i], ..pb::Sample::default() }).collect();
        let err = decode(&req.encode_to_vec()).unwrap_err();
        assert!(err.contains("expands to more than"), "{err}");
    }
}

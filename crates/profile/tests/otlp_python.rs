//! The OTLP payload of a real recording read by the official
//! `opentelemetry-proto` Python package: a small Java program (a spinning
//! thread and an allocating one) runs under the JDK's own flight recorder,
//! oxprof's JFR reader turns the recording into CPU and allocation
//! profiles, and Python parses the encoded `ExportProfilesServiceRequest`,
//! checks every dictionary index and zero entry, resolves the stacks and
//! prints a JSON summary that must match the model.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;

use oxprof_profile::convert::{self, Options};
use oxprof_profile::otlp::{self, Resource};
use oxprof_profile::{jfr_read, Counter, FrameKind, Profile};

/// The pinned package the test decodes with (also in scripts/test.sh).
const PACKAGE: &str = "opentelemetry-proto==1.45.2";

const PROGRAM: &str = r#"
public class OtlpHot {
    static volatile long sink;
    static volatile Object keep;

    static long spin(long n) {
        long x = n;
        for (int i = 0; i < 200_000; i++) {
            x = x * 6364136223846793005L + 1442695040888963407L;
            x ^= (x >>> 17);
        }
        return x;
    }

    static void churn() {
        for (int i = 0; i < 64; i++) {
            keep = new byte[1024 + (i & 7) * 4096];
        }
    }

    public static void main(String[] args) throws Exception {
        long until = System.nanoTime() + Long.parseLong(args[0]) * 1_000_000L;
        Thread spinner = new Thread(() -> {
            long x = 1;
            while (System.nanoTime() < until) {
                x = spin(x);
            }
            sink = x;
        }, "otlp-spinner");
        Thread allocator = new Thread(() -> {
            while (System.nanoTime() < until) {
                churn();
            }
        }, "otlp-allocator");
        spinner.start();
        allocator.start();
        spinner.join();
        allocator.join();
    }
}
"#;

/// Resolves the request through its dictionary and prints a summary; every
/// index out of range or non-zero entry 0 is an error (exit 1).
const SUMMARY_PY: &str = r#"
import json, sys
from opentelemetry.proto.collector.profiles.v1development import profiles_service_pb2

req = profiles_service_pb2.ExportProfilesServiceRequest()
req.ParseFromString(open(sys.argv[1], "rb").read())
d = req.dictionary

def at(table, name, i):
    if not (0 <= i < len(table)):
        sys.exit(f"{name} index {i} out of range ({len(table)})")
    return table[i]

def s(i):
    return at(d.string_table, "string", i)

def attr(i):
    a = at(d.attribute_table, "attribute", i)
    kind = a.value.WhichOneof("value")
    v = s(a.value.string_value_strindex) if kind == "string_value_strindex" else getattr(a.value, kind)
    return s(a.key_strindex), v

for name in ["mapping_table", "location_table", "function_table", "link_table", "attribute_table", "stack_table"]:
    table = getattr(d, name)
    if len(table) == 0:
        sys.exit(f"{name} is empty: entry 0 must be present")
    zero = type(table[0])()
    if name == "link_table":
        ok = not any(table[0].trace_id) and not any(table[0].span_id)
    else:
        ok = table[0] == zero
    if not ok:
        sys.exit(f"{name}[0] is not the zero value: {table[0]}")
if len(d.string_table) == 0 or d.string_table[0] != "":
    sys.exit("string_table[0] must be ''")
for f in d.function_table[1:]:
    s(f.name_strindex)
for loc in d.location_table[1:]:
    at(d.mapping_table, "mapping", loc.mapping_index)
    for ln in loc.lines:
        at(d.function_table, "function", ln.function_index)
    for a in loc.attribute_indices:
        attr(a)
for st in d.stack_table[1:]:
    for l in st.location_indices:
        at(d.location_table, "location", l)

def strings(xs):
    return len(xs) == len(set(xs))

out = {"resource": {}, "scopes": [], "profiles": [],
       "dictionary": {"strings": len(d.string_table), "functions": len(d.function_table), "locations": len(d.location_table),
                      "stacks": len(d.stack_table), "attributes": len(d.attribute_table), "strings_distinct": strings(list(d.string_table))}}
for rp in req.resource_profiles:
    for kv in rp.resource.attributes:
        out["resource"][kv.key] = {"type": kv.value.WhichOneof("value"), "value": getattr(kv.value, kv.value.WhichOneof("value"))}
    for sp in rp.scope_profiles:
        out["scopes"].append(sp.scope.name)
        for p in sp.profiles:
            summary = {
                "sample_type": s(p.sample_type.type_strindex) + "/" + s(p.sample_type.unit_strindex),
                "period_type": s(p.period_type.type_strindex) + "/" + s(p.period_type.unit_strindex),
                "period": p.period, "time_unix_nano": p.time_unix_nano, "duration_nano": p.duration_nano,
                "attributes": dict(attr(a) for a in p.attribute_indices),
                "total": 0, "samples": len(p.samples), "leaf": {}, "inclusive": {}, "threads": {}, "states": {}, "frame_types": {},
            }
            for smp in p.samples:
                v = sum(smp.values)
                summary["total"] += v
                attrs = dict(attr(a) for a in smp.attribute_indices)
                if len(attrs) != len(smp.attribute_indices):
                    sys.exit("a sample repeats an attribute key")
                t = attrs.get("thread.name")
                if t is not None:
                    summary["threads"][t] = summary["threads"].get(t, 0) + v
                st = attrs.get("oxprof.thread.state")
                if st is not None:
                    summary["states"][st] = summary["states"].get(st, 0) + v
                stack = at(d.stack_table, "stack", smp.stack_index)
                names = []
                for l in stack.location_indices:
                    loc = at(d.location_table, "location", l)
                    for a in loc.attribute_indices:
                        k, ft = attr(a)
                        if k == "profile.frame.type":
                            summary["frame_types"][ft] = summary["frame_types"].get(ft, 0) + v
                    for ln in loc.lines:
                        names.append(s(at(d.function_table, "function", ln.function_index).name_strindex))
                if names:
                    summary["leaf"][names[0]] = summary["leaf"].get(names[0], 0) + v
                for n in set(names):
                    summary["inclusive"][n] = summary["inclusive"].get(n, 0) + v
                if t == "otlp-spinner" and "OtlpHot.spin" in names:
                    summary["spin_on_spinner"] = summary.get("spin_on_spinner", 0) + v
            out["profiles"].append(summary)
print(json.dumps(out))
"#;

fn tool(name: &str) -> PathBuf {
    if let Ok(home) = std::env::var("JAVA_HOME") {
        let p = PathBuf::from(home).join("bin").join(name);
        if p.exists() {
            return p;
        }
    }
    PathBuf::from(name)
}

fn run(cmd: &mut Command, what: &str) -> String {
    let o = cmd.output().unwrap_or_else(|e| panic!("{what}: cannot run: {e}"));
    assert!(o.status.success(), "{what} failed: {}\n{}", String::from_utf8_lossy(&o.stderr), String::from_utf8_lossy(&o.stdout));
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// The package must be there: a missing decoder fails the test.
fn require_package() {
    let o = Command::new("python3").args(["-c", "import opentelemetry.proto.collector.profiles.v1development.profiles_service_pb2"]).output();
    let ok = o.as_ref().is_ok_and(|o| o.status.success());
    assert!(
        ok,
        "this test needs python3 with the official OpenTelemetry protobuf package: python3 -m pip install {PACKAGE}\n{}",
        o.map(|o| String::from_utf8_lossy(&o.stderr).into_owned()).unwrap_or_else(|e| e.to_string())
    );
}

/// Records the program for `ms` with the JDK's flight recorder.
fn record(dir: &Path, ms: u32) -> PathBuf {
    std::fs::write(dir.join("OtlpHot.java"), PROGRAM).unwrap();
    run(Command::new(tool("javac")).arg("-d").arg(dir).arg(dir.join("OtlpHot.java")), "javac");
    let jfr = dir.join("rec.jfr");
    run(
        Command::new(tool("java"))
            .arg(format!("-XX:StartFlightRecording=filename={},settings=profile", jfr.display()))
            .args(["-Xmx256m", "-cp"])
            .arg(dir)
            .args(["OtlpHot", &ms.to_string()]),
        "java",
    );
    jfr
}

/// (leaf function, inclusive function, thread, state) → value maps of a
/// model profile for a counter, as the Python summary computes them.
struct Expected {
    total: u64,
    leaf: BTreeMap<String, u64>,
    inclusive: BTreeMap<String, u64>,
    threads: BTreeMap<String, u64>,
    states: BTreeMap<String, u64>,
}

fn expected(p: &Profile, counter: Counter) -> Expected {
    let mut e = Expected { total: p.sum(counter), leaf: BTreeMap::new(), inclusive: BTreeMap::new(), threads: BTreeMap::new(), states: BTreeMap::new() };
    for s in p.samples() {
        let v = Profile::value(s, counter);
        if v == 0 {
            continue;
        }
        let frames: Vec<_> = s.stack.iter().map(|&f| p.frame(f)).collect();
        let code: Vec<_> = frames.iter().filter(|f| !matches!(f.kind, FrameKind::Thread | FrameKind::State)).collect();
        if let Some(leaf) = code.last() {
            *e.leaf.entry(leaf.name.clone()).or_default() += v;
        }
        for n in code.iter().map(|f| f.name.clone()).collect::<BTreeSet<_>>() {
            *e.inclusive.entry(n).or_default() += v;
        }
        if let Some(t) = frames.iter().find(|f| f.kind == FrameKind::Thread) {
            *e.threads.entry(t.name.trim_matches(['[', ']']).to_string()).or_default() += v;
        }
        if let Some(st) = frames.iter().find(|f| f.kind == FrameKind::State) {
            *e.states.entry(st.name.trim_matches(['[', ']']).to_string()).or_default() += v;
        }
    }
    e
}

fn map(v: &serde_like::Json) -> BTreeMap<String, u64> {
    v.as_object().iter().map(|(k, v)| (k.clone(), v.as_u64())).collect()
}

#[test]
fn the_official_python_package_reads_the_payload_of_a_real_recording() {
    require_package();
    let dir = std::env::temp_dir().join(format!("oxprof-otlp-python-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let jfr = record(&dir, 2500);
    let rec = jfr_read::read_file(&jfr, &mut |_, _| {}).unwrap();
    let opts = Options { cpu: true, alloc: true, threads: true, show_state: true, ..Options::default() };
    let profiles = convert::profiles(&rec, &opts);
    let keys: Vec<&str> = profiles.iter().map(|(k, _)| *k).collect();
    assert_eq!(keys, ["cpu", "alloc"], "the recording has CPU and allocation samples");
    let (cpu, alloc) = (&profiles[0].1, &profiles[1].1);
    assert!(cpu.sum(Counter::Samples) >= 50, "too few CPU samples to judge: {}", cpu.sum(Counter::Samples));

    let resource = Resource::new("otlp-test")
        .with("host.name", "test-host")
        .with("process.pid", 4242u32)
        .with("process.runtime.name", "OpenJDK Runtime Environment")
        .with("team", "profiling");
    let bytes = otlp::encode(&[cpu, alloc], &resource);
    let payload = dir.join("payload.pb");
    std::fs::write(&payload, &bytes).unwrap();
    let script = dir.join("summary.py");
    std::fs::write(&script, SUMMARY_PY).unwrap();
    let out = run(Command::new("python3").arg(&script).arg(&payload), "python3 summary.py");
    let json = serde_like::parse(&out);

    let res = json.get("resource");
    assert_eq!(res.get("service.name").get("value").as_str(), "otlp-test");
    assert_eq!(res.get("host.name").get("value").as_str(), "test-host");
    assert_eq!(res.get("process.pid").get("type").as_str(), "int_value");
    assert_eq!(res.get("process.pid").get("value").as_str_or_num(), "4242");
    assert_eq!(res.get("team").get("value").as_str(), "profiling");
    assert_eq!(json.get("scopes").as_array()[0].as_str(), "oxprof");
    assert_eq!(json.get("dictionary").get("strings_distinct").as_str_or_num(), "true");

    let ps = json.get("profiles").as_array();
    let types: Vec<&str> = ps.iter().map(|p| p.get("sample_type").as_str()).collect();
    assert_eq!(types, ["cpu/nanoseconds", "samples/count", "alloc_space/bytes", "alloc_objects/count"]);
    assert_eq!(ps[0].get("period_type").as_str(), "cpu/nanoseconds");
    assert_eq!(ps[0].get("period").as_u64(), cpu.meta.interval);
    assert_eq!(ps[0].get("time_unix_nano").as_u64(), cpu.meta.start_ns);
    assert_eq!(ps[0].get("duration_nano").as_u64(), cpu.meta.duration_ns);
    assert_eq!(ps[0].get("attributes").get("oxprof.event").as_str(), "cpu");
    assert_eq!(ps[2].get("period_type").as_str(), "space/bytes");

    for (p, model, counter) in
        [(&ps[0], cpu, Counter::Total), (&ps[1], cpu, Counter::Samples), (&ps[2], alloc, Counter::Total), (&ps[3], alloc, Counter::Samples)]
    {
        let what = p.get("sample_type").as_str();
        let e = expected(model, counter);
        assert_eq!(p.get("total").as_u64(), e.total, "{what}: total");
        assert_eq!(map(p.get("leaf")), e.leaf, "{what}: leaf functions");
        assert_eq!(map(p.get("inclusive")), e.inclusive, "{what}: functions in stacks");
        assert_eq!(map(p.get("threads")), e.threads, "{what}: thread.name");
        assert_eq!(map(p.get("states")), e.states, "{what}: thread states");
        assert!(map(p.get("frame_types")).contains_key("jvm"), "{what}: profile.frame.type");
    }
    // The program's truth: the spinner thread spends its time in spin,
    // the allocator allocates in churn.
    let cpu_count = &ps[1];
    let total = cpu_count.get("total").as_u64();
    let spin = cpu_count.get("spin_on_spinner").as_u64();
    assert!(spin * 3 >= total, "OtlpHot.spin on otlp-spinner has {spin} of {total} CPU samples");
    let top = map(cpu_count.get("leaf")).into_iter().max_by_key(|(_, v)| *v).unwrap();
    assert_eq!(top.0, "OtlpHot.spin", "hottest leaf");
    assert!(map(cpu_count.get("threads")).contains_key("otlp-spinner"));
    assert!(map(cpu_count.get("states")).contains_key("running"));
    assert!(map(ps[3].get("inclusive")).contains_key("OtlpHot.churn"), "allocations in churn");
    assert!(map(ps[3].get("threads")).contains_key("otlp-allocator"));

    eprintln!("payload: {} bytes raw", bytes.len());
    let _ = std::fs::remove_dir_all(&dir);
}

/// Just enough JSON for the summary (objects, arrays, strings, numbers,
/// booleans), so that the test needs no JSON crate.
mod serde_like {
    use std::collections::BTreeMap;

    #[derive(Debug)]
    pub enum Json {
        Obj(BTreeMap<String, Json>),
        Arr(Vec<Json>),
        Str(String),
        Num(String),
        Null,
    }

    static NULL: Json = Json::Null;

    impl Json {
        pub fn get(&self, k: &str) -> &Json {
            match self {
                Json::Obj(m) => m.get(k).unwrap_or(&NULL),
                _ => &NULL,
            }
        }
        pub fn as_str(&self) -> &str {
            match self {
                Json::Str(s) => s,
                other => panic!("not a string: {other:?}"),
            }
        }
        pub fn as_str_or_num(&self) -> String {
            match self {
                Json::Str(s) | Json::Num(s) => s.clone(),
                other => panic!("not a scalar: {other:?}"),
            }
        }
        pub fn as_u64(&self) -> u64 {
            match self {
                Json::Num(s) => s.parse().unwrap_or_else(|_| panic!("not an integer: {s}")),
                Json::Null => 0,
                other => panic!("not a number: {other:?}"),
            }
        }
        pub fn as_array(&self) -> &[Json] {
            match self {
                Json::Arr(v) => v,
                other => panic!("not an array: {other:?}"),
            }
        }
        pub fn as_object(&self) -> Vec<(String, &Json)> {
            match self {
                Json::Obj(m) => m.iter().map(|(k, v)| (k.clone(), v)).collect(),
                other => panic!("not an object: {other:?}"),
            }
        }
    }

    pub fn parse(s: &str) -> Json {
        let b = s.trim().as_bytes();
        let mut i = 0;
        let v = value(b, &mut i);
        assert_eq!(i, b.len(), "trailing JSON");
        v
    }

    fn ws(b: &[u8], i: &mut usize) {
        while *i < b.len() && b[*i].is_ascii_whitespace() {
            *i += 1;
        }
    }

    fn value(b: &[u8], i: &mut usize) -> Json {
        ws(b, i);
        match b[*i] {
            b'{' => {
                *i += 1;
                let mut m = BTreeMap::new();
                loop {
                    ws(b, i);
                    if b[*i] == b'}' {
                        *i += 1;
                        return Json::Obj(m);
                    }
                    let Json::Str(k) = value(b, i) else { panic!("object key") };
                    ws(b, i);
                    assert_eq!(b[*i], b':');
                    *i += 1;
                    m.insert(k, value(b, i));
                    ws(b, i);
                    if b[*i] == b',' {
                        *i += 1;
                    }
                }
            }
            b'[' => {
                *i += 1;
                let mut v = Vec::new();
                loop {
                    ws(b, i);
                    if b[*i] == b']' {
                        *i += 1;
                        return Json::Arr(v);
                    }
                    v.push(value(b, i));
                    ws(b, i);
                    if b[*i] == b',' {
                        *i += 1;
                    }
                }
            }
            b'"' => {
                *i += 1;
                let mut out = String::new();
                while b[*i] != b'"' {
                    if b[*i] == b'\\' {
                        *i += 1;
                        match b[*i] {
                            b'n' => out.push('\n'),
                            b't' => out.push('\t'),
                            b'u' => {
                                let code = u32::from_str_radix(std::str::from_utf8(&b[*i + 1..*i + 5]).unwrap(), 16).unwrap();
                                out.push(char::from_u32(code).unwrap_or('\u{fffd}'));
                                *i += 4;
                            }
                            c => out.push(c as char),
                        }
                        *i += 1;
                    } else {
                        let start = *i;
                        while b[*i] != b'"' && b[*i] != b'\\' {
                            *i += 1;
                        }
                        out.push_str(std::str::from_utf8(&b[start..*i]).unwrap());
                    }
                }
                *i += 1;
                Json::Str(out)
            }
            _ => {
                let start = *i;
                while *i < b.len() && !matches!(b[*i], b',' | b'}' | b']') && !b[*i].is_ascii_whitespace() {
                    *i += 1;
                }
                match &b[start..*i] {
                    b"null" => Json::Null,
                    t => Json::Num(String::from_utf8_lossy(t).into_owned()),
                }
            }
        }
    }
}

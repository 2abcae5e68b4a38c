//! The metadata event: the type system a JFR chunk declares before readers
//! can decode anything in it.
//!
//! Readers (the JDK's `jfr` tool, `jdk.jfr.consumer.RecordingFile`, JMC)
//! know nothing in advance: every event, constant-pool type and annotation
//! used in a chunk is declared here with its numeric id, and fields are
//! decoded in the declared order. Type and field names follow the JDK's own
//! definitions (`jdk.ExecutionSample`, `jdk.types.StackFrame`, ...) so tools
//! that look for them by name find them; annotations (`jdk.jfr.Label`,
//! `jdk.jfr.Timestamp`, ...) give readers units and display names.

use std::collections::HashMap;

use super::encoding::Buf;

/// Type ids. 0 and 1 are the metadata and checkpoint events.
pub mod id {
    pub const LONG: u64 = 20;
    pub const INT: u64 = 21;
    pub const BOOLEAN: u64 = 22;
    pub const STRING: u64 = 23;
    pub const SHORT: u64 = 24;
    pub const DOUBLE: u64 = 25;

    pub const THREAD: u64 = 30;
    pub const THREAD_GROUP: u64 = 31;
    pub const CLASS: u64 = 32;
    pub const CLASS_LOADER: u64 = 33;
    pub const METHOD: u64 = 34;
    pub const SYMBOL: u64 = 35;
    pub const THREAD_STATE: u64 = 36;
    pub const MODULE: u64 = 37;
    pub const PACKAGE: u64 = 38;
    pub const STACK_TRACE: u64 = 39;
    pub const FRAME_TYPE: u64 = 40;
    pub const STACK_FRAME: u64 = 41;
    pub const OLD_OBJECT: u64 = 42;
    pub const OLD_OBJECT_GC_ROOT: u64 = 43;
    pub const OLD_OBJECT_ROOT_SYSTEM: u64 = 44;
    pub const OLD_OBJECT_ROOT_TYPE: u64 = 45;
    pub const REFERENCE: u64 = 46;
    pub const OLD_OBJECT_ARRAY: u64 = 47;
    pub const OLD_OBJECT_FIELD: u64 = 48;
    pub const VM_OPERATION_TYPE: u64 = 49;
    /// `oxprof.types.ContextLabels`: a sample's context labels (pooled), as
    /// one text (`crate::labels::encode_set`).
    pub const CONTEXT_LABELS: u64 = 50;

    pub const EXECUTION_SAMPLE: u64 = 101;
    pub const OBJECT_ALLOCATION_SAMPLE: u64 = 102;
    pub const OLD_OBJECT_SAMPLE: u64 = 103;
    pub const ACTIVE_SETTING: u64 = 104;
    pub const ACTIVE_RECORDING: u64 = 105;
    pub const NATIVE_METHOD_SAMPLE: u64 = 106;
    /// `oxprof.WallClockSample`, oxprof's own event.
    pub const WALL_CLOCK_SAMPLE: u64 = 107;
    pub const JAVA_MONITOR_ENTER: u64 = 108;
    pub const THREAD_PARK: u64 = 109;
    pub const SAFEPOINT_BEGIN: u64 = 110;
    pub const SAFEPOINT_STATE_SYNCHRONIZATION: u64 = 111;
    pub const SAFEPOINT_END: u64 = 112;
    pub const EXECUTE_VM_OPERATION: u64 = 113;
    /// `oxprof.LiveSite`, oxprof's own event: one leak-report site.
    pub const LIVE_SITE: u64 = 114;
    /// `oxprof.Span`, oxprof's own event: an interval the application timed
    /// (`OxProfiler.span`).
    pub const SPAN: u64 = 115;
    /// `oxprof.LiveReport`, oxprof's own event: what a leak report says of
    /// itself (how long, how many GCs, sampling), beside its sites.
    pub const LIVE_REPORT: u64 = 116;

    pub const LABEL: u64 = 200;
    pub const DESCRIPTION: u64 = 201;
    pub const CATEGORY: u64 = 202;
    pub const TIMESTAMP: u64 = 203;
    pub const TIMESPAN: u64 = 204;
    pub const DATA_AMOUNT: u64 = 205;
    pub const UNSIGNED: u64 = 206;
    pub const MEMORY_ADDRESS: u64 = 207;
    pub const CONTENT_TYPE: u64 = 208;
    pub const NAME: u64 = 209;
    pub const RELATIONAL: u64 = 210;
    /// `jdk.types.SafepointId`: the relation joining the safepoint events.
    pub const SAFEPOINT_ID: u64 = 211;
    pub const TRANSITION_FROM: u64 = 212;
}

/// One node of the metadata element tree.
struct Element {
    name: &'static str,
    attrs: Vec<(String, String)>,
    children: Vec<Element>,
}

impl Element {
    fn new(name: &'static str) -> Element {
        Element { name, attrs: Vec::new(), children: Vec::new() }
    }

    fn attr(mut self, key: &str, value: impl ToString) -> Element {
        self.attrs.push((key.to_string(), value.to_string()));
        self
    }

    fn child(mut self, e: Element) -> Element {
        self.children.push(e);
        self
    }
}

/// An annotation on a type or field.
fn ann(type_id: u64, value: Option<&str>) -> Element {
    let e = Element::new("annotation").attr("class", type_id);
    match value {
        Some(v) => e.attr("value", v),
        None => e,
    }
}

fn label(v: &str) -> Element {
    ann(id::LABEL, Some(v))
}

fn description(v: &str) -> Element {
    ann(id::DESCRIPTION, Some(v))
}

fn category(path: &[&str]) -> Element {
    let mut e = Element::new("annotation").attr("class", id::CATEGORY);
    for (i, p) in path.iter().enumerate() {
        e = e.attr(&format!("value-{i}"), p);
    }
    e
}

/// A field: name, type, whether it is a constant-pool reference, whether
/// it is an array, and its annotations.
struct F(&'static str, u64, bool, bool, Vec<Element>);

fn field(f: F) -> Element {
    let F(name, type_id, cp, array, anns) = f;
    let mut e = Element::new("field").attr("name", name).attr("class", type_id);
    if cp {
        e = e.attr("constantPool", "true");
    }
    if array {
        e = e.attr("dimension", "1");
    }
    e.children = anns;
    e
}

fn class(type_id: u64, name: &str, super_type: Option<&str>, simple: bool, fields: Vec<F>, anns: Vec<Element>) -> Element {
    let mut e = Element::new("class").attr("name", name);
    if let Some(s) = super_type {
        e = e.attr("superType", s);
    }
    if simple {
        e = e.attr("simpleType", "true");
    }
    e = e.attr("id", type_id);
    for f in fields {
        e = e.child(field(f));
    }
    for a in anns {
        e = e.child(a);
    }
    e
}

fn annotation_type(type_id: u64, name: &str, value: Option<bool>, anns: Vec<Element>) -> Element {
    let fields = match value {
        Some(array) => vec![F("value", id::STRING, false, array, vec![])],
        None => vec![],
    };
    class(type_id, name, Some("java.lang.annotation.Annotation"), false, fields, anns)
}

fn event(type_id: u64, name: &str, duration: bool, fields: Vec<F>, anns: Vec<Element>) -> Element {
    let mut all = vec![F("startTime", id::LONG, false, false, vec![label("Start Time"), ann(id::TIMESTAMP, Some("TICKS"))])];
    if duration {
        all.push(F("duration", id::LONG, false, false, vec![label("Duration"), ann(id::TIMESPAN, Some("TICKS"))]));
    }
    all.extend(fields);
    class(type_id, name, Some("jdk.jfr.Event"), false, all, anns)
}

fn event_thread() -> F {
    F("eventThread", id::THREAD, true, false, vec![label("Event Thread"), description("Thread in which event was committed in")])
}

/// `safepointId`, the key the JDK's safepoint events share (an unsigned
/// long with the `jdk.types.SafepointId` relation).
fn safepoint_id(about: Option<&str>) -> F {
    let mut anns = vec![ann(id::UNSIGNED, None), ann(id::SAFEPOINT_ID, None), label("Safepoint Identifier")];
    anns.extend(about.map(description));
    F("safepointId", id::LONG, false, false, anns)
}

/// An int field with a label and a description.
fn count(name: &'static str, label_text: &str, description_text: &str) -> F {
    F(name, id::INT, false, false, vec![label(label_text), description(description_text)])
}

fn stack_trace() -> F {
    F("stackTrace", id::STACK_TRACE, true, false, vec![label("Stack Trace")])
}

/// `labels`, the context labels of a sample (null when it has none), last
/// field of every sample event oxprof writes.
fn context_labels() -> F {
    F(
        "labels",
        id::CONTEXT_LABELS,
        true,
        false,
        vec![label("Context Labels"), description("Labels the application set on the thread (OxProfiler.context) when the sample was taken")],
    )
}

fn types() -> Vec<Element> {
    use id::*;
    let content = || ann(CONTENT_TYPE, None);
    vec![
        class(LONG, "long", None, false, vec![], vec![]),
        class(INT, "int", None, false, vec![], vec![]),
        class(BOOLEAN, "boolean", None, false, vec![], vec![]),
        class(STRING, "java.lang.String", None, false, vec![], vec![]),
        class(SHORT, "short", None, false, vec![], vec![]),
        class(DOUBLE, "double", None, false, vec![], vec![]),
        annotation_type(CONTENT_TYPE, "jdk.jfr.ContentType", None, vec![]),
        annotation_type(LABEL, "jdk.jfr.Label", Some(false), vec![]),
        annotation_type(DESCRIPTION, "jdk.jfr.Description", Some(false), vec![]),
        annotation_type(NAME, "jdk.jfr.Name", Some(false), vec![]),
        annotation_type(CATEGORY, "jdk.jfr.Category", Some(true), vec![]),
        annotation_type(TIMESTAMP, "jdk.jfr.Timestamp", Some(false), vec![content(), label("Timestamp")]),
        annotation_type(TIMESPAN, "jdk.jfr.Timespan", Some(false), vec![content(), label("Timespan")]),
        annotation_type(DATA_AMOUNT, "jdk.jfr.DataAmount", Some(false), vec![content(), label("Data Amount")]),
        annotation_type(UNSIGNED, "jdk.jfr.Unsigned", None, vec![content(), label("Unsigned Value")]),
        annotation_type(MEMORY_ADDRESS, "jdk.jfr.MemoryAddress", None, vec![content(), label("Memory Address")]),
        annotation_type(RELATIONAL, "jdk.jfr.Relational", None, vec![label("Relation")]),
        annotation_type(SAFEPOINT_ID, "jdk.types.SafepointId", None, vec![ann(RELATIONAL, None)]),
        annotation_type(TRANSITION_FROM, "jdk.jfr.TransitionFrom", None, vec![label("Transition From")]),
        class(
            THREAD,
            "java.lang.Thread",
            None,
            false,
            vec![
                F("osName", STRING, false, false, vec![label("OS Thread Name")]),
                F("osThreadId", LONG, false, false, vec![label("OS Thread Id")]),
                F("javaName", STRING, false, false, vec![label("Java Thread Name")]),
                F("javaThreadId", LONG, false, false, vec![label("Java Thread Id")]),
                F("group", THREAD_GROUP, true, false, vec![label("Java Thread Group")]),
            ],
            vec![label("Thread")],
        ),
        class(
            THREAD_GROUP,
            "jdk.types.ThreadGroup",
            None,
            false,
            vec![F("parent", THREAD_GROUP, true, false, vec![label("Parent")]), F("name", STRING, false, false, vec![label("Name")])],
            vec![label("Thread Group")],
        ),
        class(
            CLASS,
            "java.lang.Class",
            None,
            false,
            vec![
                F("classLoader", CLASS_LOADER, true, false, vec![label("Class Loader")]),
                F("name", SYMBOL, true, false, vec![label("Name")]),
                F("package", PACKAGE, true, false, vec![label("Package")]),
                F("modifiers", INT, false, false, vec![label("Access Modifiers")]),
                F("hidden", BOOLEAN, false, false, vec![label("Hidden")]),
            ],
            vec![label("Java Class")],
        ),
        class(
            CLASS_LOADER,
            "jdk.types.ClassLoader",
            None,
            false,
            vec![F("type", CLASS, true, false, vec![label("Type")]), F("name", SYMBOL, true, false, vec![label("Name")])],
            vec![label("Java Class Loader")],
        ),
        class(
            METHOD,
            "jdk.types.Method",
            None,
            false,
            vec![
                F("type", CLASS, true, false, vec![label("Type")]),
                F("name", SYMBOL, true, false, vec![label("Name")]),
                F("descriptor", SYMBOL, true, false, vec![label("Descriptor")]),
                F("modifiers", INT, false, false, vec![label("Access Modifiers")]),
                F("hidden", BOOLEAN, false, false, vec![label("Hidden")]),
            ],
            vec![label("Java Method")],
        ),
        class(SYMBOL, "jdk.types.Symbol", None, true, vec![F("string", STRING, false, false, vec![label("String")])], vec![label("Symbol")]),
        class(THREAD_STATE, "jdk.types.ThreadState", None, true, vec![F("name", STRING, false, false, vec![label("Name")])], vec![label("Java Thread State")]),
        class(
            MODULE,
            "jdk.types.Module",
            None,
            false,
            vec![
                F("name", SYMBOL, true, false, vec![label("Name")]),
                F("version", SYMBOL, true, false, vec![label("Version")]),
                F("location", SYMBOL, true, false, vec![label("Location")]),
                F("classLoader", CLASS_LOADER, true, false, vec![label("Class Loader")]),
            ],
            vec![label("Module")],
        ),
        class(
            PACKAGE,
            "jdk.types.Package",
            None,
            false,
            vec![
                F("name", SYMBOL, true, false, vec![label("Name")]),
                F("module", MODULE, true, false, vec![label("Module")]),
                F("exported", BOOLEAN, false, false, vec![label("Exported")]),
            ],
            vec![label("Package")],
        ),
        class(
            STACK_TRACE,
            "jdk.types.StackTrace",
            None,
            false,
            vec![F("truncated", BOOLEAN, false, false, vec![label("Truncated")]), F("frames", STACK_FRAME, false, true, vec![label("Stack Frames")])],
            vec![label("Stacktrace")],
        ),
        class(
            FRAME_TYPE,
            "jdk.types.FrameType",
            None,
            true,
            vec![F("description", STRING, false, false, vec![label("Description")])],
            vec![label("Frame type")],
        ),
        class(
            STACK_FRAME,
            "jdk.types.StackFrame",
            None,
            false,
            vec![
                F("method", METHOD, true, false, vec![label("Java Method")]),
                F("lineNumber", INT, false, false, vec![label("Line Number")]),
                F("bytecodeIndex", INT, false, false, vec![label("Bytecode Index")]),
                F("type", FRAME_TYPE, true, false, vec![label("Frame Type")]),
            ],
            vec![],
        ),
        class(
            OLD_OBJECT,
            "jdk.types.OldObject",
            None,
            false,
            vec![
                F("address", LONG, false, false, vec![ann(UNSIGNED, None), ann(MEMORY_ADDRESS, None), label("Memory Address")]),
                F("type", CLASS, true, false, vec![label("Java Class")]),
                F("description", STRING, false, false, vec![label("Object Description")]),
                F("referrer", REFERENCE, true, false, vec![label("Referrer Object")]),
            ],
            vec![label("Old Object")],
        ),
        class(
            REFERENCE,
            "jdk.types.Reference",
            None,
            false,
            vec![
                F("array", OLD_OBJECT_ARRAY, true, false, vec![label("Array Information")]),
                F("field", OLD_OBJECT_FIELD, true, false, vec![label("Field Information")]),
                F("object", OLD_OBJECT, true, false, vec![label("Object")]),
                F("skip", INT, false, false, vec![label("Skip Value")]),
            ],
            vec![label("Reference")],
        ),
        class(
            OLD_OBJECT_ARRAY,
            "jdk.types.OldObjectArray",
            None,
            false,
            vec![F("size", INT, false, false, vec![label("Array Size")]), F("index", INT, false, false, vec![label("Index")])],
            vec![label("Old Object Array")],
        ),
        class(
            OLD_OBJECT_FIELD,
            "jdk.types.OldObjectField",
            None,
            false,
            vec![F("name", STRING, false, false, vec![label("Field")]), F("modifiers", SHORT, false, false, vec![label("Field Modifiers")])],
            vec![label("Old Object Field")],
        ),
        class(
            OLD_OBJECT_GC_ROOT,
            "jdk.types.OldObjectGcRoot",
            None,
            false,
            vec![
                F("description", STRING, false, false, vec![label("Root Description")]),
                F("system", OLD_OBJECT_ROOT_SYSTEM, true, false, vec![label("System")]),
                F("type", OLD_OBJECT_ROOT_TYPE, true, false, vec![label("Type")]),
            ],
            vec![label("GC Root")],
        ),
        // A simple type (as jdk.types.Symbol): `jfr print` shows its text.
        // Arrays of objects would say more, but the JDK's tool cannot print
        // them (a NullPointerException in its PrettyWriter).
        class(
            CONTEXT_LABELS,
            "oxprof.types.ContextLabels",
            None,
            true,
            vec![F("text", STRING, false, false, vec![label("Text"), description("key=value, key=value (in values, \\\\ and \\, stand for \\ and ,)")])],
            vec![label("Context Labels")],
        ),
        class(
            OLD_OBJECT_ROOT_SYSTEM,
            "jdk.types.OldObjectRootSystem",
            None,
            true,
            vec![F("system", STRING, false, false, vec![label("System")])],
            vec![label("GC Root System")],
        ),
        class(
            OLD_OBJECT_ROOT_TYPE,
            "jdk.types.OldObjectRootType",
            None,
            true,
            vec![F("type", STRING, false, false, vec![label("Type")])],
            vec![label("GC Root Type")],
        ),
        event(
            EXECUTION_SAMPLE,
            "jdk.ExecutionSample",
            false,
            vec![
                F("sampledThread", THREAD, true, false, vec![label("Thread")]),
                F("stackTrace", STACK_TRACE, true, false, vec![label("Stack Trace")]),
                F("state", THREAD_STATE, true, false, vec![label("Thread State")]),
                context_labels(),
            ],
            vec![category(&["Java Virtual Machine", "Profiling"]), label("Method Profiling Sample"), description("Snapshot of a threads state")],
        ),
        event(
            NATIVE_METHOD_SAMPLE,
            "jdk.NativeMethodSample",
            false,
            vec![
                F("sampledThread", THREAD, true, false, vec![label("Thread")]),
                F("stackTrace", STACK_TRACE, true, false, vec![label("Stack Trace")]),
                F("state", THREAD_STATE, true, false, vec![label("Thread State")]),
                context_labels(),
            ],
            vec![
                category(&["Java Virtual Machine", "Profiling"]),
                label("Method Profiling Sample Native"),
                description("Snapshot of a threads state when in native"),
            ],
        ),
        event(
            WALL_CLOCK_SAMPLE,
            "oxprof.WallClockSample",
            false,
            vec![
                F("sampledThread", THREAD, true, false, vec![label("Thread")]),
                F("stackTrace", STACK_TRACE, true, false, vec![label("Stack Trace")]),
                F("state", THREAD_STATE, true, false, vec![label("Thread State")]),
                F("weight", LONG, false, false, vec![ann(TIMESPAN, Some("NANOSECONDS")), label("Wall Time")]),
                context_labels(),
            ],
            vec![
                category(&["Java Virtual Machine", "Profiling"]),
                label("Wall-Clock Sample"),
                description("A thread sampled whatever it was doing, standing for the wall time since its previous sample"),
            ],
        ),
        event(
            OBJECT_ALLOCATION_SAMPLE,
            "jdk.ObjectAllocationSample",
            false,
            vec![
                event_thread(),
                stack_trace(),
                F("objectClass", CLASS, true, false, vec![label("Object Class")]),
                F("weight", LONG, false, false, vec![ann(DATA_AMOUNT, Some("BYTES")), label("Sample Weight")]),
                context_labels(),
            ],
            vec![category(&["Java Application"]), label("Object Allocation Sample")],
        ),
        event(
            OLD_OBJECT_SAMPLE,
            "jdk.OldObjectSample",
            true,
            vec![
                event_thread(),
                stack_trace(),
                F("allocationTime", LONG, false, false, vec![ann(TIMESTAMP, Some("TICKS")), label("Allocation Time")]),
                F("objectAge", LONG, false, false, vec![ann(TIMESPAN, Some("TICKS")), label("Object Age")]),
                F("lastKnownHeapUsage", LONG, false, false, vec![ann(UNSIGNED, None), ann(DATA_AMOUNT, Some("BYTES")), label("Last Known Heap Usage")]),
                F("object", OLD_OBJECT, true, false, vec![label("Object")]),
                F("arrayElements", INT, false, false, vec![label("Array Elements")]),
                F("root", OLD_OBJECT_GC_ROOT, true, false, vec![label("GC Root")]),
                F("objectSize", LONG, false, false, vec![ann(DATA_AMOUNT, Some("BYTES")), label("Object Size")]),
            ],
            vec![category(&["Java Virtual Machine", "Profiling"]), label("Old Object Sample"), description("A potential memory leak")],
        ),
        event(
            LIVE_SITE,
            "oxprof.LiveSite",
            false,
            vec![
                event_thread(),
                stack_trace(),
                F("objectClass", CLASS, true, false, vec![label("Object Class")]),
                F(
                    "liveBytes",
                    DOUBLE,
                    false,
                    false,
                    vec![ann(DATA_AMOUNT, Some("BYTES")), label("Live Bytes"), description("Estimated live bytes of the site")],
                ),
                F("liveObjects", DOUBLE, false, false, vec![label("Live Objects"), description("Estimated live objects of the site")]),
                F("samples", LONG, false, false, vec![label("Samples"), description("Tracked (sampled) live objects behind the estimates")]),
                F(
                    "meanAge",
                    LONG,
                    false,
                    false,
                    vec![ann(TIMESPAN, Some("NANOSECONDS")), label("Mean Age"), description("Mean age of the tracked live objects")],
                ),
                F("meanGcsSurvived", DOUBLE, false, false, vec![label("Mean GCs Survived")]),
                F("oldShare", DOUBLE, false, false, vec![label("Old Share"), description("Share of tracked live objects that survived at least 2 GCs (0..1)")]),
                F(
                    "growth",
                    STRING,
                    false,
                    false,
                    vec![
                        label("Growth Series"),
                        description("Live bytes after each GC, oldest first: secs:bytes;secs:bytes (seconds since the recording started)"),
                    ],
                ),
                F(
                    "pathToRoot",
                    STRING,
                    false,
                    false,
                    vec![label("Path To GC Root"), description("Reference chain from a GC root to one instance, root first, one step a line")],
                ),
                F(
                    "score",
                    DOUBLE,
                    false,
                    false,
                    vec![ann(DATA_AMOUNT, Some("BYTES")), label("Leak Score"), description("Recent growth x steadiness (R^2) x old share; 0 when not growing")],
                ),
            ],
            vec![
                category(&["Java Virtual Machine", "Profiling"]),
                label("Live Allocation Site"),
                description("oxprof's live objects of one allocation site at a leak report, with the inputs of its leak score"),
            ],
        ),
        event(
            LIVE_REPORT,
            "oxprof.LiveReport",
            false,
            vec![
                event_thread(),
                F(
                    "recordingDuration",
                    LONG,
                    false,
                    false,
                    vec![ann(TIMESPAN, Some("NANOSECONDS")), label("Recording Duration"), description("How long live objects had been tracked at this report")],
                ),
                F("gcs", LONG, false, false, vec![label("GCs"), description("Garbage collections seen while tracking")]),
                F("forcedGc", BOOLEAN, false, false, vec![label("Forced GC"), description("Whether a full GC was forced right before the report")]),
                F("noGcReason", STRING, false, false, vec![label("No GC Reason"), description("Why no GC was forced although one was asked for")]),
                F(
                    "interval",
                    LONG,
                    false,
                    false,
                    vec![ann(DATA_AMOUNT, Some("BYTES")), label("Sampling Interval"), description("The JVM's mean allocation sampling interval")],
                ),
                F(
                    "effectiveInterval",
                    LONG,
                    false,
                    false,
                    vec![ann(DATA_AMOUNT, Some("BYTES")), label("Effective Interval"), description("The mean interval after thinning to fit the budget")],
                ),
                F("thinnings", LONG, false, false, vec![label("Thinnings"), description("Times the tracked objects were thinned to fit the budget")]),
                F("budget", LONG, false, false, vec![ann(DATA_AMOUNT, Some("BYTES")), label("Budget"), description("Memory budget of the tracked objects")]),
                F(
                    "trackingMemory",
                    LONG,
                    false,
                    false,
                    vec![ann(DATA_AMOUNT, Some("BYTES")), label("Tracking Memory"), description("Memory the tracked objects used")],
                ),
                F("trackedSamples", LONG, false, false, vec![label("Tracked Samples"), description("Live sampled objects tracked at the report")]),
                F(
                    "gcRootsNote",
                    STRING,
                    false,
                    false,
                    vec![label("GC Roots Note"), description("Why paths to GC roots are missing, when they were asked for")],
                ),
                F(
                    "leftOutBytes",
                    LONG,
                    false,
                    false,
                    vec![
                        ann(DATA_AMOUNT, Some("BYTES")),
                        label("Left Out Bytes"),
                        description("Estimated bytes of tracked objects allocated since the last GC, which no GC has judged yet: left out of the sites"),
                    ],
                ),
                F(
                    "leftOutSamples",
                    LONG,
                    false,
                    false,
                    vec![label("Left Out Samples"), description("Tracked samples allocated since the last GC, left out of the sites")],
                ),
            ],
            vec![
                category(&["Java Virtual Machine", "Profiling"]),
                label("Live Objects Report"),
                description("oxprof's leak report as a whole: the facts its oxprof.LiveSite events of the same time were computed under"),
            ],
        ),
        event(
            SPAN,
            "oxprof.Span",
            true,
            vec![event_thread(), F("tag", STRING, false, false, vec![label("Tag"), description("What the application named the interval")]), context_labels()],
            vec![
                category(&["Java Application"]),
                label("Span"),
                description("An interval the application timed with OxProfiler.span, on the thread that closed it"),
            ],
        ),
        event(
            JAVA_MONITOR_ENTER,
            "jdk.JavaMonitorEnter",
            true,
            vec![
                event_thread(),
                stack_trace(),
                F("monitorClass", CLASS, true, false, vec![label("Monitor Class")]),
                F("previousOwner", THREAD, true, false, vec![label("Previous Monitor Owner")]),
                F("address", LONG, false, false, vec![ann(MEMORY_ADDRESS, None), label("Monitor Address")]),
                context_labels(),
            ],
            vec![category(&["Java Application"]), label("Java Monitor Blocked")],
        ),
        event(
            THREAD_PARK,
            "jdk.ThreadPark",
            true,
            vec![
                event_thread(),
                stack_trace(),
                F("parkedClass", CLASS, true, false, vec![label("Class Parked On")]),
                F("timeout", LONG, false, false, vec![ann(TIMESPAN, Some("NANOSECONDS")), label("Park Timeout")]),
                F("until", LONG, false, false, vec![ann(TIMESTAMP, Some("MILLISECONDS_SINCE_EPOCH")), label("Park Until")]),
                F("address", LONG, false, false, vec![ann(MEMORY_ADDRESS, None), label("Address of Object Parked")]),
                context_labels(),
            ],
            vec![category(&["Java Application"]), label("Java Thread Park")],
        ),
        class(
            VM_OPERATION_TYPE,
            "jdk.types.VMOperationType",
            None,
            true,
            vec![F("type", STRING, false, false, vec![label("Type")])],
            vec![label("VM Operation Type")],
        ),
        // The JDK's safepoint events (JDK 17's definitions, field for field).
        event(
            SAFEPOINT_BEGIN,
            "jdk.SafepointBegin",
            true,
            vec![
                event_thread(),
                safepoint_id(None),
                count("totalThreadCount", "Total Threads", "The total number of threads at the start of safe point"),
                count("jniCriticalThreadCount", "JNI Critical Threads", "The number of threads in JNI critical sections"),
            ],
            vec![category(&["Java Virtual Machine", "Runtime", "Safepoint"]), label("Safepoint Begin"), description("Safepointing begin")],
        ),
        event(
            SAFEPOINT_STATE_SYNCHRONIZATION,
            "jdk.SafepointStateSynchronization",
            true,
            vec![
                event_thread(),
                safepoint_id(None),
                count("initialThreadCount", "Initial Threads", "The number of threads running at the beginning of state check"),
                count("runningThreadCount", "Running Threads", "The number of threads still running"),
                count("iterations", "Iterations", "Number of state check iterations"),
            ],
            vec![
                category(&["Java Virtual Machine", "Runtime", "Safepoint"]),
                label("Safepoint State Synchronization"),
                description("Synchronize run state of threads"),
            ],
        ),
        event(
            SAFEPOINT_END,
            "jdk.SafepointEnd",
            true,
            vec![event_thread(), safepoint_id(None)],
            vec![category(&["Java Virtual Machine", "Runtime", "Safepoint"]), label("Safepoint End"), description("Safepointing end")],
        ),
        event(
            EXECUTE_VM_OPERATION,
            "jdk.ExecuteVMOperation",
            true,
            vec![
                event_thread(),
                F("operation", VM_OPERATION_TYPE, true, false, vec![label("Operation")]),
                F("safepoint", BOOLEAN, false, false, vec![label("At Safepoint"), description("If the operation occured at a safepoint")]),
                F(
                    "blocking",
                    BOOLEAN,
                    false,
                    false,
                    vec![label("Caller Blocked"), description("If the calling thread was blocked until the operation was complete")],
                ),
                F(
                    "caller",
                    THREAD,
                    true,
                    false,
                    vec![
                        label("Caller"),
                        description("Thread requesting operation. If non-blocking, will be set to 0 indicating thread is unknown"),
                        ann(TRANSITION_FROM, None),
                    ],
                ),
                safepoint_id(Some("The safepoint (if any) under which this operation was completed")),
            ],
            vec![category(&["Java Virtual Machine", "Runtime"]), label("VM Operation"), description("Execution of a VM Operation")],
        ),
        event(
            ACTIVE_SETTING,
            "jdk.ActiveSetting",
            true,
            vec![
                event_thread(),
                stack_trace(),
                F("id", LONG, false, false, vec![label("Event Id")]),
                F("name", STRING, false, false, vec![label("Setting Name")]),
                F("value", STRING, false, false, vec![label("Setting Value")]),
            ],
            vec![label("Recording Setting"), category(&["Flight Recorder"])],
        ),
        event(
            ACTIVE_RECORDING,
            "jdk.ActiveRecording",
            true,
            vec![
                event_thread(),
                stack_trace(),
                F("id", LONG, false, false, vec![label("Id")]),
                F("name", STRING, false, false, vec![label("Name")]),
                F("destination", STRING, false, false, vec![label("Destination")]),
                F("maxAge", LONG, false, false, vec![label("Max Age"), ann(TIMESPAN, Some("MILLISECONDS"))]),
                F("maxSize", LONG, false, false, vec![label("Max Size"), ann(DATA_AMOUNT, Some("BYTES"))]),
                F("recordingStart", LONG, false, false, vec![label("Start Time"), ann(TIMESTAMP, Some("MILLISECONDS_SINCE_EPOCH"))]),
                F("recordingDuration", LONG, false, false, vec![label("Recording Duration"), ann(TIMESPAN, Some("MILLISECONDS"))]),
            ],
            vec![label("Flight Recording"), category(&["Flight Recorder"])],
        ),
    ]
}

fn collect_strings<'a>(e: &'a Element, pool: &mut Vec<&'a str>, index: &mut HashMap<&'a str, usize>) {
    let mut add = |s: &'a str| {
        if !index.contains_key(s) {
            index.insert(s, pool.len());
            pool.push(s);
        }
    };
    add(e.name);
    for (k, v) in &e.attrs {
        add(k);
        add(v);
    }
    for c in &e.children {
        collect_strings(c, pool, index);
    }
}

fn write_element(e: &Element, index: &HashMap<&str, usize>, out: &mut Buf) {
    let at = |s: &str| index.get(s).copied().unwrap_or(0) as u64;
    out.varint(at(e.name));
    out.varint(e.attrs.len() as u64);
    for (k, v) in &e.attrs {
        out.varint(at(k));
        out.varint(at(v));
    }
    out.varint(e.children.len() as u64);
    for c in &e.children {
        write_element(c, index, out);
    }
}

/// The body of the metadata event after its header fields: the string pool
/// and the element tree (`root` → `metadata` with every class, `region`).
pub fn metadata_body(out: &mut Buf) {
    let mut metadata = Element::new("metadata");
    metadata.children = types();
    let root = Element::new("root").child(metadata).child(Element::new("region").attr("locale", "en_US").attr("gmtOffset", "0"));
    let (mut pool, mut index) = (Vec::new(), HashMap::new());
    collect_strings(&root, &mut pool, &mut index);
    out.varint(pool.len() as u64);
    for s in &pool {
        out.string(s);
    }
    write_element(&root, &index, out);
}

//! Streaming JFR writer: chunks of events with their constant pools and the
//! metadata, each written out whole when it ends.
//!
//! A chunk is: a 68-byte header, events, one checkpoint event holding every
//! constant pool the chunk's events refer to (threads, stack traces, frames,
//! methods, classes, packages, symbols, frame types, thread states, VM
//! operation types, context label sets), and the metadata event. Pool keys
//! are only valid inside their chunk, so each chunk is self-contained and pools are forgotten when it ends: memory is
//! bounded by one chunk (the caller ends chunks at a size limit), not by the
//! recording's length. A chunk is built in memory and appended to the output
//! only when complete, so the file on disk always holds whole chunks and is
//! readable at any time (the JDK's readers wait forever on a chunk whose
//! header says it is still being written).
//!
//! Timestamps are ticks of the caller's clock with [`TICKS_PER_SECOND`]; the
//! chunk header maps its start tick to wall-clock nanoseconds.

use crate::hash::FastMap as HashMap;
use std::io::{self, Write};

use super::encoding::Buf;
use super::metadata::{id, metadata_body};

/// Ticks are nanoseconds of a monotonic clock.
pub const TICKS_PER_SECOND: i64 = 1_000_000_000;
const HEADER_SIZE: usize = 68;
const MAGIC: &[u8; 4] = b"FLR\0";
/// Chunk format 2.0: read by JDK 11 and every later JDK.
const VERSION: (u16, u16) = (2, 0);
const FLAG_COMPRESSED_INTS: u8 = 1;
const FLAG_FINAL_CHUNK: u8 = 2;

/// How a frame was executing, as the JDK names it in `jdk.types.FrameType`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FrameType {
    Interpreted,
    Jit,
    Inlined,
    Native,
    /// A Java frame whose execution mode the sampler could not tell (plain
    /// AsyncGetCallTrace, JVMTI stack traces). Not a JDK frame type: readers
    /// show the description as it is.
    Unknown,
    /// A C++ function (libjvm). Not a JDK frame type (as `Unknown`).
    Cpp,
    /// A kernel function. Not a JDK frame type (as `Unknown`).
    Kernel,
}

impl FrameType {
    const ALL: [FrameType; 7] =
        [FrameType::Interpreted, FrameType::Jit, FrameType::Inlined, FrameType::Native, FrameType::Unknown, FrameType::Cpp, FrameType::Kernel];

    fn key(self) -> u64 {
        self as u64
    }

    /// The description readers show (`RecordedFrame.getType()`).
    pub fn description(self) -> &'static str {
        match self {
            FrameType::Interpreted => "Interpreted",
            FrameType::Jit => "JIT compiled",
            FrameType::Inlined => "Inlined",
            FrameType::Native => "Native",
            FrameType::Unknown => "Java",
            FrameType::Cpp => "C++",
            FrameType::Kernel => "Kernel",
        }
    }
}

/// One stack frame for the writer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct JfrFrame {
    /// Class in Java form (`java.util.HashMap`); empty for a frame that is no
    /// Java method (a native function, a marker).
    pub class: String,
    pub method: String,
    /// JVM method descriptor, e.g. `(I)V`.
    pub descriptor: String,
    /// Source line, or -1.
    pub line: i32,
    /// Bytecode index, or -1.
    pub bci: i32,
    pub kind: FrameType,
}

pub use crate::state::ThreadState;

/// Every state, in the order of their keys in the `jdk.types.ThreadState`
/// pool (see [`state_key`]).
const STATES: [ThreadState; 8] = [
    ThreadState::Running,
    ThreadState::Native,
    ThreadState::Vm,
    ThreadState::Blocked,
    ThreadState::Waiting,
    ThreadState::Parked,
    ThreadState::Sleeping,
    ThreadState::Unknown,
];

/// A state's key in the `jdk.types.ThreadState` pool: runnable 0 and native
/// 1 as oxprof always wrote them, the others after.
fn state_key(s: ThreadState) -> u64 {
    STATES.iter().position(|&x| x == s).unwrap_or(STATES.len() - 1) as u64
}

/// A live (or leaked) object for `jdk.OldObjectSample`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OldObject<'a> {
    /// When it was allocated, in ticks.
    pub allocation_ticks: i64,
    pub address: u64,
    /// Its class in Java form.
    pub class: &'a str,
    /// Array length, or `i32::MIN` when it is no array.
    pub array_elements: i32,
    /// Heap in use when it was last seen, in bytes (0 when unknown).
    pub heap_used: u64,
    pub description: Option<&'a str>,
    /// Bytes the sample stands for (`objectSize`, as JDK 21+ record it; 0
    /// when unknown).
    pub size: u64,
}

/// One safepoint for [`JfrWriter::safepoint`], in ticks of the writer's
/// clock: the VM thread asked every thread to stop at `begin_ticks`, all
/// had stopped at `sync_ticks`, and they were let go at `end_ticks` (when
/// known).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SafepointEvent<'a> {
    /// HotSpot's safepoint counter, or a sequence number.
    pub id: u64,
    pub begin_ticks: i64,
    pub sync_ticks: i64,
    pub end_ticks: Option<i64>,
    /// The VM operation (`ThreadDump`, `G1CollectFull`, ...), when known.
    pub operation: Option<&'a str>,
    /// Java threads at the start, when known.
    pub threads: Option<u32>,
    /// The VM thread, the events' `eventThread` (name it with
    /// [`JfrWriter::thread`]).
    pub vm_tid: u64,
}

/// Constant ids that stay the same for the whole recording. The JDK's
/// reader caches constants by id across chunks (a stack trace read in one
/// chunk is reused in the next), so an id must mean the same value in every
/// chunk; each chunk still carries its own entries for the ids it uses.
#[derive(Default)]
struct Ids {
    symbols: HashMap<String, u64>,
    packages: HashMap<String, u64>,
    classes: HashMap<String, u64>,
    methods: HashMap<(u64, u64, u64), u64>,
    vm_operations: HashMap<String, u64>,
}

/// The stable id of `key` in `map` (new ids count up from 1).
fn stable_id<K: std::hash::Hash + Eq>(map: &mut HashMap<K, u64>, key: K) -> u64 {
    let next = map.len() as u64 + 1;
    *map.entry(key).or_insert(next)
}

/// Constant pools of the current chunk: keys per value and the encoded entries.
#[derive(Default)]
struct Pools {
    ids: Ids,
    threads: HashMap<u64, ()>,
    thread_entries: (u64, Buf),
    referenced_threads: Vec<u64>,
    stacks: HashMap<u64, ()>,
    stack_entries: (u64, Buf),
    methods: HashMap<(u64, u64, u64), u64>,
    method_entries: (u64, Buf),
    classes: HashMap<String, u64>,
    class_entries: (u64, Buf),
    packages: HashMap<String, u64>,
    package_entries: (u64, Buf),
    symbols: HashMap<String, u64>,
    symbol_entries: (u64, Buf),
    old_objects: (u64, Buf),
    vm_operations: HashMap<String, u64>,
    vm_operation_entries: (u64, Buf),
    label_sets: HashMap<u64, ()>,
    label_set_entries: (u64, Buf),
}

impl Pools {
    fn symbol(&mut self, s: &str) -> u64 {
        if let Some(&k) = self.symbols.get(s) {
            return k;
        }
        let k = stable_id(&mut self.ids.symbols, s.to_string());
        self.symbols.insert(s.to_string(), k);
        let (n, b) = &mut self.symbol_entries;
        *n += 1;
        b.varint(k);
        b.string(s);
        k
    }

    fn package(&mut self, name: &str) -> u64 {
        if let Some(&k) = self.packages.get(name) {
            return k;
        }
        let sym = self.symbol(name);
        let k = stable_id(&mut self.ids.packages, name.to_string());
        self.packages.insert(name.to_string(), k);
        let (n, b) = &mut self.package_entries;
        *n += 1;
        b.varint(k);
        b.varint(sym); // name
        b.varint(0); // module: none
        b.boolean(true); // exported
        k
    }

    /// A class by its Java name; stored in the JVM's internal form as the
    /// JDK does (`java/util/HashMap`), which readers turn back into dots.
    fn class(&mut self, name: &str) -> u64 {
        if let Some(&k) = self.classes.get(name) {
            return k;
        }
        let internal = name.replace('.', "/");
        let package = match internal.rfind('/') {
            Some(i) => self.package(&internal[..i]),
            None => 0,
        };
        let sym = self.symbol(&internal);
        let k = stable_id(&mut self.ids.classes, name.to_string());
        self.classes.insert(name.to_string(), k);
        let (n, b) = &mut self.class_entries;
        *n += 1;
        b.varint(k);
        b.varint(0); // class loader: none recorded
        b.varint(sym);
        b.varint(package);
        b.int(1); // modifiers: public
        b.boolean(false); // hidden
        k
    }

    /// A VM operation's name in the `jdk.types.VMOperationType` pool.
    fn vm_operation(&mut self, name: &str) -> u64 {
        if let Some(&k) = self.vm_operations.get(name) {
            return k;
        }
        let k = stable_id(&mut self.ids.vm_operations, name.to_string());
        self.vm_operations.insert(name.to_string(), k);
        let (n, b) = &mut self.vm_operation_entries;
        *n += 1;
        b.varint(k);
        b.string(name);
        k
    }

    fn method(&mut self, f: &JfrFrame) -> u64 {
        // Every method gets a class, even a native function's (empty name):
        // readers print `class.method` and expect the class to exist.
        let class = self.class(&f.class);
        let name = self.symbol(&f.method);
        let descriptor = self.symbol(if f.descriptor.is_empty() { "()V" } else { &f.descriptor });
        if let Some(&k) = self.methods.get(&(class, name, descriptor)) {
            return k;
        }
        let k = stable_id(&mut self.ids.methods, (class, name, descriptor));
        self.methods.insert((class, name, descriptor), k);
        let (n, b) = &mut self.method_entries;
        *n += 1;
        b.varint(k);
        b.varint(class);
        b.varint(name);
        b.varint(descriptor);
        b.int(if f.kind == FrameType::Native { 0x0100 | 1 } else { 1 }); // ACC_NATIVE | ACC_PUBLIC
        b.boolean(false);
        k
    }
}

fn pool(out: &mut Buf, type_id: u64, entries: &(u64, Buf)) -> u32 {
    if entries.0 == 0 {
        return 0;
    }
    out.varint(type_id);
    out.varint(entries.0);
    out.raw(&entries.1.bytes);
    1
}

/// Statistics of what was written.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct WriterStats {
    pub chunks: u64,
    pub events: u64,
    pub bytes: u64,
}

/// Writes a JFR recording to `W` (a file).
pub struct JfrWriter<W: Write> {
    out: W,
    open: bool,
    start_ticks: i64,
    start_nanos: i64,
    /// The open chunk: header placeholder and events so far.
    chunk: Buf,
    body: Buf,
    pools: Pools,
    stats: WriterStats,
    /// The last chunk, complete, when writing it failed (see
    /// [`JfrWriter::take_unwritten`]).
    unwritten: Vec<u8>,
}

impl<W: Write> JfrWriter<W> {
    /// A writer appending chunks to `out`.
    pub fn new(out: W) -> JfrWriter<W> {
        JfrWriter {
            out,
            open: false,
            start_ticks: 0,
            start_nanos: 0,
            chunk: Buf::new(),
            body: Buf::new(),
            pools: Pools::default(),
            stats: WriterStats::default(),
            unwritten: Vec::new(),
        }
    }

    /// The chunk [`JfrWriter::end_chunk`] could not write (a full disk),
    /// whole, so that it can be written elsewhere; empty if none. What
    /// `out` holds of it is incomplete: the chunks before it end at
    /// [`WriterStats::bytes`].
    pub fn take_unwritten(&mut self) -> Vec<u8> {
        std::mem::take(&mut self.unwritten)
    }

    pub fn stats(&self) -> WriterStats {
        self.stats
    }

    /// Bytes in the open chunk so far (0 when none is open); callers end a
    /// chunk when it grows past their limit.
    pub fn chunk_bytes(&self) -> u64 {
        if self.open {
            self.chunk.len() as u64
        } else {
            0
        }
    }

    pub fn in_chunk(&self) -> bool {
        self.open
    }

    /// Opens a chunk starting at `ticks`, which is `wall_nanos` since the
    /// Unix epoch.
    pub fn begin_chunk(&mut self, ticks: i64, wall_nanos: i64) -> io::Result<()> {
        if self.open {
            return Ok(());
        }
        self.start_ticks = ticks;
        self.start_nanos = wall_nanos;
        self.chunk.clear();
        self.chunk.raw(&[0u8; HEADER_SIZE]); // completed in end_chunk
        self.open = true;
        let ids = std::mem::take(&mut self.pools.ids);
        self.pools = Pools { ids, ..Pools::default() };
        Ok(())
    }

    fn header(&self, size: u64, cp: u64, meta: u64, duration: i64, state: u8, flags: u8) -> [u8; HEADER_SIZE] {
        let mut h = [0u8; HEADER_SIZE];
        h[0..4].copy_from_slice(MAGIC);
        h[4..6].copy_from_slice(&VERSION.0.to_be_bytes());
        h[6..8].copy_from_slice(&VERSION.1.to_be_bytes());
        let longs = [size as i64, cp as i64, meta as i64, self.start_nanos, duration, self.start_ticks, TICKS_PER_SECOND];
        for (i, v) in longs.iter().enumerate() {
            h[8 + i * 8..16 + i * 8].copy_from_slice(&v.to_be_bytes());
        }
        h[64] = state;
        h[67] = flags;
        h
    }

    fn emit(&mut self) -> io::Result<()> {
        if !self.open {
            return Err(io::Error::other("no open JFR chunk: call begin_chunk first"));
        }
        self.chunk.event(&self.body.bytes);
        self.stats.events += 1;
        Ok(())
    }

    /// Names a thread for this chunk (first call wins within a chunk); a
    /// Java thread's `javaThreadId` is then its OS thread id (see
    /// [`JfrWriter::java_thread`] where its Java id is known).
    pub fn thread(&mut self, tid: u64, os_name: &str, java_name: Option<&str>) {
        self.java_thread(tid, os_name, java_name.map(|n| (n, tid as i64)));
    }

    /// Names a thread for this chunk (first call wins within a chunk):
    /// `java` is its Java name and `Thread.getId()`, for a Java thread.
    pub fn java_thread(&mut self, tid: u64, os_name: &str, java: Option<(&str, i64)>) {
        if self.pools.threads.insert(tid, ()).is_some() {
            return;
        }
        let (n, b) = &mut self.pools.thread_entries;
        *n += 1;
        b.varint(tid);
        b.string(os_name);
        b.long(tid as i64);
        match java {
            Some((j, id)) => {
                b.string(j);
                b.long(id);
            }
            None => {
                b.null_string();
                b.long(-1);
            }
        }
        b.varint(0); // no thread group
    }

    /// Whether thread `tid` has a name in this chunk.
    pub fn has_thread(&self, tid: u64) -> bool {
        self.pools.threads.contains_key(&tid)
    }

    /// Threads referred to by events of this chunk that have no name yet.
    pub fn unnamed_threads(&self) -> Vec<u64> {
        let mut v: Vec<u64> = self.pools.referenced_threads.iter().copied().filter(|t| !self.pools.threads.contains_key(t)).collect();
        v.sort_unstable();
        v.dedup();
        v
    }

    fn refer_thread(&mut self, tid: u64) {
        if !self.pools.threads.contains_key(&tid) {
            self.pools.referenced_threads.push(tid);
        }
    }

    /// Whether stack `id` is already in this chunk's pool.
    pub fn has_stack(&self, id: u64) -> bool {
        self.pools.stacks.contains_key(&id)
    }

    /// Adds stack `id` (frames leaf first, as JFR stores them).
    pub fn stack(&mut self, id: u64, frames: &[JfrFrame], truncated: bool) {
        if self.pools.stacks.insert(id, ()).is_some() {
            return;
        }
        let methods: Vec<u64> = frames.iter().map(|f| self.pools.method(f)).collect();
        let (n, b) = &mut self.pools.stack_entries;
        *n += 1;
        b.varint(id + 1);
        b.boolean(truncated);
        b.varint(frames.len() as u64);
        for (f, m) in frames.iter().zip(methods) {
            b.varint(m);
            b.int(f.line);
            b.int(f.bci);
            b.varint(f.kind.key());
        }
    }

    /// Whether label set `id` is already in this chunk's pool.
    pub fn has_labels(&self, id: u64) -> bool {
        self.pools.label_sets.contains_key(&id)
    }

    /// Adds label set `id` (not 0, which stands for no labels; an id must
    /// name the same set in every chunk): its labels, outermost first.
    pub fn labels(&mut self, id: u64, labels: &[(String, String)]) {
        if id == 0 || self.pools.label_sets.insert(id, ()).is_some() {
            return;
        }
        let (n, b) = &mut self.pools.label_set_entries;
        *n += 1;
        b.varint(id);
        b.string(&crate::labels::encode_set(labels));
    }

    /// `jdk.ExecutionSample`: a CPU sample of thread `tid` with stack
    /// `stack` and label set `labels` (0: none; see [`JfrWriter::labels`]).
    pub fn execution_sample(&mut self, ticks: i64, tid: u64, stack: u64, state: ThreadState, labels: u64) -> io::Result<()> {
        self.thread_sample(id::EXECUTION_SAMPLE, ticks, tid, stack, state, None, labels)
    }

    /// `jdk.NativeMethodSample`: a sample of thread `tid` in native code.
    pub fn native_method_sample(&mut self, ticks: i64, tid: u64, stack: u64, state: ThreadState, labels: u64) -> io::Result<()> {
        self.thread_sample(id::NATIVE_METHOD_SAMPLE, ticks, tid, stack, state, None, labels)
    }

    /// `oxprof.WallClockSample`: a wall-clock sample standing for
    /// `weight_ns` of the thread's wall time.
    pub fn wall_clock_sample(&mut self, ticks: i64, tid: u64, stack: u64, state: ThreadState, weight_ns: u64, labels: u64) -> io::Result<()> {
        self.thread_sample(id::WALL_CLOCK_SAMPLE, ticks, tid, stack, state, Some(weight_ns), labels)
    }

    #[allow(clippy::too_many_arguments)] // the event's own fields
    fn thread_sample(&mut self, event: u64, ticks: i64, tid: u64, stack: u64, state: ThreadState, weight: Option<u64>, labels: u64) -> io::Result<()> {
        self.refer_thread(tid);
        let b = &mut self.body;
        b.clear();
        b.varint(event);
        b.long(ticks);
        b.varint(tid);
        b.varint(stack + 1);
        b.varint(state_key(state));
        if let Some(w) = weight {
            b.long(w.min(i64::MAX as u64) as i64);
        }
        b.varint(labels);
        self.emit()
    }

    /// `jdk.JavaMonitorEnter` (`park` false) or `jdk.ThreadPark` (`park`
    /// true): thread `tid` waited `duration` ticks, until `end_ticks`, for a
    /// lock of class `class` that thread `owner` held when the wait began
    /// (a monitor's `previousOwner`; `None`: not known, null). Addresses are
    /// not known (0); a park's timeout and deadline read as not applicable.
    #[allow(clippy::too_many_arguments)] // the event's own fields
    pub fn lock_wait(
        &mut self,
        park: bool,
        end_ticks: i64,
        duration: i64,
        tid: u64,
        stack: u64,
        class: &str,
        labels: u64,
        owner: Option<u64>,
    ) -> io::Result<()> {
        self.refer_thread(tid);
        if let Some(o) = owner.filter(|_| !park) {
            self.refer_thread(o);
        }
        let class = self.pools.class(class);
        let b = &mut self.body;
        b.clear();
        b.varint(if park { id::THREAD_PARK } else { id::JAVA_MONITOR_ENTER });
        b.long(end_ticks.saturating_sub(duration));
        b.long(duration);
        b.varint(tid);
        b.varint(stack + 1);
        b.varint(class);
        if park {
            b.long(i64::MIN); // timeout: none (the JDK's "N/A")
            b.long(i64::MIN); // until: none
        } else {
            b.varint(owner.unwrap_or(0)); // previous owner: 0 is null
        }
        b.long(0); // address
        b.varint(labels);
        self.emit()
    }

    /// One safepoint as the JDK records it: `jdk.SafepointBegin` and
    /// `jdk.SafepointStateSynchronization` from the request to the moment
    /// every thread had stopped (the time to safepoint) and, when the end is
    /// known, `jdk.SafepointEnd` (a zero-length event at the end) and
    /// `jdk.ExecuteVMOperation` from the synchronisation to the end (at a
    /// safepoint, blocking, caller unknown). Counts not known are 0.
    pub fn safepoint(&mut self, e: &SafepointEvent) -> io::Result<()> {
        let ttsp = e.sync_ticks.saturating_sub(e.begin_ticks).max(0);
        let threads = e.threads.map_or(0, |t| t.min(i32::MAX as u32) as i32);
        self.refer_thread(e.vm_tid);
        // The start, duration, event thread and id every one of them opens with.
        let head = |b: &mut Buf, event: u64, start: i64, duration: i64| {
            b.clear();
            b.varint(event);
            b.long(start);
            b.long(duration);
            b.varint(e.vm_tid);
            b.long(e.id as i64);
        };
        head(&mut self.body, id::SAFEPOINT_BEGIN, e.begin_ticks, ttsp);
        self.body.int(threads); // totalThreadCount
        self.body.int(0); // jniCriticalThreadCount
        self.emit()?;
        head(&mut self.body, id::SAFEPOINT_STATE_SYNCHRONIZATION, e.begin_ticks, ttsp);
        self.body.int(0); // initialThreadCount
        self.body.int(0); // runningThreadCount
        self.body.int(0); // iterations
        self.emit()?;
        let Some(end) = e.end_ticks else { return Ok(()) };
        let end = end.max(e.sync_ticks);
        head(&mut self.body, id::SAFEPOINT_END, end, 0);
        self.emit()?;
        let operation = e.operation.map_or(0, |name| self.pools.vm_operation(name));
        let b = &mut self.body;
        b.clear();
        b.varint(id::EXECUTE_VM_OPERATION);
        b.long(e.sync_ticks);
        b.long(end - e.sync_ticks);
        b.varint(e.vm_tid);
        b.varint(operation);
        b.boolean(true); // safepoint
        b.boolean(true); // blocking
        b.varint(0); // caller: not known
        b.long(e.id as i64);
        self.emit()
    }

    /// `jdk.ObjectAllocationSample`: `weight` bytes allocated as `class`.
    pub fn allocation_sample(&mut self, ticks: i64, tid: u64, stack: u64, class: &str, weight: u64, labels: u64) -> io::Result<()> {
        self.refer_thread(tid);
        let class = self.pools.class(class);
        let b = &mut self.body;
        b.clear();
        b.varint(id::OBJECT_ALLOCATION_SAMPLE);
        b.long(ticks);
        b.varint(tid);
        b.varint(stack + 1);
        b.varint(class);
        b.long(weight as i64);
        b.varint(labels);
        self.emit()
    }

    /// `jdk.OldObjectSample`: an object still alive at `ticks`.
    pub fn old_object_sample(&mut self, ticks: i64, tid: u64, stack: u64, object: &OldObject<'_>) -> io::Result<()> {
        self.refer_thread(tid);
        let class = self.pools.class(object.class);
        let (n, pool) = &mut self.pools.old_objects;
        *n += 1;
        let key = *n;
        pool.varint(key);
        pool.long(object.address as i64);
        pool.varint(class);
        match object.description {
            Some(d) => pool.string(d),
            None => pool.null_string(),
        }
        pool.varint(0); // no referrer chain
        let b = &mut self.body;
        b.clear();
        b.varint(id::OLD_OBJECT_SAMPLE);
        b.long(ticks);
        b.long(0); // duration
        b.varint(tid);
        b.varint(stack + 1);
        b.long(object.allocation_ticks);
        b.long(ticks.saturating_sub(object.allocation_ticks).max(0));
        b.long(object.heap_used as i64);
        b.varint(key);
        b.int(object.array_elements);
        b.varint(0); // no GC root
        b.long(object.size as i64);
        self.emit()
    }

    /// `oxprof.LiveSite`: one site of a leak report with the inputs of its
    /// leak score (see `docs/jfr.md`). The allocated class is the site's
    /// leaf frame; `stack` holds the frames under it. A site without a
    /// path to a GC root writes a null `pathToRoot`.
    pub fn live_site(&mut self, ticks: i64, tid: u64, stack: u64, site: &crate::leak::Site) -> io::Result<()> {
        self.refer_thread(tid);
        let class = self.pools.class(site.class());
        let b = &mut self.body;
        b.clear();
        b.varint(id::LIVE_SITE);
        b.long(ticks);
        b.varint(tid);
        b.varint(stack + 1);
        b.varint(class);
        b.double(site.live_bytes);
        b.double(site.live_objects);
        b.long(site.tracked.min(i64::MAX as u64) as i64);
        b.long((site.mean_age_secs.max(0.0) * 1e9).round() as i64);
        b.double(site.mean_gcs_survived);
        b.double(site.old_share);
        b.string(&crate::leak::encode_series(&site.series));
        match &site.path_to_root {
            Some(path) => b.string(&path.join("\n")),
            None => b.null_string(),
        }
        b.double(site.leak_score());
        self.emit()
    }

    /// `oxprof.LiveReport`: the facts of a leak report (its header), at the
    /// same time as its `oxprof.LiveSite` events.
    pub fn live_report(&mut self, ticks: i64, tid: u64, r: &crate::leak::LeakReport) -> io::Result<()> {
        self.refer_thread(tid);
        let long = |v: u64| v.min(i64::MAX as u64) as i64;
        let b = &mut self.body;
        b.clear();
        b.varint(id::LIVE_REPORT);
        b.long(ticks);
        b.varint(tid);
        b.long((r.duration_secs.max(0.0) * 1e9).round() as i64);
        b.long(long(r.gcs));
        b.boolean(r.forced_gc);
        match &r.no_gc_reason {
            Some(why) => b.string(why),
            None => b.null_string(),
        }
        b.long(long(r.interval));
        b.long(long(r.effective_interval));
        b.long(r.thinnings as i64);
        b.long(long(r.budget_bytes));
        b.long(long(r.used_bytes));
        b.long(long(r.tracked));
        match &r.gc_roots_note {
            Some(note) => b.string(note),
            None => b.null_string(),
        }
        b.long((r.unjudged_bytes.max(0.0).round() as u64).min(i64::MAX as u64) as i64);
        b.long(long(r.unjudged_tracked));
        self.emit()
    }

    /// `oxprof.Span`: an interval of `duration` ticks from `start_ticks`
    /// that the application timed and named `tag` on thread `tid`, with
    /// label set `labels` (0: none).
    pub fn span(&mut self, start_ticks: i64, duration: i64, tid: u64, tag: &str, labels: u64) -> io::Result<()> {
        self.refer_thread(tid);
        let b = &mut self.body;
        b.clear();
        b.varint(id::SPAN);
        b.long(start_ticks);
        b.long(duration.max(0));
        b.varint(tid);
        b.string(tag);
        b.varint(labels);
        self.emit()
    }

    /// `jdk.ActiveSetting`: a setting of event type `event_id` (one of the
    /// [`event_type`] ids).
    pub fn setting(&mut self, ticks: i64, tid: u64, event_id: u64, name: &str, value: &str) -> io::Result<()> {
        self.refer_thread(tid);
        let b = &mut self.body;
        b.clear();
        b.varint(id::ACTIVE_SETTING);
        b.long(ticks);
        b.long(0);
        b.varint(tid);
        b.varint(0);
        b.long(event_id as i64);
        b.string(name);
        b.string(value);
        self.emit()
    }

    /// `jdk.ActiveRecording`: what this recording is and where it goes.
    pub fn recording(&mut self, ticks: i64, tid: u64, name: &str, destination: &str, start_millis: i64, duration_millis: i64) -> io::Result<()> {
        self.refer_thread(tid);
        let b = &mut self.body;
        b.clear();
        b.varint(id::ACTIVE_RECORDING);
        b.long(ticks);
        b.long(0);
        b.varint(tid);
        b.varint(0);
        b.long(1);
        b.string(name);
        b.string(destination);
        b.long(0);
        b.long(0);
        b.long(start_millis);
        b.long(duration_millis);
        self.emit()
    }

    /// Closes the open chunk at `end_ticks`: writes its constant pools and
    /// metadata and completes its header. `last` marks the recording's final
    /// chunk. Threads still unnamed get a placeholder name.
    pub fn end_chunk(&mut self, end_ticks: i64, last: bool) -> io::Result<()> {
        if !self.open {
            return Ok(());
        }
        for tid in self.unnamed_threads() {
            self.thread(tid, &format!("tid {tid}"), None);
        }
        let duration = end_ticks.saturating_sub(self.start_ticks).max(0);
        // The checkpoint: every pool in one event.
        let cp_offset = self.chunk.len() as u64;
        let mut pools = Buf::new();
        let mut count = 0;
        let mut fixed = Buf::new();
        fixed.varint(FrameType::ALL.len() as u64);
        for t in FrameType::ALL {
            fixed.varint(t.key());
            fixed.string(t.description());
        }
        pools.varint(id::FRAME_TYPE);
        pools.raw(&fixed.bytes);
        count += 1;
        pools.varint(id::THREAD_STATE);
        pools.varint(STATES.len() as u64);
        for s in STATES {
            pools.varint(state_key(s));
            pools.string(s.jfr_name());
        }
        count += 1;
        let p = &self.pools;
        count += pool(&mut pools, id::THREAD, &p.thread_entries);
        count += pool(&mut pools, id::STACK_TRACE, &p.stack_entries);
        count += pool(&mut pools, id::METHOD, &p.method_entries);
        count += pool(&mut pools, id::CLASS, &p.class_entries);
        count += pool(&mut pools, id::PACKAGE, &p.package_entries);
        count += pool(&mut pools, id::SYMBOL, &p.symbol_entries);
        count += pool(&mut pools, id::OLD_OBJECT, &p.old_objects);
        count += pool(&mut pools, id::VM_OPERATION_TYPE, &p.vm_operation_entries);
        count += pool(&mut pools, id::CONTEXT_LABELS, &p.label_set_entries);
        let b = &mut self.body;
        b.clear();
        b.varint(1); // checkpoint event
        b.long(end_ticks);
        b.long(0); // duration
        b.long(0); // delta to the previous checkpoint: none
        b.u8(0); // checkpoint type: plain
        b.varint(count as u64);
        b.raw(&pools.bytes);
        self.chunk.event(&self.body.bytes);
        // The metadata.
        let meta_offset = self.chunk.len() as u64;
        let b = &mut self.body;
        b.clear();
        b.varint(0); // metadata event
        b.long(end_ticks);
        b.long(0);
        b.long(0); // metadata id: the same in every chunk
        metadata_body(b);
        self.chunk.event(&self.body.bytes);
        let size = self.chunk.len() as u64;
        let flags = FLAG_COMPRESSED_INTS | if last { FLAG_FINAL_CHUNK } else { 0 };
        let header = self.header(size, cp_offset, meta_offset, duration, 0, flags);
        self.chunk.bytes[..HEADER_SIZE].copy_from_slice(&header);
        self.open = false;
        // The pools go; the ids stay, so that a value keeps its id in the next chunk.
        let ids = std::mem::take(&mut self.pools.ids);
        self.pools = Pools { ids, ..Pools::default() };
        let written = self.out.write_all(&self.chunk.bytes).and_then(|()| self.out.flush());
        if written.is_err() {
            self.unwritten = std::mem::take(&mut self.chunk.bytes);
        }
        self.chunk.clear();
        if self.chunk.bytes.capacity() > 1 << 20 {
            self.chunk.bytes.shrink_to(1 << 20);
        }
        written?;
        self.stats.chunks += 1;
        self.stats.bytes += size;
        Ok(())
    }

    /// Gives the output back (an open chunk, if any, is dropped).
    pub fn into_inner(self) -> W {
        self.out
    }
}

/// Event type ids for [`JfrWriter::setting`].
pub mod event_type {
    pub use super::id::{
        EXECUTE_VM_OPERATION, EXECUTION_SAMPLE, JAVA_MONITOR_ENTER, LIVE_REPORT, LIVE_SITE, NATIVE_METHOD_SAMPLE, OBJECT_ALLOCATION_SAMPLE, OLD_OBJECT_SAMPLE,
        SAFEPOINT_BEGIN, SAFEPOINT_END, SAFEPOINT_STATE_SYNCHRONIZATION, SPAN, THREAD_PARK, WALL_CLOCK_SAMPLE,
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Takes `room` bytes, then fails as a full disk does.
    struct Full {
        got: Vec<u8>,
        room: usize,
    }

    impl Write for Full {
        fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
            let n = buf.len().min(self.room - self.got.len());
            if n == 0 {
                return Err(io::Error::from_raw_os_error(28));
            }
            self.got.extend_from_slice(&buf[..n]);
            Ok(n)
        }

        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    /// A chunk that could not be written is kept whole, and reads back.
    #[test]
    fn a_chunk_that_does_not_fit_is_kept_whole() {
        let mut w = JfrWriter::new(Full { got: Vec::new(), room: 1 << 20 });
        let frames = [JfrFrame { class: "Main".into(), method: "spin".into(), descriptor: "()V".into(), line: 3, bci: 1, kind: FrameType::Jit }];
        let chunk = |w: &mut JfrWriter<Full>, t: i64| {
            w.begin_chunk(t, 1_700_000_000_000_000_000 + t).unwrap();
            w.thread(7, "main", Some("main"));
            w.stack(1, &frames, false);
            w.execution_sample(t + 10, 7, 1, ThreadState::Running, 0).unwrap();
            w.end_chunk(t + 20, false)
        };
        chunk(&mut w, 0).unwrap();
        assert!(w.take_unwritten().is_empty());
        let whole = w.stats().bytes as usize;
        w.out.room = whole + 100;
        assert!(chunk(&mut w, 1000).is_err());
        assert_eq!(w.stats().chunks, 1);
        let kept = w.take_unwritten();
        assert!(kept.starts_with(MAGIC) && kept.len() > 100);
        assert_eq!(&kept[..100], &w.out.got[whole..], "the kept chunk is not the one that was being written");
        assert_eq!(u64::from_be_bytes(kept[8..16].try_into().unwrap()), kept.len() as u64, "the kept chunk is not whole");
        let read = crate::jfr_read::read_from(&mut &kept[..], kept.len() as u64, &mut |_, _| {}).unwrap();
        assert_eq!(read.cpu.len(), 1);
        assert!(w.take_unwritten().is_empty(), "taken twice");
    }
}

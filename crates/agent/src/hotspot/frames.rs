//! signal-safe: HotSpot's in-memory layout, as the Java stack walker needs it: where a
//! thread keeps its last Java frame and stack bounds, how to find the code
//! blob (compiled method, stub, interpreter) containing a PC, and how to turn
//! a `Method*` into the `jmethodID` profiles are keyed by.
//!
//! [`Layout::from_vm_structs`] computes every offset off the signal path from
//! the JVM's own structure table (see `vmstructs`); a name missing on some JDK
//! disables the walker with a log line instead of guessing. The accessors are
//! signal-safe: they read only
//! - the current thread's own `JavaThread` (found from its `JNIEnv`),
//! - the code cache's committed range, after checking the address against it,
//! - `CodeHeap` objects (C heap, alive for the JVM's life),
//! - metadata through [`safemem`] reads, which fail instead of faulting.

use std::sync::OnceLock;

pub use oxprof_profile::ThreadState;

use crate::hotspot::blob_cache;
use crate::hotspot::gate;
use crate::hotspot::safemem;
use crate::native::unwind::OwnStack;
use crate::sampling::store::direct_mapped_slot;

/// `JavaThreadState` values (the same on JDK 11–25, checked at set-up).
pub const THREAD_IN_JAVA: i32 = 8;
pub const THREAD_IN_JAVA_TRANS: i32 = 9;
/// Largest thread stack taken at HotSpot's word (1 GiB): anything larger is
/// a misread, not a stack.
const MAX_THREAD_STACK: usize = 1 << 30;
const THREAD_IN_NATIVE: i32 = 4;
const THREAD_IN_NATIVE_TRANS: i32 = 5;
const THREAD_IN_VM: i32 = 6;
const THREAD_IN_VM_TRANS: i32 = 7;
const THREAD_BLOCKED: i32 = 10;
const THREAD_BLOCKED_TRANS: i32 = 11;
const THREAD_BLOCKED_I64: i64 = THREAD_BLOCKED as i64;

/// `OSThread` states (`ThreadState` in osThread.hpp) that name what a
/// blocked thread waits for, as this JVM numbers them.
#[derive(Clone, Copy, Debug)]
struct OsStates {
    monitor_wait: i32,
    object_wait: i32,
    condvar_wait: i32,
    sleeping: i32,
}

/// Interpreter frame slots, in words from `rbp`, on x86_64 (frame_x86.hpp;
/// the same on JDK 11–25 and not in the structure table).
const INTERP_SENDER_SP: isize = -1;
const INTERP_METHOD: isize = -3;
const INTERP_BCP: isize = -8;

const MAX_HEAPS: usize = 8;
/// Bytes of a code blob's header that lookups may read.
const HEADER: usize = 256;

/// Where a code blob's first instruction is recorded.
#[derive(Clone, Copy, Debug)]
enum CodeBounds {
    /// JDK ≤ 22: `_code_begin` / `_code_end` pointers.
    Pointers { begin: usize, end: usize },
    /// JDK 23+: `_code_offset` / `_data_offset` ints from the blob start.
    Offsets { begin: usize, end: usize },
}

/// How to tell a compiled Java method (`nmethod`) from other blobs.
#[derive(Clone, Copy, Debug)]
enum NmethodTest {
    /// JDK 23+: a `CodeBlobKind` byte.
    Kind { offset: usize, nmethod: u8 },
    /// Earlier: the blob's `_name` is "nmethod".
    Name { offset: usize },
}

/// Offsets and fixed addresses, all plain numbers.
#[derive(Debug)]
pub struct Layout {
    env_offset: usize,
    thread_state: usize,
    anchor_sp: usize,
    anchor_fp: usize,
    anchor_pc: usize,
    stack_base: usize,
    stack_size: usize,
    /// Whether the stack bounds are fields of `Thread` (so of every HotSpot
    /// thread, GC workers included), not only of `JavaThread`.
    stack_on_thread: bool,

    code_low: usize,
    code_high: usize,
    heaps: [usize; MAX_HEAPS],
    heap_count: usize,
    heap_mem_low: usize,
    heap_mem_high: usize,
    heap_segmap_low: usize,
    heap_segmap_high: usize,
    heap_log2_segment: usize,
    block_size: usize,
    block_used: usize,

    blob_frame_size: usize,
    blob_frame_complete: usize,
    blob_frame_complete_16: bool,
    code_bounds: CodeBounds,
    nmethod_test: NmethodTest,
    nmethod_method: usize,
    /// `nmethod::_compile_id`: unique per compilation, so (blob, id) names
    /// one nmethod even after its code-cache space is reused.
    nmethod_compile_id: Option<usize>,

    interp_low: usize,
    interp_high: usize,
    call_stub_return: usize,
    /// Entry frames: the `JavaCallWrapper*` slot (words from `rbp`) and the
    /// offsets of its anchor's sp, fp, pc. `None`: walks end at entry frames.
    entry: Option<(isize, [usize; 3])>,

    method_const: usize,
    /// `Method::_access_flags`, where exported (not on JDK 25).
    method_flags: Option<usize>,
    const_constants: usize,
    const_idnum: usize,
    const_code_size: usize,
    const_size: usize,
    pool_holder: usize,
    jmethod_ids: usize,

    blob_size: usize,
    /// `JavaThread::_osthread` (or `Thread::`) and `OSThread::_state`, with
    /// the state values, for telling blocked threads apart; `None`: blocked
    /// threads read as in the VM.
    osthread: Option<(usize, usize, OsStates)>,
    /// `JavaThread::_vframe_array_head`: set while the thread is being
    /// deoptimized, cleared once its interpreter frames are whole (see
    /// [`Layout::deopt_frames_whole`]); `None` where not exported.
    vframe_array_head: Option<usize>,
    /// Where an nmethod keeps its debug information, when this JDK's
    /// structure table says; `None` turns scope decoding off.
    scopes: Option<ScopeFields>,
}

/// Offsets, inside an nmethod, of the fields that locate its debug
/// information.
#[derive(Clone, Copy, Debug)]
enum ScopeFields {
    /// JDK 11–21: all in the nmethod. The PcDesc table runs from
    /// `_scopes_pcs_offset` to `_dependencies_offset`, the scopes stream
    /// from the `_scopes_data_begin` pointer to the PcDesc table, and the
    /// metadata table (methods the scopes name) from `_metadata_offset` to
    /// the scopes stream.
    InBlob { pcs: usize, pcs_end: usize, metadata: usize, data_ptr: usize },
    /// JDK 25: on the C heap. The PcDesc table and the scopes stream are in
    /// the block at `_immutable_data` (`_immutable_data_size` bytes), from
    /// `_scopes_pcs_offset` and `_scopes_data_offset` on; the metadata table
    /// follows the relocations (`_relocation_size` bytes) in the block at
    /// `CodeBlob::_mutable_data` (`_mutable_data_size` bytes).
    OnHeap { immutable: usize, immutable_size: usize, pcs: usize, data: usize, mutable: usize, mutable_size: usize, relocation_size: usize },
}

/// Where one nmethod's debug information lies (absolute addresses, checked
/// to be inside the nmethod, or inside the blocks it points to).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DebugRanges {
    pub pcs: (usize, usize),
    pub data: (usize, usize),
    pub metadata: (usize, usize),
    /// On the C heap (JDK 25), freed when the nmethod is: read only with
    /// checked reads. Otherwise inside the nmethod, in the code heap.
    pub on_heap: bool,
}

/// A C heap block of debug information larger than this is not believed.
const MAX_DEBUG_BLOCK: usize = 1 << 28;

/// A code blob found for a PC.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Blob {
    /// Frame size in bytes (0 for blobs without a fixed frame).
    pub frame_bytes: usize,
    /// First PC at which the frame is fully built.
    pub frame_complete: usize,
    pub code_begin: usize,
    /// The `Method*` of a compiled Java method, 0 for stubs.
    pub method: usize,
    /// The blob's start and size in bytes (0 if implausible).
    pub start: usize,
    pub size: usize,
}

static LAYOUT: OnceLock<Layout> = OnceLock::new();
/// The addresses of the "nmethod" and "native nmethod" (JNI wrapper) name
/// strings, once one was seen.
static NMETHOD_NAME: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
static NATIVE_NMETHOD_NAME: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
/// Name pointers read once and found to be neither: the names of stubs,
/// adapters and buffer blobs, which walks meet on every sample. An nmethod's
/// name is always one of libjvm's read-only literals, so a pointer whose
/// bytes were read and did not match can never name an nmethod later, and
/// a cached entry never needs invalidating. Direct-mapped; a collision only
/// costs a read.
static OTHER_BLOB_NAMES: [std::sync::atomic::AtomicUsize; OTHER_NAMES_CACHED] = [const { std::sync::atomic::AtomicUsize::new(0) }; OTHER_NAMES_CACHED];
const OTHER_NAMES_CACHED: usize = 128;

/// The layout, once [`init`] succeeded. Signal-safe (an atomic load).
pub fn layout() -> Option<&'static Layout> {
    LAYOUT.get()
}

// signal-safe: off (runs once, at load, before any handler runs)
/// Computes the layout for this JVM. Call from a JVMTI callback on a Java
/// thread (its `JNIEnv` finds where `JNIEnv` sits inside `JavaThread`), after
/// the code cache and interpreter exist (VMInit or later). Returns why not.
pub fn init(vs: &crate::hotspot::vmstructs::VmStructs, env: usize) -> Result<&'static Layout, String> {
    if let Some(l) = LAYOUT.get() {
        return Ok(l);
    }
    if !gate::vmstructs_walk_trusted() || !gate::jmethodid_is_method_slot() {
        return Err("this JDK's version is not one HotSpot's internals were tested on".into());
    }
    if !safemem::init() {
        return Err("process_vm_readv on the own process is not allowed".into());
    }
    let l = Layout::from_vm_structs(vs, env)?;
    // Read before written, like the walks' other caches.
    crate::sampling::store::prefault(&OTHER_BLOB_NAMES, |e| {
        let _ = e.compare_exchange(0, 0, std::sync::atomic::Ordering::Relaxed, std::sync::atomic::Ordering::Relaxed);
    });
    Ok(LAYOUT.get_or_init(|| l))
}

fn need<T>(v: Option<T>, what: &str) -> Result<T, String> {
    v.ok_or_else(|| format!("the JVM's structure table has no {what}"))
}
// signal-safe: on

impl Layout {
    // signal-safe: off (reads the structure table once, at load, before any handler runs)
    fn from_vm_structs(vs: &crate::hotspot::vmstructs::VmStructs, env: usize) -> Result<Layout, String> {
        let off = |t: &str, f: &str| need(vs.field(t, f).filter(|x| !x.is_static).map(|x| x.offset as usize), &format!("{t}::{f}"));
        let stat = |t: &str, f: &str| need(vs.static_word(t, f), &format!("{t}::{f}"));
        for (name, want) in [
            ("_thread_in_Java", THREAD_IN_JAVA),
            ("_thread_in_native", THREAD_IN_NATIVE),
            ("_thread_in_vm", THREAD_IN_VM),
            ("_thread_in_Java_trans", THREAD_IN_JAVA_TRANS),
        ] {
            if vs.int_constant(name).is_some_and(|v| v != want as i64) {
                return Err(format!("unexpected value of {name}"));
            }
        }
        let anchor = off("JavaThread", "_anchor")?;
        let growable_len = off("GrowableArrayBase", "_len").or_else(|_| off("GenericGrowableArray", "_len"))?;
        let growable_data = off("GrowableArray<int>", "_data")?;
        let vs_low = off("VirtualSpace", "_low")?;
        let vs_high = off("VirtualSpace", "_high")?;
        let memory = off("CodeHeap", "_memory")?;
        let segmap = off("CodeHeap", "_segmap")?;
        let code_bounds = match (off("CodeBlob", "_code_begin"), off("CodeBlob", "_code_end")) {
            (Ok(begin), Ok(end)) => CodeBounds::Pointers { begin, end },
            _ => CodeBounds::Offsets { begin: off("CodeBlob", "_code_offset")?, end: off("CodeBlob", "_data_offset")? },
        };
        let nmethod_test = match (off("CodeBlob", "_kind"), vs.int_constant("CodeBlobKind::Nmethod")) {
            (Ok(offset), Some(k)) => NmethodTest::Kind { offset, nmethod: k as u8 },
            _ => NmethodTest::Name { offset: off("CodeBlob", "_name")? },
        };
        let stub_queue = stat("AbstractInterpreter", "_code")?;
        let (code_low, code_high) = need(vs.code_cache_bounds(), "code cache bounds")?;
        let mut l = Layout {
            env_offset: 0,
            thread_state: off("JavaThread", "_thread_state")?,
            anchor_sp: anchor + off("JavaFrameAnchor", "_last_Java_sp")?,
            anchor_fp: anchor + off("JavaFrameAnchor", "_last_Java_fp")?,
            anchor_pc: anchor + off("JavaFrameAnchor", "_last_Java_pc")?,
            stack_base: off("JavaThread", "_stack_base").or_else(|_| off("Thread", "_stack_base"))?,
            stack_size: off("JavaThread", "_stack_size").or_else(|_| off("Thread", "_stack_size"))?,
            stack_on_thread: off("Thread", "_stack_base").is_ok() && off("Thread", "_stack_size").is_ok(),
            code_low,
            code_high,
            heaps: [0; MAX_HEAPS],
            heap_count: 0,
            heap_mem_low: memory + vs_low,
            heap_mem_high: memory + vs_high,
            heap_segmap_low: segmap + vs_low,
            heap_segmap_high: segmap + vs_high,
            heap_log2_segment: off("CodeHeap", "_log2_segment_size")?,
            block_size: need(vs.size("HeapBlock"), "HeapBlock size")? as usize,
            block_used: off("HeapBlock::Header", "_used")?,
            blob_frame_size: off("CodeBlob", "_frame_size")?,
            blob_frame_complete: off("CodeBlob", "_frame_complete_offset")?,
            blob_frame_complete_16: vs.field_type("CodeBlob", "_frame_complete_offset") == Some("int16_t"),
            code_bounds,
            nmethod_test,
            nmethod_method: off("nmethod", "_method").or_else(|_| off("CompiledMethod", "_method"))?,
            nmethod_compile_id: off("nmethod", "_compile_id").ok(),
            interp_low: 0,
            interp_high: 0,
            call_stub_return: stat("StubRoutines", "_call_stub_return_address")?,
            entry: match (vs.int_constant("frame::entry_frame_call_wrapper_offset"), off("JavaCallWrapper", "_anchor")) {
                (Some(slot), Ok(a)) => Some((
                    slot as isize,
                    [a + off("JavaFrameAnchor", "_last_Java_sp")?, a + off("JavaFrameAnchor", "_last_Java_fp")?, a + off("JavaFrameAnchor", "_last_Java_pc")?],
                )),
                _ => None,
            },
            method_const: off("Method", "_constMethod")?,
            method_flags: off("Method", "_access_flags").ok(),
            const_constants: off("ConstMethod", "_constants")?,
            const_idnum: off("ConstMethod", "_method_idnum")?,
            const_code_size: off("ConstMethod", "_code_size")?,
            const_size: need(vs.size("ConstMethod"), "ConstMethod size")? as usize,
            pool_holder: off("ConstantPool", "_pool_holder")?,
            jmethod_ids: off("InstanceKlass", "_methods_jmethod_ids")?,
            blob_size: off("CodeBlob", "_size")?,
            vframe_array_head: off("JavaThread", "_vframe_array_head").ok(),
            osthread: match (
                off("JavaThread", "_osthread").or_else(|_| off("Thread", "_osthread")),
                off("OSThread", "_state"),
                ["MONITOR_WAIT", "OBJECT_WAIT", "CONDVAR_WAIT", "SLEEPING"].map(|n| vs.int_constant(n)),
                vs.int_constant("_thread_blocked"),
            ) {
                (Ok(os), Ok(state), [Some(m), Some(o), Some(c), Some(sl)], Some(THREAD_BLOCKED_I64)) => {
                    Some((os, state, OsStates { monitor_wait: m as i32, object_wait: o as i32, condvar_wait: c as i32, sleeping: sl as i32 }))
                }
                _ => None,
            },
            scopes: match (
                off("nmethod", "_scopes_pcs_offset"),
                off("nmethod", "_dependencies_offset"),
                off("nmethod", "_metadata_offset"),
                off("CompiledMethod", "_scopes_data_begin").or_else(|_| off("nmethod", "_scopes_data_begin")),
            ) {
                (Ok(pcs), Ok(pcs_end), Ok(metadata), Ok(data_ptr)) => Some(ScopeFields::InBlob { pcs, pcs_end, metadata, data_ptr }),
                (Ok(pcs), ..) => match (
                    off("nmethod", "_immutable_data"),
                    off("nmethod", "_immutable_data_size"),
                    off("nmethod", "_scopes_data_offset"),
                    off("CodeBlob", "_mutable_data"),
                    off("CodeBlob", "_mutable_data_size"),
                    off("CodeBlob", "_relocation_size"),
                ) {
                    (Ok(immutable), Ok(immutable_size), Ok(data), Ok(mutable), Ok(mutable_size), Ok(relocation_size)) => {
                        Some(ScopeFields::OnHeap { immutable, immutable_size, pcs, data, mutable, mutable_size, relocation_size })
                    }
                    _ => None,
                },
                _ => None,
            },
        };
        // find_blob reads blob headers only within their first HEADER bytes.
        let (CodeBounds::Pointers { begin, end } | CodeBounds::Offsets { begin, end }) = l.code_bounds;
        let (NmethodTest::Kind { offset: test, .. } | NmethodTest::Name { offset: test }) = l.nmethod_test;
        if [l.blob_frame_size, l.blob_frame_complete, l.nmethod_method, begin, end, test].iter().any(|&o| o + 8 > HEADER) {
            return Err("code blob fields beyond the expected header".into());
        }
        let heaps = stat("CodeCache", "_heaps")?;
        let count = safemem::read_word(heaps + growable_len).map(|w| w as u32 as usize).unwrap_or(0);
        let data = safemem::read_word(heaps + growable_data).unwrap_or(0);
        if count == 0 || count > MAX_HEAPS || data == 0 {
            return Err(format!("unexpected code heap list ({count} heaps)"));
        }
        for i in 0..count {
            l.heaps[i] = need(safemem::read_word(data + 8 * i), "code heap")?;
        }
        l.heap_count = count;
        let buffer = need(safemem::read_word(stub_queue + off("StubQueue", "_stub_buffer")?), "interpreter code")?;
        // `_buffer_limit` is an int: the low half of the word.
        let limit = need(safemem::read_word(stub_queue + off("StubQueue", "_buffer_limit")?), "interpreter size")? as u32 as usize;
        l.interp_low = buffer;
        l.interp_high = buffer + limit;
        if buffer == 0 || limit == 0 {
            return Err("the interpreter is not generated yet".into());
        }
        l.env_offset = l.find_env_offset(env)?;
        Ok(l)
    }

    /// Finds where the `JNIEnv` sits inside `JavaThread` (not in the
    /// structure table): the offset at which the candidate thread's stack
    /// bounds contain our own stack and its state is "in native" or "in VM".
    fn find_env_offset(&self, env: usize) -> Result<usize, String> {
        let local = 0u8;
        let here = &local as *const u8 as usize;
        for off in (8..4096).step_by(8) {
            let Some(thread) = env.checked_sub(off) else { break };
            let (Some(base), Some(size), Some(state)) =
                (safemem::read_word(thread + self.stack_base), safemem::read_word(thread + self.stack_size), safemem::read_word(thread + self.thread_state))
            else {
                continue;
            };
            // JVMTI callbacks run "in native"; an attach may run "in VM".
            let state = state as u32 as i32;
            if base > here && size < (1 << 32) && base.saturating_sub(size) < here && (state == THREAD_IN_NATIVE || state == THREAD_IN_VM) {
                return Ok(off);
            }
        }
        Err("cannot find the JNIEnv inside JavaThread".into())
    }

    // signal-safe: on
    /// The current thread's `JavaThread*`, from its `JNIEnv`.
    pub fn thread(&self, env: usize) -> usize {
        env.wrapping_sub(self.env_offset)
    }

    /// Reads a word of the current thread's own `JavaThread`.
    fn thread_word(thread: usize, offset: usize) -> usize {
        // SAFETY: `thread` is the current thread's JavaThread (from its own
        // JNIEnv), alive while it runs; offsets come from the JVM's table.
        unsafe { ((thread + offset) as *const usize).read_volatile() }
    }

    /// The thread's state (`_thread_in_Java`, …).
    pub fn thread_state(&self, thread: usize) -> i32 {
        // SAFETY: as in thread_word; the state is a 4-byte enum.
        unsafe { ((thread + self.thread_state) as *const i32).read_volatile() }
    }

    /// What the current thread is doing (see [`ThreadState`]: its numbering
    /// is stored with each sample). Reads only
    /// its own `JavaThread` and the `OSThread` it owns (C heap, freed only
    /// when the thread ends).
    pub fn java_state(&self, thread: usize) -> ThreadState {
        match self.thread_state(thread) {
            THREAD_IN_JAVA | THREAD_IN_JAVA_TRANS => ThreadState::Running,
            THREAD_IN_NATIVE | THREAD_IN_NATIVE_TRANS => ThreadState::Native,
            THREAD_IN_VM | THREAD_IN_VM_TRANS => ThreadState::Vm,
            THREAD_BLOCKED | THREAD_BLOCKED_TRANS => {
                let Some((os_off, state_off, st)) = self.osthread else { return ThreadState::Vm };
                let os = Self::thread_word(thread, os_off);
                if os == 0 {
                    return ThreadState::Vm;
                }
                // SAFETY: `os` is the current thread's own OSThread, allocated
                // before it ran Java and freed only after it ends; `_state`
                // is a 4-byte enum at an offset from the structure table.
                let os_state = unsafe { ((os + state_off) as *const i32).read_volatile() };
                match os_state {
                    s if s == st.monitor_wait => ThreadState::Blocked,
                    s if s == st.object_wait => ThreadState::Waiting,
                    s if s == st.condvar_wait => ThreadState::Parked,
                    s if s == st.sleeping => ThreadState::Sleeping,
                    _ => ThreadState::Vm,
                }
            }
            _ => ThreadState::Unknown,
        }
    }

    /// The last Java frame the thread recorded when it left Java: (sp, fp, pc).
    pub fn anchor(&self, thread: usize) -> (usize, usize, usize) {
        (Self::thread_word(thread, self.anchor_sp), Self::thread_word(thread, self.anchor_fp), Self::thread_word(thread, self.anchor_pc))
    }

    /// Whether a thread that AsyncGetCallTrace reports as being deoptimized
    /// has its interpreter frames whole: `Deoptimization::unpack_frames`
    /// clears the thread's vframe array head (in `cleanup_deopt_info`)
    /// only after it has written every skeletal frame; from the moment
    /// `fetch_unroll_info` sets it until then, the frames under the
    /// deoptimization blob may be half written. False where the field is
    /// not exported.
    pub fn deopt_frames_whole(&self, thread: usize) -> bool {
        self.vframe_array_head.is_some_and(|off| Self::thread_word(thread, off) == 0)
    }

    /// The thread's stack: [lowest, base).
    pub fn stack(&self, thread: usize) -> (usize, usize) {
        let base = Self::thread_word(thread, self.stack_base);
        (base.saturating_sub(Self::thread_word(thread, self.stack_size)), base)
    }

    /// The calling thread's stack as the signal handler can vouch for it
    /// (see `native_unwind::OwnStack`): HotSpot's recorded bounds of
    /// `thread`, the caller's own `JavaThread` (from its `JNIEnv`) or, where
    /// the bounds are `Thread` fields, the `Thread` of HotSpot's thread key
    /// (`java` false), used only when the caller's own frame lies inside them.
    pub fn own_stack(&self, thread: usize, java: bool) -> OwnStack {
        if thread == 0 || !(java || self.stack_on_thread) {
            return OwnStack::default();
        }
        let (lo, hi) = self.stack(thread);
        let local = 0u8;
        let here = std::hint::black_box(&local) as *const u8 as usize;
        if lo < here && here < hi && hi - lo <= MAX_THREAD_STACK {
            OwnStack { here, top: hi }
        } else {
            OwnStack::default()
        }
    }

    pub fn in_code_cache(&self, pc: usize) -> bool {
        pc >= self.code_low && pc < self.code_high
    }

    pub fn in_interpreter(&self, pc: usize) -> bool {
        pc >= self.interp_low && pc < self.interp_high
    }

    /// Whether `pc` is where the call stub resumes after Java returns: the
    /// frame below is the VM's, not Java's.
    pub fn is_call_stub_return(&self, pc: usize) -> bool {
        pc == self.call_stub_return
    }

    /// The code blob containing `pc`, found through the code heap's segment
    /// map as HotSpot's `CodeHeap::find_start` does.
    pub fn find_blob(&self, pc: usize) -> Option<Blob> {
        if !self.in_code_cache(pc) {
            return None;
        }
        let heap = self.heaps.get(..self.heap_count)?.iter().copied().find(|&h| {
            let (low, high) = heap_range(h, self.heap_mem_low, self.heap_mem_high);
            pc >= low && pc < high
        })?;
        let (low, high) = heap_range(heap, self.heap_mem_low, self.heap_mem_high);
        let (map_low, map_high) = heap_range(heap, self.heap_segmap_low, self.heap_segmap_high);
        // SAFETY: CodeHeap objects live as long as the JVM.
        let log2 = unsafe { ((heap + self.heap_log2_segment) as *const i32).read_volatile() };
        if !(0..32).contains(&log2) {
            return None;
        }
        let mut seg = (pc - low) >> log2;
        let map_byte = |i: usize| -> Option<u8> {
            let a = map_low.checked_add(i)?;
            // SAFETY: a is inside the segment map's committed range.
            (a < map_high).then(|| unsafe { (a as *const u8).read_volatile() })
        };
        let mut b = map_byte(seg)?;
        if b == 0xff {
            return None; // free segment
        }
        let mut hops = 0;
        while b > 0 {
            seg = seg.checked_sub(b as usize)?;
            b = map_byte(seg)?;
            hops += 1;
            if hops > 100_000 || b == 0xff {
                return None;
            }
        }
        let block = low + (seg << log2);
        let blob = block + self.block_size;
        let header_end = blob + HEADER;
        if header_end > high {
            return None;
        }
        let word = |o: usize| -> usize {
            // SAFETY: blob + o < header_end <= committed end of this heap.
            unsafe { ((blob + o) as *const usize).read_volatile() }
        };
        let int = |o: usize| -> i32 {
            // SAFETY: as above.
            unsafe { ((blob + o) as *const i32).read_volatile() }
        };
        // SAFETY: as above.
        let used = unsafe { ((block + self.block_used) as *const u8).read_volatile() };
        if used == 0 {
            return None;
        }
        let (code_begin, code_end) = match self.code_bounds {
            CodeBounds::Pointers { begin, end } => (word(begin), word(end)),
            CodeBounds::Offsets { begin, end } => (blob + int(begin) as u32 as usize, blob + int(end) as u32 as usize),
        };
        if pc < code_begin || pc >= code_end {
            return None;
        }
        let complete = if self.blob_frame_complete_16 {
            // SAFETY: as above.
            unsafe { ((blob + self.blob_frame_complete) as *const i16).read_volatile() as i32 }
        } else {
            int(self.blob_frame_complete)
        };
        let frame_words = int(self.blob_frame_size);
        let method = if self.is_nmethod(blob, &word) { word(self.nmethod_method) } else { 0 };
        let size = int(self.blob_size).max(0) as usize;
        Some(Blob {
            frame_bytes: if (0..1 << 20).contains(&frame_words) { frame_words as usize * 8 } else { 0 },
            frame_complete: if complete >= 0 { code_begin.wrapping_add(complete as usize) } else { code_begin },
            code_begin,
            method,
            start: blob,
            size: if blob.checked_add(size).is_some_and(|e| e <= high && size >= HEADER) { size } else { 0 },
        })
    }

    /// [`Layout::find_blob`] for the return address `pc` of a frame on the
    /// walking thread's stack, through `blob_cache`: a cached nmethod is
    /// used once its `Method*` and compile id, read from the code heap,
    /// still match. Nmethods found the long way are cached.
    pub fn find_blob_cached(&self, pc: usize) -> Option<Blob> {
        let Some(id_at) = self.nmethod_compile_id else { return self.find_blob(pc) };
        if let Some(([frame_bytes, frame_complete, code_begin, method, start, size], id)) = blob_cache::get(pc) {
            let b = Blob { frame_bytes, frame_complete, code_begin, method, start, size };
            let end = b.start.wrapping_add(b.size);
            let inside = |o: usize, n: usize| o + n <= b.size && self.in_code_cache(b.start) && end > b.start && self.in_code_cache(end - 1);
            if inside(self.nmethod_method, 8) && inside(id_at, 4) {
                // SAFETY: both fields lie inside a blob that was found in a
                // code heap's committed range, which stays mapped for the
                // JVM's life (checked again: the range is in the code cache).
                let (method, compile_id) =
                    unsafe { (((b.start + self.nmethod_method) as *const usize).read_volatile(), ((b.start + id_at) as *const i32).read_volatile()) };
                if method == b.method && compile_id == id {
                    return Some(b);
                }
            }
        }
        let b = self.find_blob(pc)?;
        if let Some(id) = self.compile_id(&b) {
            blob_cache::put(pc, [b.frame_bytes, b.frame_complete, b.code_begin, b.method, b.start, b.size], id);
        }
        Some(b)
    }

    /// Where the debug information of the nmethod `blob` lies, when this
    /// JDK's layout is known and every range is inside the nmethod.
    pub fn debug_ranges(&self, blob: &Blob) -> Option<DebugRanges> {
        let f = self.scopes?;
        if blob.method == 0 || blob.size == 0 {
            return None;
        }
        let (start, end) = (blob.start, blob.start + blob.size);
        let field = |o: usize| -> Option<usize> {
            (o + 8 <= blob.size).then(|| {
                // SAFETY: inside the blob, which find_blob checked lies in
                // the committed part of its code heap.
                unsafe { ((start + o) as *const usize).read_volatile() }
            })
        };
        // An `int` field, negative read as 0.
        let int = |o: usize| field(o).map(|w| (w as u32 as i32).max(0) as usize);
        match f {
            ScopeFields::InBlob { pcs, pcs_end, metadata, data_ptr } => {
                let pcs = start + int(pcs)?;
                let pcs_end = start + int(pcs_end)?;
                let metadata = start + int(metadata)?;
                let data = field(data_ptr)?;
                let ordered = start < metadata && metadata <= data && data <= pcs && pcs <= pcs_end && pcs_end <= end;
                let aligned = metadata % 8 == 0 && data % 8 == 0 && pcs % 4 == 0 && (pcs_end - pcs) % 16 == 0;
                (ordered && aligned).then_some(DebugRanges { pcs: (pcs, pcs_end), data: (data, pcs), metadata: (metadata, data), on_heap: false })
            }
            ScopeFields::OnHeap { immutable, immutable_size, pcs, data, mutable, mutable_size, relocation_size } => {
                let immutable = field(immutable)?;
                let immutable_size = int(immutable_size)?;
                let (pcs, data) = (int(pcs)?, int(data)?);
                let mutable = field(mutable)?;
                let (mutable_size, relocation_size) = (int(mutable_size)?, int(relocation_size)?);
                let sane = immutable != 0
                    && immutable_size <= MAX_DEBUG_BLOCK
                    && pcs <= data
                    && data <= immutable_size
                    && (data - pcs) % 16 == 0
                    && mutable != 0
                    && mutable_size <= MAX_DEBUG_BLOCK
                    && relocation_size <= mutable_size;
                // The block ends cannot wrap: both sizes are bounded above.
                let (pcs, data, immutable_end) = (immutable.checked_add(pcs)?, immutable.checked_add(data)?, immutable.checked_add(immutable_size)?);
                let (metadata, mutable_end) = (mutable.checked_add(relocation_size)?, mutable.checked_add(mutable_size)?);
                // Word-aligned tables: a word read never straddles a page.
                let aligned = pcs % 8 == 0 && metadata % 8 == 0;
                (sane && aligned).then_some(DebugRanges { pcs: (pcs, data), data: (data, immutable_end), metadata: (metadata, mutable_end), on_heap: true })
            }
        }
    }

    /// The compile id of the nmethod `blob`, if this JDK exports it.
    pub fn compile_id(&self, blob: &Blob) -> Option<i32> {
        let o = self.nmethod_compile_id?;
        if blob.method == 0 || o + 4 > blob.size {
            return None;
        }
        // SAFETY: inside the blob, which find_blob checked lies in the
        // committed part of its code heap.
        Some(unsafe { ((blob.start + o) as *const i32).read_volatile() })
    }

    /// Whether scopes can be decoded on this JDK.
    pub fn has_debug_ranges(&self) -> bool {
        self.scopes.is_some()
    }

    fn is_nmethod(&self, blob: usize, word: &dyn Fn(usize) -> usize) -> bool {
        use std::sync::atomic::Ordering;
        match self.nmethod_test {
            NmethodTest::Kind { offset, nmethod } => {
                // SAFETY: inside the blob header checked by the caller.
                unsafe { ((blob + offset) as *const u8).read_volatile() == nmethod }
            }
            NmethodTest::Name { offset } => {
                let name = word(offset);
                if name == 0 {
                    return false;
                }
                if name == NMETHOD_NAME.load(Ordering::Relaxed) || name == NATIVE_NMETHOD_NAME.load(Ordering::Relaxed) {
                    return true;
                }
                let other = OTHER_BLOB_NAMES.get(direct_mapped_slot(name >> 3, OTHER_NAMES_CACHED));
                if other.is_some_and(|o| o.load(Ordering::Relaxed) == name) {
                    return false;
                }
                match safemem::read_bytes8(name) {
                    Some(b) if &b == b"nmethod\0" => {
                        NMETHOD_NAME.store(name, Ordering::Relaxed);
                        return true;
                    }
                    // A JNI wrapper is an nmethod too (of the native method).
                    Some(b) if &b == b"native n" && safemem::read_bytes8(name.wrapping_add(8)).is_some_and(|r| r[..7] == *b"method\0") => {
                        NATIVE_NMETHOD_NAME.store(name, Ordering::Relaxed);
                        return true;
                    }
                    // Read, and not an nmethod's name. Not cached: an
                    // unreadable pointer (it may be a torn read), or a
                    // "native n" whose rest could not be read.
                    Some(b) if b != *b"native n" => {
                        if let Some(o) = other {
                            o.store(name, Ordering::Relaxed);
                        }
                    }
                    _ => {}
                }
                false
            }
        }
    }

    /// Where an entry frame with frame pointer `fp` keeps its
    /// `JavaCallWrapper*`, and the offsets of the wrapper's anchor (sp, fp,
    /// pc): the Java frames that called into the VM before it called Java.
    pub fn entry_frame(&self, fp: usize) -> Option<(usize, [usize; 3])> {
        self.entry.map(|(slot, anchor)| (fp.wrapping_add_signed(slot * 8), anchor))
    }

    /// The `Method*` an interpreted frame with frame pointer `fp` runs.
    pub fn interpreted_method_slot(fp: usize) -> usize {
        fp.wrapping_add_signed(INTERP_METHOD * 8)
    }

    pub fn interpreted_bcp_slot(fp: usize) -> usize {
        fp.wrapping_add_signed(INTERP_BCP * 8)
    }

    pub fn interpreted_sender_sp_slot(fp: usize) -> usize {
        fp.wrapping_add_signed(INTERP_SENDER_SP * 8)
    }

    /// The `jmethodID` of a `Method*`, through its class's jmethodID cache,
    /// checked by reading it back. `None` if any step is implausible.
    pub fn jmethod_id(&self, method: usize) -> Option<usize> {
        if !gate::jmethodid_is_method_slot() {
            return None;
        }
        let cm = safemem::read_word(method.wrapping_add(self.method_const))?;
        let cp = safemem::read_word(cm.wrapping_add(self.const_constants))?;
        let holder = safemem::read_word(cp.wrapping_add(self.pool_holder))?;
        let idnum = safemem::read_u16(cm.wrapping_add(self.const_idnum))? as usize;
        let ids = safemem::read_word(holder.wrapping_add(self.jmethod_ids))?;
        let len = safemem::read_word(ids)?;
        if idnum >= len || len > 1 << 16 {
            return None;
        }
        let id = safemem::read_word(ids.wrapping_add(8 * (idnum + 1)))?;
        (id != 0 && safemem::read_word(id)? == method).then_some(id)
    }

    /// What a frame of `method` needs besides its jmethodID, through safe
    /// reads: whether it is a Java `native` method (`None` where unknown) and
    /// where its bytecodes lie (start, length; empty if unreadable).
    pub fn method_facts(&self, method: usize) -> (Option<bool>, (usize, usize)) {
        let native = self.native_flag(method, |a| safemem::read_word(a).map(|w| w as u32));
        let code = match safemem::read_word(method.wrapping_add(self.method_const)).filter(|&cm| cm != 0) {
            Some(cm) => match safemem::read_u16(cm.wrapping_add(self.const_code_size)) {
                Some(size) => (cm.wrapping_add(self.const_size), size as usize),
                None => (0, 0),
            },
            None => (0, 0),
        };
        (native, code)
    }

    /// The `bci` to store for a compiled frame of `method` without scope
    /// decoding: 0, or the native-method marker for a JNI wrapper.
    pub fn compiled_bci(&self, method: usize) -> i32 {
        let native = self.native_flag(method, |a| safemem::read_word(a).map(|w| w as u32));
        if native == Some(true) {
            jvmti_sys::asgct::BCI_NATIVE_FRAME
        } else {
            0
        }
    }

    /// The bytecode index of `bcp` in `method`, or 0 if it is not inside
    /// the method's bytecodes.
    pub fn bci(&self, method: usize, bcp: usize) -> i32 {
        self.bci_with(method, bcp, safemem::read_word, safemem::read_u16)
    }

    /// Whether `method` is a Java `native` method; `None` where this JDK does
    /// not export the flags. `method` must be a live `Method*` (one whose
    /// jmethodID was read back), as in [`Layout::bci_live`].
    pub fn is_native_live(&self, method: usize) -> Option<bool> {
        // SAFETY: a live Method is mapped metadata; the flags are a u32.
        self.native_flag(method, |a| Some(unsafe { (a as *const u32).read_volatile() }))
    }

    /// [`Layout::bci`] by plain reads, for a `method` known to be live: its
    /// jmethodID was read back and a frame of it is on the calling thread's
    /// own stack, so neither the Method nor its ConstMethod can go away.
    pub fn bci_live(&self, method: usize, bcp: usize) -> i32 {
        self.bci_with(
            method,
            bcp,
            // SAFETY: fields of the live Method and of its ConstMethod (the
            // offsets come from the JVM's table).
            |a| Some(unsafe { (a as *const usize).read_volatile() }),
            // SAFETY: as above; `_code_size` is a u16.
            |a| Some(unsafe { (a as *const u16).read_volatile() }),
        )
    }

    /// The `native` access flag of `method`, read with `read_u32` (safe
    /// reads for an unchecked pointer, plain ones for a live method).
    fn native_flag(&self, method: usize, read_u32: impl Fn(usize) -> Option<u32>) -> Option<bool> {
        const ACC_NATIVE: u32 = 0x0100;
        read_u32(method.wrapping_add(self.method_flags?)).map(|flags| flags & ACC_NATIVE != 0)
    }

    /// The bytecode index of `bcp` in `method`, reading the Method and its
    /// ConstMethod with `word` and `half`; 0 if `bcp` is not inside the
    /// method's bytecodes.
    fn bci_with(&self, method: usize, bcp: usize, word: impl Fn(usize) -> Option<usize>, half: impl Fn(usize) -> Option<u16>) -> i32 {
        let Some(cm) = word(method.wrapping_add(self.method_const)).filter(|&cm| cm != 0) else { return 0 };
        let Some(size) = half(cm.wrapping_add(self.const_code_size)) else { return 0 };
        let start = cm.wrapping_add(self.const_size);
        if bcp >= start && bcp < start.wrapping_add(size as usize) {
            (bcp - start) as i32
        } else {
            0
        }
    }
}

/// The [low, high) pointers of a `VirtualSpace` inside a `CodeHeap`.
fn heap_range(heap: usize, low_off: usize, high_off: usize) -> (usize, usize) {
    // SAFETY: CodeHeap objects live as long as the JVM; the fields are
    // pointer-sized VirtualSpace bounds.
    unsafe { (((heap + low_off) as *const usize).read_volatile(), ((heap + high_off) as *const usize).read_volatile()) }
}

//! The sampling signal handler: the only oxprof code that runs inside a signal.
//! Samples arrive as SIGPROF (ctimer, itimer, perf_events on old kernels) or
//! as SIGTRAP from perf_events counters with the `sigtrap` attribute;
//! [`on_sigtrap`] takes only those (`TRAP_PERF` with oxprof's cookie) and hands
//! every other SIGTRAP to the handler that was there before.
//!
//! Rules for everything reachable from [`on_sigprof`] (checked in review):
//! - no allocation, no locks, no formatting or logging, nothing that can panic
//!   (no `unwrap`, no unchecked indexing, no `thread_local!`);
//! - only async-signal-safe calls: `gettid`, the JVM's `GetEnv` (reads a
//!   thread-local set up by the JVM), `AsyncGetCallTrace` (designed for it)
//!   and `process_vm_readv` (the own walk's checked reads, see `safemem`);
//!   in `native_unwind`, `write`/`read` on its probe pipe, `fstat`,
//!   `process_vm_readv`, `getpid`, `clock_gettime`;
//! - `errno` is saved on entry and restored on exit;
//! - all memory used is preallocated in a [`SignalContext`] before the handler
//!   is armed, and freed only after [`disarm`] has waited for every running
//!   handler to leave.
//!
//! Walk results go to the lock-free [`SampleStore`]. A failed walk is stored as
//! a one-frame stack holding the error code, so it is counted, not dropped.

use std::ffi::c_void;
use std::ptr;
use std::sync::atomic::{AtomicBool, AtomicPtr, AtomicUsize, Ordering};

use jvmti_sys::asgct::{ticks, ASGCT_CallFrame, ASGCT_CallTrace, AsyncGetCallTraceFn};
use jvmti_sys::{jint, JNIEnv, JavaVM, JNI_OK, JNI_VERSION_1_6};

use crate::cputime::CpuSpent;
use crate::native_unwind::{self, MAX_NATIVE_FRAMES};
use crate::options::CStack;
use crate::store::{RawFrame, SampleStore};
use crate::frametypes::{self, Below};
use crate::javawalk::{self, Walked};

/// `bci` of a synthetic frame for a Java thread that had no Java frame.
pub const MARK_NO_JAVA_FRAME: i32 = 1;
/// `bci` of a synthetic frame for a thread the JVM does not run Java on.
pub const MARK_NON_JAVA_THREAD: i32 = 2;
/// `bci` of the marker ending a stack that AsyncGetCallTrace and the own
/// walk both ended before the thread's first Java call (3 is taken by
/// `alloc::MARK_ALLOC_CLASS`).
pub const MARK_TRUNCATED: i32 = 4;

/// How many frame buffers exist; concurrent handlers each need one.
const BUFFERS: usize = 16;

/// One preallocated frame buffer, taken with a compare-and-swap. It owns
/// `len` frames at `ptr` (a leaked boxed slice, freed on drop).
struct Buffer {
    busy: AtomicBool,
    ptr: *mut RawFrame,
    len: usize,
}

impl Buffer {
    fn new(len: usize) -> Buffer {
        let frames = vec![RawFrame::default(); len].into_boxed_slice();
        Buffer { busy: AtomicBool::new(false), ptr: Box::into_raw(frames) as *mut RawFrame, len }
    }
}

impl Drop for Buffer {
    fn drop(&mut self) {
        // SAFETY: `ptr`/`len` came from Box::into_raw of a boxed slice of `len`.
        drop(unsafe { Box::from_raw(ptr::slice_from_raw_parts_mut(self.ptr, self.len)) });
    }
}

/// Everything the handler needs, built before it is armed.
pub struct SignalContext {
    store: &'static SampleStore,
    asgct: AsyncGetCallTraceFn,
    vm: *mut JavaVM,
    depth: usize,
    /// Weight added per sample (the sampling interval in ns).
    weight: u64,
    /// Keep the thread id of every sample (option `threads`).
    per_thread: bool,
    /// Native frames before the Java ones (see `native_unwind`).
    cstack: CStack,
    /// Kernel frames from the perf_events rings.
    kernel_stacks: bool,
    buffers: [Buffer; BUFFERS],
}

// SAFETY: the raw pointers are the JavaVM (valid for the process's life) and
// buffers owned by this context; handing the context to another thread is fine.
unsafe impl Send for SignalContext {}
// SAFETY: shared use goes through the buffers' busy flags and the store's atomics.
unsafe impl Sync for SignalContext {}

// RawFrame must have ASGCT_CallFrame's layout: the handler lets
// AsyncGetCallTrace write straight into RawFrame buffers.
const _: () = assert!(std::mem::size_of::<RawFrame>() == std::mem::size_of::<ASGCT_CallFrame>());
const _: () = assert!(std::mem::align_of::<RawFrame>() == std::mem::align_of::<ASGCT_CallFrame>());

impl SignalContext {
    /// Allocates the buffers (off the signal path).
    pub fn new(
        store: &'static SampleStore,
        asgct: AsyncGetCallTraceFn,
        vm: *mut JavaVM,
        depth: usize,
        weight: u64,
        per_thread: bool,
    ) -> Box<SignalContext> {
        let depth = depth.max(1);
        // Room for the native part in front of the Java frames.
        let buffers = std::array::from_fn(|_| Buffer::new(depth + MAX_NATIVE_FRAMES + 1));
        Box::new(SignalContext { store, asgct, vm, depth, weight, per_thread, cstack: CStack::No, kernel_stacks: false, buffers })
    }

    /// Collects native frames (and kernel frames from perf rings) too.
    pub fn set_cstack(&mut self, cstack: CStack, kernel_stacks: bool) {
        self.cstack = cstack;
        self.kernel_stacks = kernel_stacks && cstack != CStack::No;
    }
}

/// Lowest and highest code address the JVM reported (JIT-compiled methods and
/// generated stubs), used to sanity-check a return address before retrying a
/// walk from it.
static CODE_LOW: AtomicUsize = AtomicUsize::new(usize::MAX);
static CODE_HIGH: AtomicUsize = AtomicUsize::new(0);

/// Widens the known code range (called from JVMTI code events, not signals).
pub fn note_code(start: usize, len: usize) {
    CODE_LOW.fetch_min(start, Ordering::Relaxed);
    CODE_HIGH.fetch_max(start.saturating_add(len), Ordering::Relaxed);
}

pub(crate) fn in_code(pc: usize) -> bool {
    pc >= CODE_LOW.load(Ordering::Relaxed) && pc < CODE_HIGH.load(Ordering::Relaxed)
}

static CONTEXT: AtomicPtr<SignalContext> = AtomicPtr::new(ptr::null_mut());
static ENABLED: AtomicBool = AtomicBool::new(false);
static ACTIVE: AtomicUsize = AtomicUsize::new(0);
/// Diagnostic (`OXPROF_SIGNAL_NOOP=1`): the handler returns at once, so a
/// benchmark measures what the engine's timers and signal delivery cost the
/// JVM, apart from any walk. Nothing is recorded.
static NOOP: AtomicBool = AtomicBool::new(false);

/// Reads `OXPROF_SIGNAL_NOOP` (off the signal path); true when it is on.
pub fn read_noop_switch() -> bool {
    let on = std::env::var_os("OXPROF_SIGNAL_NOOP").is_some_and(|v| v == "1");
    NOOP.store(on, Ordering::SeqCst);
    on
}

/// Installs the SIGPROF handler (idempotent).
pub fn install() -> std::io::Result<()> {
    set_handler(libc::SIGPROF, on_sigprof)
}

type SigInfoHandler = extern "C" fn(libc::c_int, *mut libc::siginfo_t, *mut c_void);

/// Installs `handler` for `signo` with the SA_SIGINFO signature, nothing
/// blocked besides `signo` itself, and interrupted system calls restarted.
fn set_handler(signo: libc::c_int, handler: SigInfoHandler) -> std::io::Result<()> {
    // SAFETY: a zeroed sigaction is a valid starting point; we fill the fields
    // we need and install a handler with the SA_SIGINFO signature.
    unsafe {
        let mut sa: libc::sigaction = std::mem::zeroed();
        sa.sa_sigaction = handler as *const () as usize;
        sa.sa_flags = libc::SA_SIGINFO | libc::SA_RESTART;
        libc::sigemptyset(&mut sa.sa_mask);
        if libc::sigaction(signo, &sa, ptr::null_mut()) != 0 {
            return Err(std::io::Error::last_os_error());
        }
    }
    Ok(())
}

/// `si_code` of a SIGTRAP sent by a perf_events counter (Linux 5.13+).
const TRAP_PERF: libc::c_int = 6;
/// Offset of `si_perf_data` in a Linux `siginfo_t` on x86_64 and arm64: the
/// three `int`s and padding (16), then the fault's `si_addr` (8), then the
/// union whose `_perf._data` comes first. The libc crate has no accessor.
const SI_PERF_DATA_OFFSET: usize = 24;

/// Whether [`on_sigtrap`] is installed (it stays, see [`install_trap`]).
static TRAP_INSTALLED: AtomicBool = AtomicBool::new(false);
/// The SIGTRAP handler found at install (`SIG_DFL`, `SIG_IGN` or a function)
/// and whether it takes a siginfo, for chaining.
static PREV_TRAP_HANDLER: AtomicUsize = AtomicUsize::new(libc::SIG_DFL);
static PREV_TRAP_SIGINFO: AtomicBool = AtomicBool::new(false);

/// Installs the SIGTRAP handler for perf_events `sigtrap` counters
/// (idempotent). It is never taken out again: a counter's signal can still be
/// pending after the counter is closed, and SIGTRAP's default action would
/// end the JVM with a core dump.
pub fn install_trap() -> std::io::Result<()> {
    if TRAP_INSTALLED.load(Ordering::SeqCst) {
        return Ok(());
    }
    // SAFETY: reading the current action into a zeroed sigaction. The
    // previous handler is saved before ours can run.
    unsafe {
        let mut old: libc::sigaction = std::mem::zeroed();
        if libc::sigaction(libc::SIGTRAP, ptr::null(), &mut old) != 0 {
            return Err(std::io::Error::last_os_error());
        }
        if old.sa_sigaction != on_sigtrap as *const () as usize {
            PREV_TRAP_HANDLER.store(old.sa_sigaction, Ordering::SeqCst);
            PREV_TRAP_SIGINFO.store(old.sa_flags & libc::SA_SIGINFO != 0, Ordering::SeqCst);
        }
    }
    set_handler(libc::SIGTRAP, on_sigtrap)?;
    TRAP_INSTALLED.store(true, Ordering::SeqCst);
    Ok(())
}

/// Whether a SIGTRAP came from one of oxprof's perf_events counters.
fn is_our_perf_trap(info: *const libc::siginfo_t) -> bool {
    if info.is_null() {
        return false;
    }
    // SAFETY: the kernel passes a valid siginfo_t for the handler's duration.
    if unsafe { (*info).si_code } != TRAP_PERF {
        return false;
    }
    // SAFETY: for TRAP_PERF the union holds the perf fields; the read stays
    // inside the 128-byte siginfo_t and tolerates any alignment.
    let data = unsafe { (info as *const u8).add(SI_PERF_DATA_OFFSET).cast::<u64>().read_unaligned() };
    data == crate::engine::perf::SIGTRAP_COOKIE
}

/// The SIGTRAP handler: oxprof's perf samples go to [`on_sigprof`], any
/// other SIGTRAP (a breakpoint, another tool's counter) to the previous
/// handler, or, if there was none, to the default action as if oxprof had
/// not been there. See the module rules.
extern "C" fn on_sigtrap(signo: libc::c_int, info: *mut libc::siginfo_t, ucontext: *mut c_void) {
    if is_our_perf_trap(info) {
        #[cfg(test)]
        tests::OUR_TRAPS.fetch_add(1, Ordering::Relaxed);
        return on_sigprof(signo, info, ucontext);
    }
    // SAFETY: __errno_location returns this thread's errno slot, valid for
    // the thread's life; the default-action path below may set errno.
    let errno = unsafe { libc::__errno_location() };
    // SAFETY: as above.
    let saved = unsafe { *errno };
    chain_trap(signo, info, ucontext);
    // SAFETY: as above.
    unsafe { *errno = saved };
}

/// Hands a SIGTRAP that is not oxprof's to whoever had SIGTRAP before.
fn chain_trap(signo: libc::c_int, info: *mut libc::siginfo_t, ucontext: *mut c_void) {
    let prev = PREV_TRAP_HANDLER.load(Ordering::SeqCst);
    if prev == libc::SIG_IGN {
        return;
    }
    if prev == libc::SIG_DFL {
        // SAFETY: sigaction and raise are async-signal-safe. SIGTRAP is
        // blocked while this handler runs, so the raised signal is taken with
        // the default action (a core dump) once it returns, as it would have
        // been without oxprof.
        unsafe {
            let mut sa: libc::sigaction = std::mem::zeroed();
            sa.sa_sigaction = libc::SIG_DFL;
            libc::sigaction(libc::SIGTRAP, &sa, ptr::null_mut());
            libc::raise(libc::SIGTRAP);
        }
        return;
    }
    if PREV_TRAP_SIGINFO.load(Ordering::SeqCst) {
        // SAFETY: `prev` is the address of the SA_SIGINFO handler that was
        // installed before ours; it is called as the kernel would have.
        let f: SigInfoHandler = unsafe { std::mem::transmute(prev) };
        f(signo, info, ucontext);
    } else {
        // SAFETY: as above, for a plain `sa_handler`.
        let f: extern "C" fn(libc::c_int) = unsafe { std::mem::transmute(prev) };
        f(signo);
    }
}

/// Makes the handler record into `ctx`. Any previous context must have been
/// taken back with [`disarm`].
pub fn arm(ctx: Box<SignalContext>) {
    HANDLER.reset();
    let old = CONTEXT.swap(Box::into_raw(ctx), Ordering::SeqCst);
    debug_assert!(old.is_null());
    ENABLED.store(true, Ordering::SeqCst);
}

/// Stops recording, waits until no handler is running, and returns the context.
pub fn disarm() -> Option<Box<SignalContext>> {
    ENABLED.store(false, Ordering::SeqCst);
    wait_for_handlers();
    let p = CONTEXT.swap(ptr::null_mut(), Ordering::SeqCst);
    wait_for_handlers();
    // SAFETY: `p` came from Box::into_raw in `arm`, and no handler can still
    // see it: handlers check ENABLED after announcing themselves in ACTIVE.
    (!p.is_null()).then(|| unsafe { Box::from_raw(p) })
}

fn wait_for_handlers() {
    while ACTIVE.load(Ordering::SeqCst) != 0 {
        std::thread::yield_now();
    }
}

/// CPU time spent in the handler's sampling work, since [`arm`].
static HANDLER: CpuSpent = CpuSpent::new();

/// Mean CPU nanoseconds of one sample in the handler (walks, native part,
/// store), if any.
pub fn handler_mean_ns() -> Option<u64> {
    HANDLER.mean_ns()
}

/// The SIGPROF handler. See the module rules.
extern "C" fn on_sigprof(_signo: libc::c_int, info: *mut libc::siginfo_t, ucontext: *mut c_void) {
    // SAFETY: __errno_location returns this thread's errno slot.
    let errno = unsafe { libc::__errno_location() };
    // SAFETY: the slot is valid for the thread's life.
    let saved = unsafe { *errno };
    ACTIVE.fetch_add(1, Ordering::SeqCst);
    if ENABLED.load(Ordering::SeqCst) && !NOOP.load(Ordering::Relaxed) {
        let ctx = CONTEXT.load(Ordering::SeqCst);
        if !ctx.is_null() {
            let call = HANDLER.begin();
            // SAFETY: a non-null context stays alive while ACTIVE > 0 (see disarm).
            let ctx = unsafe { &*ctx };
            sample(ctx, ucontext, ctx.weight.saturating_mul(periods(info)));
            HANDLER.end(call);
        }
    }
    ACTIVE.fetch_sub(1, Ordering::SeqCst);
    // SAFETY: as above.
    unsafe { *errno = saved };
}

fn gettid() -> u32 {
    // SAFETY: gettid is a plain, always-successful, async-signal-safe syscall.
    unsafe { libc::syscall(libc::SYS_gettid) as u32 }
}

/// The calling thread's JNIEnv, or null for a thread the JVM does not know.
fn jni_env(vm: *mut JavaVM) -> *mut JNIEnv {
    let mut env: *mut c_void = ptr::null_mut();
    // SAFETY: `vm` is the live JavaVM. GetEnv only reads the JVM's
    // thread-local current-thread pointer; it allocates nothing.
    let rc = unsafe {
        match (**vm).GetEnv {
            Some(f) => f(vm, &mut env, JNI_VERSION_1_6 as jint),
            None => return ptr::null_mut(),
        }
    };
    if rc == JNI_OK as jint {
        env as *mut JNIEnv
    } else {
        ptr::null_mut()
    }
}

/// Offset of `si_overrun` in a Linux `siginfo_t` on 64-bit targets: three
/// `int`s, padding to the 8-byte aligned union, then the POSIX timer's
/// `si_tid` and `si_overrun` (the kernel's and glibc's layout alike; the
/// libc crate has no accessor for it).
const SI_OVERRUN_OFFSET: usize = 20;

/// How many sampling periods this signal stands for. A POSIX CPU-time timer
/// (the `ctimer` engine) is checked at the kernel's tick (4 ms at HZ=250), so
/// with a shorter interval one signal comes per tick and the periods it
/// missed are reported as the timer's overrun: weighing the sample by
/// 1 + overrun keeps the profile's CPU time right. Other engines' signals
/// stand for one period.
fn periods(info: *const libc::siginfo_t) -> u64 {
    if info.is_null() {
        return 1;
    }
    // SAFETY: the kernel passes a valid siginfo_t for the handler's duration.
    let code = unsafe { (*info).si_code };
    if code != libc::SI_TIMER {
        return 1;
    }
    // SAFETY: for SI_TIMER the union holds the timer fields; the read stays
    // inside the 128-byte siginfo_t and tolerates any alignment.
    let overrun = unsafe { (info as *const u8).add(SI_OVERRUN_OFFSET).cast::<i32>().read_unaligned() };
    // On a loaded machine a signal can wait long enough to stand for
    // thousands of periods. The kernel saturates the count at INT_MAX; the
    // cap (17 minutes at 1 ms) keeps such a value from swamping a profile.
    1 + (overrun.clamp(0, 1 << 20) as u64)
}

fn sample(ctx: &SignalContext, ucontext: *mut c_void, weight: u64) {
    let tid = gettid();
    let env = jni_env(ctx.vm);
    if env.is_null() && ctx.cstack == CStack::No {
        record_marker(ctx, tid, MARK_NON_JAVA_THREAD, weight);
        return;
    }
    let Some(buffer) = take_buffer(ctx, tid) else {
        ctx.store.count_dropped();
        return;
    };
    let native = native_part(ctx, tid, ucontext, buffer);
    if env.is_null() {
        record_native_marker(ctx, buffer, native, tid, MARK_NON_JAVA_THREAD, weight);
        buffer.busy.store(false, Ordering::Release);
        return;
    }
    let depth = ctx.depth.min(buffer.len.saturating_sub(native + 1));
    // SAFETY: `native + depth < buffer.len`: the Java frames follow the native ones.
    let java = unsafe { buffer.ptr.add(native) };
    let mut trace = ASGCT_CallTrace { env_id: env, num_frames: 0, frames: java as *mut ASGCT_CallFrame };
    // SAFETY: `trace.frames` has room for `depth` frames, we own the buffer
    // (busy flag), the layouts match (asserted above), and `ucontext` is the
    // kernel's context for this signal.
    unsafe { (ctx.asgct)(&mut trace, depth as jint, ucontext) };
    if trace.num_frames == ticks::UNKNOWN_JAVA || trace.num_frames == ticks::NOT_WALKABLE_JAVA {
        recover(ctx, &mut trace, depth, ucontext);
    }
    let asgct_ok = trace.num_frames >= 0;
    // A failure code to mark the Java frames with: the own walk found some
    // but not the whole stack.
    let mut partial = None;
    if !asgct_ok {
        // SAFETY: we own the buffer's `depth` frames after the native part (busy flag).
        let all = unsafe { std::slice::from_raw_parts_mut(java, depth) };
        match javawalk::on_failure(env as usize, ucontext, all, trace.num_frames) {
            Walked::Frames(n) => trace.num_frames = n as i32,
            Walked::Partial(n) => (partial, trace.num_frames) = (Some(trace.num_frames), n as i32),
            Walked::NoJavaFrame => trace.num_frames = 0,
            Walked::Failed => {}
        }
    }
    let n = trace.num_frames;
    let tid_key = if ctx.per_thread { tid } else { 0 };
    if n > 0 {
        let mut n = (n as usize).min(depth);
        if asgct_ok {
            // SAFETY: we own the buffer's `depth` frames after the native part
            // (busy flag); the walk wrote the first `n`.
            let room = unsafe { std::slice::from_raw_parts_mut(java, depth) };
            match frametypes::on_success(env as usize, ucontext, room, n) {
                Below::Nothing => {}
                Below::Completed(k) => n = k.min(depth),
                Below::Cut(k) => (n, partial) = (k.min(depth), Some(MARK_TRUNCATED)),
            }
        }
        let mut len = native + n;
        if let Some(code) = partial {
            // SAFETY: `native + depth < buffer.len` (see `depth`) and `n <= depth`:
            // the slot after the Java frames is ours.
            unsafe { buffer.ptr.add(len).write(RawFrame::marker(code)) };
            len += 1;
        }
        // SAFETY: the native part, `n` Java frames and any marker are in our buffer.
        let frames = unsafe { std::slice::from_raw_parts(buffer.ptr, len) };
        ctx.store.record(tid_key, frames, weight);
    } else if n == 0 {
        record_native_marker(ctx, buffer, native, tid, MARK_NO_JAVA_FRAME, weight);
    } else if n == ticks::UNKNOWN_NOT_JAVA {
        // JIT compiler and other JVM-internal threads land here too; the dump
        // tells them from application threads, so keep the thread id.
        record_native_marker(ctx, buffer, native, tid, n, weight);
    } else {
        record_native_marker(ctx, buffer, native, tid_key, n, weight);
    }
    buffer.busy.store(false, Ordering::Release);
}

/// Retries a failed walk from the caller of the interrupted code.
///
/// AsyncGetCallTrace fails when the PC is in code without a complete frame:
/// generated stubs (intrinsics such as `dsin`, array copy), method prologues
/// and epilogues. The caller's frame is usually fine, so we rebuild the
/// context as if the innermost call had just returned and walk again:
/// 1. return address at `[rsp]` (no frame pushed yet, or a frameless stub),
/// 2. at `[rsp+8]` (only `rbp` pushed: prologue/epilogue),
/// 3. at `[rbp+8]` with caller `rsp = rbp+16` (a stub that set up `rbp`).
/// A candidate is used only when it points into JVM-generated code, and only
/// words a few KB above the interrupted `rsp` are read: that memory is the
/// live part of this thread's own stack. The context is restored afterwards.
fn recover(ctx: &SignalContext, trace: &mut ASGCT_CallTrace, depth: usize, ucontext: *mut c_void) {
    if ucontext.is_null() {
        return;
    }
    let uc = ucontext as *mut libc::ucontext_t;
    // SAFETY: the kernel passed a valid ucontext for this signal.
    let gregs = unsafe { &mut (*uc).uc_mcontext.gregs };
    let (rip, rsp, rbp) = (libc::REG_RIP as usize, libc::REG_RSP as usize, libc::REG_RBP as usize);
    let (Some(&pc0), Some(&sp0), Some(&fp0)) = (gregs.get(rip), gregs.get(rsp), gregs.get(rbp)) else { return };
    let sp = sp0 as usize;
    if sp == 0 || sp % 8 != 0 {
        return;
    }
    let read = |addr: usize| -> usize {
        // SAFETY: callers only pass addresses in [sp, sp + 4 KiB + 16), the live
        // top of this thread's stack, 8-byte aligned.
        unsafe { *(addr as *const usize) }
    };
    let fp = fp0 as usize;
    let frame_fp_ok = fp > sp && fp - sp < 4096 && fp % 8 == 0;
    for attempt in 0..3 {
        let (new_pc, new_sp, new_fp) = match attempt {
            0 => (read(sp), sp + 8, fp),
            1 => (read(sp + 8), sp + 16, read(sp)),
            _ if frame_fp_ok => (read(fp + 8), fp + 16, read(fp)),
            _ => continue,
        };
        if !in_code(new_pc) {
            continue;
        }
        set_regs(gregs, [(rip, new_pc as i64), (rsp, new_sp as i64), (rbp, new_fp as i64)]);
        trace.num_frames = 0;
        // SAFETY: as for the first walk; the context now describes the caller.
        unsafe { (ctx.asgct)(trace, depth as jint, ucontext) };
        set_regs(gregs, [(rip, pc0), (rsp, sp0), (rbp, fp0)]);
        if trace.num_frames > 0 {
            return;
        }
    }
}

fn set_regs(gregs: &mut [i64], values: [(usize, i64); 3]) {
    for (reg, value) in values {
        if let Some(r) = gregs.get_mut(reg) {
            *r = value;
        }
    }
}

/// Collects the native part of the sample at the start of `buffer`
/// (`native_unwind`); returns its length (0 with `cstack=no`).
fn native_part(ctx: &SignalContext, tid: u32, ucontext: *mut c_void, buffer: &Buffer) -> usize {
    if ctx.cstack == CStack::No {
        return 0;
    }
    let room = MAX_NATIVE_FRAMES.min(buffer.len.saturating_sub(1));
    // SAFETY: we own the buffer (busy flag) and it holds `buffer.len > room` frames.
    let out = unsafe { std::slice::from_raw_parts_mut(buffer.ptr, room) };
    native_unwind::collect(tid, ucontext, ctx.kernel_stacks, ctx.cstack == CStack::Dwarf, in_code, out)
}

/// Records the native part followed by a marker frame naming why there is
/// no Java stack (a one-frame stack when there is no native part).
fn record_native_marker(ctx: &SignalContext, buffer: &Buffer, native: usize, tid: u32, code: i32, weight: u64) {
    if native == 0 || native >= buffer.len {
        return record_marker(ctx, tid, code, weight);
    }
    // SAFETY: we own the buffer and `native < buffer.len`.
    let frames = unsafe {
        buffer.ptr.add(native).write(RawFrame::marker(code));
        std::slice::from_raw_parts(buffer.ptr, native + 1)
    };
    ctx.store.record(tid, frames, weight);
}

/// Records a one-frame stack naming why there is no Java stack.
fn record_marker(ctx: &SignalContext, tid: u32, code: i32, weight: u64) {
    let frame = [RawFrame::marker(code)];
    ctx.store.record(tid, &frame, weight);
}

fn take_buffer(ctx: &SignalContext, tid: u32) -> Option<&Buffer> {
    let start = tid as usize % BUFFERS;
    for i in 0..BUFFERS {
        let b = ctx.buffers.get((start + i) % BUFFERS)?;
        if b.busy.compare_exchange(false, true, Ordering::Acquire, Ordering::Relaxed).is_ok() {
            return Some(b);
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    /// SIGTRAPs [`on_sigtrap`] recognised as oxprof's perf samples.
    pub(super) static OUR_TRAPS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

    /// Whether the running kernel is at least `major.minor` (the integration
    /// tests have the same helper in `tests/common`).
    fn kernel_at_least(major: u32, minor: u32) -> bool {
        let release = std::fs::read_to_string("/proc/sys/kernel/osrelease").expect("kernel release");
        let mut parts = release.trim().split(|c: char| !c.is_ascii_digit()).filter_map(|p| p.parse::<u32>().ok());
        (parts.next().unwrap_or(0), parts.next().unwrap_or(0)) >= (major, minor)
    }

    /// perf_events counters with `sigtrap` reach oxprof's handler (the
    /// cookie is read where the kernel writes it), while any other SIGTRAP
    /// still reaches the handler that was installed before oxprof's.
    #[test]
    fn perf_sigtraps_are_taken_and_other_sigtraps_chained() {
        use crate::engine::perf::{self, Delivery};
        static PREVIOUS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        extern "C" fn previous(_: libc::c_int, _: *mut libc::siginfo_t, _: *mut c_void) {
            PREVIOUS.fetch_add(1, Ordering::Relaxed);
        }
        let delivery = perf::probe(1_000_000).expect("perf_events cpu-clock on this thread");
        if !kernel_at_least(5, 13) {
            // No `sigtrap` attribute before 5.13: the probe must have found that out.
            assert_eq!(delivery, Delivery::Prof);
            return;
        }
        assert_eq!(delivery, Delivery::Trap, "Linux 5.13+ has sigtrap counters");
        // SAFETY: installing a handler that only does a relaxed atomic add.
        unsafe {
            let mut sa: libc::sigaction = std::mem::zeroed();
            sa.sa_sigaction = previous as *const () as usize;
            sa.sa_flags = libc::SA_SIGINFO;
            assert_eq!(libc::sigaction(libc::SIGTRAP, &sa, ptr::null_mut()), 0);
        }
        install_trap().unwrap();
        // SAFETY: raising a signal whose handler (ours, chaining) is installed.
        assert_eq!(unsafe { libc::raise(libc::SIGTRAP) }, 0);
        assert_eq!(PREVIOUS.load(Ordering::Relaxed), 1, "a plain SIGTRAP must reach the previous handler");
        // A real counter on this thread, 1 ms: no context is armed, so the
        // handler records nothing, but it must be the one taking the signals.
        let counter = perf::open(gettid(), 1_000_000).expect("sigtrap counter");
        let start = crate::cputime::thread_cpu_ns();
        while crate::cputime::thread_cpu_ns() - start < 200_000_000 {
            std::hint::black_box(0u64);
        }
        drop(counter);
        let ours = OUR_TRAPS.load(Ordering::Relaxed);
        assert!(ours >= 20, "{ours} perf SIGTRAPs in 200 ms of CPU at 1 ms");
        assert_eq!(PREVIOUS.load(Ordering::Relaxed), 1, "perf SIGTRAPs leaked to the previous handler");
    }

    /// `periods` reads the overrun where the kernel writes it: a real POSIX
    /// CPU-time timer on this thread, at an interval far below the tick, so
    /// the signal it sends reports missed periods.
    #[test]
    fn periods_reads_a_real_timers_overrun() {
        static SUM: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        static SIGNALS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        extern "C" fn count(_: libc::c_int, info: *mut libc::siginfo_t, _: *mut c_void) {
            SIGNALS.fetch_add(1, Ordering::Relaxed);
            SUM.fetch_add(periods(info), Ordering::Relaxed);
        }
        // SIGUSR2, so other tests' SIGPROF handlers are not involved.
        // SAFETY: installing a handler that only does relaxed atomic adds.
        unsafe {
            let mut sa: libc::sigaction = std::mem::zeroed();
            sa.sa_sigaction = count as *const () as usize;
            sa.sa_flags = libc::SA_SIGINFO | libc::SA_RESTART;
            assert_eq!(libc::sigaction(libc::SIGUSR2, &sa, ptr::null_mut()), 0);
        }
        // SAFETY: plain data, zeroed is a valid start.
        let mut sev: libc::sigevent = unsafe { std::mem::zeroed() };
        sev.sigev_notify = libc::SIGEV_THREAD_ID;
        sev.sigev_signo = libc::SIGUSR2;
        sev.sigev_notify_thread_id = gettid() as libc::c_int;
        let mut timer: libc::timer_t = ptr::null_mut();
        // SAFETY: valid pointers; the timer is deleted below.
        assert_eq!(unsafe { libc::timer_create(libc::CLOCK_THREAD_CPUTIME_ID, &mut sev, &mut timer) }, 0);
        let period = libc::timespec { tv_sec: 0, tv_nsec: 100_000 };
        let spec = libc::itimerspec { it_interval: period, it_value: period };
        // SAFETY: arming the timer created above.
        assert_eq!(unsafe { libc::timer_settime(timer, 0, &spec, ptr::null_mut()) }, 0);
        // At least 300 ms of CPU and three signals: on a loaded machine the
        // kernel has been seen to hold this timer's signal back for longer.
        let start = crate::cputime::thread_cpu_ns();
        let mut burnt = 0;
        while burnt < 3_000_000_000 && (burnt < 300_000_000 || SIGNALS.load(Ordering::Relaxed) < 3) {
            std::hint::black_box(0u64);
            burnt = crate::cputime::thread_cpu_ns() - start;
        }
        // SAFETY: deleting our own timer; no signal is sent afterwards.
        unsafe { libc::timer_delete(timer) };
        let (signals, sum) = (SIGNALS.load(Ordering::Relaxed), SUM.load(Ordering::Relaxed));
        // Every 0.1 ms of CPU is a period; the tick (1-10 ms) sends far fewer
        // signals, and their overruns make up the rest. On a loaded machine
        // fewer signals may carry more periods each, and periods still
        // pending when the timer is deleted are lost, so only bounds are
        // checked: overruns were read (each signal stands for several
        // periods) and are not garbage (no more periods than elapsed).
        let elapsed = burnt / 100_000;
        assert!(signals >= 3 && signals * 5 < elapsed, "{signals} signals in {elapsed} periods");
        assert!(sum >= 2 * signals && sum <= elapsed + 100, "{signals} signals stood for {sum} periods ({elapsed} elapsed)");
        eprintln!("{signals} signals stood for {sum} of {elapsed} periods");
    }
}

//! signal-safe: The sampling signal handler: the only oxprof code that runs inside a signal.
//! Samples arrive as SIGPROF (ctimer, itimer, perf_events on old kernels) or
//! as SIGTRAP from perf_events counters with the `sigtrap` attribute. Neither
//! signal is oxprof's alone: [`on_sigtrap`] takes only oxprof's perf samples
//! (`TRAP_PERF` with oxprof's cookie) and [`on_sigprof`] only the signals of
//! oxprof's own timers and counters (see [`prof_origin`]); every other signal
//! goes to the handler that was installed before, as if oxprof were not there.
//! JDK 25's JFR, for one, samples CPU time with its own SIGPROF timers
//! (`jdk.CPUTimeSample`). SIGPROF is given back to that handler when a
//! recording stops ([`disarm`]); SIGTRAP stays (see [`install_trap`]).
//!
//! Each handler blocks the other signal while it runs, so a thread never
//! takes a sample inside another sample (the store and the perf rings
//! assume one writer per thread at a time).
//!
//! Rules for everything reachable from [`on_sigprof`] and [`on_sigtrap`]
//! (checked in review):
//! - no allocation, no locks, no formatting or logging, nothing that can panic
//!   (no `unwrap`, no unchecked indexing, no `thread_local!`);
//! - only async-signal-safe calls: `gettid`, `pthread_getspecific` on
//!   HotSpot's thread key (the `JNIEnv` is found from the thread's `Thread*`
//!   without `GetEnv`; `GetEnv`, which reads a thread-local of libjvm, only
//!   where that cannot be told, and only once the key shows the thread has
//!   set it: see `hotspot::thread_key`), `AsyncGetCallTrace` (designed for it)
//!   and `process_vm_readv` (the own walk's checked reads, see `safemem`);
//!   in `native_unwind`, `rt_sigqueueinfo` with signal 0 (its probe, which
//!   sends nothing), `process_vm_readv`, `getpid`, `clock_gettime`; when
//!   handing a signal on, `pthread_sigmask`, `sigemptyset`/`sigaddset`,
//!   `sigaction` and `raise`;
//! - memory that may not be mapped is read only through those checked reads,
//!   never with a plain load;
//! - `errno` is saved on entry and restored on exit;
//! - all memory used is preallocated in a [`SignalContext`] before the handler
//!   is armed, and freed only after [`disarm`] has waited for every running
//!   handler to leave.
//!
//! Walk results go to the lock-free [`SampleStore`]. A failed walk is stored as
//! a one-frame stack holding the error code, so it is counted, not dropped.

use std::ffi::c_void;
use std::ptr;
use std::sync::atomic::{AtomicBool, AtomicPtr, AtomicU64, AtomicUsize, Ordering};

use jvmti_sys::asgct::{ticks, ASGCT_CallFrame, ASGCT_CallTrace, AsyncGetCallTraceFn};
use jvmti_sys::{jint, JNIEnv, JavaVM, JNI_OK, JNI_VERSION_1_6};

use crate::engine::{ctimer, itimer, perf};
use crate::hotspot::frames::{self, ThreadState};
use crate::hotspot::frametypes::{self, Below};
use crate::hotspot::fullwalk;
use crate::hotspot::javawalk::{self, Walked};
use crate::hotspot::safemem;
use crate::hotspot::thread_key;
use crate::native::unwind::{self as native_unwind, OwnStack, MAX_NATIVE_FRAMES};
use crate::native::CStack;
use crate::sampling::cputime::{monotonic_ns, CpuSpent};
use crate::sampling::label_slots;
use crate::sampling::store::{sample_key, RawFrame, SampleStore};
use crate::sampling::wall_table;
use crate::trigger::traps;

/// `bci` of a synthetic frame for a Java thread that had no Java frame.
pub const MARK_NO_JAVA_FRAME: i32 = 1;
/// `bci` of a synthetic frame for a thread the JVM does not run Java on.
pub const MARK_NON_JAVA_THREAD: i32 = 2;
/// `bci` of the marker under which `OXPROF_CHECK_CPU_WALK=1` records the
/// own walk's stack of a sample where it differs from AsyncGetCallTrace's
/// (5 and 6 are the lock markers).
pub const MARK_OWN_WALK_DIFFERS: i32 = 7;
/// `bci` of the marker ending a stack that AsyncGetCallTrace and the own
/// walk both ended before the thread's first Java call, or that was cut at
/// `jstackdepth` frames (3 is taken by `alloc::MARK_ALLOC_CLASS`).
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

// signal-safe: off (allocates the buffers before the handler is armed)
impl Buffer {
    fn new(len: usize) -> Buffer {
        let frames = vec![RawFrame::default(); len].into_boxed_slice();
        Buffer { busy: AtomicBool::new(false), ptr: Box::into_raw(frames) as *mut RawFrame, len }
    }
}
// signal-safe: on

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

// signal-safe: off (built before the handler is armed)
impl SignalContext {
    /// Allocates the buffers (off the signal path).
    pub fn new(store: &'static SampleStore, asgct: AsyncGetCallTraceFn, vm: *mut JavaVM, depth: usize, weight: u64, per_thread: bool) -> Box<SignalContext> {
        let depth = depth.max(1);
        // Room for the native part in front of the Java frames.
        let buffers = std::array::from_fn(|_| Buffer::new(depth + MAX_NATIVE_FRAMES + 1));
        // On the Java thread starting the recording: find HotSpot's key, so
        // the handler knows when GetEnv is safe to call (see thread_key).
        if !vm.is_null() {
            match thread_key::find(jni_env(vm) as usize) {
                Some(key) => crate::log::debug(&format!("HotSpot's thread key: {key}")),
                None => crate::log::info("HotSpot's thread key was not found: a sample that lands in a thread being created can deadlock it"),
            }
        }
        Box::new(SignalContext { store, asgct, vm, depth, weight, per_thread, cstack: CStack::No, kernel_stacks: false, buffers })
    }

    /// Collects native frames (and kernel frames from perf rings) too.
    pub fn set_cstack(&mut self, cstack: CStack, kernel_stacks: bool) {
        self.cstack = cstack;
        self.kernel_stacks = kernel_stacks && cstack != CStack::No;
    }
}
// signal-safe: on

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

/// Which recording a signal samples for: CPU time (SIGPROF, SIGTRAP) or
/// wall-clock time (the wall sampler's SIGVTALRM).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Channel {
    Cpu = 0,
    Wall = 1,
}

static CONTEXTS: [AtomicPtr<SignalContext>; 2] = [const { AtomicPtr::new(ptr::null_mut()) }; 2];
static ENABLED: [AtomicBool; 2] = [const { AtomicBool::new(false) }; 2];
static ACTIVE: AtomicUsize = AtomicUsize::new(0);
/// Diagnostic (`OXPROF_SIGNAL_NOOP=1`): the handler returns at once, so a
/// benchmark measures what the engine's timers and signal delivery cost the
/// JVM, apart from any walk. Nothing is recorded.
static NOOP: AtomicBool = AtomicBool::new(false);

// signal-safe: off (read at start)
/// Reads `OXPROF_SIGNAL_NOOP` (off the signal path); true when it is on.
pub fn read_noop_switch() -> bool {
    let on = std::env::var_os("OXPROF_SIGNAL_NOOP").is_some_and(|v| v == "1");
    NOOP.store(on, Ordering::SeqCst);
    on
}
// signal-safe: on

use crate::sigchain::{hand_on, Previous, SigInfoHandler};

/// The action installed for `signo` now.
fn current_action(signo: libc::c_int) -> std::io::Result<libc::sigaction> {
    // SAFETY: reading the current action into a zeroed sigaction.
    unsafe {
        let mut old: libc::sigaction = std::mem::zeroed();
        if libc::sigaction(signo, ptr::null(), &mut old) != 0 {
            return Err(std::io::Error::last_os_error());
        }
        Ok(old)
    }
}

/// Installs `handler` for `signo` with the SA_SIGINFO signature, `signo` and
/// `also_block` blocked while it runs, and interrupted system calls
/// restarted. Returns the action it replaced.
fn set_handler(signo: libc::c_int, handler: SigInfoHandler, also_block: &[libc::c_int]) -> std::io::Result<libc::sigaction> {
    // SAFETY: a zeroed sigaction is a valid starting point; we fill the fields
    // we need and install a handler with the SA_SIGINFO signature.
    unsafe {
        let mut sa: libc::sigaction = std::mem::zeroed();
        sa.sa_sigaction = handler as *const () as usize;
        crate::hotspot::safemem::note_handler_entry(sa.sa_sigaction);
        sa.sa_flags = libc::SA_SIGINFO | libc::SA_RESTART;
        libc::sigemptyset(&mut sa.sa_mask);
        for &other in also_block {
            libc::sigaddset(&mut sa.sa_mask, other);
        }
        let mut old: libc::sigaction = std::mem::zeroed();
        if libc::sigaction(signo, &sa, &mut old) != 0 {
            return Err(std::io::Error::last_os_error());
        }
        Ok(old)
    }
}

/// Installs `handler` for `signo` and keeps the handler it replaces in
/// `prev`. The previous handler is saved before ours can run, so a signal
/// that arrives meanwhile is never handed to a stale one; if a third party
/// changed the handler between the two calls, the one replaced is kept.
fn take_over(signo: libc::c_int, handler: SigInfoHandler, also_block: &[libc::c_int], prev: &Previous) -> std::io::Result<()> {
    let ours = handler as *const () as usize;
    let old = current_action(signo)?;
    if old.sa_sigaction != ours {
        prev.save(&old, false);
    }
    let replaced = set_handler(signo, handler, also_block)?;
    if replaced.sa_sigaction != ours && replaced.sa_sigaction != old.sa_sigaction {
        prev.save(&replaced, false);
    }
    Ok(())
}

/// [`take_over`] unless `installed` says it was done already; notes it.
fn take_over_once(installed: &AtomicBool, signo: libc::c_int, handler: SigInfoHandler, also_block: &[libc::c_int], prev: &Previous) -> std::io::Result<()> {
    if installed.load(Ordering::SeqCst) {
        return Ok(());
    }
    take_over(signo, handler, also_block, prev)?;
    installed.store(true, Ordering::SeqCst);
    Ok(())
}

/// Whether [`on_sigprof`] is installed (see [`install`] and [`release_sigprof`]).
static PROF_INSTALLED: AtomicBool = AtomicBool::new(false);
/// The SIGPROF handler found at [`install`].
static PREV_PROF: Previous = Previous::new();

// signal-safe: off (installs and gives back the handler, outside it)
/// Installs the SIGPROF handler (idempotent) for the engines that signal with
/// SIGPROF. Other SIGPROFs go to the handler found here; [`disarm`] gives
/// SIGPROF back to it.
pub fn install() -> std::io::Result<()> {
    if !PROF_INSTALLED.load(Ordering::SeqCst) {
        // Another component's handler (JFR's, an application's): said, as
        // it may be one that replaced oxprof's in an earlier recording.
        if let Ok(now) = current_action(libc::SIGPROF) {
            if now.sa_sigaction != libc::SIG_DFL && now.sa_sigaction != libc::SIG_IGN {
                crate::log::info("SIGPROF has another component's handler: oxprof's goes in front of it and hands it every SIGPROF that is not oxprof's");
            }
        }
    }
    take_over_once(&PROF_INSTALLED, libc::SIGPROF, on_sigprof, &[libc::SIGTRAP, WALL_SIGNAL], &PREV_PROF)
}

/// Gives SIGPROF back to the handler [`install`] found, unless a SIGPROF is
/// still pending in the process: the engine is stopped by now, but a signal
/// of one of its timers can still wait on a thread that blocks SIGPROF, and
/// handed to `SIG_DFL` it would end the JVM. Then [`on_sigprof`] stays (it
/// drops oxprof's late signals and hands on the others) until the next
/// recording's end. A handler someone else installed over ours is left alone.
fn release_sigprof() {
    if !PROF_INSTALLED.load(Ordering::SeqCst) {
        return;
    }
    if sigprof_may_be_pending() {
        crate::log::debug("a SIGPROF is still pending: the SIGPROF handler stays installed until the next recording ends");
        return;
    }
    let ours = on_sigprof as *const () as usize;
    match current_action(libc::SIGPROF) {
        Ok(now) if now.sa_sigaction == ours => {
            let prev = PREV_PROF.action();
            // SAFETY: reinstalling the action that was there before ours.
            if unsafe { libc::sigaction(libc::SIGPROF, &prev, ptr::null_mut()) } != 0 {
                return;
            }
        }
        Ok(_) => crate::log::debug("the SIGPROF handler was replaced by another component; left as it is"),
        Err(_) => return,
    }
    PROF_INSTALLED.store(false, Ordering::SeqCst);
    itimer::forget();
}

/// Whether oxprof installed its handler for `signo` (SIGPROF, SIGTRAP or
/// the wall signal) and another component has replaced it since: then
/// oxprof's signals reach that component's handler, not oxprof's (see
/// `taken`). False when the action cannot be read.
pub fn handler_replaced(signo: libc::c_int) -> bool {
    let (installed, ours) = match signo {
        libc::SIGPROF => (&PROF_INSTALLED, on_sigprof as *const () as usize),
        libc::SIGTRAP => (&TRAP_INSTALLED, on_sigtrap as *const () as usize),
        WALL_SIGNAL => (&WALL_INSTALLED, on_wall_signal as *const () as usize),
        _ => return false,
    };
    installed.load(Ordering::SeqCst) && current_action(signo).is_ok_and(|now| now.sa_sigaction != ours)
}

/// The name of one of the sampling signals.
pub fn signal_name(signo: libc::c_int) -> &'static str {
    match signo {
        libc::SIGPROF => "SIGPROF",
        libc::SIGTRAP => "SIGTRAP",
        WALL_SIGNAL => "SIGVTALRM",
        _ => "signal",
    }
}

/// Whether SIGPROF is pending for the process or any of its threads, from
/// `ShdPnd`/`SigPnd` in `/proc/self/task/*/status`. True when that cannot be
/// read (then keeping our handler is the safe choice).
fn sigprof_may_be_pending() -> bool {
    let bit = 1u64 << (libc::SIGPROF - 1);
    let pending = |status: &str| {
        status
            .lines()
            .filter_map(|l| l.strip_prefix("SigPnd:").or_else(|| l.strip_prefix("ShdPnd:")))
            .any(|v| u64::from_str_radix(v.trim(), 16).map_or(true, |m| m & bit != 0))
    };
    let Ok(tasks) = std::fs::read_dir("/proc/self/task") else { return true };
    for task in tasks {
        let Ok(task) = task else { return true };
        match std::fs::read_to_string(task.path().join("status")) {
            Ok(status) if pending(&status) => return true,
            Ok(_) => {}
            // The thread ended meanwhile.
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(_) => return true,
        }
    }
    false
}
// signal-safe: on

/// `si_code` of a SIGTRAP sent by a perf_events counter (Linux 5.13+).
const TRAP_PERF: libc::c_int = 6;
/// Offset of `si_perf_data` in a Linux `siginfo_t` on x86_64 and arm64: the
/// three `int`s and padding (16), then the fault's `si_addr` (8), then the
/// union whose `_perf._data` comes first. The libc crate has no accessor.
const SI_PERF_DATA_OFFSET: usize = 24;
/// Offset of the POSIX timer's `si_value` (after `si_tid` and `si_overrun`)
/// and of SIGPOLL's `si_fd` (after the `long` `si_band`) in a 64-bit Linux
/// `siginfo_t`.
const SI_VALUE_OFFSET: usize = 24;
const SI_FD_OFFSET: usize = 24;
/// Offset of `si_pid` (kill's sender) in a Linux `siginfo_t`.
const SI_PID_OFFSET: usize = 16;
/// `si_code`s of a signal sent for a descriptor's I/O event (`F_SETSIG`):
/// `POLL_IN` to `POLL_HUP`.
const POLL_IN: libc::c_int = 1;
const POLL_HUP: libc::c_int = 6;

/// Reads a `T` at byte `offset` of the siginfo.
///
/// # Safety
/// `info` is the kernel's siginfo for the running handler and
/// `offset + size_of::<T>()` is at most 128 (its size).
unsafe fn info_field<T: Copy>(info: *const libc::siginfo_t, offset: usize) -> T {
    // SAFETY: the caller's contract; the read tolerates any alignment.
    unsafe { (info as *const u8).add(offset).cast::<T>().read_unaligned() }
}

/// Who sent a SIGPROF.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Origin {
    /// One of oxprof's engines: sample it.
    Ours,
    /// Anyone else: hand it to the previous handler.
    Foreign,
    /// A kernel signal whose details were lost, or one with no siginfo:
    /// neither sampled nor handed on.
    Unknown,
}

/// Tells oxprof's SIGPROFs from the rest, by how each engine's signal
/// looks (async-signal-safe):
/// - ctimer: `SI_TIMER` with [`ctimer::SIGEV_COOKIE`] as `si_value`
///   (JFR's timers, for one, carry a null value);
/// - itimer: `SI_KERNEL`, once oxprof has armed `ITIMER_PROF`
///   ([`itimer::sends_sigprof`]), the only SIGPROF the kernel sends
///   on its own;
/// - perf_events over SIGPROF: `POLL_IN`..`POLL_HUP` from a descriptor number
///   that one of oxprof's counters used ([`perf::is_signal_fd`]).
///
/// A signal of these kinds stays recognised after its timer or counter is
/// gone, so one still pending at stop is never taken for someone else's
/// (whose default action would end the JVM). `SI_USER` from pid 0 is a
/// signal the kernel could not attach details to (it ran out of queue
/// memory) or a `kill` from outside the process's pid namespace: it is
/// dropped.
fn prof_origin(info: *const libc::siginfo_t) -> Origin {
    if info.is_null() {
        return Origin::Unknown;
    }
    // SAFETY: the kernel passes a valid siginfo_t for the handler's duration.
    let code = unsafe { (*info).si_code };
    match code {
        // SAFETY: for SI_TIMER the union holds the timer fields; in bounds.
        libc::SI_TIMER if unsafe { info_field::<usize>(info, SI_VALUE_OFFSET) } == ctimer::SIGEV_COOKIE => Origin::Ours,
        libc::SI_KERNEL if itimer::sends_sigprof() => Origin::Ours,
        // SAFETY: for these codes the union holds SIGPOLL's fields; in bounds.
        POLL_IN..=POLL_HUP if perf::is_signal_fd(unsafe { info_field::<i32>(info, SI_FD_OFFSET) }) => Origin::Ours,
        // SAFETY: for SI_USER the union holds kill's fields; in bounds.
        libc::SI_USER if unsafe { info_field::<libc::pid_t>(info, SI_PID_OFFSET) } == 0 => Origin::Unknown,
        _ => Origin::Foreign,
    }
}

/// Whether [`on_sigtrap`] is installed (it stays, see [`install_trap`]).
static TRAP_INSTALLED: AtomicBool = AtomicBool::new(false);
/// The SIGTRAP handler found at install.
static PREV_TRAP: Previous = Previous::new();

/// Installs the SIGTRAP handler for perf_events `sigtrap` counters
/// (idempotent). It is never taken out again: a counter's signal can still be
/// pending after the counter is closed, and SIGTRAP's default action would
/// end the JVM with a core dump.
pub fn install_trap() -> std::io::Result<()> {
    take_over_once(&TRAP_INSTALLED, libc::SIGTRAP, on_sigtrap, &[libc::SIGPROF, WALL_SIGNAL], &PREV_TRAP)
}

/// The wall sampler's signal (as async-profiler's `wall` mode uses).
pub const WALL_SIGNAL: libc::c_int = libc::SIGVTALRM;
/// `si_value` of oxprof's wall signals (sent with `rt_tgsigqueueinfo`).
pub const WALL_COOKIE: usize = 0x6f78_7761_6c6c; // "oxwall"
/// Whether [`on_wall_signal`] is installed (it stays, like SIGTRAP's: a
/// signal can still be pending on a thread after the sampler stops).
static WALL_INSTALLED: AtomicBool = AtomicBool::new(false);
static PREV_WALL: Previous = Previous::new();

/// Installs the wall signal's handler (idempotent).
pub fn install_wall() -> std::io::Result<()> {
    take_over_once(&WALL_INSTALLED, WALL_SIGNAL, on_wall_signal, &[libc::SIGPROF, libc::SIGTRAP], &PREV_WALL)
}

/// Whether a wall signal is oxprof's: queued by this process with oxprof's
/// cookie.
fn is_our_wall_signal(info: *const libc::siginfo_t) -> bool {
    if info.is_null() {
        return false;
    }
    // SAFETY: the kernel passes a valid siginfo_t for the handler's duration.
    if unsafe { (*info).si_code } != libc::SI_QUEUE {
        return false;
    }
    // SAFETY: for SI_QUEUE the union holds pid, uid and the value; in bounds.
    let (pid, value) = unsafe { (info_field::<i32>(info, SI_PID_OFFSET), info_field::<usize>(info, SI_VALUE_OFFSET)) };
    // SAFETY: getpid is async-signal-safe and cannot fail.
    value == WALL_COOKIE && pid == unsafe { libc::getpid() }
}

/// The wall signal's handler: samples oxprof's wall signals, hands the others
/// on. See the module rules.
extern "C" fn on_wall_signal(signo: libc::c_int, info: *mut libc::siginfo_t, ucontext: *mut c_void) {
    // Checked reads fault only where the interrupted code lets SIGSEGV through.
    let _reads = safemem::HandlerReads::enter(ucontext);
    if is_our_wall_signal(info) {
        return take_sample(Channel::Wall, info, ucontext);
    }
    hand_on(&PREV_WALL, signo, info, ucontext);
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
    // SAFETY: for TRAP_PERF the union holds the perf fields; in bounds.
    let data = unsafe { info_field::<u64>(info, SI_PERF_DATA_OFFSET) };
    data == perf::SIGTRAP_COOKIE
}

/// The SIGTRAP handler: oxprof's perf samples are taken, any other SIGTRAP
/// (a breakpoint, another tool's counter) goes to the previous handler, or,
/// if there was none, to the default action as if oxprof had not been there.
/// See the module rules.
extern "C" fn on_sigtrap(signo: libc::c_int, info: *mut libc::siginfo_t, ucontext: *mut c_void) {
    // Checked reads fault only where the interrupted code lets SIGSEGV through.
    let _reads = safemem::HandlerReads::enter(ucontext);
    // SAFETY: __errno_location returns this thread's errno slot.
    let errno = unsafe { libc::__errno_location() };
    // SAFETY: the slot is valid for the thread's life.
    let saved = unsafe { *errno };
    let ours = !is_our_perf_trap(info) && traps::on_breakpoint(ucontext);
    // SAFETY: as above.
    unsafe { *errno = saved };
    if ours {
        return;
    }
    if is_our_perf_trap(info) {
        #[cfg(test)]
        tests::OUR_TRAPS.fetch_add(1, Ordering::Relaxed);
        return take_sample(Channel::Cpu, info, ucontext);
    }
    hand_on(&PREV_TRAP, signo, info, ucontext);
}

/// The SIGPROF handler: samples oxprof's own signals and hands the others to
/// the previous handler (see [`prof_origin`]). See the module rules.
extern "C" fn on_sigprof(signo: libc::c_int, info: *mut libc::siginfo_t, ucontext: *mut c_void) {
    // Checked reads fault only where the interrupted code lets SIGSEGV through.
    let _reads = safemem::HandlerReads::enter(ucontext);
    match prof_origin(info) {
        Origin::Ours => take_sample(Channel::Cpu, info, ucontext),
        Origin::Foreign => hand_on(&PREV_PROF, signo, info, ucontext),
        Origin::Unknown => {}
    }
}

// signal-safe: off (arms and disarms the handler, outside it)
/// Makes the CPU signals' handler record into `ctx`. Any previous context
/// must have been taken back with [`disarm`].
pub fn arm(ctx: Box<SignalContext>) {
    arm_channel(Channel::Cpu, ctx);
}

/// Makes the wall signal's handler record into `ctx` (see [`arm`]).
pub fn arm_wall(ctx: Box<SignalContext>) {
    arm_channel(Channel::Wall, ctx);
}

fn arm_channel(channel: Channel, ctx: Box<SignalContext>) {
    // Another agent may have replaced the fault handler checked reads rely on.
    safemem::recheck();
    let c = channel as usize;
    if let (Some(ctx_slot), Some(enabled), Some(spent)) = (CONTEXTS.get(c), ENABLED.get(c), HANDLER.get(c)) {
        spent.reset();
        let old = ctx_slot.swap(Box::into_raw(ctx), Ordering::SeqCst);
        debug_assert!(old.is_null());
        enabled.store(true, Ordering::SeqCst);
    }
}

/// Stops CPU recording, waits until no handler is running, gives SIGPROF
/// back to its previous handler (see [`release_sigprof`]; the engine must be
/// stopped first), and returns the context.
pub fn disarm() -> Option<Box<SignalContext>> {
    let ctx = disarm_channel(Channel::Cpu);
    release_sigprof();
    ctx
}

/// Stops wall recording (the sampler thread must be stopped first) and
/// returns the context.
pub fn disarm_wall() -> Option<Box<SignalContext>> {
    disarm_channel(Channel::Wall)
}

fn disarm_channel(channel: Channel) -> Option<Box<SignalContext>> {
    let c = channel as usize;
    let (ctx_slot, enabled) = (CONTEXTS.get(c)?, ENABLED.get(c)?);
    enabled.store(false, Ordering::SeqCst);
    wait_for_handlers();
    let p = ctx_slot.swap(ptr::null_mut(), Ordering::SeqCst);
    wait_for_handlers();
    // SAFETY: `p` came from Box::into_raw in `arm_channel`, and no handler can
    // still see it: handlers check ENABLED after announcing themselves in ACTIVE.
    (!p.is_null()).then(|| unsafe { Box::from_raw(p) })
}

fn wait_for_handlers() {
    while ACTIVE.load(Ordering::SeqCst) != 0 {
        std::thread::yield_now();
    }
}
// signal-safe: on

/// CPU time spent in the handler's sampling work per channel, since it was armed.
static HANDLER: [CpuSpent; 2] = [const { CpuSpent::new() }; 2];
/// The handler's parts, for the debug log: AsyncGetCallTrace, the frame-type
/// walk after it, the own walk (the native part is `native_unwind`'s).
static PART_ASGCT: CpuSpent = CpuSpent::new();
static PART_TYPES: CpuSpent = CpuSpent::new();
static PART_OWN: CpuSpent = CpuSpent::new();

/// Mean CPU ns of the handler's parts (AsyncGetCallTrace, frame types, native, own walk), where measured.
pub fn part_means_ns() -> [u64; 4] {
    [PART_ASGCT.mean_ns().unwrap_or(0), PART_TYPES.mean_ns().unwrap_or(0), native_unwind::mean_ns().unwrap_or(0), PART_OWN.mean_ns().unwrap_or(0)]
}

/// Mean CPU nanoseconds of one CPU sample in the handler (walks, native
/// part, store), if any.
pub fn handler_mean_ns() -> Option<u64> {
    HANDLER[Channel::Cpu as usize].mean_ns()
}

/// Mean CPU nanoseconds of one wall sample in the handler, if any.
pub fn wall_handler_mean_ns() -> Option<u64> {
    HANDLER[Channel::Wall as usize].mean_ns()
}

/// Takes one sample for a signal of oxprof's engines. See the module rules.
fn take_sample(channel: Channel, info: *mut libc::siginfo_t, ucontext: *mut c_void) {
    // SAFETY: __errno_location returns this thread's errno slot.
    let errno = unsafe { libc::__errno_location() };
    // SAFETY: the slot is valid for the thread's life.
    let saved = unsafe { *errno };
    ACTIVE.fetch_add(1, Ordering::SeqCst);
    let c = channel as usize;
    let (ctx_slot, enabled, spent) = (CONTEXTS.get(c), ENABLED.get(c), HANDLER.get(c));
    if let (Some(ctx_slot), Some(enabled), Some(spent)) = (ctx_slot, enabled, spent) {
        if enabled.load(Ordering::SeqCst) && !NOOP.load(Ordering::Relaxed) && (channel != Channel::Cpu || traps::sample_allowed()) {
            let ctx = ctx_slot.load(Ordering::SeqCst);
            if !ctx.is_null() {
                let call = spent.begin();
                let parts = call.parts_timed();
                // SAFETY: a non-null context stays alive while ACTIVE > 0 (see disarm).
                let ctx = unsafe { &*ctx };
                match channel {
                    Channel::Cpu => {
                        sample(ctx, ucontext, ctx.weight.saturating_mul(periods(info)), parts);
                    }
                    Channel::Wall => wall_sample(ctx, ucontext, parts),
                }
                spent.end(call);
            }
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

/// The calling thread's JNIEnv, or null for a thread the JVM does not know
/// or has not finished setting up (a thread being created or ending).
fn jni_env(vm: *mut JavaVM) -> *mut JNIEnv {
    // GetEnv's first read of libjvm's thread-local on a thread allocates it
    // with malloc: in a signal that interrupted malloc, the thread waits for
    // itself forever (see thread_key). An unknown key keeps the old way.
    if thread_key::current_is_set() == Some(false) {
        return ptr::null_mut();
    }
    // Better: no GetEnv at all (its thread-local read can still take glibc's
    // slow path, which allocates, after a dlopen of a library with
    // thread-locals). GetEnv only where the env cannot be told this way.
    if let Some(env) = thread_key::current_env() {
        return env as *mut JNIEnv;
    }
    let mut env: *mut c_void = ptr::null_mut();
    // SAFETY: `vm` is the live JavaVM. GetEnv reads the JVM's thread-local
    // current-thread pointer, which exists once the key is set (above).
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

/// Records one sample of `weight` on the calling thread and returns its
/// stack's slot, and whether the thread runs Java (has a `JNIEnv`).
/// `timed`: count the CPU time of its parts (see `cputime`).
fn sample(ctx: &SignalContext, ucontext: *mut c_void, weight: u64, timed: bool) -> (Option<u32>, bool) {
    let tid = gettid();
    let env = jni_env(ctx.vm);
    if env.is_null() && ctx.cstack == CStack::No {
        return (record_marker(ctx, tid, 0, MARK_NON_JAVA_THREAD, weight), false);
    }
    // The context labels the thread's Java code set (0 for other threads).
    let labels = if env.is_null() { 0 } else { label_slots::current(tid) };
    let Some(buffer) = take_buffer(ctx, tid) else {
        ctx.store.count_dropped();
        return (None, !env.is_null());
    };
    let stack = frames::layout().map_or_else(OwnStack::default, |l| match env.is_null() {
        true => l.own_stack(thread_key::current(), false),
        false => l.own_stack(l.thread(env as usize), true),
    });
    let (native, cut) = native_part(ctx, tid, ucontext, stack, buffer, timed);
    if env.is_null() {
        // A native walk cut at its room keeps its leaf-most frames under
        // `[truncated]` (a failed walk), never passed off as whole.
        let code = if cut { MARK_TRUNCATED } else { MARK_NON_JAVA_THREAD };
        let slot = record_native_marker(ctx, buffer, native, (tid, 0), code, weight);
        buffer.busy.store(false, Ordering::Release);
        return (slot, false);
    }
    // What the thread is doing: its own JavaThread's state (see `frames`).
    let state = frames::layout().map_or(ThreadState::Unknown, |l| l.java_state(l.thread(env as usize))) as u8;
    let depth = ctx.depth.min(buffer.len.saturating_sub(native + 1));
    // SAFETY: `native + depth < buffer.len`: the Java frames follow the native ones.
    let java = unsafe { buffer.ptr.add(native) };
    let tid_key = sample_key(if ctx.per_thread { tid } else { 0 }, state);
    if cut {
        // Native frames were left out between these and the Java frames:
        // the contiguous leaf-most part is kept under `[truncated]`.
        let slot = record_native_marker(ctx, buffer, native, (tid_key, labels), MARK_TRUNCATED, weight);
        buffer.busy.store(false, Ordering::Release);
        return (slot, true);
    }
    // The own complete walk first (see `fullwalk`); AsyncGetCallTrace and
    // what follows it where that walk gives up. While checking, the own walk
    // runs after the other, to compare (see `check_own_walk`).
    let checking = fullwalk::checking_signal();
    let part = PART_OWN.begin_if(timed);
    // SAFETY: we own the buffer's `depth` frames after the native part (busy flag).
    let own = if checking { None } else { fullwalk::on_signal(env as usize, ucontext, unsafe { std::slice::from_raw_parts_mut(java, depth) }) };
    PART_OWN.end(part);
    if let Some(n) = own {
        let slot = if n > 0 {
            let mut len = native + n;
            if n >= depth {
                // The walk filled its room (`jstackdepth`): the frames below
                // are cut, which the marker at the root says.
                // SAFETY: `native + depth < buffer.len` (see `depth`) and
                // `n <= depth`: the slot after the Java frames is ours.
                unsafe { buffer.ptr.add(len).write(RawFrame::marker(MARK_TRUNCATED)) };
                len += 1;
            }
            // SAFETY: the native part, the walk's `n <= depth` Java frames and any marker are in our buffer.
            let frames = unsafe { std::slice::from_raw_parts(buffer.ptr, len) };
            ctx.store.record_slot(tid_key, labels, frames, weight)
        } else {
            record_native_marker(ctx, buffer, native, (sample_key(tid, state), labels), MARK_NO_JAVA_FRAME, weight)
        };
        buffer.busy.store(false, Ordering::Release);
        return (slot, true);
    }
    let mut trace = ASGCT_CallTrace { env_id: env, num_frames: 0, frames: java as *mut ASGCT_CallFrame };
    let part = PART_ASGCT.begin_if(timed);
    // SAFETY: `trace.frames` has room for `depth` frames, we own the buffer
    // (busy flag), the layouts match (asserted above), and `ucontext` is the
    // kernel's context for this signal.
    unsafe { (ctx.asgct)(&mut trace, depth as jint, ucontext) };
    PART_ASGCT.end(part);
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
    let slot = if n > 0 {
        let mut n = (n as usize).min(depth);
        if asgct_ok {
            // SAFETY: we own the buffer's `depth` frames after the native part
            // (busy flag); the walk wrote the first `n`.
            let room = unsafe { std::slice::from_raw_parts_mut(java, depth) };
            let part = PART_TYPES.begin_if(timed);
            let below = frametypes::on_success(env as usize, ucontext, room, n);
            PART_TYPES.end(part);
            match below {
                Below::Nothing => {}
                Below::Completed(k) | Below::Replaced(k) => n = k.min(depth),
                Below::Cut(k) => (n, partial) = (k.min(depth), Some(MARK_TRUNCATED)),
            }
        }
        if partial.is_none() && n >= depth {
            // Cut at `jstackdepth` (see the own walk's case above).
            partial = Some(MARK_TRUNCATED);
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
        let slot = ctx.store.record_slot(tid_key, labels, frames, weight);
        if checking && partial.is_none() {
            check_own_walk(ctx, (env as usize, ucontext), buffer, (native, n, depth), (tid_key, labels, weight));
        }
        slot
    } else if n == 0 {
        record_native_marker(ctx, buffer, native, (sample_key(tid, state), labels), MARK_NO_JAVA_FRAME, weight)
    } else if n == ticks::UNKNOWN_NOT_JAVA {
        // JIT compiler and other JVM-internal threads land here too; the dump
        // tells them from application threads, so keep the thread id.
        record_native_marker(ctx, buffer, native, (sample_key(tid, state), labels), n, weight)
    } else {
        record_native_marker(ctx, buffer, native, (tid_key, labels), n, weight)
    };
    buffer.busy.store(false, Ordering::Release);
    (slot, true)
}

/// Frames of the own walk compared with AsyncGetCallTrace's under
/// `OXPROF_CHECK_CPU_WALK=1` (a local array in the handler).
const CHECKED_FRAMES: usize = 96;
/// Own walks compared with AsyncGetCallTrace's, and how many differed.
static CHECKED: AtomicU64 = AtomicU64::new(0);
static DIFFERED: AtomicU64 = AtomicU64::new(0);

/// (compared, differed) own walks under `OXPROF_CHECK_CPU_WALK=1`.
pub fn checked_walks() -> (u64, u64) {
    (CHECKED.load(Ordering::Relaxed), DIFFERED.load(Ordering::Relaxed))
}

/// Under `OXPROF_CHECK_CPU_WALK=1`, after AsyncGetCallTrace's stack of `n`
/// Java frames was recorded from `buffer` (after `native` native frames;
/// room for `depth`): runs the own walk and counts whether it names the
/// same frames; where not, records its stack too, under its marker, so that
/// the profile shows both. Kept out of [`sample`] so that its frame array
/// takes stack only while checking.
#[inline(never)]
fn check_own_walk(
    ctx: &SignalContext,
    (env, ucontext): (usize, *mut c_void),
    buffer: &Buffer,
    (native, n, depth): (usize, usize, usize),
    (key, labels, weight): (u32, u32, u64),
) {
    let mut own = [RawFrame::default(); CHECKED_FRAMES];
    let Some(k) = fullwalk::on_signal(env, ucontext, &mut own[..depth.min(CHECKED_FRAMES)]) else { return };
    // SAFETY: the `n <= depth` Java frames just recorded are in our buffer (busy flag).
    let theirs = unsafe { std::slice::from_raw_parts(buffer.ptr.add(native), n) };
    let mine = own.get(..k).unwrap_or(&[]);
    if walks_agree(mine, theirs) || native + k >= buffer.len {
        return;
    }
    // SAFETY: `native + k + 1 <= buffer.len` frames, ours (busy flag); `mine`
    // is a local array, not the buffer.
    unsafe {
        let java = buffer.ptr.add(native);
        std::ptr::copy_nonoverlapping(mine.as_ptr(), java, k);
        java.add(k).write(RawFrame::marker(MARK_OWN_WALK_DIFFERS));
        ctx.store.record_slot(key, labels, std::slice::from_raw_parts(buffer.ptr, native + k + 1), weight);
    }
}

/// Whether the own walk's frames `mine` name what AsyncGetCallTrace's
/// (completed) `theirs` name: the same methods and bytecode indices, frame
/// by frame (not the types: the frame-type walk's alignment by method gets
/// a method inlined into itself wrong), as far as `mine` holds (at most [`CHECKED_FRAMES`]).
/// A bci of -1 (AsyncGetCallTrace's "no bci" for a compiled frame) matches
/// any. Counts both.
fn walks_agree(mine: &[RawFrame], theirs: &[RawFrame]) -> bool {
    CHECKED.fetch_add(1, Ordering::Relaxed);
    let whole = mine.len() < CHECKED_FRAMES;
    let same_len = if whole { mine.len() == theirs.len() } else { theirs.len() >= mine.len() };
    let same =
        same_len && mine.iter().zip(theirs).all(|(a, b)| a.method == b.method && (a.java_bci() == b.java_bci() || b.java_bci() == -1 || a.java_bci() == -1));
    if !same {
        DIFFERED.fetch_add(1, Ordering::Relaxed);
    }
    same
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
///
/// A candidate is used only when it points into JVM-generated code. The
/// words are read through the native unwinder's checked reads: the
/// interrupted `rsp` is usually the live top of this thread's stack, but
/// nothing guarantees it (code may use `rsp` oddly, or sit at the very top
/// of a mapping), so a plain load could fault. The context is restored
/// afterwards.
fn recover(ctx: &SignalContext, trace: &mut ASGCT_CallTrace, depth: usize, ucontext: *mut c_void) {
    if ucontext.is_null() {
        return;
    }
    let uc = ucontext as *mut libc::ucontext_t;
    // SAFETY: the kernel passed a valid ucontext for this signal.
    let gregs = unsafe { &mut (*uc).uc_mcontext.gregs };
    let (rip, rsp, rbp) = (libc::REG_RIP as usize, libc::REG_RSP as usize, libc::REG_RBP as usize);
    let (Some(&pc0), Some(&sp0), Some(&fp0)) = (gregs.get(rip), gregs.get(rsp), gregs.get(rbp)) else { return };
    let (sp, fp) = (sp0 as usize, fp0 as usize);
    if sp == 0 || sp % 8 != 0 {
        return;
    }
    let mut stack = native_unwind::StackWindow::new(sp);
    // [sp] and [sp+8].
    let Some((at_sp, above_sp)) = stack.read(sp) else { return };
    let frame_fp_ok = fp > sp && fp - sp < 4096 && fp % 8 == 0;
    for attempt in 0..3 {
        let (new_pc, new_sp, new_fp) = match attempt {
            0 => (at_sp, sp + 8, fp),
            1 => (above_sp, sp + 16, at_sp),
            // [fp] is the caller's fp, [fp+8] the return address.
            _ if frame_fp_ok => match stack.read(fp) {
                Some((saved_fp, ret)) => (ret, fp + 16, saved_fp),
                None => return,
            },
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
/// (`native_unwind`); returns its length (0 with `cstack=no`) and whether
/// it was cut for want of room.
fn native_part(ctx: &SignalContext, tid: u32, ucontext: *mut c_void, stack: OwnStack, buffer: &Buffer, timed: bool) -> (usize, bool) {
    if ctx.cstack == CStack::No {
        return (0, false);
    }
    let room = MAX_NATIVE_FRAMES.min(buffer.len.saturating_sub(1));
    // SAFETY: we own the buffer (busy flag) and it holds `buffer.len > room` frames.
    let out = unsafe { std::slice::from_raw_parts_mut(buffer.ptr, room) };
    native_unwind::collect(timed, tid, ucontext, (ctx.kernel_stacks, ctx.cstack == CStack::Dwarf), stack, in_code, out)
}

/// Records the native part followed by a marker frame naming why there is
/// no Java stack (a one-frame stack when there is no native part), under
/// (thread key, label set).
fn record_native_marker(ctx: &SignalContext, buffer: &Buffer, native: usize, (tid, labels): (u32, u32), code: i32, weight: u64) -> Option<u32> {
    if native == 0 || native >= buffer.len {
        return record_marker(ctx, tid, labels, code, weight);
    }
    // SAFETY: we own the buffer and `native < buffer.len`.
    let frames = unsafe {
        buffer.ptr.add(native).write(RawFrame::marker(code));
        std::slice::from_raw_parts(buffer.ptr, native + 1)
    };
    ctx.store.record_slot(tid, labels, frames, weight)
}

/// Records a one-frame stack naming why there is no Java stack.
fn record_marker(ctx: &SignalContext, tid: u32, labels: u32, code: i32, weight: u64) -> Option<u32> {
    let frame = [RawFrame::marker(code)];
    ctx.store.record_slot(tid, labels, &frame, weight)
}

/// One wall-clock sample: weighed by the wall time since the thread was
/// last accounted for (see `wall_table`), then its slot and CPU time noted
/// for the sampler. A thread without Java is noted and not recorded.
fn wall_sample(ctx: &SignalContext, ucontext: *mut c_void, timed: bool) {
    let tid = gettid();
    let weight = wall_table::take_weight(tid, monotonic_ns()).unwrap_or(ctx.weight);
    if jni_env(ctx.vm).is_null() {
        wall_table::finish(tid, wall_table::NOT_JAVA, 0);
        return;
    }
    let (slot, _) = sample(ctx, ucontext, weight, timed);
    wall_table::finish(tid, slot.unwrap_or(wall_table::NO_SLOT), crate::sampling::cputime::thread_cpu_ns());
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
    use jvmti_sys::asgct::ASGCT_CallFrame;
    use std::sync::atomic::AtomicI32;

    /// SIGTRAPs [`on_sigtrap`] recognised as oxprof's perf samples.
    pub(super) static OUR_TRAPS: AtomicU64 = AtomicU64::new(0);

    /// Whether the running kernel is at least `major.minor` (the integration
    /// tests have the same helper in `tests/common`).
    fn kernel_at_least(major: u32, minor: u32) -> bool {
        let release = std::fs::read_to_string("/proc/sys/kernel/osrelease").expect("kernel release");
        let mut parts = release.trim().split(|c: char| !c.is_ascii_digit()).filter_map(|p| p.parse::<u32>().ok());
        (parts.next().unwrap_or(0), parts.next().unwrap_or(0)) >= (major, minor)
    }

    /// Serialises the tests that install process-wide handlers, arm the
    /// handler or change the perf engine's delivery.
    fn serial() -> std::sync::MutexGuard<'static, ()> {
        static SIGNALS: std::sync::Mutex<()> = std::sync::Mutex::new(());
        SIGNALS.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Signals the handlers installed before oxprof's got in these tests.
    static TRAP_PREVIOUS: AtomicU64 = AtomicU64::new(0);
    static PROF_PREVIOUS: AtomicU64 = AtomicU64::new(0);
    /// Of those SIGPROFs, the ones a timer sent.
    static PROF_PREVIOUS_TIMER: AtomicU64 = AtomicU64::new(0);

    extern "C" fn trap_previous(_: libc::c_int, _: *mut libc::siginfo_t, _: *mut c_void) {
        TRAP_PREVIOUS.fetch_add(1, Ordering::Relaxed);
    }

    extern "C" fn prof_previous(_: libc::c_int, info: *mut libc::siginfo_t, _: *mut c_void) {
        PROF_PREVIOUS.fetch_add(1, Ordering::Relaxed);
        // SAFETY: the kernel's siginfo for this signal.
        if !info.is_null() && unsafe { (*info).si_code } == libc::SI_TIMER {
            PROF_PREVIOUS_TIMER.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Installs `handler` for `signo` as another component would.
    fn install_foreign(signo: libc::c_int, handler: SigInfoHandler) {
        // SAFETY: installing a handler that only does relaxed atomic adds.
        unsafe {
            let mut sa: libc::sigaction = std::mem::zeroed();
            sa.sa_sigaction = handler as *const () as usize;
            sa.sa_flags = libc::SA_SIGINFO | libc::SA_RESTART;
            assert_eq!(libc::sigaction(signo, &sa, ptr::null_mut()), 0);
        }
    }

    /// [`trap_previous`], then oxprof's SIGTRAP handler over it (once per
    /// process: oxprof's stays).
    fn trap_handlers() {
        static ONCE: std::sync::Once = std::sync::Once::new();
        ONCE.call_once(|| {
            install_foreign(libc::SIGTRAP, trap_previous);
            install_trap().unwrap();
        });
    }

    /// The action installed for `signo`.
    fn action_of(signo: libc::c_int) -> libc::sigaction {
        // SAFETY: reading the current action into a zeroed sigaction.
        unsafe {
            let mut sa: libc::sigaction = std::mem::zeroed();
            assert_eq!(libc::sigaction(signo, ptr::null(), &mut sa), 0);
            sa
        }
    }

    /// A JavaVM whose GetEnv answers that the thread is not attached (each
    /// sample is then a one-frame stack and no JVM is needed), or, with
    /// `attached`, hands out a dummy env so that samples call the walk.
    fn fake_vm(attached: bool) -> *mut JavaVM {
        unsafe extern "C" fn detached(_: *mut JavaVM, env: *mut *mut c_void, _: jint) -> jint {
            // SAFETY: GetEnv's out-parameter.
            unsafe { *env = ptr::null_mut() };
            jvmti_sys::JNI_EDETACHED
        }
        unsafe extern "C" fn attached_env(_: *mut JavaVM, env: *mut *mut c_void, _: jint) -> jint {
            static DUMMY: u64 = 0;
            // SAFETY: GetEnv's out-parameter; the walk stand-ins never use the env.
            unsafe { *env = &DUMMY as *const u64 as *mut c_void };
            JNI_OK as jint
        }
        // SAFETY: the interface is plain data (pointers and options), all null.
        let mut iface: jvmti_sys::JNIInvokeInterface_ = unsafe { std::mem::zeroed() };
        iface.GetEnv = Some(if attached { attached_env } else { detached });
        let iface: &'static jvmti_sys::JNIInvokeInterface_ = Box::leak(Box::new(iface));
        Box::leak(Box::new(iface as JavaVM))
    }

    /// A stand-in for AsyncGetCallTrace: no Java frame.
    unsafe extern "C" fn no_frames(trace: *mut ASGCT_CallTrace, _: jint, _: *mut c_void) {
        // SAFETY: the handler passes its trace.
        unsafe { (*trace).num_frames = 0 };
    }

    /// Arms the handler with a new store, 1 ms per period.
    fn arm_store(vm: *mut JavaVM, walk: AsyncGetCallTraceFn) -> &'static SampleStore {
        let store: &'static SampleStore = Box::leak(Box::new(SampleStore::new(256, 4096).unwrap()));
        arm(SignalContext::new(store, walk, vm, 8, 1_000_000, false));
        store
    }

    /// The weight of everything in `store`, in ms.
    fn weight_ms(store: &SampleStore) -> u64 {
        store.snapshot().iter().map(|t| t.total).sum::<u64>() / 1_000_000
    }

    /// Sends `signo` to this thread with a siginfo of our making (a thread
    /// may send itself any `si_code`): `code`, and the words at bytes 16 and
    /// 24 (`si_pid`, `si_band`, `si_tid` and `si_overrun`; `si_value`,
    /// `si_fd`, `si_perf_data`). It is handled before this returns.
    fn send_self(signo: libc::c_int, code: libc::c_int, at16: u64, at24: u64) {
        // SAFETY: plain data, zeroed is a valid start; the writes stay
        // inside the 128-byte siginfo_t.
        let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
        let p = &mut info as *mut libc::siginfo_t as *mut u8;
        // SAFETY: as above.
        unsafe {
            p.cast::<i32>().write_unaligned(signo);
            p.add(8).cast::<i32>().write_unaligned(code);
            p.add(16).cast::<u64>().write_unaligned(at16);
            p.add(24).cast::<u64>().write_unaligned(at24);
        }
        // SAFETY: queues a signal to this thread, whose handler is installed.
        let rc = unsafe { libc::syscall(libc::SYS_rt_tgsigqueueinfo, libc::getpid(), gettid(), signo, &info) };
        assert_eq!(rc, 0, "rt_tgsigqueueinfo: {}", std::io::Error::last_os_error());
    }

    /// The descriptor of the perf_events counter opened last.
    fn newest_perf_fd() -> i32 {
        std::fs::read_dir("/proc/self/fd")
            .unwrap()
            .filter_map(|e| e.ok())
            .filter(|e| std::fs::read_link(e.path()).is_ok_and(|l| l.to_string_lossy().contains("perf_event")))
            .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
            .max()
            .expect("a perf_events descriptor")
    }

    /// perf_events counters with `sigtrap` reach oxprof's handler (the
    /// cookie is read where the kernel writes it), while any other SIGTRAP
    /// still reaches the handler that was installed before oxprof's.
    #[test]
    fn perf_sigtraps_are_taken_and_other_sigtraps_chained() {
        use crate::engine::perf::{self, Delivery};
        let _serial = serial();
        let delivery = perf::probe(1_000_000).expect("perf_events cpu-clock on this thread");
        if !kernel_at_least(5, 13) {
            // No `sigtrap` attribute before 5.13: the probe must have found that out.
            assert_eq!(delivery, Delivery::Prof);
            return;
        }
        assert_eq!(delivery, Delivery::Trap, "Linux 5.13+ has sigtrap counters");
        trap_handlers();
        let (previous, ours) = (TRAP_PREVIOUS.load(Ordering::Relaxed), OUR_TRAPS.load(Ordering::Relaxed));
        // SAFETY: raising a signal whose handler (ours, chaining) is installed.
        assert_eq!(unsafe { libc::raise(libc::SIGTRAP) }, 0);
        assert_eq!(TRAP_PREVIOUS.load(Ordering::Relaxed), previous + 1, "a plain SIGTRAP must reach the previous handler");
        // A real counter on this thread, 1 ms: no context is armed, so the
        // handler records nothing, but it must be the one taking the signals.
        let counter = perf::open(gettid(), 1_000_000).expect("sigtrap counter");
        let start = crate::sampling::cputime::thread_cpu_ns();
        while crate::sampling::cputime::thread_cpu_ns() - start < 200_000_000 {
            std::hint::black_box(0u64);
        }
        drop(counter);
        let ours = OUR_TRAPS.load(Ordering::Relaxed) - ours;
        assert!(ours >= 20, "{ours} perf SIGTRAPs in 200 ms of CPU at 1 ms");
        assert_eq!(TRAP_PREVIOUS.load(Ordering::Relaxed), previous + 1, "perf SIGTRAPs leaked to the previous handler");
    }

    /// Each engine's SIGPROF is sampled (and weighed), every other SIGPROF
    /// reaches the handler that was there before, none of those lands in
    /// the store, and the previous handler is back once the recording stops.
    #[test]
    fn only_oxprofs_sigprofs_are_sampled_and_the_rest_reach_the_previous_handler() {
        use crate::engine::{itimer, perf};
        let _serial = serial();
        install_foreign(libc::SIGPROF, prof_previous);
        install().unwrap();
        let store = arm_store(fake_vm(false), no_frames);
        let previous = || PROF_PREVIOUS.load(Ordering::Relaxed);
        let before = previous();
        let check = |what: &str, ms: u64, handed_on: u64| {
            assert_eq!(weight_ms(store), ms, "{what}: sampled weight");
            assert_eq!(previous() - before, handed_on, "{what}: signals handed to the previous handler");
        };
        // ctimer's: a timer with oxprof's value, here with two overruns.
        send_self(libc::SIGPROF, libc::SI_TIMER, 2 << 32, ctimer::SIGEV_COOKIE as u64);
        check("oxprof's timer", 3, 0);
        // Another timer (JFR's CPU-time sampler passes a null value).
        send_self(libc::SIGPROF, libc::SI_TIMER, 2 << 32, 0);
        check("a foreign timer", 3, 1);
        // SAFETY: raising a signal whose handler (ours, chaining) is installed.
        assert_eq!(unsafe { libc::raise(libc::SIGPROF) }, 0);
        check("raise", 3, 2);
        // What ITIMER_PROF sends is oxprof's only once oxprof armed it.
        send_self(libc::SIGPROF, libc::SI_KERNEL, 0, 0);
        check("an itimer that is not oxprof's", 3, 3);
        itimer::start(100_000_000_000).unwrap();
        send_self(libc::SIGPROF, libc::SI_KERNEL, 0, 0);
        itimer::stop();
        check("oxprof's itimer", 4, 3);
        // perf_events over SIGPROF: POLL_IN naming an oxprof counter's descriptor.
        let delivery = perf::delivery();
        perf::set_delivery(perf::Delivery::Prof);
        let counter = perf::open(gettid(), 100_000_000_000).expect("perf_events counter");
        perf::set_delivery(delivery);
        let fd = newest_perf_fd();
        send_self(libc::SIGPROF, POLL_IN, 1, fd as u64);
        check("oxprof's counter", 5, 3);
        send_self(libc::SIGPROF, POLL_IN, 1, 0);
        check("I/O on another descriptor", 5, 4);
        drop(counter);
        // Details lost (no queue memory for a kernel signal): neither.
        send_self(libc::SIGPROF, libc::SI_USER, 0, 0);
        check("no details", 5, 4);
        drop(disarm());
        assert_eq!(action_of(libc::SIGPROF).sa_sigaction, prof_previous as *const () as usize, "SIGPROF given back after the recording");
        send_self(libc::SIGPROF, libc::SI_TIMER, 0, ctimer::SIGEV_COOKIE as u64);
        assert_eq!(previous() - before, 5, "after the recording, SIGPROF goes straight to the previous handler");
    }

    /// Real timers: oxprof's ctimer and a foreign timer like JFR's on the
    /// same thread's CPU clock. Each reaches its own handler: the store's
    /// weight is the CPU time (not twice it), the other handler gets the
    /// foreign timer's signals.
    #[test]
    fn oxprofs_timer_and_a_foreign_timer_each_reach_their_own_handler() {
        let _serial = serial();
        install_foreign(libc::SIGPROF, prof_previous);
        install().unwrap();
        let store = arm_store(fake_vm(false), no_frames);
        let foreign_before = PROF_PREVIOUS_TIMER.load(Ordering::Relaxed);
        let ours = ctimer::create(gettid(), 1_000_000).unwrap();
        // SAFETY: plain data, zeroed is a valid start (a null sigev_value, as JFR's).
        let mut sev: libc::sigevent = unsafe { std::mem::zeroed() };
        sev.sigev_notify = libc::SIGEV_THREAD_ID;
        sev.sigev_signo = libc::SIGPROF;
        sev.sigev_notify_thread_id = gettid() as libc::c_int;
        let mut foreign: libc::timer_t = ptr::null_mut();
        // SAFETY: valid pointers; the timer is deleted below.
        assert_eq!(unsafe { libc::timer_create(libc::CLOCK_THREAD_CPUTIME_ID, &mut sev, &mut foreign) }, 0);
        let period = libc::timespec { tv_sec: 0, tv_nsec: 1_000_000 };
        let spec = libc::itimerspec { it_interval: period, it_value: period };
        // SAFETY: arming the timer created above.
        assert_eq!(unsafe { libc::timer_settime(foreign, 0, &spec, ptr::null_mut()) }, 0);
        let start = crate::sampling::cputime::thread_cpu_ns();
        let mut burnt = 0;
        while burnt < 3_000_000_000 && (burnt < 300_000_000 || PROF_PREVIOUS_TIMER.load(Ordering::Relaxed) < foreign_before + 3 || weight_ms(store) < 3) {
            // About a millisecond of work between clock reads: a thread that
            // reads its own CPU clock all the time gets its CPU-timer signals
            // merged when its CPU is contended (seen on this VM's 6.18 kernel).
            for i in 0..500_000u64 {
                std::hint::black_box(i);
            }
            burnt = crate::sampling::cputime::thread_cpu_ns() - start;
        }
        drop(ours);
        // SAFETY: deleting our own timer.
        unsafe { libc::timer_delete(foreign) };
        drop(disarm());
        let (weight, burnt_ms) = (weight_ms(store), burnt / 1_000_000);
        let foreign = PROF_PREVIOUS_TIMER.load(Ordering::Relaxed) - foreign_before;
        eprintln!("{burnt_ms} ms of CPU: {weight} ms sampled, {foreign} foreign timer signals handed on");
        assert!(foreign >= 3, "the foreign timer's signals must reach its handler ({foreign})");
        // Every period of CPU is one of oxprof's (periods still pending when
        // the timer is deleted are lost); the foreign timer's would double it.
        assert!(weight * 3 >= burnt_ms && weight <= burnt_ms + burnt_ms / 4 + 10, "{weight} ms sampled in {burnt_ms} ms of CPU");
    }

    /// The other signal's mask while a sample is taken, seen from the walk.
    static MASK_IN_WALK: AtomicU64 = AtomicU64::new(0);
    /// What the other signal's previous handler had got right after the walk
    /// raised that signal (a nested delivery would have happened by then).
    static RAISE_IN_WALK: AtomicI32 = AtomicI32::new(0);
    static PREVIOUS_IN_WALK: AtomicU64 = AtomicU64::new(u64::MAX);

    /// A stand-in for AsyncGetCallTrace that notes the thread's blocked
    /// signals and raises [`RAISE_IN_WALK`] (if set) in the middle of the walk.
    unsafe extern "C" fn masks_and_raises(trace: *mut ASGCT_CallTrace, _: jint, _: *mut c_void) {
        // SAFETY: sigset_t is plain data; pthread_sigmask with a null new set only reads the mask.
        let mut set: libc::sigset_t = unsafe { std::mem::zeroed() };
        // SAFETY: as above.
        unsafe { libc::pthread_sigmask(libc::SIG_BLOCK, ptr::null(), &mut set) };
        let mut bits = 0u64;
        for signo in [libc::SIGPROF, libc::SIGTRAP] {
            // SAFETY: sigismember only reads the set.
            if unsafe { libc::sigismember(&set, signo) } == 1 {
                bits |= 1 << signo;
            }
        }
        MASK_IN_WALK.store(bits, Ordering::SeqCst);
        let other = RAISE_IN_WALK.load(Ordering::SeqCst);
        if other != 0 {
            // SAFETY: raising a signal whose handler (ours, chaining) is installed.
            unsafe { libc::raise(other) };
            let previous = if other == libc::SIGTRAP { &TRAP_PREVIOUS } else { &PROF_PREVIOUS };
            PREVIOUS_IN_WALK.store(previous.load(Ordering::SeqCst), Ordering::SeqCst);
        }
        // SAFETY: the handler passes its trace.
        unsafe { (*trace).num_frames = 0 };
    }

    /// Neither handler can interrupt the other on a thread: each blocks the
    /// other signal, in the installed action and while a sample is taken; a
    /// signal raised meanwhile waits until the sample is stored.
    #[test]
    fn sigprof_and_sigtrap_handlers_block_each_other() {
        let _serial = serial();
        trap_handlers();
        install_foreign(libc::SIGPROF, prof_previous);
        install().unwrap();
        // SAFETY: sigismember only reads the installed masks.
        unsafe {
            assert_eq!(libc::sigismember(&action_of(libc::SIGPROF).sa_mask, libc::SIGTRAP), 1, "SIGTRAP blocked in the SIGPROF handler");
            assert_eq!(libc::sigismember(&action_of(libc::SIGTRAP).sa_mask, libc::SIGPROF), 1, "SIGPROF blocked in the SIGTRAP handler");
        }
        let store = arm_store(fake_vm(true), masks_and_raises);
        for (signo, code, cookie, other, previous) in [
            (libc::SIGPROF, libc::SI_TIMER, ctimer::SIGEV_COOKIE as u64, libc::SIGTRAP, &TRAP_PREVIOUS),
            (libc::SIGTRAP, TRAP_PERF, perf::SIGTRAP_COOKIE, libc::SIGPROF, &PROF_PREVIOUS),
        ] {
            let samples = store.stats().recorded;
            let before = previous.load(Ordering::SeqCst);
            MASK_IN_WALK.store(0, Ordering::SeqCst);
            RAISE_IN_WALK.store(other, Ordering::SeqCst);
            send_self(signo, code, 0, cookie);
            RAISE_IN_WALK.store(0, Ordering::SeqCst);
            assert_eq!(store.stats().recorded, samples + 1, "signal {signo}: sampled");
            assert_ne!(MASK_IN_WALK.load(Ordering::SeqCst) & (1 << other), 0, "signal {other} must be blocked while signal {signo} takes a sample");
            assert_eq!(PREVIOUS_IN_WALK.load(Ordering::SeqCst), before, "signal {other} was handled inside the sample of signal {signo}");
            assert_eq!(previous.load(Ordering::SeqCst), before + 1, "signal {other} raised in the sample was handled after it");
        }
        drop(disarm());
    }

    /// `recover` reads the interrupted stack only through checked reads: a
    /// stack pointer or frame pointer into unmapped memory costs the retry,
    /// not a fault; a readable return address into code still gets its
    /// walk from the caller.
    #[test]
    fn recover_survives_unmapped_stack_and_frame_pointers() {
        static WALKS: AtomicU64 = AtomicU64::new(0);
        static WALKED_FROM: AtomicUsize = AtomicUsize::new(0);
        unsafe extern "C" fn walk_from(trace: *mut ASGCT_CallTrace, _: jint, ucontext: *mut c_void) {
            // SAFETY: recover passes its (test-made) ucontext and trace.
            unsafe {
                let uc = ucontext as *const libc::ucontext_t;
                WALKED_FROM.store((*uc).uc_mcontext.gregs[libc::REG_RSP as usize] as usize, Ordering::SeqCst);
                (*trace).num_frames = 1;
            }
            WALKS.fetch_add(1, Ordering::SeqCst);
        }
        native_unwind::init();
        // A code range of our own: return addresses in it are taken.
        let code = 0x10_0000_usize;
        note_code(code, 0x1000);
        let store: &'static SampleStore = Box::leak(Box::new(SampleStore::new(16, 64).unwrap()));
        let ctx = SignalContext::new(store, walk_from, ptr::null_mut(), 8, 1, false);
        // Two pages, the second unmapped: a stack that ends at a hole.
        // SAFETY: a fresh private mapping, half of it unmapped again at once.
        let base = unsafe {
            let p = libc::mmap(ptr::null_mut(), 8192, libc::PROT_READ | libc::PROT_WRITE, libc::MAP_PRIVATE | libc::MAP_ANONYMOUS, -1, 0);
            assert_ne!(p, libc::MAP_FAILED);
            assert_eq!(libc::munmap((p as *mut u8).add(4096) as *mut c_void, 4096), 0);
            p as usize
        };
        let mut frames = [RawFrame::default(); 8];
        let mut run = |sp: usize, fp: usize| -> (u64, i32) {
            // SAFETY: plain data, zeroed is a valid start.
            let mut uc: libc::ucontext_t = unsafe { std::mem::zeroed() };
            uc.uc_mcontext.gregs[libc::REG_RIP as usize] = 0x1234;
            uc.uc_mcontext.gregs[libc::REG_RSP as usize] = sp as i64;
            uc.uc_mcontext.gregs[libc::REG_RBP as usize] = fp as i64;
            let mut trace = ASGCT_CallTrace { env_id: ptr::null_mut(), num_frames: ticks::UNKNOWN_JAVA, frames: frames.as_mut_ptr() as *mut ASGCT_CallFrame };
            let walks = WALKS.load(Ordering::SeqCst);
            recover(&ctx, &mut trace, 8, &mut uc as *mut libc::ucontext_t as *mut c_void);
            let regs =
                (uc.uc_mcontext.gregs[libc::REG_RIP as usize], uc.uc_mcontext.gregs[libc::REG_RSP as usize], uc.uc_mcontext.gregs[libc::REG_RBP as usize]);
            assert_eq!(regs, (0x1234, sp as i64, fp as i64), "the context is restored");
            (WALKS.load(Ordering::SeqCst) - walks, trace.num_frames)
        };
        // The stack pointer itself in the hole.
        assert_eq!(run(base + 4096 + 64, base + 4096 + 128), (0, ticks::UNKNOWN_JAVA));
        // A readable top of stack without a return address, a frame pointer
        // (within 4 KiB above) in the hole.
        let sp = base + 4096 - 16;
        assert_eq!(run(sp, sp + 64), (0, ticks::UNKNOWN_JAVA));
        // A return address into code at [sp]: walked from the caller.
        // SAFETY: `sp` is in the mapped page.
        unsafe { (sp as *mut usize).write(code + 0x10) };
        assert_eq!(run(sp, sp + 64), (1, 1));
        assert_eq!(WALKED_FROM.load(Ordering::SeqCst), sp + 8);
        // SAFETY: unmapping the page mapped above.
        unsafe { libc::munmap(base as *mut c_void, 4096) };
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
        let start = crate::sampling::cputime::thread_cpu_ns();
        let mut burnt = 0;
        while burnt < 3_000_000_000 && (burnt < 300_000_000 || SIGNALS.load(Ordering::Relaxed) < 3) {
            // About a millisecond of work between clock reads: a thread that
            // reads its own CPU clock all the time gets its CPU-timer signals
            // merged when its CPU is contended (seen on this VM's 6.18 kernel).
            for i in 0..500_000u64 {
                std::hint::black_box(i);
            }
            burnt = crate::sampling::cputime::thread_cpu_ns() - start;
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

//! signal-safe: Breakpoints patched into native functions, taken in the
//! SIGTRAP handler, and the window they open and close.
//!
//! A trigger is a list of steps, each an address (a function's entry) and
//! what hitting it does: open the window, close it, or mark the release of
//! a safepoint. One step is armed at a time: its first byte is replaced by
//! `int3`. The thread that executes it traps; the handler (called from the
//! SIGTRAP handler, see [`on_breakpoint`]) moves the thread's program
//! counter back onto the address, writes the original byte back, does the
//! step's action and arms the next step. The thread then executes the
//! original instruction as if nothing happened: no instruction is ever
//! displaced or emulated. Threads that hit the `int3` at the same moment
//! find an address oxprof patched and are sent back onto it the same way;
//! only one of them takes the step (a compare-and-swap on its `armed`
//! flag), so each cycle counts one hit per step. A thread can trap after the
//! byte was restored, even after the recording stopped (it executed the
//! `int3` just before): every address ever patched is remembered for the
//! process's life, so such a trap is recognised and resumed, never passed
//! to the JVM as a foreign SIGTRAP.
//!
//! Bytes are written with `pwrite` on `/proc/self/mem`, which writes into
//! read-only text without making it writable; where the kernel refuses
//! that, the page is made writable for the one-byte store and read-only
//! again (`mprotect`), under a spin lock so two writers never undo each
//! other's protection. Both are plain system calls: async-signal-safe.
//!
//! The sample handler asks [`sample_allowed`] first: when triggers gate the
//! recording, only samples taken while the window is open are kept.

use std::sync::atomic::{AtomicBool, AtomicI32, AtomicU32, AtomicU64, AtomicU8, AtomicUsize, Ordering};

use crate::hotspot::safemem;
use crate::sampling::cputime::monotonic_ns;
use crate::trigger::records::{self, Record};

/// x86's one-byte breakpoint instruction.
pub const INT3: u8 = 0xCC;
/// Steps a trigger can have (`ttsp` uses three).
pub const MAX_STEPS: usize = 4;
/// Addresses remembered as oxprof's breakpoints.
const MAX_KNOWN: usize = 64;

/// What hitting a step does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum Action {
    /// Opens the window (e.g. `SafepointSynchronize::begin`).
    Open = 1,
    /// Closes it (e.g. `RuntimeService::record_safepoint_synchronized`).
    Close = 2,
    /// Marks the release of the stopped threads (`SafepointSynchronize::end`).
    Release = 3,
}

struct Step {
    addr: AtomicUsize,
    orig: AtomicU8,
    action: AtomicU8,
    armed: AtomicBool,
}

static STEPS: [Step; MAX_STEPS] =
    [const { Step { addr: AtomicUsize::new(0), orig: AtomicU8::new(0), action: AtomicU8::new(0), armed: AtomicBool::new(false) } }; MAX_STEPS];
static STEP_COUNT: AtomicUsize = AtomicUsize::new(0);
/// After the last step, arm the first again (otherwise the trigger fires once).
static CYCLE: AtomicBool = AtomicBool::new(false);
static KNOWN: [AtomicUsize; MAX_KNOWN] = [const { AtomicUsize::new(0) }; MAX_KNOWN];
/// `/proc/self/mem` opened for writing, or -1 (use `mprotect`).
static MEM_FD: AtomicI32 = AtomicI32::new(-1);
static PATCH_LOCK: AtomicBool = AtomicBool::new(false);
/// Triggers are armed; cleared first at stop.
static RUNNING: AtomicBool = AtomicBool::new(false);
/// Handlers between deciding to act and having acted.
static IN_HANDLER: AtomicUsize = AtomicUsize::new(0);

/// Samples are kept only while the window is open.
static GATED: AtomicBool = AtomicBool::new(false);
static OPEN: AtomicBool = AtomicBool::new(false);
/// Bumped at every opening and closing, and the futex word the follower
/// thread (`gate.rs`: pauses the engine's timers while the window is closed)
/// waits on.
static WINDOW_SEQ: AtomicU32 = AtomicU32::new(0);
/// Samples refused because the window was closed.
static SKIPPED: AtomicU64 = AtomicU64::new(0);
/// Breakpoint hits taken (steps acted on) and traps only resumed.
static HITS: AtomicU64 = AtomicU64::new(0);
static RESUMED: AtomicU64 = AtomicU64::new(0);
/// Byte writes that failed (the trigger stops cycling).
static WRITE_FAILURES: AtomicU64 = AtomicU64::new(0);

/// The window being timed.
static WIN_BEGIN: AtomicU64 = AtomicU64::new(0);
static WIN_SYNC: AtomicU64 = AtomicU64::new(0);
static WIN_SAMPLES: AtomicU64 = AtomicU64::new(0);
static WIN_VTABLE: AtomicU64 = AtomicU64::new(0);
static WIN_THREADS: AtomicU64 = AtomicU64::new(0);
static WIN_ID: AtomicU64 = AtomicU64::new(0);
static WIN_TID: AtomicU64 = AtomicU64::new(0);
/// A Close step is followed by a Release step: the record is published then.
static HAS_RELEASE: AtomicBool = AtomicBool::new(false);

/// Addresses of JVM variables read when a window opens or closes (0 =
/// not read): `VMThread::_cur_vm_operation` (a pointer),
/// `Threads::_number_of_threads` (an int), `SafepointSynchronize::_safepoint_counter`.
static CUR_OP_ADDR: AtomicUsize = AtomicUsize::new(0);
static THREADS_ADDR: AtomicUsize = AtomicUsize::new(0);
static COUNTER_ADDR: AtomicUsize = AtomicUsize::new(0);

/// JVM variables to read in the window's record (addresses in this
/// process, 0 for unknown).
#[derive(Clone, Copy, Debug, Default)]
pub struct JvmVariables {
    pub cur_vm_operation: usize,
    pub number_of_threads: usize,
    pub safepoint_counter: usize,
}

/// Whether a sample may be kept now; counts it for the open window.
#[inline]
pub fn sample_allowed() -> bool {
    if !GATED.load(Ordering::Relaxed) {
        return true;
    }
    if OPEN.load(Ordering::Relaxed) {
        WIN_SAMPLES.fetch_add(1, Ordering::Relaxed);
        true
    } else {
        SKIPPED.fetch_add(1, Ordering::Relaxed);
        false
    }
}

fn is_known(addr: usize) -> bool {
    addr != 0 && KNOWN.iter().any(|k| k.load(Ordering::Acquire) == addr)
}

/// Writes one byte of code. Async-signal-safe.
fn write_byte(addr: usize, byte: u8) -> bool {
    let fd = MEM_FD.load(Ordering::Acquire);
    if fd >= 0 {
        // SAFETY: pwrite reads one byte from a local; the kernel writes it
        // at `addr` of this process (an address oxprof chose: a function
        // entry in a mapped object).
        let n = unsafe { libc::pwrite(fd, &byte as *const u8 as *const libc::c_void, 1, addr as libc::off_t) };
        if n == 1 {
            return true;
        }
    }
    write_byte_mprotect(addr, byte)
}

fn write_byte_mprotect(addr: usize, byte: u8) -> bool {
    const PAGE: usize = 4096;
    let page = addr & !(PAGE - 1);
    while PATCH_LOCK.compare_exchange_weak(false, true, Ordering::Acquire, Ordering::Relaxed).is_err() {
        std::hint::spin_loop();
    }
    // SAFETY: `page` is the page of a mapped function; making it writable
    // for the store and executable again after is all this does.
    let ok = unsafe { libc::mprotect(page as *mut libc::c_void, PAGE, libc::PROT_READ | libc::PROT_WRITE | libc::PROT_EXEC) } == 0;
    if ok {
        // SAFETY: the page is writable now; a one-byte store is atomic, so
        // threads executing the code see the old or the new byte.
        unsafe { std::ptr::write_volatile(addr as *mut u8, byte) };
        // SAFETY: as above; text pages of a loaded object are read + execute.
        unsafe { libc::mprotect(page as *mut libc::c_void, PAGE, libc::PROT_READ | libc::PROT_EXEC) };
    }
    PATCH_LOCK.store(false, Ordering::Release);
    ok
}

/// Reads the byte at `addr` (a function entry of a mapped object).
fn code_byte(addr: usize) -> u8 {
    // SAFETY: callers pass addresses of functions found in mapped objects;
    // objects with code oxprof patched are never unmapped while it runs.
    unsafe { std::ptr::read_volatile(addr as *const u8) }
}

fn read_jvm(addr: usize) -> u64 {
    if addr == 0 {
        return 0;
    }
    safemem::read_word(addr).unwrap_or(0) as u64
}

/// The step at index `i`, if it exists.
fn step(i: usize) -> Option<&'static Step> {
    STEPS.get(i).filter(|_| i < STEP_COUNT.load(Ordering::Acquire))
}

fn arm_step(s: &Step) -> bool {
    s.armed.store(true, Ordering::SeqCst);
    let ok = write_byte(s.addr.load(Ordering::Acquire), INT3);
    if !ok {
        s.armed.store(false, Ordering::SeqCst);
        WRITE_FAILURES.fetch_add(1, Ordering::Relaxed);
    }
    ok
}

/// Tells the follower thread the window opened or closed: a futex wake,
/// one async-signal-safe system call.
fn window_moved() {
    WINDOW_SEQ.fetch_add(1, Ordering::SeqCst);
    // SAFETY: FUTEX_WAKE on a static word; no memory is written.
    unsafe { libc::syscall(libc::SYS_futex, WINDOW_SEQ.as_ptr(), libc::FUTEX_WAKE | libc::FUTEX_PRIVATE_FLAG, i32::MAX) };
}

fn act(action: u8) {
    let now = monotonic_ns();
    if action == Action::Open as u8 {
        WIN_BEGIN.store(now, Ordering::SeqCst);
        WIN_SAMPLES.store(0, Ordering::SeqCst);
        // SAFETY: gettid is a plain, always-successful, async-signal-safe syscall.
        WIN_TID.store(unsafe { libc::syscall(libc::SYS_gettid) } as u64, Ordering::Relaxed);
        let op = read_jvm(CUR_OP_ADDR.load(Ordering::Relaxed));
        WIN_VTABLE.store(if op != 0 { read_jvm(op as usize) } else { 0 }, Ordering::Relaxed);
        WIN_THREADS.store(read_jvm(THREADS_ADDR.load(Ordering::Relaxed)) & 0xffff_ffff, Ordering::Relaxed);
        OPEN.store(true, Ordering::SeqCst);
        window_moved();
    } else if action == Action::Close as u8 {
        OPEN.store(false, Ordering::SeqCst);
        window_moved();
        WIN_SYNC.store(now, Ordering::SeqCst);
        WIN_ID.store(read_jvm(COUNTER_ADDR.load(Ordering::Relaxed)), Ordering::Relaxed);
        if !HAS_RELEASE.load(Ordering::Relaxed) {
            publish(0);
        }
    } else if action == Action::Release as u8 {
        publish(now);
    }
}

fn publish(end: u64) {
    let begin = WIN_BEGIN.swap(0, Ordering::SeqCst);
    if begin == 0 {
        return; // the window opened before the triggers were armed
    }
    records::push(&Record {
        begin,
        sync: WIN_SYNC.load(Ordering::SeqCst),
        end,
        id: WIN_ID.load(Ordering::Relaxed) & 0xffff_ffff,
        vtable: WIN_VTABLE.load(Ordering::Relaxed),
        threads: WIN_THREADS.load(Ordering::Relaxed),
        samples: WIN_SAMPLES.load(Ordering::Relaxed),
        tid: WIN_TID.load(Ordering::Relaxed),
    });
}

/// Called by the SIGTRAP handler first. Returns `true` when the trap was one
/// of oxprof's breakpoints: the thread's program counter has been moved back
/// onto the patched address (the original instruction is there again, or
/// will be once the writer that is restoring it finishes), and the step was
/// taken if it was armed. Async-signal-safe; `errno` is the caller's to save.
pub fn on_breakpoint(ucontext: *mut libc::c_void) -> bool {
    if ucontext.is_null() {
        return false;
    }
    let uc = ucontext as *mut libc::ucontext_t;
    // SAFETY: the kernel passes the interrupted context, valid and writable
    // for the handler's duration.
    let gregs = unsafe { &mut (*uc).uc_mcontext.gregs };
    let Some(&pc) = gregs.get(libc::REG_RIP as usize) else { return false };
    let addr = (pc as usize).wrapping_sub(1);
    if !is_known(addr) {
        return false;
    }
    if let Some(rip) = gregs.get_mut(libc::REG_RIP as usize) {
        *rip = addr as i64;
    }
    IN_HANDLER.fetch_add(1, Ordering::SeqCst);
    let mut took = false;
    if RUNNING.load(Ordering::SeqCst) {
        let n = STEP_COUNT.load(Ordering::Acquire);
        for i in 0..n {
            let Some(s) = step(i) else { break };
            if s.addr.load(Ordering::Acquire) != addr || s.armed.compare_exchange(true, false, Ordering::SeqCst, Ordering::SeqCst).is_err() {
                continue;
            }
            took = true;
            if !write_byte(addr, s.orig.load(Ordering::Acquire)) {
                WRITE_FAILURES.fetch_add(1, Ordering::Relaxed);
            }
            act(s.action.load(Ordering::Acquire));
            let next = if i + 1 < n {
                Some(i + 1)
            } else if CYCLE.load(Ordering::Relaxed) {
                Some(0)
            } else {
                None
            };
            if let Some(next) = next.and_then(step) {
                arm_step(next);
            }
            break;
        }
    }
    IN_HANDLER.fetch_sub(1, Ordering::SeqCst);
    if took {
        HITS.fetch_add(1, Ordering::Relaxed);
    } else {
        RESUMED.fetch_add(1, Ordering::Relaxed);
    }
    true
}

/// Counters for the summary: (steps taken, traps only resumed, samples
/// refused outside the window, failed byte writes).
pub fn counters() -> (u64, u64, u64, u64) {
    (HITS.load(Ordering::Relaxed), RESUMED.load(Ordering::Relaxed), SKIPPED.load(Ordering::Relaxed), WRITE_FAILURES.load(Ordering::Relaxed))
}

// signal-safe: off (arming and disarming run on a JVMTI or attach thread)

/// Samples kept in the window still open (0 when none is): a window that
/// never closed has no record, but its samples are in the profile.
pub fn open_window_samples() -> u64 {
    if WIN_BEGIN.load(Ordering::SeqCst) == 0 {
        return 0;
    }
    WIN_SAMPLES.load(Ordering::Relaxed)
}

/// One step of a plan: an address and its action.
#[derive(Clone, Copy, Debug)]
pub struct PlannedStep {
    pub addr: usize,
    pub action: Action,
}

/// Blocks SIGTRAP on this thread while it patches (a breakpoint hit on
/// this thread mid-patch would spin on the patch lock); restored on drop.
struct TrapBlocked(libc::sigset_t);

impl TrapBlocked {
    fn new() -> TrapBlocked {
        // SAFETY: sigset_t is plain data; the calls only change this
        // thread's mask, restored in drop.
        unsafe {
            let mut set: libc::sigset_t = std::mem::zeroed();
            let mut old: libc::sigset_t = std::mem::zeroed();
            libc::sigemptyset(&mut set);
            libc::sigaddset(&mut set, libc::SIGTRAP);
            libc::pthread_sigmask(libc::SIG_BLOCK, &set, &mut old);
            TrapBlocked(old)
        }
    }
}

impl Drop for TrapBlocked {
    fn drop(&mut self) {
        // SAFETY: restores the mask saved in `new`.
        unsafe { libc::pthread_sigmask(libc::SIG_SETMASK, &self.0, std::ptr::null_mut()) };
    }
}

fn remember(addr: usize) -> Result<(), String> {
    if is_known(addr) {
        return Ok(());
    }
    for k in KNOWN.iter() {
        if k.compare_exchange(0, addr, Ordering::SeqCst, Ordering::SeqCst).is_ok() {
            return Ok(());
        }
    }
    Err(format!("too many distinct trigger addresses in this JVM (at most {MAX_KNOWN})"))
}

fn open_mem() {
    if MEM_FD.load(Ordering::SeqCst) >= 0 {
        return;
    }
    // SAFETY: a constant NUL-terminated path.
    let fd = unsafe { libc::open(c"/proc/self/mem".as_ptr(), libc::O_RDWR | libc::O_CLOEXEC) };
    if fd >= 0 && MEM_FD.compare_exchange(-1, fd, Ordering::SeqCst, Ordering::SeqCst).is_err() {
        // SAFETY: closing the descriptor just opened, shared with no one.
        unsafe { libc::close(fd) };
    }
}

/// How bytes are written: "proc-mem" or "mprotect".
pub fn write_method() -> &'static str {
    if MEM_FD.load(Ordering::SeqCst) >= 0 {
        "proc-mem"
    } else {
        "mprotect"
    }
}

/// Arms a trigger: the steps run in order, the first armed now; `cycle`
/// re-arms the first after the last; `open_now` starts with the window
/// open (a trigger with only an end). Samples are gated from now on.
pub fn arm(steps: &[PlannedStep], cycle: bool, open_now: bool, vars: JvmVariables) -> Result<(), String> {
    if RUNNING.load(Ordering::SeqCst) || steps.is_empty() || steps.len() > MAX_STEPS {
        return Err(if steps.len() > MAX_STEPS { format!("at most {MAX_STEPS} trigger steps") } else { "triggers are already armed".into() });
    }
    for s in steps {
        if code_byte(s.addr) == INT3 && !is_known(s.addr) {
            return Err(format!("0x{:x} already holds a breakpoint (a debugger or another agent)", s.addr));
        }
    }
    for s in steps {
        remember(s.addr)?;
    }
    open_mem();
    // Check the write path on the first step: write its own byte back.
    let first = steps[0].addr;
    let orig_first = code_byte(first);
    if MEM_FD.load(Ordering::SeqCst) >= 0 && !write_byte(first, orig_first) {
        let fd = MEM_FD.swap(-1, Ordering::SeqCst);
        // SAFETY: closing our own descriptor; no handler uses it while no
        // trigger is armed.
        unsafe { libc::close(fd) };
    }
    if !write_byte(first, orig_first) {
        return Err(format!("cannot write code at 0x{first:x} (neither /proc/self/mem nor mprotect is allowed here)"));
    }
    let _blocked = TrapBlocked::new();
    for (slot, s) in STEPS.iter().zip(steps) {
        slot.addr.store(s.addr, Ordering::SeqCst);
        slot.orig.store(code_byte(s.addr), Ordering::SeqCst);
        slot.action.store(s.action as u8, Ordering::SeqCst);
        slot.armed.store(false, Ordering::SeqCst);
    }
    CUR_OP_ADDR.store(vars.cur_vm_operation, Ordering::SeqCst);
    THREADS_ADDR.store(vars.number_of_threads, Ordering::SeqCst);
    COUNTER_ADDR.store(vars.safepoint_counter, Ordering::SeqCst);
    HAS_RELEASE.store(steps.iter().any(|s| s.action == Action::Release), Ordering::SeqCst);
    STEP_COUNT.store(steps.len(), Ordering::SeqCst);
    CYCLE.store(cycle, Ordering::SeqCst);
    for c in [&HITS, &RESUMED, &SKIPPED, &WRITE_FAILURES, &WIN_BEGIN, &WIN_SAMPLES] {
        c.store(0, Ordering::SeqCst);
    }
    OPEN.store(open_now, Ordering::SeqCst);
    GATED.store(true, Ordering::SeqCst);
    RUNNING.store(true, Ordering::SeqCst);
    if !arm_step(&STEPS[0]) {
        disarm();
        return Err(format!("cannot write code at 0x{first:x}"));
    }
    Ok(())
}

/// Removes every breakpoint and stops gating samples. Returns the
/// addresses whose byte is not the original one afterwards (none, unless
/// something else wrote there).
pub fn disarm() -> Vec<usize> {
    RUNNING.store(false, Ordering::SeqCst);
    while IN_HANDLER.load(Ordering::SeqCst) != 0 {
        std::thread::yield_now();
    }
    let _blocked = TrapBlocked::new();
    let n = STEP_COUNT.swap(0, Ordering::SeqCst);
    let mut left = Vec::new();
    for s in STEPS.iter().take(n) {
        s.armed.store(false, Ordering::SeqCst);
        let (addr, orig) = (s.addr.load(Ordering::SeqCst), s.orig.load(Ordering::SeqCst));
        if code_byte(addr) != orig {
            write_byte(addr, orig);
        }
        if code_byte(addr) != orig {
            left.push(addr);
        }
    }
    GATED.store(false, Ordering::SeqCst);
    OPEN.store(false, Ordering::SeqCst);
    left
}

/// Whether the window is open now.
pub fn window_open() -> bool {
    OPEN.load(Ordering::SeqCst)
}

/// The window's change counter (see [`wait_for_move`]).
pub fn window_seq() -> u32 {
    WINDOW_SEQ.load(Ordering::SeqCst)
}

/// Waits until the window moved past `seen` (or `timeout` passed).
pub fn wait_for_move(seen: u32, timeout: std::time::Duration) {
    let ts = libc::timespec { tv_sec: timeout.as_secs() as libc::time_t, tv_nsec: timeout.subsec_nanos() as libc::c_long };
    // SAFETY: FUTEX_WAIT on a static word with a relative timeout; returns
    // at once if the word no longer holds `seen`.
    unsafe { libc::syscall(libc::SYS_futex, WINDOW_SEQ.as_ptr(), libc::FUTEX_WAIT | libc::FUTEX_PRIVATE_FLAG, seen, &ts as *const libc::timespec) };
}

/// Wakes a thread in [`wait_for_move`] without moving the window (stop).
pub fn wake_waiters() {
    window_moved();
}
// signal-safe: on

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[inline(never)]
    extern "C" fn trap_target_open(x: u64) -> u64 {
        std::hint::black_box(x).wrapping_mul(31).rotate_left(7)
    }

    #[inline(never)]
    extern "C" fn trap_target_close(x: u64) -> u64 {
        std::hint::black_box(x).wrapping_add(17).rotate_right(3)
    }

    fn bytes(f: usize) -> [u8; 16] {
        // SAFETY: the first 16 bytes of a function of this binary (each is
        // longer than that with its padding), mapped and readable.
        unsafe { std::ptr::read_volatile(f as *const [u8; 16]) }
    }

    /// Threads call both functions nonstop while the triggers are armed and
    /// removed 300 times at random moments (inside windows and out, and
    /// while threads stand on a breakpoint): no thread crashes, every hit
    /// is a step or a resumed trap, windows close in order, and the code is
    /// byte for byte what it was.
    #[test]
    fn arm_and_disarm_while_threads_run_the_code() {
        crate::sampling::signal::install_trap().unwrap();
        let (open, close) = (trap_target_open as *const () as usize, trap_target_close as *const () as usize);
        let (before_open, before_close) = (bytes(open), bytes(close));
        let stop = Arc::new(AtomicBool::new(false));
        let calls = Arc::new(AtomicU64::new(0));
        let workers: Vec<_> = (0..3)
            .map(|k| {
                let (stop, calls) = (stop.clone(), calls.clone());
                std::thread::spawn(move || {
                    let mut x = k as u64;
                    while !stop.load(Ordering::Relaxed) {
                        x = trap_target_open(x);
                        x = trap_target_close(x);
                        calls.fetch_add(1, Ordering::Relaxed);
                    }
                    std::hint::black_box(x);
                })
            })
            .collect();
        records::init(64);
        let mut seed = 0x2545_f491_4f6c_dd1d_u64;
        let mut windows = 0;
        for _ in 0..300 {
            records::reset_totals();
            let steps = [PlannedStep { addr: open, action: Action::Open }, PlannedStep { addr: close, action: Action::Close }];
            arm(&steps, true, false, JvmVariables::default()).unwrap();
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            std::thread::sleep(std::time::Duration::from_micros(seed % 2000));
            let left = disarm();
            assert!(left.is_empty(), "bytes left patched at {left:x?}");
            assert_eq!((bytes(open), bytes(close)), (before_open, before_close));
            windows += records::totals().0;
        }
        stop.store(true, Ordering::Relaxed);
        for w in workers {
            w.join().unwrap();
        }
        let (hits, resumed, _, failures) = counters();
        eprintln!("{} calls, {windows} windows, last round: {hits} steps, {resumed} resumed traps", calls.load(Ordering::Relaxed));
        assert_eq!(failures, 0);
        assert!(windows > 300, "only {windows} windows closed in 300 rounds");
        assert!(calls.load(Ordering::Relaxed) > 10_000);
    }
}

//! signal-safe: Reading memory that may not be mapped, from inside a signal handler.
//!
//! The Java stack walker follows pointers into JVM metadata (`Method`,
//! `ConstMethod`, `InstanceKlass`) that it cannot range-check. A bad pointer
//! must cost a failed walk, never a crash. Two ways, the first preferred:
//!
//! - **Fault-tolerant loads.** A load is one instruction of a tiny routine
//!   of our own (`oxprof_safe_load_*`, in assembly below). oxprof's SIGSEGV
//!   and SIGBUS handler, installed in front of the JVM's, checks the
//!   faulting pc: at one of those instructions it moves the pc to the
//!   routine's failure exit, which returns "unreadable"; anywhere else it
//!   hands the signal to the handler it replaced (the JVM's, which uses
//!   SIGSEGV for implicit null checks and safepoint polls), with the same
//!   arguments, so the JVM sees what it would have seen (`sigchain`, which
//!   the sampling handlers use too). A load costs a few
//!   nanoseconds. async-profiler reads the JVM's memory the same way.
//! - **`process_vm_readv` on the own process**, where the handler cannot be
//!   installed or is not ours any more, or with `OXPROF_SAFE_READS=syscall`:
//!   the kernel copies the bytes or refuses (EFAULT). A system call each,
//!   about 2 µs on this project's machines.
//!
//! A fault while SIGSEGV is blocked kills the process. oxprof's signal
//! handlers therefore note at entry whether the code they interrupted had
//! it blocked (a sample landing inside another signal handler, the JVM's
//! fault handler among them: see [`HandlerReads`]). While such a handler
//! runs, every read takes the system call.
//!
//! Both are async-signal-safe, allocate nothing and take no lock. The
//! signal handlers save and restore `errno`.

use std::ffi::c_void;
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicU32, AtomicU64, AtomicUsize, Ordering};

use crate::sigchain::{hand_on, Previous};

/// Our own process id, set once before the handler is armed.
static PID: AtomicI32 = AtomicI32::new(0);
static WORKS: AtomicBool = AtomicBool::new(false);
/// Loads go through the fault-tolerant routines (the handler is ours).
static FAST: AtomicBool = AtomicBool::new(false);

// The routines: each returns 1 and stores the value read through `out`
// (rsi), or returns 0 through the shared failure exit when its load (the
// `_insn` label) faulted and the handler moved the pc there.
std::arch::global_asm!(
    ".pushsection .text.oxprof_safe_load,\"ax\",@progbits",
    ".p2align 4",
    ".globl oxprof_safe_load_u64",
    ".hidden oxprof_safe_load_u64",
    ".globl oxprof_safe_load_u64_insn",
    ".hidden oxprof_safe_load_u64_insn",
    "oxprof_safe_load_u64:",
    "oxprof_safe_load_u64_insn:",
    "    mov rax, qword ptr [rdi]",
    "    mov qword ptr [rsi], rax",
    "    mov eax, 1",
    "    ret",
    ".p2align 4",
    ".globl oxprof_safe_load_u16",
    ".hidden oxprof_safe_load_u16",
    ".globl oxprof_safe_load_u16_insn",
    ".hidden oxprof_safe_load_u16_insn",
    "oxprof_safe_load_u16:",
    "oxprof_safe_load_u16_insn:",
    "    movzx eax, word ptr [rdi]",
    "    mov word ptr [rsi], ax",
    "    mov eax, 1",
    "    ret",
    ".p2align 4",
    ".globl oxprof_safe_load_failed",
    ".hidden oxprof_safe_load_failed",
    "oxprof_safe_load_failed:",
    "    xor eax, eax",
    "    ret",
    ".popsection",
);

extern "C" {
    fn oxprof_safe_load_u64(addr: usize, out: *mut u64) -> u32;
    fn oxprof_safe_load_u16(addr: usize, out: *mut u16) -> u32;
    fn oxprof_safe_load_u64_insn();
    fn oxprof_safe_load_u16_insn();
    fn oxprof_safe_load_failed();
}

/// Signal handlers now running whose interrupted code had SIGSEGV or SIGBUS
/// blocked (a sample taken inside another signal handler, the JVM's own
/// fault handler among them): a fault there would kill the process, so
/// reads go through `process_vm_readv` while any such handler runs.
static FAULTS_BLOCKED: AtomicU32 = AtomicU32::new(0);

/// Marks a signal handler's reads (see [`FAULTS_BLOCKED`]); made at the
/// handler's entry, dropped at its exit.
#[must_use]
pub struct HandlerReads(bool);

impl HandlerReads {
    /// For a handler entered with `ucontext` (null: assume blocked).
    pub fn enter(ucontext: *mut c_void) -> HandlerReads {
        let blocked = ucontext.is_null() || {
            // SAFETY: the kernel passed a valid ucontext for this signal;
            // sigismember only reads the set.
            let mask = unsafe { &(*(ucontext as *const libc::ucontext_t)).uc_sigmask };
            // SAFETY: as above.
            unsafe { libc::sigismember(mask, libc::SIGSEGV) == 1 || libc::sigismember(mask, libc::SIGBUS) == 1 }
        };
        if blocked {
            FAULTS_BLOCKED.fetch_add(1, Ordering::AcqRel);
        }
        HandlerReads(blocked)
    }
}

impl Drop for HandlerReads {
    fn drop(&mut self) {
        if self.0 {
            FAULTS_BLOCKED.fetch_sub(1, Ordering::AcqRel);
        }
    }
}

/// The handlers replaced for SIGSEGV and SIGBUS (kept before ours is
/// installed).
static PREVIOUS: [Previous; 2] = [const { Previous::new() }; 2];
/// Faults turned into failed reads, since the process started.
static CAUGHT: AtomicU64 = AtomicU64::new(0);

/// The entry points of oxprof's sampling signal handlers (see
/// [`note_handler_entry`]); 0 = unused.
static HANDLER_ENTRIES: [AtomicUsize; 4] = [const { AtomicUsize::new(0) }; 4];

// signal-safe: off (installing handlers, at start)
/// Notes the entry point of a signal handler of oxprof's. A fault whose
/// pc is one of them was not raised there: the kernel delivered a sampling
/// signal and a fault of the interrupted instruction together (both
/// synchronous, the sampling one queued first), so the fault's frame is
/// set up on top of the handler's with the handler's first instruction as
/// its pc. [`on_fault`] returns from such a fault: the handler runs, returns
/// to the interrupted instruction, and that instruction faults again, this
/// time with its own pc, for the JVM (a safepoint poll, an implicit null
/// check) to handle. Handing it on as it came made HotSpot report a crash
/// in liboxprof (the `matrix` tests with every event on).
pub fn note_handler_entry(entry: usize) {
    for slot in &HANDLER_ENTRIES {
        match slot.compare_exchange(0, entry, Ordering::AcqRel, Ordering::Acquire) {
            Ok(_) => return,
            Err(e) if e == entry => return,
            Err(_) => {}
        }
    }
}
// signal-safe: on

/// Faults the fault-tolerant loads turned into failed reads.
pub fn faults_caught() -> u64 {
    CAUGHT.load(Ordering::Relaxed)
}

fn slot_of(sig: libc::c_int) -> usize {
    usize::from(sig == libc::SIGBUS)
}

/// oxprof's SIGSEGV and SIGBUS handler (see the module comment).
extern "C" fn on_fault(sig: libc::c_int, info: *mut libc::siginfo_t, ucontext: *mut c_void) {
    if !ucontext.is_null() {
        // SAFETY: the kernel passed a valid ucontext for this signal.
        let gregs = unsafe { &mut (*(ucontext as *mut libc::ucontext_t)).uc_mcontext.gregs };
        if let Some(rip) = gregs.get_mut(libc::REG_RIP as usize) {
            let pc = *rip as usize;
            if pc == oxprof_safe_load_u64_insn as *const () as usize || pc == oxprof_safe_load_u16_insn as *const () as usize {
                *rip = oxprof_safe_load_failed as *const () as usize as i64;
                CAUGHT.fetch_add(1, Ordering::Relaxed);
                return;
            }
            if pc != 0 && HANDLER_ENTRIES.iter().any(|e| e.load(Ordering::Relaxed) == pc) {
                // See `note_handler_entry`: the instruction faults again.
                return;
            }
        }
    }
    if let Some(prev) = PREVIOUS.get(slot_of(sig)) {
        hand_on(prev, sig, info, ucontext);
    }
}

// signal-safe: off (installing handlers, at start)
/// Puts oxprof's SIGSEGV and SIGBUS handler in front of the process's
/// (the JVM's), once; true when both are ours and a probe read of an
/// unmapped address failed cleanly.
fn install_fault_handler() -> bool {
    let ours = on_fault as *const () as usize;
    for sig in [libc::SIGSEGV, libc::SIGBUS] {
        // SAFETY: a zeroed sigaction is a valid out buffer.
        let mut old: libc::sigaction = unsafe { std::mem::zeroed() };
        // SAFETY: reading the current action into `old`.
        if unsafe { libc::sigaction(sig, std::ptr::null(), &mut old) } != 0 {
            return false;
        }
        if old.sa_sigaction == ours {
            continue;
        }
        let Some(prev) = PREVIOUS.get(slot_of(sig)) else { return false };
        // The JVM's mask and flags (with SA_SIGINFO), so that the JVM's
        // handler, called from ours, runs as it was set up to.
        prev.save(&old, true);
        let mut new = old;
        new.sa_sigaction = ours;
        new.sa_flags = (old.sa_flags | libc::SA_SIGINFO | libc::SA_ONSTACK) & !libc::SA_RESETHAND;
        // SAFETY: installing a valid action.
        if unsafe { libc::sigaction(sig, &new, std::ptr::null_mut()) } != 0 {
            return false;
        }
    }
    handler_is_ours() && {
        let probe: u64 = 0x6f78_7072_6f66;
        let mut v = 0u64;
        // SAFETY: the routines only read `addr` and write `out` (a local).
        unsafe { oxprof_safe_load_u64(&probe as *const u64 as usize, &mut v) == 1 && v == probe && oxprof_safe_load_u64(8, &mut v) == 0 }
    }
}

/// Whether the process's SIGSEGV and SIGBUS handlers are still oxprof's.
fn handler_is_ours() -> bool {
    [libc::SIGSEGV, libc::SIGBUS].iter().all(|&sig| {
        // SAFETY: a zeroed sigaction is a valid out buffer.
        let mut cur: libc::sigaction = unsafe { std::mem::zeroed() };
        // SAFETY: reading the current action.
        unsafe { libc::sigaction(sig, std::ptr::null(), &mut cur) == 0 && cur.sa_sigaction == on_fault as *const () as usize }
    })
}

/// Sets reads up: the fault-tolerant loads where the handler can be
/// installed (not with `OXPROF_SAFE_READS=syscall`), else
/// `process_vm_readv`, if the kernel lets this process read itself that way
/// (seccomp filters may forbid the call). Call off the signal path, before
/// use; again at each start (see [`recheck`]).
pub fn init() -> bool {
    // SAFETY: getpid has no preconditions.
    PID.store(unsafe { libc::getpid() }, Ordering::Relaxed);
    let syscall_only = std::env::var_os("OXPROF_SAFE_READS").is_some_and(|v| v == "syscall");
    FAST.store(!syscall_only && install_fault_handler(), Ordering::Release);
    let probe: u64 = 0x6f78_7072_6f66;
    let ok = read_word(&probe as *const u64 as usize) == Some(probe as usize) && read_word(8).is_none();
    WORKS.store(ok, Ordering::Relaxed);
    ok
}

/// Falls back to `process_vm_readv` if something replaced oxprof's fault
/// handler since [`init`] (another agent, the application through JNI).
/// Call off the signal path, when sampling starts.
pub fn recheck() {
    if FAST.load(Ordering::Relaxed) && !handler_is_ours() {
        FAST.store(false, Ordering::Release);
    }
}

/// How reads are made, for the debug log.
pub fn describe() -> &'static str {
    if FAST.load(Ordering::Relaxed) {
        "fault-tolerant loads (SIGSEGV/SIGBUS handler in front of the JVM's)"
    } else {
        "process_vm_readv"
    }
}
// signal-safe: on

/// Whether [`init`] found safe reads working.
pub fn available() -> bool {
    WORKS.load(Ordering::Relaxed)
}

/// Whether a read may fault (and be caught): the handler is ours and no
/// signal handler runs on top of code that blocked SIGSEGV or SIGBUS.
fn fast() -> bool {
    FAST.load(Ordering::Acquire) && FAULTS_BLOCKED.load(Ordering::Acquire) == 0
}

/// Whether reads cost a few nanoseconds now (not a system call each): for
/// callers that would make many.
pub fn cheap() -> bool {
    fast()
}

/// Copies `len` bytes at `addr` into `out`; false if any byte is unreadable.
fn read_into(addr: usize, out: *mut u8, len: usize) -> bool {
    if addr == 0 {
        return false;
    }
    if fast() {
        match len {
            // SAFETY: the routine reads 8 bytes at `addr` (a fault there is
            // caught) and writes `out`, which has room for 8 bytes.
            8 => return unsafe { oxprof_safe_load_u64(addr, out as *mut u64) } == 1,
            // SAFETY: as above, for 2 bytes.
            2 => return unsafe { oxprof_safe_load_u16(addr, out as *mut u16) } == 1,
            _ => {}
        }
    }
    let local = libc::iovec { iov_base: out as *mut libc::c_void, iov_len: len };
    let remote = libc::iovec { iov_base: addr as *mut libc::c_void, iov_len: len };
    // SAFETY: `out` has room for `len` bytes (callers pass a local); the
    // remote side is only read, by the kernel, which checks it.
    let n = unsafe { libc::process_vm_readv(PID.load(Ordering::Relaxed), &local, 1, &remote, 1, 0) };
    n == len as isize
}

/// Reads a pointer-sized word, or `None` if it is not mapped.
pub fn read_word(addr: usize) -> Option<usize> {
    let mut v: usize = 0;
    read_into(addr, &mut v as *mut usize as *mut u8, 8).then_some(v)
}

/// Reads the words at `a` and `b` with one system call; `None` unless both
/// are mapped.
pub fn read_two(a: usize, b: usize) -> Option<(usize, usize)> {
    if a == 0 || b == 0 {
        return None;
    }
    if fast() {
        return read_word(a).zip(read_word(b));
    }
    let (mut x, mut y) = (0usize, 0usize);
    let local = [
        libc::iovec { iov_base: &mut x as *mut usize as *mut libc::c_void, iov_len: 8 },
        libc::iovec { iov_base: &mut y as *mut usize as *mut libc::c_void, iov_len: 8 },
    ];
    let remote = [libc::iovec { iov_base: a as *mut libc::c_void, iov_len: 8 }, libc::iovec { iov_base: b as *mut libc::c_void, iov_len: 8 }];
    // SAFETY: `local` points at two local words; the remote side is only
    // read, by the kernel, which checks it.
    let n = unsafe { libc::process_vm_readv(PID.load(Ordering::Relaxed), local.as_ptr(), 2, remote.as_ptr(), 2, 0) };
    (n == 16).then_some((x, y))
}

/// Reads a `u16`, or `None` if it is not mapped.
pub fn read_u16(addr: usize) -> Option<u16> {
    let mut v: u16 = 0;
    read_into(addr, &mut v as *mut u16 as *mut u8, 2).then_some(v)
}

/// Reads 8 bytes (for comparing a short C string), or `None`.
pub fn read_bytes8(addr: usize) -> Option<[u8; 8]> {
    let mut v = [0u8; 8];
    read_into(addr, v.as_mut_ptr(), 8).then_some(v)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_mapped_and_refuses_unmapped() {
        assert!(init());
        let (a, b) = (7usize, 9usize);
        assert_eq!(read_two(&a as *const usize as usize, &b as *const usize as usize), Some((7, 9)));
        assert_eq!(read_two(&a as *const usize as usize, 8), None);
        let x: u64 = 0x1234_5678_9abc_def0;
        assert_eq!(read_word(&x as *const u64 as usize), Some(x as usize));
        assert_eq!(read_word(0), None);
        assert_eq!(read_word(16), None);
        let b = *b"nmethod\0";
        assert_eq!(read_bytes8(b.as_ptr() as usize), Some(b));
    }
}

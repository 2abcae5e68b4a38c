//! signal-safe: Handing a signal oxprof does not own to the handler installed before its own.
//!
//! oxprof puts its handlers in front of others: the CPU and wall signals'
//! (`sampling/signal.rs`: SIGPROF, SIGTRAP, the wall signal) and the fault
//! handler of its fault-tolerant reads (`hotspot/safemem.rs`: SIGSEGV and
//! SIGBUS, in front of the JVM's, which uses them for implicit null checks
//! and safepoint polls). Each keeps the handler it replaced in a
//! [`Previous`] and, for a signal that is not its own, calls [`hand_on`],
//! which does what the kernel would have done without oxprof. This is the
//! one place that does it.
//!
//! Async-signal-safe: atomics, `sigaction`, `raise`, `pthread_sigmask` and
//! the `sigset` calls only; `errno` is kept for the interrupted code.

use std::ffi::c_void;
use std::ptr;
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicU64, AtomicUsize, Ordering};

/// An `SA_SIGINFO` handler.
pub type SigInfoHandler = extern "C" fn(libc::c_int, *mut libc::siginfo_t, *mut c_void);

/// A handler that was installed before oxprof's: `SIG_DFL`, `SIG_IGN` or a
/// function, its flags, and the signals it blocks (the first 64, all that
/// Linux has).
pub struct Previous {
    handler: AtomicUsize,
    flags: AtomicI32,
    mask: AtomicU64,
    /// oxprof's handler was installed with this handler's mask, so the
    /// kernel already blocks it when the signal arrives.
    masked_by_kernel: AtomicBool,
}

impl Previous {
    pub const fn new() -> Previous {
        Previous { handler: AtomicUsize::new(libc::SIG_DFL), flags: AtomicI32::new(0), mask: AtomicU64::new(0), masked_by_kernel: AtomicBool::new(false) }
    }

    // signal-safe: off (installs handlers, outside them)
    /// Keeps `old`, the action oxprof's handler replaces; `same_mask` when
    /// oxprof's is installed with `old`'s mask. Call before oxprof's handler
    /// can run. The handler is written last: it is what [`hand_on`] reads
    /// first.
    pub fn save(&self, old: &libc::sigaction, same_mask: bool) {
        let mut mask = 0u64;
        for signo in 1..=64 {
            // SAFETY: sigismember only reads the set.
            if unsafe { libc::sigismember(&old.sa_mask, signo) } == 1 {
                mask |= 1 << (signo - 1);
            }
        }
        self.flags.store(old.sa_flags, Ordering::SeqCst);
        self.mask.store(mask, Ordering::SeqCst);
        self.masked_by_kernel.store(same_mask, Ordering::SeqCst);
        self.handler.store(old.sa_sigaction, Ordering::SeqCst);
    }

    /// The kept handler as an action to install again.
    pub fn action(&self) -> libc::sigaction {
        // SAFETY: a zeroed sigaction is valid plain data.
        let mut sa: libc::sigaction = unsafe { std::mem::zeroed() };
        sa.sa_sigaction = self.handler.load(Ordering::SeqCst);
        sa.sa_flags = self.flags.load(Ordering::SeqCst);
        fill_set(&mut sa.sa_mask, self.mask.load(Ordering::SeqCst));
        sa
    }
    // signal-safe: on
}

impl Default for Previous {
    fn default() -> Previous {
        Previous::new()
    }
}

/// Makes `set` hold the signals whose bits (`1 << (signo - 1)`) are in
/// `mask`. Async-signal-safe (POSIX lists both calls).
fn fill_set(set: &mut libc::sigset_t, mask: u64) {
    // SAFETY: sigemptyset and sigaddset only write the set; sigaddset refuses
    // the numbers glibc keeps for itself (errno is restored by the callers).
    unsafe {
        libc::sigemptyset(set);
        for signo in 1..=64 {
            if mask & (1 << (signo - 1)) != 0 {
                libc::sigaddset(set, signo);
            }
        }
    }
}

/// Whether `info` is a fault of the interrupted instruction itself (a
/// SIGSEGV or SIGBUS the kernel raised, not one sent), which that
/// instruction raises again when it is retried.
fn is_own_fault(signo: libc::c_int, info: *const libc::siginfo_t) -> bool {
    // SAFETY: the kernel passed a valid siginfo for this signal (or null).
    (signo == libc::SIGSEGV || signo == libc::SIGBUS) && !info.is_null() && unsafe { (*info).si_code } > 0
}

/// Hands a signal that is not oxprof's to `prev`, as the kernel would have
/// delivered it. `SIG_IGN`: nothing. `SIG_DFL`: the default action is set
/// again, and taken as the kernel would take it: a fault of the interrupted
/// instruction (a SIGSEGV or SIGBUS the kernel raised) is met again when
/// the instruction is retried, with its own siginfo (a core dump, as
/// without oxprof); any other signal is raised again (it is blocked while
/// this handler runs, so it is taken once it returns). A function: called
/// with the convention its flags name, with its own mask blocked besides
/// ours (unless the kernel did already), and reset to `SIG_DFL` first if it
/// was one-shot (`SA_RESETHAND`).
pub fn hand_on(prev: &Previous, signo: libc::c_int, info: *mut libc::siginfo_t, ucontext: *mut c_void) {
    // SAFETY: __errno_location returns this thread's errno slot, valid for
    // the thread's life.
    let errno = unsafe { libc::__errno_location() };
    // SAFETY: as above.
    let saved = unsafe { *errno };
    let handler = prev.handler.load(Ordering::SeqCst);
    if handler == libc::SIG_DFL {
        // SAFETY: sigaction and raise are async-signal-safe; see above for
        // when the signal is taken.
        unsafe {
            let mut sa: libc::sigaction = std::mem::zeroed();
            sa.sa_sigaction = libc::SIG_DFL;
            libc::sigaction(signo, &sa, ptr::null_mut());
            if !is_own_fault(signo, info) {
                libc::raise(signo);
            }
        }
    } else if handler != libc::SIG_IGN {
        let flags = prev.flags.load(Ordering::SeqCst);
        if flags & libc::SA_RESETHAND != 0 {
            prev.handler.store(libc::SIG_DFL, Ordering::SeqCst);
        }
        let mask = if prev.masked_by_kernel.load(Ordering::SeqCst) { 0 } else { prev.mask.load(Ordering::SeqCst) };
        // SAFETY: sigset_t is plain data; zeroed is a valid start.
        let (mut blocked, mut before): (libc::sigset_t, libc::sigset_t) = unsafe { (std::mem::zeroed(), std::mem::zeroed()) };
        let masked = mask != 0 && {
            fill_set(&mut blocked, mask);
            // SAFETY: pthread_sigmask is async-signal-safe and only changes
            // this thread's mask, restored below.
            unsafe { libc::pthread_sigmask(libc::SIG_BLOCK, &blocked, &mut before) == 0 }
        };
        if flags & libc::SA_SIGINFO != 0 {
            // SAFETY: `handler` is the address of the SA_SIGINFO handler that
            // was installed before ours; it is called as the kernel would have.
            let f: SigInfoHandler = unsafe { std::mem::transmute(handler) };
            f(signo, info, ucontext);
        } else {
            // SAFETY: as above, for a plain `sa_handler`.
            let f: extern "C" fn(libc::c_int) = unsafe { std::mem::transmute(handler) };
            f(signo);
        }
        if masked {
            // SAFETY: restoring the mask saved above.
            unsafe { libc::pthread_sigmask(libc::SIG_SETMASK, &before, ptr::null_mut()) };
        }
    }
    // SAFETY: as above.
    unsafe { *errno = saved };
}

#[cfg(test)]
mod tests {
    use super::*;

    static CALLS: AtomicI32 = AtomicI32::new(0);

    extern "C" fn counting(signo: libc::c_int, _: *mut libc::siginfo_t, _: *mut c_void) {
        CALLS.fetch_add(signo, Ordering::SeqCst);
        // A handler that dirties errno: hand_on must give the interrupted
        // code its own back.
        // SAFETY: this thread's errno slot.
        unsafe { *libc::__errno_location() = libc::EINTR };
    }

    fn action(handler: usize, flags: libc::c_int) -> libc::sigaction {
        // SAFETY: a zeroed sigaction is valid plain data.
        let mut sa: libc::sigaction = unsafe { std::mem::zeroed() };
        sa.sa_sigaction = handler;
        sa.sa_flags = flags;
        // SAFETY: sigaddset only writes the set.
        unsafe { libc::sigaddset(&mut sa.sa_mask, libc::SIGUSR2) };
        sa
    }

    #[test]
    fn a_previous_function_is_called_with_its_mask_and_errno_kept() {
        let prev = Previous::new();
        prev.save(&action(counting as *const () as usize, libc::SA_SIGINFO | libc::SA_RESETHAND), false);
        assert_ne!(prev.action().sa_sigaction, libc::SIG_DFL);
        // SAFETY: this thread's errno slot.
        unsafe { *libc::__errno_location() = libc::EAGAIN };
        hand_on(&prev, libc::SIGUSR1, ptr::null_mut(), ptr::null_mut());
        assert_eq!(CALLS.load(Ordering::SeqCst), libc::SIGUSR1);
        // SAFETY: as above.
        assert_eq!(unsafe { *libc::__errno_location() }, libc::EAGAIN);
        // One-shot: the next one gets the default action.
        assert_eq!(prev.action().sa_sigaction, libc::SIG_DFL);
        // Kept mask round-trips.
        let sa = prev.action();
        // SAFETY: sigismember only reads the set.
        assert_eq!(unsafe { libc::sigismember(&sa.sa_mask, libc::SIGUSR2) }, 1);
        let ignored = Previous::new();
        ignored.save(&action(libc::SIG_IGN, 0), false);
        hand_on(&ignored, libc::SIGUSR1, ptr::null_mut(), ptr::null_mut());
        assert_eq!(CALLS.load(Ordering::SeqCst), libc::SIGUSR1);
    }

    #[test]
    fn only_a_fault_the_kernel_raised_is_left_to_be_raised_again() {
        // SAFETY: siginfo_t is plain data.
        let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
        info.si_code = 1; // SEGV_MAPERR
        assert!(is_own_fault(libc::SIGSEGV, &info) && is_own_fault(libc::SIGBUS, &info));
        assert!(!is_own_fault(libc::SIGPROF, &info));
        info.si_code = -6; // SI_TKILL: sent, not raised by an instruction
        assert!(!is_own_fault(libc::SIGSEGV, &info));
        assert!(!is_own_fault(libc::SIGSEGV, ptr::null()));
    }
}

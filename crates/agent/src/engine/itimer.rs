//! signal-safe: The process-wide `setitimer(ITIMER_PROF)` engine. The kernel delivers
//! SIGPROF to a thread that was running; its resolution is the kernel tick.
//! A process has one such timer: oxprof refuses to take it from another
//! component, and while it is oxprof's, every SIGPROF the kernel sends on its
//! own (`SI_KERNEL`) is oxprof's ([`sends_sigprof`]).

use std::io;
use std::sync::atomic::{AtomicBool, Ordering};

/// Whether oxprof armed ITIMER_PROF (see [`sends_sigprof`]).
static OURS: AtomicBool = AtomicBool::new(false);

fn set(interval_ns: u64) -> io::Result<()> {
    let tv = libc::timeval { tv_sec: (interval_ns / 1_000_000_000) as libc::time_t, tv_usec: ((interval_ns % 1_000_000_000) / 1000) as libc::suseconds_t };
    let it = libc::itimerval { it_interval: tv, it_value: tv };
    // SAFETY: setitimer with a valid itimerval.
    if unsafe { libc::setitimer(libc::ITIMER_PROF, &it, std::ptr::null_mut()) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Arms ITIMER_PROF, unless another component of the process has it armed.
pub fn start(interval_ns: u64) -> io::Result<()> {
    // SAFETY: getitimer writes a plain itimerval.
    let mut now: libc::itimerval = unsafe { std::mem::zeroed() };
    // SAFETY: as above.
    if unsafe { libc::getitimer(libc::ITIMER_PROF, &mut now) } != 0 {
        return Err(io::Error::last_os_error());
    }
    let armed = now.it_value.tv_sec != 0 || now.it_value.tv_usec != 0;
    if armed && !OURS.load(Ordering::SeqCst) {
        return Err(io::Error::new(io::ErrorKind::AddrInUse, "ITIMER_PROF is already armed by another component of this process"));
    }
    OURS.store(true, Ordering::SeqCst);
    set(interval_ns.max(1000))
}

/// Pauses (interval 0) or resumes ITIMER_PROF while oxprof owns it.
pub fn set_interval(interval_ns: u64) -> io::Result<()> {
    if !OURS.load(Ordering::SeqCst) {
        return Ok(());
    }
    set(if interval_ns == 0 { 0 } else { interval_ns.max(1000) })
}

/// Disarms ITIMER_PROF. SIGPROFs the kernel sends on its own still count as
/// oxprof's: one of this timer's can still be pending.
pub fn stop() {
    let _ = set(0);
}

/// Whether a SIGPROF the kernel sent on its own (`SI_KERNEL`: only
/// ITIMER_PROF does) is oxprof's: oxprof armed the timer since its SIGPROF
/// handler was installed. Async-signal-safe.
pub fn sends_sigprof() -> bool {
    OURS.load(Ordering::Relaxed)
}

/// Called once oxprof's SIGPROF handler is gone (and with it the last signal
/// of a stopped timer): ITIMER_PROF is free for others again.
pub fn forget() {
    OURS.store(false, Ordering::SeqCst);
}

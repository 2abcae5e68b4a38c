//! The process-wide `setitimer(ITIMER_PROF)` engine. The kernel delivers
//! SIGPROF to a thread that was running; its resolution is the kernel tick.

use std::io;

fn set(interval_ns: u64) -> io::Result<()> {
    let tv = libc::timeval { tv_sec: (interval_ns / 1_000_000_000) as libc::time_t, tv_usec: ((interval_ns % 1_000_000_000) / 1000) as libc::suseconds_t };
    let it = libc::itimerval { it_interval: tv, it_value: tv };
    // SAFETY: setitimer with a valid itimerval.
    if unsafe { libc::setitimer(libc::ITIMER_PROF, &it, std::ptr::null_mut()) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

pub fn start(interval_ns: u64) -> io::Result<()> {
    set(interval_ns.max(1000))
}

pub fn stop() {
    let _ = set(0);
}

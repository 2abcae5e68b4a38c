//! signal-safe: Per-thread POSIX timers on a thread's CPU-time clock, delivering SIGPROF to
//! that thread (`SIGEV_THREAD_ID`). Their signals carry [`SIGEV_COOKIE`], so
//! the handler tells them from other timers' SIGPROFs (JDK 25's JFR has its
//! own).

use std::io;

/// The `sigev_value` of oxprof's timers, which the kernel hands back as the
/// signal's `si_value` ("oxprof" + 2). As a pointer it is not canonical on
/// x86_64 or arm64, so no timer that passes a real pointer carries it.
pub const SIGEV_COOKIE: usize = 0x6f78_7072_6f66_0002;

/// A running timer; deleted on drop.
#[derive(Debug)]
pub struct CpuTimer {
    id: libc::timer_t,
}

// SAFETY: a timer_t is a kernel timer id usable from any thread.
unsafe impl Send for CpuTimer {}
// SAFETY: as above; we never mutate through a shared reference.
unsafe impl Sync for CpuTimer {}

impl CpuTimer {
    /// Stops (`interval_ns` 0) or restarts the timer.
    pub fn set_interval(&self, interval_ns: u64) -> io::Result<()> {
        let ts = libc::timespec { tv_sec: (interval_ns / 1_000_000_000) as libc::time_t, tv_nsec: (interval_ns % 1_000_000_000) as libc::c_long };
        let spec = libc::itimerspec { it_interval: ts, it_value: ts };
        // SAFETY: re-arming (or disarming) the timer this value owns.
        if unsafe { libc::timer_settime(self.id, 0, &spec, std::ptr::null_mut()) } != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }
}

impl Drop for CpuTimer {
    fn drop(&mut self) {
        // SAFETY: deleting the timer we created.
        unsafe { libc::timer_delete(self.id) };
    }
}

pub fn create(tid: u32, interval_ns: u64) -> io::Result<CpuTimer> {
    // SAFETY: sigevent is plain data; zeroed is a valid start.
    let mut sev: libc::sigevent = unsafe { std::mem::zeroed() };
    sev.sigev_notify = libc::SIGEV_THREAD_ID;
    sev.sigev_signo = libc::SIGPROF;
    sev.sigev_notify_thread_id = tid as libc::c_int;
    sev.sigev_value = libc::sigval { sival_ptr: SIGEV_COOKIE as *mut libc::c_void };
    let mut id: libc::timer_t = std::ptr::null_mut();
    // SAFETY: valid pointers to initialised structures.
    if unsafe { libc::timer_create(crate::sampling::cputime::thread_cpu_clock(tid), &mut sev, &mut id) } != 0 {
        return Err(io::Error::last_os_error());
    }
    let timer = CpuTimer { id };
    let ts = libc::timespec { tv_sec: (interval_ns / 1_000_000_000) as libc::time_t, tv_nsec: (interval_ns % 1_000_000_000) as libc::c_long };
    let spec = libc::itimerspec { it_interval: ts, it_value: ts };
    // SAFETY: arming the timer we just created.
    if unsafe { libc::timer_settime(timer.id, 0, &spec, std::ptr::null_mut()) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(timer)
}

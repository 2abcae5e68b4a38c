//! perf_events `cpu-clock` counters, one per thread, delivering SIGPROF to
//! their own thread on every overflow. With kernel stacks on
//! ([`set_kernel_stacks`]), counters that count kernel time also record the
//! kernel callchain of each sample into a ring ([`super::perf_ring`]).

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::sync::atomic::{AtomicBool, Ordering};

use super::perf_ring::Ring;

const PERF_TYPE_SOFTWARE: u32 = 1;
const PERF_COUNT_SW_CPU_CLOCK: u64 = 0;
const PERF_FLAG_FD_CLOEXEC: libc::c_ulong = 8;
const FLAG_DISABLED: u64 = 1 << 0;
const FLAG_EXCLUDE_KERNEL: u64 = 1 << 5;
const FLAG_EXCLUDE_HV: u64 = 1 << 6;
const FLAG_EXCLUDE_CALLCHAIN_USER: u64 = 1 << 22;
const PERF_SAMPLE_TID: u64 = 1 << 1;
const PERF_SAMPLE_CALLCHAIN: u64 = 1 << 5;
const PERF_EVENT_IOC_ENABLE: libc::c_ulong = 0x2400;
const PERF_EVENT_IOC_DISABLE: libc::c_ulong = 0x2401;
const F_SETSIG: libc::c_int = 10;
const F_SETOWN_EX: libc::c_int = 15;
const F_OWNER_TID: libc::c_int = 0;

/// `struct perf_event_attr` up to PERF_ATTR_SIZE_VER5 (112 bytes).
#[repr(C)]
#[derive(Default)]
struct PerfEventAttr {
    kind: u32,
    size: u32,
    config: u64,
    sample_period: u64,
    sample_type: u64,
    read_format: u64,
    flags: u64,
    wakeup_events: u32,
    bp_type: u32,
    config1: u64,
    config2: u64,
    branch_sample_type: u64,
    sample_regs_user: u64,
    sample_stack_user: u32,
    clockid: i32,
    sample_regs_intr: u64,
    aux_watermark: u32,
    sample_max_stack: u16,
    reserved: u16,
}

const _: () = assert!(std::mem::size_of::<PerfEventAttr>() == 112);

#[repr(C)]
struct FOwnerEx {
    kind: libc::c_int,
    pid: libc::pid_t,
}

/// Whether new counters record kernel callchains (set before threads start).
static KERNEL_STACKS: AtomicBool = AtomicBool::new(false);

/// Makes counters opened from now on record kernel callchains (cstack on).
pub fn set_kernel_stacks(on: bool) {
    KERNEL_STACKS.store(on, Ordering::SeqCst);
}

/// An open cpu-clock counter for one thread; closed on drop.
#[derive(Debug)]
pub struct PerfEvent {
    fd: OwnedFd,
    /// The callchain ring, dropped (unregistered, unmapped) before the fd closes.
    ring: Option<Ring>,
}

impl Drop for PerfEvent {
    fn drop(&mut self) {
        // SAFETY: ioctl on our own perf fd; the fd is closed by OwnedFd after.
        unsafe { libc::ioctl(self.fd.as_raw_fd(), PERF_EVENT_IOC_DISABLE as _, 0) };
        drop(self.ring.take());
    }
}

fn perf_event_open(attr: &PerfEventAttr, tid: libc::pid_t) -> io::Result<OwnedFd> {
    // SAFETY: `attr` is a properly sized perf_event_attr; the syscall reads it.
    let fd = unsafe {
        libc::syscall(libc::SYS_perf_event_open, attr as *const PerfEventAttr, tid, -1 as libc::c_int, -1 as libc::c_int, PERF_FLAG_FD_CLOEXEC)
    };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: the kernel returned a fresh fd that we now own.
    Ok(unsafe { OwnedFd::from_raw_fd(fd as i32) })
}

/// The counter's attributes. Kernel callchains only make sense when kernel
/// time is counted; user frames are unwound by the handler itself.
fn attr(interval_ns: u64, exclude_kernel: bool, callchain: bool) -> PerfEventAttr {
    let mut flags = FLAG_DISABLED | FLAG_EXCLUDE_HV;
    if exclude_kernel {
        flags |= FLAG_EXCLUDE_KERNEL;
    }
    let mut sample_type = 0;
    if callchain && !exclude_kernel {
        flags |= FLAG_EXCLUDE_CALLCHAIN_USER;
        sample_type = PERF_SAMPLE_TID | PERF_SAMPLE_CALLCHAIN;
    }
    PerfEventAttr {
        kind: PERF_TYPE_SOFTWARE,
        size: std::mem::size_of::<PerfEventAttr>() as u32,
        config: PERF_COUNT_SW_CPU_CLOCK,
        sample_period: interval_ns.max(1),
        sample_type,
        flags,
        wakeup_events: 1,
        ..Default::default()
    }
}

/// Opens a counter, counting kernel time too when allowed (needs
/// perf_event_paranoid <= 1 or CAP_PERFMON), user time only otherwise.
/// Returns the fd and whether it records kernel callchains.
fn open_counter(tid: u32, interval_ns: u64, callchain: bool) -> io::Result<(OwnedFd, bool)> {
    let refused = |e: &io::Error| matches!(e.raw_os_error(), Some(libc::EACCES) | Some(libc::EPERM));
    let tid = tid as libc::pid_t;
    if callchain {
        match perf_event_open(&attr(interval_ns, false, true), tid) {
            Ok(fd) => return Ok((fd, true)),
            Err(e) if refused(&e) || e.raw_os_error() == Some(libc::EINVAL) => {}
            Err(e) => return Err(e),
        }
    }
    match perf_event_open(&attr(interval_ns, false, false), tid) {
        Ok(fd) => Ok((fd, false)),
        Err(e) if refused(&e) => perf_event_open(&attr(interval_ns, true, false), tid).map(|fd| (fd, false)),
        Err(e) => Err(e),
    }
}

/// Checks that perf_events can count this thread's CPU clock.
pub fn probe(interval_ns: u64) -> io::Result<()> {
    // SAFETY: plain syscall.
    let tid = unsafe { libc::syscall(libc::SYS_gettid) } as u32;
    open_counter(tid, interval_ns, false).map(drop).map_err(|e| {
        io::Error::new(e.kind(), format!("perf_event_open(cpu-clock) refused: {e} (see /proc/sys/kernel/perf_event_paranoid)"))
    })
}

/// Starts a counter on `tid` that sends SIGPROF to that thread every
/// `interval_ns` of its CPU time.
pub fn open(tid: u32, interval_ns: u64) -> io::Result<PerfEvent> {
    let (fd, callchain) = open_counter(tid, interval_ns, KERNEL_STACKS.load(Ordering::SeqCst))?;
    let raw = fd.as_raw_fd();
    // Without its ring a sample's callchain goes nowhere; the counter still samples.
    let ring = if callchain {
        Ring::map(raw, tid).map_err(|e| crate::log::debug(&format!("no kernel frames for thread {tid}: perf ring: {e}"))).ok()
    } else {
        None
    };
    let owner = FOwnerEx { kind: F_OWNER_TID, pid: tid as libc::pid_t };
    // SAFETY: fcntl/ioctl on the fd we own, with correctly typed arguments.
    unsafe {
        if libc::fcntl(raw, libc::F_SETFL, libc::O_ASYNC) < 0
            || libc::fcntl(raw, F_SETSIG, libc::SIGPROF) < 0
            || libc::fcntl(raw, F_SETOWN_EX, &owner as *const FOwnerEx) < 0
            || libc::ioctl(raw, PERF_EVENT_IOC_ENABLE as _, 0) < 0
        {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(PerfEvent { fd, ring })
}

//! signal-safe: perf_events `cpu-clock` counters, one per thread, signalling their own
//! thread on every overflow. With kernel stacks on ([`set_kernel_stacks`]),
//! counters that count kernel time also record the kernel callchain of each
//! sample into a ring ([`super::perf_ring`]).
//!
//! How the signal gets there ([`Delivery`]): on Linux 5.13 and later the
//! counter's own `sigtrap` attribute sends SIGTRAP (`si_code` `TRAP_PERF`,
//! our [`SIGTRAP_COOKIE`] in `si_perf_data`). Recent kernels (6.18 on the
//! project's VM) queue it as task work, sent as the thread returns to user
//! mode. The classic route, `O_ASYNC` + `F_SETSIG` SIGPROF, always goes
//! through an irq_work: a self-interrupt per sample, one or two more VM exits
//! in a virtual machine (`bench/signal_cost.c` measures both). Older 5.13+
//! kernels queue SIGTRAP through that same irq_work, so there it gains
//! nothing and costs nothing; kernels before 5.13 get SIGPROF.
//! `OXPROF_PERF_SIGNAL=prof` forces SIGPROF, for example when a debugger that
//! stops at every SIGTRAP is attached to the JVM. Such a SIGPROF names the
//! counter's descriptor (`si_fd`); [`is_signal_fd`] tells the handler it is
//! one of oxprof's.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use super::perf_ring::Ring;

const PERF_TYPE_SOFTWARE: u32 = 1;
const PERF_COUNT_SW_CPU_CLOCK: u64 = 0;
const PERF_FLAG_FD_CLOEXEC: libc::c_ulong = 8;
const FLAG_DISABLED: u64 = 1 << 0;
const FLAG_EXCLUDE_KERNEL: u64 = 1 << 5;
const FLAG_EXCLUDE_HV: u64 = 1 << 6;
const FLAG_WATERMARK: u64 = 1 << 14;
const FLAG_EXCLUDE_CALLCHAIN_USER: u64 = 1 << 22;
const FLAG_REMOVE_ON_EXEC: u64 = 1 << 36;
const FLAG_SIGTRAP: u64 = 1 << 37;
const PERF_SAMPLE_TID: u64 = 1 << 1;
const PERF_SAMPLE_CALLCHAIN: u64 = 1 << 5;
const PERF_EVENT_IOC_ENABLE: libc::c_ulong = 0x2400;
const PERF_EVENT_IOC_DISABLE: libc::c_ulong = 0x2401;
const F_SETSIG: libc::c_int = 10;
const F_SETOWN_EX: libc::c_int = 15;
const F_OWNER_TID: libc::c_int = 0;

/// `struct perf_event_attr` up to PERF_ATTR_SIZE_VER7 (128 bytes, `sig_data`).
/// Counters that signal with SIGPROF pass the VER5 size (112), which every
/// kernel since 4.1 knows.
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
    aux_sample_size: u32,
    reserved3: u32,
    sig_data: u64,
}

const _: () = assert!(std::mem::size_of::<PerfEventAttr>() == 128);
const ATTR_SIZE_VER5: u32 = 112;

/// What `si_perf_data` holds in the SIGTRAPs of oxprof's counters, so the
/// handler tells them from breakpoints and other SIGTRAPs ("oxprof" + 1).
pub const SIGTRAP_COOKIE: u64 = 0x6f78_7072_6f66_0001;

/// How counters signal their thread.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Delivery {
    /// The counter's `sigtrap` attribute (Linux 5.13+): SIGTRAP, no self-interrupt.
    Trap,
    /// `O_ASYNC` + `F_SETSIG` SIGPROF, sent from an irq_work.
    Prof,
}

impl Delivery {
    pub fn signal_name(self) -> &'static str {
        match self {
            Delivery::Trap => "SIGTRAP",
            Delivery::Prof => "SIGPROF",
        }
    }
}

/// Environment variable that forces [`Delivery::Prof`] (`OXPROF_PERF_SIGNAL=prof`).
pub const SIGNAL_ENV: &str = "OXPROF_PERF_SIGNAL";

/// Whether counters opened from now on use [`Delivery::Trap`].
static TRAP: AtomicBool = AtomicBool::new(false);

/// Sets how counters opened from now on signal (see [`probe`]).
pub fn set_delivery(d: Delivery) {
    TRAP.store(d == Delivery::Trap, Ordering::SeqCst);
}

/// How counters opened from now on signal.
pub fn delivery() -> Delivery {
    if TRAP.load(Ordering::SeqCst) {
        Delivery::Trap
    } else {
        Delivery::Prof
    }
}

/// Descriptor numbers below this can signal with SIGPROF (the usual hard
/// limit on open files); a counter on a higher one is refused.
const SIGNAL_FDS: usize = 1 << 20;
/// One bit per descriptor number that a SIGPROF counter of oxprof's has used
/// (128 KiB, untouched pages cost no memory). Bits are never cleared: a
/// counter's signal can still be pending after it is closed, and must not
/// be taken for someone else's. A number is only claimed for a
/// `F_SETSIG` SIGPROF of another component if it also reused that number.
static SIGNAL_FD_BITS: [AtomicU64; SIGNAL_FDS / 64] = [const { AtomicU64::new(0) }; SIGNAL_FDS / 64];

/// Notes that counter `fd` signals with SIGPROF; false when the number is
/// too high to note.
fn note_signal_fd(fd: i32) -> bool {
    let Ok(fd) = usize::try_from(fd) else { return false };
    match SIGNAL_FD_BITS.get(fd / 64) {
        Some(word) => {
            word.fetch_or(1 << (fd % 64), Ordering::SeqCst);
            true
        }
        None => false,
    }
}

/// Whether a SIGPROF with `si_fd == fd` came from one of oxprof's counters.
/// Async-signal-safe.
pub fn is_signal_fd(fd: i32) -> bool {
    let Ok(fd) = usize::try_from(fd) else { return false };
    SIGNAL_FD_BITS.get(fd / 64).is_some_and(|word| word.load(Ordering::Relaxed) & (1 << (fd % 64)) != 0)
}

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

impl PerfEvent {
    /// Stops or resumes counting (and so sampling); a paused counter keeps
    /// what was left of its period.
    pub fn set_enabled(&self, on: bool) -> io::Result<()> {
        let request = if on { PERF_EVENT_IOC_ENABLE } else { PERF_EVENT_IOC_DISABLE };
        // SAFETY: ioctl on our own perf fd, no argument.
        if unsafe { libc::ioctl(self.fd.as_raw_fd(), request as _, 0) } != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }
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
    let fd = unsafe { libc::syscall(libc::SYS_perf_event_open, attr as *const PerfEventAttr, tid, -1 as libc::c_int, -1 as libc::c_int, PERF_FLAG_FD_CLOEXEC) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: the kernel returned a fresh fd that we now own.
    Ok(unsafe { OwnedFd::from_raw_fd(fd as i32) })
}

/// The counter's attributes. Kernel callchains only make sense when kernel
/// time is counted; user frames are unwound by the handler itself.
fn attr(interval_ns: u64, exclude_kernel: bool, callchain: bool, delivery: Delivery) -> PerfEventAttr {
    let mut flags = FLAG_DISABLED | FLAG_EXCLUDE_HV;
    if exclude_kernel {
        flags |= FLAG_EXCLUDE_KERNEL;
    }
    let mut sample_type = 0;
    if callchain && !exclude_kernel {
        flags |= FLAG_EXCLUDE_CALLCHAIN_USER;
        sample_type = PERF_SAMPLE_TID | PERF_SAMPLE_CALLCHAIN;
    }
    let (size, wakeup_events, sig_data) = match delivery {
        // The handler drains the ring itself, so the ring needs no wakeups
        // either: a wakeup is an irq_work too. The watermark (clamped by the
        // kernel to the ring's size) makes them as rare as they can be.
        Delivery::Trap => {
            flags |= FLAG_SIGTRAP | FLAG_REMOVE_ON_EXEC | FLAG_WATERMARK;
            (std::mem::size_of::<PerfEventAttr>() as u32, u32::MAX, SIGTRAP_COOKIE)
        }
        Delivery::Prof => (ATTR_SIZE_VER5, 1, 0),
    };
    PerfEventAttr {
        kind: PERF_TYPE_SOFTWARE,
        size,
        config: PERF_COUNT_SW_CPU_CLOCK,
        sample_period: interval_ns.max(1),
        sample_type,
        flags,
        wakeup_events,
        sig_data,
        ..Default::default()
    }
}

/// Opens a counter, counting kernel time too when allowed (needs
/// perf_event_paranoid <= 1 or CAP_PERFMON), user time only otherwise.
/// Returns the fd and whether it records kernel callchains.
fn open_counter(tid: u32, interval_ns: u64, callchain: bool, delivery: Delivery) -> io::Result<(OwnedFd, bool)> {
    let refused = |e: &io::Error| matches!(e.raw_os_error(), Some(libc::EACCES) | Some(libc::EPERM));
    let tid = tid as libc::pid_t;
    if callchain {
        match perf_event_open(&attr(interval_ns, false, true, delivery), tid) {
            Ok(fd) => return Ok((fd, true)),
            Err(e) if refused(&e) || e.raw_os_error() == Some(libc::EINVAL) => {}
            Err(e) => return Err(e),
        }
    }
    match perf_event_open(&attr(interval_ns, false, false, delivery), tid) {
        Ok(fd) => Ok((fd, false)),
        Err(e) if refused(&e) => perf_event_open(&attr(interval_ns, true, false, delivery), tid).map(|fd| (fd, false)),
        Err(e) => Err(e),
    }
}

/// Whether the kernel turned down a `sigtrap` counter for not knowing the
/// attribute (before Linux 5.13: EINVAL for the flag, E2BIG for the size).
fn sigtrap_unknown(e: &io::Error) -> bool {
    matches!(e.raw_os_error(), Some(libc::EINVAL) | Some(libc::E2BIG))
}

// signal-safe: off (run when a recording starts)
/// Checks that perf_events can count this thread's CPU clock, and finds how
/// counters can signal: [`Delivery::Trap`] unless the kernel does not know
/// `sigtrap` or [`SIGNAL_ENV`] asks for SIGPROF. Sets [`delivery`] to it.
pub fn probe(interval_ns: u64) -> io::Result<Delivery> {
    // SAFETY: plain syscall.
    let tid = unsafe { libc::syscall(libc::SYS_gettid) } as u32;
    let forced_prof = std::env::var_os(SIGNAL_ENV).is_some_and(|v| v.eq_ignore_ascii_case("prof") || v.eq_ignore_ascii_case("sigprof"));
    let delivery = if forced_prof {
        Delivery::Prof
    } else {
        match open_counter(tid, interval_ns, false, Delivery::Trap) {
            Ok(_) => Delivery::Trap,
            Err(e) if sigtrap_unknown(&e) => Delivery::Prof,
            Err(e) => return Err(refused(e)),
        }
    };
    if delivery == Delivery::Prof {
        open_counter(tid, interval_ns, false, Delivery::Prof).map(drop).map_err(refused)?;
    }
    set_delivery(delivery);
    Ok(delivery)
}
// signal-safe: on

// signal-safe: off (run when a recording starts)
fn refused(e: io::Error) -> io::Error {
    io::Error::new(e.kind(), format!("perf_event_open(cpu-clock) refused: {e} (see /proc/sys/kernel/perf_event_paranoid)"))
}
// signal-safe: on

// signal-safe: off (opens a thread's counter, outside the handler)
/// Starts a counter on `tid` that signals that thread every `interval_ns`
/// of its CPU time, the way [`delivery`] says.
pub fn open(tid: u32, interval_ns: u64) -> io::Result<PerfEvent> {
    let delivery = delivery();
    let (fd, callchain) = open_counter(tid, interval_ns, KERNEL_STACKS.load(Ordering::SeqCst), delivery)?;
    let raw = fd.as_raw_fd();
    // Without its ring a sample's callchain goes nowhere; the counter still samples.
    let ring =
        if callchain { Ring::map(raw, tid).map_err(|e| crate::log::debug(&format!("no kernel frames for thread {tid}: perf ring: {e}"))).ok() } else { None };
    if delivery == Delivery::Prof {
        if !note_signal_fd(raw) {
            return Err(io::Error::other(format!("perf_events descriptor {raw} is too high to signal with SIGPROF")));
        }
        let owner = FOwnerEx { kind: F_OWNER_TID, pid: tid as libc::pid_t };
        // SAFETY: fcntl on the fd we own, with correctly typed arguments.
        let failed = unsafe {
            libc::fcntl(raw, libc::F_SETFL, libc::O_ASYNC) < 0
                || libc::fcntl(raw, F_SETSIG, libc::SIGPROF) < 0
                || libc::fcntl(raw, F_SETOWN_EX, &owner as *const FOwnerEx) < 0
        };
        if failed {
            return Err(io::Error::last_os_error());
        }
    }
    // SAFETY: ioctl on the fd we own.
    if unsafe { libc::ioctl(raw, PERF_EVENT_IOC_ENABLE as _, 0) } < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(PerfEvent { fd, ring })
}
// signal-safe: on

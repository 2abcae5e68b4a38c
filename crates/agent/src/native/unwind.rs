//! signal-safe: The native part of a CPU sample, collected inside the SIGPROF handler:
//! kernel frames from the perf_events ring (perf engine only), then user
//! frames from a frame-pointer walk (or, with `cstack=dwarf`, the DWARF
//! unwinder of `native_dwarf`) starting at the signal's `ucontext`, up to the
//! first return address inside the JVM's Java code (the code cache), where
//! AsyncGetCallTrace's Java frames take over.
//!
//! Handler rules hold: no allocation, no locks, nothing that can panic.
//! Memory is read directly only inside a [`StackWindow`]: pages of the
//! interrupted thread's own stack that a probe has just proved readable, so
//! most frames cost no syscall. The probe has the kernel copy the start of
//! the page as the `siginfo_t` of an `rt_sigqueueinfo` with signal 0, which
//! sends nothing (see [`page_readable`]): `EFAULT` instead of a fault, no
//! descriptor that the application could close and reuse, no address-space
//! lock. Else the bytes are copied with `process_vm_readv` on our own
//! process (which takes that lock). When neither works (seccomp), only the
//! interrupted PC is kept.
//!
//! Frame pointers only give the frames of code built with them: libjvm and
//! the JDK's own libraries have them, most Debian libraries (libc, libz) do
//! not. A function without one is skipped (its caller's frame is found
//! through the saved `rbp` of the next frame that has one), and a garbage
//! `rbp` can add a wrong frame or two before the walk stops on a sanity check.

use std::ffi::c_void;
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicU64, Ordering};

use crate::engine::perf_ring;
use crate::native::dwarf as native_dwarf;
use crate::sampling::cputime::CpuSpent;
use crate::sampling::store::RawFrame;

/// Most native and kernel frames kept per sample.
pub const MAX_NATIVE_FRAMES: usize = 128;
/// A frame pointer further than this above the interrupted stack pointer is
/// taken as garbage (thread stacks are at most a few MiB here).
const MAX_STACK_SPAN: usize = 64 << 20;

/// Whether safe memory probes work (checked by [`init`]).
static SAFE_READ: AtomicBool = AtomicBool::new(false);

/// CPU time spent in [`collect`], since [`init`].
static SPENT: CpuSpent = CpuSpent::new();
/// Memory probes made by walks since [`init`].
static PROBES: AtomicU64 = AtomicU64::new(0);

/// Native parts collected since [`init`].
static COLLECTED: AtomicU64 = AtomicU64::new(0);

/// Mean memory probes per sample, times 100.
pub fn probes_per_100_samples() -> u64 {
    (PROBES.load(Ordering::Relaxed) * 100).checked_div(COLLECTED.load(Ordering::Relaxed)).unwrap_or(0)
}

/// Mean CPU nanoseconds one sample spent collecting its native part, if any.
pub fn mean_ns() -> Option<u64> {
    SPENT.mean_ns()
}

/// Checks, off the signal path, that safe reads work, and resets the cost
/// counters. Returns whether safe reads work.
pub fn init() -> bool {
    SPENT.reset();
    PROBES.store(0, Ordering::Relaxed);
    COLLECTED.store(0, Ordering::Relaxed);
    // SAFETY: getpid has no preconditions.
    PID.store(unsafe { libc::getpid() }, Ordering::SeqCst);
    // The probe must tell both answers apart (a seccomp filter could answer
    // every call with the same error).
    let here = 0x5eed_usize;
    let probe_works = page_readable(&here as *const usize as usize) == Some(true) && page_readable(8) == Some(false);
    PAGE_PROBE.store(probe_works, Ordering::SeqCst);
    let pair = [0x5eed_usize, 1];
    let ok = read_words(pair.as_ptr() as usize) == Some((0x5eed, 1)) && read_words(8).is_none();
    SAFE_READ.store(ok, Ordering::SeqCst);
    ok
}

/// Our process id (set by [`init`]).
static PID: AtomicI32 = AtomicI32::new(0);
/// Whether [`page_readable`] works here (checked by [`init`]).
static PAGE_PROBE: AtomicBool = AtomicBool::new(false);

/// Whether the page holding `addr` is readable, or `None` when the probe
/// cannot tell. The kernel copies the page's first 128 bytes as the
/// `siginfo_t` of `rt_sigqueueinfo(pid, 0, info)`: signal 0 only checks that
/// the signal could be sent, so nothing is sent, no descriptor is involved,
/// and the copy answers `EFAULT` instead of faulting (for an unmapped or
/// unreadable page alike). Any other answer comes after the copy
/// succeeded: `E2BIG` (bytes the kernel wants zero), `EPERM` (a `si_code`
/// only the main thread may send to its own pid). The address-space lock is
/// taken only if the page has to be faulted in. Async-signal-safe.
fn page_readable(addr: usize) -> Option<bool> {
    let page = addr & !(PAGE - 1);
    // SAFETY: the kernel only reads 128 bytes at `page`, checking them, and
    // sends no signal for signal 0.
    let rc = unsafe { libc::syscall(libc::SYS_rt_sigqueueinfo, PID.load(Ordering::Relaxed), 0, page) };
    if rc == 0 {
        return Some(true);
    }
    // SAFETY: errno of this thread (the handler restores it on exit).
    match unsafe { *libc::__errno_location() } {
        libc::EFAULT => Some(false),
        libc::E2BIG | libc::EPERM => Some(true),
        _ => None,
    }
}

/// Copies the two words at `addr` (8-byte aligned), or `None` when any byte
/// is not readable. Async-signal-safe.
fn read_words(addr: usize) -> Option<(usize, usize)> {
    let mut buf = [0usize; 2];
    probe(addr, &mut buf).then_some((buf[0], buf[1]))
}

/// Copies `buf.len()` words from `addr` (8-byte aligned); false when any
/// byte is not readable. Probes the pages with [`page_readable`] and then
/// reads them directly, else copies with `process_vm_readv`.
fn probe(addr: usize, buf: &mut [usize]) -> bool {
    let len = buf.len() * 8;
    if !addr.is_multiple_of(8) || len == 0 || addr > usize::MAX - len {
        return false;
    }
    PROBES.fetch_add(1, Ordering::Relaxed);
    let last = addr + len - 1;
    if PAGE_PROBE.load(Ordering::Relaxed) {
        let last_page = if last & !(PAGE - 1) == addr & !(PAGE - 1) { Some(true) } else { page_readable(last) };
        match (page_readable(addr), last_page) {
            (Some(true), Some(true)) => {
                let p = addr as *const usize;
                for (i, w) in buf.iter_mut().enumerate() {
                    // SAFETY: the kernel has just read these pages for us:
                    // they are mapped and readable (our own stack in the walks).
                    *w = unsafe { p.add(i).read_volatile() };
                }
                return true;
            }
            (Some(false), _) | (_, Some(false)) => return false,
            _ => {}
        }
    }
    copy_words(addr, buf)
}

/// Copies `buf.len()` words from `addr` with `process_vm_readv` on our own
/// process; false when any byte is not readable. Async-signal-safe.
fn copy_words(addr: usize, buf: &mut [usize]) -> bool {
    let len = buf.len() * 8;
    let local = libc::iovec { iov_base: buf.as_mut_ptr() as *mut c_void, iov_len: len };
    let remote = libc::iovec { iov_base: addr as *mut c_void, iov_len: len };
    // SAFETY: process_vm_readv copies into our local buffer of `len` bytes
    // and reports an unreadable remote range as an error instead of faulting.
    let n = unsafe { libc::process_vm_readv(PID.load(Ordering::Relaxed), &local, 1, &remote, 1, 0) };
    n == len as isize
}

/// Granularity of the window (x86_64's base page; larger pages only make it
/// conservative).
const PAGE: usize = 4096;

/// The stack pages known readable during one walk: a contiguous range that
/// starts at the interrupted stack pointer's page and grows upwards only by
/// pages that a [`read_words`] probe has just read. It starts inside this
/// thread's live stack, which stays mapped while the thread runs (the
/// handler runs on it), and frames only grow upwards from there, so the
/// window covers this thread's stack; it could pass the stack's top only
/// through a chain of corrupt frame pointers, and even then each page was
/// readable a moment before.
pub(crate) struct StackWindow {
    lo: usize,
    hi: usize,
}

impl StackWindow {
    /// An empty window starting at the page of `sp`, the interrupted stack
    /// pointer (which is not trusted: nothing is read before a probe).
    pub(crate) fn new(sp: usize) -> StackWindow {
        let lo = sp & !(PAGE - 1);
        StackWindow { lo, hi: lo }
    }

    /// A window over the calling thread's own stack from the page of `sp` up
    /// to `stack.top`, readable without probes, when the thread's bounds are
    /// known (see [`OwnStack`]) and `sp` lies between the handler's frame and
    /// the top; else an empty window as [`StackWindow::new`].
    pub(crate) fn within(sp: usize, stack: OwnStack) -> StackWindow {
        let mut w = StackWindow::new(sp);
        if stack.here != 0 && stack.here < sp && sp < stack.top && stack.top - stack.here <= MAX_STACK_SPAN {
            w.lo = w.lo.max(stack.here & !(PAGE - 1));
            w.hi = stack.top;
        }
        w
    }

    /// The two words at `addr` (8-byte aligned, at or above the window's
    /// start), read directly inside the window, else probed.
    /// Async-signal-safe; `None` when not readable.
    pub(crate) fn read(&mut self, addr: usize) -> Option<(usize, usize)> {
        let mut buf = [0usize; 2];
        self.fill(addr, &mut buf).then_some((buf[0], buf[1]))
    }

    /// One word at `addr`, as [`StackWindow::read`].
    fn read_word(&mut self, addr: usize) -> Option<usize> {
        let mut buf = [0usize; 1];
        self.fill(addr, &mut buf).then_some(buf[0])
    }

    fn fill(&mut self, addr: usize, buf: &mut [usize]) -> bool {
        let len = buf.len() * 8;
        if !addr.is_multiple_of(8) || addr < self.lo || addr > usize::MAX - len {
            return false;
        }
        let last = addr + len - 1;
        if last < self.hi {
            let p = addr as *const usize;
            for (i, w) in buf.iter_mut().enumerate() {
                // SAFETY: [addr, addr + len) lies inside the window: pages of
                // this thread's stack read successfully during this walk.
                *w = unsafe { p.add(i).read_volatile() };
            }
            return true;
        }
        if !probe(addr, buf) {
            return false;
        }
        if addr & !(PAGE - 1) <= self.hi {
            // Adjacent or inside: the probe read every page up to `last`.
            self.hi = self.hi.max((last & !(PAGE - 1)) + PAGE);
        }
        true
    }
}

/// The calling thread's own stack, as far as the signal handler can vouch
/// for it without a probe: from `here`, an address in the handler's own frame
/// (so the handler runs on this stack, not on an alternate signal stack), up
/// to `top`, the stack's base as HotSpot recorded it for the thread (from
/// `pthread_getattr_np` when the thread started). A thread's stack is one
/// mapping whose only protected pages (glibc's guard, HotSpot's guard zones)
/// lie at its low end, below any frame that runs: every page from a running
/// frame up to the base is mapped and readable while the thread lives. The
/// default (`top` 0) vouches for nothing.
#[derive(Clone, Copy, Debug, Default)]
pub struct OwnStack {
    pub here: usize,
    pub top: usize,
}

/// The registers the walk starts from: (pc, sp, fp).
fn registers(ucontext: *mut c_void) -> Option<(usize, usize, usize)> {
    if ucontext.is_null() {
        return None;
    }
    let uc = ucontext as *const libc::ucontext_t;
    // SAFETY: the kernel passed a valid ucontext for this signal.
    let gregs = unsafe { &(*uc).uc_mcontext.gregs };
    let get = |r: libc::c_int| gregs.get(r as usize).map(|&v| v as usize);
    Some((get(libc::REG_RIP)?, get(libc::REG_RSP)?, get(libc::REG_RBP)?))
}

/// Async-signal-safe: writes the native part of this sample into `out`, leaf
/// first (kernel frames, then user frames), and returns how many. `kernel`
/// asks for perf_events kernel frames, `dwarf` for DWARF unwinding
/// (`native_dwarf`) instead of frame pointers; `in_java_code` tells where the
/// JVM's Java frames begin; `stack` is what is known of the thread's stack
/// (its words are then read without probes); `timed`: count its CPU time
/// in [`mean_ns`]. The flag says the walk was cut: `out` was full while a
/// native frame below it was still to come.
pub fn collect(
    timed: bool,
    tid: u32,
    ucontext: *mut c_void,
    (kernel, dwarf): (bool, bool),
    stack: OwnStack,
    in_java_code: fn(usize) -> bool,
    out: &mut [RawFrame],
) -> (usize, bool) {
    COLLECTED.fetch_add(1, Ordering::Relaxed);
    let call = SPENT.begin_if(timed);
    let walked = walk(tid, ucontext, (kernel, dwarf), stack, in_java_code, out);
    SPENT.end(call);
    walked
}

fn walk(
    tid: u32,
    ucontext: *mut c_void,
    (kernel, dwarf): (bool, bool),
    stack: OwnStack,
    in_java_code: fn(usize) -> bool,
    out: &mut [RawFrame],
) -> (usize, bool) {
    let mut n = if kernel { perf_ring::kernel_frames(tid, out) } else { 0 };
    let Some((pc, mut sp, mut fp)) = registers(ucontext) else { return (n, false) };
    if in_java_code(pc) || pc == 0 {
        return (n, false);
    }
    let Some(slot) = out.get_mut(n) else { return (n, true) };
    *slot = RawFrame::native_pc(pc);
    n += 1;
    if !SAFE_READ.load(Ordering::Relaxed) {
        return (n, false);
    }
    // Each frame: [fp] = caller's fp, [fp+8] = return address. Frames only
    // grow towards higher addresses.
    let mut window = StackWindow::within(sp, stack);
    if dwarf {
        let mut read = |addr: u64| window.read_word(addr as usize).map(|w| w as u64);
        let rest = out.get_mut(n..).unwrap_or_default();
        if let Some((k, cut)) = native_dwarf::unwind(pc, sp, fp, in_java_code, &mut read, rest) {
            return (n + k, cut);
        }
    }
    loop {
        if fp < sp || fp - sp > MAX_STACK_SPAN {
            break;
        }
        let Some((next_fp, ret)) = window.read(fp) else { break };
        if ret < 4096 || in_java_code(ret) {
            break;
        }
        // A native frame with no room left: the walk is cut.
        let Some(slot) = out.get_mut(n) else { return (n, true) };
        // A return address points after the call: step back into it.
        *slot = RawFrame::native_pc(ret - 1);
        n += 1;
        if next_fp <= fp {
            break;
        }
        sp = fp + 16;
        fp = next_fp;
    }
    (n, false)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn safe_reads_copy_mapped_memory_and_refuse_the_rest() {
        assert!(init());
        assert!(PAGE_PROBE.load(Ordering::SeqCst), "the rt_sigqueueinfo probe works here");
        let words = [7usize, 9, 11];
        assert_eq!(read_words(words.as_ptr() as usize), Some((7, 9)));
        assert_eq!(read_words(8), None);
        assert_eq!(read_words(words.as_ptr() as usize + 1), None, "unaligned");
        let mut buf = [0usize; 2];
        assert!(copy_words(words.as_ptr() as usize + 8, &mut buf), "process_vm_readv path");
        assert_eq!(buf, [9, 11]);
        assert!(!copy_words(8, &mut buf));
        // An inaccessible page (a guard page, say) is refused like an unmapped one.
        // SAFETY: a fresh PROT_NONE mapping, unmapped below.
        let none = unsafe { libc::mmap(std::ptr::null_mut(), PAGE, libc::PROT_NONE, libc::MAP_PRIVATE | libc::MAP_ANONYMOUS, -1, 0) };
        assert_ne!(none, libc::MAP_FAILED);
        assert_eq!(page_readable(none as usize + 64), Some(false));
        assert_eq!(read_words(none as usize), None);
        // SAFETY: unmapping our own mapping.
        unsafe { libc::munmap(none, PAGE) };
        // Two words straddling a readable page and an inaccessible one.
        // SAFETY: a fresh two-page mapping whose second page is made inaccessible.
        let two = unsafe { libc::mmap(std::ptr::null_mut(), 2 * PAGE, libc::PROT_READ | libc::PROT_WRITE, libc::MAP_PRIVATE | libc::MAP_ANONYMOUS, -1, 0) };
        assert_ne!(two, libc::MAP_FAILED);
        // SAFETY: protecting the second page of our own mapping.
        assert_eq!(unsafe { libc::mprotect((two as *mut u8).add(PAGE) as *mut c_void, PAGE, libc::PROT_NONE) }, 0);
        assert_eq!(read_words(two as usize + PAGE - 16), Some((0, 0)));
        assert_eq!(read_words(two as usize + PAGE - 8), None, "the second word is on the inaccessible page");
        // SAFETY: unmapping our own mapping.
        unsafe { libc::munmap(two, 2 * PAGE) };
    }

    /// Walks write into no descriptor: an application may close descriptors
    /// it does not own and get the numbers back for its own files, even in
    /// the middle of a walk. Here every pipe and socket of the process (a
    /// probe channel would be one) is replaced by a regular file after a
    /// walk's first probe; the walk's further probes must work, leave the
    /// file empty, and not block.
    #[test]
    fn probes_touch_no_descriptor_even_one_reused_mid_walk() {
        assert!(init());
        let words = vec![0usize; 4 * PAGE / 8].into_boxed_slice();
        let base = (words.as_ptr() as usize + PAGE - 1) & !(PAGE - 1); // 3 pages inside
        let path = std::env::temp_dir().join(format!("oxprof-probe-{}", std::process::id()));
        let file = std::fs::OpenOptions::new().read(true).write(true).create(true).truncate(true).open(&path).unwrap();
        let file_fd = std::os::fd::AsRawFd::as_raw_fd(&file);
        let mut w = StackWindow::new(base);
        assert!(w.read(base + 8).is_some(), "the walk's first probe");
        let channels: Vec<i32> = std::fs::read_dir("/proc/self/fd")
            .unwrap()
            .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<i32>().ok())
            .filter(|&fd| {
                // SAFETY: a zeroed stat is valid plain data; fstat fills it.
                let mut st: libc::stat = unsafe { std::mem::zeroed() };
                // SAFETY: fstat writes only `st`.
                fd > 2 && fd != file_fd && unsafe { libc::fstat(fd, &mut st) } == 0 && matches!(st.st_mode & libc::S_IFMT, libc::S_IFIFO | libc::S_IFSOCK)
            })
            .collect();
        let mut saved = Vec::new();
        for &fd in &channels {
            // SAFETY: keeping a copy of the descriptor, then putting the file on its number.
            unsafe {
                let keep = libc::fcntl(fd, libc::F_DUPFD_CLOEXEC, 1000);
                assert!(keep >= 0);
                assert_eq!(libc::dup2(file_fd, fd), fd);
                saved.push((fd, keep));
            }
        }
        let started = std::time::Instant::now();
        let read = [w.read(base + PAGE + 8), w.read(base + 2 * PAGE + 8), read_words(base + 16)];
        let took = started.elapsed();
        for (fd, keep) in saved {
            // SAFETY: putting each descriptor back on its number.
            unsafe {
                assert_eq!(libc::dup2(keep, fd), fd);
                libc::close(keep);
            }
        }
        let written = file.metadata().unwrap().len();
        drop(file);
        let _ = std::fs::remove_file(&path);
        // The window grew over the two pages above its first: probed, not read directly.
        assert_eq!(w.hi, base + 3 * PAGE, "the reads were probes");
        assert_eq!(read, [Some((0, 0)); 3]);
        assert_eq!(written, 0, "probes wrote stack bytes into a reused descriptor ({} replaced)", channels.len());
        assert!(took < std::time::Duration::from_secs(1), "probes took {took:?}");
        drop(words);
    }

    #[test]
    fn the_window_reads_directly_only_what_a_probe_proved_readable() {
        assert!(init());
        let words = vec![0usize; 3 * PAGE / 8].into_boxed_slice();
        let base = (words.as_ptr() as usize + PAGE - 1) & !(PAGE - 1); // page-aligned, 2 pages inside
        let mut w = StackWindow::new(base);
        assert_eq!((w.lo, w.hi), (base, base), "starts empty");
        assert_eq!(w.read(base + 8), Some((0, 0)));
        assert_eq!(w.hi, base + PAGE, "the probed page joins the window");
        assert_eq!(w.read(base + PAGE - 8), Some((0, 0)), "straddles into the next page: probed");
        assert_eq!(w.hi, base + 2 * PAGE);
        assert_eq!(w.read(base - 8), None, "below the stack pointer's page");
        assert_eq!(w.read(base + 4), None, "unaligned");
        // A probe far above does not make the pages in between readable.
        let mut w = StackWindow::new(base);
        assert!(w.read(base + PAGE + 8).is_some());
        assert_eq!(w.hi, base, "not contiguous: the window stays empty");
        let mut w = StackWindow::new(16 * PAGE);
        assert_eq!(w.read(16 * PAGE + 8), None, "unmapped: the probe fails, no fault");
        assert_eq!(w.hi, 16 * PAGE);
        drop(words);
    }

    /// With the thread's stack vouched for, the window spans it from the
    /// stack pointer's page to the top at once (no probe); a stack pointer
    /// outside it, or bounds that do not hold the caller, vouch for nothing.
    #[test]
    fn a_vouched_stack_is_read_without_probes() {
        assert!(init());
        let local = 0u8;
        let here = &local as *const u8 as usize;
        let (sp, top) = (here + 4 * PAGE, (here + 64 * PAGE) & !(PAGE - 1));
        let w = StackWindow::within(sp, OwnStack { here, top });
        assert_eq!((w.lo, w.hi), (sp & !(PAGE - 1), top));
        // (Other tests probe at the same time: 1,000 reads, far fewer probes.)
        let probes = PROBES.load(Ordering::Relaxed);
        let mut w = StackWindow::within(here + 8, OwnStack { here, top });
        for _ in 0..1000 {
            assert!(w.read((here + 64) & !7).is_some());
        }
        assert!(PROBES.load(Ordering::Relaxed) - probes < 100, "read inside the vouched stack without probes");
        for (sp, stack) in [
            (top + 8, OwnStack { here, top }),
            (here - 64, OwnStack { here, top }),
            (sp, OwnStack::default()),
            (sp, OwnStack { here, top: here + MAX_STACK_SPAN + 2 * PAGE }),
        ] {
            let w = StackWindow::within(sp, stack);
            assert_eq!(w.lo, w.hi, "empty window for sp {sp:#x} in {stack:?}");
        }
    }

    #[inline(never)]
    fn walk_here(out: &mut [RawFrame]) -> (usize, bool) {
        // SAFETY: getcontext fills a ucontext for the current thread.
        let mut uc: libc::ucontext_t = unsafe { std::mem::zeroed() };
        // SAFETY: as above.
        unsafe { libc::getcontext(&mut uc) };
        collect(true, 0, &mut uc as *mut _ as *mut c_void, (false, false), OwnStack::default(), |_| false, out)
    }

    #[test]
    fn walks_frame_pointers_of_this_test_and_stops_at_java_code() {
        assert!(init());
        let mut out = [RawFrame::default(); MAX_NATIVE_FRAMES];
        let (n, cut) = walk_here(&mut out);
        assert!(n >= 1);
        assert!(!cut, "a test's stack fits in {MAX_NATIVE_FRAMES} frames");
        assert!(out[..n].iter().all(|f| f.bci == RawFrame::NATIVE_PC && f.method != 0));
        let mut small = [RawFrame::default(); 1];
        let (k, cut) = walk_here(&mut small);
        assert_eq!(k, 1, "depth limit");
        // The same stack walked into one slot: the frames that did not fit are said.
        assert_eq!(cut, n > 1, "a walk with frames left over says it was cut");
        assert_eq!(collect(true, 0, std::ptr::null_mut(), (false, false), OwnStack::default(), |_| false, &mut out), (0, false));
        // When the interrupted PC is Java code there is no native part.
        // SAFETY: as in walk_here.
        let mut uc: libc::ucontext_t = unsafe { std::mem::zeroed() };
        // SAFETY: as above.
        unsafe { libc::getcontext(&mut uc) };
        assert_eq!(collect(true, 0, &mut uc as *mut _ as *mut c_void, (false, false), OwnStack::default(), |_| true, &mut out), (0, false));
    }
}

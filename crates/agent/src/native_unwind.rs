//! The native part of a CPU sample, collected inside the SIGPROF handler:
//! kernel frames from the perf_events ring (perf engine only), then user
//! frames from a frame-pointer walk (or, with `cstack=dwarf`, the DWARF
//! unwinder of `native_dwarf`) starting at the signal's `ucontext`, up to the
//! first return address inside the JVM's Java code (the code cache), where
//! AsyncGetCallTrace's Java frames take over.
//!
//! Handler rules hold: no allocation, no locks, nothing that can panic.
//! Memory is read directly only inside a [`StackWindow`]: pages of the
//! interrupted thread's own stack that a probe has just proved readable, so
//! most frames cost no syscall. The probe writes the bytes into a pipe (the
//! kernel answers `EFAULT` instead of faulting), else copies them with
//! `process_vm_readv` on our own process. When neither works (seccomp), only
//! the interrupted PC is kept.
//!
//! Frame pointers only give the frames of code built with them: libjvm and
//! the JDK's own libraries have them, most Debian libraries (libc, libz) do
//! not. A function without one is skipped (its caller's frame is found
//! through the saved `rbp` of the next frame that has one), and a garbage
//! `rbp` can add a wrong frame or two before the walk stops on a sanity check.

use std::ffi::c_void;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use crate::cputime::CpuSpent;
use crate::engine::perf_ring;
use crate::native_dwarf;
use crate::store::RawFrame;

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

/// Mean memory probes per sample, times 100.
pub fn probes_per_100_samples() -> u64 {
    (PROBES.load(Ordering::Relaxed) * 100).checked_div(SPENT.calls()).unwrap_or(0)
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
    if PIPE_W.load(Ordering::SeqCst) < 0 {
        let mut fds = [-1; 2];
        // SAFETY: pipe2 writes two fds into our array.
        if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_NONBLOCK | libc::O_CLOEXEC) } == 0 {
            if let Some((dev, ino)) = fifo_id(fds[0]) {
                PIPE_DEV.store(dev, Ordering::SeqCst);
                PIPE_INO.store(ino, Ordering::SeqCst);
                PIPE_R.store(fds[0], Ordering::SeqCst);
                PIPE_W.store(fds[1], Ordering::SeqCst);
            }
        }
    }
    let pair = [0x5eed_usize, 1];
    let ok = read_words(pair.as_ptr() as usize) == Some((0x5eed, 1));
    SAFE_READ.store(ok, Ordering::SeqCst);
    ok
}

/// A non-blocking pipe used as a readability probe (see [`probe`]); -1 until [`init`].
static PIPE_R: std::sync::atomic::AtomicI32 = std::sync::atomic::AtomicI32::new(-1);
static PIPE_W: std::sync::atomic::AtomicI32 = std::sync::atomic::AtomicI32::new(-1);
/// The pipe's device and inode, to recognise its descriptors.
static PIPE_DEV: AtomicU64 = AtomicU64::new(0);
static PIPE_INO: AtomicU64 = AtomicU64::new(0);

/// (device, inode) of a FIFO descriptor. Async-signal-safe.
fn fifo_id(fd: i32) -> Option<(u64, u64)> {
    // SAFETY: a zeroed stat is valid plain data; fstat fills it.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: fstat on a descriptor number writes only `st`.
    let ok = unsafe { libc::fstat(fd, &mut st) } == 0 && st.st_mode & libc::S_IFMT == libc::S_IFIFO;
    ok.then_some((st.st_dev, st.st_ino))
}

/// Whether both probe descriptors are still our pipe. An application may
/// close descriptors it does not own and the numbers be reused; then the
/// probe must not write to (or read from) someone else's file. Checked
/// once per walk that needs a probe. Async-signal-safe.
fn pipe_intact() -> bool {
    let id = Some((PIPE_DEV.load(Ordering::Relaxed), PIPE_INO.load(Ordering::Relaxed)));
    let (r, w) = (PIPE_R.load(Ordering::Relaxed), PIPE_W.load(Ordering::Relaxed));
    r >= 0 && w >= 0 && fifo_id(r) == id && fifo_id(w) == id
}

/// Whether `[addr, addr + len)` is readable, by writing it into the probe
/// pipe: the kernel copies from our memory and answers `EFAULT` instead of
/// faulting, without taking the address-space lock that `process_vm_readv`
/// takes (and waits on while other threads map memory). `None` when the
/// pipe cannot tell (not open, full). The caller checked [`pipe_intact`].
fn pipe_probe(addr: usize, len: usize) -> Option<bool> {
    let (r, w) = (PIPE_R.load(Ordering::Relaxed), PIPE_W.load(Ordering::Relaxed));
    if r < 0 || w < 0 {
        return None;
    }
    // SAFETY: write only reads `len` bytes at `addr`, failing with EFAULT
    // when they are not readable.
    let n = unsafe { libc::write(w, addr as *const c_void, len) };
    if n > 0 {
        // Drain what we wrote (bytes of concurrent probes may interleave;
        // only the count matters and it stays balanced).
        let mut sink = [0u8; 16];
        // SAFETY: reading at most 16 bytes into our local buffer.
        unsafe { libc::read(r, sink.as_mut_ptr() as *mut c_void, (n as usize).min(sink.len())) };
    }
    if n == len as isize {
        return Some(true);
    }
    // SAFETY: errno of this thread (the handler restores it on exit).
    let err = unsafe { *libc::__errno_location() };
    (n < 0 && err == libc::EFAULT).then_some(false)
}

/// Copies the two words at `addr` (8-byte aligned), or `None` when any byte
/// is not readable. Async-signal-safe.
fn read_words(addr: usize) -> Option<(usize, usize)> {
    let mut buf = [0usize; 2];
    probe(addr, &mut buf, pipe_intact()).then_some((buf[0], buf[1]))
}

/// Copies `buf.len()` words from `addr` (8-byte aligned) with
/// `process_vm_readv`; false when any byte is not readable.
fn probe(addr: usize, buf: &mut [usize], use_pipe: bool) -> bool {
    let len = buf.len() * 8;
    if addr % 8 != 0 || addr > usize::MAX - len {
        return false;
    }
    PROBES.fetch_add(1, Ordering::Relaxed);
    match if use_pipe { pipe_probe(addr, len) } else { None } {
        Some(true) => {
            let p = addr as *const usize;
            for (i, w) in buf.iter_mut().enumerate() {
                // SAFETY: the kernel has just read these bytes for us: they
                // are mapped and readable (our own stack in the walks).
                *w = unsafe { p.add(i).read_volatile() };
            }
            return true;
        }
        Some(false) => return false,
        None => {}
    }
    let local = libc::iovec { iov_base: buf.as_mut_ptr() as *mut c_void, iov_len: len };
    let remote = libc::iovec { iov_base: addr as *mut c_void, iov_len: len };
    // SAFETY: process_vm_readv copies into our local buffer of `len` bytes
    // and reports an unreadable remote range as an error instead of faulting.
    let n = unsafe { libc::process_vm_readv(libc::getpid(), &local, 1, &remote, 1, 0) };
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
struct StackWindow {
    lo: usize,
    hi: usize,
    /// Whether the probe pipe may be used ([`pipe_intact`], checked lazily).
    pipe: Option<bool>,
}

impl StackWindow {
    fn new(sp: usize) -> StackWindow {
        let lo = sp & !(PAGE - 1);
        StackWindow { lo, hi: lo, pipe: None }
    }

    /// The two words at `addr` (8-byte aligned, at or above the window's
    /// start), read directly inside the window, else probed.
    fn read(&mut self, addr: usize) -> Option<(usize, usize)> {
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
        if addr % 8 != 0 || addr < self.lo || addr > usize::MAX - len {
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
        let use_pipe = *self.pipe.get_or_insert_with(pipe_intact);
        if !probe(addr, buf, use_pipe) {
            return false;
        }
        if addr & !(PAGE - 1) <= self.hi {
            // Adjacent or inside: the probe read every page up to `last`.
            self.hi = self.hi.max((last & !(PAGE - 1)) + PAGE);
        }
        true
    }
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
/// JVM's Java frames begin.
pub fn collect(tid: u32, ucontext: *mut c_void, kernel: bool, dwarf: bool, in_java_code: fn(usize) -> bool, out: &mut [RawFrame]) -> usize {
    let call = SPENT.begin();
    let n = walk(tid, ucontext, kernel, dwarf, in_java_code, out);
    SPENT.end(call);
    n
}

fn walk(tid: u32, ucontext: *mut c_void, kernel: bool, dwarf: bool, in_java_code: fn(usize) -> bool, out: &mut [RawFrame]) -> usize {
    let mut n = if kernel { perf_ring::kernel_frames(tid, out) } else { 0 };
    let Some((pc, mut sp, mut fp)) = registers(ucontext) else { return n };
    if in_java_code(pc) || pc == 0 {
        return n;
    }
    let Some(slot) = out.get_mut(n) else { return n };
    *slot = RawFrame::native_pc(pc);
    n += 1;
    if !SAFE_READ.load(Ordering::Relaxed) {
        return n;
    }
    // Each frame: [fp] = caller's fp, [fp+8] = return address. Frames only
    // grow towards higher addresses.
    let mut window = StackWindow::new(sp);
    if dwarf {
        let mut read = |addr: u64| window.read_word(addr as usize).map(|w| w as u64);
        let rest = out.get_mut(n..).unwrap_or_default();
        if let Some(k) = native_dwarf::unwind(pc, sp, fp, in_java_code, &mut read, rest) {
            return n + k;
        }
    }
    while n < out.len() {
        if fp < sp || fp - sp > MAX_STACK_SPAN {
            break;
        }
        let Some((next_fp, ret)) = window.read(fp) else { break };
        if ret < 4096 || in_java_code(ret) {
            break;
        }
        let Some(slot) = out.get_mut(n) else { break };
        // A return address points after the call: step back into it.
        *slot = RawFrame::native_pc(ret - 1);
        n += 1;
        if next_fp <= fp {
            break;
        }
        sp = fp + 16;
        fp = next_fp;
    }
    n
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn safe_reads_copy_mapped_memory_and_refuse_the_rest() {
        assert!(init());
        let words = [7usize, 9, 11];
        assert_eq!(read_words(words.as_ptr() as usize), Some((7, 9)));
        assert_eq!(read_words(8), None);
        assert_eq!(read_words(words.as_ptr() as usize + 1), None, "unaligned");
        assert!(pipe_intact());
        // A descriptor that is not our pipe (say, the number was reused for a file) is refused.
        let f = std::fs::File::open("/proc/self/maps").unwrap();
        assert_eq!(fifo_id(std::os::fd::AsRawFd::as_raw_fd(&f)), None);
        assert!(probe(words.as_ptr() as usize, &mut [0usize; 2], false), "process_vm_readv path");
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

    #[inline(never)]
    fn walk_here(out: &mut [RawFrame]) -> usize {
        // SAFETY: getcontext fills a ucontext for the current thread.
        let mut uc: libc::ucontext_t = unsafe { std::mem::zeroed() };
        // SAFETY: as above.
        unsafe { libc::getcontext(&mut uc) };
        collect(0, &mut uc as *mut _ as *mut c_void, false, false, |_| false, out)
    }

    #[test]
    fn walks_frame_pointers_of_this_test_and_stops_at_java_code() {
        assert!(init());
        let mut out = [RawFrame::default(); MAX_NATIVE_FRAMES];
        let n = walk_here(&mut out);
        assert!(n >= 1);
        assert!(out[..n].iter().all(|f| f.bci == RawFrame::NATIVE_PC && f.method != 0));
        let mut small = [RawFrame::default(); 1];
        assert_eq!(walk_here(&mut small), 1, "depth limit");
        assert_eq!(collect(0, std::ptr::null_mut(), false, false, |_| false, &mut out), 0);
        // When the interrupted PC is Java code there is no native part.
        // SAFETY: as in walk_here.
        let mut uc: libc::ucontext_t = unsafe { std::mem::zeroed() };
        // SAFETY: as above.
        unsafe { libc::getcontext(&mut uc) };
        assert_eq!(collect(0, &mut uc as *mut _ as *mut c_void, false, false, |_| true, &mut out), 0);
    }
}

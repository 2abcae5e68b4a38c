//! signal-safe: The perf_events ring buffers that carry kernel callchains, and the
//! lock-free thread id → ring table the SIGPROF handler reads them through.
//!
//! Each per-thread cpu-clock counter opened with `PERF_SAMPLE_CALLCHAIN` gets
//! a small shared mapping (one metadata page plus [`DATA_PAGES`] data pages)
//! where the kernel writes one sample record per overflow, right before it
//! signals the thread. The handler, running on that thread, finds its ring in
//! [`TABLE`], reads the records between the ring's tail and head, keeps the
//! kernel frames of the newest sample and moves the tail to the head.
//!
//! Handler rules hold here: no allocation, no locks; every read of a ring is
//! masked into its mapped data area; a ring is unmapped only after it left the
//! table and no handler is inside [`kernel_frames`] ([`READERS`]).

use std::io;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU32, AtomicU64, AtomicUsize, Ordering};

use crate::sampling::store::RawFrame;

/// Data pages per ring (a power of two). One record of a 127-deep kernel
/// chain is about 1 KiB and the handler drains the ring at every sample;
/// few pages keep unprivileged users under `perf_event_mlock_kb`.
const DATA_PAGES: usize = 1;
/// Threads that can have a ring at once; more get no kernel frames.
const SLOTS: usize = 4096;
/// How far a lookup or insert probes.
const MAX_PROBE: usize = 64;

const PERF_RECORD_SAMPLE: u32 = 9;
/// perf marks context switches in a callchain with values at or above this
/// (`PERF_CONTEXT_MAX` = -4095).
const PERF_CONTEXT_MAX: u64 = (-4095i64) as u64;
const PERF_CONTEXT_USER: u64 = (-512i64) as u64;
/// Offsets of `data_head` and `data_tail` in `struct perf_event_mmap_page`.
const DATA_HEAD: usize = 1024;
const DATA_TAIL: usize = 1032;

fn page_size() -> usize {
    // SAFETY: sysconf is always safe to call.
    let p = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    if p > 0 {
        p as usize
    } else {
        4096
    }
}

/// One table entry: a thread id and its ring's base and data size.
struct Entry {
    tid: AtomicU32,
    base: AtomicUsize,
    data_size: AtomicUsize,
}

#[allow(clippy::declare_interior_mutable_const)]
const EMPTY: Entry = Entry { tid: AtomicU32::new(0), base: AtomicUsize::new(0), data_size: AtomicUsize::new(0) };
static TABLE: [Entry; SLOTS] = [EMPTY; SLOTS];
/// Handlers currently reading a ring.
static READERS: AtomicUsize = AtomicUsize::new(0);
/// Page size, set when the first ring is mapped (the handler must not call sysconf).
static PAGE: AtomicUsize = AtomicUsize::new(4096);

/// A mapped ring registered for one thread; unregistered and unmapped on drop.
#[derive(Debug)]
pub struct Ring {
    base: NonNull<u8>,
    len: usize,
    slot: usize,
}

// SAFETY: the mapping is owned by this value; the table holds only its address.
unsafe impl Send for Ring {}
// SAFETY: shared access only reads the address.
unsafe impl Sync for Ring {}

impl Ring {
    /// Maps the ring of a perf event fd opened with a sample type of
    /// `PERF_SAMPLE_TID | PERF_SAMPLE_CALLCHAIN`, and registers it for `tid`.
    pub fn map(fd: i32, tid: u32) -> io::Result<Ring> {
        let page = page_size();
        PAGE.store(page, Ordering::Relaxed);
        let len = page * (1 + DATA_PAGES);
        // SAFETY: mapping a perf fd as the kernel documents (1 + 2^n pages,
        // writable so that we own data_tail); no existing memory is touched.
        let p = unsafe { libc::mmap(std::ptr::null_mut(), len, libc::PROT_READ | libc::PROT_WRITE, libc::MAP_SHARED, fd, 0) };
        if p == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        let base = NonNull::new(p as *mut u8).ok_or_else(|| io::Error::other("mmap returned null"))?;
        let start = tid as usize % SLOTS;
        for i in 0..MAX_PROBE {
            let slot = (start + i) % SLOTS;
            let Some(e) = TABLE.get(slot) else { break };
            if e.base.compare_exchange(0, base.as_ptr() as usize, Ordering::AcqRel, Ordering::Relaxed).is_ok() {
                e.data_size.store(page * DATA_PAGES, Ordering::Relaxed);
                e.tid.store(tid, Ordering::Release);
                return Ok(Ring { base, len, slot });
            }
        }
        // SAFETY: unmapping what we just mapped.
        unsafe { libc::munmap(p, len) };
        Err(io::Error::other("too many threads for the perf ring table"))
    }
}

impl Drop for Ring {
    // signal-safe: off (a ring is unmapped after its thread's counter is closed)
    fn drop(&mut self) {
        if let Some(e) = TABLE.get(self.slot) {
            e.tid.store(0, Ordering::SeqCst);
            // A handler may have found the entry just before; wait for it.
            while READERS.load(Ordering::SeqCst) != 0 {
                std::thread::yield_now();
            }
            e.data_size.store(0, Ordering::Relaxed);
            e.base.store(0, Ordering::Release);
        }
        // SAFETY: the ring left the table and no handler reads it any more.
        unsafe { libc::munmap(self.base.as_ptr() as *mut libc::c_void, self.len) };
    }
    // signal-safe: on
}

fn lookup(tid: u32) -> Option<(usize, usize)> {
    let start = tid as usize % SLOTS;
    for i in 0..MAX_PROBE {
        let e = TABLE.get((start + i) % SLOTS)?;
        if e.tid.load(Ordering::Acquire) == tid {
            let (base, size) = (e.base.load(Ordering::Acquire), e.data_size.load(Ordering::Relaxed));
            return (base != 0 && size.is_power_of_two()).then_some((base, size));
        }
    }
    None
}

/// Async-signal-safe: writes the kernel frames of this thread's newest
/// sample (leaf first, perf's context markers dropped) into `out` and
/// returns how many. Consumes every record waiting in the thread's ring.
pub fn kernel_frames(tid: u32, out: &mut [RawFrame]) -> usize {
    if tid == 0 {
        return 0;
    }
    READERS.fetch_add(1, Ordering::SeqCst);
    let n = match lookup(tid) {
        Some((base, size)) => drain(base, size, tid, out),
        None => 0,
    };
    READERS.fetch_sub(1, Ordering::SeqCst);
    n
}

/// Reads the ring at `base` (data area of `size` bytes, a power of two).
fn drain(base: usize, size: usize, tid: u32, out: &mut [RawFrame]) -> usize {
    let page = PAGE.load(Ordering::Relaxed);
    // SAFETY: data_head/data_tail are naturally aligned u64 fields of the
    // mapped metadata page; the kernel writes head, we write tail.
    let (head_ref, tail_ref) = unsafe { (&*((base + DATA_HEAD) as *const AtomicU64), &*((base + DATA_TAIL) as *const AtomicU64)) };
    let head = head_ref.load(Ordering::Acquire);
    let tail = tail_ref.load(Ordering::Relaxed);
    let data = base + page;
    let word = |pos: u64| -> u64 {
        // SAFETY: the offset is masked into the data area (`size` bytes right
        // after the metadata page) and 8-byte aligned (records are).
        unsafe { std::ptr::read_volatile((data + (pos as usize & (size - 1) & !7)) as *const u64) }
    };
    let mut newest = None;
    let mut pos = tail;
    if head.wrapping_sub(tail) <= size as u64 {
        while pos + 8 <= head {
            let header = word(pos);
            let (kind, len) = (header as u32, header >> 48);
            if len < 8 || len % 8 != 0 || pos + len > head {
                break;
            }
            if kind == PERF_RECORD_SAMPLE {
                newest = Some((pos, len));
            }
            pos += len;
        }
    }
    let mut n = 0;
    // Record: header (8), pid and tid (8), nr (8), nr instruction pointers.
    if let Some((at, len)) = newest.filter(|&(at, len)| len >= 24 && (word(at + 8) >> 32) as u32 == tid) {
        let nr = word(at + 16).min((len - 24) / 8);
        for i in 0..nr {
            let ip = word(at + 24 + 8 * i);
            if ip == PERF_CONTEXT_USER {
                break;
            }
            if ip >= PERF_CONTEXT_MAX {
                continue;
            }
            let Some(slot) = out.get_mut(n) else { break };
            // Callers' entries are return addresses: step back into the call.
            *slot = RawFrame::kernel_pc(if n == 0 { ip as usize } else { (ip as usize).wrapping_sub(1) });
            n += 1;
        }
    }
    tail_ref.store(head, Ordering::Release);
    n
}

#[cfg(test)]
mod tests {
    use super::*;

    const KERNEL: u64 = (-128i64) as u64;

    /// A fake ring: metadata page then a one-page data area, as the kernel lays it out.
    struct Fake {
        mem: Vec<u64>,
    }

    impl Fake {
        fn new() -> Fake {
            PAGE.store(4096, Ordering::Relaxed);
            Fake { mem: vec![0; 2 * 4096 / 8] }
        }
        fn base(&mut self) -> usize {
            self.mem.as_mut_ptr() as usize
        }
        fn set(&mut self, off: usize, v: u64) {
            self.mem[off / 8] = v;
        }
        /// Writes a sample record at ring position `pos` (wrapping) and returns its length.
        fn sample(&mut self, pos: u64, tid: u32, ips: &[u64]) -> u64 {
            let len = 24 + 8 * ips.len() as u64;
            let mut words = vec![(len << 48) | PERF_RECORD_SAMPLE as u64, ((tid as u64) << 32) | 77, ips.len() as u64];
            words.extend_from_slice(ips);
            for (i, w) in words.into_iter().enumerate() {
                self.set(4096 + ((pos as usize + 8 * i) % 4096), w);
            }
            len
        }
        fn head_tail(&mut self, head: u64, tail: u64) {
            self.set(DATA_HEAD, head);
            self.set(DATA_TAIL, tail);
        }
    }

    #[test]
    fn keeps_the_newest_samples_kernel_frames_and_consumes_the_ring() {
        let mut f = Fake::new();
        let a = f.sample(0, 5, &[KERNEL, 0xffff_1000, 0xffff_2000]);
        let b = f.sample(a, 5, &[KERNEL, 0xffff_3000, 0xffff_4001, PERF_CONTEXT_USER, 0x4000]);
        f.head_tail(a + b, 0);
        let mut out = [RawFrame::default(); 8];
        let base = f.base();
        assert_eq!(drain(base, 4096, 5, &mut out), 2);
        assert_eq!(out[0], RawFrame::kernel_pc(0xffff_3000));
        assert_eq!(out[1], RawFrame::kernel_pc(0xffff_4000), "return addresses step back into the call");
        assert_eq!(f.mem[DATA_TAIL / 8], a + b, "tail moved to head");
        // Nothing new: no frames.
        assert_eq!(drain(base, 4096, 5, &mut out), 0);
    }

    #[test]
    fn reads_records_that_wrap_and_refuses_other_threads_and_garbage() {
        let mut f = Fake::new();
        let start = 4096 - 16; // the record wraps around the end of the data area
        let len = f.sample(start, 9, &[KERNEL, 0xffff_1000, 0xffff_2001, 0xffff_3001]);
        f.head_tail(start + len, start);
        let mut out = [RawFrame::default(); 2];
        let base = f.base();
        assert_eq!(drain(base, 4096, 9, &mut out), 2, "depth limit");
        assert_eq!(out, [RawFrame::kernel_pc(0xffff_1000), RawFrame::kernel_pc(0xffff_2000)]);

        let len = f.sample(0, 9, &[KERNEL, 0xffff_1000]);
        f.head_tail(len, 0);
        assert_eq!(drain(base, 4096, 10, &mut out), 0, "another thread's sample");
        f.set(4096, 3 << 48 | PERF_RECORD_SAMPLE as u64); // a length that is not a record
        f.head_tail(64, 0);
        assert_eq!(drain(base, 4096, 9, &mut out), 0);
        f.head_tail(1 << 20, 0); // head far ahead of tail: lost track
        assert_eq!(drain(base, 4096, 9, &mut out), 0);
        assert_eq!(f.mem[DATA_TAIL / 8], 1 << 20);
    }
}

//! signal-safe: Each thread's current context-label set (see `labels.rs`
//! and docs/labels.md): one 32-bit slot per Linux thread id, in one
//! preallocated table indexed by tid. A Java thread writes its own slot
//! through a direct `ByteBuffer` over it (`OxProfiler.context`, no JNI call
//! per set or clear); the signal handler, the allocation callback and the
//! lock sampler, which all run on the sampled thread, read it with one
//! load. Also the word Java reads to know whether a recording runs
//! ([`set_active`]), so setting labels costs next to nothing otherwise.
//!
//! The table is mapped (`MAP_NORESERVE`, 4 bytes per possible tid) when
//! the first thread registers, and pages are backed only where registered
//! threads' slots are. A bitmap says which pages were written: the handler
//! reads only those, so sampling a thread that never registered touches no
//! page of the table.

use std::sync::atomic::{AtomicPtr, AtomicU32, AtomicU64, AtomicUsize, Ordering};

/// The largest Linux `pid_max` (2^22): tids stay below it.
const MAX_TIDS: usize = 1 << 22;
const SLOTS_PER_PAGE: usize = 4096 / std::mem::size_of::<AtomicU32>();
/// One bit per page of the table.
static PAGES: [AtomicU64; MAX_TIDS / SLOTS_PER_PAGE / 64] = [const { AtomicU64::new(0) }; MAX_TIDS / SLOTS_PER_PAGE / 64];
static TABLE: AtomicPtr<AtomicU32> = AtomicPtr::new(std::ptr::null_mut());
static LEN: AtomicUsize = AtomicUsize::new(0);
/// Read by Java through one direct buffer: `[0]` is 1 while a recording
/// runs, `[1]` the label-set generation (see `labels::recycle`).
static FLAGS: [AtomicU32; 2] = [const { AtomicU32::new(0) }; 2];

/// The current label set of thread `tid` (0: none, or never registered).
/// Async-signal-safe: atomic loads only.
pub fn current(tid: u32) -> u32 {
    let tid = tid as usize;
    let page = tid / SLOTS_PER_PAGE;
    let Some(bits) = PAGES.get(page / 64) else { return 0 };
    if bits.load(Ordering::Acquire) & (1 << (page % 64)) == 0 {
        return 0;
    }
    let table = TABLE.load(Ordering::Acquire);
    if table.is_null() || tid >= LEN.load(Ordering::Acquire) {
        return 0;
    }
    // SAFETY: `tid < LEN`, the table's length in slots, published before
    // the table pointer; the mapping is never unmapped.
    unsafe { &*table.add(tid) }.load(Ordering::Relaxed)
}

// signal-safe: off (registration, thread end, the recording's start and stop, interval ends; never in the handler)
/// The address of thread `tid`'s slot, the table mapped on first use and
/// the slot's page marked written; `None` when the tid is beyond the table
/// or the memory cannot be mapped.
pub fn register(tid: u32) -> Option<*mut u32> {
    let table = table()?;
    let tid = tid as usize;
    if tid >= LEN.load(Ordering::Acquire) {
        return None;
    }
    // SAFETY: `tid < LEN`, inside the mapping.
    let slot = unsafe { &*table.add(tid) };
    // The first access to a page is this write (see the module comment).
    slot.store(0, Ordering::Release);
    let page = tid / SLOTS_PER_PAGE;
    PAGES.get(page / 64)?.fetch_or(1 << (page % 64), Ordering::AcqRel);
    Some(slot.as_ptr())
}

/// Forgets thread `tid`'s labels (the thread ended; its tid may be reused).
pub fn clear(tid: u32) {
    let tid = tid as usize;
    let page = tid / SLOTS_PER_PAGE;
    let written = PAGES.get(page / 64).is_some_and(|b| b.load(Ordering::Acquire) & (1 << (page % 64)) != 0);
    let table = TABLE.load(Ordering::Acquire);
    if written && !table.is_null() && tid < LEN.load(Ordering::Acquire) {
        // SAFETY: as in `current`.
        unsafe { &*table.add(tid) }.store(0, Ordering::Release);
    }
}

/// Says whether a recording runs, to the Java side.
pub fn set_active(on: bool) {
    FLAGS[0].store(u32::from(on), Ordering::Release);
}

/// Tells the Java side that label-set ids it cached before are stale.
pub fn set_generation(generation: u32) {
    FLAGS[1].store(generation, Ordering::Release);
}

/// The two words [`set_active`] and [`set_generation`] write (8 bytes),
/// for a direct buffer Java reads.
pub fn flag_words() -> *mut u32 {
    FLAGS.as_ptr() as *mut u32
}

/// The label sets now in some thread's slot.
pub fn in_use() -> std::collections::HashSet<u32> {
    let mut out = std::collections::HashSet::new();
    let table = TABLE.load(Ordering::Acquire);
    let len = LEN.load(Ordering::Acquire);
    if table.is_null() {
        return out;
    }
    for (word, bits) in PAGES.iter().enumerate() {
        let mut bits = bits.load(Ordering::Acquire);
        while bits != 0 {
            let page = word * 64 + bits.trailing_zeros() as usize;
            bits &= bits - 1;
            for tid in page * SLOTS_PER_PAGE..((page + 1) * SLOTS_PER_PAGE).min(len) {
                // SAFETY: `tid < LEN`, on a page a registration wrote.
                let id = unsafe { &*table.add(tid) }.load(Ordering::Acquire);
                if id != 0 {
                    out.insert(id);
                }
            }
        }
    }
    out
}

/// How many slots the table has: the kernel's `pid_max`, at most 2^22.
fn tids() -> usize {
    std::fs::read_to_string("/proc/sys/kernel/pid_max").ok().and_then(|s| s.trim().parse::<usize>().ok()).unwrap_or(MAX_TIDS).clamp(1 << 15, MAX_TIDS)
}

fn table() -> Option<*mut AtomicU32> {
    static MAPPING: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let t = TABLE.load(Ordering::Acquire);
    if !t.is_null() {
        return Some(t);
    }
    let _one = MAPPING.lock().unwrap_or_else(|e| e.into_inner());
    let t = TABLE.load(Ordering::Acquire);
    if !t.is_null() {
        return Some(t);
    }
    let len = tids();
    // SAFETY: a fresh anonymous mapping, never unmapped (handlers and Java
    // buffers point into it for the process's life).
    let p = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            len * std::mem::size_of::<AtomicU32>(),
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
            -1,
            0,
        )
    };
    if p == libc::MAP_FAILED {
        return None;
    }
    LEN.store(len, Ordering::Release);
    TABLE.store(p as *mut AtomicU32, Ordering::Release);
    Some(p as *mut AtomicU32)
}
// signal-safe: on

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_read_back_what_their_thread_wrote() {
        let tid = 4242;
        assert_eq!(current(tid), 0);
        let slot = register(tid).expect("slot");
        // SAFETY: the slot is a live u32 in the table.
        unsafe { slot.write_volatile(17) };
        assert_eq!(current(tid), 17);
        assert_eq!(current(tid + 1), 0, "a neighbour never registered");
        assert!(in_use().contains(&17));
        clear(tid);
        assert_eq!(current(tid), 0);
        assert!(!in_use().contains(&17));
        assert!(register(u32::MAX).is_none());
        assert_eq!(current(u32::MAX), 0);
    }
}

//! signal-safe: DWARF call-frame unwinding for `cstack=dwarf`: the unwind tables
//! (`.eh_frame_hdr`, `.eh_frame`) of every loaded object, handed to
//! framehop, which walks native frames without frame pointers.
//!
//! Off the signal path, [`refresh`] builds an unwinder from
//! `/proc/self/maps` (copying each object's unwind sections from its file)
//! and publishes it through an atomic pointer; a watcher thread calls it again
//! when the dynamic loader loads or unloads an object (checked every
//! [`WATCH_TICK`]), and every [`WATCH_REFRESH`] in any case. Objects already
//! mapped keep the module built for them, so a new library costs the copy of
//! its own tables only. An old unwinder is freed only after no handler
//! is inside [`unwind`] ([`READERS`]). The mappings seen are also handed to
//! the symbol resolver, so a library unloaded before the dump is named.
//!
//! In the handler, [`unwind`] runs framehop with a preallocated cache taken
//! from a fixed pool ([`MustNotAllocateDuringUnwind`]: framehop promises no
//! heap allocation) and reads stack memory only through the caller's
//! validated reader. Objects without unwind tables and JIT code fall back to
//! framehop's frame-pointer rule; the walk stops at the first return address
//! in the JVM's Java code.

// signal-safe: off (for the table-building code below)
use std::collections::HashMap;
// signal-safe: on
use std::sync::atomic::{AtomicBool, AtomicPtr, AtomicU64, AtomicUsize, Ordering};
// signal-safe: off (for the table-building code below)
use std::sync::Mutex;
// signal-safe: on

use framehop::x86_64::{CacheX86_64, UnwindRegsX86_64, UnwinderX86_64};
use framehop::{ExplicitModuleSectionInfo, FrameAddress, Module, MustNotAllocateDuringUnwind, Unwinder};
use object::{Object, ObjectSection, ObjectSegment};

// signal-safe: off (for the table-building code below)
use crate::native::symbols::MappedFile;
// signal-safe: on
use crate::sampling::store::RawFrame;

type Dwarf = UnwinderX86_64<Vec<u8>, MustNotAllocateDuringUnwind>;
type Cache = CacheX86_64<MustNotAllocateDuringUnwind>;

/// Caches in the pool: concurrent handlers each need one.
const CACHES: usize = 16;

static UNWINDER: AtomicPtr<Dwarf> = AtomicPtr::new(std::ptr::null_mut());
static READERS: AtomicUsize = AtomicUsize::new(0);

/// One preallocated framehop cache, taken with a compare-and-swap.
struct CacheSlot {
    busy: AtomicBool,
    cache: AtomicPtr<Cache>,
}

#[allow(clippy::declare_interior_mutable_const)]
const FREE: CacheSlot = CacheSlot { busy: AtomicBool::new(false), cache: AtomicPtr::new(std::ptr::null_mut()) };
static POOL: [CacheSlot; CACHES] = [FREE; CACHES];

// signal-safe: off (builds the unwind tables outside the handler, published through UNWINDER)
/// Hash of the executable mappings the published unwinder was built from.
static BUILT_FROM: AtomicU64 = AtomicU64::new(0);
/// Serialises [`refresh`] callers.
static REFRESH: Mutex<()> = Mutex::new(());

/// Allocates the cache pool (once, off the signal path).
fn fill_pool() {
    for slot in &POOL {
        if slot.cache.load(Ordering::Acquire).is_null() {
            let cache = Box::into_raw(Box::new(Cache::new_in()));
            if slot.cache.compare_exchange(std::ptr::null_mut(), cache, Ordering::AcqRel, Ordering::Acquire).is_err() {
                // SAFETY: we just created it and nobody else saw it.
                drop(unsafe { Box::from_raw(cache) });
            }
        }
    }
}

/// One file-backed executable mapping.
struct Exec {
    start: u64,
    end: u64,
    offset: u64,
    inode: u64,
    path: String,
}

/// What a module built for a mapping depends on: (start, end, file offset, inode, path).
type ExecKey = (u64, u64, u64, u64, String);

/// The modules of the published unwinder, by mapping: the next [`refresh`]
/// reuses those whose mapping is still there (a library load then copies
/// the new object's tables only; libjvm's alone are megabytes).
static MODULES: Mutex<Option<HashMap<ExecKey, Module<Vec<u8>>>>> = Mutex::new(None);

fn exec_mappings() -> Vec<Exec> {
    let text = std::fs::read_to_string("/proc/self/maps").unwrap_or_default();
    let mut out = Vec::new();
    for line in text.lines() {
        let mut f = line.split_whitespace();
        let (Some(range), Some(perms), Some(offset), Some(_), Some(inode), Some(path)) = (f.next(), f.next(), f.next(), f.next(), f.next(), f.next()) else {
            continue;
        };
        if !perms.contains('x') || !path.starts_with('/') {
            continue;
        }
        let Some((a, b)) = range.split_once('-') else { continue };
        let (Ok(start), Ok(end), Ok(offset)) = (u64::from_str_radix(a, 16), u64::from_str_radix(b, 16), u64::from_str_radix(offset, 16)) else { continue };
        out.push(Exec { start, end, offset, inode: inode.parse().unwrap_or(0), path: path.to_string() });
    }
    out
}

fn signature(maps: &[Exec]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for m in maps {
        for v in [m.start, m.end, m.offset, m.inode] {
            h = (h ^ v).wrapping_mul(0x100_0000_01b3);
        }
    }
    h | 1
}

/// A framehop module for one executable mapping, with unwind sections
/// copied from the object's file.
fn module(m: &Exec, files: &mut HashMap<String, Option<MappedFile>>) -> Option<Module<Vec<u8>>> {
    let data = files.entry(m.path.clone()).or_insert_with(|| MappedFile::open(&m.path)).as_ref()?;
    let file = object::File::parse(data.bytes()).ok()?;
    // The load bias: where the segment holding this mapping's file offset landed.
    let seg = file.segments().find(|s| {
        let (off, size) = s.file_range();
        m.offset >= off && m.offset < off + size.max(1)
    })?;
    let svma_at_start = m.offset - seg.file_range().0 + seg.address();
    let bias = m.start.checked_sub(svma_at_start)?;
    let section = |name: &str| file.section_by_name(name).map(|s| (s.address()..s.address() + s.size(), s.data().ok().map(<[u8]>::to_vec)));
    let (hdr_range, hdr) = section(".eh_frame_hdr")?;
    let (eh_range, eh) = section(".eh_frame")?;
    let info = ExplicitModuleSectionInfo {
        base_svma: 0,
        text_svma: file.section_by_name(".text").map(|s| s.address()..s.address() + s.size()),
        got_svma: file.section_by_name(".got").map(|s| s.address()..s.address() + s.size()),
        eh_frame_hdr_svma: Some(hdr_range),
        eh_frame_hdr: hdr,
        eh_frame_svma: Some(eh_range),
        eh_frame: eh,
        ..Default::default()
    };
    Some(Module::new(m.path.clone(), m.start..m.end, bias, info))
}

/// Rebuilds and publishes the unwinder if the executable mappings changed.
/// Returns how many objects have unwind tables. Not for signal handlers.
pub fn refresh() -> usize {
    let _guard = REFRESH.lock().unwrap_or_else(|e| e.into_inner());
    fill_pool();
    let maps = exec_mappings();
    let sig = signature(&maps);
    if sig == BUILT_FROM.load(Ordering::Acquire) {
        return usize::MAX;
    }
    crate::native::symbols::remember_mappings(maps.iter().map(|m| (m.start as usize, m.end as usize, m.offset, m.path.as_str())));
    let mut unwinder = Dwarf::new();
    let mut files = HashMap::new();
    let mut modules = MODULES.lock().unwrap_or_else(|e| e.into_inner());
    let mut built = modules.take().unwrap_or_default();
    let mut kept = HashMap::new();
    let mut n = 0;
    for m in &maps {
        let key = (m.start, m.end, m.offset, m.inode, m.path.clone());
        let found = built.remove(&key).or_else(|| module(m, &mut files));
        if let Some(module) = found {
            unwinder.add_module(module.clone());
            kept.insert(key, module);
            n += 1;
        }
    }
    *modules = Some(kept);
    drop(modules);
    let old = UNWINDER.swap(Box::into_raw(Box::new(unwinder)), Ordering::SeqCst);
    BUILT_FROM.store(sig, Ordering::Release);
    if !old.is_null() {
        while READERS.load(Ordering::SeqCst) != 0 {
            std::thread::yield_now();
        }
        // SAFETY: `old` came from Box::into_raw above and no handler can
        // still hold it: handlers load the pointer after announcing themselves.
        drop(unsafe { Box::from_raw(old) });
    }
    n
}
// signal-safe: on

/// Async-signal-safe: walks from the interrupted (pc, sp, fp) with the
/// published unwinder, writing the frames after the first into `out` (the
/// caller stored `pc` already) until a return address in Java code, and
/// returns how many, and whether the walk was cut: a native frame was
/// left for want of room in `out`. `read` reads one stack word (validated
/// by the caller). Returns `None` when no unwinder or cache is available.
pub fn unwind(
    pc: usize,
    sp: usize,
    fp: usize,
    in_java_code: fn(usize) -> bool,
    read: &mut dyn FnMut(u64) -> Option<u64>,
    out: &mut [RawFrame],
) -> Option<(usize, bool)> {
    READERS.fetch_add(1, Ordering::SeqCst);
    let result = with_cache(|cache| {
        let p = UNWINDER.load(Ordering::SeqCst);
        if p.is_null() {
            return None;
        }
        // SAFETY: a published unwinder is freed only after READERS drops to 0.
        let unwinder = unsafe { &*p };
        let mut read_stack = |addr: u64| read(addr).ok_or(());
        let mut frames = unwinder.iter_frames(pc as u64, UnwindRegsX86_64::new(pc as u64, sp as u64, fp as u64), cache, &mut read_stack);
        let mut n = 0;
        loop {
            match frames.next() {
                Ok(Some(FrameAddress::ReturnAddress(ret))) => {
                    let ret = ret.get() as usize;
                    if in_java_code(ret) {
                        break;
                    }
                    // A native frame with no room left: the walk is cut.
                    let Some(slot) = out.get_mut(n) else { return Some((n, true)) };
                    *slot = RawFrame::native_pc(ret.wrapping_sub(1));
                    n += 1;
                }
                Ok(Some(FrameAddress::InstructionPointer(_))) => {}
                Ok(None) | Err(_) => break,
            }
        }
        Some((n, false))
    });
    READERS.fetch_sub(1, Ordering::SeqCst);
    result.flatten()
}

/// Runs `f` with a cache from the pool, or returns `None` if all are busy.
fn with_cache<T>(f: impl FnOnce(&mut Cache) -> T) -> Option<T> {
    for slot in &POOL {
        if slot.busy.compare_exchange(false, true, Ordering::Acquire, Ordering::Relaxed).is_ok() {
            let p = slot.cache.load(Ordering::Acquire);
            let result = if p.is_null() {
                None
            } else {
                // SAFETY: the busy flag gives us exclusive use of this cache,
                // which lives for the process's life once allocated.
                Some(f(unsafe { &mut *p }))
            };
            slot.busy.store(false, Ordering::Release);
            return result;
        }
    }
    None
}

// signal-safe: off (the library-load watcher thread)
/// Bumped to stop the watcher thread.
static WATCH_GENERATION: AtomicU64 = AtomicU64::new(0);

/// How often the watcher asks the dynamic loader whether it loaded or
/// unloaded an object (`dl_iterate_phdr`'s counts: a lock and a read, no
/// system call). When it checked only every 500 ms, the samples of a
/// library's first half second fell back to frame pointers: half of them
/// lost their callers in a library built without frame pointers.
const WATCH_TICK: std::time::Duration = std::time::Duration::from_millis(20);
/// How often the watcher rebuilds anyway (mappings made without the loader,
/// rare: JIT code is anonymous and has no tables). Each look reads
/// `/proc/self/maps` (about 1 ms of a JVM's), which every 500 ms, as before
/// the loader's counts were watched, cost as much as the 20 ms ticks do (a
/// wakeup is 30-45 us in this VM): the watcher thread used 11 ms of CPU in a
/// 6 s run then, 17.5 ms with ticks and 500 ms looks, 14 ms now (0.2% of a
/// core, `cstack=dwarf` only).
const WATCH_REFRESH: std::time::Duration = std::time::Duration::from_secs(5);

/// Starts a thread that rebuilds the unwinder when libraries are loaded or
/// unloaded (see [`WATCH_TICK`], [`WATCH_REFRESH`]), until [`stop_watcher`].
/// `on_thread` runs first on that thread (to exclude it from sampling).
pub fn start_watcher(on_thread: impl FnOnce() + Send + 'static) -> std::io::Result<()> {
    let generation = WATCH_GENERATION.fetch_add(1, Ordering::SeqCst) + 1;
    std::thread::Builder::new().name("oxprof-dwarf".into()).spawn(move || {
        on_thread();
        let mut counts = crate::native::symbols::loader_counts();
        let mut last = std::time::Instant::now();
        while WATCH_GENERATION.load(Ordering::SeqCst) == generation {
            std::thread::sleep(WATCH_TICK);
            let now = crate::native::symbols::loader_counts();
            if now != counts || last.elapsed() >= WATCH_REFRESH {
                last = std::time::Instant::now();
                refresh();
            }
            counts = now;
        }
    })?;
    Ok(())
}

pub fn stop_watcher() {
    WATCH_GENERATION.fetch_add(1, Ordering::SeqCst);
}
// signal-safe: on

/// Whether an unwinder has been published.
pub fn ready() -> bool {
    !UNWINDER.load(Ordering::SeqCst).is_null()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builds_modules_for_this_process_and_unwinds_through_libc() {
        let n = refresh();
        assert!(n >= 1 && n != usize::MAX, "{n} objects with unwind tables");
        assert_eq!(refresh(), usize::MAX, "unchanged mappings are not rebuilt");
        assert!(ready());
    }
}

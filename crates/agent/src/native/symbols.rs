//! Names for native and kernel code addresses, resolved at dump time (never
//! in the signal handler).
//!
//! User addresses are mapped to the object they were loaded from through
//! `/proc/self/maps`, then looked up in that object's ELF symbol tables
//! (`.symtab` when present, else `.dynsym`); C++ names (libjvm) and Rust
//! names (legacy and v0 mangling, without their hash) are demangled. An
//! object stripped of `.symtab` (libc, most distribution libraries) also
//! gets the full table of its separate debug file when one is installed
//! (Debian's `libc6-dbg`, `*-dbgsym`): found by build id under
//! `/usr/lib/debug/.build-id/`, or by `.gnu_debuglink` beside the object,
//! in its `.debug/` or under `/usr/lib/debug`, and used only when its
//! build id is the object's. Kernel addresses are looked up in
//! `/proc/kallsyms` when it shows real addresses (root, or `kptr_restrict`
//! off). What cannot be named
//! becomes `lib.so+0xOFFSET` (address inside a known object) or `[unknown]`.
//! Objects are parsed on first use and dropped again with [`NativeSymbols::clear`]
//! after a dump (libjvm's table alone holds about 100,000 names).
//!
//! Reading `/proc/kallsyms` is the slowest part of naming (the kernel formats
//! 120,000 lines: 20-40 ms), so a CPU recording that collects kernel frames
//! has it read on a thread of its own when it starts
//! ([`prefetch_kernel_table`]); its dumps then find the table ready instead
//! of making the JVM wait for it at exit. The table is kept until the
//! recording's last dump ([`forget_kernel_table`]).

use std::collections::HashMap;
use std::io::BufRead;
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};
use std::thread::JoinHandle;

use object::{Object, ObjectSegment, ObjectSymbol, SymbolKind};
use oxprof_profile::{Frame, FrameKind};

/// Largest distance past a symbol of unknown size still credited to it.
const UNSIZED_REACH: u64 = 4096;

/// A file mapped read-only (the page cache backs it: reading libjvm's
/// 24 MB this way costs no heap), unmapped on drop.
pub(crate) struct MappedFile {
    ptr: *mut libc::c_void,
    len: usize,
}

impl MappedFile {
    pub(crate) fn open(path: &str) -> Option<MappedFile> {
        use std::os::fd::AsRawFd;
        let file = std::fs::File::open(path).ok()?;
        let len = usize::try_from(file.metadata().ok()?.len()).ok().filter(|&l| l > 0)?;
        // SAFETY: a fresh private read-only mapping of a file we opened.
        let ptr = unsafe { libc::mmap(std::ptr::null_mut(), len, libc::PROT_READ, libc::MAP_PRIVATE, file.as_raw_fd(), 0) };
        (ptr != libc::MAP_FAILED).then_some(MappedFile { ptr, len })
    }

    pub(crate) fn bytes(&self) -> &[u8] {
        // SAFETY: the mapping is `len` readable bytes and lives as long as self.
        // (A library file truncated while mapped would fault: libraries in use
        // are replaced by new files, not rewritten in place.)
        unsafe { std::slice::from_raw_parts(self.ptr as *const u8, self.len) }
    }
}

impl Drop for MappedFile {
    fn drop(&mut self) {
        // SAFETY: unmapping exactly what `open` mapped.
        unsafe { libc::munmap(self.ptr, self.len) };
    }
}

/// One executable mapping of `/proc/self/maps`.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Mapping {
    start: usize,
    end: usize,
    offset: u64,
    path: String,
}

/// A sorted function table of one object. Names live in one buffer, so a
/// table is a few large allocations (returned to the system when freed)
/// rather than 100,000 small ones.
#[derive(Default)]
struct SymbolTable {
    /// (start, size, name offset, name length), sorted by start.
    entries: Vec<(u64, u64, u32, u32)>,
    /// Names as they are in the file: checked as UTF-8 only when looked up.
    names: Vec<u8>,
}

impl SymbolTable {
    /// Builds a table from (start, size, name); for equal starts the
    /// largest size wins.
    fn new<'a>(symbols: impl Iterator<Item = (u64, u64, &'a [u8])>) -> SymbolTable {
        let mut t = SymbolTable::default();
        for (start, size, name) in symbols {
            let (Ok(at), Ok(len)) = (u32::try_from(t.names.len()), u32::try_from(name.len())) else { break };
            t.names.extend_from_slice(name);
            t.entries.push((start, size, at, len));
        }
        t.sort();
        t
    }

    /// A table over names already in one buffer: `entries` are (start,
    /// size, offset of the name in `names`, its length).
    fn from_parts(entries: Vec<(u64, u64, u32, u32)>, names: Vec<u8>) -> SymbolTable {
        let mut t = SymbolTable { entries, names };
        t.sort();
        t
    }

    /// Sorts by start; for equal starts the largest size wins, then a
    /// plain name over a compiler-made alias such as GCC's
    /// `ns_rec.localalias` (a local symbol at the function's own address,
    /// listed before the global one: every frame of a recursive function
    /// was named by it).
    fn sort(&mut self) {
        let names = &self.names;
        let dotted = |e: &(u64, u64, u32, u32)| names.get(e.2 as usize..(e.2 + e.3) as usize).is_some_and(|n| n.contains(&b'.'));
        // The names are looked at only for equal starts and sizes (a few):
        // read for every comparison, they were most of the sort's time.
        self.entries.sort_by(|a, b| a.0.cmp(&b.0).then(b.1.cmp(&a.1)).then_with(|| dotted(a).cmp(&dotted(b))));
        self.entries.dedup_by_key(|e| e.0);
        self.entries.shrink_to_fit();
    }

    fn lookup(&self, addr: u64) -> Option<&str> {
        let i = self.entries.partition_point(|e| e.0 <= addr).checked_sub(1)?;
        let &(start, size, at, len) = self.entries.get(i)?;
        let reach = if size > 0 { size } else { UNSIZED_REACH };
        let name = (addr - start < reach).then(|| self.names.get(at as usize..(at + len) as usize)).flatten()?;
        std::str::from_utf8(name).ok()
    }
}

/// An ELF object's symbols and its load segments (file offset → address).
struct Elf {
    symbols: SymbolTable,
    /// (file offset, file size, virtual address) of each loadable segment.
    segments: Vec<(u64, u64, u64)>,
}

/// Where distributions install separate debug files.
const DEBUG_ROOT: &str = "/usr/lib/debug";

/// An object's function symbols: (address, size, name).
fn functions<'a>(file: &'a object::File<'a>) -> impl Iterator<Item = (u64, u64, &'a [u8])> + 'a {
    file.symbols()
        .chain(file.dynamic_symbols())
        .filter(|s| s.kind() == SymbolKind::Text && s.is_definition() && s.address() != 0)
        .filter_map(|s| Some((s.address(), s.size(), s.name_bytes().ok()?)))
}

/// The separate debug file of the object at `path` (parsed as `file`)
/// under debug root `root`, if one is installed whose build id is the
/// object's: by build id (`ROOT/.build-id/ab/cdef….debug`), else by
/// `.gnu_debuglink` (beside the object, in its `.debug/`, or under `ROOT`
/// at the object's directory).
fn debug_file(path: &str, file: &object::File, root: &str) -> Option<MappedFile> {
    let id = file.build_id().ok().flatten().filter(|id| id.len() >= 2)?;
    let hex: String = id.iter().map(|b| format!("{b:02x}")).collect();
    let mut candidates = vec![format!("{root}/.build-id/{}/{}.debug", &hex[..2], &hex[2..])];
    if let Some((name, _crc)) = file.gnu_debuglink().ok().flatten() {
        let name = String::from_utf8_lossy(name).into_owned();
        let dir = std::path::Path::new(path).parent().map(|d| d.display().to_string()).unwrap_or_default();
        candidates.extend([format!("{dir}/{name}"), format!("{dir}/.debug/{name}"), format!("{root}{dir}/{name}")]);
    }
    candidates.into_iter().filter(|c| c != path).find_map(|c| {
        let data = MappedFile::open(&c)?;
        let same = object::File::parse(data.bytes()).ok()?.build_id().ok().flatten() == Some(id);
        same.then_some(data)
    })
}

impl Elf {
    fn load(path: &str) -> Option<Elf> {
        Self::load_with_debug(path, DEBUG_ROOT)
    }

    /// [`Elf::load`] with separate debug files looked up under `root`.
    fn load_with_debug(path: &str, root: &str) -> Option<Elf> {
        let data = MappedFile::open(path)?;
        let file = object::File::parse(data.bytes()).ok()?;
        let segments = file.segments().map(|s| (s.file_range().0, s.file_range().1, s.address())).collect();
        let stripped = file.symbols().next().is_none();
        let debug = if stripped { debug_file(path, &file, root) } else { None };
        let debug_file = debug.as_ref().and_then(|d| object::File::parse(d.bytes()).ok());
        // The debug file's addresses are the object's own (same link).
        let symbols = match &debug_file {
            Some(d) => SymbolTable::new(functions(&file).chain(functions(d))),
            None => SymbolTable::new(functions(&file)),
        };
        Some(Elf { symbols, segments })
    }

    /// The kernel's vDSO (`[vdso]` in the maps), read from this process's
    /// memory: `clock_gettime`, `gettimeofday` and the like run there (the
    /// JVM's `System.nanoTime`), and were shown as `[vdso]`.
    fn load_vdso(m: &Mapping) -> Option<Elf> {
        // SAFETY: getauxval only reads the auxiliary vector.
        let base = unsafe { libc::getauxval(libc::AT_SYSINFO_EHDR) } as usize;
        if base == 0 || base != m.start || m.end <= m.start {
            return None;
        }
        // SAFETY: the vDSO image is mapped readable (r-xp) at `base` for
        // the life of the process, `m.end - m.start` bytes.
        let bytes = unsafe { std::slice::from_raw_parts(base as *const u8, m.end - m.start) };
        let file = object::File::parse(bytes).ok()?;
        let segments = file.segments().map(|s| (s.file_range().0, s.file_range().1, s.address())).collect();
        // Its functions have two names (`clock_gettime`, a weak alias, and
        // `__vdso_clock_gettime`): the second tells the frame from libc's
        // `clock_gettime` that called it.
        let vdso_named = functions(&file).any(|(_, _, n)| n.starts_with(b"__vdso_"));
        let symbols = SymbolTable::new(functions(&file).filter(|(_, _, n)| !vdso_named || n.starts_with(b"__vdso_")));
        Some(Elf { symbols, segments })
    }

    /// The link-time address of a file offset.
    fn address_of(&self, file_offset: u64) -> Option<u64> {
        self.segments.iter().find(|(off, size, _)| file_offset >= *off && file_offset < off + size).map(|(off, _, addr)| file_offset - off + addr)
    }
}

/// The resolver's caches, filled during one dump.
#[derive(Default)]
pub struct NativeSymbols {
    maps: Vec<Mapping>,
    /// [`mapping_keys`] of `maps`.
    map_keys: Vec<u64>,
    objects: HashMap<String, Option<Elf>>,
    kernel: Option<Arc<SymbolTable>>,
    kernel_loaded: bool,
    names: HashMap<(usize, bool), Frame>,
    /// Frames of user-space symbols, by the address of the symbol's name in
    /// its object's table: every address inside a function shares one
    /// (demangling a C++ name is the dear part of naming a frame).
    by_symbol: HashMap<usize, Frame>,
    /// The loader's counts ([`loader_counts`]) and the time when `maps` was
    /// last read: [`NativeSymbols::refresh`] skips the read while both hold.
    maps_read: Option<((u64, u64), std::time::Instant)>,
    /// Whether the mappings were read since the last [`NativeSymbols::refresh`]:
    /// addresses outside every mapping then read them no more (stale
    /// addresses of a broken walk would read them once each).
    read_since_refresh: bool,
}

fn read_kallsyms() -> Option<SymbolTable> {
    KallsymsReader::open()?.parse()
}

/// A kallsyms text to parse, with every buffer the parse needs allocated
/// by the thread that creates the reader. A prefetch thread only grows them
/// (glibc reallocates a block in the arena it came from), so the table's
/// memory stays in the creating thread's malloc arena, which gives its
/// freed pages back with `malloc_trim`; a helper thread's own arena would
/// keep them.
struct KallsymsReader<R> {
    input: R,
    entries: Vec<(u64, u64, u32, u32)>,
    names: Vec<u8>,
    line: Vec<u8>,
}

impl KallsymsReader<std::io::BufReader<std::fs::File>> {
    fn open() -> Option<Self> {
        let file = std::fs::File::open("/proc/kallsyms").ok()?;
        Some(KallsymsReader::new(std::io::BufReader::with_capacity(1 << 16, file)))
    }
}

impl<R: BufRead> KallsymsReader<R> {
    fn new(input: R) -> Self {
        // About 120,000 function names of 24 bytes on average.
        KallsymsReader { input, entries: Vec::with_capacity(1 << 17), names: Vec::with_capacity(3 << 20), line: Vec::with_capacity(512) }
    }

    /// Function symbols of `/proc/kallsyms` ("ADDR TYPE NAME [MODULE]"
    /// lines), read line by line with only the names kept: the file is
    /// ~120,000 lines (5 MB), and the table may be held for a whole
    /// recording. `None` when the kernel shows every address as zero (it
    /// hides them from us); that is decided on the first lines, without
    /// reading the rest.
    fn parse(self) -> Option<SymbolTable> {
        /// Function lines looked at before deciding the addresses are hidden.
        const HIDDEN_AFTER: usize = 64;
        let KallsymsReader { mut input, mut entries, mut names, mut line } = self;
        let mut functions = 0usize;
        loop {
            line.clear();
            match input.read_until(b'\n', &mut line) {
                Ok(0) | Err(_) => break,
                Ok(_) => {}
            }
            let mut fields = line.split(|&b| b == b' ' || b == b'\t' || b == b'\n').filter(|f| !f.is_empty());
            let (Some(addr), Some(kind), Some(name)) = (fields.next(), fields.next(), fields.next()) else { continue };
            if !matches!(kind, b"t" | b"T" | b"w" | b"W") {
                continue;
            }
            let Some(addr) = parse_hex(addr) else { continue };
            functions += 1;
            if addr == 0 {
                if entries.is_empty() && functions >= HIDDEN_AFTER {
                    return None;
                }
                continue;
            }
            let (Ok(at), Ok(len)) = (u32::try_from(names.len()), u32::try_from(name.len())) else { break };
            names.extend_from_slice(name);
            entries.push((addr, 0, at, len));
        }
        if entries.is_empty() {
            return None;
        }
        names.shrink_to_fit();
        Some(SymbolTable::from_parts(entries, names))
    }
}

/// The kernel table read ahead for the running CPU recording.
enum Prefetch {
    /// The reading thread, and what it is told (see [`PREFETCH_DELAY`]).
    Reading(JoinHandle<Option<SymbolTable>>, Arc<std::sync::atomic::AtomicU8>),
    /// `None`: the kernel hides its addresses (or the read failed).
    Read(Option<Arc<SymbolTable>>),
}

static PREFETCH: Mutex<Option<Prefetch>> = Mutex::new(None);

fn prefetch_slot() -> MutexGuard<'static, Option<Prefetch>> {
    PREFETCH.lock().unwrap_or_else(|e| e.into_inner())
}

/// How long the prefetch thread waits before reading. Reading
/// `/proc/kallsyms` costs 60-80 ms of CPU (most of it the kernel formatting
/// its lines); a JVM that lives less than this (`java -version`, build
/// tools, CLIs) with no kernel frame to name never pays it, and one that
/// dumps earlier with kernel frames reads the table then.
const PREFETCH_DELAY: std::time::Duration = std::time::Duration::from_secs(1);
/// What the prefetch thread is told: wait out the delay, read now, or give up.
const WAIT: u8 = 0;
const READ_NOW: u8 = 1;
const CANCEL: u8 = 2;

/// Starts reading `/proc/kallsyms`, [`PREFETCH_DELAY`] from now, on a
/// thread of its own (which first runs `on_thread_start`, so it can keep
/// itself out of the profile), unless a table is already read or being
/// read. Without a thread the dump reads it.
pub fn prefetch_kernel_table(on_thread_start: impl FnOnce() + Send + 'static) {
    use std::sync::atomic::{AtomicU8, Ordering};
    let mut slot = prefetch_slot();
    if slot.is_some() {
        return;
    }
    let Some(reader) = KallsymsReader::open() else { return };
    let told = Arc::new(AtomicU8::new(WAIT));
    let told_thread = told.clone();
    let spawned = std::thread::Builder::new().name("oxprof-kallsyms".into()).spawn(move || {
        on_thread_start();
        let until = std::time::Instant::now() + PREFETCH_DELAY;
        while told_thread.load(Ordering::SeqCst) == WAIT {
            let Some(left) = until.checked_duration_since(std::time::Instant::now()) else { break };
            std::thread::park_timeout(left);
        }
        if told_thread.load(Ordering::SeqCst) == CANCEL {
            return None;
        }
        reader.parse()
    });
    match spawned {
        Ok(handle) => *slot = Some(Prefetch::Reading(handle, told)),
        Err(e) => crate::log::debug(&format!("kernel symbols will be read at dump time: no thread ({e})")),
    }
}

/// Tells the prefetch thread `what` (unless it already started reading)
/// and waits for it.
fn finish_prefetch(handle: JoinHandle<Option<SymbolTable>>, told: &std::sync::atomic::AtomicU8, what: u8) -> Option<SymbolTable> {
    let _ = told.compare_exchange(WAIT, what, std::sync::atomic::Ordering::SeqCst, std::sync::atomic::Ordering::SeqCst);
    handle.thread().unpark();
    handle.join().ok().flatten()
}

/// The prefetched kernel table, waiting for its thread if it is still
/// reading; `None` when nothing was prefetched.
fn prefetched_kernel_table() -> Option<Option<Arc<SymbolTable>>> {
    let mut slot = prefetch_slot();
    let table = match slot.take()? {
        Prefetch::Reading(handle, told) => finish_prefetch(handle, &told, READ_NOW).map(Arc::new),
        Prefetch::Read(table) => table,
    };
    *slot = Some(Prefetch::Read(table.clone()));
    Some(table)
}

/// Drops the prefetched kernel table (after a recording's last dump).
pub fn forget_kernel_table() {
    let taken = prefetch_slot().take();
    if let Some(Prefetch::Reading(handle, told)) = taken {
        finish_prefetch(handle, &told, CANCEL);
    }
}

/// Whether built profiles leave the parsed symbol tables in place.
static KEEP: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Native code addresses whose names stay cached between builds at most.
/// A name costs ~100 bytes; the busiest interval seen (javac, 20 s) named
/// 2,000 distinct native addresses.
const NAMES_KEPT: usize = 50_000;

/// Continuous profiling (`loop=`) names native frames every interval:
/// reading and sorting libjvm's symbols and demangling its names again each
/// time was most of an interval's cost. With `on`, [`NativeSymbols::done`]
/// keeps the tables (bounded by the objects loaded, and the kernel's) until
/// this is called with `false`, which frees them.
pub fn keep_between_builds(on: bool) {
    KEEP.store(on, std::sync::atomic::Ordering::Relaxed);
    if !on {
        resolver().clear();
    }
}

/// The process-wide resolver, refreshed with [`NativeSymbols::refresh`].
pub fn resolver() -> MutexGuard<'static, NativeSymbols> {
    static R: OnceLock<Mutex<NativeSymbols>> = OnceLock::new();
    R.get_or_init(Default::default).lock().unwrap_or_else(|e| e.into_inner())
}

/// Counts the changes of the process's executable mappings seen by
/// [`NativeSymbols::refresh`] (never reset, so a name cache can tell
/// whether to check its native frames again: [`NativeSymbols::mapping_id`]).
static MAPS_GENERATION: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);

/// See [`MAPS_GENERATION`].
pub fn maps_generation() -> u64 {
    MAPS_GENERATION.load(std::sync::atomic::Ordering::Relaxed)
}

/// How long [`NativeSymbols::refresh`] trusts mappings read before while
/// the loader's counts stay the same.
const MAPS_REREAD_AFTER: std::time::Duration = std::time::Duration::from_secs(30);

/// The dynamic loader's counts of objects loaded and unloaded since the
/// process started (`dlpi_adds`, `dlpi_subs` of `dl_iterate_phdr`); `None`
/// from a loader that does not keep them.
pub(crate) fn loader_counts() -> Option<(u64, u64)> {
    unsafe extern "C" fn first(info: *mut libc::dl_phdr_info, size: libc::size_t, data: *mut libc::c_void) -> libc::c_int {
        // SAFETY: `data` is the `Option` passed below, alive during the
        // call; `info` is the loader's description of one object, `size`
        // bytes long (older loaders end it before the counts).
        let (out, info) = unsafe { (&mut *(data as *mut Option<(u64, u64)>), &*info) };
        if size >= std::mem::offset_of!(libc::dl_phdr_info, dlpi_subs) + std::mem::size_of::<libc::c_ulonglong>() {
            *out = Some((info.dlpi_adds, info.dlpi_subs));
        }
        1 // the counts are the same in every object's description
    }
    let mut out: Option<(u64, u64)> = None;
    // SAFETY: `first` matches the callback type and only reads what the
    // loader passes; `out` outlives the call.
    unsafe { libc::dl_iterate_phdr(Some(first), &mut out as *mut Option<(u64, u64)> as *mut libc::c_void) };
    out
}

/// Most mappings [`SEEN`] keeps.
const SEEN_MAX: usize = 4096;

/// Executable file mappings seen while profiling (by the `cstack=dwarf`
/// library watcher, and at each dump), oldest first, so that an address in
/// a library unloaded (`dlclose`) before the dump is still named from its
/// file, which stays on disk: it was `[unknown]`.
static SEEN: Mutex<Vec<Mapping>> = Mutex::new(Vec::new());

/// Adds (start, end, file offset, path) of executable file mappings to
/// [`SEEN`]. Not for signal handlers.
pub fn remember_mappings<'a>(maps: impl Iterator<Item = (usize, usize, u64, &'a str)>) {
    let mut seen = SEEN.lock().unwrap_or_else(|e| e.into_inner());
    for (start, end, offset, path) in maps {
        if !path.starts_with('/') || seen.iter().rev().any(|m| m.start == start && m.end == end && m.offset == offset && m.path == path) {
            continue;
        }
        if seen.len() >= SEEN_MAX {
            seen.remove(0);
        }
        seen.push(Mapping { start, end, offset, path: path.to_string() });
    }
}

/// Notes the executable file mappings in [`SEEN`] when the dynamic loader
/// loaded or unloaded an object since the last call ([`loader_counts`]),
/// so that a library `dlclose`d before the dump is still named from its
/// file with `cstack=fp` too (the `cstack=dwarf` watcher does this itself).
/// Cheap when nothing changed: the loader's lock and a read, no system
/// call; `/proc/self/maps` is read only after a change. Called from a
/// periodic thread of the agent's, never from a signal handler: a library
/// loaded and unloaded between two calls is missed.
pub fn note_loaded_libraries() {
    static LAST: Mutex<Option<(u64, u64)>> = Mutex::new(None);
    let now = loader_counts();
    {
        let mut last = LAST.lock().unwrap_or_else(|e| e.into_inner());
        if now.is_none() || *last == now {
            return;
        }
        *last = now;
    }
    let maps = std::fs::read_to_string("/proc/self/maps").map(|t| parse_maps(&t)).unwrap_or_default();
    remember_mappings(maps.iter().map(|m| (m.start, m.end, m.offset, m.path.as_str())));
}

/// The latest mapping of [`SEEN`] that held `pc`.
fn seen_mapping(pc: usize) -> Option<Mapping> {
    SEEN.lock().unwrap_or_else(|e| e.into_inner()).iter().rev().find(|m| m.start <= pc && pc < m.end).cloned()
}

/// The mapping holding `pc` in `maps` (sorted by start).
fn find_mapping(maps: &[Mapping], pc: usize) -> Option<&Mapping> {
    let i = maps.partition_point(|m| m.start <= pc);
    i.checked_sub(1).and_then(|i| maps.get(i)).filter(|m| pc < m.end)
}

/// What the names of a mapping's addresses depend on: its start, file
/// offset and file (not its end: the JIT's code heap grows at its end every
/// few seconds), hashed, one per mapping of `maps`.
fn mapping_keys(maps: &[Mapping]) -> Vec<u64> {
    use std::hash::BuildHasher;
    static SEED: OnceLock<std::collections::hash_map::RandomState> = OnceLock::new();
    let seed = SEED.get_or_init(Default::default);
    maps.iter().map(|m| seed.hash_one((m.start, m.offset, &m.path)) | 1).collect()
}

/// The key ([`mapping_keys`]) of the mapping holding `pc`; 0 for an
/// address outside every mapping.
fn mapping_key(maps: &[Mapping], keys: &[u64], pc: usize) -> u64 {
    let i = maps.partition_point(|m| m.start <= pc);
    i.checked_sub(1).filter(|&i| maps.get(i).is_some_and(|m| pc < m.end)).and_then(|i| keys.get(i).copied()).unwrap_or(0)
}

fn parse_maps(text: &str) -> Vec<Mapping> {
    let mut out = Vec::new();
    for line in text.lines() {
        let mut f = line.split_whitespace();
        let (Some(range), Some(perms), Some(offset), Some(_dev), Some(_inode)) = (f.next(), f.next(), f.next(), f.next(), f.next()) else { continue };
        if !perms.contains('x') {
            continue;
        }
        let path = f.collect::<Vec<_>>().join(" ");
        let Some((a, b)) = range.split_once('-') else { continue };
        let (Ok(start), Ok(end), Ok(offset)) = (usize::from_str_radix(a, 16), usize::from_str_radix(b, 16), u64::from_str_radix(offset, 16)) else { continue };
        out.push(Mapping { start, end, offset, path });
    }
    out.sort_by_key(|m| m.start);
    out
}

fn parse_hex(digits: &[u8]) -> Option<u64> {
    if digits.is_empty() || digits.len() > 16 {
        return None;
    }
    digits.iter().try_fold(0u64, |acc, &d| Some(acc << 4 | (d as char).to_digit(16)? as u64))
}

/// A demangled C++ or Rust name without parameters (C++) or hash (Rust),
/// or `None` for a plain C name. Rust symbols (v0 `_R…`, or legacy `_ZN…`
/// ending in a `17h` + 16 hex digits hash segment) go to `rustc-demangle`,
/// which also decodes legacy escapes (`$LT$`, `$u5b$`, `..`); C++ names to
/// `cpp_demangle`.
fn demangle(name: &str) -> Option<String> {
    if looks_rust(name) {
        if let Ok(d) = rustc_demangle::try_demangle(name) {
            // `{:#}` leaves out the hash and crate disambiguators.
            return Some(format!("{d:#}"));
        }
    }
    if !name.starts_with("_Z") {
        return None;
    }
    let sym = cpp_demangle::Symbol::new(name.as_bytes()).ok()?;
    let mut d = sym.demangle_with_options(&cpp_demangle::DemangleOptions::new().no_params().no_return_type()).ok()?;
    if let Some((path, last)) = d.rsplit_once("::") {
        if last.len() == 17 && last.starts_with('h') && last[1..].bytes().all(|b| b.is_ascii_hexdigit()) {
            d.truncate(path.len());
        }
    }
    Some(d)
}

/// Whether `name` is a Rust symbol: v0 mangling (`_R`), or legacy mangling
/// (Itanium-compatible `_ZN…E` whose last segment is `17h` + 16 hex digits,
/// possibly followed by a `.llvm.…`-style suffix).
fn looks_rust(name: &str) -> bool {
    if name.starts_with("_R") {
        return true;
    }
    if !name.starts_with("_ZN") {
        return false;
    }
    // The mangled part ends at the name's end or before a `.` suffix (paths
    // hold `..` too, but never right after the closing `E`).
    let b = name.as_bytes();
    let ends = (0..b.len()).filter(|&i| b[i] == b'.').chain([b.len()]);
    let mut ends = ends;
    ends.any(|end| {
        let main = &b[..end];
        main.len() > 3 + 20
            && main.ends_with(b"E")
            && main[main.len() - 20..main.len() - 1].starts_with(b"17h")
            && main[main.len() - 17..main.len() - 1].iter().all(u8::is_ascii_hexdigit)
    })
}

fn file_name(path: &str) -> &str {
    path.rsplit('/').next().unwrap_or(path)
}

impl NativeSymbols {
    /// Rereads the process's mappings (libraries may have been loaded since
    /// the last dump); parsed objects are kept, and so are the names of
    /// addresses whose mapping is the same ([`mapping_key`]).
    ///
    /// Reading `/proc/self/maps` of a JVM was a tenth of a continuous
    /// profile's interval cut, mostly in the kernel, and libraries rarely
    /// come or go: the read is skipped while the dynamic loader has loaded
    /// and unloaded nothing since the last one, for at most
    /// [`MAPS_REREAD_AFTER`]. An address outside every known mapping (a
    /// mapping made since without the loader: the JIT's code heap growing)
    /// rereads at once ([`NativeSymbols::mapping`]).
    pub fn refresh(&mut self) {
        let loader = loader_counts();
        let unchanged = self.maps_read.is_some_and(|(seen, at)| Some(seen) == loader && at.elapsed() < MAPS_REREAD_AFTER);
        self.read_since_refresh = !unchanged;
        if !unchanged {
            self.reread(loader);
        }
    }

    fn reread(&mut self, loader: Option<(u64, u64)>) {
        let maps = std::fs::read_to_string("/proc/self/maps").map(|t| parse_maps(&t)).unwrap_or_default();
        self.set_maps(maps);
        self.maps_read = loader.map(|l| (l, std::time::Instant::now()));
    }

    /// Takes `maps` as the process's mappings (see [`NativeSymbols::refresh`]).
    fn set_maps(&mut self, maps: Vec<Mapping>) {
        remember_mappings(maps.iter().map(|m| (m.start, m.end, m.offset, m.path.as_str())));
        if maps != self.maps {
            let keys = mapping_keys(&maps);
            let (old, old_keys) = (std::mem::replace(&mut self.maps, maps), std::mem::replace(&mut self.map_keys, keys));
            let (new, new_keys) = (&self.maps, &self.map_keys);
            self.names.retain(|&(pc, kernel), _| kernel || mapping_key(&old, &old_keys, pc) == mapping_key(new, new_keys, pc));
            MAPS_GENERATION.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        }
    }

    /// What the name of the user-space address `pc` depends on: equal
    /// values name it alike (see [`mapping_key`]). Compare after
    /// [`NativeSymbols::refresh`].
    pub fn mapping_id(&self, pc: usize) -> u64 {
        mapping_key(&self.maps, &self.map_keys, pc)
    }

    /// Frees every table and cached name.
    pub fn clear(&mut self) {
        *self = NativeSymbols::default();
        MAPS_GENERATION.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    }

    /// Called when a profile is built: frees every table and cached name,
    /// unless continuous profiling keeps them for the next interval (see
    /// [`keep_between_builds`]), where only a names cache grown past
    /// [`NAMES_KEPT`] is emptied.
    pub fn done(&mut self) {
        if KEEP.load(std::sync::atomic::Ordering::Relaxed) {
            if self.names.len() > NAMES_KEPT {
                self.names = HashMap::new();
            }
            if self.by_symbol.len() > NAMES_KEPT {
                self.by_symbol = HashMap::new();
            }
        } else {
            self.clear();
        }
    }

    fn kernel_table(&mut self) -> Option<&SymbolTable> {
        if !self.kernel_loaded {
            self.kernel_loaded = true;
            self.kernel = prefetched_kernel_table().unwrap_or_else(|| read_kallsyms().map(Arc::new));
        }
        self.kernel.as_deref()
    }

    /// The frame for a code address (`kernel` for kernel addresses).
    pub fn frame(&mut self, pc: usize, kernel: bool) -> Frame {
        if let Some(f) = self.names.get(&(pc, kernel)) {
            return f.clone();
        }
        let f = if kernel { self.kernel_frame(pc) } else { self.user_frame(pc) };
        self.names.insert((pc, kernel), f.clone());
        f
    }

    fn kernel_frame(&mut self, pc: usize) -> Frame {
        let name = self.kernel_table().and_then(|t| t.lookup(pc as u64)).map(str::to_string);
        Frame::new(name.unwrap_or_else(|| "[kernel]".into()), FrameKind::Kernel)
    }

    /// The mapping holding `pc`, rereading `/proc/self/maps` when none
    /// does (a mapping made since): once per [`NativeSymbols::refresh`],
    /// and again whenever the loader loaded or unloaded a library. An
    /// address outside every mapping now takes the last one seen there
    /// ([`SEEN`]): a library unloaded since.
    fn mapping(&mut self, pc: usize) -> Option<Mapping> {
        find_mapping(&self.maps, pc)
            .cloned()
            .or_else(|| {
                let loader = loader_counts();
                let loaded = self.maps_read.is_none_or(|(seen, _)| Some(seen) != loader);
                if std::mem::replace(&mut self.read_since_refresh, true) && !loaded {
                    return None;
                }
                self.reread(loader);
                find_mapping(&self.maps, pc).cloned()
            })
            .or_else(|| seen_mapping(pc))
    }

    fn user_frame(&mut self, pc: usize) -> Frame {
        let Some(m) = self.mapping(pc) else {
            return Frame::new("[unknown]", FrameKind::Native);
        };
        let file_offset = (pc - m.start) as u64 + m.offset;
        let vdso = m.path == "[vdso]";
        if !m.path.starts_with('/') && !vdso {
            // Anonymous code: no file to read.
            let label = if m.path.is_empty() { "[unknown]" } else { m.path.as_str() };
            return Frame::new(label, FrameKind::Native);
        }
        let elf = self.objects.entry(m.path.clone()).or_insert_with(|| if vdso { Elf::load_vdso(&m) } else { Elf::load(&m.path) });
        let name = elf.as_ref().and_then(|e| e.symbols.lookup(e.address_of(file_offset)?));
        let is_jvm = file_name(&m.path).starts_with("libjvm");
        match name {
            Some(n) => {
                let key = n.as_ptr() as usize;
                if let Some(f) = self.by_symbol.get(&key) {
                    return f.clone();
                }
                let f = match demangle(n) {
                    Some(d) => Frame::new(d, FrameKind::Cpp),
                    None => Frame::new(n, if is_jvm { FrameKind::Cpp } else { FrameKind::Native }),
                };
                self.by_symbol.insert(key, f.clone());
                f
            }
            None if vdso => Frame::new("[vdso]", FrameKind::Native),
            None => Frame::new(format!("{}+0x{:x}", file_name(&m.path), file_offset), FrameKind::Native),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn maps_keep_executable_mappings_sorted() {
        let text = "7f0000002000-7f0000003000 r-xp 00002000 08:01 42 /usr/lib/libz.so.1\n\
                    7f0000000000-7f0000001000 r--p 00000000 08:01 42 /usr/lib/libz.so.1\n\
                    7ffd00000000-7ffd00001000 r-xp 00000000 00:00 0 [vdso]\n\
                    5500000000-5500001000 rwxp 00000000 00:00 0 \n";
        let m = parse_maps(text);
        assert_eq!(m.len(), 3);
        assert_eq!(m[0], Mapping { start: 0x55_0000_0000, end: 0x55_0000_1000, offset: 0, path: String::new() });
        assert_eq!((m[1].offset, m[1].path.as_str()), (0x2000, "/usr/lib/libz.so.1"));
        assert_eq!(m[2].path, "[vdso]");
    }

    fn parse_kallsyms(text: &[u8]) -> Option<SymbolTable> {
        KallsymsReader::new(text).parse()
    }

    #[test]
    fn kallsyms_lookup_and_hidden_addresses() {
        let t = parse_kallsyms(b"ffffffff81000000 T _stext\nffffffff81000100 t do_fsync\nffffffff81000200 D some_data\nffffffff81000300 T ksys_write\t[ext4]\nnot a line\nzz T bad_address\nffffffff81000400 t no_newline_at_end").unwrap();
        assert_eq!(t.lookup(0xffffffff81000150), Some("do_fsync"));
        assert_eq!(t.lookup(0xffffffff81000250), Some("do_fsync"), "data symbols are not functions");
        assert_eq!(t.lookup(0xffffffff81000300), Some("ksys_write"));
        assert_eq!(t.lookup(0xffffffff80000000), None);
        assert_eq!(t.lookup(0xffffffff81000410), Some("no_newline_at_end"));
        assert!(parse_kallsyms(b"0000000000000000 T _stext\n0000000000000000 t do_fsync\n").is_none());
        // Hidden addresses are recognised on the first lines: the rest is not read.
        let hidden = "0000000000000000 t f\n".repeat(64) + "ffffffff81000000 T not_read\n";
        assert!(parse_kallsyms(hidden.as_bytes()).is_none());
    }

    #[test]
    fn sized_symbols_do_not_reach_past_their_end() {
        let t = SymbolTable::new([(0x2000, 0, &b"b"[..]), (0x1000, 0x10, &b"a"[..]), (0x1000, 0, &b"a_alias"[..])].into_iter());
        assert_eq!(t.lookup(0x100f), Some("a"));
        assert_eq!(t.lookup(0x1010), None);
        assert_eq!(t.lookup(0x2fff), Some("b"));
        assert_eq!(t.lookup(0x3000), None);
    }

    #[test]
    fn a_plain_name_wins_over_a_local_alias_at_the_same_address() {
        // As in a GCC -fPIC object: the local alias is listed first.
        let t = SymbolTable::new([(0x1000, 0x40, &b"ns_rec.localalias"[..]), (0x1000, 0x40, &b"ns_rec"[..]), (0x2000, 0x10, &b"f.cold"[..])].into_iter());
        assert_eq!(t.lookup(0x1010), Some("ns_rec"));
        assert_eq!(t.lookup(0x2008), Some("f.cold"), "a clone alone keeps its name");
    }

    #[test]
    fn demangles_cpp_and_keeps_c_names() {
        assert_eq!(demangle("_ZN20G1ParScanThreadState23trim_queue_to_thresholdEj").as_deref(), Some("G1ParScanThreadState::trim_queue_to_threshold"));
        assert_eq!(demangle("deflate"), None);
        assert_eq!(demangle("_ZN6oxprof10allocstack4walk17h213e07cda3dd6af0E").as_deref(), Some("oxprof::allocstack::walk"));
        assert_eq!(demangle("_ZN3foo17hzzzzzzzzzzzzzzzzE").as_deref(), Some("foo::hzzzzzzzzzzzzzzzz"), "not a hash: kept");
    }

    #[test]
    fn demangles_rust_legacy_and_v0_without_hash() {
        // Legacy: escapes (`$LT$`, `$RF$`, `$u5b$`, `..`) decoded, hash dropped.
        let legacy = "_ZN68_$LT$$RF$$u5b$u8$u5d$$u20$as$u20$object..read..read_ref..ReadRef$GT$19read_bytes_at_until17h8b4a2cc794ca66d8E";
        assert_eq!(demangle(legacy).as_deref(), Some("<&[u8] as object::read::read_ref::ReadRef>::read_bytes_at_until"));
        assert_eq!(
            demangle("_ZN4core3ptr85drop_in_place$LT$std..rt..lang_start$LT$$LP$$RP$$GT$..$u7b$$u7b$closure$u7d$$u7d$$GT$17h9a7b5b1a2c3d4e5fE.llvm.12345")
                .as_deref(),
            Some("core::ptr::drop_in_place<std::rt::lang_start<()>::{{closure}}>")
        );
        // v0 (`-C symbol-mangling-version=v0`): crate disambiguators dropped.
        assert_eq!(demangle("_RNvCs1234_7mycrate3foo").as_deref(), Some("mycrate::foo"));
        assert_eq!(demangle("_RNvCsdtmpTN4ucN_4test4main").as_deref(), Some("test::main"));
        assert_eq!(
            demangle("_RNvXNtNtCs6O6TnIPaRGP_6object4read8read_refRShNtB2_7ReadRef19read_bytes_at_until").as_deref(),
            Some("<&[u8] as object::read::read_ref::ReadRef>::read_bytes_at_until")
        );
        assert!(looks_rust("_RNvCs1234_7mycrate3foo"));
        assert!(looks_rust("_ZN6oxprof10allocstack4walk17h213e07cda3dd6af0E"));
        assert!(!looks_rust("_ZN20G1ParScanThreadState23trim_queue_to_thresholdEj"));
        assert!(!looks_rust("_ZN3foo17hzzzzzzzzzzzzzzzzE"));
    }

    /// A name stays while the mapping that held its address keeps its
    /// start, offset and file (the JIT's code heap grows at its end every
    /// interval); it goes when another mapping takes the address, or none.
    #[test]
    fn names_survive_a_mapping_that_grew_and_no_other_change() {
        let map = |start: usize, end: usize, path: &str| Mapping { start, end, offset: 0, path: path.into() };
        let mut r = NativeSymbols::default();
        r.set_maps(vec![map(0x1000, 0x2000, ""), map(0x5000, 0x6000, "/lib/a.so"), map(0x8000, 0x9000, "/lib/b.so")]);
        for pc in [0x1800, 0x5800, 0x8800] {
            r.names.insert((pc, false), Frame::new(format!("f{pc:x}"), FrameKind::Native));
        }
        r.names.insert((0xffff_0000, true), Frame::new("k", FrameKind::Kernel));
        let (grown_id, a_id) = (r.mapping_id(0x1800), r.mapping_id(0x5800));
        let generation = maps_generation();
        // The code heap grew; b.so was unloaded and c.so mapped where it was.
        r.set_maps(vec![map(0x1000, 0x3000, ""), map(0x5000, 0x6000, "/lib/a.so"), map(0x8000, 0x9000, "/lib/c.so")]);
        assert!(maps_generation() > generation);
        let mut kept: Vec<usize> = r.names.keys().map(|k| k.0).collect();
        kept.sort();
        assert_eq!(kept, vec![0x1800, 0x5800, 0xffff_0000]);
        assert_eq!((r.mapping_id(0x1800), r.mapping_id(0x5800)), (grown_id, a_id));
        assert_eq!(r.mapping_id(0x2800), grown_id, "the grown part is the same mapping");
        assert_eq!(r.mapping_id(0x7000), 0, "no mapping");
        // Unmapped entirely: the name goes.
        r.set_maps(vec![map(0x5000, 0x6000, "/lib/a.so")]);
        assert!(!r.names.contains_key(&(0x1800, false)) && r.names.contains_key(&(0x5800, false)));
    }

    #[test]
    fn maps_are_read_again_when_a_library_comes() {
        let mut r = NativeSymbols::default();
        r.refresh();
        let (counts, _) = r.maps_read.expect("glibc keeps the loader's counts");
        r.maps = Vec::new();
        r.refresh();
        assert!(r.maps.is_empty(), "nothing loaded since: not read again");
        // SAFETY: loading a library of the system's C library, once.
        let handle = unsafe { libc::dlopen(c"libutil.so.1".as_ptr(), libc::RTLD_NOW) };
        assert!(!handle.is_null());
        r.refresh();
        assert!(!r.maps.is_empty(), "a library loaded: read again");
        assert!(r.maps_read.is_some_and(|(c, _)| c != counts));
        let outside = r.maps.iter().map(|m| m.end).max().unwrap_or(0) + (1 << 40);
        r.maps = Vec::new();
        r.refresh();
        let f = r.frame(outside, false);
        assert_eq!(f.name, "[unknown]");
        assert!(!r.maps.is_empty(), "an address outside every mapping reads the mappings again");
        r.maps = Vec::new();
        assert_eq!(r.frame(outside + 4096, false).name, "[unknown]");
        assert!(r.maps.is_empty(), "once per refresh");
        // SAFETY: as above.
        let handle = unsafe { libc::dlopen(c"libanl.so.1".as_ptr(), libc::RTLD_NOW) };
        assert!(!handle.is_null());
        assert_eq!(r.frame(outside + 8192, false).name, "[unknown]");
        assert!(!r.maps.is_empty(), "a library loaded since: read again without a refresh");
    }

    #[test]
    fn resolves_a_libc_function_of_this_process() {
        let mut r = NativeSymbols::default();
        r.refresh();
        let f = r.frame(libc::getpid as *const () as usize, false);
        assert_eq!(f.kind, FrameKind::Native);
        assert!(f.name.contains("getpid"), "{}", f.name);
        let f = r.frame(1, false);
        assert_eq!(f.name, "[unknown]");
    }

    #[test]
    fn names_functions_of_the_vdso() {
        // SAFETY: getauxval only reads the auxiliary vector.
        let base = unsafe { libc::getauxval(libc::AT_SYSINFO_EHDR) } as usize;
        if base == 0 {
            return; // no vDSO here
        }
        let mut r = NativeSymbols::default();
        r.refresh();
        let m = find_mapping(&r.maps, base).cloned().expect("the vDSO is mapped");
        assert_eq!(m.path, "[vdso]");
        // SAFETY: as in Elf::load_vdso.
        let bytes = unsafe { std::slice::from_raw_parts(base as *const u8, m.end - m.start) };
        let file = object::File::parse(bytes).unwrap();
        let (addr, _, _) = functions(&file).find(|(_, _, n)| n.ends_with(b"clock_gettime")).expect("clock_gettime in the vDSO");
        let text = file.segments().next().unwrap();
        let pc = base + (addr - text.address() + text.file_range().0) as usize + 4;
        let f = r.frame(pc, false);
        assert!(f.name.contains("clock_gettime"), "{}", f.name);
    }

    /// A library stripped of `.symtab` whose separate debug file is
    /// installed: its local functions are named from the debug file, found
    /// by build id or by debug link, and never from a debug file of another
    /// build.
    #[test]
    fn stripped_objects_are_named_from_their_separate_debug_file() {
        let dir = std::env::temp_dir().join(format!("oxprof-debuglink-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let build = |src: &str, out: &str| {
            let c = dir.join("lib.c");
            std::fs::write(&c, src).unwrap();
            let so = dir.join(out);
            let ok =
                std::process::Command::new("cc").args(["-shared", "-fPIC", "-O1", "-Wl,--build-id", "-o"]).arg(&so).arg(&c).status().is_ok_and(|s| s.success());
            assert!(ok, "cc could not build a shared library");
            so
        };
        let src = "static __attribute__((noinline)) int hidden_work(int x) { return x * 3 + 1; }\nint exported(int x) { return hidden_work(x) + 2; }\n";
        let so = build(src, "libdemo.so");
        let full = Elf::load(so.to_str().unwrap()).unwrap();
        let data = MappedFile::open(so.to_str().unwrap()).unwrap();
        let file = object::File::parse(data.bytes()).unwrap();
        let hidden = file.symbols().find(|s| s.name() == Ok("hidden_work")).unwrap().address();
        assert_eq!(full.symbols.lookup(hidden), Some("hidden_work"));
        drop(data);
        // Split: debug file aside, library stripped and linked to it.
        let debug = dir.join("libdemo.so.debug");
        let run = |args: &[&std::ffi::OsStr]| assert!(std::process::Command::new(args[0]).args(&args[1..]).status().unwrap().success(), "{args:?}");
        run(&["objcopy".as_ref(), "--only-keep-debug".as_ref(), so.as_os_str(), debug.as_os_str()]);
        run(&["strip".as_ref(), "--strip-all".as_ref(), so.as_os_str()]);
        let root = dir.join("debug-root");
        let path = so.to_str().unwrap();
        // Without the debug file: only the exported function is known.
        let stripped = Elf::load_with_debug(path, root.to_str().unwrap()).unwrap();
        assert_ne!(stripped.symbols.lookup(hidden), Some("hidden_work"));
        assert!(stripped.symbols.entries.iter().any(|e| stripped.symbols.names.get(e.2 as usize..(e.2 + e.3) as usize) == Some(b"exported".as_slice())));
        // By build id under the debug root.
        let data = MappedFile::open(path).unwrap();
        let id: String = object::File::parse(data.bytes()).unwrap().build_id().unwrap().unwrap().iter().map(|b| format!("{b:02x}")).collect();
        drop(data);
        let by_id = root.join(".build-id").join(&id[..2]);
        std::fs::create_dir_all(&by_id).unwrap();
        std::fs::copy(&debug, by_id.join(format!("{}.debug", &id[2..]))).unwrap();
        assert_eq!(Elf::load_with_debug(path, root.to_str().unwrap()).unwrap().symbols.lookup(hidden), Some("hidden_work"));
        std::fs::remove_dir_all(&root).unwrap();
        // By debug link, beside the object.
        run(&["objcopy".as_ref(), format!("--add-gnu-debuglink={}", debug.display()).as_ref(), so.as_os_str()]);
        assert_eq!(Elf::load_with_debug(path, root.to_str().unwrap()).unwrap().symbols.lookup(hidden), Some("hidden_work"));
        // A debug file of another build under the linked name is not used.
        let other = build(&src.replace("x * 3 + 1", "x * 5 + 7"), "libother.so");
        run(&["objcopy".as_ref(), "--only-keep-debug".as_ref(), other.as_os_str(), debug.as_os_str()]);
        assert_ne!(Elf::load_with_debug(path, root.to_str().unwrap()).unwrap().symbols.lookup(hidden), Some("hidden_work"));
        let _ = std::fs::remove_dir_all(&dir);
    }
}

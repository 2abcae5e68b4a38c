//! Finding native code and data by name in the objects loaded into this
//! process (libjvm, libc, JNI libraries), for triggers (`begin=`, `end=`,
//! `ttsp`) and the JVM variables they read; and naming a C++ object's class
//! from its vtable pointer. Runs at start and at dump time, never in the
//! signal handler.
//!
//! A name is looked up in every loaded object's ELF symbol tables (`.symtab`
//! where the file keeps it, HotSpot's internal functions are local symbols
//! there; else `.dynsym`). It may be given as the mangled symbol
//! (`_ZN20SafepointSynchronize5beginEv`), a plain C name (`my_begin`), a
//! demangled C++ name with its parameter list (`RuntimeService::record_safepoint_synchronized(long)`),
//! or without it (`SafepointSynchronize::begin`), which must then name one
//! function. Compiler-made partial copies (`[clone .cold]`) are never
//! chosen for a name without `[clone`.

use std::collections::BTreeSet;

use object::{Object, ObjectSymbol, SymbolKind};

use crate::native::symbols::MappedFile;

/// A function or variable found by name.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Found {
    /// Its address in this process.
    pub addr: usize,
    /// Its size in bytes (0 when the table does not say).
    pub size: u64,
    /// Its name as a user reads it (demangled).
    pub name: String,
    /// The object that defines it.
    pub object: String,
}

/// What is looked for: code or data.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Function,
    Variable,
}

/// One loaded object: its path and how far it was moved from its link
/// addresses.
struct Loaded {
    path: String,
    bias: usize,
}

/// The objects the dynamic loader loaded into this process, libjvm first,
/// each once, with their load bias, as the loader itself reports them
/// (`dl_iterate_phdr`). Not from `/proc/self/maps`: any thread of the agent
/// reading a library's symbol table maps that file too, and such a mapping
/// taken for the library's own gave a bias that put a trigger at an
/// unmapped address (a JDK 21 JVM crashed arming `ttsp` while another
/// thread read libjvm's symbols).
fn loaded_objects() -> Vec<Loaded> {
    unsafe extern "C" fn each(info: *mut libc::dl_phdr_info, _size: libc::size_t, data: *mut libc::c_void) -> libc::c_int {
        // SAFETY: `data` is the `Vec<Loaded>` passed below, alive during the
        // call; `info` is the loader's description of one object.
        let (out, info) = unsafe { (&mut *(data as *mut Vec<Loaded>), &*info) };
        let name = if info.dlpi_name.is_null() {
            String::new()
        } else {
            // SAFETY: the loader's NUL-terminated name of the object.
            unsafe { std::ffi::CStr::from_ptr(info.dlpi_name) }.to_string_lossy().into_owned()
        };
        // The main program has an empty name; the vDSO a name that is no path.
        let path = if name.is_empty() && out.is_empty() {
            std::fs::read_link("/proc/self/exe").map(|p| p.to_string_lossy().into_owned()).unwrap_or_default()
        } else {
            name
        };
        if path.starts_with('/') && !out.iter().any(|o| o.path == path) {
            out.push(Loaded { path, bias: info.dlpi_addr as usize });
        }
        0
    }
    let mut out: Vec<Loaded> = Vec::new();
    // SAFETY: `each` matches the callback type and only reads what the
    // loader passes; `out` outlives the call.
    unsafe { libc::dl_iterate_phdr(Some(each), &mut out as *mut Vec<Loaded> as *mut libc::c_void) };
    out.sort_by_key(|o| !o.path.ends_with("/libjvm.so"));
    out
}

/// A C++ name as a user reads it, or the symbol itself.
pub fn demangle(symbol: &str) -> String {
    if symbol.starts_with("_Z") {
        if let Ok(s) = cpp_demangle::Symbol::new(symbol.as_bytes()) {
            if let Ok(d) = s.demangle() {
                return d;
            }
        }
    }
    symbol.to_string()
}

/// The name without its parameter list: `A::b(long) const` → `A::b`.
fn without_params(name: &str) -> &str {
    // The parameter list is the last top-level parenthesis group; templates
    // (`<...>`) may contain parentheses of their own.
    let mut depth = 0i32;
    for (i, c) in name.char_indices() {
        match c {
            '<' => depth += 1,
            '>' => depth -= 1,
            '(' if depth == 0 && i > 0 && !name[..i].ends_with("operator") => return &name[..i],
            _ => {}
        }
    }
    name
}

fn squash(s: &str) -> String {
    s.chars().filter(|c| !c.is_whitespace()).collect()
}

/// The last identifier of a name as the user wrote it (`A::b(int)` → `b`).
fn last_component(query: &str) -> &str {
    let base = without_params(query);
    base.rsplit("::").next().unwrap_or(base)
}

/// Identifiers inside a mangled name (`<length><identifier>` runs), or the
/// name itself for a C symbol.
fn identifiers(symbol: &str) -> Vec<&str> {
    if !symbol.starts_with("_Z") {
        return vec![symbol];
    }
    let b = symbol.as_bytes();
    let mut out = Vec::new();
    let mut i = 2;
    while i < b.len() {
        if b[i].is_ascii_digit() && !b[i - 1].is_ascii_digit() {
            let mut j = i;
            let mut n = 0usize;
            while j < b.len() && b[j].is_ascii_digit() {
                n = n.saturating_mul(10).saturating_add((b[j] - b'0') as usize);
                j += 1;
            }
            if n > 0 && j + n <= b.len() {
                if let Some(id) = symbol.get(j..j + n) {
                    out.push(id);
                }
                i = j + n;
                continue;
            }
        }
        i += 1;
    }
    out
}

fn edit_distance(a: &str, b: &str) -> usize {
    let (a, b): (Vec<char>, Vec<char>) = (a.to_lowercase().chars().collect(), b.to_lowercase().chars().collect());
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    let mut cur = vec![0; b.len() + 1];
    for (i, ca) in a.iter().enumerate() {
        cur[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            cur[j + 1] = (prev[j] + usize::from(ca != cb)).min(prev[j + 1] + 1).min(cur[j] + 1);
        }
        std::mem::swap(&mut prev, &mut cur);
    }
    prev[b.len()]
}

fn kind_matches(kind: Kind, k: SymbolKind) -> bool {
    match kind {
        Kind::Function => k == SymbolKind::Text,
        Kind::Variable => matches!(k, SymbolKind::Data | SymbolKind::Unknown),
    }
}

/// Calls `f(object, name, address in this process, size)` for every defined
/// symbol of `kind` in every loaded object (`.symtab` and `.dynsym`).
fn each_symbol(kind: Kind, mut f: impl FnMut(&Loaded, &str, usize, u64)) {
    for obj in loaded_objects() {
        let Some(file) = MappedFile::open(&obj.path) else { continue };
        let Ok(elf) = object::File::parse(file.bytes()) else { continue };
        for s in elf.symbols().chain(elf.dynamic_symbols()) {
            if !kind_matches(kind, s.kind()) || !s.is_definition() || s.address() == 0 {
                continue;
            }
            if let Ok(name) = s.name() {
                f(&obj, name, (s.address() as usize).wrapping_add(obj.bias), s.size());
            }
        }
    }
}

/// The addresses of symbols named exactly `names` (mangled), in one pass
/// over every loaded object's symbol tables; `None` for a name not found.
pub fn find_exact(names: &[&str], kind: Kind) -> Vec<Option<usize>> {
    let mut out = vec![None; names.len()];
    each_symbol(kind, |_, name, addr, _| {
        if let Some(i) = names.iter().position(|n| *n == name) {
            if let Some(slot) = out.get_mut(i) {
                slot.get_or_insert(addr);
            }
        }
    });
    out
}

/// Looks `query` up in every loaded object. `Err` is one line for the
/// user: not found (with close matches) or ambiguous (with the choices).
pub fn find(query: &str, kind: Kind) -> Result<Found, String> {
    let query = query.trim();
    if query.is_empty() {
        return Err("an empty name".into());
    }
    let has_params = without_params(query).len() != query.len();
    let wants_clone = query.contains("[clone");
    let q_base = squash(without_params(query));
    let q_full = squash(query);
    let last = last_component(query).to_string();
    let mut hits: Vec<Found> = Vec::new();
    each_symbol(kind, |obj, name, addr, size| {
        let found = if name == query {
            true
        } else if name.starts_with("_Z") && name.contains(last.as_str()) {
            let d = demangle(name);
            (wants_clone || !d.contains("[clone")) && if has_params { squash(&d) == q_full } else { squash(without_params(&d)) == q_base }
        } else {
            false
        };
        if found && !hits.iter().any(|h| h.addr == addr) {
            hits.push(Found { addr, size, name: demangle(name), object: obj.path.clone() });
        }
    });
    match hits.len() {
        1 => Ok(hits.remove(0)),
        0 => {
            let close = close_matches(query, kind, 5);
            let what = if kind == Kind::Function { "function" } else { "variable" };
            if close.is_empty() {
                Err(format!("no {what} named '{query}' in the loaded libraries"))
            } else {
                Err(format!("no {what} named '{query}' in the loaded libraries; close matches: {}", close.join(", ")))
            }
        }
        n => {
            hits.sort_by(|a, b| a.name.cmp(&b.name));
            let choices: Vec<String> = hits.iter().take(6).map(|h| format!("{} ({})", h.name, short_path(&h.object))).collect();
            Err(format!("'{query}' names {n} functions: {}; give the parameter list or the mangled name to choose one", choices.join(", ")))
        }
    }
}

fn short_path(p: &str) -> &str {
    p.rsplit('/').next().unwrap_or(p)
}

/// Up to `n` names a user may have meant: those whose identifiers contain
/// the query's last component (any case), else those within two edits of it.
pub fn close_matches(query: &str, kind: Kind, n: usize) -> Vec<String> {
    let last = last_component(query).to_lowercase();
    if last.is_empty() {
        return Vec::new();
    }
    let mut contains: BTreeSet<String> = BTreeSet::new();
    let mut near: Vec<(usize, String)> = Vec::new();
    each_symbol(kind, |_, name, _, _| {
        let ids = identifiers(name);
        let Some(own) = ids.iter().rev().find(|id| !id.is_empty()) else { return };
        if own.to_lowercase().contains(&last) {
            if contains.len() < 200 {
                let d = demangle(name);
                if !d.contains("[clone") {
                    contains.insert(d);
                }
            }
        } else if own.len().abs_diff(last.len()) <= 2 {
            let d = edit_distance(own, &last);
            if d <= 2 {
                near.push((d, demangle(name)));
            }
        }
    });
    // Rank by how far each whole name (without parameters) is from the
    // query's, so `Class::begn` suggests `Class::begin()` before other
    // classes' `begin`s; names much further away than a typo are left out
    // when closer ones exist.
    // A query without a class (`begin`) is as close to every `X::begin` as
    // to a free function of that name.
    let q = squash(without_params(query)).to_lowercase();
    let unqualified = !query.contains("::");
    let distance = |s: &str| {
        let whole = edit_distance(&squash(without_params(s)), &q);
        if unqualified {
            whole.min(edit_distance(last_component(without_params(s)), &q))
        } else {
            whole
        }
    };
    let mut ranked: Vec<(usize, String)> = contains.into_iter().chain(near.into_iter().map(|(_, s)| s)).map(|s| (distance(&s), s)).collect();
    ranked.sort_by(|a, b| a.0.cmp(&b.0).then(a.1.len().cmp(&b.1.len())).then(a.1.cmp(&b.1)));
    ranked.dedup_by(|a, b| a.1 == b.1);
    let typo = 2usize.max(q.len() / 3);
    let close = ranked.iter().take_while(|(d, _)| *d <= typo).count();
    let mut out: Vec<String> = ranked.into_iter().take(if close > 0 { close } else { 3 }).map(|(_, s)| s).collect();
    out.truncate(n);
    out
}

/// Names C++ classes from the vtable pointers of their objects (the first
/// word of a polymorphic object points 16 bytes into `vtable for Class`).
/// Built once from the objects' `_ZTV` symbols.
pub struct VtableNames {
    /// (start, end, class name), sorted by start.
    tables: Vec<(usize, usize, String)>,
}

impl VtableNames {
    /// The vtables defined in the object whose path ends with `suffix`
    /// (e.g. `/libjvm.so`).
    pub fn of_object(suffix: &str) -> VtableNames {
        let mut tables = Vec::new();
        for obj in loaded_objects().into_iter().filter(|o| o.path.ends_with(suffix)) {
            let Some(file) = MappedFile::open(&obj.path) else { continue };
            let Ok(elf) = object::File::parse(file.bytes()) else { continue };
            for s in elf.symbols().chain(elf.dynamic_symbols()) {
                let Ok(name) = s.name() else { continue };
                if let Some(class) = name.strip_prefix("_ZTV").filter(|_| s.address() != 0 && s.size() > 0) {
                    let start = (s.address() as usize).wrapping_add(obj.bias);
                    let d = demangle(&format!("_Z{class}"));
                    tables.push((start, start + s.size() as usize, d));
                }
            }
        }
        tables.sort();
        tables.dedup_by_key(|t| t.0);
        VtableNames { tables }
    }

    /// The class whose vtable holds `vptr`.
    pub fn class_of(&self, vptr: usize) -> Option<&str> {
        let i = self.tables.partition_point(|t| t.0 <= vptr).checked_sub(1)?;
        let (start, end, name) = self.tables.get(i)?;
        (vptr >= *start && vptr < *end).then_some(name.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[no_mangle]
    #[inline(never)]
    pub extern "C" fn oxprof_lookup_test_target(x: u64) -> u64 {
        x.wrapping_mul(3)
    }

    #[test]
    fn names_are_taken_apart() {
        assert_eq!(without_params("RuntimeService::record_safepoint_synchronized(long)"), "RuntimeService::record_safepoint_synchronized");
        assert_eq!(without_params("A<int (*)(int)>::f(int) const"), "A<int (*)(int)>::f");
        assert_eq!(last_component("SafepointSynchronize::begin()"), "begin");
        assert_eq!(identifiers("_ZN20SafepointSynchronize5beginEv"), vec!["SafepointSynchronize", "begin"]);
        assert_eq!(identifiers("my_begin"), vec!["my_begin"]);
        assert_eq!(edit_distance("begn", "begin"), 1);
        assert_eq!(demangle("_ZN14RuntimeService29record_safepoint_synchronizedEl"), "RuntimeService::record_safepoint_synchronized(long)");
    }

    #[test]
    fn finds_a_function_of_this_process_and_suggests_close_names() {
        let f = find("oxprof_lookup_test_target", Kind::Function).unwrap();
        assert_eq!(f.addr, oxprof_lookup_test_target as *const () as usize);
        let e = find("oxprof_lookup_test_targt", Kind::Function).unwrap_err();
        assert!(e.contains("close matches") && e.contains("oxprof_lookup_test_target"), "{e}");
        let e = find("no_such_function_anywhere_xyzzy", Kind::Function).unwrap_err();
        assert!(e.starts_with("no function named"), "{e}");
    }
}

//! HotSpot's exported description of its own structures (`gHotSpotVMStructs`,
//! `gHotSpotVMTypes`): the table the serviceability agent reads. oxprof uses
//! it for facts JVMTI does not give cheaply:
//! - the code cache's bounds, to check return addresses during walk recovery;
//! - the `DebugNonSafepoints` flag, switched on at load time so inlined
//!   frames are attributed right without enabling the CompiledMethodLoad
//!   event (which costs the JVM work for every compiled method: 0.8% of CPU
//!   on javac).
//!
//! Every lookup is optional: when a name is missing (another JVM, a future
//! HotSpot), callers fall back to the JVMTI route.
//!
//! A name being present does not make its meaning the same, so the table is
//! used only on the JDK versions oxprof was tested on: [`decide`] reads the
//! JVM's version once at load time, and [`Trust`] says what may be relied
//! on. Every user of HotSpot's internals (the table itself, the stack walks,
//! anything that reads a `jmethodID` as a pointer) consults it.

use std::collections::HashMap;
use std::ffi::{c_char, CStr};

use std::sync::Mutex;

use crate::hotspot::gate;
use crate::jvmti::Jvmti;
use crate::log;

/// The oldest and newest JDK feature releases oxprof's use of HotSpot's
/// internals was tested on (11, 17, 21 and 25).
pub const OLDEST_TESTED_JDK: u32 = 11;
pub const NEWEST_TESTED_JDK: u32 = 25;
/// From this release on (JDK-8268406) a `jmethodID` is a key into a table of
/// the VM's, no longer the address of a slot holding the method's `Method*`:
/// reading it as a pointer faults.
pub const FIRST_JDK_WITH_JMETHODID_TABLE: u32 = 26;

/// What oxprof may rely on in this JVM, decided from its feature version
/// alone (a pure function, see [`Trust::for_version`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Trust {
    /// The JVM's feature release, when it could be read with certainty.
    pub version: Option<u32>,
    /// A `jmethodID` points at a slot holding its `Method*` (JDK 9–25), so
    /// it may be read to find the method and `Method*`s may be turned back
    /// into `jmethodID`s by reading them back.
    pub jmethodid_is_method_slot: bool,
    /// HotSpot's structure table and everything oxprof builds on it (the
    /// flag table, code cache bounds, the physical Java frame walk behind
    /// frame types, the own CPU walk and the own allocation walk) were
    /// tested on this release.
    pub vmstructs_walk_trusted: bool,
}

impl Trust {
    /// The decision for feature release `version` (`None`: unknown, which
    /// trusts nothing).
    pub fn for_version(version: Option<u32>) -> Trust {
        let jmethodid_is_method_slot = version.is_some_and(|v| v < FIRST_JDK_WITH_JMETHODID_TABLE);
        let tested = version.is_some_and(|v| (OLDEST_TESTED_JDK..=NEWEST_TESTED_JDK).contains(&v));
        Trust { version, jmethodid_is_method_slot, vmstructs_walk_trusted: tested && jmethodid_is_method_slot }
    }

    /// The log line saying what is off and why; `None` when nothing is.
    pub fn refusal(&self) -> Option<String> {
        if self.vmstructs_walk_trusted && self.jmethodid_is_method_slot {
            return None;
        }
        let why = match self.version {
            Some(v) if v > NEWEST_TESTED_JDK => format!("JDK {v} is newer than the newest JDK oxprof was tested on ({NEWEST_TESTED_JDK})"),
            Some(v) => format!("JDK {v} is older than the oldest JDK oxprof was tested on ({OLDEST_TESTED_JDK})"),
            None => "this JVM's version could not be read".to_string(),
        };
        let ids = if self.jmethodid_is_method_slot { "" } else { "; jmethodIDs are not read as pointers (from JDK 26 they are table keys, JDK-8268406)" };
        Some(format!(
            "{why}: HotSpot's internal structures are not used{ids}; no Java frame types and no own stack walks: CPU stacks come from AsyncGetCallTrace alone, allocation stacks from GetStackTrace"
        ))
    }
}

/// The feature release at the start of a Java version string:
/// `17.0.15+6-Debian-1deb12u1` → 17, `26-ea+5` → 26, `11.0.13` → 11, the
/// old `1.8.0_302` form → 8. `None` for anything else.
pub fn parse_feature(s: &str) -> Option<u32> {
    let s = s.trim();
    let digits = s.len() - s.trim_start_matches(|c: char| c.is_ascii_digit()).len();
    let (number, rest) = s.split_at(digits);
    let n: u32 = number.parse().ok()?;
    if !(rest.is_empty() || rest.starts_with(['.', '-', '+', '_'])) {
        return None;
    }
    if n == 1 {
        // `1.N…`: the naming before JDK 9.
        let rest = rest.strip_prefix('.')?;
        let digits = rest.len() - rest.trim_start_matches(|c: char| c.is_ascii_digit()).len();
        return rest[..digits].parse().ok().filter(|&m| m > 1);
    }
    (n > 1).then_some(n)
}

/// The JVM's feature release from JVMTI's version number (whose major part
/// is the feature release since JDK 9; `1` before) and the
/// `java.vm.version` property. Both must name the same release: anything
/// else (an unreadable string, JDK 8's `25.x` HotSpot numbering, a
/// disagreement) is `None`.
pub fn feature_version(jvmti_major: u32, vm_version: Option<&str>) -> Option<u32> {
    let from_jvmti = (jvmti_major >= 9).then_some(jvmti_major);
    let from_property = vm_version.and_then(parse_feature);
    from_jvmti.filter(|&v| from_property == Some(v))
}

/// Applies the hidden `OXPROF_ASSUME_JDK` override (for tests: it lets a
/// JDK 17 run the agent as it runs on a newer JDK). It can only make the
/// agent more careful: a release below the detected one changes nothing,
/// and an unreadable value trusts nothing.
pub fn assume(detected: Option<u32>, assumed: Option<&str>) -> Option<u32> {
    match assumed {
        None => detected,
        Some(a) => Some(detected?.max(parse_feature(a)?)),
    }
}

/// The line saying what is off and why, until [`untold_refusal`] gave it out.
static REFUSAL: Mutex<Option<String>> = Mutex::new(None);

/// Reads the JVM's version, decides what oxprof may rely on, and makes the
/// decision visible to [`jmethodid_is_method_slot`] and
/// [`vmstructs_walk_trusted`]; the line saying what is off waits for
/// [`untold_refusal`]. Call once, at load time, before anything uses
/// HotSpot's internals.
pub fn decide(jvmti: Jvmti) -> Trust {
    let major = jvmti.major_version();
    let property = jvmti.system_property(c"java.vm.version").ok();
    let detected = feature_version(major, property.as_deref());
    FEATURE.store(detected.unwrap_or(0), std::sync::atomic::Ordering::Relaxed);
    let assumed = std::env::var("OXPROF_ASSUME_JDK").ok().filter(|a| !a.is_empty());
    let trust = Trust::for_version(assume(detected, assumed.as_deref()));
    log::debug(&format!("JVM version: java.vm.version {property:?}, JVMTI {major}, feature release {detected:?}, trusted as {trust:?}"));
    if let Some(line) = trust.refusal() {
        let by = assumed.map(|a| format!(" (OXPROF_ASSUME_JDK={a})")).unwrap_or_default();
        let raw =
            if detected.is_none() { format!(" (java.vm.version {}, JVMTI {major})", property.as_deref().unwrap_or("unavailable")) } else { String::new() };
        *REFUSAL.lock().unwrap_or_else(|e| e.into_inner()) = Some(format!("{line}{raw}{by}"));
    }
    gate::set(trust.jmethodid_is_method_slot, trust.vmstructs_walk_trusted);
    trust
}

/// The JVM's feature release as [`decide`] read it (0: unknown or not yet read).
static FEATURE: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);

/// The JVM's feature release (17 for `17.0.15+6`), as read at load time.
pub fn feature() -> Option<u32> {
    Some(FEATURE.load(std::sync::atomic::Ordering::Relaxed)).filter(|&v| v != 0)
}

/// The line saying which of HotSpot's internals are not used and why, the
/// first time a profile that would use them starts (so it is logged once,
/// and an attach's reply carries it); `None` afterwards or when nothing is off.
pub fn untold_refusal() -> Option<String> {
    REFUSAL.lock().unwrap_or_else(|e| e.into_inner()).take()
}

/// One field of the structure table.
#[derive(Clone, Copy, Debug)]
pub struct Field {
    /// Byte offset of an instance field.
    pub offset: u64,
    /// Address of a static field.
    pub address: usize,
    pub is_static: bool,
}

#[derive(Default, Debug)]
pub struct VmStructs {
    fields: HashMap<(String, String), Field>,
    /// The C type of each field, e.g. `int` or `int16_t`.
    field_types: HashMap<(String, String), String>,
    sizes: HashMap<String, u64>,
    int_constants: HashMap<String, i64>,
}

fn symbol(name: &CStr) -> Option<usize> {
    // SAFETY: dlsym with a valid C string; RTLD_DEFAULT searches libjvm,
    // which the launcher loads with RTLD_GLOBAL.
    let p = unsafe { libc::dlsym(libc::RTLD_DEFAULT, name.as_ptr()) };
    (!p.is_null()).then_some(p as usize)
}

/// Reads an exported `uint64_t` (or pointer) variable.
fn read_var(name: &CStr) -> Option<u64> {
    // SAFETY: the symbol is an exported 8-byte variable of libjvm.
    symbol(name).map(|p| unsafe { *(p as *const u64) })
}

/// Reads a C string pointer stored at `addr`.
///
/// # Safety
/// `addr` must point at a readable pointer-sized slot holding null or a
/// NUL-terminated string.
unsafe fn string_at(addr: usize) -> Option<String> {
    let p = *(addr as *const *const c_char);
    (!p.is_null()).then(|| CStr::from_ptr(p).to_string_lossy().into_owned())
}

/// Reads one of HotSpot's `{name, value}` tables (types with their sizes,
/// integer constants): `vars` name the exported table address, entry stride,
/// name offset and value offset; entries end at a null name. `value` reads
/// the value at the address it is given. Empty when the JVM lacks the table.
fn named_table<T>(vars: [&CStr; 4], value: impl Fn(usize) -> T) -> HashMap<String, T> {
    let mut out = HashMap::new();
    let [base, stride, name_off, value_off] = vars.map(read_var);
    let (Some(base), Some(stride), Some(name_off), Some(value_off)) = (base, stride, name_off, value_off) else { return out };
    for i in 0..100_000 {
        let entry = base as usize + i * stride as usize;
        // SAFETY: entries are `stride` bytes apart in a static array that
        // ends with a null name; offsets come from the JVM's own layout.
        let Some(name) = (unsafe { string_at(entry + name_off as usize) }) else { break };
        out.insert(name, value(entry + value_off as usize));
    }
    out
}

impl VmStructs {
    /// Reads the tables from the running JVM; `None` if it exports none,
    /// or if this JVM's version is not one they are trusted on (see
    /// [`decide`], which must run first).
    pub fn load() -> Option<VmStructs> {
        if !gate::vmstructs_walk_trusted() {
            return None;
        }
        let mut vs = VmStructs::default();
        let base = read_var(c"gHotSpotVMStructs")? as usize;
        let stride = read_var(c"gHotSpotVMStructEntryArrayStride")? as usize;
        let type_off = read_var(c"gHotSpotVMStructEntryTypeNameOffset")? as usize;
        let field_off = read_var(c"gHotSpotVMStructEntryFieldNameOffset")? as usize;
        let static_off = read_var(c"gHotSpotVMStructEntryIsStaticOffset")? as usize;
        let offset_off = read_var(c"gHotSpotVMStructEntryOffsetOffset")? as usize;
        let address_off = read_var(c"gHotSpotVMStructEntryAddressOffset")? as usize;
        let ctype_off = read_var(c"gHotSpotVMStructEntryTypeStringOffset").map(|o| o as usize);
        if base == 0 || stride == 0 {
            return None;
        }
        for i in 0..100_000 {
            let entry = base + i * stride;
            // SAFETY: entries are `stride` bytes apart in a static array that
            // ends with an entry whose type name is null; offsets come from
            // the JVM's own exported layout.
            unsafe {
                let Some(type_name) = string_at(entry + type_off) else { break };
                let Some(field_name) = string_at(entry + field_off) else { continue };
                let field = Field {
                    offset: *((entry + offset_off) as *const u64),
                    address: *((entry + address_off) as *const usize),
                    is_static: *((entry + static_off) as *const i32) != 0,
                };
                if let Some(ctype) = ctype_off.and_then(|o| string_at(entry + o)) {
                    vs.field_types.insert((type_name.clone(), field_name.clone()), ctype);
                }
                vs.fields.insert((type_name, field_name), field);
            }
        }
        vs.sizes = named_table(
            [c"gHotSpotVMTypes", c"gHotSpotVMTypeEntryArrayStride", c"gHotSpotVMTypeEntryTypeNameOffset", c"gHotSpotVMTypeEntrySizeOffset"],
            |at| {
                // SAFETY: a type entry's size field is a uint64_t.
                unsafe { *(at as *const u64) }
            },
        );
        vs.int_constants = named_table(
            [
                c"gHotSpotVMIntConstants",
                c"gHotSpotVMIntConstantEntryArrayStride",
                c"gHotSpotVMIntConstantEntryNameOffset",
                c"gHotSpotVMIntConstantEntryValueOffset",
            ],
            |at| {
                // SAFETY: an integer constant's value field is an int32_t.
                unsafe { *(at as *const i32) as i64 }
            },
        );
        (!vs.fields.is_empty()).then_some(vs)
    }

    /// The C type of a field as the table spells it (`int`, `int16_t`, …).
    pub fn field_type(&self, type_name: &str, field: &str) -> Option<&str> {
        self.field_types.get(&(type_name.to_string(), field.to_string())).map(String::as_str)
    }

    /// An exported integer constant, e.g. `CodeBlobKind::Nmethod`.
    pub fn int_constant(&self, name: &str) -> Option<i64> {
        self.int_constants.get(name).copied()
    }

    pub fn field(&self, type_name: &str, field: &str) -> Option<Field> {
        self.fields.get(&(type_name.to_string(), field.to_string())).copied()
    }

    pub fn size(&self, type_name: &str) -> Option<u64> {
        self.sizes.get(type_name).copied()
    }

    /// The value of a pointer-sized static field.
    pub fn static_word(&self, type_name: &str, field: &str) -> Option<usize> {
        let f = self.field(type_name, field).filter(|f| f.is_static && f.address != 0)?;
        // SAFETY: the JVM says a static field of pointer size lives there.
        Some(unsafe { *(f.address as *const usize) })
    }

    /// The code cache's [low, high) bounds, once the JVM has created it.
    pub fn code_cache_bounds(&self) -> Option<(usize, usize)> {
        let low = self.static_word("CodeCache", "_low_bound")?;
        let high = self.static_word("CodeCache", "_high_bound")?;
        (low != 0 && high > low).then_some((low, high))
    }

    /// The address of a `bool` JVM flag's value.
    pub fn bool_flag(&self, name: &str) -> Option<*mut bool> {
        let type_name = ["JVMFlag", "Flag"].into_iter().find(|t| self.field(t, "_name").is_some())?;
        let flags = self.static_word(type_name, "flags")?;
        let count = self.static_word(type_name, "numFlags")?;
        let size = self.size(type_name)? as usize;
        let name_off = self.field(type_name, "_name")?.offset as usize;
        let addr_off = self.field(type_name, "_addr")?.offset as usize;
        if flags == 0 || size == 0 || count > 100_000 {
            return None;
        }
        for i in 0..count {
            let flag = flags + i * size;
            // SAFETY: `flags` is the JVM's flag table of `count` entries of
            // `size` bytes; `_name` and `_addr` are its documented fields.
            unsafe {
                if string_at(flag + name_off).as_deref() == Some(name) {
                    let addr = *((flag + addr_off) as *const usize);
                    return (addr != 0).then_some(addr as *mut bool);
                }
            }
        }
        None
    }

    /// Turns `DebugNonSafepoints` on. Call at load time, before the JIT
    /// compiles anything. Returns whether the flag is on afterwards.
    pub fn enable_debug_non_safepoints(&self) -> bool {
        match self.bool_flag("DebugNonSafepoints") {
            Some(p) => {
                // SAFETY: the flag's storage is a plain bool global of libjvm;
                // at load time no compiler thread reads it yet.
                unsafe { p.write_volatile(true) };
                true
            }
            None => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn version_strings_name_their_feature_release() {
        for (s, want) in [
            ("11.0.13", Some(11)),
            ("11.0.13+8-post-Debian-1deb11u1", Some(11)),
            ("17.0.15+6-Debian-1deb12u1", Some(17)),
            ("21.0.5+11-LTS", Some(21)),
            ("25+36-3489", Some(25)),
            ("26-ea", Some(26)),
            ("26-ea+20-2345", Some(26)),
            (" 27 ", Some(27)),
            ("1.8.0_302", Some(8)),
            ("25.302-b08", Some(25)),
            ("", None),
            ("garbage", None),
            ("openj9-0.40.0", None),
            ("17abc", None),
            ("0", None),
            ("1", None),
            ("1.x", None),
            ("-17", None),
            ("99999999999999999999", None),
        ] {
            assert_eq!(parse_feature(s), want, "{s:?}");
        }
    }

    #[test]
    fn the_version_needs_jvmti_and_the_property_to_agree() {
        assert_eq!(feature_version(17, Some("17.0.15+6-Debian-1deb12u1")), Some(17));
        assert_eq!(feature_version(26, Some("26-ea")), Some(26));
        // JDK 8: JVMTI 1.2, and HotSpot's own 25.x numbering in the property.
        assert_eq!(feature_version(1, Some("25.302-b08")), None);
        assert_eq!(feature_version(25, Some("26-ea")), None);
        assert_eq!(feature_version(25, Some("garbage")), None);
        assert_eq!(feature_version(25, None), None);
    }

    #[test]
    fn only_tested_releases_trust_hotspot_internals() {
        for v in [11, 17, 21, 25] {
            let t = Trust::for_version(Some(v));
            assert!(t.jmethodid_is_method_slot && t.vmstructs_walk_trusted, "JDK {v}");
            assert_eq!(t.refusal(), None, "JDK {v}");
        }
        for v in [26, 27, 40] {
            let t = Trust::for_version(Some(v));
            assert!(!t.jmethodid_is_method_slot && !t.vmstructs_walk_trusted, "JDK {v}");
            let line = t.refusal().unwrap();
            assert!(line.starts_with(&format!("JDK {v} is newer than the newest JDK oxprof was tested on (25)")) && line.contains("JDK-8268406"), "{line}");
        }
        let ea = Trust::for_version(feature_version(26, Some("26-ea")));
        assert_eq!((ea.version, ea.jmethodid_is_method_slot, ea.vmstructs_walk_trusted), (Some(26), false, false));
        let unknown = Trust::for_version(feature_version(25, Some("garbage")));
        assert!(!unknown.jmethodid_is_method_slot && !unknown.vmstructs_walk_trusted);
        assert!(unknown.refusal().unwrap().starts_with("this JVM's version could not be read"));
        // Untested older releases keep pointer jmethodIDs but not the walks.
        let nine = Trust::for_version(Some(9));
        assert!(nine.jmethodid_is_method_slot && !nine.vmstructs_walk_trusted);
        assert!(!nine.refusal().unwrap().contains("JDK-8268406"));
    }

    #[test]
    fn the_override_only_makes_the_agent_more_careful() {
        assert_eq!(assume(Some(17), None), Some(17));
        assert_eq!(assume(Some(17), Some("26")), Some(26));
        assert_eq!(assume(Some(25), Some("26-ea")), Some(26));
        assert_eq!(assume(Some(26), Some("17")), Some(26), "cannot lower the release");
        assert_eq!(assume(Some(17), Some("nonsense")), None, "an unreadable value trusts nothing");
        assert_eq!(assume(None, Some("17")), None, "cannot make an unknown JVM known");
    }
}

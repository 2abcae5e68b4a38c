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

use std::collections::HashMap;
use std::ffi::{c_char, CStr};

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
    /// Reads the tables from the running JVM; `None` if it exports none.
    pub fn load() -> Option<VmStructs> {
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
        vs.sizes = named_table([c"gHotSpotVMTypes", c"gHotSpotVMTypeEntryArrayStride", c"gHotSpotVMTypeEntryTypeNameOffset", c"gHotSpotVMTypeEntrySizeOffset"], |at| {
            // SAFETY: a type entry's size field is a uint64_t.
            unsafe { *(at as *const u64) }
        });
        vs.int_constants = named_table(
            [c"gHotSpotVMIntConstants", c"gHotSpotVMIntConstantEntryArrayStride", c"gHotSpotVMIntConstantEntryNameOffset", c"gHotSpotVMIntConstantEntryValueOffset"],
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

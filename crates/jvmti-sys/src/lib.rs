//! Raw JNI and JVMTI bindings.
//!
//! `bindings.rs` is generated once by `scripts/gen-bindings.sh` (bindgen over the
//! JDK 17 `jvmti.h`/`jni.h`) and checked in, so a normal build needs no libclang.
//! The JVMTI function table only grows at its end between JDK versions, and
//! oxprof calls only functions that exist since JDK 11, so these bindings serve
//! HotSpot 11, 17, 21 and 25 alike.
//!
//! `AsyncGetCallTrace` is not part of any header: its types live in
//! [`asgct`], written by hand from its documented shape.

mod bindings;
pub use bindings::*;

pub mod asgct;

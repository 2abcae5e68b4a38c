//! signal-safe: what the version gate decided (`vmstructs::decide`), for the
//! signal handler's callees, which cannot be handed a `Trust`: whether a
//! `jmethodID` may be read as a pointer to its `Method*` slot, and whether
//! HotSpot's structure table and the walks built on it may be used. Two
//! atomics; nothing is trusted before the decision.

use std::sync::atomic::{AtomicBool, Ordering};

static JMETHODID_IS_METHOD_SLOT: AtomicBool = AtomicBool::new(false);
static VMSTRUCTS_WALK_TRUSTED: AtomicBool = AtomicBool::new(false);

/// Publishes the decision (once, at load time).
pub fn set(jmethodid_is_method_slot: bool, vmstructs_walk_trusted: bool) {
    JMETHODID_IS_METHOD_SLOT.store(jmethodid_is_method_slot, Ordering::SeqCst);
    VMSTRUCTS_WALK_TRUSTED.store(vmstructs_walk_trusted, Ordering::SeqCst);
}

/// Whether a `jmethodID` may be read as a pointer to its `Method*` slot.
/// An atomic load.
pub fn jmethodid_is_method_slot() -> bool {
    JMETHODID_IS_METHOD_SLOT.load(Ordering::Relaxed)
}

/// Whether HotSpot's structure table and the walks built on it may be used.
/// An atomic load.
pub fn vmstructs_walk_trusted() -> bool {
    VMSTRUCTS_WALK_TRUSTED.load(Ordering::Relaxed)
}

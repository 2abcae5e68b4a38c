//! Who owns a Java monitor, read from HotSpot's own structures: the object's
//! mark word points at its `ObjectMonitor` once the monitor is inflated
//! (always so when a thread contends for it), and the monitor's `_owner`
//! names the owning thread. JVMTI's `GetObjectMonitorUsage` answers the
//! same but stops the JVM at a safepoint, once per contended enter.
//!
//! Every read is checked ([`safemem`]): the owner may exit while it is
//! read. The monitor is trusted only when its `_object` leads back to the
//! object, so a mark word that is not a monitor pointer (a monitor table,
//! a concurrent collector's coloured pointer) gives no owner, never a
//! wrong one.

use crate::hotspot::safemem;
use crate::hotspot::vmstructs::VmStructs;

/// Offsets of the fields read, from the JVM's structure table.
#[derive(Clone, Copy, Debug)]
pub struct OwnerLayout {
    /// `ObjectMonitor::_owner`.
    owner: usize,
    /// `ObjectMonitor::_object`: the object itself (JDK 11) or a weak
    /// handle holding it (JDK 17+).
    object: usize,
    /// JDK 24+: `_owner` holds the owner's `java.lang.Thread` id; before,
    /// its `JavaThread*` (or a lock record on its stack).
    owner_is_java_id: bool,
    /// `JavaThread::_osthread` (`Thread::_osthread` before JDK 21).
    osthread: usize,
    /// `OSThread::_thread_id`: the kernel's thread id.
    thread_id: usize,
    /// The mark word's lock bits of an inflated monitor, and their mask.
    monitor_value: usize,
    lock_mask: usize,
}

/// A monitor's owner as the JVM records it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Owner {
    /// The owner's kernel thread id.
    Os(u32),
    /// The owner's `java.lang.Thread` id (JDK 24+).
    Java(i64),
}

/// The values of `_owner` that name no thread: none, an owner not yet known
/// (lightweight locking's anonymous owner), a monitor being deflated.
const NOT_A_THREAD: usize = 16;

impl OwnerLayout {
    /// `None` when the JVM does not export what is needed, or keeps its
    /// monitors in a table (`UseObjectMonitorTable`, JDK 24+), where the
    /// mark word holds no monitor pointer.
    pub fn new(vs: &VmStructs) -> Option<OwnerLayout> {
        let off = |t: &str, f: &str| vs.field(t, f).filter(|x| !x.is_static).map(|x| x.offset as usize);
        if let Some(flag) = vs.bool_flag("UseObjectMonitorTable") {
            // SAFETY: `bool_flag` returns the address of the JVM's flag.
            if unsafe { flag.read_volatile() } {
                return None;
            }
        }
        let constant = |name: &str| ["markWord", "markOopDesc"].iter().find_map(|t| vs.int_constant(&format!("{t}::{name}")));
        Some(OwnerLayout {
            owner: off("ObjectMonitor", "_owner")?,
            object: off("ObjectMonitor", "_object")?,
            owner_is_java_id: vs.field_type("ObjectMonitor", "_owner") == Some("int64_t"),
            osthread: off("JavaThread", "_osthread").or_else(|| off("Thread", "_osthread"))?,
            thread_id: off("OSThread", "_thread_id")?,
            monitor_value: constant("monitor_value").unwrap_or(2) as usize,
            lock_mask: constant("lock_mask_in_place").unwrap_or(3) as usize,
        })
    }

    /// The owner of `handle`'s monitor: `handle` is a JNI reference to the
    /// object (a pointer to the slot holding it). `None` when the monitor
    /// is not inflated, has no owner, or cannot be read.
    pub fn owner(&self, handle: usize) -> Option<Owner> {
        let oop = safemem::read_word(handle & !3)?;
        let mark = safemem::read_word(oop)?;
        if mark & self.lock_mask != self.monitor_value {
            return None;
        }
        let monitor = mark & !self.lock_mask;
        let object = safemem::read_word(monitor.checked_add(self.object)?)?;
        if object != oop && safemem::read_word(object) != Some(oop) {
            return None;
        }
        let owner = safemem::read_word(monitor.checked_add(self.owner)?)?;
        if owner < NOT_A_THREAD {
            return None;
        }
        if self.owner_is_java_id {
            return Some(Owner::Java(owner as i64));
        }
        // A `JavaThread*`, or (the first holder after the monitor was
        // inflated from a stack lock) a lock record on the owner's stack,
        // whose words at these offsets are no OSThread: the kernel id read
        // must then name no thread the caller knows.
        self.kernel_tid(owner).map(Owner::Os)
    }

    /// The kernel thread id of a `JavaThread*` (read checked: the thread
    /// may be ending).
    pub fn kernel_tid(&self, java_thread: usize) -> Option<u32> {
        let osthread = safemem::read_word(java_thread.checked_add(self.osthread)?)?;
        let word = safemem::read_word(osthread.checked_add(self.thread_id)?)?;
        let tid = word as u32; // pid_t: the low half on x86_64
        (tid != 0).then_some(tid)
    }
}

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
    /// The owner's `JavaThread*` (up to JDK 21), or a lock record on its
    /// stack: [`OwnerLayout::kernel_tid`] tells.
    Thread(usize),
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

    /// The owner of the monitor of the object `handle` refers to. `None`
    /// when the monitor is not inflated, has no owner, or cannot be read.
    /// Two or three checked reads (a system call each); the owner's kernel
    /// id is left for [`OwnerLayout::kernel_tid`], needed only when the
    /// wait is recorded.
    ///
    /// # Safety
    /// `handle` must be a live JNI reference (a pointer to the slot that
    /// holds the object), as a JVMTI callback receives it.
    pub unsafe fn owner(&self, handle: usize) -> Option<Owner> {
        // SAFETY: a live JNI reference points at a slot of its handle
        // block (this function's contract); the low bits tag global and
        // weak references.
        let oop = unsafe { ((handle & !3) as *const usize).read_volatile() };
        let mark = safemem::read_word(oop)?;
        if mark & self.lock_mask != self.monitor_value {
            return None;
        }
        let monitor = mark & !self.lock_mask;
        let (object, owner) = safemem::read_two(monitor.checked_add(self.object)?, monitor.checked_add(self.owner)?)?;
        if object != oop && safemem::read_word(object) != Some(oop) {
            return None;
        }
        if owner < NOT_A_THREAD {
            return None;
        }
        Some(if self.owner_is_java_id { Owner::Java(owner as i64) } else { Owner::Thread(owner) })
    }

    /// The kernel thread id of a `JavaThread*` (read checked: the thread
    /// may be ending). A lock record on the owner's stack (the first holder
    /// after the monitor was inflated from a stack lock) has no OSThread at
    /// these offsets: the id read must then name no thread the caller knows.
    pub fn kernel_tid(&self, java_thread: usize) -> Option<u32> {
        let osthread = safemem::read_word(java_thread.checked_add(self.osthread)?)?;
        let word = safemem::read_word(osthread.checked_add(self.thread_id)?)?;
        let tid = word as u32; // pid_t: the low half on x86_64
        (tid != 0).then_some(tid)
    }
}

//! signal-safe: Reading memory that may not be mapped, from inside a signal handler.
//!
//! The Java stack walker follows pointers into JVM metadata (`Method`,
//! `ConstMethod`, `InstanceKlass`) that it cannot range-check. It reads them
//! with `process_vm_readv` on its own process: the kernel copies the bytes or
//! returns an error (EFAULT) for an unmapped address, so a bad pointer costs
//! a failed walk, never a crash. The call is a plain system call: async-signal
//! safe, no allocation, no lock. It does not touch `errno` visibly to the
//! interrupted code because the signal handler saves and restores `errno`.

use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};

/// Our own process id, set once before the handler is armed.
static PID: AtomicI32 = AtomicI32::new(0);
static WORKS: AtomicBool = AtomicBool::new(false);

/// Checks that the kernel lets this process read itself this way (seccomp
/// filters may forbid the call). Call off the signal path, before use.
pub fn init() -> bool {
    // SAFETY: getpid has no preconditions.
    PID.store(unsafe { libc::getpid() }, Ordering::Relaxed);
    let probe: u64 = 0x6f78_7072_6f66;
    let ok = read_word(&probe as *const u64 as usize) == Some(probe as usize) && read_word(8).is_none();
    WORKS.store(ok, Ordering::Relaxed);
    ok
}

/// Whether [`init`] found safe reads working.
pub fn available() -> bool {
    WORKS.load(Ordering::Relaxed)
}

/// Copies `len` bytes at `addr` into `out`; false if any byte is unreadable.
fn read_into(addr: usize, out: *mut u8, len: usize) -> bool {
    if addr == 0 {
        return false;
    }
    let local = libc::iovec { iov_base: out as *mut libc::c_void, iov_len: len };
    let remote = libc::iovec { iov_base: addr as *mut libc::c_void, iov_len: len };
    // SAFETY: `out` has room for `len` bytes (callers pass a local); the
    // remote side is only read, by the kernel, which checks it.
    let n = unsafe { libc::process_vm_readv(PID.load(Ordering::Relaxed), &local, 1, &remote, 1, 0) };
    n == len as isize
}

/// Reads a pointer-sized word, or `None` if it is not mapped.
pub fn read_word(addr: usize) -> Option<usize> {
    let mut v: usize = 0;
    read_into(addr, &mut v as *mut usize as *mut u8, 8).then_some(v)
}

/// Reads the words at `a` and `b` with one system call; `None` unless both
/// are mapped.
pub fn read_two(a: usize, b: usize) -> Option<(usize, usize)> {
    if a == 0 || b == 0 {
        return None;
    }
    let (mut x, mut y) = (0usize, 0usize);
    let local = [
        libc::iovec { iov_base: &mut x as *mut usize as *mut libc::c_void, iov_len: 8 },
        libc::iovec { iov_base: &mut y as *mut usize as *mut libc::c_void, iov_len: 8 },
    ];
    let remote = [libc::iovec { iov_base: a as *mut libc::c_void, iov_len: 8 }, libc::iovec { iov_base: b as *mut libc::c_void, iov_len: 8 }];
    // SAFETY: `local` points at two local words; the remote side is only
    // read, by the kernel, which checks it.
    let n = unsafe { libc::process_vm_readv(PID.load(Ordering::Relaxed), local.as_ptr(), 2, remote.as_ptr(), 2, 0) };
    (n == 16).then_some((x, y))
}

/// Reads a `u16`, or `None` if it is not mapped.
pub fn read_u16(addr: usize) -> Option<u16> {
    let mut v: u16 = 0;
    read_into(addr, &mut v as *mut u16 as *mut u8, 2).then_some(v)
}

/// Reads 8 bytes (for comparing a short C string), or `None`.
pub fn read_bytes8(addr: usize) -> Option<[u8; 8]> {
    let mut v = [0u8; 8];
    read_into(addr, v.as_mut_ptr(), 8).then_some(v)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_mapped_and_refuses_unmapped() {
        assert!(init());
        let (a, b) = (7usize, 9usize);
        assert_eq!(read_two(&a as *const usize as usize, &b as *const usize as usize), Some((7, 9)));
        assert_eq!(read_two(&a as *const usize as usize, 8), None);
        let x: u64 = 0x1234_5678_9abc_def0;
        assert_eq!(read_word(&x as *const u64 as usize), Some(x as usize));
        assert_eq!(read_word(0), None);
        assert_eq!(read_word(16), None);
        let b = *b"nmethod\0";
        assert_eq!(read_bytes8(b.as_ptr() as usize), Some(b));
    }
}

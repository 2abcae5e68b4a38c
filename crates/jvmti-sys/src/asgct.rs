//! Types of HotSpot's `AsyncGetCallTrace`, an exported but undocumented-in-headers
//! function (`void AsyncGetCallTrace(ASGCT_CallTrace*, jint depth, void* ucontext)`).

use crate::{jint, jmethodID, JNIEnv};

/// One frame: `lineno` is the bytecode index for Java frames, -3 for a `native` method.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct ASGCT_CallFrame {
    pub lineno: jint,
    pub method_id: jmethodID,
}

/// The trace: on return `num_frames` is the frame count, or a negative error code.
#[repr(C)]
#[derive(Debug)]
pub struct ASGCT_CallTrace {
    pub env_id: *mut JNIEnv,
    pub num_frames: jint,
    pub frames: *mut ASGCT_CallFrame,
}

/// The function's type, as found with `dlsym`.
pub type AsyncGetCallTraceFn = unsafe extern "C" fn(trace: *mut ASGCT_CallTrace, depth: jint, ucontext: *mut core::ffi::c_void);

/// `lineno` value HotSpot uses for a frame of a Java `native` method.
pub const BCI_NATIVE_FRAME: jint = -3;

/// Error codes AsyncGetCallTrace leaves in `num_frames` (HotSpot's forte.cpp).
pub mod ticks {
    pub const NO_JAVA_FRAME: i32 = 0;
    pub const NO_CLASS_LOAD: i32 = -1;
    pub const GC_ACTIVE: i32 = -2;
    pub const UNKNOWN_NOT_JAVA: i32 = -3;
    pub const NOT_WALKABLE_NOT_JAVA: i32 = -4;
    pub const UNKNOWN_JAVA: i32 = -5;
    pub const NOT_WALKABLE_JAVA: i32 = -6;
    pub const UNKNOWN_STATE: i32 = -7;
    pub const THREAD_EXIT: i32 = -8;
    pub const DEOPT: i32 = -9;
    pub const SAFEPOINT: i32 = -10;
}

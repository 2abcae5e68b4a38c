//! signal-safe: HotSpot's internals: the exported structure table
//! (`vmstructs`, read at load) and the version gate over it (`gate`), the
//! frame layout (`frames`) with a cache of compiled methods' blobs
//! (`blob_cache`), the physical frame walk (`javastack`), the
//! complete own walk (`fullwalk`), the walk after AsyncGetCallTrace failed
//! (`javawalk`), frame types (`frametypes`), compiled-code debug
//! information (`scopes`), `Method*` to `jmethodID` (`method_ids`) and
//! checked memory reads (`safemem`), whether the current thread has set
//! HotSpot's current thread (`thread_key`), the allocating thread's TLAB
//! (`tlab`, for allocation accuracy) and a contended monitor's owner
//! (`monitor_owner`). Everything but `vmstructs`, `tlab` and `monitor_owner` is
//! reached from the signal handler. Uses only `sampling::store` (frame encoding) and,
//! at load, `jvmti` and `log`.

pub mod blob_cache;
pub mod frames;
pub mod frametypes;
pub mod fullwalk;
pub mod gate;
pub mod javastack;
pub mod javawalk;
pub mod method_ids;
pub mod monitor_owner;
pub mod safemem;
pub mod scopes;
pub mod thread_key;
pub mod tlab;
pub mod vmstructs;

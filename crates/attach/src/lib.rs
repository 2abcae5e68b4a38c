//! HotSpot's dynamic attach mechanism, spoken directly (no `jattach`, no
//! `jcmd`): this crate owns finding running JVMs, reaching their attach
//! listener, sending attach commands and loading JVMTI agents into them.
//!
//! The conversation, as every HotSpot since JDK 6 implements it on Linux:
//!
//! 1. The JVM listens on the Unix socket `/tmp/.java_pid<nspid>` in its own
//!    mount namespace (we reach it through `/proc/<pid>/root`). `<nspid>` is
//!    its pid in its own pid namespace.
//! 2. If the socket is missing, the attacher creates `.attach_pid<nspid>` in
//!    the JVM's working directory and in its `/tmp` (HotSpot looks in both;
//!    while starting it sits in its hsperfdata directory for a few
//!    milliseconds, so the working directory alone can miss) and sends it `SIGQUIT`; the
//!    JVM's signal thread sees the file and starts the listener. A process
//!    that does not catch `SIGQUIT` would die of it, so we check first.
//! 3. The request is `1\0<command>\0<arg1>\0<arg2>\0<arg3>\0`; the reply is a
//!    status line followed by text, and the JVM closes the connection.
//! 4. The JVM only accepts a peer with its own effective uid and gid (or
//!    root); as root we take the target's identity on the calling thread
//!    for the conversation.
//!
//! Modules: `process` reads `/proc` ([`inspect`], [`loaded_library`]),
//! `protocol` holds the socket conversation ([`execute`]), `agent` loads
//! agents and copies them into another mount namespace ([`load_agent`]),
//! `list` discovers JVMs ([`list_jvms`]), `creds` switches identity,
//! `target_files` reads and removes files in a target's file system as its
//! user ([`read_target_file`]) and makes its text [`printable`], and
//! `error` defines [`AttachError`]. With the feature `fuzzing`, `fuzzing`
//! exposes the parsers of what a JVM sends or controls to `fuzz/`.

mod agent;
mod creds;
mod error;
#[cfg(feature = "fuzzing")]
pub mod fuzzing;
mod list;
mod process;
mod protocol;
mod target_files;
#[cfg(test)]
mod test_support;

pub use agent::{load_agent, parse_load_reply, AgentLibrary, LoadReply};
pub use error::AttachError;
pub use list::{list_jvms, JvmInfo};
pub use process::{inspect, loaded_library, Target};
pub use protocol::{execute, Reply};
pub use target_files::{printable, read_target_file, remove_target_file, READ_TIMEOUT};

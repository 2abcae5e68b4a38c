pub mod cputime;
pub mod event_log;
pub mod signal;
pub mod store;
pub mod threads;

pub mod alloc;
pub mod allocstack;
pub mod gcroots;
pub mod live;
pub mod live_report;

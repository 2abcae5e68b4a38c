pub mod dwarf;
pub mod symbols;
pub mod unwind;

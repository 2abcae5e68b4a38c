pub mod frames;
pub mod frametypes;
pub mod javastack;
pub mod javawalk;
pub mod method_ids;
pub mod safemem;
pub mod scopes;
pub mod vmstructs;

pub mod bench;
pub mod boot;

pub mod bench;
pub mod boot;
pub mod probe;
pub mod run;

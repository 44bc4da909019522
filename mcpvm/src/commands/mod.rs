pub mod bench;
pub mod boot;
pub mod run;

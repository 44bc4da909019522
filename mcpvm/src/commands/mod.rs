pub mod boot;
pub mod run;

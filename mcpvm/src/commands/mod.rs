pub mod audit;
pub mod boot;
pub mod client;
pub mod image;
pub mod pin;
pub mod probe;
pub mod run;

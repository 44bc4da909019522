pub mod audit;
pub mod client;
pub mod image;
pub mod pin;
pub mod probe;

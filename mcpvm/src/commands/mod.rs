pub mod boot;

pub mod bus;
pub mod config;
pub mod gate;
pub mod model;
pub mod permission;
pub mod suggest;

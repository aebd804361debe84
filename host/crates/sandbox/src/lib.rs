pub mod anchor;
pub mod sandbox;
pub mod supervise;

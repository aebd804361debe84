//! The sandbox around gates: what a hostile gate cannot reach, and what a
//! program the sandbox cannot read is told.

mod hostile;
mod reach;

//! The typed model: what a policy, a routine, a standing policy, a review
//! chain and an event *are*, below both the store and the engine.
//!
//! The store decodes its rows into these types once, at its edge; the
//! engine, the API's wire types and the readers of events hold only them.
//! This layer must never hold SQL, a process, a clock or a network call: it
//! is data and the pure rules that keep that data well formed.

pub mod event;

//! `gatehost serve` as a process on loopback: sessions, commits, reviews,
//! routines, chains, the page, passkeys, limits, restarts and the store.

pub(crate) mod acp;
mod chains;
mod commits;
mod damaged_rows;
mod durability;
mod lifecycle;
mod limits;
mod linked_worktrees;
mod live_config;
mod loopback;
mod notify;
mod passkey;
mod restart_leftovers;
mod retention;
mod review;
mod routine_faults;
pub(crate) mod routines;
mod session_ids;
mod session_policies;
mod store_fixture;
mod swap_race;
mod ui;
mod watchdog;
mod worktree_caches;
mod worktree_overlay;

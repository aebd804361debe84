pub mod change;
pub mod commit;
pub mod worktree;

//! How every kind of gate runs: one implementation of [`RunGate`] per kind
//! (in `shell`, `judge`, `wasm`), beside its shape and checks
//! ([`GateKind`](super::GateKind), in gatehost-model).
//!
//! It owns the trait and [`runner_of`], the one match from a registered
//! kind to its runner. It must never name a kind's fields: those are the
//! kind's file's.

use super::spec::Kind;
use super::{GateContext, GateRunner};
use crate::anchor::WorkspaceAnchor;
use crate::config::Trust;
use crate::verdict::Verdict;
use crate::wasm::PluginUsage;
use std::future::Future;
use std::pin::Pin;

/// What a kind runs as: the gate's label and the workspace paths it
/// needs (`None`: everything).
#[derive(Debug, Clone, Copy)]
pub struct Named<'a> {
    pub label: &'a str,
    pub paths: Option<&'a [String]>,
}

/// A gate's verdict and, for a plugin whose evaluation got that far, what
/// it used against its bounds (`gatehost plugin run` reports it).
pub type Measured = (Verdict, Option<PluginUsage>);

/// A gate's run, boxed so that the trait has one object per kind.
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// One kind of gate, run: checked against the host and the workspace, and
/// run.
pub trait RunGate: Send + Sync {
    /// Why the sandbox would keep the gate's program from running, found
    /// without running anything (`None`: in reach, or nothing to reach).
    fn reach(&self, _runner: &GateRunner, _trust: Trust) -> Option<String> {
        None
    }

    /// Checks, without running the gate, that it could run against the
    /// workspace (attach refuses a policy whose gate could not).
    fn preflight(
        &self,
        runner: &GateRunner,
        anchor: &WorkspaceAnchor,
        trust: Trust,
    ) -> Result<(), String>;

    /// Runs the gate, named `gate.label`.
    fn run<'a>(
        &'a self,
        runner: &'a GateRunner,
        gate: Named<'a>,
        anchor: &'a WorkspaceAnchor,
        ctx: &'a GateContext,
    ) -> BoxFuture<'a, Measured>;
}

/// The runner of a registered kind: the one match every run goes through.
pub fn runner_of(kind: &Kind) -> &dyn RunGate {
    match kind {
        Kind::Shell(k) => k,
        Kind::Judge(k) => k,
        Kind::Wasm(k) => k,
    }
}

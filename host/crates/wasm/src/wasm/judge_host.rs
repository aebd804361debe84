//! What a plugin's `judge` import needs from the host, as a trait the gate
//! layer implements and passes in (the WASM host never reaches into the
//! gates: no import cycle, no back door).
//!
//! It owns the shape of a judge call and its answer only; it must never
//! run a judge itself.

use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

/// One judge call a plugin asks for.
#[derive(Debug, Clone)]
pub struct JudgeCall<'a> {
    /// Names the call in the host's logs and reports.
    pub label: String,
    /// The configured adapter (`[judge.adapters]`).
    pub adapter: &'a str,
    /// The model asked of the adapter, if the call names one.
    pub model: Option<&'a str>,
    /// The rubric the judge answers: the whole prompt of a `judge` call,
    /// the `rubric` of a `judge-with-context` call.
    pub rubric: &'a str,
    /// The material to judge (`judge-with-context`): the prompt's
    /// untrusted-data section, capped like a judge gate's context.
    pub context: Option<&'a str>,
    /// The judge's own bound; it kills its adapter past it.
    pub timeout: Duration,
    /// Whether the verdict line must carry the call's nonce.
    pub nonce: bool,
}

/// How a judge call ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum JudgeAnswer {
    /// The judge could not run (no such adapter, a crash): why.
    CouldNotRun(String),
    /// It decided, with its output.
    Decided {
        /// Whether its verdict line says PASS.
        pass: bool,
        /// The judge's output.
        output: String,
    },
    /// No verdict line, or a timeout: nothing was decided (fail closed).
    Undecided {
        /// Why nothing was decided.
        reason: String,
        /// What the judge printed before that.
        output: String,
    },
}

/// Runs judge calls for plugins (the gate layer's `GateRunner`).
pub trait JudgeHost: Send + Sync + std::fmt::Debug {
    /// Runs one call to its end (bounded by `call.timeout`); never fails
    /// but as an answer.
    fn judge<'a>(
        &'a self,
        call: JudgeCall<'a>,
    ) -> Pin<Box<dyn Future<Output = JudgeAnswer> + Send + 'a>>;
}

//! The judge gate's shape: an LLM CLI (an adapter the host configures),
//! its model, the rubric and the timeout, as a gate file writes it, and
//! its checks. Running it is the runner's (gatehost's `gate::judge`).

use super::kind::{Check, GateKind, MAX_TIMEOUT_MS, SpecError};
use schemars::JsonSchema;
use serde::Deserialize;

/// The timeout of a gate of this kind that sets none.
pub const DEFAULT_JUDGE_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(120);

/// A judge gate: an LLM CLI asked to judge the work against a rubric.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct JudgeGate {
    /// A judge adapter the host configures (`claude`, `codex`, `gemini`, …).
    pub adapter: String,
    /// The model the adapter is asked for (default: the adapter's
    /// `default_model`).
    #[serde(default)]
    pub model: Option<String>,
    /// The rubric; the judge must end with `VERDICT: PASS` or `VERDICT: FAIL`.
    pub prompt: String,
    /// Its timeout in ms (default 120000; at most one day).
    #[serde(default)]
    #[schemars(range(min = 1, max = MAX_TIMEOUT_MS))]
    pub timeout_ms: Option<u64>,
    /// Opt-in: the verdict line must carry a per-run random code.
    #[serde(default)]
    pub nonce: bool,
}

/// A judge gate object: `{"judge": {…}}`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct JudgeWrapper {
    #[serde(default)]
    pub name: Option<String>,
    pub judge: JudgeGate,
    /// The workspace paths the gate needs (see `Gate::paths`).
    #[serde(default)]
    pub paths: Option<Vec<String>>,
}

impl GateKind for JudgeGate {
    fn label(&self) -> String {
        match &self.model {
            Some(m) => format!("judge: {} ({m})", self.adapter),
            None => format!("judge: {}", self.adapter),
        }
    }

    fn cost_class(&self) -> u8 {
        2
    }

    fn timeout(&self) -> std::time::Duration {
        self.timeout_ms
            .map(std::time::Duration::from_millis)
            .unwrap_or(DEFAULT_JUDGE_TIMEOUT)
    }

    fn is_native(&self) -> bool {
        true
    }

    fn sees_change(&self) -> bool {
        true
    }

    fn validate(&self, check: &Check<'_>) -> Result<(), SpecError> {
        check.not_blank("judge.adapter", &self.adapter)?;
        check.not_blank("judge.prompt", &self.prompt)?;
        if self.model.as_deref().is_some_and(|m| m.trim().is_empty()) {
            return Err(check.err("judge.model", "must not be empty when given"));
        }
        check.no_nul("judge.prompt", &self.prompt)?;
        check.timeout("judge.timeoutMs", self.timeout_ms)
    }
}

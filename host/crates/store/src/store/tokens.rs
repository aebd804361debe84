//! The cluster's two credentials as a shared store keeps them (issue 51,
//! "one operator"): the agent token and the operator token, each with its
//! generation (1 when the first host stored it, one more at each
//! rotation), when and by which host it was last set. PostgreSQL holds
//! them in `cluster_tokens`; SQLite holds none (one host: its token files
//! are the truth).
//!
//! It owns these types only. It must never show a value: their `Debug`
//! says which generation, never what the token is, so that no log, error
//! or status can carry one by accident.

/// Which of the two tokens.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TokenName {
    /// The agent token (attach, report, poll, wait).
    Agent,
    /// The operator token (everything).
    Operator,
}

impl TokenName {
    /// Its name in `cluster_tokens.name`.
    pub fn as_str(self) -> &'static str {
        match self {
            TokenName::Agent => "agent",
            TokenName::Operator => "operator",
        }
    }
}

/// One stored token.
#[derive(Clone, PartialEq, Eq)]
pub struct StoredToken {
    /// The token itself: a secret, never shown.
    pub value: String,
    /// 1 when first stored, one more at each rotation.
    pub generation: i64,
    /// When it was last set (ms since the Unix epoch).
    pub rotated_at: i64,
    /// The host that set it, if it was one.
    pub rotated_by: Option<String>,
}

impl std::fmt::Debug for StoredToken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StoredToken")
            .field("generation", &self.generation)
            .field("rotated_at", &self.rotated_at)
            .field("rotated_by", &self.rotated_by)
            .finish_non_exhaustive()
    }
}

/// Both of the cluster's tokens.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClusterTokens {
    /// The agent token.
    pub agent: StoredToken,
    /// The operator token.
    pub operator: StoredToken,
}

impl ClusterTokens {
    /// The two generations, `(agent, operator)`: what a host compares to
    /// tell whether it holds the current tokens.
    pub fn generations(&self) -> (i64, i64) {
        (self.agent.generation, self.operator.generation)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn debug_never_shows_a_value() {
        let t = |v: &str| StoredToken {
            value: v.into(),
            generation: 3,
            rotated_at: 5,
            rotated_by: Some("alpha".into()),
        };
        let both = ClusterTokens {
            agent: t("agent-secret-0123456789"),
            operator: t("operator-secret-0123456789"),
        };
        let shown = format!("{both:?} {both:#?}");
        assert!(!shown.contains("secret"), "{shown}");
        assert!(shown.contains("generation: 3"), "{shown}");
        assert_eq!(both.generations(), (3, 3));
    }
}

//! The tokens a daemon serves with, when they change (issue 51, "one
//! operator"):
//!
//! - **On PostgreSQL, the cluster's** (`store::tokens`): at start
//!   ([`adopt_at_start`]) a host stores its own tokens when the cluster has
//!   none (the first host seeds it), else takes the stored ones: held in
//!   memory and written to its data directory's token files, so that the
//!   local CLI, hooks and `gatehost mcp` keep working. A token the
//!   configuration names a file for (`[daemon] agent_token_file`,
//!   `operator_token_file`) that is not the cluster's stops the start: the
//!   daemon never writes the operator's own files.
//! - **Rotated** (`POST /v1/tokens/rotate`, `gatehost token rotate`,
//!   [`rotate`]): new random tokens, stored (PostgreSQL: in the cluster, a
//!   write transaction of this host notifying every other), swapped in
//!   memory and written to the token files. The answer names the files,
//!   never a value.
//! - **Followed** ([`spawn_following`]): every other host, woken by the
//!   rotation's notification, by its listener listening again (a
//!   notification may have been missed) or at the latest every
//!   [`BACKSTOP`], reads the generations and, when they changed, takes the
//!   new tokens up as at start ([`follow`]).
//!
//! A replaced operator token ends the page's logins it opened
//! ([`end_logins_on_rotation`]).
//!
//! It must never log, answer or put in an error a token's value.

use super::auth::{LocalTokens, TokenError, Tokens};
use super::token_files::{fresh_token, refusal, write_token_file};
use super::{ApiError, AppState, JsonBody, Operator};
use crate::engine::Engine;
use crate::model::event::{Event, Rotation, TokenEvent};
use crate::store::Store;
use crate::store::tokens::{ClusterTokens, TokenName};
use crate::wire;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use std::sync::Arc;
use std::time::Duration;

/// The longest a host goes without looking at the cluster's tokens'
/// generations (a notification missed without a lost connection).
pub const BACKSTOP: Duration = Duration::from_secs(3);

/// At start: on a store hosts share, the cluster's tokens become this
/// host's (seeded from `local` when the cluster has none). Errors are for
/// a person, naming files, never values.
pub fn adopt_at_start(tokens: &Tokens, store: &Store, local: LocalTokens) -> Result<(), String> {
    let Some(shared) = store.shared_tokens() else {
        return Ok(());
    };
    let stored = match shared.cluster_tokens() {
        Ok(Some(t)) => t,
        Ok(None) => shared
            .seed_cluster_tokens(&local.agent, &local.operator)
            .map_err(|e| format!("cannot store the cluster's tokens: {e}"))?,
        Err(e) => return Err(format!("cannot read the cluster's tokens: {e}")),
    };
    let files = tokens.files();
    let mut differ = Vec::new();
    if files.agent_configured && stored.agent.value != local.agent {
        differ.push(format!(
            "[daemon] agent_token_file ({})",
            files.agent.display()
        ));
    }
    if files.operator_configured && stored.operator.value != local.operator {
        differ.push(format!(
            "[daemon] operator_token_file ({})",
            files.operator.display()
        ));
    }
    if !differ.is_empty() {
        return Err(format!(
            "{} holds a token that is not the cluster's (the PostgreSQL store holds the tokens every host serves with); \
remove the setting (this host then writes the cluster's tokens into its data directory), \
or write the cluster's token into that file (another host's data directory holds it)",
            differ.join(" and ")
        ));
    }
    let _one = tokens.changing.lock().unwrap_or_else(|p| p.into_inner());
    let new = (
        stored.agent.value != local.agent,
        stored.operator.value != local.operator,
    );
    take_up(tokens, &stored, new).map_err(|e| e.to_string())?;
    let (a, o) = stored.generations();
    if new.0 || new.1 {
        tracing::info!(
            agent_generation = a,
            operator_generation = o,
            "this host serves with the cluster's tokens (written to its token files)"
        );
    } else {
        tracing::info!(
            agent_generation = a,
            operator_generation = o,
            "this host serves with the cluster's tokens"
        );
    }
    Ok(())
}

/// Holds `stored` from now on: swapped in memory, then written to the
/// token files of the data directory for each token `new` says changed
/// (a configured file is never written: it is said to be stale). Its
/// generations are recorded as held only once the files are written, so
/// that a write that failed is tried again at the next look.
fn take_up(tokens: &Tokens, stored: &ClusterTokens, new: (bool, bool)) -> Result<(), TokenError> {
    // As a token file is checked: a stored pair that is not one (edited
    // by hand) is never put in force (the agent token must never be the
    // operator's).
    let (a, o) = (stored.agent.value.trim(), stored.operator.value.trim());
    if a.len() < 16 || o.len() < 16 || a == o {
        return Err(TokenError::File {
            path: "cluster_tokens (the PostgreSQL store)".into(),
            message: "holds a token shorter than 16 characters, or the same token for the agent and the operator: not taken up; rotate them (gatehost token rotate)".into(),
        });
    }
    tokens.swap(Some(&stored.agent.value), Some(&stored.operator.value));
    let files = tokens.files();
    let mut first_error = None;
    for (changed, configured, path, value, key) in [
        (
            new.0,
            files.agent_configured,
            &files.agent,
            &stored.agent.value,
            "agent_token_file",
        ),
        (
            new.1,
            files.operator_configured,
            &files.operator,
            &stored.operator.value,
            "operator_token_file",
        ),
    ] {
        if !changed {
            continue;
        }
        if configured {
            tracing::error!(file = %path.display(), "the configured [daemon] {key} no longer holds the cluster's token (another host rotated it): this daemon accepts the cluster's new token only; clients reading that file are refused until it is updated, and a restart refuses to start until then");
            continue;
        }
        if let Err(e) = write_token_file(path, value) {
            tracing::error!(error = %e, "cannot write the cluster's new token to its file");
            first_error.get_or_insert(e);
        }
    }
    match first_error {
        Some(e) => Err(e),
        None => {
            tokens.set_generations(Some(stored.generations()));
            Ok(())
        }
    }
}

/// Takes up the cluster's tokens when their generations changed since
/// this host took them: whether it did. Nothing on SQLite.
pub fn follow(tokens: &Tokens, store: &Store) -> Result<bool, String> {
    let Some(shared) = store.shared_tokens() else {
        return Ok(false);
    };
    let seen = shared.token_generations().map_err(|e| e.to_string())?;
    if seen.is_none() || seen == tokens.generations() {
        return Ok(false);
    }
    let _one = tokens.changing.lock().unwrap_or_else(|p| p.into_inner());
    let Some(stored) = shared.cluster_tokens().map_err(|e| e.to_string())? else {
        return Ok(false);
    };
    let held = tokens.generations();
    let now = stored.generations();
    if held == Some(now) {
        return Ok(false);
    }
    let new = match held {
        Some((a, o)) => (a != now.0, o != now.1),
        None => (true, true),
    };
    take_up(tokens, &stored, new).map_err(|e| e.to_string())?;
    tracing::info!(
        agent_generation = now.0,
        operator_generation = now.1,
        by = stored
            .operator
            .rotated_by
            .as_deref()
            .or(stored.agent.rotated_by.as_deref())
            .unwrap_or("?"),
        "the cluster's tokens were rotated: this host now accepts the new ones only"
    );
    Ok(true)
}

/// On a store hosts share, follows the cluster's tokens until the daemon
/// stops: its task, or `None` on SQLite.
pub fn spawn_following(tokens: Arc<Tokens>, engine: Engine) -> Option<tokio::task::JoinHandle<()>> {
    engine.store().shared_tokens()?;
    let mut woken = engine.store().token_wakeups();
    Some(tokio::spawn(async move {
        let mut failing = false;
        loop {
            let wake = async {
                match woken.as_mut() {
                    Some(rx) => {
                        if rx.changed().await.is_err() {
                            // The store's listener is gone: the backstop only.
                            std::future::pending::<()>().await;
                        }
                    }
                    None => std::future::pending::<()>().await,
                }
            };
            tokio::select! {
                _ = wake => {}
                _ = tokio::time::sleep(BACKSTOP) => {}
            }
            if engine.is_stopping() {
                return;
            }
            let (t, e) = (tokens.clone(), engine.clone());
            match tokio::task::spawn_blocking(move || follow(&t, e.store())).await {
                Ok(Ok(_)) => failing = false,
                // Once per outage, not at every look.
                Ok(Err(why)) if !failing => {
                    failing = true;
                    tracing::warn!(cause = %why, "cannot follow the cluster's tokens now; trying again every few seconds");
                }
                Ok(Err(why)) => {
                    tracing::debug!(cause = %why, "still cannot follow the cluster's tokens");
                }
                Err(e) => tracing::warn!(error = %e, "the look at the cluster's tokens failed"),
            }
        }
    }))
}

/// Ends the page's logins each time the operator token is replaced (here
/// or, followed, on another host), until the daemon stops: a login lives
/// no longer than the token that opened it.
pub fn end_logins_on_rotation(tokens: &Tokens, logins: super::ui::Sessions) {
    let mut changes = tokens.operator_changes();
    tokio::spawn(async move {
        while changes.changed().await.is_ok() {
            logins.end_all();
            tracing::info!("the operator token was replaced: the page's logins ended");
        }
    });
}

/// Replaces the tokens `which` asks for: new random ones, stored in the
/// cluster first on PostgreSQL (then swapped and written to this host's
/// files), else written to the files then swapped. Refused (409
/// `tokens-configured`) for a token the configuration names a file for.
pub fn rotate(
    tokens: &Tokens,
    store: &Store,
    which: &wire::RotateTokens,
) -> Result<wire::TokensRotated, ApiError> {
    if !which.agent && !which.operator {
        return Err(ApiError::bad_request(
            "agent",
            "name at least one token to rotate (agent, operator)",
        ));
    }
    let files = tokens.files().clone();
    for (asked, configured, path, key) in [
        (
            which.agent,
            files.agent_configured,
            &files.agent,
            "agent_token_file",
        ),
        (
            which.operator,
            files.operator_configured,
            &files.operator,
            "operator_token_file",
        ),
    ] {
        if asked && configured {
            return Err(ApiError::new(
                StatusCode::CONFLICT,
                "tokens-configured",
                format!(
                    "the configuration names this token's file ([daemon] {key}: {}), which the daemon never writes; remove the setting to rotate it, or replace the file's token yourself and restart",
                    path.display()
                ),
            ));
        }
        if asked && let Some(e) = refusal(path) {
            return Err(ApiError::new(
                StatusCode::INTERNAL_SERVER_ERROR,
                "token-file",
                e.to_string(),
            ));
        }
    }
    let _one = tokens.changing.lock().unwrap_or_else(|p| p.into_inner());
    let agent = which.agent.then(fresh_token);
    let operator = which.operator.then(fresh_token);
    let failed = |e: TokenError| {
        ApiError::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            "token-file",
            format!("the new tokens are in force, but {e}"),
        )
    };
    let stored = match store.shared_tokens() {
        Some(shared) => {
            let mut new = Vec::new();
            if let Some(a) = &agent {
                new.push((TokenName::Agent, a.as_str()));
            }
            if let Some(o) = &operator {
                new.push((TokenName::Operator, o.as_str()));
            }
            let stored = shared
                .rotate_cluster_tokens(&new)
                .map_err(crate::engine::EngineError::from)?;
            let held = tokens.generations();
            let now = stored.generations();
            let changed = match held {
                Some((a, o)) => (a != now.0, o != now.1),
                None => (true, true),
            };
            take_up(tokens, &stored, changed).map_err(failed)?;
            Some(now)
        }
        None => {
            for (value, path, is_agent) in [
                (&agent, &files.agent, true),
                (&operator, &files.operator, false),
            ] {
                if let Some(v) = value {
                    write_token_file(path, v).map_err(|e| {
                        ApiError::new(
                            StatusCode::INTERNAL_SERVER_ERROR,
                            "token-file",
                            e.to_string(),
                        )
                    })?;
                    if is_agent {
                        tokens.swap(Some(v), None);
                    } else {
                        tokens.swap(None, Some(v));
                    }
                }
            }
            None
        }
    };
    let rotated: Vec<String> = [("agent", which.agent), ("operator", which.operator)]
        .into_iter()
        .filter(|(_, r)| *r)
        .map(|(n, _)| n.to_string())
        .collect();
    tracing::info!(rotated = %rotated.join(","), cluster = stored.is_some(), "the tokens were rotated");
    Ok(wire::TokensRotated {
        rotated,
        agent_token_file: files.agent.display().to_string(),
        operator_token_file: files.operator.display().to_string(),
        cluster: stored.is_some(),
        agent_generation: stored.map(|g| g.0),
        operator_generation: stored.map(|g| g.1),
    })
}

/// `POST /v1/tokens/rotate` (operator).
pub(super) async fn rotate_route(
    State(st): State<AppState>,
    _: Operator,
    JsonBody(which): JsonBody<wire::RotateTokens>,
) -> Result<Response, ApiError> {
    let (tokens, engine) = (st.tokens.clone(), st.engine.clone());
    let answer = tokio::task::spawn_blocking(move || {
        let answer = rotate(&tokens, engine.store(), &which)?;
        // Said once done (never a value): a person is told who can act
        // changed, as for a passkey.
        let said = engine.daemon_event(&Event::Tokens(TokenEvent::Rotated(Rotation {
            tokens: answer.rotated.clone(),
            cluster: answer.cluster,
            host: engine.store().host().map(|(id, _)| id),
        })));
        if let Err(e) = said {
            tracing::warn!(error = %e, "the tokens were rotated, but the event saying so could not be stored");
        }
        Ok::<_, ApiError>(answer)
    })
    .await
    .map_err(|e| {
        ApiError::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            "internal",
            format!("the rotation stopped: {e}"),
        )
    })??;
    Ok(axum::Json(answer).into_response())
}

#[cfg(test)]
#[path = "cluster_tokens_tests.rs"]
mod tests;

//! The client's calls about routines and standing policies: starting a
//! run (with its idempotency key, sent again when an answer is lost),
//! reading, cancelling and resolving runs, and the operator's standing
//! policies. It must never start a second run for one key, nor present
//! keys other than those of the sessions a run's steps name.

use super::{Client, ClientError, ClientResult, Method, START_ATTEMPTS, decode, segment};
use crate::wire::{
    ResolveRequest, Routine, RoutineList, RoutineRequest, StandingList, StandingPolicy,
    StandingRequest,
};

impl Client {
    /// Starts a routine: the operator any; the agent token one whose steps
    /// all run in existing sessions of its own (their keys are sent).
    /// The start carries an idempotency key (`key`, or a
    /// new one): a start whose answer was lost on the way (the daemon
    /// killed after it stored the run, a connection cut) is sent again, up
    /// to [`START_ATTEMPTS`] times, with the same key, and answers the run
    /// the first one started, never a second run.
    pub async fn start_routine_keyed(
        &self,
        spec: &RoutineRequest,
        key: Option<&str>,
    ) -> ClientResult<Routine> {
        let keys = self.keys_for(step_sessions(spec));
        let key = key.map_or_else(|| uuid::Uuid::new_v4().simple().to_string(), str::to_string);
        let body = serde_json::to_vec(spec)
            .map_err(|e| ClientError::Setup(format!("cannot encode the request: {e}")))?;
        let mut attempt = 1;
        loop {
            let sent = self
                .send_with(
                    Method::POST,
                    "/v1/routines",
                    Some(&self.token),
                    Some(body.clone()),
                    &keys,
                    &[("idempotency-key", &key)],
                )
                .await;
            match sent {
                Ok((status, bytes)) => return decode(status, &bytes, "/v1/routines"),
                Err(ClientError::Unreachable { .. }) if attempt < START_ATTEMPTS => {
                    attempt += 1;
                    tracing::warn!(
                        attempt,
                        "the routine's start got no answer; sending it again with its key"
                    );
                    tokio::time::sleep(std::time::Duration::from_millis(500)).await;
                }
                Err(e) => return Err(e),
            }
        }
    }

    /// Starts a routine as [`Client::start_routine_keyed`] does, with a new
    /// idempotency key.
    pub async fn start_routine(&self, spec: &RoutineRequest) -> ClientResult<Routine> {
        self.start_routine_keyed(spec, None).await
    }

    /// `GET /v1/routines/{id}`: a routine's run and its steps.
    pub async fn routine(&self, id: &str) -> ClientResult<Routine> {
        self.get(&format!("/v1/routines/{}", segment(id))).await
    }

    /// `GET /v1/routines`: the newest runs, newest first.
    pub async fn routines(&self) -> ClientResult<RoutineList> {
        self.get("/v1/routines").await
    }

    /// Adds a standing policy (operator).
    pub async fn add_standing(&self, req: &StandingRequest) -> ClientResult<StandingPolicy> {
        self.post("/v1/standing-policies", req).await
    }

    /// `GET /v1/standing-policies`: every standing policy, oldest first.
    pub async fn standing_policies(&self) -> ClientResult<StandingList> {
        self.get("/v1/standing-policies").await
    }

    /// Removes a standing policy (operator).
    pub async fn remove_standing(&self, id: &str) -> ClientResult<StandingPolicy> {
        self.post(
            &format!("/v1/standing-policies/{}/remove", segment(id)),
            &serde_json::json!({}),
        )
        .await
    }

    /// Cancels a run: the operator any; the agent token one whose steps
    /// all run in existing sessions of its own (their keys are sent, read
    /// from the run).
    pub async fn cancel_routine(&self, id: &str) -> ClientResult<Routine> {
        let keys = match &self.keyring {
            Some(_) => {
                let run = self.routine(id).await?;
                let spec = run.spec;
                self.keys_for(spec.iter().flat_map(step_sessions))
            }
            None => self.session_keys.clone(),
        };
        self.call_with_keys(
            Method::POST,
            &format!("/v1/routines/{}/cancel", segment(id)),
            Some(&serde_json::json!({})),
            &keys,
        )
        .await
    }

    /// Answers a step's escalation (operator).
    pub async fn resolve_routine(
        &self,
        id: &str,
        step: &str,
        response: &str,
    ) -> ClientResult<Routine> {
        self.post(
            &format!(
                "/v1/routines/{}/steps/{}/resolve",
                segment(id),
                segment(step)
            ),
            &ResolveRequest {
                response: response.to_string(),
            },
        )
        .await
    }
}

/// The existing sessions a routine's steps run in.
fn step_sessions(spec: &RoutineRequest) -> impl Iterator<Item = &str> {
    spec.steps.iter().filter_map(|s| match &s.session {
        crate::model::routine::SessionSpec::Existing(id) => Some(id.as_str()),
        crate::model::routine::SessionSpec::Acp { .. } => None,
    })
}

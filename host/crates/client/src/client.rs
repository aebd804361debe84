//! The typed client of the daemon's API: one method per route, taking and
//! returning the [`crate::wire`] types the server answers with. The CLI's
//! client commands, the whole-program tests and the benchmarks all go
//! through it (`send` is there for tests that must send what no typed
//! method would: a malformed body, a wrong token).
//!
//! It owns the transport (TCP, or a Unix socket for `unix:PATH`), the
//! bearer token, the session keys a call about a session presents (from
//! its [`Keyring`], where a registration's answered key is kept, and any
//! given explicitly), the paths and queries of the routes, and turning an error
//! answer into [`ClientError`]. It must never print, retry behind the
//! caller's back, or pick an exit code: that is the command line's job.

use crate::keyring::Keyring;
use crate::wire::{
    AckRequest, ErrorBody, EventPage, EventQuery, Health, NextEvent, PageQuery, Policy, PolicyDiff,
    PolicyPage, PolicyWait, RegisterRequest, Registered, ReportRequest, Reported, RotateTokens,
    Session, SessionPage, StartRequest, TokensRotated,
};
use percent_encoding::{AsciiSet, NON_ALPHANUMERIC, utf8_percent_encode};
use reqwest::Method;
use serde::Serialize;
use serde::de::DeserializeOwned;
use std::path::PathBuf;
use std::time::Duration;

/// Installs the process's TLS crypto provider (ring) for HTTPS clients;
/// idempotent. Call before building any `reqwest::Client`.
pub fn install_tls_provider() {
    let _ = rustls::crypto::ring::default_provider().install_default();
}

/// How long one call may take by default: above the API's longest
/// long-poll slice (55 s).
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(90);

/// Characters a path segment keeps as they are (RFC 3986 unreserved, and
/// `:` which session ids such as `claude:abc` hold).
const SEGMENT: &AsciiSet = &NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'_')
    .remove(b'.')
    .remove(b'~')
    .remove(b':');

/// Why a call failed: the daemon's error answer, or no answer it could use.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// The daemon answered with an error (`{"error": {...}}`).
    #[error("{message} (HTTP {status}, {code})")]
    Api {
        /// The answer's HTTP status (400, 403, 409, 503, ...).
        status: u16,
        /// The API's stable kebab-case error code (`invalid`,
        /// `session-key-required`).
        code: String,
        /// The daemon's message, for people.
        message: String,
        /// The request field at fault, when the daemon names one.
        field: Option<String>,
    },
    /// The daemon could not be reached, or the connection broke.
    #[error("cannot reach the daemon at {base}: {message}")]
    Unreachable {
        /// The daemon's address as the client was given it.
        base: String,
        /// What failed, with every cause reqwest gave.
        message: String,
    },
    /// The daemon answered something this client does not understand.
    #[error("the daemon's answer to {route} does not decode: {message}")]
    Decode {
        /// The route's path (without its query).
        route: String,
        /// Why the body does not decode (or the start of a body that is no
        /// API error).
        message: String,
    },
    /// The HTTP client could not be set up.
    #[error("cannot set up the HTTP client: {0}")]
    Setup(String),
}

impl ClientError {
    /// The daemon refused a long-poll because too many wait already (503
    /// `too-many-waiters`): poll again after a second.
    pub fn is_too_many_waiters(&self) -> bool {
        matches!(self, ClientError::Api { code, .. } if code == "too-many-waiters")
    }

    /// The API's error code, or `unreachable` / `bad-answer` / `client-setup`.
    pub fn code(&self) -> &str {
        match self {
            ClientError::Api { code, .. } => code,
            ClientError::Unreachable { .. } => "unreachable",
            ClientError::Decode { .. } => "bad-answer",
            ClientError::Setup(_) => "client-setup",
        }
    }

    /// The HTTP status of an error answer.
    pub fn status(&self) -> Option<u16> {
        match self {
            ClientError::Api { status, .. } => Some(*status),
            _ => None,
        }
    }
}

/// What every call of [`Client`] answers.
pub type ClientResult<T> = Result<T, ClientError>;

mod routines;

/// How many times a routine's start is sent when no answer comes back.
pub const START_ATTEMPTS: u32 = 5;

/// The most session keys a read presents (the daemon takes 64).
pub const READ_KEYS: usize = 48;

/// A client of one daemon, with one credential.
#[derive(Debug, Clone)]
pub struct Client {
    http: reqwest::Client,
    base: String,
    token: String,
    /// Read at each call instead, when set and readable (`with_token_file`).
    token_file: Option<PathBuf>,
    /// Where keys answered by registrations are kept and found.
    keyring: Option<Keyring>,
    /// Keys presented with every call (`GATEHOST_SESSION_KEY`).
    session_keys: Vec<String>,
}

impl Client {
    /// A client of the daemon at `server` (`http://127.0.0.1:PORT` or
    /// `unix:/path/to/socket`) using `token`.
    pub fn new(server: &str, token: impl Into<String>) -> ClientResult<Client> {
        Client::with_timeout(server, token, DEFAULT_TIMEOUT)
    }

    /// As [`Client::new`], with `timeout` for each call instead of
    /// [`DEFAULT_TIMEOUT`].
    pub(crate) fn with_timeout(
        server: &str,
        token: impl Into<String>,
        timeout: Duration,
    ) -> ClientResult<Client> {
        install_tls_provider();
        let server = server.trim().trim_end_matches('/');
        let mut builder = reqwest::Client::builder().timeout(timeout);
        let base = match server.strip_prefix("unix:") {
            Some(path) => {
                builder = builder.unix_socket(PathBuf::from(path));
                "http://localhost".to_string()
            }
            None => server.to_string(),
        };
        let http = builder
            .build()
            .map_err(|e| ClientError::Setup(e.to_string()))?;
        Ok(Client {
            http,
            base,
            token: token.into(),
            token_file: None,
            keyring: None,
            session_keys: Vec::new(),
        })
    }

    /// Reads the token from `file` at each call, so that a rotated token
    /// (`gatehost token rotate`, which rewrites it) is used at once; the
    /// token given is used while the file cannot be read.
    pub fn with_token_file(mut self, file: PathBuf) -> Client {
        self.token_file = Some(file);
        self
    }

    /// Keeps the keys registrations answer in `keyring`, and presents
    /// them on later calls about those sessions.
    pub fn with_keyring(mut self, keyring: Option<Keyring>) -> Client {
        self.keyring = keyring;
        self
    }

    /// Presents `keys` (session keys) with every call.
    pub fn with_session_keys(mut self, keys: Vec<String>) -> Client {
        self.session_keys = keys;
        self
    }

    /// The same client presenting, with every call, the keys kept for
    /// `sessions` too: reads about a session (its policies, their diffs,
    /// its events) need its key with the agent token.
    pub fn with_keys_for<'a>(&self, sessions: impl IntoIterator<Item = &'a str>) -> Client {
        let mut c = self.clone();
        c.session_keys = self.keys_for(sessions);
        c.session_keys.dedup();
        c
    }

    /// Whether this client holds a key for `session` (in its keyring, or
    /// given outright).
    pub fn holds_key(&self, session: &str) -> bool {
        !self.session_keys.is_empty()
            || self
                .keyring
                .as_ref()
                .is_some_and(|r| !r.get(session).is_empty())
    }

    /// The keys to present for a call about `sessions`: the given ones,
    /// then those kept for them.
    fn keys_for<'a>(&self, sessions: impl IntoIterator<Item = &'a str>) -> Vec<String> {
        let mut keys = self.session_keys.clone();
        if let Some(ring) = &self.keyring {
            keys.extend(sessions.into_iter().flat_map(|s| ring.get(s)));
        }
        keys
    }

    /// Keeps a key a registration answered; a key that cannot be kept is
    /// reported (the session is still registered; its key is lost).
    fn keep(&self, registered: &Registered) {
        if let (Some(ring), Some(key)) = (&self.keyring, &registered.session_key)
            && let Err(e) = ring.put(&registered.session.id, key)
        {
            tracing::error!(session = %registered.session.id, dir = %ring.dir().display(), error = %e, "cannot keep the session's key: later reports on it will be refused");
        }
    }

    /// The same daemon with another credential.
    pub fn with_token(&self, token: impl Into<String>) -> Client {
        Client {
            token: token.into(),
            token_file: None,
            ..self.clone()
        }
    }

    /// The daemon's base URL (`http://localhost` for a Unix socket).
    pub fn base(&self) -> &str {
        &self.base
    }

    /// One request as given (`token` `None`: no Authorization header),
    /// answering the status and the body as sent, error or not.
    pub async fn send(
        &self,
        method: Method,
        path_and_query: &str,
        token: Option<&str>,
        body: Option<Vec<u8>>,
    ) -> ClientResult<(u16, Vec<u8>)> {
        self.send_with(method, path_and_query, token, body, &[], &[])
            .await
    }

    /// As [`Client::send`], presenting `keys` (session keys).
    pub async fn send_with_keys(
        &self,
        method: Method,
        path_and_query: &str,
        token: Option<&str>,
        body: Option<Vec<u8>>,
        keys: &[String],
    ) -> ClientResult<(u16, Vec<u8>)> {
        self.send_with(method, path_and_query, token, body, keys, &[])
            .await
    }

    /// [`Client::send_with_keys`] with `headers` added.
    async fn send_with(
        &self,
        method: Method,
        path_and_query: &str,
        token: Option<&str>,
        body: Option<Vec<u8>>,
        keys: &[String],
        headers: &[(&str, &str)],
    ) -> ClientResult<(u16, Vec<u8>)> {
        let mut req = self
            .http
            .request(method, format!("{}{path_and_query}", self.base));
        for (name, value) in headers {
            req = req.header(*name, *value);
        }
        if let Some(t) = token {
            req = req.bearer_auth(t);
        }
        if !keys.is_empty() {
            req = req.header(crate::session_key::HEADER, keys.join(","));
        }
        if let Some(b) = body {
            req = req.header("content-type", "application/json").body(b);
        }
        let resp = req.send().await.map_err(|e| self.unreachable(&e))?;
        let status = resp.status().as_u16();
        let bytes = resp.bytes().await.map_err(|e| self.unreachable(&e))?;
        Ok((status, bytes.to_vec()))
    }

    /// One call with this client's token: the answer decoded as `T`, or
    /// the API's error.
    pub async fn call<T: DeserializeOwned>(
        &self,
        method: Method,
        path_and_query: &str,
        body: Option<&(impl Serialize + ?Sized)>,
    ) -> ClientResult<T> {
        self.call_with_keys(method, path_and_query, body, &self.session_keys)
            .await
    }

    async fn call_with_keys<T: DeserializeOwned>(
        &self,
        method: Method,
        path_and_query: &str,
        body: Option<&(impl Serialize + ?Sized)>,
        keys: &[String],
    ) -> ClientResult<T> {
        let body = body
            .map(serde_json::to_vec)
            .transpose()
            .map_err(|e| ClientError::Setup(format!("cannot encode the request: {e}")))?;
        let read = self.token_file.as_ref().and_then(|f| {
            let t = std::fs::read_to_string(f).ok()?;
            Some(t.trim().to_string()).filter(|t| !t.is_empty())
        });
        let token = read.as_deref().unwrap_or(&self.token);
        let (status, bytes) = self
            .send_with_keys(method, path_and_query, Some(token), body, keys)
            .await?;
        let route = path_and_query
            .split_once('?')
            .map_or(path_and_query, |(p, _)| p);
        decode(status, &bytes, route)
    }

    fn unreachable(&self, e: &reqwest::Error) -> ClientError {
        // reqwest's own text names the URL; its source says why.
        let mut message = e.to_string();
        let mut source = std::error::Error::source(e);
        while let Some(s) = source {
            message = format!("{message}: {s}");
            source = s.source();
        }
        ClientError::Unreachable {
            base: self.base.clone(),
            message,
        }
    }

    /// A read: with the keys given, those of the sessions kept most
    /// recently in the keyring ([`READ_KEYS`] at most in all): with the
    /// agent token, a session's words, policies and events are read only
    /// with its key (the daemon's `engine::reads`).
    async fn get<T: DeserializeOwned>(&self, path: &str) -> ClientResult<T> {
        let mut keys = self.session_keys.clone();
        if let Some(ring) = &self.keyring {
            for k in ring.recent(READ_KEYS) {
                if !keys.contains(&k) {
                    keys.push(k);
                }
            }
        }
        keys.truncate(READ_KEYS);
        self.call_with_keys(Method::GET, path, None::<&()>, &keys)
            .await
    }

    async fn post<T: DeserializeOwned>(
        &self,
        path: &str,
        body: &(impl Serialize + ?Sized),
    ) -> ClientResult<T> {
        self.call(Method::POST, path, Some(body)).await
    }

    /// `GET /v1/health`: whether the daemon answers, its version and the
    /// bus's head cursor (no token needed).
    pub async fn health(&self) -> ClientResult<Health> {
        self.get("/v1/health").await
    }

    /// Registers a session (or refreshes one, with its key); a key the
    /// answer carries is kept in the keyring. With a keyring and an id it
    /// holds no key for, the key is made here and kept before the request
    /// goes: if the answer is lost (the daemon killed after it stored the session), the
    /// next registration presents that key and is the same session's, not
    /// a session without a key for good.
    pub async fn register(&self, input: &RegisterRequest) -> ClientResult<Registered> {
        let mut input = input.clone();
        if let (Some(ring), Some(id), None) = (&self.keyring, &input.id, &input.session_key) {
            // A key kept from an earlier try (whose answer was lost, or
            // which never reached the daemon) is proposed again.
            input.session_key = match ring.get(id).into_iter().next() {
                Some(kept) => Some(kept),
                None => {
                    let key = crate::session_key::new();
                    match ring.put(id, &key) {
                        Ok(()) => Some(key),
                        Err(e) => {
                            tracing::warn!(session = %id, dir = %ring.dir().display(), error = %e, "cannot keep a session key before registering: the daemon's answer carries one");
                            None
                        }
                    }
                }
            };
        }
        let keys = self.keys_for(input.id.as_deref());
        let registered: Registered = self
            .call_with_keys(Method::POST, "/v1/sessions", Some(&input), &keys)
            .await?;
        self.keep(&registered);
        Ok(registered)
    }

    /// Starts a session (operator); its key is kept in the keyring.
    pub async fn start_session(&self, input: &StartRequest) -> ClientResult<Registered> {
        let registered: Registered = self.post("/v1/sessions/start", input).await?;
        self.keep(&registered);
        Ok(registered)
    }

    /// The operator's answer to an ACP session's escalated permission
    /// request.
    pub async fn answer_permission(
        &self,
        id: &str,
        request: &str,
        allow: bool,
    ) -> ClientResult<crate::wire::PermissionAnswered> {
        self.post(
            &format!(
                "/v1/sessions/{}/permissions/{}",
                segment(id),
                segment(request)
            ),
            &crate::wire::PermissionAnswer { allow },
        )
        .await
    }

    /// `GET /v1/sessions`: one page of sessions in registration order (with
    /// the agent token, a session's `lastMessage` and `notifyUrl` only when
    /// its key is presented).
    pub async fn sessions(&self, page: &PageQuery) -> ClientResult<SessionPage> {
        self.get(&format!("/v1/sessions?{}", query(page)?)).await
    }

    /// `GET /v1/sessions/{id}`: the session (with the agent token, its key
    /// must be presented).
    pub async fn session(&self, id: &str) -> ClientResult<Session> {
        self.get(&format!("/v1/sessions/{}", segment(id))).await
    }

    /// Reports on a session, presenting its key.
    pub async fn report(&self, id: &str, report: &ReportRequest) -> ClientResult<Reported> {
        let keys = self.keys_for([id]);
        self.call_with_keys(
            Method::POST,
            &format!("/v1/sessions/{}/report", segment(id)),
            Some(report),
            &keys,
        )
        .await
    }

    /// Long-polls the session's next event after `since` (default: now).
    pub async fn next_event(
        &self,
        id: &str,
        since: Option<i64>,
        timeout: Option<Duration>,
    ) -> ClientResult<NextEvent> {
        let mut q = Vec::new();
        if let Some(s) = since {
            q.push(("since", s.to_string()));
        }
        if let Some(t) = timeout {
            q.push(("timeout", t.as_millis().to_string()));
        }
        self.get(&format!(
            "/v1/sessions/{}/next-event?{}",
            segment(id),
            query(&q)?
        ))
        .await
    }

    /// Attaches a policy (agentproto `policy_attach` JSON; its
    /// `idempotencyKey` makes a retry answer the first attempt's policy).
    /// The keys of every session it (or its `next` chain) names are
    /// presented.
    pub async fn attach(&self, spec: &serde_json::Value) -> ClientResult<Policy> {
        let mut ids = Vec::new();
        named_sessions(spec, &mut ids);
        let keys = self.keys_for(ids.iter().map(String::as_str));
        self.call_with_keys(Method::POST, "/v1/policies", Some(spec), &keys)
            .await
    }

    /// `GET /v1/policies`: one page of policies in attach order (with the
    /// agent token, only those a presented key covers).
    pub async fn policies(&self, page: &PageQuery) -> ClientResult<PolicyPage> {
        self.get(&format!("/v1/policies?{}", query(page)?)).await
    }

    /// `GET /v1/policies/{id}`: the policy now (with the agent token, a
    /// member session's key must be presented).
    pub async fn policy(&self, id: &str) -> ClientResult<Policy> {
        self.get(&format!("/v1/policies/{}", segment(id))).await
    }

    /// Long-polls until the policy settles or awaits an ack, or `timeout`.
    pub async fn wait_policy(&self, id: &str, timeout: Duration) -> ClientResult<PolicyWait> {
        self.get(&format!(
            "/v1/policies/{}/wait?timeout={}",
            segment(id),
            timeout.as_millis()
        ))
        .await
    }

    /// Cancels a policy (operator token) in any state but `done` and
    /// `cancelled`; a running gate is killed.
    pub async fn cancel(&self, id: &str) -> ClientResult<Policy> {
        self.post(&format!("/v1/policies/{}/cancel", segment(id)), &())
            .await
    }

    /// Approve or reject; an approval with `tree` holds only while that is
    /// the policy's snapshot's tree; a reject's `comment` reaches the agent
    /// as its nudge.
    pub async fn ack(
        &self,
        id: &str,
        approve: bool,
        tree: Option<&str>,
        comment: Option<&str>,
    ) -> ClientResult<Policy> {
        self.post(
            &format!("/v1/policies/{}/ack", segment(id)),
            &AckRequest {
                approve,
                tree: tree.map(str::to_string),
                comment: comment.map(str::to_string),
                passkey: None,
            },
        )
        .await
    }

    /// Request changes: `comments` on lines of the diff of `tree` reach
    /// the agent as its nudge (operator token).
    pub async fn request_changes(
        &self,
        id: &str,
        tree: &str,
        comments: Vec<crate::wire::LineComment>,
    ) -> ClientResult<Policy> {
        self.post(
            &format!("/v1/policies/{}/request-changes", segment(id)),
            &crate::wire::RequestChanges {
                tree: tree.to_string(),
                comments,
            },
        )
        .await
    }

    /// A one-time login link for the web page (operator token), landing
    /// on `policy`'s page when given (the inbox otherwise).
    pub async fn ui_link(&self, policy: Option<&str>) -> ClientResult<crate::wire::UiLink> {
        let body = crate::wire::UiLinkRequest {
            policy: policy.map(str::to_string),
        };
        self.post("/v1/ui/link", &body).await
    }

    /// Replaces the daemon's tokens (operator token): the answer names
    /// their files, never a value.
    pub async fn rotate_tokens(&self, which: &RotateTokens) -> ClientResult<TokensRotated> {
        self.post("/v1/tokens/rotate", which).await
    }

    /// One page of the patch a policy commits, from file index `from`.
    pub async fn policy_diff(&self, id: &str, from: usize) -> ClientResult<PolicyDiff> {
        self.get(&format!("/v1/policies/{}/diff?from={from}", segment(id)))
            .await
    }

    /// `GET /v1/events`: one page of events after `q.since` (a long-poll when
    /// `q.wait` is given).
    pub async fn events(&self, q: &EventQuery) -> ClientResult<EventPage> {
        self.get(&format!("/v1/events?{}", query(q)?)).await
    }
}

/// The session ids a policy spec names (`sessionId`, `sessionIds`, a
/// session reviewer, and those of its `next` chain), read from the spec
/// parsed as the daemon parses it. A spec that does not parse names none:
/// the daemon refuses it, naming the field, before it looks at any key.
pub fn named_sessions(spec: &serde_json::Value, out: &mut Vec<String>) {
    let mut body = spec.clone();
    if let Some(o) = body.as_object_mut() {
        o.remove("idempotencyKey");
    }
    let Ok(input) = crate::wire::parse_attach(body) else {
        return;
    };
    let mut at = Some(&input);
    while let Some(p) = at {
        out.extend(p.session_id.iter().cloned());
        out.extend(p.session_ids.iter().flatten().cloned());
        // A session reviewer is prompted: acting on it takes its key.
        if let Some(crate::wire::Reviewer::Session(r)) = p.review.as_ref().map(|r| &r.reviewer) {
            out.push(r.session.clone());
        }
        at = p.next.as_deref();
    }
    out.sort();
    out.dedup();
}

fn decode<T: DeserializeOwned>(status: u16, bytes: &[u8], route: &str) -> ClientResult<T> {
    if (200..300).contains(&status) {
        return serde_json::from_slice(bytes).map_err(|e| ClientError::Decode {
            route: route.to_string(),
            message: e.to_string(),
        });
    }
    match serde_json::from_slice::<ErrorBody>(bytes) {
        Ok(ErrorBody { error }) => Err(ClientError::Api {
            status,
            code: error.code,
            message: error.message,
            field: error.field,
        }),
        Err(_) => Err(ClientError::Decode {
            route: route.to_string(),
            message: format!(
                "HTTP {status} with a body that is not an API error: {}",
                String::from_utf8_lossy(&bytes[..bytes.len().min(200)])
            ),
        }),
    }
}

/// A path segment, percent-encoded.
pub fn segment(s: &str) -> String {
    utf8_percent_encode(s, SEGMENT).to_string()
}

fn query(q: &impl Serialize) -> ClientResult<String> {
    serde_urlencoded::to_string(q)
        .map_err(|e| ClientError::Setup(format!("cannot encode the query: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn segments_and_queries_are_encoded() {
        assert_eq!(segment("claude:a b/c"), "claude:a%20b%2Fc");
        let q = PageQuery {
            limit: Some(5),
            status: Some("blocked,awaiting-ack".into()),
            ..Default::default()
        };
        assert_eq!(
            query(&q).expect("query"),
            "limit=5&status=blocked%2Cawaiting-ack"
        );
        assert_eq!(query(&EventQuery::default()).expect("empty"), "");
    }

    #[test]
    fn an_error_answer_decodes_to_its_code_and_field() {
        let body = br#"{"error": {"code": "invalid", "message": "kind: nope", "field": "kind"}}"#;
        let e = decode::<Health>(400, body, "/v1/x").expect_err("an error");
        assert_eq!(e.code(), "invalid");
        assert_eq!(e.status(), Some(400));
        assert!(matches!(e, ClientError::Api { field: Some(ref f), .. } if f == "kind"));
        let e = decode::<Health>(502, b"<html>", "/v1/x").expect_err("not JSON");
        assert_eq!(e.code(), "bad-answer");
    }
}

#[cfg(test)]
#[path = "health_tests.rs"]
mod health_tests;

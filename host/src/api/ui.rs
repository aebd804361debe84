//! The operator's web page (`/ui/`) and its login. The page's files are
//! embedded in the binary (`host/ui/`: plain HTML, CSS and JavaScript —
//! `app.js` the page, `diff.js` the diff's unified and split views,
//! `keys.js` its keyboard, `inbox.js` the inbox, `passkeys.js` the
//! passkeys' panel and ceremonies — no
//! CDN, works offline) and served with a strict Content-Security-Policy
//! (no inline script), `X-Frame-Options: DENY` and `nosniff`.
//!
//! Login: `POST /ui/login {token}` exchanges the operator token (never the
//! agent's: 403) for a session cookie (random, HttpOnly, SameSite=Strict,
//! expiring after [`SESSION_TTL`]; only its SHA-256 is kept, in memory, so
//! a restart logs the page out) and a CSRF token. The page's JSON calls
//! then use the existing `/v1` routes with the cookie instead of a bearer
//! token, and every one of them, reads included, also needs the CSRF
//! token in `X-CSRF-Token`: a browser sends the cookie to every port of
//! `localhost` (cookies ignore ports), so a dev server on another port
//! receives it on the operator's visits; the token is kept by the page in
//! its `localStorage`, which only the page's exact origin (scheme, host
//! and port) can read (and each of its tabs: a deep link opened in a new
//! tab needs no login while the cookie lives), so the cookie alone
//! authorises nothing. A
//! state-changing call (any method but GET/HEAD) also needs a same-origin
//! request (`Origin` equal to the daemon's own `Host`, and
//! `Sec-Fetch-Site`, when sent, `same-origin`). The bearer-token API is
//! unchanged.
//!
//! A one-time login link (`gatehost ui`): `POST /v1/ui/link` (operator
//! only) makes a random code, good once and for [`LINK_TTL`] (only its
//! SHA-256 is kept, in memory, with the policy whose page it lands on, if
//! any); `GET /ui/login?code=…` spends it for a login cookie and redirects
//! to the page, the CSRF token (and the policy) in the URL's fragment
//! (never sent to a server; the page reads it and drops the token from the
//! address bar). A used, expired or unknown code is refused. This module
//! owns the page and the cookie sessions; it must never change a policy
//! itself (the `/v1` routes do).

use super::{ApiError, ApiResult, AppState, JsonBody, Role};
use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, header};
use axum::response::{IntoResponse, Response};
use sha2::{Digest, Sha256};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// How long a page login lasts.
pub const SESSION_TTL: Duration = Duration::from_secs(12 * 3600);
/// The session cookie's name.
pub const COOKIE: &str = "gatehost_session";
/// The header carrying the CSRF token.
pub const CSRF_HEADER: &str = "x-csrf-token";
/// The most page logins held at once (the oldest is dropped past it).
const MAX_SESSIONS: usize = 64;
/// How long a one-time login link's code can be spent.
pub const LINK_TTL: Duration = Duration::from_secs(120);
/// The most unspent login codes held at once (the oldest is dropped).
const MAX_CODES: usize = 16;

const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'";

const INDEX_HTML: &str = include_str!("../../ui/index.html");
const APP_JS: &str = include_str!("../../ui/app.js");
const DIFF_JS: &str = include_str!("../../ui/diff.js");
const KEYS_JS: &str = include_str!("../../ui/keys.js");
const INBOX_JS: &str = include_str!("../../ui/inbox.js");
const PASSKEYS_JS: &str = include_str!("../../ui/passkeys.js");
const APP_CSS: &str = include_str!("../../ui/app.css");

struct Login {
    csrf: [u8; 32],
    expires: Instant,
}

/// The page's logins, by the SHA-256 of their cookie, and the unspent
/// one-time login codes, by theirs (with when they expire).
#[derive(Clone, Default)]
pub struct Sessions {
    inner: Arc<Mutex<HashMap<[u8; 32], Login>>>,
    codes: Arc<Mutex<HashMap<[u8; 32], Code>>>,
}

/// An unspent login code: when it expires, and the policy whose page it
/// lands on (none: the inbox).
struct Code {
    expires: Instant,
    policy: Option<String>,
}

fn digest(s: &str) -> [u8; 32] {
    Sha256::digest(s.as_bytes()).into()
}

/// Equal in time independent of where the digests differ.
fn same_digest(a: &[u8; 32], b: &[u8; 32]) -> bool {
    a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

fn fresh_secret() -> String {
    format!(
        "{}{}",
        uuid::Uuid::new_v4().simple(),
        uuid::Uuid::new_v4().simple()
    )
}

fn forbidden(code: &'static str, message: &'static str) -> ApiError {
    ApiError::new(StatusCode::FORBIDDEN, code, message)
}

/// The value of cookie `name` in the request's `Cookie` headers.
pub fn cookie_value<'a>(headers: &'a HeaderMap, name: &str) -> Option<&'a str> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|kv| kv.trim().split_once('='))
        .find(|(k, _)| *k == name)
        .map(|(_, v)| v)
}

/// Whether a state-changing request comes from the daemon's own page:
/// `Origin` must be `http://<Host>`, and `Sec-Fetch-Site`, when present,
/// `same-origin`. A request with no `Origin` is refused (browsers send it
/// on every POST).
pub fn same_origin(headers: &HeaderMap) -> bool {
    let get = |h: header::HeaderName| headers.get(h).and_then(|v| v.to_str().ok());
    let site_ok = match headers.get("sec-fetch-site").and_then(|v| v.to_str().ok()) {
        None => true,
        Some(s) => s == "same-origin",
    };
    match (get(header::ORIGIN), get(header::HOST)) {
        (Some(origin), Some(host)) => site_ok && origin == format!("http://{host}"),
        _ => false,
    }
}

impl Sessions {
    /// A new one-time login code, good for `ttl`, landing on `policy`'s
    /// page when spent.
    fn new_code(&self, policy: Option<String>, ttl: Duration) -> String {
        let code = fresh_secret();
        let mut codes = self.codes.lock().unwrap_or_else(|p| p.into_inner());
        let now = Instant::now();
        codes.retain(|_, c| c.expires > now);
        if codes.len() >= MAX_CODES
            && let Some(oldest) = codes.iter().min_by_key(|(_, c)| c.expires).map(|(k, _)| *k)
        {
            codes.remove(&oldest);
        }
        codes.insert(
            digest(&code),
            Code {
                expires: now + ttl,
                policy,
            },
        );
        code
    }

    /// Spends `code`: `Some(where it lands)` once for a code made by
    /// [`Self::new_code`] and not yet expired; a spent code is gone
    /// whatever the answer.
    fn spend_code(&self, code: &str) -> Option<Option<String>> {
        let mut codes = self.codes.lock().unwrap_or_else(|p| p.into_inner());
        codes
            .remove(&digest(code))
            .filter(|c| c.expires > Instant::now())
            .map(|c| c.policy)
    }

    /// Ends every login and every unspent login code: the operator token
    /// that opened them was replaced (`cluster_tokens`).
    pub fn end_all(&self) {
        self.inner.lock().unwrap_or_else(|p| p.into_inner()).clear();
        self.codes.lock().unwrap_or_else(|p| p.into_inner()).clear();
    }

    /// A new login: the cookie value and the CSRF token.
    fn open(&self) -> (String, String) {
        let (cookie, csrf) = (fresh_secret(), fresh_secret());
        let mut map = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        let now = Instant::now();
        map.retain(|_, l| l.expires > now);
        if map.len() >= MAX_SESSIONS
            && let Some(oldest) = map.iter().min_by_key(|(_, l)| l.expires).map(|(k, _)| *k)
        {
            map.remove(&oldest);
        }
        map.insert(
            digest(&cookie),
            Login {
                csrf: digest(&csrf),
                expires: now + SESSION_TTL,
            },
        );
        (cookie, csrf)
    }

    /// The operator, if the request carries a live login cookie and the
    /// login's CSRF token (and, for a state-changing `method`, a same
    /// origin); `None` when it carries no cookie at all.
    pub fn role(&self, method: &Method, headers: &HeaderMap) -> Option<Result<Role, ApiError>> {
        let cookie = cookie_value(headers, COOKIE)?;
        let map = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        let Some(login) = map
            .get(&digest(cookie))
            .filter(|l| l.expires > Instant::now())
        else {
            return Some(Err(ApiError::new(
                StatusCode::UNAUTHORIZED,
                "unauthorized",
                "the page's login expired or is unknown: log in again",
            )));
        };
        let writes = !(method == Method::GET || method == Method::HEAD);
        if writes && !same_origin(headers) {
            return Some(Err(forbidden(
                "cross-origin",
                "a state-changing request with the page's cookie must come from the page itself",
            )));
        }
        // Every method, reads included: a browser sends the cookie to every
        // port of the host, and only the page's exact origin holds the token.
        let csrf_ok = headers
            .get(CSRF_HEADER)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|t| same_digest(&digest(t), &login.csrf));
        Some(if csrf_ok {
            Ok(Role::Operator)
        } else {
            Err(forbidden(
                "csrf",
                "missing or wrong X-CSRF-Token for the page's login (the cookie alone authorises nothing, not even a read)",
            ))
        })
    }
}

fn secured(mut r: Response) -> Response {
    let h = r.headers_mut();
    h.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(CSP),
    );
    h.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    h.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    h.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("no-referrer"),
    );
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    r
}

fn file(kind: &'static str, body: &'static str) -> Response {
    secured(([(header::CONTENT_TYPE, kind)], body).into_response())
}

pub(super) async fn index() -> Response {
    file("text/html; charset=utf-8", INDEX_HTML)
}

pub(super) async fn app_js() -> Response {
    file("text/javascript; charset=utf-8", APP_JS)
}

pub(super) async fn diff_js() -> Response {
    file("text/javascript; charset=utf-8", DIFF_JS)
}

pub(super) async fn keys_js() -> Response {
    file("text/javascript; charset=utf-8", KEYS_JS)
}

pub(super) async fn inbox_js() -> Response {
    file("text/javascript; charset=utf-8", INBOX_JS)
}

pub(super) async fn passkeys_js() -> Response {
    file("text/javascript; charset=utf-8", PASSKEYS_JS)
}

pub(super) async fn app_css() -> Response {
    file("text/css; charset=utf-8", APP_CSS)
}

#[derive(Debug, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct LoginRequest {
    token: String,
}

/// The `Set-Cookie` value of a new login.
fn session_cookie(st: &AppState) -> Result<(HeaderValue, String), ApiError> {
    let (cookie, csrf) = st.ui.open();
    let set = format!(
        "{COOKIE}={cookie}; HttpOnly; SameSite=Strict; Path=/; Max-Age={}",
        SESSION_TTL.as_secs()
    );
    let v = HeaderValue::from_str(&set).map_err(|e| {
        tracing::error!("cookie: {e}");
        ApiError::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            "cookie",
            "cannot build the cookie",
        )
    })?;
    Ok((v, csrf))
}

/// `POST /v1/ui/link {policy?}` (operator): a one-time login link, `{url,
/// path, expiresInSeconds}`; `url` is on the page's address on this
/// machine (`AppState::page`: `localhost` only when the daemon holds both
/// of its addresses), never on one taken from the request. With `policy`
/// (which must exist: 404) the link lands on that policy's page; the
/// target is kept with the code, never carried in the link.
pub(super) async fn link(
    State(st): State<AppState>,
    _: super::Operator,
    super::extract::OptionalJsonBody(b): super::extract::OptionalJsonBody<
        crate::wire::UiLinkRequest,
    >,
) -> ApiResult {
    let policy = b.unwrap_or_default().policy;
    if let Some(id) = &policy {
        st.engine.policy(id)?;
    }
    // (A test build's hook may shorten it.)
    let ttl = crate::test_hooks::login_link_ttl().unwrap_or(LINK_TTL);
    let code = st.ui.new_code(policy, ttl);
    let path = format!("/ui/login?code={code}");
    tracing::info!("a one-time login link for the page was made");
    super::ok(crate::wire::UiLink {
        url: format!("{}{path}", st.page),
        path,
        expires_in_seconds: ttl.as_secs(),
    })
}

/// `GET /ui/login?code=…`: a one-time code for a login cookie, then to the
/// page (the CSRF token in the fragment). A used, expired or unknown code
/// is refused (403, a line for a person).
pub(super) async fn login_link(
    State(st): State<AppState>,
    super::query::Query(q): super::query::Query<super::query::LoginLinkQuery>,
) -> ApiResult {
    let Some(lands) = q.code.and_then(|c| st.ui.spend_code(&c)) else {
        tracing::warn!("a login link was refused: used, expired or unknown");
        let body = "This login link was already used, has expired (links last 2 minutes) or is unknown: run `gatehost ui` again.\n";
        return Ok(secured(
            (
                StatusCode::FORBIDDEN,
                [(header::CONTENT_TYPE, "text/plain; charset=utf-8")],
                body,
            )
                .into_response(),
        ));
    };
    let (cookie, csrf) = session_cookie(&st)?;
    // The policy's page after the login: its id encoded, in the fragment
    // the page reads (never a URL of another place).
    let to = match lands {
        Some(id) => format!(
            "/ui/#login={csrf}&policy={}",
            crate::notify::percent_encoded(&id)
        ),
        None => format!("/ui/#login={csrf}"),
    };
    let mut r = (StatusCode::SEE_OTHER, [(header::LOCATION, to)]).into_response();
    r.headers_mut().insert(header::SET_COOKIE, cookie);
    Ok(secured(r))
}

/// `POST /ui/login {token}`: the operator token for a cookie and a CSRF
/// token. Same-origin only; the agent token is refused.
pub(super) async fn login(
    State(st): State<AppState>,
    headers: HeaderMap,
    JsonBody(b): JsonBody<LoginRequest>,
) -> ApiResult {
    if !same_origin(&headers) {
        return Err(forbidden(
            "cross-origin",
            "log in from the daemon's own page",
        ));
    }
    let mut bearer = HeaderMap::new();
    let value = HeaderValue::from_str(&format!("Bearer {}", b.token.trim()))
        .map_err(|_| ApiError::bad_request("token", "must be printable ASCII"))?;
    bearer.insert(header::AUTHORIZATION, value);
    match st.tokens.role(&bearer)? {
        Role::Agent => Err(forbidden(
            "operator-only",
            "the agent token cannot log in to the page",
        )),
        Role::Operator => {
            let (cookie, csrf) = session_cookie(&st)?;
            let mut r = axum::Json(crate::wire::UiLogin { csrf }).into_response();
            r.headers_mut().insert(header::SET_COOKIE, cookie);
            Ok(secured(r))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.append(*k, v.parse().expect("header"));
        }
        h
    }

    #[test]
    fn same_origin_needs_the_origin_of_the_host_and_no_cross_site_fetch() {
        let host = ("host", "127.0.0.1:7000");
        assert!(same_origin(&headers(&[
            host,
            ("origin", "http://127.0.0.1:7000")
        ])));
        assert!(same_origin(&headers(&[
            host,
            ("origin", "http://127.0.0.1:7000"),
            ("sec-fetch-site", "same-origin")
        ])));
        for bad in [
            vec![host],
            vec![host, ("origin", "http://evil.example")],
            vec![host, ("origin", "http://127.0.0.1:7000.evil")],
            vec![host, ("origin", "null")],
            vec![
                host,
                ("origin", "http://127.0.0.1:7000"),
                ("sec-fetch-site", "cross-site"),
            ],
        ] {
            assert!(!same_origin(&headers(&bad)), "{bad:?}");
        }
    }

    #[test]
    fn a_login_code_is_spent_once_and_only_if_it_was_made() {
        let s = Sessions::default();
        let code = s.new_code(None, LINK_TTL);
        assert_eq!(s.spend_code("not-a-code"), None);
        assert_eq!(s.spend_code(&code), Some(None), "first use");
        assert_eq!(s.spend_code(&code), None, "second use");
        let to = s.new_code(Some("pol_1".into()), LINK_TTL);
        assert_eq!(s.spend_code(&to), Some(Some("pol_1".into())), "lands");
        let expired = s.new_code(None, LINK_TTL);
        s.codes.lock().expect("codes").insert(
            digest(&expired),
            Code {
                expires: Instant::now(),
                policy: None,
            },
        );
        assert_eq!(s.spend_code(&expired), None, "expired");
    }

    #[test]
    fn a_login_cookie_needs_its_csrf_token_for_reads_and_also_the_origin_for_writes() {
        let s = Sessions::default();
        let (cookie, csrf) = s.open();
        let c = format!("a=b; {COOKIE}={cookie}");
        let base = [("host", "h:1"), ("cookie", c.as_str())];
        // A read with the cookie alone (what a server on another port of
        // the same host receives) is refused; with the token it works.
        assert!(matches!(
            s.role(&Method::GET, &headers(&base)),
            Some(Err(_))
        ));
        let wrong = [("host", "h:1"), ("cookie", c.as_str()), (CSRF_HEADER, "x")];
        assert!(matches!(
            s.role(&Method::GET, &headers(&wrong)),
            Some(Err(_))
        ));
        let read = [
            ("host", "h:1"),
            ("cookie", c.as_str()),
            (CSRF_HEADER, &csrf),
        ];
        assert!(matches!(
            s.role(&Method::GET, &headers(&read)),
            Some(Ok(Role::Operator))
        ));
        assert!(matches!(
            s.role(&Method::POST, &headers(&base)),
            Some(Err(_))
        ));
        let mut h = headers(&base);
        h.insert("origin", "http://h:1".parse().expect("h"));
        assert!(matches!(s.role(&Method::POST, &h), Some(Err(_))), "no csrf");
        h.insert(CSRF_HEADER, "wrong".parse().expect("h"));
        assert!(
            matches!(s.role(&Method::POST, &h), Some(Err(_))),
            "wrong csrf"
        );
        h.insert(CSRF_HEADER, csrf.parse().expect("h"));
        assert!(matches!(
            s.role(&Method::POST, &h),
            Some(Ok(Role::Operator))
        ));
        h.insert("origin", "http://other:1".parse().expect("h"));
        assert!(matches!(s.role(&Method::POST, &h), Some(Err(_))), "origin");
        let unknown = headers(&[("cookie", "gatehost_session=nope")]);
        assert!(matches!(s.role(&Method::GET, &unknown), Some(Err(_))));
        assert!(s.role(&Method::GET, &headers(&[])).is_none());
    }
}

//! The API's query strings, typed: each route's parameters parsed once, at
//! the edge, into a struct its handler takes as an extractor
//! (`Query<EventQuery>`), with the one 400 that names the parameter when a
//! value is wrong. Unknown parameters are ignored, as they always were.
//!
//! It owns the parameters' names, defaults and bounds; it must never read
//! the store or decide who may read what (the engine's `reads` does).

use super::{ApiError, MAX_WAIT};
use crate::bus::full_type;
use crate::store::PolicyStatus;
use crate::wire::parse_duration;
use axum::extract::FromRequestParts;
use axum::http::request::Parts;
use std::collections::HashMap;
use std::time::Duration;

/// Default and largest page of a list.
pub const DEFAULT_LIMIT: usize = 50;
pub const MAX_LIMIT: usize = 1000;
/// Default long-poll slice.
pub const DEFAULT_WAIT: Duration = Duration::from_secs(25);

/// A route's query, parsed into `T` (a 400 naming the parameter when it
/// does not parse).
pub struct Query<T>(pub T);

/// A query type: made from the raw parameters.
pub trait FromParams: Sized {
    fn from_params(q: &Params) -> Result<Self, ApiError>;
}

impl<S: Send + Sync, T: FromParams> FromRequestParts<S> for Query<T> {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, ApiError> {
        let raw = parts.uri.query().unwrap_or("");
        let map: HashMap<String, String> = serde_urlencoded::from_str(raw).map_err(|e| {
            ApiError::bad_request("query", format!("the query string does not parse ({e})"))
        })?;
        T::from_params(&Params(map)).map(Query)
    }
}

/// The raw parameters of one query string (the last of a repeated name).
pub struct Params(HashMap<String, String>);

impl Params {
    #[cfg(test)]
    fn of(pairs: &[(&str, &str)]) -> Params {
        Params(
            pairs
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        )
    }

    fn get(&self, name: &str) -> Option<&str> {
        self.0.get(name).map(String::as_str)
    }

    fn int(&self, name: &str) -> Result<Option<i64>, ApiError> {
        self.get(name)
            .map(|v| {
                v.trim()
                    .parse::<i64>()
                    .map_err(|_| ApiError::bad_request(name, format!("'{v}' is not an integer")))
            })
            .transpose()
    }

    /// A comma-separated list (blanks dropped).
    fn list(&self, name: &str) -> Vec<String> {
        self.get(name)
            .map(|v| {
                v.split(',')
                    .map(str::trim)
                    .filter(|s| !s.is_empty())
                    .map(str::to_string)
                    .collect()
            })
            .unwrap_or_default()
    }

    /// A duration (`1500`, `25s`, `2m`), at most [`MAX_WAIT`].
    fn duration(&self, name: &str, default: Duration) -> Result<Duration, ApiError> {
        match self.get(name) {
            None => Ok(default),
            Some(v) => {
                let d = parse_duration(v).map_err(|m| ApiError::bad_request(name, m))?;
                Ok(d.min(MAX_WAIT))
            }
        }
    }

    /// A cursor: absent, or at least 0.
    fn cursor(&self, name: &str) -> Result<Option<i64>, ApiError> {
        match self.int(name)? {
            Some(c) if c < 0 => Err(ApiError::bad_request(name, "a cursor is at least 0")),
            c => Ok(c),
        }
    }

    /// A page size: 1 to `max`, `default` when absent.
    fn limit(&self, default: usize, max: usize) -> Result<usize, ApiError> {
        match self.int("limit")? {
            None => Ok(default),
            Some(n) if n >= 1 && n as u64 <= max as u64 => Ok(n as usize),
            Some(_) => Err(ApiError::bad_request(
                "limit",
                format!("must be between 1 and {max}"),
            )),
        }
    }
}

/// `limit` and `cursor` of a paged list (`nextCursor` continues it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PageQuery {
    /// Where the page continues (a list's `nextCursor`), 0 if absent.
    pub cursor: i64,
    /// 1 to [`MAX_LIMIT`], [`DEFAULT_LIMIT`] when absent.
    pub limit: usize,
}

impl FromParams for PageQuery {
    fn from_params(q: &Params) -> Result<Self, ApiError> {
        Ok(PageQuery {
            limit: q.limit(DEFAULT_LIMIT, MAX_LIMIT)?,
            cursor: q.cursor("cursor")?.unwrap_or(0),
        })
    }
}

/// `GET /v1/policies`: `status` (a list), `order` (`oldest`, the default,
/// or `newest`) and the page.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PolicyListQuery {
    pub statuses: Vec<PolicyStatus>,
    pub newest_first: bool,
    pub page: PageQuery,
    /// `counts=true`: the answer also counts every policy by status
    /// (operator only).
    pub counts: bool,
    /// `q`, `agent`, `repo`, `host`: what the page keeps.
    pub filter: super::policy_filter::PolicyFilter,
}

impl FromParams for PolicyListQuery {
    fn from_params(q: &Params) -> Result<Self, ApiError> {
        let statuses = q
            .list("status")
            .iter()
            .map(|s| {
                PolicyStatus::parse(s).ok_or_else(|| {
                    ApiError::bad_request("status", format!("'{s}' is not a policy status"))
                })
            })
            .collect::<Result<_, _>>()?;
        let newest_first = match q.get("order") {
            None | Some("oldest") => false,
            Some("newest") => true,
            Some(o) => {
                return Err(ApiError::bad_request(
                    "order",
                    format!("'{o}' is neither \"oldest\" nor \"newest\""),
                ));
            }
        };
        let counts = match q.get("counts") {
            None | Some("false") => false,
            Some("true") => true,
            Some(o) => {
                return Err(ApiError::bad_request(
                    "counts",
                    format!("'{o}' is neither true nor false"),
                ));
            }
        };
        // Each filter: its text trimmed, at most 200 bytes, none when empty.
        let text = |name: &str| -> Result<Option<String>, ApiError> {
            match q.get(name).map(str::trim) {
                None | Some("") => Ok(None),
                Some(t) if t.len() > 200 => Err(ApiError::bad_request(name, "at most 200 bytes")),
                Some(t) => Ok(Some(t.to_string())),
            }
        };
        let filter = super::policy_filter::PolicyFilter {
            q: text("q")?.map(|t| t.to_lowercase()),
            agent: text("agent")?,
            repo: text("repo")?,
            host: text("host")?,
        };
        Ok(PolicyListQuery {
            statuses,
            newest_first,
            page: PageQuery::from_params(q)?,
            counts,
            filter,
        })
    }
}

/// Which events: `types` (full or short names, an unknown one a 400
/// naming the known ones), `session` and `policy` (lists), and `host`
/// (one host id: the events that host wrote; a name that cannot be a
/// host id is a 400).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct EventSelect {
    pub types: Vec<String>,
    pub sessions: Vec<String>,
    pub policies: Vec<String>,
    pub host: Option<String>,
}

impl EventSelect {
    /// The store's filter of these events after `since`, at most `limit`.
    pub fn filter(self, since: i64, limit: usize) -> crate::store::EventFilter {
        crate::store::EventFilter {
            since,
            types: self.types,
            session_ids: self.sessions,
            policy_ids: self.policies,
            host: self.host,
            limit,
        }
    }
}

impl FromParams for EventSelect {
    fn from_params(q: &Params) -> Result<Self, ApiError> {
        let types = q
            .list("types")
            .iter()
            .map(|t| {
                full_type(t)
                    .map(str::to_string)
                    .map_err(|m| ApiError::bad_request("types", m))
            })
            .collect::<Result<_, _>>()?;
        let host = match q.get("host").map(str::trim) {
            None | Some("") => None,
            Some(h) => {
                crate::store::HostSpec::check_id(h)
                    .map_err(|m| ApiError::bad_request("host", m))?;
                Some(h.to_string())
            }
        };
        Ok(EventSelect {
            types,
            sessions: q.list("session"),
            policies: q.list("policy"),
            host,
        })
    }
}

/// `GET /v1/events`: after `since` (0 when absent), at most `limit`,
/// waiting up to `wait` (none when absent) for the first.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EventQuery {
    pub since: i64,
    pub limit: usize,
    pub select: EventSelect,
    pub wait: Duration,
}

impl FromParams for EventQuery {
    fn from_params(q: &Params) -> Result<Self, ApiError> {
        Ok(EventQuery {
            since: q.cursor("since")?.unwrap_or(0),
            limit: q.limit(DEFAULT_LIMIT, MAX_LIMIT)?,
            select: EventSelect::from_params(q)?,
            wait: q.duration("wait", Duration::ZERO)?,
        })
    }
}

/// `GET /v1/events/stream`: from `since` (the head when absent, unless a
/// `Last-Event-ID` resumes) and which events.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StreamQuery {
    pub since: Option<i64>,
    pub select: EventSelect,
    /// `coalesce=MS` (0 to 1000; default 0): once an event comes, wait
    /// this long for more and send them together.
    pub coalesce: Duration,
}

impl FromParams for StreamQuery {
    fn from_params(q: &Params) -> Result<Self, ApiError> {
        let coalesce = match q.int("coalesce")? {
            None => Duration::ZERO,
            Some(ms) if (0..=1000).contains(&ms) => Duration::from_millis(ms.unsigned_abs()),
            Some(_) => {
                return Err(ApiError::bad_request("coalesce", "milliseconds, 0 to 1000"));
            }
        };
        Ok(StreamQuery {
            since: q.cursor("since")?,
            select: EventSelect::from_params(q)?,
            coalesce,
        })
    }
}

/// `GET /v1/sessions/{id}/next-event`: after `since` (the head when
/// absent), waiting up to `timeout`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NextEventQuery {
    pub since: Option<i64>,
    pub timeout: Duration,
}

impl FromParams for NextEventQuery {
    fn from_params(q: &Params) -> Result<Self, ApiError> {
        Ok(NextEventQuery {
            since: q.int("since")?,
            timeout: q.duration("timeout", DEFAULT_WAIT)?,
        })
    }
}

/// A long-poll's `timeout` (`GET /v1/policies/{id}/wait`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WaitQuery {
    pub timeout: Duration,
}

impl FromParams for WaitQuery {
    fn from_params(q: &Params) -> Result<Self, ApiError> {
        Ok(WaitQuery {
            timeout: q.duration("timeout", DEFAULT_WAIT)?,
        })
    }
}

/// `GET /v1/policies/{id}/diff`: from the file index `from` (0), at most
/// `limit` files (1 to `max_files`, all of them when absent).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DiffQuery {
    pub from: usize,
    pub limit: Option<usize>,
    /// `since=TREE`: the change from that tree (an earlier snapshot's) to
    /// the policy's, rather than from its branch.
    pub since: Option<String>,
}

impl DiffQuery {
    /// The most files on the page, given the route's cap.
    pub fn files(&self, max_files: usize) -> usize {
        self.limit.unwrap_or(max_files).min(max_files)
    }
}

impl FromParams for DiffQuery {
    fn from_params(q: &Params) -> Result<Self, ApiError> {
        let from = match q.int("from")? {
            None => 0,
            Some(n) if n >= 0 => usize::try_from(n).unwrap_or(usize::MAX),
            Some(_) => return Err(ApiError::bad_request("from", "a file index is at least 0")),
        };
        let limit = match q.get("limit") {
            None => None,
            Some(_) => Some(q.limit(super::review::MAX_FILES, super::review::MAX_FILES)?),
        };
        let since = match q.get("since") {
            None => None,
            Some(t)
                if (t.len() == 40 || t.len() == 64) && t.bytes().all(|b| b.is_ascii_hexdigit()) =>
            {
                Some(t.to_ascii_lowercase())
            }
            Some(_) => {
                return Err(ApiError::bad_request(
                    "since",
                    "a tree id: 40 or 64 hexadecimal digits",
                ));
            }
        };
        Ok(DiffQuery { from, limit, since })
    }
}

/// `GET /ui/login?code=`: the one-time code of a login link.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LoginLinkQuery {
    pub code: Option<String>,
}

impl FromParams for LoginLinkQuery {
    fn from_params(q: &Params) -> Result<Self, ApiError> {
        Ok(LoginLinkQuery {
            code: q.get("code").map(str::to_string),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn field<T: std::fmt::Debug>(r: Result<T, ApiError>) -> String {
        r.expect_err("refused").field.unwrap_or_default()
    }

    #[test]
    fn a_page_has_its_defaults_and_bounds() {
        let p = PageQuery::from_params(&Params::of(&[])).expect("defaults");
        assert_eq!(
            p,
            PageQuery {
                cursor: 0,
                limit: DEFAULT_LIMIT
            }
        );
        let p = PageQuery::from_params(&Params::of(&[("limit", " 7 "), ("cursor", "9")]))
            .expect("given");
        assert_eq!(
            p,
            PageQuery {
                cursor: 9,
                limit: 7
            }
        );
        for (k, v) in [
            ("limit", "0"),
            ("limit", "1001"),
            ("limit", "x"),
            ("cursor", "-1"),
        ] {
            assert_eq!(
                field(PageQuery::from_params(&Params::of(&[(k, v)]))),
                k,
                "{k}={v}"
            );
        }
        let max = PageQuery::from_params(&Params::of(&[("limit", "1000")])).expect("the cap");
        assert_eq!(max.limit, MAX_LIMIT);
    }

    #[test]
    fn policy_lists_take_statuses_and_an_order() {
        let q = PolicyListQuery::from_params(&Params::of(&[
            ("status", "done, blocked,,"),
            ("order", "newest"),
        ]))
        .expect("parsed");
        assert_eq!(q.statuses, vec![PolicyStatus::Done, PolicyStatus::Blocked]);
        assert!(q.newest_first);
        assert!(
            !PolicyListQuery::from_params(&Params::of(&[("order", "oldest")]))
                .expect("oldest")
                .newest_first
        );
        assert_eq!(
            field(PolicyListQuery::from_params(&Params::of(&[(
                "status", "finished"
            )]))),
            "status"
        );
        assert_eq!(
            field(PolicyListQuery::from_params(&Params::of(&[(
                "order", "random"
            )]))),
            "order"
        );
    }

    #[test]
    fn event_queries_name_types_in_full_and_bound_the_wait() {
        let q = EventQuery::from_params(&Params::of(&[
            ("types", "turn-end,policy:done"),
            ("session", "a,b"),
            ("wait", "10m"),
        ]))
        .expect("parsed");
        assert_eq!(q.select.types, vec!["session:turn-end", "policy:done"]);
        assert_eq!(q.select.sessions, vec!["a", "b"]);
        assert_eq!(q.wait, MAX_WAIT, "a wait is capped");
        assert_eq!(q.since, 0);
        let none = EventQuery::from_params(&Params::of(&[])).expect("defaults");
        assert_eq!(none.wait, Duration::ZERO, "no wait unless asked");
        assert_eq!(
            field(EventQuery::from_params(&Params::of(&[("types", "nope")]))),
            "types"
        );
        assert_eq!(
            field(EventQuery::from_params(&Params::of(&[("since", "-2")]))),
            "since"
        );
        assert_eq!(
            field(EventQuery::from_params(&Params::of(&[("wait", "soon")]))),
            "wait"
        );
        let s = StreamQuery::from_params(&Params::of(&[])).expect("stream");
        assert_eq!(s.since, None, "the stream starts at the head");
        assert_eq!(s.select.host, None);
    }

    #[test]
    fn an_event_query_names_one_host_by_its_id() {
        let q = EventQuery::from_params(&Params::of(&[("host", " alpha-1.b_c ")])).expect("host");
        assert_eq!(q.select.host.as_deref(), Some("alpha-1.b_c"));
        let s = StreamQuery::from_params(&Params::of(&[("host", "beta")])).expect("stream");
        assert_eq!(s.select.host.as_deref(), Some("beta"));
        for bad in ["-x", "a b", "a/b", "é", &"h".repeat(64)] {
            assert_eq!(
                field(EventQuery::from_params(&Params::of(&[("host", bad)]))),
                "host",
                "{bad}"
            );
        }
        let f = q.select.filter(4, 9);
        assert_eq!(
            (f.since, f.limit, f.host.as_deref()),
            (4, 9, Some("alpha-1.b_c"))
        );
    }

    #[test]
    fn long_polls_wait_the_default_unless_told() {
        let w = WaitQuery::from_params(&Params::of(&[])).expect("default");
        assert_eq!(w.timeout, DEFAULT_WAIT);
        let n = NextEventQuery::from_params(&Params::of(&[("timeout", "1500"), ("since", "3")]))
            .expect("given");
        assert_eq!(
            n,
            NextEventQuery {
                since: Some(3),
                timeout: Duration::from_millis(1500)
            }
        );
    }

    #[test]
    fn a_diff_page_is_bounded() {
        let d = DiffQuery::from_params(&Params::of(&[])).expect("default");
        assert_eq!((d.from, d.files(1000)), (0, 1000));
        let d =
            DiffQuery::from_params(&Params::of(&[("from", "4"), ("limit", "2")])).expect("given");
        assert_eq!((d.from, d.files(1000)), (4, 2));
        assert_eq!(
            field(DiffQuery::from_params(&Params::of(&[("from", "-1")]))),
            "from"
        );
        assert_eq!(
            field(DiffQuery::from_params(&Params::of(&[("limit", "0")]))),
            "limit"
        );
    }
}

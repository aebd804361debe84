//! `GET /v1/events/stream`: the bus as server-sent events, for pages and
//! tools that stay connected. Each event is `id: <cursor>`, `event:
//! <type>`, `data: <the event's JSON, as /v1/events gives it>`; a
//! `: keep-alive` comment goes out every [`KEEP_ALIVE`] while nothing
//! happens.
//!
//! `coalesce=MS` (up to 1 s; the page asks for 100): once an event comes,
//! the stream waits that long for more and sends them together, one read
//! of the store for the lot (a page that applies events in batches gains
//! nothing from each alone, and an open tab costs the daemon less).
//!
//! Where it starts: after `Last-Event-ID` (what an `EventSource` sends
//! when it reconnects), else after `since`, else after the newest event
//! stored (only what happens from now). Filters as `/v1/events`: `types`,
//! `session`, `policy`, `host`; with the agent token, as there, only sessions and
//! policies whose keys it presents (`engine::reads`). Bounded by the API's
//! limits: a stream holds a place among the long-polls (503
//! `too-many-waiters` past the cap, see `limits`) and ends after
//! [`STREAM_SPAN`]; the client reconnects with `Last-Event-ID` and misses
//! nothing. It must never change state.

use super::query::{Query, StreamQuery};
use super::{ApiError, ApiResult, AppState, Credential};
use crate::api::convert::ToWire;
use crate::engine::{Engine, EngineError};
use crate::store::{EventFilter, EventRow};
use axum::extract::State;
use axum::http::HeaderMap;
use axum::response::IntoResponse;
use axum::response::sse::{Event, KeepAlive, Sse};
use std::collections::VecDeque;
use std::convert::Infallible;
use std::time::Duration;
use tokio::sync::OwnedSemaphorePermit;
use tokio::time::Instant;

/// A comment this often while no event comes.
pub const KEEP_ALIVE: Duration = Duration::from_secs(15);
/// How long one stream lasts before the daemon ends it.
pub const STREAM_SPAN: Duration = Duration::from_secs(600);
/// Events read from the store at once.
const BATCH: usize = 200;

struct Follow {
    engine: Engine,
    filter: EventFilter,
    /// Once an event comes, how long to wait for more before sending.
    coalesce: Duration,
    queued: VecDeque<EventRow>,
    until: Instant,
    done: bool,
    _place: OwnedSemaphorePermit,
}

/// The event as the API sends it; one that cannot be encoded is sent as
/// `null`, logged.
fn sse_event(row: EventRow) -> Event {
    let e = ToWire::to_wire(row);
    let data = serde_json::to_string(&e).unwrap_or_else(|err| {
        tracing::error!(cursor = e.cursor, kind = e.kind(), error = %err, "an event does not encode: sent as null");
        "null".into()
    });
    Event::default()
        .id(e.cursor.to_string())
        .event(e.kind())
        .data(data)
}

impl Follow {
    /// The next event to send; `None` ends the stream.
    async fn next(&mut self) -> Option<Event> {
        loop {
            if self.done {
                return None;
            }
            if let Some(e) = self.queued.pop_front() {
                return Some(sse_event(e));
            }
            let left = self.until.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return None;
            }
            match self
                .engine
                .wait_events(&self.filter, left.min(super::MAX_WAIT))
                .await
            {
                Ok(events) => {
                    if let Some(last) = events.last() {
                        self.filter.since = last.cursor;
                    }
                    let came = !events.is_empty();
                    self.queued.extend(events);
                    // Those that come meanwhile go out with them: one
                    // read of the store and one burst for a page that
                    // applies them together anyway.
                    if came && !self.coalesce.is_zero() && self.queued.len() < BATCH {
                        tokio::time::sleep(self.coalesce).await;
                        if let Ok(more) = self.engine.events(&self.filter) {
                            if let Some(last) = more.last() {
                                self.filter.since = last.cursor;
                            }
                            self.queued.extend(more);
                        }
                    }
                }
                Err(e) => {
                    // Said once, then the stream ends: the client
                    // reconnects from its last id.
                    tracing::warn!(error = %e, "the event stream cannot read the bus; ending it");
                    self.done = true;
                    return Some(Event::default().event("error").data(e.to_string()));
                }
            }
        }
    }
}

pub(super) async fn stream(
    State(st): State<AppState>,
    Credential(caller): Credential,
    headers: HeaderMap,
    Query(q): Query<StreamQuery>,
) -> ApiResult {
    let resume = match headers.get("last-event-id") {
        Some(v) => Some(
            v.to_str()
                .ok()
                .and_then(|t| t.trim().parse::<i64>().ok())
                .filter(|c| *c >= 0)
                .ok_or_else(|| {
                    ApiError::bad_request(
                        "Last-Event-ID",
                        "must be an event cursor (an integer, at least 0)",
                    )
                })?,
        ),
        None => None,
    };
    let since = match (resume, q.since) {
        (Some(c), _) | (None, Some(c)) => c,
        (None, None) => st.engine.store().head_cursor().map_err(EngineError::from)?,
    };
    super::hosts_kept(&st, &q.select)?;
    let mut filter = q.select.filter(since, BATCH);
    // With the agent token: only the sessions and policies whose keys it
    // presents (`engine::reads`).
    st.engine.check_event_read(&mut filter, &caller)?;
    let place = st.long_polls.enter("events-stream")?;
    let follow = Follow {
        engine: st.engine.clone(),
        filter,
        coalesce: q.coalesce,
        queued: VecDeque::new(),
        until: Instant::now() + STREAM_SPAN,
        done: false,
        _place: place,
    };
    let events = futures_lite::stream::unfold(follow, |mut f| async move {
        let e = f.next().await?;
        Some((Ok::<Event, Infallible>(e), f))
    });
    Ok(Sse::new(events)
        .keep_alive(KeepAlive::new().interval(KEEP_ALIVE).text("keep-alive"))
        .into_response())
}

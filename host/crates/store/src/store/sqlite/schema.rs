//! The store's schema: its tables and indexes, and the migration of a file
//! written by an older gatehost. It owns the SQL that shapes the file; it
//! must never read or write a row of the daemon's data (only the shape,
//! and the values a new column needs in old rows).

use rusqlite::Connection;

/// Brings a file of an older schema up to this one (idempotent; runs at
/// every open, after `SCHEMA`). Version 2: sessions have an owner; those
/// gatehost started belong to the operator, the rest to the agent.
/// Version 3: policies count the daemon deaths their gate was running at,
/// and record when a publish of their commit began (before any lock).
/// Version 4: sessions keep their key's digest (none for older rows: see
/// `engine::keys`). Version 5: sessions record when the watchdog found
/// them stale; policies carry their deadline and count their gate's
/// infrastructure retries. Version 6: policies keep their review chain's
/// state. Version 7: routines and their steps, new tables
/// (`routines::ROUTINE_SCHEMA`, run after this). Version 8: standing
/// policies, a new table (`standing::STANDING_SCHEMA`, run after this).
/// Version 9: the operator's passkeys, a new table
/// (`passkeys::PASSKEY_SCHEMA`, run after this). Version 10: sessions
/// pin their workspace's identity.
pub(super) fn migrate(conn: &Connection) -> rusqlite::Result<()> {
    let has_owner = has_column(conn, "sessions", "owner")?;
    if !has_owner {
        conn.execute_batch(
            "ALTER TABLE sessions ADD COLUMN owner TEXT NOT NULL DEFAULT 'agent';
             UPDATE sessions SET owner = 'operator' WHERE command IS NOT NULL;",
        )?;
    }
    let has_crashes = has_column(conn, "policies", "gate_crashes")?;
    if !has_crashes {
        conn.execute_batch(
            "ALTER TABLE policies ADD COLUMN gate_crashes INTEGER NOT NULL DEFAULT 0;",
        )?;
    }
    let has_publish = has_column(conn, "policies", "publish_open")?;
    if !has_publish {
        conn.execute_batch(
            "ALTER TABLE policies ADD COLUMN publish_open TEXT NOT NULL DEFAULT '[]';",
        )?;
    }
    let has_key = has_column(conn, "sessions", "key_digest")?;
    if !has_key {
        conn.execute_batch("ALTER TABLE sessions ADD COLUMN key_digest TEXT;")?;
    }
    let has_stale = has_column(conn, "sessions", "stale_at")?;
    if !has_stale {
        // A session stored without a heartbeat was last heard of when it
        // last changed.
        conn.execute_batch(
            "ALTER TABLE sessions ADD COLUMN stale_at INTEGER;
             UPDATE sessions SET heartbeat_at = updated_at WHERE heartbeat_at IS NULL;",
        )?;
    }
    let has_deadline = has_column(conn, "policies", "deadline_at")?;
    if !has_deadline {
        conn.execute_batch(
            "ALTER TABLE policies ADD COLUMN deadline_at INTEGER;
             ALTER TABLE policies ADD COLUMN infra_retries_used INTEGER NOT NULL DEFAULT 0;",
        )?;
    }
    // --- Version 6 (review chains): a policy's chain state, as JSON
    // (`model::chain::ChainRecord`). One step, kept apart for the merge.
    let has_review = has_column(conn, "policies", "review")?;
    if !has_review {
        conn.execute_batch("ALTER TABLE policies ADD COLUMN review TEXT;")?;
    }
    // --- end of version 6.
    // Version 10: sessions pin their workspace's identity (device, inode)
    // at registration (`anchor::identity`); none for older rows.
    let has_pin = has_column(conn, "sessions", "workspace_dev")?;
    if !has_pin {
        conn.execute_batch(
            "ALTER TABLE sessions ADD COLUMN workspace_dev INTEGER;
             ALTER TABLE sessions ADD COLUMN workspace_ino INTEGER;",
        )?;
    }
    // Version 11: a failed gate's nudge as judged, so that its delivery
    // (again after a restart) says what its `policy:nudge` said.
    if !has_column(conn, "policies", "nudge")? {
        conn.execute_batch("ALTER TABLE policies ADD COLUMN nudge TEXT;")?;
    }
    // The watchdog's looks, each by a partial index (never a scan of all
    // sessions or policies: a unit test reads their query plans).
    conn.execute_batch(
        "CREATE INDEX IF NOT EXISTS sessions_silent ON sessions(heartbeat_at)
           WHERE state != 'exited' AND stale_at IS NULL AND command IS NULL;
         CREATE INDEX IF NOT EXISTS sessions_stale ON sessions(stale_at) WHERE stale_at IS NOT NULL;
         CREATE INDEX IF NOT EXISTS policies_deadline ON policies(deadline_at)
           WHERE deadline_at IS NOT NULL AND status NOT IN ('done', 'blocked', 'cancelled');",
    )?;
    // Sessions by their key (an agent's reads name no session: those its
    // keys cover), found without a scan.
    conn.execute_batch(
        "CREATE INDEX IF NOT EXISTS sessions_key ON sessions(key_digest) WHERE key_digest IS NOT NULL;",
    )?;
    // The sweep's look (every few seconds): only the policies a task of
    // the daemon drives, never the watching ones (a unit test reads its
    // query plan).
    conn.execute_batch(super::records::WORKING_INDEX)?;
    // The few policies with a publish that never ended, found without a scan.
    conn.execute_batch(
        "CREATE INDEX IF NOT EXISTS policies_open_publish ON policies(seq) WHERE publish_open != '[]';",
    )?;
    Ok(())
}

pub(super) const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS meta(key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS sessions(
    id TEXT PRIMARY KEY,
    label TEXT,
    cwd TEXT NOT NULL,
    workspace TEXT NOT NULL,
    state TEXT NOT NULL,
    turns INTEGER NOT NULL DEFAULT 0,
    last_turn_cursor INTEGER,
    last_message TEXT,
    heartbeat_at INTEGER,
    notify_url TEXT,
    command TEXT,
    pid INTEGER,
    created_at INTEGER NOT NULL,
    updated_at INTEGER NOT NULL,
    owner TEXT NOT NULL DEFAULT 'agent',
    key_digest TEXT,
    stale_at INTEGER,
    workspace_dev INTEGER,
    workspace_ino INTEGER
);
CREATE TABLE IF NOT EXISTS policies(
    id TEXT PRIMARY KEY,
    seq INTEGER NOT NULL UNIQUE,
    spec TEXT NOT NULL,
    status TEXT NOT NULL,
    sessions TEXT NOT NULL,
    pending TEXT NOT NULL,
    watch_after INTEGER NOT NULL,
    retries_used INTEGER NOT NULL DEFAULT 0,
    gate_runs INTEGER NOT NULL DEFAULT 0,
    verdict TEXT,
    plan TEXT,
    prepared TEXT,
    commit_sha TEXT,
    reason TEXT,
    parent_id TEXT,
    next_id TEXT,
    created_at INTEGER NOT NULL,
    updated_at INTEGER NOT NULL,
    gate_crashes INTEGER NOT NULL DEFAULT 0,
    publish_open TEXT NOT NULL DEFAULT '[]',
    deadline_at INTEGER,
    infra_retries_used INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX IF NOT EXISTS policies_status ON policies(status, seq);
CREATE TABLE IF NOT EXISTS policy_members(
    session_id TEXT NOT NULL,
    policy_id TEXT NOT NULL,
    PRIMARY KEY(session_id, policy_id)
) WITHOUT ROWID;
-- Members by policy: every policy event looks up its members' webhooks.
CREATE INDEX IF NOT EXISTS policy_members_policy ON policy_members(policy_id, session_id);
CREATE TABLE IF NOT EXISTS events(
    cursor INTEGER PRIMARY KEY AUTOINCREMENT,
    at INTEGER NOT NULL,
    type TEXT NOT NULL,
    session_id TEXT,
    policy_id TEXT,
    payload TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS events_policy ON events(policy_id, cursor);
CREATE INDEX IF NOT EXISTS events_session ON events(session_id, cursor);
CREATE TABLE IF NOT EXISTS deliveries(
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    event_cursor INTEGER NOT NULL,
    url TEXT NOT NULL,
    attempts INTEGER NOT NULL DEFAULT 0,
    next_at INTEGER NOT NULL,
    state TEXT NOT NULL,
    last_error TEXT,
    UNIQUE(event_cursor, url)
);
CREATE INDEX IF NOT EXISTS deliveries_due ON deliveries(state, next_at);
-- Attach idempotency keys (by credential), the request they came with
-- (a digest) and the policy they made.
CREATE TABLE IF NOT EXISTS idempotency(
    key TEXT PRIMARY KEY,
    request TEXT NOT NULL,
    policy_id TEXT NOT NULL,
    created_at INTEGER NOT NULL
);
";

/// Whether `table` has the column `column` (a file of an older schema may
/// not).
fn has_column(conn: &Connection, table: &str, column: &str) -> rusqlite::Result<bool> {
    conn.prepare_cached("SELECT 1 FROM pragma_table_info(?1) WHERE name = ?2")?
        .exists(rusqlite::params![table, column])
}

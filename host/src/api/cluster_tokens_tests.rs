//! The tokens a daemon serves with when they change (`cluster_tokens`):
//! on SQLite, a rotation; on PostgreSQL (a fresh database per test,
//! skipped loudly without one), the first host's seeding, a second host
//! adopting them, and a rotation followed.

use super::*;
use crate::store::pg_testdb::TestDb;
use axum::http::HeaderMap;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

fn bearer(token: &str) -> HeaderMap {
    let mut h = HeaderMap::new();
    h.insert(
        axum::http::header::AUTHORIZATION,
        format!("Bearer {token}").parse().expect("header"),
    );
    h
}

fn file(p: &Path) -> String {
    std::fs::read_to_string(p).expect("read").trim().to_string()
}

fn mode(p: &Path) -> u32 {
    std::fs::metadata(p).expect("meta").permissions().mode() & 0o777
}

fn both() -> wire::RotateTokens {
    wire::RotateTokens {
        agent: true,
        operator: true,
    }
}

#[test]
fn on_sqlite_a_rotation_swaps_and_rewrites_the_files_and_the_old_tokens_are_refused() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = Store::open(dir.path()).expect("store");
    let (tokens, local) = Tokens::load(dir.path(), None, None).expect("load");
    adopt_at_start(&tokens, &store, local).expect("nothing to adopt");
    let (a, o) = (
        tokens.files().agent.clone(),
        tokens.files().operator.clone(),
    );
    let (old_agent, old_operator) = (file(&a), file(&o));
    // The operator's only.
    let answer = rotate(
        &tokens,
        &store,
        &wire::RotateTokens {
            agent: false,
            operator: true,
        },
    )
    .expect("rotate");
    assert_eq!(answer.rotated, ["operator"]);
    assert!(!answer.cluster);
    assert_eq!(answer.operator_token_file, o.display().to_string());
    let new_operator = file(&o);
    assert_ne!(new_operator, old_operator);
    assert_eq!(file(&a), old_agent, "the agent's untouched");
    assert_eq!(mode(&o), 0o600);
    let shown = format!("{answer:?}");
    assert!(!shown.contains(&new_operator) && !shown.contains(&old_agent));
    assert!(tokens.role(&bearer(&old_operator)).is_err(), "old refused");
    assert_eq!(
        tokens.role(&bearer(&new_operator)).expect("new"),
        crate::api::Role::Operator
    );
    assert_eq!(
        tokens.role(&bearer(&old_agent)).expect("agent"),
        crate::api::Role::Agent
    );
    // Both; then none named is a bad request.
    rotate(&tokens, &store, &both()).expect("rotate both");
    assert!(tokens.role(&bearer(&old_agent)).is_err());
    assert!(tokens.role(&bearer(&new_operator)).is_err());
    assert_eq!(
        tokens.role(&bearer(&file(&a))).expect("agent"),
        crate::api::Role::Agent
    );
    let none = rotate(&tokens, &store, &wire::RotateTokens::default()).expect_err("none");
    assert_eq!(none.status, StatusCode::BAD_REQUEST);
}

#[test]
fn a_planted_symlink_at_a_token_path_stops_the_rotation_before_anything_changes() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = Store::open(dir.path()).expect("store");
    let (tokens, _) = Tokens::load(dir.path(), None, None).expect("load");
    let (a, o) = (
        tokens.files().agent.clone(),
        tokens.files().operator.clone(),
    );
    let old_agent = file(&a);
    let old_operator = file(&o);
    // The operator's file replaced by a link to somewhere else.
    let target = dir.path().join("stolen");
    std::fs::write(&target, "").expect("write");
    std::fs::remove_file(&o).expect("rm");
    std::os::unix::fs::symlink(&target, &o).expect("symlink");
    let err = rotate(&tokens, &store, &both()).expect_err("refused");
    assert!(err.message.contains("symbolic link"), "{}", err.message);
    assert_eq!(file(&a), old_agent, "nothing written");
    assert_eq!(std::fs::read_to_string(&target).expect("read"), "");
    assert_eq!(
        tokens.role(&bearer(&old_operator)).expect("still"),
        crate::api::Role::Operator
    );
}

#[test]
fn a_configured_token_file_is_never_rotated() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = Store::open(dir.path()).expect("store");
    let conf = dir.path().join("my-operator.token");
    std::fs::write(&conf, "configured-operator-0123456789\n").expect("write");
    std::fs::set_permissions(&conf, std::fs::Permissions::from_mode(0o600)).expect("chmod");
    let (tokens, _) = Tokens::load(dir.path(), None, Some(&conf)).expect("load");
    let err = rotate(&tokens, &store, &both()).expect_err("refused");
    assert_eq!(err.status, StatusCode::CONFLICT);
    assert_eq!(err.code, "tokens-configured");
    assert!(
        err.message.contains("operator_token_file"),
        "{}",
        err.message
    );
    assert_eq!(file(&conf), "configured-operator-0123456789");
    // The agent's, in the data directory, may be.
    rotate(
        &tokens,
        &store,
        &wire::RotateTokens {
            agent: true,
            operator: false,
        },
    )
    .expect("the agent's");
}

fn host(db: &TestDb, id: &str) -> Store {
    let spec = crate::store::HostSpec {
        id: id.into(),
        lease: Duration::from_secs(15),
        machine: "test-machine".into(),
        version: "0.0.0-test".into(),
    };
    Store::open_postgres_as(&db.options(), &spec).expect("open as a host")
}

#[test]
fn on_postgres_the_second_host_adopts_the_first_s_tokens_and_follows_a_rotation() {
    let Some(db) = TestDb::new("api_cluster_tokens_adopt_and_follow") else {
        return;
    };
    let (da, db_dir) = (
        tempfile::tempdir().expect("tempdir"),
        tempfile::tempdir().expect("tempdir"),
    );
    let (alpha, beta) = (host(&db, "alpha"), host(&db, "beta"));
    let (ta, la) = Tokens::load(da.path(), None, None).expect("load");
    let (tb, lb) = Tokens::load(db_dir.path(), None, None).expect("load");
    let beta_own_operator = lb.operator.clone();
    adopt_at_start(&ta, &alpha, la).expect("seed");
    adopt_at_start(&tb, &beta, lb).expect("adopt");
    let (ao, bo) = (ta.files().operator.clone(), tb.files().operator.clone());
    assert_eq!(file(&bo), file(&ao), "beta's file holds the cluster's");
    assert_eq!(file(&tb.files().agent), file(&ta.files().agent));
    assert_eq!(mode(&bo), 0o600);
    assert!(tb.role(&bearer(&beta_own_operator)).is_err());
    assert_eq!(tb.generations(), Some((1, 1)));
    // Nothing to follow yet.
    assert!(!follow(&tb, &beta).expect("follow"));
    let old = file(&ao);
    let answer = rotate(&ta, &alpha, &both()).expect("rotate");
    assert!(answer.cluster);
    assert_eq!(answer.operator_generation, Some(2));
    assert!(ta.role(&bearer(&old)).is_err());
    // Beta, until it follows, still holds the old one.
    assert!(tb.role(&bearer(&old)).is_ok());
    assert!(follow(&tb, &beta).expect("follow"));
    assert!(tb.role(&bearer(&old)).is_err());
    assert_eq!(file(&bo), file(&ao));
    assert_eq!(
        tb.role(&bearer(&file(&ao))).expect("new"),
        crate::api::Role::Operator
    );
}

#[test]
fn on_postgres_a_configured_file_that_is_not_the_cluster_s_stops_the_start_naming_it_only() {
    let Some(db) = TestDb::new("api_cluster_tokens_configured_differs") else {
        return;
    };
    let (da, db_dir) = (
        tempfile::tempdir().expect("tempdir"),
        tempfile::tempdir().expect("tempdir"),
    );
    let (ta, la) = Tokens::load(da.path(), None, None).expect("load");
    adopt_at_start(&ta, &host(&db, "alpha"), la).expect("seed");
    let conf = db_dir.path().join("agent.conf.token");
    std::fs::write(&conf, "configured-agent-0123456789\n").expect("write");
    std::fs::set_permissions(&conf, std::fs::Permissions::from_mode(0o600)).expect("chmod");
    let (tb, lb) = Tokens::load(db_dir.path(), Some(&conf), None).expect("load");
    let err = adopt_at_start(&tb, &host(&db, "beta"), lb).expect_err("refused");
    assert!(err.contains("agent_token_file"), "{err}");
    assert!(err.contains(&conf.display().to_string()), "{err}");
    assert!(!err.contains("configured-agent"), "no value: {err}");
    assert!(!err.contains(&file(&ta.files().agent)), "no value: {err}");
    assert_eq!(file(&conf), "configured-agent-0123456789", "never written");
}

#[test]
fn a_follower_refuses_a_planted_symlink_keeps_the_new_tokens_in_force_and_writes_once_it_is_gone() {
    let Some(db) = TestDb::new("api_cluster_tokens_follow_symlink") else {
        return;
    };
    let (da, db_dir) = (
        tempfile::tempdir().expect("tempdir"),
        tempfile::tempdir().expect("tempdir"),
    );
    let (alpha, beta) = (host(&db, "alpha"), host(&db, "beta"));
    let (ta, la) = Tokens::load(da.path(), None, None).expect("load");
    let (tb, lb) = Tokens::load(db_dir.path(), None, None).expect("load");
    adopt_at_start(&ta, &alpha, la).expect("seed");
    adopt_at_start(&tb, &beta, lb).expect("adopt");
    let old = file(&ta.files().operator);
    // Someone plants a link at beta's operator.token.
    let bo = tb.files().operator.clone();
    let target = db_dir.path().join("planted-target");
    std::fs::write(&target, "").expect("write");
    std::fs::remove_file(&bo).expect("rm");
    std::os::unix::fs::symlink(&target, &bo).expect("symlink");
    rotate(&ta, &alpha, &both()).expect("rotate");
    let new = file(&ta.files().operator);
    let err = follow(&tb, &beta).expect_err("the link is refused");
    assert!(err.contains("symbolic link"), "{err}");
    assert!(!err.contains(&new), "no value: {err}");
    // In force all the same: the old one is refused, the new accepted.
    assert!(tb.role(&bearer(&old)).is_err());
    assert!(tb.role(&bearer(&new)).is_ok());
    assert_eq!(std::fs::read_to_string(&target).expect("read"), "");
    // The link gone, the next look writes the file.
    std::fs::remove_file(&bo).expect("rm");
    assert!(follow(&tb, &beta).expect("follow"));
    assert_eq!(file(&bo), new);
    assert_eq!(mode(&bo), 0o600);
    assert!(!follow(&tb, &beta).expect("nothing more"));
}

#[test]
fn a_stored_pair_that_is_not_one_is_never_put_in_force() {
    let Some(db) = TestDb::new("api_cluster_tokens_bad_pair") else {
        return;
    };
    let (da, db_dir) = (
        tempfile::tempdir().expect("tempdir"),
        tempfile::tempdir().expect("tempdir"),
    );
    let (alpha, beta) = (host(&db, "alpha"), host(&db, "beta"));
    let (ta, la) = Tokens::load(da.path(), None, None).expect("load");
    let (tb, lb) = Tokens::load(db_dir.path(), None, None).expect("load");
    adopt_at_start(&ta, &alpha, la).expect("seed");
    adopt_at_start(&tb, &beta, lb).expect("adopt");
    let agent = file(&ta.files().agent);
    let operator = file(&ta.files().operator);
    // Edited by hand: the operator's made the agent's.
    db.sql(
        "UPDATE cluster_tokens SET value = (SELECT value FROM cluster_tokens WHERE name = 'agent'),
                generation = generation + 1 WHERE name = 'operator'",
    );
    let err = follow(&tb, &beta).expect_err("refused");
    assert!(err.contains("not taken up"), "{err}");
    assert!(!err.contains(&agent), "no value: {err}");
    assert_eq!(
        tb.role(&bearer(&agent)).expect("agent"),
        crate::api::Role::Agent,
        "never promoted"
    );
    assert_eq!(
        tb.role(&bearer(&operator)).expect("operator"),
        crate::api::Role::Operator
    );
    assert_eq!(file(&tb.files().operator), operator);
}

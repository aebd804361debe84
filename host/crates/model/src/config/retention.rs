//! The `[retention]` section: how long the daemon keeps what no live
//! policy needs (events, webhook deliveries, exited sessions, settled
//! policies, finished routine runs), by age and by count.
//!
//! It owns parsing and checking these settings only; the store applies
//! them (`store::Backend::apply_retention`; SQLite:
//! `store::sqlite::retention`) and must never delete what a live policy or
//! a pending delivery needs.

use serde::Deserialize;
use std::time::Duration;

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RetentionSection {
    enabled: Option<bool>,
    every: Option<String>,
    events_max_age: Option<String>,
    events_max_count: Option<u64>,
    policies_max_age: Option<String>,
    policies_max_count: Option<u64>,
    sessions_max_age: Option<String>,
    deliveries_max_age: Option<String>,
    routines_max_age: Option<String>,
}

/// What the daemon keeps. Ages are measured from a row's last change.
#[derive(Debug, Clone, PartialEq)]
pub struct Retention {
    /// Off: nothing is ever deleted.
    pub enabled: bool,
    /// How often it is applied (also once at start).
    pub every: Duration,
    /// Events older than this are deleted (`events_max_age`).
    pub events_max_age: Duration,
    /// The newest this many events are kept whatever their age.
    pub events_max_count: u64,
    /// Settled policies (`done`, `blocked`, `cancelled`).
    pub policies_max_age: Duration,
    /// Only the newest this many settled policies are kept, whatever their age.
    pub policies_max_count: u64,
    /// Exited sessions no live policy watches.
    pub sessions_max_age: Duration,
    /// Webhook deliveries delivered or given up.
    pub deliveries_max_age: Duration,
    /// Routine runs finished (`done`, `failed`, `cancelled`), with their steps.
    pub routines_max_age: Duration,
}

const DAY: Duration = Duration::from_secs(24 * 3600);

impl Default for Retention {
    fn default() -> Self {
        Retention {
            enabled: true,
            every: Duration::from_secs(600),
            events_max_age: 30 * DAY,
            events_max_count: 1_000_000,
            policies_max_age: 30 * DAY,
            policies_max_count: 100_000,
            sessions_max_age: 30 * DAY,
            deliveries_max_age: 7 * DAY,
            routines_max_age: 30 * DAY,
        }
    }
}

impl RetentionSection {
    /// Applies the section; an error is `(key, message)`.
    pub(super) fn apply(self, into: &mut Retention) -> Result<(), (String, String)> {
        if let Some(e) = self.enabled {
            into.enabled = e;
        }
        let age =
            |key: &str, v: Option<String>, into: &mut Duration| -> Result<(), (String, String)> {
                let Some(text) = v else {
                    return Ok(());
                };
                let d = humantime::parse_duration(text.trim()).map_err(|e| {
                    (
                        format!("retention.{key}"),
                        format!("'{text}' is not a duration ({e}); try \"30days\", \"12h\""),
                    )
                })?;
                if d < Duration::from_secs(1) {
                    return Err((format!("retention.{key}"), "must be at least 1s".into()));
                }
                *into = d;
                Ok(())
            };
        age("every", self.every, &mut into.every)?;
        age(
            "events_max_age",
            self.events_max_age,
            &mut into.events_max_age,
        )?;
        age(
            "policies_max_age",
            self.policies_max_age,
            &mut into.policies_max_age,
        )?;
        age(
            "sessions_max_age",
            self.sessions_max_age,
            &mut into.sessions_max_age,
        )?;
        age(
            "deliveries_max_age",
            self.deliveries_max_age,
            &mut into.deliveries_max_age,
        )?;
        age(
            "routines_max_age",
            self.routines_max_age,
            &mut into.routines_max_age,
        )?;
        let count = |key: &str, v: Option<u64>, into: &mut u64| -> Result<(), (String, String)> {
            match v {
                Some(0) => Err((format!("retention.{key}"), "must be at least 1".into())),
                Some(n) => {
                    *into = n;
                    Ok(())
                }
                None => Ok(()),
            }
        };
        count(
            "events_max_count",
            self.events_max_count,
            &mut into.events_max_count,
        )?;
        count(
            "policies_max_count",
            self.policies_max_count,
            &mut into.policies_max_count,
        )?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(toml_text: &str) -> Result<Retention, (String, String)> {
        let section: RetentionSection = toml::from_str(toml_text).expect("toml");
        let mut r = Retention::default();
        section.apply(&mut r)?;
        Ok(r)
    }

    #[test]
    fn defaults_and_overrides() {
        assert_eq!(parse("").expect("empty"), Retention::default());
        let r = parse(
            "every = \"1m\"\nevents_max_age = \"2days\"\nevents_max_count = 5\nenabled = false",
        )
        .expect("parse");
        assert_eq!(r.every, Duration::from_secs(60));
        assert_eq!(r.events_max_age, 2 * DAY);
        assert_eq!(r.events_max_count, 5);
        assert!(!r.enabled);
    }

    #[test]
    fn bad_values_name_their_key() {
        for (text, key) in [
            ("every = \"soon\"", "retention.every"),
            ("events_max_age = \"0s\"", "retention.events_max_age"),
            ("policies_max_count = 0", "retention.policies_max_count"),
        ] {
            match parse(text) {
                Err((k, _)) => assert_eq!(k, key, "{text}"),
                other => panic!("{text}: {other:?}"),
            }
        }
    }
}

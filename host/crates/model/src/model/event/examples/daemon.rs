//! Examples of the daemon's own events: standing policies, passkeys, the
//! configuration, the hosts of a fleet and the tokens (in the golden
//! list's order).

use super::super::{
    ConfigEvent, ConfigHeld, ConfigRejected, ConfigReloaded, Event, HostEvent, HostStale,
    HostTakenOver, Passkey, PasskeyEvent, PasskeysReset, Rotation, Standing, StandingEvent,
    TokenEvent, Trigger,
};
use super::s;

pub(super) fn examples() -> Vec<Event> {
    vec![
        Event::Standing(StandingEvent::Added(Standing {
            standing_id: s("st-1"),
            agents: vec![s("claude")],
            under: vec![s("/w")],
            label: Some(s("tests")),
        })),
        Event::Standing(StandingEvent::Removed(Standing {
            standing_id: s("st-1"),
            agents: vec![s("claude")],
            under: vec![s("/w")],
            label: None,
        })),
        Event::Passkey(PasskeyEvent::Registered(Passkey {
            passkey_id: s("pk-1"),
            name: s("laptop"),
            by: s("the operator (token)"),
        })),
        Event::Passkey(PasskeyEvent::Removed(Passkey {
            passkey_id: s("pk-1"),
            name: s("laptop"),
            by: s("the operator (passkey 'laptop')"),
        })),
        Event::Passkey(PasskeyEvent::Renamed(Passkey {
            passkey_id: s("pk-1"),
            name: s("old laptop"),
            by: s("the operator (token)"),
        })),
        Event::Passkey(PasskeyEvent::Reset(PasskeysReset {
            removed: vec![s("laptop")],
            by: s("gatehost passkey reset"),
        })),
        Event::Config(ConfigEvent::Reloaded(ConfigReloaded {
            source: s("/etc/gatehost.toml"),
            trigger: Trigger::Signal,
            changed: vec![s("shell.allow"), s("daemon.port")],
            needs_restart: vec![s("daemon.port")],
            held: vec![],
            enabled: true,
        })),
        Event::Config(ConfigEvent::Rejected(ConfigRejected {
            source: s("/etc/gatehost.toml"),
            trigger: Trigger::File,
            reason: s("does not parse"),
        })),
        Event::Config(ConfigEvent::Held(ConfigHeld {
            source: s("/etc/gatehost.toml"),
            trigger: Trigger::File,
            held: vec![s("daemon.ack_requires")],
            reason: s("a weakening waits for a restart"),
        })),
        Event::Host(HostEvent::Stale(HostStale {
            host: s("alpha"),
            fence: 7,
            machine: s("build-1"),
            pid: 4242,
            heartbeat_at: 1_700_000_000_000,
            lease_until: 1_700_000_015_000,
            grace_ms: 15_000,
            policies: vec![s("pol_1")],
            by: s("beta"),
            takeover: true,
        })),
        Event::Host(HostEvent::TakenOver(HostTakenOver {
            host: s("alpha"),
            by: s("beta"),
            fence: 9,
            policies: vec![s("pol_1")],
            sessions: vec![s("claude-1")],
            routines: 0,
            deliveries: 2,
            requests: 1,
        })),
        Event::Tokens(TokenEvent::Rotated(Rotation {
            tokens: vec![s("agent"), s("operator")],
            cluster: true,
            host: Some(s("alpha")),
        })),
    ]
}

//! The daemon-wide events, with no session and no policy: standing
//! policies added and removed, passkeys registered and removed, the
//! configuration reloaded, rejected or held, the tokens rotated, and a
//! fleet's hosts found dead or taken over (PostgreSQL).

use serde::{Deserialize, Serialize};

family! {
    /// Standing policies added and removed: named in full only.
    StandingEvent {
        /// The operator added a standing policy.
        Added(Standing) = "standing:added",
        /// The operator removed a standing policy.
        Removed(Standing) = "standing:removed",
    }
}

family! {
    /// The operator's passkeys registered and removed: named in full only.
    PasskeyEvent {
        /// A passkey was registered.
        Registered(Passkey) = "passkey:registered",
        /// A passkey was removed.
        Removed(Passkey) = "passkey:removed",
        /// A passkey was given another name (`name`: the new one).
        Renamed(Passkey) = "passkey:renamed",
        /// Every passkey was removed from the daemon's machine
        /// (`gatehost passkey reset`): the recovery when the last one is
        /// lost.
        Reset(PasskeysReset) = "passkey:reset",
    }
}

family! {
    /// The configuration read again (`config:reloaded`), refused
    /// (`config:rejected`), or a weakening of it held until a restart
    /// (`config:held`). Named in full only: `rejected` is also a policy's.
    ConfigEvent {
        /// The configuration was read again and is in force, but for the
    /// settings that need a restart or are held.
        Reloaded(ConfigReloaded) = "config:reloaded",
        /// The configuration read again is invalid: the one in force stays.
        Rejected(ConfigRejected) = "config:rejected",
        /// A weakening in the configuration read again waits for a restart.
        Held(ConfigHeld) = "config:held",
    }
}

family! {
    /// A fleet's hosts (a PostgreSQL store shared by many hosts), said by
    /// the cluster's leader: named in full only (`stale` is also a
    /// policy's and a session's).
    HostEvent {
        /// A host's lease and the grace after it ran out: its claim is
        /// over, its policies wait for it (or for a takeover).
        Stale(HostStale) = "host:stale",
        /// A stale host's sessions, policies, routines and webhook
        /// deliveries moved to another host (`[store] shared_workspaces`).
        TakenOver(HostTakenOver) = "host:taken-over",
    }
}

family! {
    /// The operator's and the agents' tokens replaced (`gatehost token
    /// rotate`): named in full only.
    TokenEvent {
        /// Tokens were replaced: the old ones are refused from then on.
        Rotated(Rotation) = "tokens:rotated",
    }
}

/// The payload of `tokens:rotated` (never a token's value).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Rotation {
    /// Which: `agent`, `operator`, or both.
    pub tokens: Vec<String>,
    /// Whether they are the cluster's (PostgreSQL: every host follows).
    pub cluster: bool,
    /// The host that replaced them, in a fleet.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host: Option<String>,
}

/// The payload of `host:stale`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct HostStale {
    /// The host found dead.
    pub host: String,
    /// Its claim's fencing number, now stale.
    pub fence: i64,
    /// The machine and process that held the claim.
    pub machine: String,
    /// The process id on that machine.
    pub pid: i64,
    /// Its last renewal (ms since the Unix epoch, the database's clock).
    pub heartbeat_at: i64,
    /// When its lease ended (ms, the database's clock).
    pub lease_until: i64,
    /// The grace allowed after the lease (ms).
    pub grace_ms: i64,
    /// Its policies not settled yet, which wait.
    pub policies: Vec<String>,
    /// The host that found it (the leader).
    pub by: String,
    /// Whether the leader takes its work over (`[store] shared_workspaces`).
    pub takeover: bool,
}

/// The payload of `host:taken-over`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct HostTakenOver {
    /// The stale host whose work moved.
    pub host: String,
    /// The host that took it (the leader).
    pub by: String,
    /// The taker's fencing number, which guards the moved rows from now on.
    pub fence: i64,
    /// The policies moved that were not settled (the taker carries them on).
    pub policies: Vec<String>,
    /// The sessions moved.
    pub sessions: Vec<String>,
    /// How many routines, webhook deliveries and operators' requests moved.
    pub routines: u64,
    /// Webhook deliveries moved (still to send).
    pub deliveries: u64,
    /// Operators' requests moved (sent to the dead host, not carried out).
    pub requests: u64,
}

/// The payload of `standing:added` and `standing:removed`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Standing {
    /// The standing policy's id (`sp_…`).
    pub standing_id: String,
    /// The agents it is for (a session id's part before `:`); empty: every
    /// agent.
    pub agents: Vec<String>,
    /// The directories a session's workspace must lie under; empty: anywhere.
    pub under: Vec<String>,
    /// The label a session must carry; none: any session.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub label: Option<String>,
}

/// The payload of `passkey:registered` and `passkey:removed`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Passkey {
    /// The passkey's credential id, base64url (no padding).
    pub passkey_id: String,
    /// The name the operator gave it.
    pub name: String,
    /// Who (`the operator (passkey 'laptop')`, `the operator (token)`).
    pub by: String,
}

/// `passkey:reset`: the passkeys removed at once, and by whom.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PasskeysReset {
    /// The names of the passkeys removed (none: there were none).
    pub removed: Vec<String>,
    /// Who (`gatehost passkey reset, as user 1000 on host`).
    pub by: String,
}

/// What made the daemon read its configuration again.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Trigger {
    /// SIGHUP.
    Signal,
    /// The file changed (its metadata, polled).
    File,
}

/// The payload of `config:reloaded`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ConfigReloaded {
    /// The file read.
    pub source: String,
    /// What made the daemon read it.
    pub trigger: Trigger,
    /// The settings whose value differs from the one in force (by their
    /// configuration names: `shell.allow`, `judge.adapters.claude`,
    /// `daemon.webhook_url` …), those applied and those not.
    pub changed: Vec<String>,
    /// Those of `changed` that need a restart: their old value stays in
    /// force until then.
    pub needs_restart: Vec<String>,
    /// Those of `changed` that would weaken a guarantee: their old value
    /// stays in force until a restart (a `config:held` event says so).
    #[serde(default)]
    pub held: Vec<String>,
    /// Whether supervision runs (`[daemon] enabled`) now.
    pub enabled: bool,
}

/// The payload of `config:rejected`: the configuration in force is kept.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ConfigRejected {
    /// The file read.
    pub source: String,
    /// What made the daemon read it.
    pub trigger: Trigger,
    /// Why, as `serve` would have said it at start.
    pub reason: String,
}

/// The payload of `config:held`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ConfigHeld {
    /// The file read.
    pub source: String,
    /// What made the daemon read it.
    pub trigger: Trigger,
    /// The settings whose weakening waits for a restart.
    pub held: Vec<String>,
    /// Why, for a person.
    pub reason: String,
}

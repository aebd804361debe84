//! The client commands' arguments (`session`, `policy`, `events`,
//! `wait`): what a person types, as clap types. It owns their names,
//! help and defaults; it must never talk to the daemon.

use crate::wire::parse_duration;
use std::path::PathBuf;
use std::time::Duration;

#[derive(Debug, Clone, clap::Args)]
pub struct ClientArgs {
    #[command(flatten)]
    pub daemon: super::server_args::ServerArgs,
    /// Session keys to present, comma-separated (with the agent token, a
    /// report on a session or an attach to it needs the session's key; the
    /// keys `session register` is answered are kept and found in the
    /// keyring, $GATEHOST_SESSION_KEYS or the user's state directory).
    #[arg(
        long,
        global = true,
        env = "GATEHOST_SESSION_KEY",
        value_name = "KEYS",
        hide_env_values = true
    )]
    pub session_key: Option<String>,
    /// Print the API's JSON instead of text for people.
    #[arg(long, global = true)]
    pub json: bool,
}

#[derive(Debug, clap::Subcommand)]
pub enum SessionCommand {
    /// Register an agent session (or update a known one).
    Register {
        #[arg(long)]
        id: Option<String>,
        /// The session's working directory (absolute, or relative to here).
        #[arg(long, value_name = "DIR")]
        cwd: PathBuf,
        #[arg(long)]
        label: Option<String>,
        /// Default: the nearest folder at or above cwd holding .git, else cwd.
        #[arg(long, value_name = "DIR")]
        workspace: Option<PathBuf>,
        /// A webhook for this session's events.
        #[arg(long, value_name = "URL")]
        notify_url: Option<String>,
    },
    /// Report what the session did: turn-start, turn-end, awaiting-input, exited, heartbeat.
    Report {
        id: String,
        #[arg(value_parser = ["turn-start", "turn-end", "awaiting-input", "exited", "heartbeat"])]
        kind: String,
        /// The agent's last message (judges see it).
        #[arg(long)]
        message: Option<String>,
    },
    /// Start an agent as a child of the daemon and follow it (operator token).
    Start {
        /// The session's id; one already registered (by anyone) is refused,
        /// never taken over [default: a random ses_…].
        #[arg(long)]
        id: Option<String>,
        #[arg(long, value_name = "DIR")]
        cwd: PathBuf,
        #[arg(long)]
        label: Option<String>,
        /// A regex: a stdout line matching it ends a turn.
        #[arg(long, value_name = "REGEX")]
        turn_end_pattern: Option<String>,
        /// Without a pattern, this much silence after output ends a turn [default: 3000].
        #[arg(long, value_name = "MS", conflicts_with = "acp")]
        quiet_ms: Option<u64>,
        /// A webhook for this session's events (under [daemon]
        /// notify_url_prefixes; [daemon] notify_url tells of every
        /// session without one).
        #[arg(long, value_name = "URL")]
        notify_url: Option<String>,
        /// The agent speaks the Agent Client Protocol on stdio (Gemini CLI
        /// in ACP mode, claude-agent-acp): a prompt's answer is its
        /// turn-end, a nudge its next prompt.
        #[arg(long, conflicts_with = "turn_end_pattern")]
        acp: bool,
        /// ACP: the first prompt (without it, the agent waits for a nudge).
        #[arg(long, value_name = "TEXT", requires = "acp")]
        prompt: Option<String>,
        /// ACP: the permission rule (JSON: {"allow": [KINDS or NAMES],
        /// "deny": [...], "otherwise": "deny"|"escalate", "timeoutMs": N})
        /// [default: [agents] permission, else deny all].
        #[arg(long, value_name = "FILE", requires = "acp")]
        permission_rule: Option<PathBuf>,
        /// The agent's argv.
        #[arg(last = true, required = true, value_name = "CMD")]
        command: Vec<String>,
    },
    /// Answer an ACP session's permission request that waits for the
    /// operator (its `session:permission-escalated` event names it;
    /// operator token).
    Permission {
        id: String,
        /// The request (`perm-N`).
        request: String,
        #[arg(long, conflicts_with = "deny", required_unless_present = "deny")]
        allow: bool,
        #[arg(long)]
        deny: bool,
    },
    /// List sessions, a page at a time (the next page's cursor goes to
    /// stderr), or all of them with --all.
    List {
        #[command(flatten)]
        page: PageArgs,
    },
    /// Show one session.
    Show { id: String },
}

/// Paging of a list.
#[derive(Debug, clap::Args)]
pub struct PageArgs {
    /// At most this many per page (1 to 1000) [default: 50].
    #[arg(long, value_name = "N")]
    pub limit: Option<u32>,
    /// Continue from a page's `nextCursor`.
    #[arg(long, value_name = "CURSOR", conflicts_with = "all")]
    pub cursor: Option<i64>,
    /// Every page, one after the other.
    #[arg(long)]
    pub all: bool,
}

/// `policy attach --help`'s description of the policy JSON. Its example
/// (the lines between `Example` and the blank line after it) is attached
/// to a real daemon by tests/cli/docs_walkthrough.rs, and every field of the
/// attach input's schema must be named here (a unit test below).
pub const POLICY_JSON_HELP: &str = "\
The policy JSON (agentproto's policy_attach; unknown fields are errors; full
reference: `gatehost docs daemon`, \"Policies\"):
  sessionId     the session to watch (or sessionIds: a list, the gate runs once
                every one ended its turn; a --template names none)
  label         a name for people (at most 256 bytes)
  gate          a gate object (shell, judge or wasm, as in `gatehost check --help`)
                or a list of them; none: passes at turn-end
  then          \"emit\" (default: a green gate is an event) or \"commit\"
  commit        with then: \"commit\": {\"paths\": [...], \"message\": \"...\",
                \"requireHumanAck\": true} (paths workspace-relative; only the
                operator token may set requireHumanAck to false)
  onFail        {\"nudge\": \"text with {code} {reason} {findings} {output} {gate}\",
                \"maxRetries\": 2}: sent to the agent when the gate fails (0 to 10
                times, then blocked)
  next          a policy attached once this one is done (same sessions by default)
  watchFrom     \"latest\" (default: a turn that already ended counts), \"now\",
                or an event cursor
  gateOn        a commit policy's gates judge \"snapshot\" (default) or \"workspace\"
  deadline      \"30m\", \"2h\": past it the policy is expired and blocked
  review        {\"reviewer\": {\"judge\": {...}} or {\"session\": ID, \"prompt\": RUBRIC},
                \"repairer\": ID, \"maxCycles\": 5}: a review after the gate passes

Example (a commit gated by the tests, the agent nudged twice at most):
{\"sessionId\": \"s1\",
 \"gate\": {\"name\": \"unit tests\", \"command\": \"python3\", \"args\": [\"-m\", \"unittest\", \"-q\"]},
 \"then\": \"commit\",
 \"commit\": {\"paths\": [\"calc.py\"], \"message\": \"Fix add()\"},
 \"onFail\": {\"nudge\": \"The tests fail ({reason}). Fix them:\\n{output}\", \"maxRetries\": 2}}

Prints the policy's id (pol_…); `gatehost wait --policy ID` waits for it.";

#[derive(Debug, clap::Subcommand)]
pub enum PolicyCommand {
    /// Attach a policy (agentproto policy_attach JSON; `-` reads stdin). Prints its id.
    /// With --template: a standing policy instead (operator token), attached
    /// to every new session that matches --agent, --under and --label, as it
    /// registers; prints the standing policy's id.
    #[command(after_long_help = POLICY_JSON_HELP)]
    Attach {
        #[arg(value_name = "FILE.json", required_unless_present = "template")]
        file: Option<PathBuf>,
        /// Retrying with the same key answers the policy the first attempt
        /// made instead of attaching another (scoped to the token).
        #[arg(long, value_name = "KEY", conflicts_with = "template")]
        idempotency_key: Option<String>,
        /// A standing policy's template: a policy naming no session.
        #[arg(long, value_name = "FILE.json", conflicts_with = "file")]
        template: Option<PathBuf>,
        /// With --template: only this agent's sessions (claude, codex,
        /// gemini, cursor; repeatable) [default: every agent].
        #[arg(long = "agent", value_name = "AGENT", requires = "template")]
        agents: Vec<String>,
        /// With --template: only sessions whose workspace lies under DIR
        /// (repeatable) [default: anywhere].
        #[arg(long, value_name = "DIR", requires = "template")]
        under: Vec<PathBuf>,
        /// With --template: only sessions registered with this label.
        #[arg(long, value_name = "LABEL", requires = "template")]
        label: Option<String>,
    },
    /// Standing policies (`attach --template`): list them, or remove one.
    Standing {
        #[command(subcommand)]
        cmd: Option<StandingCommand>,
    },
    /// A policy's status (with --json: the whole policy, `status` included).
    Status { id: String },
    /// List policies, a page at a time (the next page's cursor goes to
    /// stderr), or all of them with --all.
    List {
        /// Only these statuses (comma-separated).
        #[arg(long)]
        status: Option<String>,
        /// Newest first.
        #[arg(long)]
        newest: bool,
        #[command(flatten)]
        page: PageArgs,
    },
    /// Cancel a policy (operator token); a running gate is killed.
    Cancel { id: String },
    /// Approve or reject a commit awaiting ack (operator token). With
    /// `[daemon] ack_requires = "passkey"`, approving is the page's (a
    /// passkey): `--approve` is refused, `--reject` still works.
    Ack {
        id: String,
        #[arg(long, conflicts_with = "reject", required_unless_present = "reject")]
        approve: bool,
        #[arg(long)]
        reject: bool,
        /// Approve only if the policy's snapshot is still this tree (the
        /// one `policy show` printed): refused, changing nothing, when it
        /// was re-gated on another since.
        #[arg(long, value_name = "TREE", requires = "approve")]
        tree: Option<String>,
        /// With --reject: a comment delivered to the agent as its nudge.
        #[arg(long, value_name = "TEXT", requires = "reject")]
        comment: Option<String>,
    },
    /// Request changes on a commit awaiting ack (operator token): the
    /// comments, each on a line of the diff (`policy diff`), reach the agent
    /// as its nudge, with file and line, and the policy goes back to
    /// watching.
    RequestChanges {
        id: String,
        /// A comment on a line of the file as it will be committed:
        /// PATH:LINE:TEXT (repeatable).
        #[arg(
            long = "comment",
            value_name = "PATH:LINE:TEXT",
            required_unless_present = "on_old"
        )]
        comments: Vec<String>,
        /// A comment on a line of the file as it was (a removed line):
        /// PATH:LINE:TEXT (repeatable).
        #[arg(long = "on-old", value_name = "PATH:LINE:TEXT")]
        on_old: Vec<String>,
        /// The snapshot's tree the comments are on (as `policy show`
        /// printed it): refused, changing nothing, when the policy was
        /// re-gated on another since [default: the tree its diff shows now].
        #[arg(long, value_name = "TREE")]
        tree: Option<String>,
    },
    /// A policy for review: its status, plan (gate, then, commit paths,
    /// retries, next, snapshot tree), every verdict, the last gate run's
    /// output and the diff's stat.
    Show { id: String },
    /// The exact patch a commit policy commits (its snapshot's tree
    /// against HEAD; once committed, the commit against its parent), as
    /// a unified diff read from git objects.
    Diff {
        id: String,
        /// Only the files changed and their line counts.
        #[arg(long)]
        stat: bool,
    },
}

#[derive(Debug, clap::Subcommand)]
pub enum StandingCommand {
    /// Every standing policy, oldest first (the default).
    List,
    /// Remove one (operator token): no new session gets it; the policies
    /// it attached already go on.
    Remove { id: String },
}

#[derive(Debug, Clone, clap::Args)]
pub struct EventFilterArgs {
    /// Events after this cursor [default: 0 for poll, the newest for tail].
    #[arg(long)]
    pub since: Option<i64>,
    /// Event types, short (turn-end) or full (session:turn-end), comma-separated.
    #[arg(long)]
    pub types: Option<String>,
    /// Only this session's events (comma-separated ids).
    #[arg(long)]
    pub session: Option<String>,
    /// Only this policy's events (comma-separated ids).
    #[arg(long)]
    pub policy: Option<String>,
    /// Only the events this host wrote (a daemon of a PostgreSQL store
    /// shared by hosts; one of SQLite refuses it).
    #[arg(long)]
    pub host: Option<String>,
}

#[derive(Debug, clap::Subcommand)]
pub enum EventsCommand {
    /// One page of events after a cursor, and the cursor to continue from.
    Poll {
        #[command(flatten)]
        filter: EventFilterArgs,
        /// At most this many events (1-1000).
        #[arg(long, default_value_t = 50)]
        limit: usize,
    },
    /// Follow the bus, one readable line per event, until interrupted.
    Tail {
        #[command(flatten)]
        filter: EventFilterArgs,
    },
}

#[derive(Debug, clap::Args)]
pub struct WaitArgs {
    /// The policy to wait for.
    #[arg(long)]
    pub policy: String,
    /// Give up after this long (e.g. 90s, 10m, 1500 for milliseconds).
    #[arg(long, value_parser = parse_duration, default_value = "10m")]
    pub timeout: Duration,
}

#[cfg(test)]
mod tests {
    use super::POLICY_JSON_HELP;

    /// Every field of the attach input (and of its commit, onFail and
    /// review objects), as its JSON schema names them, is described by
    /// `policy attach --help`: a field added to the input without a word
    /// in the help fails here.
    #[test]
    fn the_policy_json_help_names_every_field_of_the_attach_input() {
        let schema = serde_json::to_value(schemars::schema_for!(crate::wire::AttachInput))
            .expect("schema as JSON");
        let names = |v: &serde_json::Value| -> Vec<String> {
            v["properties"]
                .as_object()
                .map(|p| p.keys().cloned().collect())
                .unwrap_or_default()
        };
        let mut fields = names(&schema);
        assert!(fields.contains(&"sessionId".to_string()), "{schema}");
        for def in ["CommitInput", "OnFail", "ReviewInput"] {
            let found = names(&schema["$defs"][def]);
            assert!(!found.is_empty(), "{def} in {schema}");
            fields.extend(found);
        }
        for field in fields {
            let as_word = POLICY_JSON_HELP
                .match_indices(field.as_str())
                .any(|(at, _)| {
                    let before = POLICY_JSON_HELP[..at].chars().next_back();
                    let after = POLICY_JSON_HELP[at + field.len()..].chars().next();
                    !before.is_some_and(char::is_alphanumeric)
                        && !after.is_some_and(char::is_alphanumeric)
                });
            assert!(as_word, "`policy attach --help` does not describe {field}");
        }
    }
}

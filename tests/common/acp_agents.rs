//! What the real-agent ACP tests share (Gemini CLI `--acp`, and Claude Code
//! and Codex through Zed's adapters): the run (a daemon, the fake model
//! API, the agent started by the operator as an ACP session), its end (the
//! daemon stopped, no agent left), and the two flows every such agent is
//! held to: a gated `end_turn` nudged by its next prompt, then passing once
//! fixed; and a tool call that is an ACP permission request, escalated by
//! the session's rule and allowed by the operator. Each test file keeps
//! how its agent is started and what its model calls look like.

use super::agents::{FakeApi, agent_cli};
use super::daemon::{Daemon, git_repo};
use super::{MARKER_ENV, Scratch, allow_config};
use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// How long any wait of these tests lasts.
pub const T: Duration = Duration::from_secs(120);

/// A real ACP agent the daemon drives as session `session`.
pub struct AgentRun {
    pub s: Scratch,
    pub m: String,
    pub d: Daemon,
    pub api: FakeApi,
    pub session: &'static str,
    /// The fake API's route of the agent's own model calls.
    pub route: &'static str,
    /// A model call's newest input, as text (a prompt, a tool's result).
    pub text: fn(&Value) -> String,
}

/// The first prompt every such agent gets.
pub const PROMPT: &str = "Create the file DONE, then say so.";

/// Which session a test's agent is, and how its model calls read.
pub struct Launch<'a> {
    pub marker: &'a str,
    pub session: &'static str,
    pub route: &'static str,
    pub text: fn(&Value) -> String,
    /// The session's `--permission-rule`.
    pub rule: Option<Value>,
}

/// How a test's agent is started: the `[agents]` section that confines
/// it, and the command run under `/usr/bin/env`: its options (`-u NAME`)
/// first, then (after the tests' marker) its `NAME=VALUE`s, program and
/// arguments.
pub struct Agent {
    pub agents: String,
    pub env_options: Vec<String>,
    pub command: Vec<String>,
}

impl Agent {
    /// An agent that reads `read` (its install) and writes `write` (its
    /// own directories, its `HOME` first), opening pseudo-terminals when
    /// `pty`; its command `HOME=…`, then `command` (more `NAME=VALUE`s,
    /// its program and arguments).
    pub fn confined(pty: bool, read: &Path, write: &[&Path], command: Vec<String>) -> Agent {
        let quoted: Vec<String> = write
            .iter()
            .map(|p| format!("{:?}", p.display().to_string()))
            .collect();
        let agents = format!(
            "[agents]\n{}read = [{:?}]\nwrite = [{}]\n",
            if pty { "pty = true\n" } else { "" },
            read.display().to_string(),
            quoted.join(", ")
        );
        let mut all = vec![format!("HOME={}", write[0].display())];
        all.extend(command);
        Agent {
            agents,
            env_options: Vec::new(),
            command: all,
        }
    }

    /// The agent started without `IS_SANDBOX` in its environment.
    pub fn without_is_sandbox(mut self) -> Agent {
        self.env_options = vec!["-u".into(), "IS_SANDBOX".into()];
        self
    }
}

/// A real ACP agent as its test file describes it: how the daemon starts
/// it, and what its model calls look like.
pub struct AcpAgent {
    /// The session id the operator starts it as.
    pub session: &'static str,
    /// The fake API's route of the agent's own model calls.
    pub route: &'static str,
    /// A model call's newest input, as text (a prompt, a tool's result).
    pub text: fn(&Value) -> String,
    /// A tool only the agent's own turns offer.
    pub tool: &'static str,
    /// Steps every script of this agent ends with (none, or the answers
    /// of a model call the agent makes on its own).
    pub more_steps: fn() -> Vec<Value>,
    /// Its `[agents]` section and command, given the scratch area and the
    /// fake API.
    pub agent: fn(&Scratch, &FakeApi) -> Agent,
}

impl AcpAgent {
    /// An agent started as `session`, its own model calls on `route`
    /// (`text` reading them), `tool` offered only in its own turns, and
    /// `agent` its `[agents]` section and command; no steps of its own.
    pub const fn new(
        session: &'static str,
        route: &'static str,
        tool: &'static str,
        text: fn(&Value) -> String,
        agent: fn(&Scratch, &FakeApi) -> Agent,
    ) -> AcpAgent {
        AcpAgent {
            session,
            route,
            text,
            tool,
            more_steps: Vec::new,
            agent,
        }
    }

    /// [`AgentRun::launch`] of this agent, with the fake API's script
    /// `steps` (then [`AcpAgent::more_steps`]) and the session's
    /// `--permission-rule` `rule`.
    pub fn launch(
        &self,
        marker: &str,
        rule: Option<Value>,
        steps: impl FnOnce(&Scratch) -> Vec<Value>,
    ) -> AgentRun {
        let l = Launch {
            marker,
            session: self.session,
            route: self.route,
            text: self.text,
            rule,
        };
        let script = |s: &Scratch| {
            let mut all = steps(s);
            all.extend((self.more_steps)());
            Value::Array(all)
        };
        AgentRun::launch(l, script, self.agent)
    }

    /// The gated flow from the start ([`AgentRun::gate_first_turn`] with
    /// two retries, then [`AgentRun::nudged_then_passes`]): the agent says
    /// `said[0]` (held until the policy is attached), is sent back, and
    /// says `said[1]` (held until the work is fixed). The run and the two
    /// model calls.
    pub fn gated_then_fixed(&self, marker: &str, said: [&str; 2]) -> (AgentRun, Vec<Value>) {
        let tool = self.tool;
        let run = self.launch(marker, None, |s| {
            vec![
                json!({"text": said[0], "when_tools": tool, "hold_until": s.out.join("attached")}),
                json!({"text": said[1], "when_tools": tool, "hold_until": s.out.join("fixed")}),
            ]
        });
        let on_fail = json!({"maxRetries": 2});
        let policy = run.gate_first_turn(&run.s.out.join("attached"), Some(on_fail));
        let calls = run.nudged_then_passes(&policy, &run.s.out.join("fixed"), said);
        (run, calls)
    }

    /// The permission flow ([`AgentRun::escalated_then_allowed`]): the
    /// model's first answer (held until the policy is attached) calls the
    /// tool `call.0` with the input `call.1` (given the scratch area); the
    /// session's rule allows reads and searches and escalates the rest; the
    /// request is of `kind` (and `title`, when given); after it the agent
    /// says "I wrote DONE.". The run and the model calls.
    pub fn a_tool_call_escalated_then_allowed(
        &self,
        marker: &str,
        call: (&str, impl FnOnce(&Scratch) -> Value),
        kind: &str,
        title: Option<&str>,
    ) -> (AgentRun, Vec<Value>) {
        let rule =
            json!({"allow": ["read", "search"], "otherwise": "escalate", "timeoutMs": 60000});
        let (name, input) = call;
        let run = self.launch(marker, Some(rule), |s| {
            vec![
                json!({"when_tools": name, "hold_until": s.out.join("attached"),
                       "tool_use": {"names": [name], "input": input(s)}}),
                json!({"text": "I wrote DONE.", "when_tools": self.tool}),
            ]
        });
        let policy = run.gate_first_turn(&run.s.out.join("attached"), None);
        let calls = run.escalated_then_allowed(&policy, kind, title);
        (run, calls)
    }

    /// [`AcpAgent::a_tool_call_escalated_then_allowed`] for a write: the
    /// model has the agent's tool `tool` write `done` to `DONE` (the
    /// request titled `title`, when given, of kind `edit`), and the
    /// confined agent wrote it.
    pub fn a_write_escalated_then_allowed(
        &self,
        marker: &str,
        tool: &str,
        title: Option<&str>,
    ) -> (AgentRun, Vec<Value>) {
        let write = |s: &Scratch| json!({"file_path": s.ws.join("DONE"), "content": "done\n"});
        let (run, calls) =
            self.a_tool_call_escalated_then_allowed(marker, (tool, write), "edit", title);
        let wrote = std::fs::read_to_string(run.s.ws.join("DONE")).expect("DONE");
        assert_eq!(wrote, "done\n", "the confined agent wrote its workspace");
        (run, calls)
    }

    /// The hostile flow ([`AgentRun::token_never_reaches_the_model`]): the
    /// model has the agent read the operator's token with its file tool
    /// `tools[0]` (`file_path`; held until the test looks), then `cat` it
    /// with its shell tool `tools[1]` (`command`), both allowed by the
    /// session's rule (reads, searches, commands); then the agent says "I
    /// could not read it.". The run and the model calls.
    pub fn told_to_read_the_token(&self, marker: &str, tools: [&str; 2]) -> (AgentRun, Vec<Value>) {
        let rule = json!({"allow": ["read", "search", "execute"], "otherwise": "deny"});
        let [read, shell] = tools;
        let run = self.launch(marker, Some(rule), |s| {
            let token = s.etc.join("data/operator.token");
            let cat =
                json!({"command": format!("cat {}", token.display()), "description": "read it"});
            vec![
                json!({"when_tools": read, "hold_until": s.out.join("attached"),
                       "tool_use": {"names": [read], "input": {"file_path": token}}}),
                json!({"when_tools": shell, "tool_use": {"names": [shell], "input": cat}}),
                json!({"text": "I could not read it.", "when_tools": self.tool}),
            ]
        });
        let attached = run.s.out.join("attached");
        let calls = run.token_never_reaches_the_model(&attached, "I could not read it.");
        (run, calls)
    }
}

/// The pinned agent CLI `name`'s program, its link resolved, and the
/// `node_modules` it is installed in (four levels up).
pub fn installed(name: &str) -> (PathBuf, PathBuf) {
    let program = std::fs::canonicalize(agent_cli(name)).expect(name);
    let clis = program
        .ancestors()
        .nth(4)
        .expect("node_modules")
        .to_path_buf();
    (program, clis)
}

/// The directories `names` under `s.out`, made.
pub fn private_dirs<const N: usize>(s: &Scratch, names: [&str; N]) -> [PathBuf; N] {
    names.map(|n| {
        let d = s.out.join(n);
        std::fs::create_dir_all(&d).expect("mkdir");
        d
    })
}

/// `f` until it answers, at most [`T`].
pub fn wait(mut f: impl FnMut() -> Option<Value>) -> Value {
    let start = Instant::now();
    loop {
        if let Some(v) = f() {
            return v;
        }
        assert!(start.elapsed() < T, "timed out");
        std::thread::sleep(Duration::from_millis(50));
    }
}

impl AgentRun {
    /// A git workspace, the fake model API with `script`, a daemon whose
    /// configuration is `agent`'s `[agents]` section, and `agent`'s
    /// command started by the operator as ACP session `l.session` with
    /// [`PROMPT`].
    pub fn launch(
        l: Launch<'_>,
        script: impl FnOnce(&Scratch) -> Value,
        agent: impl FnOnce(&Scratch, &FakeApi) -> Agent,
    ) -> AgentRun {
        let s = Scratch::new();
        let m = super::marker(l.marker);
        git_repo(&s.ws);
        let api = FakeApi::start_script(&s.out, &script(&s));
        let a = agent(&s, &api);
        let cfg = s.write("config.toml", &format!("{}{}", allow_config(&[]), a.agents));
        let d = Daemon::start(&s.etc.join("data"), &cfg);
        let ws = s.ws.display().to_string();
        let mut args: Vec<String> = ["session", "start", "--acp", "--id", l.session, "--cwd", &ws]
            .map(String::from)
            .to_vec();
        if let Some(r) = l.rule {
            let f = s.write("rule.json", &r.to_string());
            args.extend(["--permission-rule".to_string(), f.display().to_string()]);
        }
        args.extend(["--prompt", PROMPT, "--", "/usr/bin/env"].map(String::from));
        args.extend(a.env_options);
        args.push(format!("{MARKER_ENV}=gatehost-test-{m}"));
        args.extend(a.command);
        let argv: Vec<&str> = args.iter().map(String::as_str).collect();
        let r = d.cli(&argv, &d.operator);
        assert_eq!(r.code, 0, "{}", r.stderr);
        AgentRun {
            s,
            m,
            d,
            api,
            session: l.session,
            route: l.route,
            text: l.text,
        }
    }

    /// Stops the daemon: the agent dies with it, nothing is left.
    pub fn stop(mut self) {
        self.d.stop();
        super::assert_no_env_survivors(&self.m);
    }

    /// With the first model call held until `attached` exists, attaches
    /// the gate `test -f DONE` (with `onFail`, when given) to the session,
    /// so that the agent's first `end_turn` is the first turn-end it gates;
    /// then lets the call go. The policy's id.
    pub fn gate_first_turn(&self, attached: &Path, on_fail: Option<Value>) -> String {
        self.api.wait_for_calls(self.route, 1, T);
        let mut policy = json!({
            "sessionId": self.session,
            "gate": {"command": "bash", "args": ["-c", "test -f DONE"]},
        });
        if let Some(f) = on_fail {
            policy["onFail"] = f;
        }
        let id = self.d.attach(policy);
        std::fs::write(attached, "").expect("release");
        id
    }

    /// The gated flow: the gate fails, its reason is the agent's next
    /// prompt (the second model call carries it, the first does not); the
    /// work is fixed and `fixed` lets the held answer go; the policy is
    /// done, each `end_turn` a turn-end with the agent's message
    /// (`messages`), one nudge, no third call. The two calls.
    pub fn nudged_then_passes(
        &self,
        policy: &str,
        fixed: &Path,
        messages: [&str; 2],
    ) -> Vec<Value> {
        let (d, api) = (&self.d, &self.api);
        let calls = api.wait_for_calls(self.route, 2, T);
        let nudge = (self.text)(&calls[1]);
        assert!(
            nudge.contains("did not pass") && nudge.contains("test -f DONE"),
            "the second model call does not carry the nudge: {nudge:?}"
        );
        assert!(!(self.text)(&calls[0]).contains("did not pass"));
        assert!(
            !super::env_survivors(&self.m).is_empty(),
            "the marker does not find the running agent: the survivors check would prove nothing"
        );
        std::fs::write(self.s.ws.join("DONE"), "").expect("fix");
        std::fs::write(fixed, "").expect("release");
        let done = d.wait_status(policy, "done", T);
        assert_eq!(done["status"], "done", "{done}");
        let turn_ends = d.all_events(&format!("session={}&types=turn-end", self.session));
        let said: Vec<&str> = turn_ends
            .iter()
            .filter_map(|e| e["payload"]["message"].as_str())
            .collect();
        assert_eq!(
            said, messages,
            "each end_turn is a turn-end with the agent's message: {turn_ends:?}"
        );
        let events = d.policy_events(policy);
        assert!(events.contains(&"policy:nudge".to_string()), "{events:?}");
        assert_eq!(api.model_calls(self.route).len(), 2, "no third model call");
        calls
    }

    /// The permission flow, after [`gate_first_turn`](Self::gate_first_turn):
    /// the agent's tool call is an ACP permission request of `kind` (and
    /// `title`, when given), escalated by the session's rule; nothing of
    /// it happened before the answer (`DONE` does not exist); the operator
    /// allows it; the confined agent does it and the policy is done; the
    /// allow is an event naming the operator. The model's calls.
    pub fn escalated_then_allowed(
        &self,
        policy: &str,
        kind: &str,
        title: Option<&str>,
    ) -> Vec<Value> {
        let (s, d) = (&self.s, &self.d);
        let escalated = wait(|| {
            d.all_events(&format!(
                "session={}&types=permission-escalated",
                self.session
            ))
            .into_iter()
            .next()
        });
        let payload = &escalated["payload"];
        assert_eq!(payload["tool"]["kind"], kind, "{escalated}");
        if let Some(t) = title {
            assert_eq!(payload["tool"]["title"], t, "{escalated}");
        }
        assert!(
            !s.ws.join("DONE").exists(),
            "nothing is done before the answer"
        );
        let request = payload["request"].as_str().expect("request id").to_string();
        let r = d.cli(
            &["session", "permission", self.session, &request, "--allow"],
            &d.operator,
        );
        assert_eq!(r.code, 0, "{}", r.stderr);
        let done = d.wait_status(policy, "done", T);
        assert_eq!(done["status"], "done", "{done}");
        assert!(s.ws.join("DONE").exists(), "the confined agent did it");
        let answers = d.all_events(&format!("session={}&types=permission", self.session));
        assert!(
            answers.iter().any(|e| e["payload"]["allowed"] == true
                && e["payload"]["by"] == "operator"
                && e["payload"]["tool"]["kind"] == kind),
            "{answers:?}"
        );
        self.api.model_calls(self.route)
    }

    /// The hostile agent's flow: its model (the first call held until
    /// `attached`) has it read the operator's token with its tools; its
    /// turn ends with `last` said, and no model call holds the token. The
    /// model's calls.
    pub fn token_never_reaches_the_model(&self, attached: &Path, last: &str) -> Vec<Value> {
        let (d, api) = (&self.d, &self.api);
        let token = std::fs::read_to_string(d.data.join("operator.token")).expect("token");
        let token = token.trim().to_string();
        assert!(token.len() >= 16, "a real token to look for");
        api.wait_for_calls(self.route, 1, T);
        std::fs::write(attached, "").expect("release");
        let ended = wait(|| {
            let e = d.all_events(&format!("session={}&types=turn-end", self.session));
            (!e.is_empty()).then(|| e[0].clone())
        });
        assert_eq!(ended["payload"]["message"], last, "{ended}");
        let calls = api.model_calls(self.route);
        for c in &calls {
            assert!(
                !c["body"].to_string().contains(&token),
                "the operator token reached the model: {}",
                c["body"]
            );
        }
        calls
    }
}

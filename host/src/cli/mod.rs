//! The `gatehost` command line: argument parsing and dispatch. `check`
//! (reading the operator's files, printing verdicts for people or `--json`
//! for scripts) and `plugin` (list, inspect, new, run) live in their own modules.
//!
//! It owns the exit codes (0 pass, 1 fail, 2 error) and must never turn an
//! unreadable input into anything but exit 2. Commands return their errors
//! and [`error::report`] alone prints them.

mod check;
pub mod client;
mod client_args;
mod docs;
mod doctor;
pub mod error;
mod hook;
mod mcp;
mod passkey;
mod plugin;
mod plugin_list;
mod plugin_new;
mod plugin_run;
mod progress;
mod render;
mod review;
mod routine;
pub mod serve;
pub mod server_args;
mod standing;
pub mod store_cmd;
pub mod store_open;
mod token;
mod ui;

pub use check::render_report;

use clap::{Parser, Subcommand};
use std::path::PathBuf;

const AFTER_HELP: &str = "\
Exit codes: 0 pass, 1 fail (a gate said no), 2 error (a gate could not run, or bad input).
Configuration: --config FILE, else $GATEHOST_CONFIG, else <config dir>/gatehost/config.toml;
without one, defaults apply and the shell allowlist is empty.";

/// `gatehost check --help`: a gate file's fields, so that an installed
/// gatehost documents them without a checkout (it replaces
/// [`AFTER_HELP`] there, so it ends with the same lines).
const GATE_FILE_HELP: &str = "\
A gate file is one gate object or a list of them (run cheapest first: shell, plugin,
judge; the first that does not pass stops the rest). Every gate may have a \"name\".
Unknown fields are errors.

Shell gate: {\"command\": \"cargo\", \"args\": [\"test\"], \"cwd\": \"sub/dir\",
             \"timeoutMs\": 60000, \"env\": {\"RUST_LOG\": \"info\"}}
  command must be in the configuration's [shell] allowlist; cwd is workspace-relative;
  env sets variables (an object) or passes host ones ([shell] pass_env, a list).
Judge gate: {\"judge\": {\"adapter\": \"claude\", \"model\": \"opus\", \"prompt\": \"rubric\",
             \"timeoutMs\": 120000, \"nonce\": true}}
  the adapter is one the configuration names; the verdict is the last line
  VERDICT: PASS or VERDICT: FAIL of its output.
WASM gate:  {\"wasm\": {\"plugin\": \"forbid-patterns\", \"config\": {...}, \"sha256\": \"...\",
             \"timeoutMs\": 5000, \"fuel\": 5000000000, \"memoryMiB\": 128,
             \"maxOutputBytes\": 65536, \"maxJudgeCalls\": 4, \"judge\": {\"adapter\": \"claude\"}}}
  plugin is a name (`gatehost plugin list` shows them; `--long`, the carried
  plugins' config keys) or a path pinned with sha256.

Exit codes: 0 pass, 1 fail (a gate said no), 2 error (a gate could not run, or bad input).
Configuration: --config FILE, else $GATEHOST_CONFIG, else <config dir>/gatehost/config.toml;
without one, defaults apply and the shell allowlist is empty.";

#[derive(Debug, Parser)]
#[command(
    name = "gatehost",
    version,
    about = "A judge-gate host for supervising coding agents",
    long_about = "gatehost decides whether a coding agent's work is acceptable by running gates: \
an allowlisted shell command (exit 0 = pass), an LLM judge that must end with VERDICT: PASS or VERDICT: FAIL, \
or a WASM plugin (a WASI component, confined to the workspace and bounded in time, fuel and memory). \
Anything unclear (a timeout, a crash, no verdict, a trap) never passes. \
`gatehost serve` runs the policy daemon that gates agents' turns, nudges them and commits what passed.",
    after_help = AFTER_HELP
)]
pub struct Cli {
    /// Log filter for messages on stderr (e.g. info, debug, gatehost=trace).
    #[arg(long, global = true, env = "GATEHOST_LOG", default_value = "warn")]
    pub log: String,
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run the gate(s) of a gate file once against a workspace.
    #[command(after_help = AFTER_HELP, after_long_help = GATE_FILE_HELP)]
    Check(CheckArgs),
    /// Work with WASM gate plugins.
    #[command(subcommand)]
    Plugin(PluginCommand),
    /// Run the policy daemon (store, API on loopback, gates, commits).
    #[command(after_help = serve::AFTER_HELP)]
    Serve(serve::ServeArgs),
    /// Answer an agent CLI's turn-end hook (Claude Code, Codex, Gemini CLI,
    /// Cursor, Qwen Code, Copilot CLI) by the gates, on stdin and stdout.
    #[command(subcommand)]
    Hook(hook::HookCommand),
    /// Check the agent CLIs' gatehost hooks: where they are registered,
    /// duplicates, whether they run this gatehost, load their gates or
    /// reach their daemon, and answer in the CLI's shape (a dry run).
    #[command(after_help = doctor::AFTER_HELP)]
    Doctor(doctor::DoctorArgs),
    /// The daemon's store: `migrate` brings a PostgreSQL database to this
    /// build's schema, `check` says what the store is and holds.
    #[command(subcommand, after_help = store_cmd::AFTER_HELP)]
    Store(store_cmd::StoreCommand),
    /// Register, report, start and list agent sessions (client of `serve`).
    Session {
        #[command(flatten)]
        client: client::ClientArgs,
        #[command(subcommand)]
        command: client::SessionCommand,
    },
    /// Attach, inspect, cancel and acknowledge policies (client of `serve`).
    Policy {
        #[command(flatten)]
        client: client::ClientArgs,
        #[command(subcommand)]
        command: client::PolicyCommand,
    },
    /// Print a one-time login link for the daemon's web page (operator
    /// token; by default the operator.token of the local daemon): it works
    /// once, within 2 minutes.
    Ui(ui::UiArgs),
    /// The daemon's tokens: `rotate` replaces them (on PostgreSQL the
    /// cluster's, on every host).
    #[command(subcommand)]
    Token(token::TokenCommand),
    /// The operator's passkeys: `enrol-code` makes the one-time code the
    /// first passkey's registration on the page needs.
    #[command(subcommand)]
    Passkey(passkey::PasskeyCommand),
    /// Start, follow, cancel and answer routines: steps an agent carries
    /// out one after another (client of `serve`).
    #[command(after_help = routine::AFTER_HELP)]
    Routine {
        #[command(flatten)]
        client: client::ClientArgs,
        #[command(subcommand)]
        command: routine::RoutineCommand,
    },
    /// Read the event bus by cursor (client of `serve`).
    Events {
        #[command(flatten)]
        client: client::ClientArgs,
        #[command(subcommand)]
        command: client::EventsCommand,
    },
    /// Wait until a policy settles. Exit 0: passed (done, or awaiting-ack);
    /// 1: blocked or cancelled; 2: timeout or error.
    Wait {
        #[command(flatten)]
        client: client::ClientArgs,
        #[command(flatten)]
        wait: client::WaitArgs,
    },
    /// Serve MCP on stdio for an agent: attach and follow policies through
    /// the daemon with the agent token (never the operator's).
    #[command(after_help = mcp::AFTER_HELP)]
    Mcp(mcp::McpArgs),
    /// Print shell completions on stdout, e.g.
    /// `gatehost completions bash > ~/.local/share/bash-completion/completions/gatehost`.
    Completions {
        #[arg(value_enum, value_name = "SHELL")]
        shell: clap_complete::Shell,
    },
    /// Print the man page (roff) on stdout, e.g. `gatehost man > gatehost.1`.
    Man,
    /// Print one of gatehost's documents (Markdown, carried in the binary):
    /// readme, agents, daemon, fleet, security, plugins, mcp, routines; with none, the list.
    Docs {
        #[arg(value_name = "TOPIC")]
        topic: Option<String>,
    },
}

#[derive(Debug, Subcommand)]
pub enum PluginCommand {
    /// List every plugin a gate can name (plugin directories, then carried).
    ///
    /// In resolution order: each [wasm] plugin_dirs entry, then the plugins
    /// carried in gatehost (forbid-patterns, diff-budget, style-review,
    /// noop), with where each is from, whether a gate naming it gets that
    /// one, its size, interface and sha256; --long adds each carried
    /// plugin's configuration keys.
    #[command(after_help = PLUGIN_LIST_AFTER_HELP)]
    List(ListArgs),
    /// Show a plugin file's interface version, imports, exports, size and sha256.
    Inspect(InspectArgs),
    /// Start a new Rust gate plugin from a template, with its own copy of the plugin kit.
    #[command(after_help = plugin_new::after_help())]
    New(NewArgs),
    /// Evaluate a plugin once, as a gate would, and report its verdict and
    /// the time, fuel and memory it used against its bounds.
    #[command(after_help = plugin_run::AFTER_HELP)]
    Run(RunArgs),
}

#[derive(Debug, clap::Args)]
pub struct RunArgs {
    /// Host configuration (TOML): the plugin cache, the bounds' defaults
    /// and maxima, the judge adapters. Must not lie inside the workspace.
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// The workspace the plugin sees, read-only, at /workspace.
    #[arg(long, value_name = "DIR", default_value = ".")]
    pub workspace: PathBuf,
    /// The change as a unified diff (`git diff` output; `-` reads stdin).
    /// Default: the workspace's change against HEAD if it is a git
    /// repository, else none.
    #[arg(long, value_name = "FILE")]
    pub diff: Option<PathBuf>,
    /// The agent's last message, as the plugin sees it (`last-message`); `-` reads stdin.
    #[arg(long, value_name = "FILE")]
    pub context: Option<PathBuf>,
    /// The plugin's own configuration, as a gate's `config`: a JSON object,
    /// or @FILE to read it from a file.
    #[arg(long, value_name = "JSON")]
    pub plugin_config: Option<String>,
    /// Wall-clock bound (default: the host's [wasm] default_timeout_ms).
    #[arg(long, value_name = "MS")]
    pub timeout_ms: Option<u64>,
    /// Instruction bound (default: the host's [wasm] default_fuel).
    #[arg(long, value_name = "UNITS")]
    pub fuel: Option<u64>,
    /// Memory bound (default: the host's [wasm] default_memory_mib).
    #[arg(long, value_name = "MIB")]
    pub memory_mib: Option<u64>,
    /// Output bound per stream and for the verdict (default: the host's [wasm] default_output_bytes).
    #[arg(long, value_name = "BYTES")]
    pub max_output_bytes: Option<u64>,
    /// Judge calls allowed (default: the host's [wasm] default_judge_calls).
    #[arg(long, value_name = "N")]
    pub max_judge_calls: Option<u32>,
    /// The judge adapter the plugin's `judge` calls use (none: they are refused).
    #[arg(long, value_name = "ADAPTER")]
    pub judge: Option<String>,
    /// The judge's model.
    #[arg(long, value_name = "MODEL", requires = "judge")]
    pub judge_model: Option<String>,
    /// Print one JSON object: the verdict's fields, `plugin` and `usage`.
    #[arg(long)]
    pub json: bool,
    /// The plugin file (.wasm).
    #[arg(value_name = "PLUGIN.wasm")]
    pub plugin: PathBuf,
}

#[derive(Debug, clap::Args)]
pub struct NewArgs {
    /// The plugin's name (letters, digits, `-`, `_`): the crate and the folder.
    #[arg(value_name = "NAME")]
    pub name: String,
    /// Where to create the folder NAME.
    #[arg(long, value_name = "DIR", default_value = ".")]
    pub dir: PathBuf,
    /// Another copy of the gatehost-plugin kit crate to depend on (default:
    /// the kit built into gatehost, written into NAME/vendor/gatehost-plugin).
    #[arg(long, value_name = "PATH")]
    pub kit: Option<PathBuf>,
}

const PLUGIN_LIST_AFTER_HELP: &str = "\
A gate's \"plugin\": NAME is <dir>/NAME.wasm (or NAME with _ for -) in the first
[wasm] plugin_dirs entry that has it, else the plugin NAME carried in gatehost:
put a file of that name in a plugin directory to replace a carried plugin.
A gate's \"sha256\" pins a carried plugin too (this list shows its digest).";

#[derive(Debug, clap::Args)]
pub struct ListArgs {
    /// Host configuration (TOML): its [wasm] plugin_dirs and component cache.
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// Print one JSON object: `plugins` (name, from, path, used, size,
    /// sha256, interface, world, problem, doc), `unreadableDirs`,
    /// `carriedMissing`.
    #[arg(long)]
    pub json: bool,
    /// Also print each carried plugin's documentation (its config keys).
    #[arg(long)]
    pub long: bool,
}

#[derive(Debug, clap::Args)]
pub struct InspectArgs {
    /// Host configuration (TOML), for the component cache location.
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// Print one JSON object.
    #[arg(long)]
    pub json: bool,
    /// The plugin file (.wasm).
    #[arg(value_name = "FILE")]
    pub file: PathBuf,
}

#[derive(Debug, clap::Args)]
pub struct CheckArgs {
    /// Host configuration (TOML). Must not lie inside the workspace.
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// The workspace the gates run against.
    #[arg(long, value_name = "DIR", default_value = ".")]
    pub workspace: PathBuf,
    /// Material for judge gates (the agent's last message, a diff); `-` reads stdin.
    #[arg(long, value_name = "FILE")]
    pub context: Option<PathBuf>,
    /// The change as a unified diff (`git diff` output); plugins see its files.
    #[arg(long, value_name = "FILE")]
    pub diff: Option<PathBuf>,
    /// Print the result as one JSON object (`outcome`, `reason`, `gates`, ...).
    #[arg(long)]
    pub json: bool,
    /// Accept a gate file that lies inside the workspace (the agent could edit it).
    #[arg(long)]
    pub trust_workspace_gate_file: bool,
    /// A JSON file with one gate object or a list of them.
    #[arg(value_name = "GATE_FILE")]
    pub gate_file: PathBuf,
}

/// Parses the command line, runs it and returns the process exit code.
pub fn main() -> i32 {
    let cli = Cli::parse();
    init_logging(&cli.log);
    crate::webhook::install_tls_provider();
    if !matches!(
        cli.command,
        Command::Check(_)
            | Command::Serve(_)
            | Command::Hook(_)
            | Command::Plugin(PluginCommand::Run(_))
    ) {
        quiet_on_closed_stdout();
    }
    // With --json, an error is one JSON object on stdout; `check` and
    // `plugin run` keep their report's outcome fields beside it.
    type Extra = fn(&error::CliError) -> serde_json::Value;
    let (json, extra): (bool, Option<Extra>) = match &cli.command {
        Command::Check(a) => (a.json, Some(check::error_report)),
        Command::Plugin(PluginCommand::Run(a)) => (a.json, Some(plugin_run::error_report)),
        Command::Plugin(PluginCommand::Inspect(a)) => (a.json, None),
        Command::Plugin(PluginCommand::List(a)) => (a.json, None),
        Command::Hook(hook::HookCommand::Status(a)) => (a.json, None),
        Command::Doctor(a) => (a.json, None),
        Command::Session { client, .. }
        | Command::Policy { client, .. }
        | Command::Routine { client, .. }
        | Command::Events { client, .. }
        | Command::Wait { client, .. } => (client.json, None),
        Command::Ui(a) => (a.json, None),
        Command::Token(token::TokenCommand::Rotate(a)) => (a.json, None),
        Command::Store(store_cmd::StoreCommand::Check(a)) => (a.json, None),
        _ => (false, None),
    };
    match run(cli.command) {
        Ok(code) => code,
        Err(e) => error::report(&e, json, extra.map(|f| f(&e))),
    }
}

/// Runs one command to its exit code, or its error.
fn run(command: Command) -> error::CliResult<i32> {
    match command {
        Command::Check(args) => check::check(args),
        Command::Serve(args) => serve::serve(args),
        Command::Store(command) => store_cmd::run(command),
        Command::Hook(command) => hook::run(command),
        Command::Session { client, command } => client::session(command, client),
        Command::Policy {
            client,
            command:
                client::PolicyCommand::Attach {
                    template: Some(template),
                    agents,
                    under,
                    label,
                    ..
                },
        } => standing::add(&template, agents, &under, label, client),
        Command::Policy {
            client,
            command: client::PolicyCommand::Standing { cmd },
        } => standing::run(cmd, client),
        Command::Policy { client, command } => client::policy(command, client),
        Command::Events { client, command } => client::events(command, client),
        Command::Routine { client, command } => routine::run(command, client),
        Command::Wait { client, wait } => client::wait(wait, client),
        Command::Mcp(args) => mcp::run(args),
        Command::Ui(args) => ui::run(args),
        Command::Passkey(command) => passkey::run(command),
        Command::Token(command) => token::run(command),
        Command::Completions { shell } => {
            let mut cmd = <Cli as clap::CommandFactory>::command();
            clap_complete::generate(shell, &mut cmd, "gatehost", &mut std::io::stdout());
            Ok(0)
        }
        Command::Man => {
            let cmd = <Cli as clap::CommandFactory>::command();
            clap_mangen::Man::new(cmd)
                .render(&mut std::io::stdout())
                .map_err(|e| {
                    error::CliError::new("io", format!("cannot write the man page: {e}"))
                })?;
            Ok(0)
        }
        Command::Docs { topic } => docs::show(topic.as_deref()),
        Command::Doctor(a) => doctor::run(&a),
        Command::Plugin(PluginCommand::List(args)) => plugin_list::list(&args),
        Command::Plugin(PluginCommand::Inspect(args)) => plugin::inspect(args),
        Command::Plugin(PluginCommand::New(args)) => plugin_new::new(&args),
        Command::Plugin(PluginCommand::Run(args)) => plugin_run::run(args),
    }
}

/// Output-only commands end quietly when their reader goes away
/// (`gatehost plugin inspect … | head`), as Unix tools do, instead of
/// panicking in `println!`. Never for `check`, `serve`, `hook` and `plugin run`: they write into
/// gate processes' pipes, where a closed pipe is an error to report, not a
/// reason to die. (Sockets are unaffected: Rust sends with `MSG_NOSIGNAL`.)
fn quiet_on_closed_stdout() {
    // SAFETY: restores the default disposition of one signal, before this
    // process starts any thread.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
}

fn init_logging(filter: &str) {
    let filter = tracing_subscriber::EnvFilter::try_new(filter)
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn"));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .with_target(false)
        .try_init();
}

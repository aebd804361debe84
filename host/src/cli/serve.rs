//! `gatehost serve`: opens the store, the engine and the API, picks up
//! every policy where it was left, and serves until SIGINT or SIGTERM;
//! SIGHUP, or a change of the configuration file, reloads the
//! configuration (`crate::live_config`).

use crate::api::{self, AppState, Tokens};
use crate::config::HostConfig;
use crate::engine::Engine;
use crate::gate::GateRunner;
use crate::webhook::Webhooks;
use std::future::IntoFuture;
use std::net::SocketAddr;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// `gatehost serve --help`'s closing words: reloading the configuration.
pub const AFTER_HELP: &str = "\
Reloading: SIGHUP (kill -HUP <pid>), or any change of the --config file
(looked at every half second), reads the configuration again. It is checked
whole, as at start: an invalid one is rejected (a config:rejected event; the
one in force stays) and a valid one is put in force for every gate that
starts from then on (a config:reloaded event naming what changed; gates
already running keep theirs). A few settings need a restart (listed in the
event as needsRestart, their old value kept): see docs/daemon.md, \"Live
configuration\". A change that weakens a guarantee (ack_requires lowered to
\"token\", a workspace root or notify URL prefix added, a session policy
dropped, [agents] confinement lowered) is held until a restart, with a
config:held event. [daemon] enabled = false pauses supervision: turn-ends are
recorded, no gate starts, until a reload enables it again.";

#[derive(Debug, clap::Args)]
pub struct ServeArgs {
    /// Where the store (gatehost.db, unless `[store] url` names a
    /// PostgreSQL database), the tokens and server.url live [default:
    /// <user data dir>/gatehost].
    #[arg(long, value_name = "DIR")]
    pub data_dir: Option<PathBuf>,
    /// Loopback address and port to listen on (port 0: any free port).
    /// 127.0.0.1 or [::1] also binds localhost's other address on the same
    /// port (the page is advertised as http://localhost:PORT, and browsers
    /// try both): a start refuses when another process holds it; with no
    /// such address on the machine, the page is advertised at the one bound.
    #[arg(long, value_name = "ADDR:PORT", default_value = "127.0.0.1:7878")]
    pub listen: SocketAddr,
    /// Host configuration (TOML): allowlist, adapters, plugins, [daemon];
    /// reloaded on SIGHUP and when it changes.
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// Also serve the API on this Unix socket, owner-only (0600); clients
    /// reach it with `--server unix:PATH`.
    #[arg(long, value_name = "PATH")]
    pub socket: Option<PathBuf>,
    /// This daemon's host id in a fleet sharing one PostgreSQL database
    /// ([store] url): letters, digits, '.', '_', '-'. Claimed at start
    /// (refused while another live daemon holds it) and kept by a lease
    /// renewed every third of [store] lease; a daemon that loses it stops.
    /// Refused with the SQLite store [default: the machine's name].
    #[arg(long, env = "GATEHOST_HOST_ID", value_name = "NAME")]
    pub host_id: Option<String>,
}

/// Binds the Unix socket owner-only. A stale socket (nobody listening) is
/// replaced; a live one or any other file is an error.
fn bind_socket(path: &Path) -> Result<tokio::net::UnixListener, String> {
    if let Ok(meta) = std::fs::symlink_metadata(path) {
        use std::os::unix::fs::FileTypeExt;
        if !meta.file_type().is_socket() {
            return Err(format!(
                "--socket {}: exists and is not a socket",
                path.display()
            ));
        }
        if std::os::unix::net::UnixStream::connect(path).is_ok() {
            return Err(format!(
                "--socket {}: another daemon is listening there",
                path.display()
            ));
        }
        std::fs::remove_file(path).map_err(|e| {
            format!(
                "--socket {}: cannot remove the stale socket: {e}",
                path.display()
            )
        })?;
    }
    // Created owner-only from the start (no window with wider permissions).
    let old = rustix::process::umask(rustix::fs::Mode::from_raw_mode(0o177));
    let bound = tokio::net::UnixListener::bind(path);
    rustix::process::umask(old);
    let listener = bound.map_err(|e| format!("--socket {}: {e}", path.display()))?;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600))
        .map_err(|e| format!("--socket {}: {e}", path.display()))?;
    Ok(listener)
}

/// The file whose lock says a daemon serves this data directory.
const LOCK_FILE: &str = "serve.lock";

/// Takes the data directory's lock, or says which daemon holds it. The
/// lock file holds the holder's pid (for the message only: the lock, not
/// the file, decides).
/// How long a start waits for a lock that a dead daemon's last child still
/// holds.
const LOCK_WAIT: std::time::Duration = std::time::Duration::from_secs(5);

fn lock_data_dir(dir: &Path) -> Result<std::fs::File, String> {
    use rustix::fs::{FlockOperation, flock};
    use std::io::{Read, Seek, Write};
    use std::os::unix::fs::OpenOptionsExt;
    let path = dir.join(LOCK_FILE);
    let mut file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .mode(0o600)
        .custom_flags(rustix::fs::OFlags::NOFOLLOW.bits() as i32)
        .open(&path)
        .map_err(|e| match e.raw_os_error() {
            Some(code) if code == rustix::io::Errno::ROFS.raw_os_error() => format!(
                "the data directory {} is read-only (cannot open {LOCK_FILE}: {e})",
                dir.display()
            ),
            _ => format!("cannot open {}: {e}", path.display()),
        })?;
    if flock(&file, FlockOperation::NonBlockingLockExclusive).is_err() {
        let mut holder = String::new();
        let _ = file.read_to_string(&mut holder);
        let holder = holder.trim().to_string();
        let refused = || {
            format!(
                "another gatehost serve (pid {holder}) serves the data directory {}; stop it first or use another --data-dir",
                dir.display()
            )
        };
        // A daemon killed a moment ago (SIGKILL, then a restart) may leave
        // its lock held for a few milliseconds more by a gate it was
        // starting: a child between its clone and its exec holds a copy of
        // every descriptor. Wait for that, a bounded time, when the pid
        // that took the lock is gone; a live one is refused at once.
        #[cfg(target_os = "linux")]
        let alive = holder
            .parse::<u32>()
            .is_ok_and(|pid| Path::new(&format!("/proc/{pid}")).exists());
        // No /proc elsewhere: a signal 0 tells (no such process: ESRCH).
        #[cfg(not(target_os = "linux"))]
        let alive = holder
            .parse::<i32>()
            .ok()
            .and_then(rustix::process::Pid::from_raw)
            .is_some_and(|pid| {
                rustix::process::test_kill_process(pid) != Err(rustix::io::Errno::SRCH)
            });
        if alive {
            return Err(refused());
        }
        tracing::warn!(previous = %holder, "the previous daemon is gone but its data directory's lock is still held (a process it was starting?); waiting for it");
        let deadline = std::time::Instant::now() + LOCK_WAIT;
        loop {
            std::thread::sleep(std::time::Duration::from_millis(10));
            if flock(&file, FlockOperation::NonBlockingLockExclusive).is_ok() {
                break;
            }
            if std::time::Instant::now() >= deadline {
                return Err(refused());
            }
        }
    }
    file.set_len(0)
        .and_then(|_| file.rewind())
        .and_then(|_| write!(file, "{}", std::process::id()))
        .map_err(|e| format!("cannot write {}: {e}", path.display()))?;
    Ok(file)
}

/// The default data directory.
pub fn default_data_dir() -> Option<PathBuf> {
    dirs::data_dir().map(|d| d.join("gatehost"))
}

/// The file where a running daemon writes its URL.
pub const SERVER_URL_FILE: &str = "server.url";

fn prepare_dir(dir: &Path) -> Result<(), String> {
    std::fs::create_dir_all(dir).map_err(|e| format!("data directory {}: {e}", dir.display()))?;
    let meta =
        std::fs::metadata(dir).map_err(|e| format!("data directory {}: {e}", dir.display()))?;
    if meta.permissions().mode() & 0o077 != 0 {
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700))
            .map_err(|e| format!("cannot make {} owner-only: {e}", dir.display()))?;
    }
    Ok(())
}

pub fn serve(args: ServeArgs) -> super::error::CliResult<i32> {
    run(args).map_err(|e| super::error::CliError::new("serve", e))?;
    Ok(0)
}

fn run(args: ServeArgs) -> Result<(), String> {
    if !args.listen.ip().is_loopback() {
        return Err(format!(
            "--listen {}: the API listens on loopback only (127.0.0.1 or ::1)",
            args.listen
        ));
    }
    let data_dir = args
        .data_dir
        .or_else(default_data_dir)
        .ok_or("no data directory: pass --data-dir")?;
    prepare_dir(&data_dir)?;
    // One daemon per data directory, held for this process's life (the
    // kernel drops the lock when it dies, SIGKILL included).
    let _lock = lock_data_dir(&data_dir)?;
    // Whether the previous daemon died of a fault of its own (an abort a
    // gate's input could provoke), not a kill from outside.
    let previous_fault = crate::fault_marker::arm(&data_dir)
        .map_err(|e| format!("cannot arm the fault marker in {}: {e}", data_dir.display()))?;
    let config_path = HostConfig::locate(args.config.as_deref());
    // Stamped before the read: a change after it is reloaded.
    let loaded_stamp = config_path
        .as_deref()
        .map(crate::live_config::FileStamp::of);
    let mut config = HostConfig::load(config_path.as_deref()).map_err(|e| e.to_string())?;
    // Descriptors: as many as the hard limit allows, half of them at most
    // for long-polls (the rest for the store, gates, webhooks and the
    // other requests).
    let nofile = api::limits::raise_nofile();
    let long_polls = api::limits::long_poll_cap(config.daemon.max_long_polls, nofile);
    tracing::info!(
        soft = nofile.soft,
        hard = nofile.hard,
        was = nofile.was,
        max_long_polls = long_polls,
        "nofile limit"
    );
    // The data directory's places, and the checks that stop a start
    // (those a reload must pass too).
    crate::live_config::prepare(&mut config, &data_dir)?;
    let (tokens, local_tokens) = Tokens::load(
        &data_dir,
        config.daemon.agent_token_file.as_deref(),
        config.daemon.operator_token_file.as_deref(),
    )
    .map_err(|e| e.to_string())?;
    // Signs sessions' own webhooks; never the operator's secret.
    let notify_key = crate::api::auth::read_or_create(
        config
            .daemon
            .notify_secret_file
            .as_deref()
            .unwrap_or(&data_dir.join("notify.key")),
        config.daemon.notify_secret_file.is_none(),
    )
    .map_err(|e| e.to_string())?;
    crate::webhook::install_tls_provider();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|e| format!("cannot start the runtime: {e}"))?;
    // The SQLite file in the data directory, or the PostgreSQL database
    // `[store] url` names (its password read now, once), this host's id
    // claimed there for this process's life.
    let (store, store_at) = {
        let _inside = runtime.enter();
        super::store_open::open(&config, &data_dir, args.host_id.as_deref())?
    };
    // On PostgreSQL, the cluster's tokens are this host's (the first host
    // stores its own); written to its token files before it says it
    // listens.
    api::cluster_tokens::adopt_at_start(&tokens, &store, local_tokens)?;
    let (agent_file, operator_file) = (
        tokens.files().agent.clone(),
        tokens.files().operator.clone(),
    );
    let claim_lost = store.claim_lost();
    let host = store.host();
    runtime.block_on(async move {
        let (public_url, ack_requires) =
            (config.daemon.public_url.clone(), config.daemon.ack_requires);
        let runner = GateRunner::new(config);
        // A daemon probes its containment at start (and sweeps a dead
        // host's cgroups then), not at its first gate.
        let _ = runner.supervisor();
        // A gate user that cannot reach its scratch directory would have
        // every gate refused: not a daemon that serves.
        if let Some(reason) = runner.sandbox().refusal() {
            return Err(reason.to_string());
        }
        let confinement = runner.sandbox().describe();
        // An allowlisted program the sandbox cannot read is warned about
        // (its gates are refused at attach and errors at run), not a
        // reason to stop gating everything else (docs/security.md).
        for warning in runner.allowlist_out_of_reach() {
            eprintln!("gatehost: warning: {warning}");
        }
        let engine = Engine::new(store, runner).map_err(|e| e.to_string())?;
        // SIGHUP reloads the configuration: caught from before the daemon
        // says it listens (its default action would end it).
        let hangup = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::hangup())
            .map_err(|e| format!("cannot catch SIGHUP: {e}"))?;
        // Both of `localhost`'s addresses, or the page advertised at the
        // one bound (`api::listen`).
        let bound = api::listen::bind(args.listen).map_err(|e| e.to_string())?;
        let url = bound.url();
        // The page's address on this machine: `localhost` when the daemon
        // holds both of its addresses on the port (browsers refuse WebAuthn
        // at an IP address), else the address bound.
        let local_page = bound.page();
        // The page's origin: `public_url`, else the local page.
        let page = public_url.unwrap_or_else(|| local_page.clone());
        let passkeys = crate::passkey::Passkeys::with_enrolment(&page, Some(&data_dir));
        if ack_requires == crate::config::AckRequires::Passkey
            && let Some(why) = passkeys.unavailable()
        {
            let because = bound
                .partner_missing
                .as_deref()
                .map(|m| format!(" (the page is advertised at the address bound only: {m})"))
                .unwrap_or_default();
            return Err(format!(
                "[daemon] ack_requires = \"passkey\", but passkeys cannot be used at {page}: {why}{because}"
            ));
        }
        let url_file = data_dir.join(SERVER_URL_FILE);
        std::fs::write(&url_file, format!("{url}\n"))
            .map_err(|e| format!("cannot write {}: {e}", url_file.display()))?;
        // Recovery is idempotent: a store that cannot be written for a
        // moment (a full disk) is tried again for a few seconds.
        let mut tries = 0;
        loop {
            match engine.recover(previous_fault.as_deref()) {
                Ok(()) => break,
                Err(e)
                    if tries < 40
                        && matches!(&e, crate::engine::EngineError::Store(s) if s.is_unavailable()) =>
                {
                    tries += 1;
                    tracing::warn!(error = %e, "recovery could not write the store; trying again");
                    tokio::time::sleep(std::time::Duration::from_millis(100)).await;
                }
                Err(e) => return Err(format!("cannot recover: {e}")),
            }
        }
        engine.spawn_sweeper();
        engine.spawn_retention();
        // What gates of a killed daemon (or a killed hook) left behind.
        let reclaiming = engine.runner();
        tokio::task::spawn_blocking(move || reclaiming.sandbox().reclaim_scratch());
        engine.spawn_watchdog();
        engine.spawn_routine_ticker();
        // Another host's commit on a shared store (PostgreSQL) wakes this
        // daemon's long-polls, SSE and webhooks too; until it stops.
        if engine.spawn_cluster_wakeups().is_some() {
            tracing::info!("other hosts' events wake this daemon's readers (LISTEN/NOTIFY)");
        }
        // One host of a fleet leads: it finds dead hosts, takes them over
        // where workspaces are shared, and applies retention.
        engine.spawn_leader();
        tokio::spawn(crate::live_config::watch(
            engine.clone(),
            config_path.clone(),
            data_dir.clone(),
            hangup,
            loaded_stamp,
        ));
        let hooks = Webhooks::new(engine.clone(), notify_key.into_bytes(), &url)?;
        tokio::spawn(hooks.run());
        let tokens = Arc::new(tokens);
        // Another host's rotation of the cluster's tokens, taken up here.
        api::cluster_tokens::spawn_following(tokens.clone(), engine.clone());
        let state = AppState {
            engine: engine.clone(),
            tokens,
            long_polls: api::limits::LongPolls::new(long_polls),
            ui: api::ui::Sessions::default(),
            passkeys,
            page: Arc::from(local_page.as_str()),
        };
        api::cluster_tokens::end_logins_on_rotation(&state.tokens, state.ui.clone());
        if host.is_some() {
            // The operators' actions other hosts received for this one's
            // policies.
            tokio::spawn(api::forwarded::carry_out(state.clone()));
        }
        let app = api::router(state);
        let unix = match &args.socket {
            Some(p) => Some(api::limits::Accepting::new(bind_socket(p)?, "unix")),
            None => None,
        };
        // SIGTERM and SIGINT are ours from before the daemon says it
        // listens: one sent as soon as it says so stops it cleanly (its
        // host claim released), never by the default action.
        let signals = shutdown().map_err(|e| format!("cannot handle SIGTERM and SIGINT: {e}"))?;
        println!("gatehost serve: listening on {url}");
        if let Some(other) = bound.partner_addr() {
            println!("also listening on http://{other} (localhost's other address)");
        }
        if let Some(p) = &args.socket {
            println!("socket: unix:{}", p.display());
        }
        println!("page: {page}/ui/ (log in with `gatehost ui`)");
        println!("data: {}", data_dir.display());
        println!("store: {store_at}");
        if let Some((id, fence)) = &host {
            println!("host: {id} (fencing number {fence})");
        }
        println!("agent token: {}", agent_file.display());
        println!("operator token: {}", operator_file.display());
        println!("{confinement}");
        let also = bound.partner_addr().map(|a| a.to_string()).unwrap_or_default();
        tracing::info!(%url, %also, %page, data = %data_dir.display(), store = %store_at, %confinement, "serving");
        if let Some(lost) = claim_lost {
            tokio::spawn(stop_when_lost(lost));
        }
        let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
        let stopping = engine.clone();
        tokio::spawn(async move {
            signals.await;
            tracing::info!("stopping: open long-polls answer now");
            stopping.begin_shutdown();
            let _ = stop_tx.send(true);
        });
        let stopped = |mut rx: tokio::sync::watch::Receiver<bool>| async move {
            let _ = rx.wait_for(|s| *s).await;
        };
        let api::listen::Bound {
            primary, partner, ..
        } = bound;
        let tcp = axum::serve(api::limits::Accepting::new(primary, "tcp"), app.clone())
            .with_graceful_shutdown(stopped(stop_rx.clone()))
            .into_future();
        let other = {
            let served = partner.map(|l| {
                axum::serve(api::limits::Accepting::new(l, "tcp"), app.clone())
                    .with_graceful_shutdown(stopped(stop_rx.clone()))
                    .into_future()
            });
            async move {
                match served {
                    Some(s) => s.await,
                    None => Ok(()),
                }
            }
        };
        let on_socket = {
            let served = unix.map(|u| {
                axum::serve(u, app)
                    .with_graceful_shutdown(stopped(stop_rx))
                    .into_future()
            });
            async move {
                match served {
                    Some(s) => s.await,
                    None => Ok(()),
                }
            }
        };
        tokio::try_join!(tcp, other, on_socket).map_err(|e| format!("server error: {e}"))?;
        // A clean stop: this host's id can be claimed again at once.
        engine.store().release_host();
        let _ = std::fs::remove_file(&url_file);
        if let Some(p) = &args.socket {
            let _ = std::fs::remove_file(p);
        }
        tracing::info!("stopped");
        Ok::<(), String>(())
    })
}

/// Stops the daemon at once when its host's claim is lost (its id claimed
/// again: after its lease ran out while it was stopped or cut off, another
/// daemon took it): exit 2, as a SIGKILL would, since everything is in the
/// store and the new holder acts on it; what this process still had under
/// way is refused by its fencing number.
async fn stop_when_lost(mut lost: tokio::sync::watch::Receiver<Option<String>>) {
    let why = match lost.wait_for(Option::is_some).await {
        Ok(why) => why.clone().unwrap_or_default(),
        Err(_) => return,
    };
    tracing::error!(cause = %why, "this daemon lost its host claim; stopping");
    eprintln!("gatehost: error: this daemon lost its host claim: {why}; stopping");
    std::process::exit(super::error::EXIT_ERROR);
}

/// Takes SIGTERM and SIGINT now (their default action, death, ends
/// here), and answers what ends at the first of them.
fn shutdown() -> std::io::Result<impl std::future::Future<Output = ()>> {
    use tokio::signal::unix::{SignalKind, signal};
    let mut term = signal(SignalKind::terminate())?;
    let mut int = signal(SignalKind::interrupt())?;
    Ok(async move {
        tokio::select! {
            _ = term.recv() => {}
            _ = int.recv() => {}
        }
    })
}

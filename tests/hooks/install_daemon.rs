//! A hook installed with `--data-dir` (or `--server` and `--token-file`)
//! reaches a daemon on another data directory than the default one.

use super::{blocks, hook, hook_ok, our_commands, read_json, run_installed};
use crate::common::hooks::assert_blocks;
use crate::common::{Scratch, allow_config};
use serde_json::json;

/// The README's `gatehost serve --data-dir "$data"`: a hook installed
/// with `--data-dir` (or `--server` and `--token-file`) reaches that daemon
/// with nothing in its environment, and a path that is not there is
/// refused at install, naming the option.
#[test]
fn an_installed_hook_reaches_a_daemon_on_another_data_directory() {
    let s = Scratch::new();
    crate::common::daemon::git_repo(&s.ws);
    let rule = s.write(
        "rule.json",
        &json!({"gate": {"command": "test", "args": ["-f", "DONE"]}, "onFail": {"maxRetries": 3}})
            .to_string(),
    );
    let cfg = s.write(
        "config.toml",
        &format!(
            "{}[[daemon.session_policies]]\nagents = [\"claude\"]\npolicy = \"{}\"\n",
            allow_config(&["test"]),
            rule.display()
        ),
    );
    let data = s.etc.join("gh-data");
    let d = crate::common::daemon::Daemon::start(&data, &cfg);
    let home = s.out.join("home");
    let keys = s.out.join("keys");
    let env = [
        ("HOME", home.to_str().expect("utf-8")),
        ("XDG_STATE_HOME", ""),
        ("GATEHOST_SESSION_KEYS", keys.to_str().expect("utf-8")),
    ];
    let ws = s.ws.to_str().expect("utf-8");
    let project = ["install", "claude", "--scope", "project", "--project", ws];
    let installed = |extra: &[&str]| {
        let args: Vec<&str> = project.iter().chain(extra).copied().collect();
        hook_ok(&s, &args);
        let v = read_json(&s.ws.join(".claude/settings.json"));
        our_commands(&v, "Stop").pop().expect("the Stop hook")
    };
    let stop = |id: &str| json!({"session_id": id, "cwd": s.ws, "hook_event_name": "Stop", "last_assistant_message": "done"});
    let blocked = |command: &str, id: &str| {
        blocks(&run_installed(command, &stop(id), &env), "test -f DONE");
        // The daemon on gh-data registered the session and gated it (the
        // hook kept its key in its own keyring: the test reads as the
        // operator).
        assert_eq!(
            d.operator_ok("GET", &format!("/v1/sessions/claude:{id}"), None)["id"],
            format!("claude:{id}")
        );
    };

    let data_abs = std::fs::canonicalize(&data).expect("data");
    let by_dir = installed(&["--data-dir", data.to_str().expect("utf-8")]);
    assert!(
        by_dir.contains(&format!("--data-dir {}", data_abs.display())),
        "an absolute path, as the CLI runs the hook from anywhere: {by_dir}"
    );
    blocked(&by_dir, "by-dir");
    assert_eq!(
        hook(
            &s,
            &["uninstall", "claude", "--scope", "project", "--project", ws]
        )
        .code,
        0
    );

    let token = s.write("agent.token", &format!("{}\n", d.agent));
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&token, std::fs::Permissions::from_mode(0o600)).expect("chmod");
    }
    let by_url = installed(&[
        "--server",
        &d.url,
        "--token-file",
        token.to_str().expect("utf-8"),
        "--mcp",
    ]);
    // The MCP server Claude Code starts reaches the same daemon.
    let mcp = read_json(&s.ws.join(".mcp.json"));
    assert_eq!(
        mcp["mcpServers"]["gatehost"]["args"],
        json!([
            "mcp",
            "--server",
            d.url,
            "--token-file",
            std::fs::canonicalize(&token).expect("token")
        ]),
        "{mcp}"
    );
    assert!(
        by_url.contains("--token-file") && !by_url.contains(&d.agent),
        "the token itself is never in the CLI's settings: {by_url}"
    );
    blocked(&by_url, "by-url");
    // A token file others can read is refused, not used: the stop is
    // blocked with the reason, and the daemon never hears of the session.
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&token, std::fs::Permissions::from_mode(0o644)).expect("chmod");
    }
    let out = run_installed(&by_url, &stop("loose"), &env);
    assert_blocks(&out.stdout, "owner-only");
    let (code, _) = d
        .http_try("GET", "/v1/sessions/claude:loose", Some(&d.agent), None)
        .expect("the daemon answers");
    assert_eq!(code, 404);
    // Without either, the hook looks in the default data directory (none
    // in the scratch home) and says what it lacks, on its channel.
    let bare = by_url
        .split(" --server")
        .next()
        .expect("program and hook")
        .to_string();
    let out = run_installed(&bare, &stop("bare"), &env);
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        said.contains("no server.url in") && said.contains("--data-dir"),
        "where it looked and how to point it: {out:?}"
    );
    assert_eq!(
        hook(
            &s,
            &["uninstall", "claude", "--scope", "project", "--project", ws]
        )
        .code,
        0
    );

    for (flag, missing) in [
        ("--data-dir", "no-such-dir"),
        ("--token-file", "no-such.token"),
    ] {
        let gone = s.etc.join(missing);
        let args: Vec<&str> = project
            .iter()
            .copied()
            .chain([flag, gone.to_str().expect("utf-8")])
            .collect();
        let r = hook(&s, &args);
        assert_eq!(r.code, 2, "{r:?}");
        assert!(r.stderr.contains(flag), "the option is named: {r:?}");
        assert!(
            !s.ws.join(".claude/settings.json").exists(),
            "nothing written: {r:?}"
        );
    }
    let both = hook(&s, &["claude", "--token", "t", "--token-file", "f"]);
    assert_eq!(both.code, 2, "{both:?}");
}

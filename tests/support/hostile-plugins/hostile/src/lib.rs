//! A plugin that misbehaves in the way `config.mode` names.

use gatehost_plugin::{Context, Plugin, Verdict};

struct Hostile;

#[allow(unconditional_recursion)]
fn recurse(n: u64) -> u64 {
    // black_box keeps the recursion from being turned into a loop.
    std::hint::black_box(recurse(std::hint::black_box(n + 1))) + 1
}

fn attempt(result: std::io::Result<impl std::fmt::Debug>) -> Result<Verdict, String> {
    // Reaching a file outside the workspace, or writing, would be a pass.
    match result {
        Ok(v) => Ok(gatehost_plugin::pass(format!("ESCAPED: {v:?}"))),
        Err(e) => Ok(gatehost_plugin::fail(format!("denied: {e}"), Vec::new())),
    }
}

/// The value of `key` in the plugin's config, or "" when it has none.
fn setting(ctx: &Context, key: &str) -> String {
    let found = ctx.config.iter().find(|(k, _)| k == key);
    found.map(|(_, v)| v.clone()).unwrap_or_default()
}

impl Plugin for Hostile {
    fn evaluate(ctx: Context) -> Result<Verdict, String> {
        let (mode, arg) = (setting(&ctx, "mode"), setting(&ctx, "arg"));
        match mode.as_str() {
            "loop" => loop {
                std::hint::black_box(0);
            },
            "memory" => {
                let mut hoard: Vec<Vec<u8>> = Vec::new();
                loop {
                    hoard.push(vec![1u8; 1024 * 1024]);
                    std::hint::black_box(&hoard);
                }
            }
            "recursion" => Ok(gatehost_plugin::pass(format!("{}", recurse(0)))),
            "flood" => loop {
                println!("{}", "flood ".repeat(1000));
            },
            "read" => attempt(std::fs::read_to_string(&arg)),
            // The kit's WASI reader (as `read-files` falls back to it).
            "kit-read" => attempt(gatehost_plugin::read_bytes(&arg, 1 << 22).map(|b| b.len())),
            // The same escapes through the host's own reader.
            "host-read" => {
                let read = gatehost_plugin::read_files(std::slice::from_ref(&arg), 1 << 20);
                attempt(
                    read.into_iter()
                        .next()
                        .unwrap_or_else(|| Err(std::io::Error::other("no answer")))
                        .map(|b| String::from_utf8_lossy(&b).into_owned()),
                )
            }
            // The host's reader with no size cap of the plugin's own.
            "host-read-uncapped" => {
                let read = gatehost_plugin::read_files(std::slice::from_ref(&arg), u64::MAX);
                attempt(
                    read.into_iter()
                        .next()
                        .unwrap_or_else(|| Err(std::io::Error::other("no answer")))
                        .map(|b| b.len()),
                )
            }
            "host-list" => {
                let files = gatehost_plugin::all_files();
                if files.iter().any(|f| f.contains("..") || f.starts_with('/')) {
                    Ok(gatehost_plugin::pass(format!("ESCAPED: {files:?}")))
                } else {
                    Ok(gatehost_plugin::fail(
                        format!("listed: {}", files.join(" ")),
                        Vec::new(),
                    ))
                }
            }
            // Asks the host to read the same file many times over: the
            // plugin's memory budget bounds what the host hands back.
            "host-read-flood" => {
                let paths = vec![arg.clone(); 4_000];
                match gatehost_plugin::host::read_files(&paths, u64::MAX) {
                    Ok(files) => Ok(gatehost_plugin::pass(format!(
                        "ESCAPED: {} files",
                        files.len()
                    ))),
                    Err(e) => Ok(gatehost_plugin::fail(format!("denied: {e}"), Vec::new())),
                }
            }
            "list" => attempt(std::fs::read_dir(&arg).map(|d| d.count())),
            "write" => attempt(std::fs::write(&arg, "owned")),
            "mkdir" => attempt(std::fs::create_dir(&arg)),
            "rename" => {
                let (from, to) = arg.split_once(' ').unwrap_or((&arg, "renamed"));
                attempt(std::fs::rename(from, to))
            }
            "env" => {
                let vars: Vec<(String, String)> = std::env::vars().collect();
                let args: Vec<String> = std::env::args().collect();
                if vars.is_empty() && args.is_empty() {
                    Ok(gatehost_plugin::fail(
                        "no environment, no arguments",
                        Vec::new(),
                    ))
                } else {
                    Ok(gatehost_plugin::pass(format!(
                        "ESCAPED: env {vars:?} args {args:?}"
                    )))
                }
            }
            // One judge call, then as much sleep as `arg` says (seconds):
            // judge time is not plugin time, sleep is.
            "judge-once" => {
                let reply = gatehost_plugin::judge("Is this fine?")?;
                let secs: u64 = arg.parse().unwrap_or(0);
                std::thread::sleep(std::time::Duration::from_secs(secs));
                Ok(match reply.decision {
                    Some(gatehost_plugin::Decision::Pass) => {
                        gatehost_plugin::pass("the judge passed it")
                    }
                    _ => gatehost_plugin::fail("the judge did not pass it", Vec::new()),
                })
            }
            "judge-loop" => loop {
                let _ = gatehost_plugin::judge("Is this fine?");
            },
            "panic" => panic!("hostile plugin panicked on purpose"),
            "big-string" => Ok(gatehost_plugin::fail(
                "x".repeat(8 * 1024 * 1024),
                Vec::new(),
            )),
            "error" => Err("the plugin could not decide".into()),
            "fail" => Ok(gatehost_plugin::fail(
                "said no",
                vec![gatehost_plugin::finding(
                    "src/lib.rs",
                    Some(3),
                    gatehost_plugin::Severity::Error,
                    "bad line",
                )],
            )),
            // Asleep in a host call (a WASI poll): epochs do not stop it.
            "sleep" => {
                let secs: u64 = arg.parse().unwrap_or(600);
                std::thread::sleep(std::time::Duration::from_secs(secs));
                Ok(gatehost_plugin::pass("woke up"))
            }
            // Writes far past the output bound, ignores the failed writes,
            // then claims a pass.
            "flood-then-pass" => {
                use std::io::Write;
                let chunk = vec![b'x'; 1 << 20];
                for _ in 0..arg.parse::<usize>().unwrap_or(64) {
                    let _ = std::io::stdout().write_all(&chunk);
                }
                Ok(gatehost_plugin::pass("all good"))
            }
            // Many empty findings: small strings, a huge verdict.
            "findings" => {
                let n: usize = arg.parse().unwrap_or(1_000_000);
                let findings = (0..n)
                    .map(|_| {
                        gatehost_plugin::finding("", None, gatehost_plugin::Severity::Info, "")
                    })
                    .collect();
                Ok(gatehost_plugin::fail("many findings", findings))
            }
            // Floods the host's log through the `log` import.
            "log-flood" => {
                let n: usize = arg.parse().unwrap_or(100_000);
                for i in 0..n {
                    gatehost_plugin::log(gatehost_plugin::LogLevel::Warn, &format!("flood {i}"));
                }
                Ok(gatehost_plugin::pass("logged"))
            }
            "echo-context" => Ok(gatehost_plugin::pass(format!(
                "session={:?} policy={:?} message={:?} changed={:?}",
                ctx.session_id,
                ctx.policy_id,
                ctx.last_message,
                ctx.changed_files
                    .iter()
                    .map(|f| f.path.clone())
                    .collect::<Vec<_>>()
            ))),
            other => Err(format!("unknown mode '{other}'")),
        }
    }
}

gatehost_plugin::export_gate!(Hostile);

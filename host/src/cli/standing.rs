//! `gatehost policy attach --template` and `gatehost policy standing`:
//! add a standing policy from a template file, list them, remove one.
//! Each is one call through the typed client, printed for a person or,
//! with `--json`, as the API's JSON. The template is read here, before any
//! connection, and sent whole: the daemon never reads the file, so nothing
//! written to it later changes what it attaches. It must never print an
//! error itself.

use super::client::{ClientArgs, attach_body, run_client, show};
use super::client_args::StandingCommand;
use super::error::CliResult;
use crate::wire::{StandingPolicy, StandingRequest};
use std::path::{Path, PathBuf};

/// One line for a person: the id, then which sessions it is for.
fn line(s: &StandingPolicy) -> String {
    let or_any = |v: &[String], any: &str| {
        if v.is_empty() {
            any.to_string()
        } else {
            v.join(",")
        }
    };
    let mut out = format!(
        "{}  agents={}  under={}",
        s.id,
        or_any(&s.agents, "any"),
        or_any(&s.under, "anywhere")
    );
    if let Some(l) = &s.label {
        out.push_str(&format!("  label={l}"));
    }
    if let Some(d) = &s.damage {
        out.push_str(&format!("  DAMAGED: {d}"));
    }
    out
}

/// `DIR` as the daemon matches it: `~/` is the home directory, a relative
/// path this directory's.
fn directory(p: &Path) -> String {
    let p = match (p.strip_prefix("~"), dirs::home_dir()) {
        (Ok(rest), Some(home)) => home.join(rest),
        _ => p.to_path_buf(),
    };
    std::path::absolute(&p).unwrap_or(p).display().to_string()
}

pub(super) fn add(
    template: &Path,
    agents: Vec<String>,
    under: &[PathBuf],
    label: Option<String>,
    args: ClientArgs,
) -> CliResult<i32> {
    let json = args.json;
    let req = StandingRequest {
        agents,
        under: under.iter().map(|u| directory(u)).collect(),
        label,
        policy: attach_body(template, None)?.into(),
    };
    run_client(&args, |client| async move {
        let s = client.add_standing(&req).await?;
        show(json, &s, |s| s.id.clone())
    })
}

pub(super) fn run(cmd: Option<StandingCommand>, args: ClientArgs) -> CliResult<i32> {
    let json = args.json;
    run_client(&args, |client| async move {
        match cmd.unwrap_or(StandingCommand::List) {
            StandingCommand::List => {
                let l = client.standing_policies().await?;
                show(json, &l, |l| {
                    if l.standing_policies.is_empty() {
                        "no standing policy".to_string()
                    } else {
                        l.standing_policies
                            .iter()
                            .map(line)
                            .collect::<Vec<_>>()
                            .join("\n")
                    }
                })
            }
            StandingCommand::Remove { id } => {
                let s = client.remove_standing(&id).await?;
                show(json, &s, |s| format!("removed {}", s.id))
            }
        }
    })
}

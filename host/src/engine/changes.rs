//! "Request changes": the operator's comments on lines of the diff of a
//! commit awaiting its ack go back to the agent as its nudge, with file and
//! line, and the policy watches its members again (their next turn gates
//! it again, on a new snapshot).
//!
//! It owns the comments' checks (their shape, and that each stands at a
//! line the reviewed diff shows: [`in_diff`]) and the nudge's text ([`changes_nudge`], a
//! pure function). It must never change a policy's state but through
//! `Policies::transition`, and never put anything the agent wrote in the
//! nudge.

use super::Policies;
use super::machine::{Input, awaits_ack};
use super::{EngineResult, PolicyEvent, stored};
use crate::model::event::{self as ev, PolicyChange};
use crate::store::{PolicyRow, now_ms};
use serde_json::json;

/// The most comments one request carries.
pub const MAX_COMMENTS: usize = 50;
/// The longest comment body, in bytes.
pub const MAX_COMMENT_BODY: usize = 4000;
/// The longest path a comment names, in bytes.
const MAX_PATH: usize = 4096;

pub use crate::model::inputs::DiffSide;

pub use crate::model::inputs::LineComment;

/// `text` without control characters (but newlines and tabs where `lines`).
fn clean(text: &str, lines: bool) -> String {
    text.chars()
        .filter(|c| !c.is_control() || (lines && (*c == '\n' || *c == '\t')))
        .collect()
}

/// The comments as the nudge will carry them (control characters dropped,
/// trimmed), or the first one that cannot be sent, named by its field.
pub(super) fn checked_comments(
    comments: &[LineComment],
) -> Result<Vec<LineComment>, (String, String)> {
    if comments.is_empty() || comments.len() > MAX_COMMENTS {
        return Err((
            "comments".into(),
            format!("1 to {MAX_COMMENTS} comments on lines of the diff"),
        ));
    }
    let mut out = Vec::with_capacity(comments.len());
    for (i, c) in comments.iter().enumerate() {
        let at = |f: &str| format!("comments[{i}].{f}");
        let path = clean(&c.path, false).trim().to_string();
        if path.is_empty() || c.path.len() > MAX_PATH {
            return Err((
                at("path"),
                format!("a file of the diff, 1 to {MAX_PATH} bytes"),
            ));
        }
        if c.line == 0 {
            return Err((at("line"), "lines are numbered from 1".into()));
        }
        let body = clean(&c.body, true).trim().to_string();
        if body.is_empty() || c.body.len() > MAX_COMMENT_BODY {
            return Err((
                at("body"),
                format!("what to change, 1 to {MAX_COMMENT_BODY} bytes"),
            ));
        }
        out.push(LineComment {
            path,
            line: c.line,
            side: c.side,
            body,
        });
    }
    Ok(out)
}

/// Whether every comment stands at a line of the diff reviewed (`files`:
/// the patch's files at the comments' paths, as the page showed them):
/// its path a file of the diff, its line one the diff shows on its side
/// (an added or context line on the new side, a removed or context line
/// on the old). The first that does not is named by its field.
pub(super) fn in_diff(
    comments: &[LineComment],
    files: &[crate::commit::patch::PatchFile],
) -> Result<(), (String, String)> {
    for (i, c) in comments.iter().enumerate() {
        let side = match c.side {
            DiffSide::New => "new",
            DiffSide::Old => "old",
        };
        let Some(file) = files.iter().find(|f| f.entry.path == c.path.as_bytes()) else {
            return Err((
                format!("comments[{i}].path"),
                format!(
                    "{:?} is not a file of this change's diff: comment on a line the diff shows",
                    c.path
                ),
            ));
        };
        let shown = file.hunks.iter().flat_map(|h| &h.lines).any(|l| {
            let at = match c.side {
                DiffSide::New => l.new,
                DiffSide::Old => l.old,
            };
            at == Some(c.line)
        });
        if !shown {
            let why = if file.hunks.is_empty() {
                "the diff shows none of its lines (binary, a rename or a mode change alone)"
                    .to_string()
            } else {
                format!("that line of its {side} side is not one the diff shows")
            };
            return Err((
                format!("comments[{i}].line"),
                format!("{}:{} ({side} side): {why}", c.path, c.line),
            ));
        }
    }
    Ok(())
}

/// The nudge "request changes" sends: the host's fixed text, the policy's
/// id (the host's own, `pol_…`), then each comment as `- PATH:LINE` (`(old
/// side)` for a line of the file as it was) with its body quoted line by
/// line (`> `). The comments are the operator's, already
/// [`checked_comments`]; nothing the agent wrote is in it.
pub fn changes_nudge(policy_id: &str, comments: &[LineComment]) -> String {
    let mut text = format!(
        "The operator requested changes to policy {policy_id} before it is committed. \
         Address each comment, then end your turn: the gate runs again."
    );
    for c in comments {
        let side = match c.side {
            DiffSide::New => "",
            DiffSide::Old => " (old side)",
        };
        text.push_str(&format!("\n- {}:{}{side}", c.path, c.line));
        for l in c.body.lines() {
            text.push_str(&format!("\n  > {}", l.trim_end()));
        }
    }
    text
}

impl Policies {
    /// The operator's comments on the diff of `id`, awaiting its ack and
    /// reviewed as `tree` (refused, changing nothing, when the snapshot is
    /// another tree now): delivered to the live members as their nudge
    /// (`policy:nudge {message, comments}`, and the prompt of those
    /// gatehost started), and the policy watches them again.
    pub(crate) async fn request_changes(
        &self,
        id: &str,
        tree: &str,
        comments: &[LineComment],
        by: &str,
    ) -> EngineResult<PolicyRow> {
        let engine = self.engine();
        let comments = checked_comments(comments)
            .map_err(|(field, message)| super::sessions::invalid(&field, message))?;
        let message = changes_nudge(id, &comments);
        let current = engine.policy(id)?;
        stored::damaged(&current)?;
        // Each comment at a line of the diff reviewed (a moved snapshot is
        // refused first, as the write below would).
        if awaits_ack(current.status) {
            super::ack::reviewed_tree(id, stored::plan_required(&current)?, Some(tree))?;
            let mut paths: Vec<String> = comments.iter().map(|c| c.path.clone()).collect();
            paths.sort();
            paths.dedup();
            let files = self.patch_files(&current, paths).await?;
            in_diff(&comments, &files)
                .map_err(|(field, message)| super::sessions::invalid(&field, message))?;
        }
        let input = stored::spec(&current)?;
        let alive = self.alive_members(input)?;
        let (p, step) = engine.write(|tx| {
            let mut p = tx
                .policy(id)?
                .ok_or_else(|| super::EngineError::NotFound(format!("no policy '{id}'")))?;
            if awaits_ack(p.status) {
                super::ack::reviewed_tree(id, stored::plan_required(&p)?, Some(tree))?;
            }
            let alive = super::nudge::not_exited(tx, &alive);
            // Refused by the machine, the write is not stored at all.
            p.pending = alive.clone();
            p.watch_after = tx.head_cursor()?;
            p.plan = None;
            p.reason = Some(format!("{by} requested changes"));
            p.updated_at = now_ms();
            let step = self.transition(
                tx,
                &mut p,
                Input::RequestChanges {
                    alive: !alive.is_empty(),
                },
                |event| match event {
                    PolicyEvent::Nudge => Some(
                        PolicyChange::Nudge(ev::Nudge {
                            message: message.clone(),
                            by: Some(by.to_string()),
                            // typed by the model layer (`LineComment`)
                            comments: Some(json!(comments)),
                            retry: None,
                            max_retries: None,
                            sessions: Some(alive.clone()),
                        })
                        .into(),
                    ),
                    PolicyEvent::Watching => Some(
                        PolicyChange::Watching(ev::Watching {
                            pending: alive.clone(),
                        })
                        .into(),
                    ),
                    _ => None,
                },
            )?;
            Ok((p, step))
        })?;
        if let Some(step) = &step {
            self.perform(id, step);
            self.deliver_step_nudge(step, &p.pending, &message).await;
        }
        Ok(p)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::change::{ChangeKind, Hunk, HunkLine, LineKind};
    use crate::commit::patch::{PatchEntry, PatchFile};

    fn c(path: &str, line: u32, side: DiffSide, body: &str) -> LineComment {
        LineComment {
            path: path.into(),
            line,
            side,
            body: body.into(),
        }
    }

    /// A file of the diff whose one hunk holds these lines (kind, old, new).
    fn file(path: &str, lines: &[(LineKind, Option<u32>, Option<u32>)]) -> PatchFile {
        PatchFile {
            entry: PatchEntry {
                path: path.into(),
                from: None,
                kind: ChangeKind::Modified,
                old: None,
                new: None,
            },
            added: 0,
            removed: 0,
            binary: false,
            cut: false,
            hunks: vec![Hunk {
                old_start: 1,
                old_lines: 0,
                new_start: 1,
                new_lines: 0,
                lines: lines
                    .iter()
                    .map(|&(kind, old, new)| HunkLine {
                        kind,
                        text: String::new(),
                        old,
                        new,
                        no_newline: false,
                    })
                    .collect(),
            }],
            emptied: false,
        }
    }

    #[test]
    fn a_comment_stands_at_a_line_the_diff_shows_on_its_side_or_is_refused_by_field() {
        use LineKind::*;
        let files = [
            file(
                "docs/\u{dc}berblick.md",
                &[
                    (Context, Some(1), Some(1)),
                    (Removed, Some(2), None),
                    (Added, None, Some(2)),
                ],
            ),
            file("app.py", &[(Added, None, Some(1))]),
            {
                let mut f = file("img.png", &[]);
                f.hunks.clear();
                f.binary = true;
                f
            },
        ];
        let ok = |cs: &[LineComment]| in_diff(cs, &files);
        // Each side's lines: context on both, added on the new, removed on
        // the old.
        for (line, side) in [
            (1, DiffSide::New),
            (1, DiffSide::Old),
            (2, DiffSide::New),
            (2, DiffSide::Old),
        ] {
            assert_eq!(
                ok(&[c("docs/\u{dc}berblick.md", line, side, "x")]),
                Ok(()),
                "{line} {side:?}"
            );
        }
        assert_eq!(ok(&[c("app.py", 1, DiffSide::New, "x")]), Ok(()));
        // Not in the diff: the wrong side, a line past the hunk, a file the
        // diff does not hold, a file with no lines; the field names which.
        let refused = |cs: &[LineComment]| ok(cs).expect_err("refused");
        assert_eq!(
            refused(&[c("app.py", 1, DiffSide::Old, "x")]).0,
            "comments[0].line"
        );
        let (field, message) = refused(&[
            c("app.py", 1, DiffSide::New, "x"),
            c("docs/\u{dc}berblick.md", 3, DiffSide::New, "x"),
        ]);
        assert_eq!(field, "comments[1].line");
        assert!(message.contains("berblick.md:3 (new side)"), "{message}");
        let (field, message) = refused(&[c("src/elsewhere.rs", 1, DiffSide::New, "x")]);
        assert_eq!(field, "comments[0].path");
        assert!(message.contains("src/elsewhere.rs"), "{message}");
        let (field, message) = refused(&[c("img.png", 1, DiffSide::New, "x")]);
        assert_eq!(field, "comments[0].line");
        assert!(message.contains("binary"), "{message}");
    }

    #[test]
    fn the_nudge_names_each_file_and_line_and_quotes_each_body() {
        let n = changes_nudge(
            "pol_1",
            &[
                c("src/lib.rs", 2, DiffSide::New, "Use 43.\nAnd a doc line."),
                c("src/old.rs", 7, DiffSide::Old, "Keep this one."),
            ],
        );
        assert_eq!(
            n,
            "The operator requested changes to policy pol_1 before it is committed. \
             Address each comment, then end your turn: the gate runs again.\n\
             - src/lib.rs:2\n  > Use 43.\n  > And a doc line.\n\
             - src/old.rs:7 (old side)\n  > Keep this one."
        );
    }

    #[test]
    fn comments_are_cleaned_and_each_bad_one_is_named() {
        let got = checked_comments(&[c(
            "src/a\n- forged:1",
            1,
            DiffSide::New,
            " fix\u{1b}[2J it \n",
        )])
        .expect("ok");
        assert_eq!(got[0].path, "src/a- forged:1", "no newline in a path");
        assert_eq!(got[0].body, "fix[2J it");
        let bad = |cs: &[LineComment]| checked_comments(cs).expect_err("refused").0;
        assert_eq!(bad(&[]), "comments");
        assert_eq!(
            bad(&vec![c("a", 1, DiffSide::New, "b"); MAX_COMMENTS + 1]),
            "comments"
        );
        assert_eq!(
            bad(&[c("a", 1, DiffSide::New, "b"), c(" ", 1, DiffSide::New, "b")]),
            "comments[1].path"
        );
        assert_eq!(bad(&[c("a", 0, DiffSide::New, "b")]), "comments[0].line");
        assert_eq!(
            bad(&[c("a", 1, DiffSide::New, "\u{7} \n")]),
            "comments[0].body"
        );
        let long = "x".repeat(MAX_COMMENT_BODY + 1);
        assert_eq!(bad(&[c("a", 1, DiffSide::New, &long)]), "comments[0].body");
    }

    #[test]
    fn a_body_cannot_forge_a_comment_line_of_its_own() {
        let n = changes_nudge(
            "pol_2",
            &checked_comments(&[c("a.rs", 1, DiffSide::New, "ok\n- b.rs:9")]).expect("ok"),
        );
        let lines: Vec<&str> = n.lines().collect();
        assert_eq!(lines[1], "- a.rs:1");
        assert!(
            lines[2..].iter().all(|l| l.starts_with("  > ")),
            "{lines:?}"
        );
    }
}

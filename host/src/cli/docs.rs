//! `gatehost docs [TOPIC]`: the project's documents, carried in the binary,
//! so that an installed gatehost (`cargo install`, no checkout beside it)
//! has the same reference its hints point to. It owns only the texts and
//! their names; it never reads a file at run time.

use super::error::{CliError, CliResult};

/// A document: its topic name, the file it is carried from, and what it
/// covers (for the list).
struct Doc {
    topic: &'static str,
    file: &'static str,
    about: &'static str,
    text: &'static str,
}

const DOCS: &[Doc] = &[
    Doc {
        topic: "readme",
        file: "README.md",
        about: "what gatehost is, the first gated agent, check, gate files, the configuration",
        text: include_str!("../../../README.md"),
    },
    Doc {
        topic: "agents",
        file: "docs/agents.md",
        about: "gating agent CLIs with hooks (Claude Code, Codex, Gemini CLI, Cursor, Qwen Code, Copilot CLI, Aider), daemon mode step by step",
        text: include_str!("../../../docs/agents.md"),
    },
    Doc {
        topic: "daemon",
        file: "docs/daemon.md",
        about: "gatehost serve: configuration, sessions, session policies, policies, events, commits, the API",
        text: include_str!("../../../docs/daemon.md"),
    },
    Doc {
        topic: "security",
        file: "docs/security.md",
        about: "the sandbox, what a gate may read and run, trust, the design choices",
        text: include_str!("../../../docs/security.md"),
    },
    Doc {
        topic: "plugins",
        file: "docs/plugins.md",
        about: "WASM gate plugins: the carried ones, writing one, the interface",
        text: include_str!("../../../docs/plugins.md"),
    },
    Doc {
        topic: "mcp",
        file: "docs/mcp.md",
        about: "gatehost mcp: the daemon as MCP tools for agents",
        text: include_str!("../../../docs/mcp.md"),
    },
    Doc {
        topic: "fleet",
        file: "docs/fleet.md",
        about: "where serve keeps its state: SQLite by default, or PostgreSQL ([store], store migrate|check)",
        text: include_str!("../../../docs/fleet.md"),
    },
    Doc {
        topic: "routines",
        file: "docs/chains-routines.md",
        about: "routines (steps agents carry out, escalations, restarts) and review chains",
        text: include_str!("../../../docs/chains-routines.md"),
    },
];

/// The topics, for `--help` and errors.
pub(super) const TOPICS: &str = "readme, agents, daemon, fleet, security, plugins, mcp, routines";

/// Prints the document `topic` (Markdown), or the list of them.
pub(super) fn show(topic: Option<&str>) -> CliResult<i32> {
    let Some(topic) = topic else {
        println!("gatehost docs TOPIC prints one of these (Markdown):");
        for d in DOCS {
            println!("  {:<9} {}  ({})", d.topic, d.about, d.file);
        }
        return Ok(0);
    };
    match DOCS.iter().find(|d| d.topic == topic) {
        Some(d) => {
            print!("{}", d.text);
            Ok(0)
        }
        None => {
            let mut e =
                CliError::input(format!("no document '{topic}' (topics: {TOPICS})")).field("TOPIC");
            if let Some(near) = crate::suggest::nearest(topic, DOCS.iter().map(|d| d.topic)) {
                e = e.hint(format!("did you mean `gatehost docs {near}`?"));
            }
            Err(e)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_document_is_carried_whole_under_its_topic() {
        for d in DOCS {
            assert!(d.text.starts_with("# "), "{}: {}", d.topic, &d.text[..40]);
            assert!(d.text.len() > 1000, "{}", d.topic);
            assert!(TOPICS.contains(d.topic), "{}", d.topic);
        }
        assert_eq!(TOPICS.split(", ").count(), DOCS.len());
    }

    #[test]
    fn an_unknown_topic_is_an_input_error_with_the_nearest_name() {
        let e = show(Some("securty")).expect_err("unknown");
        let text = format!("{e:?}");
        assert!(
            text.contains("securty") && text.contains("security"),
            "{text}"
        );
    }
}

//! Tests of the allowlist (`allow.rs`).

use super::*;

fn allow(entries: &[&str]) -> Allowlist {
    let spelled: Vec<String> = entries.iter().map(|s| s.to_string()).collect();
    Allowlist::resolve(&spelled, Some(std::ffi::OsStr::new("/usr/bin:/bin"))).expect("allowlist")
}

fn ruled(program: &str, subcommands: Option<&[&str]>, deny: &[&str]) -> Allowlist {
    Allowlist::resolve_entries(
        &[EntrySpec {
            program: program.into(),
            args: ArgRule {
                subcommands: subcommands.map(|s| s.iter().map(|x| x.to_string()).collect()),
                deny: deny.iter().map(|x| x.to_string()).collect(),
                free: false,
                bare: false,
            },
            network: false,
            env: Vec::new(),
        }],
        // cargo lives in ~/.cargo/bin: the test's own PATH finds it.
        std::env::var_os("PATH").as_deref(),
    )
    .expect("allowlist")
}

fn args(a: &[&str]) -> Vec<String> {
    a.iter().map(|s| s.to_string()).collect()
}

#[test]
fn the_allowlist_is_default_deny() {
    let list = Allowlist::default();
    assert_eq!(
        list.admit("true").unwrap_err().to_string(),
        "command 'true' is not in the allowlist"
    );
}

#[test]
fn a_listed_name_admits_exactly_its_resolved_program() {
    let list = allow(&["true"]);
    assert_eq!(list.admit("true").unwrap(), PathBuf::from("/usr/bin/true"));
    assert_eq!(
        list.admit("/usr/bin/true").unwrap(),
        PathBuf::from("/usr/bin/true")
    );
    for other in [
        "/elsewhere/true",
        "./true",
        "bin/true",
        "false",
        "/usr/bin/../bin/true",
    ] {
        assert_eq!(
            list.admit(other),
            Err(AllowError::NotAllowed(other.to_string())),
            "{other} must be refused"
        );
    }
}

#[test]
fn an_absolute_entry_is_taken_as_written() {
    let list = allow(&["/usr/bin/git"]);
    assert_eq!(
        list.admit("/usr/bin/git").unwrap(),
        PathBuf::from("/usr/bin/git")
    );
    assert!(list.admit("git").is_err(), "the bare name is not listed");
}

#[test]
fn a_listed_name_missing_from_path_says_so() {
    let list = allow(&["no-such-program-gatehost"]);
    assert_eq!(
        list.admit("no-such-program-gatehost"),
        Err(AllowError::NotFound("no-such-program-gatehost".into()))
    );
}

#[test]
fn a_bare_entry_admits_no_agent_arguments_but_any_of_the_operators() {
    let list = allow(&["true"]);
    assert!(list.admit_with_args("true", &[], &[], Trust::Agent).is_ok());
    let err = list
        .admit_with_args("true", &args(&["x"]), &[], Trust::Agent)
        .unwrap_err();
    assert!(
        matches!(&err, AllowError::NoArguments { command, .. } if command == "true"),
        "{err}"
    );
    assert!(
        list.admit_with_args("true", &args(&["x"]), &[], Trust::Operator)
            .is_ok()
    );
}

#[test]
fn hostile_git_arguments_are_refused_naming_the_argument() {
    let list = ruled(
        "git",
        Some(&["diff", "status", "log"]),
        &["-c", "--no-index", "--output", "--ext-diff"],
    );
    let refused = |a: &[&str]| {
        list.admit_with_args("git", &args(a), &[], Trust::Agent)
            .expect_err("refused")
            .to_string()
    };
    let e = refused(&["-c", "alias.x=!touch /tmp/pwned", "x"]);
    assert!(
        e.contains("argument '-c'") && e.contains("not an allowed subcommand"),
        "{e}"
    );
    let e = refused(&["diff", "--no-index", "/dev/null", "/root/.ssh/id_rsa"]);
    assert!(
        e.contains("argument '--no-index'") && e.contains("denies"),
        "{e}"
    );
    let e = refused(&["diff", "/etc/shadow"]);
    assert!(
        e.contains("argument '/etc/shadow'") && e.contains("absolute path"),
        "{e}"
    );
    let e = refused(&["log", "--output=../x"]);
    assert!(e.contains("argument '--output=../x'"), "{e}");
    let e = refused(&["diff", "-cfoo"]);
    assert!(e.contains("argument '-cfoo'"), "{e}");
    let e = refused(&[]);
    assert!(e.contains("a subcommand is required"), "{e}");
    assert!(
        list.admit_with_args(
            "git",
            &args(&["diff", "--stat", "src/a b.rs"]),
            &[],
            Trust::Agent
        )
        .is_ok()
    );
}

#[test]
fn hostile_cargo_arguments_are_refused_naming_the_argument() {
    let list = ruled(
        "cargo",
        Some(&["test", "build", "clippy"]),
        &["--config", "-Z"],
    );
    let refused = |a: &[&str]| {
        list.admit_with_args("cargo", &args(a), &[], Trust::Agent)
            .expect_err("refused")
            .to_string()
    };
    let e = refused(&["test", "--config", "build.rustc='/tmp/x'"]);
    assert!(e.contains("argument '--config'"), "{e}");
    assert!(refused(&["test", "--config=x"]).contains("argument '--config=x'"));
    assert!(refused(&["test", "-Zunstable-options"]).contains("argument '-Zunstable-options'"));
    assert!(
        refused(&["test", "--manifest-path", "/etc/Cargo.toml"])
            .contains("argument '/etc/Cargo.toml'")
    );
    assert!(
        refused(&["test", "--manifest-path=../other/Cargo.toml"])
            .contains("'--manifest-path=../other/Cargo.toml'")
    );
    assert!(refused(&["run"]).contains("argument 'run'"));
    assert!(
        list.admit_with_args(
            "cargo",
            &args(&["test", "--quiet", "--offline", "--", "--nocapture"]),
            &[],
            Trust::Agent
        )
        .is_ok()
    );
}

#[test]
fn an_argument_refusal_names_the_file_and_the_entry_to_write() {
    let list = ruled("git", Some(&["status"]), &["-c"]).with_source("/etc/gatehost/config.toml");
    let refused = |a: &[&str]| {
        list.admit_with_args("git", &args(a), &[], Trust::Agent)
            .expect_err("refused")
            .to_string()
    };
    let e = refused(&["log", "-p"]);
    assert!(
        e.ends_with(
            "; to admit it, the operator may add \"log\" to subcommands of the git entry \
             (shell.allow[0]) of [shell] allow in /etc/gatehost/config.toml: \
             { program = \"git\", subcommands = [\"status\", \"log\"], deny = [\"-c\"] }"
        ),
        "{e}"
    );
    let e = refused(&["status", "-c"]);
    assert!(
        e.contains("denies '-c' (the git entry (shell.allow[0]) of [shell] allow in /etc/gatehost/config.toml)"),
        "{e}"
    );
    let e = refused(&["status", "/etc/passwd"]);
    assert!(
        e.contains("only free_args = true on the git entry (shell.allow[0]) of [shell] allow in /etc/gatehost/config.toml"),
        "{e}"
    );
    let bare = allow(&["true"]).with_source("/etc/gatehost/config.toml");
    let e = bare
        .admit_with_args("true", &args(&["-m", "x"]), &[], Trust::Agent)
        .expect_err("refused")
        .to_string();
    assert!(
        e.ends_with(
            "the operator may write the true entry (shell.allow[0]) of [shell] allow in \
             /etc/gatehost/config.toml as { program = \"true\", subcommands = [\"-m\"] }"
        ),
        "{e}"
    );
}

#[test]
fn a_free_entry_admits_any_arguments() {
    let list = Allowlist::resolve_entries(
        &[EntrySpec {
            program: "sh".into(),
            args: ArgRule {
                free: true,
                ..ArgRule::default()
            },
            network: false,
            env: Vec::new(),
        }],
        Some(std::ffi::OsStr::new("/usr/bin:/bin")),
    )
    .expect("allowlist");
    assert!(
        list.admit_with_args("sh", &args(&["-c", "/anything ../x"]), &[], Trust::Agent)
            .is_ok()
    );
}

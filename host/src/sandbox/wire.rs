//! The sandbox helper's command line: what the host asks `gatehost-sandbox`
//! to enforce before it executes a gate's program.
//!
//! This file is compiled twice: into the library (which writes the command
//! line) and into the helper binary (which reads it), so the two can never
//! disagree on the format. It must stay free of any other dependency than
//! `std`: the helper is a small binary of its own and links nothing of the
//! library.
//!
//! ```text
//! gatehost-sandbox --abi N [--ro PATH]... [--rw PATH]... [--dev PATH]...
//!                  [--net] [--no-caps] [--user UID:GID] [--chdir REL]
//!                  -- PROGRAM [ARG]...
//! ```
//! Relative paths name places under the helper's starting working directory
//! (the workspace root, opened by the host through its anchor), resolved
//! before anything is executed.

use std::ffi::{OsStr, OsString};
use std::path::PathBuf;

/// Exit status of the helper when it could not confine or start the
/// program (it then writes one line starting with [`ERROR_PREFIX`] to
/// stderr). The program itself never ran.
pub const SETUP_FAILED: i32 = 125;
/// What the helper's error line starts with.
pub const ERROR_PREFIX: &str = "gatehost-sandbox: cannot confine the gate: ";

/// What one confined process may do.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Policy {
    /// Landlock ABI the rules are written for; the helper refuses to run
    /// the program if the kernel does not enforce all of it.
    pub abi: u32,
    /// Read and execute beneath these paths.
    pub read: Vec<PathBuf>,
    /// Read, write, create and remove beneath these paths.
    pub write: Vec<PathBuf>,
    /// Device files opened for reading and writing (`/dev/null` …).
    pub devices: Vec<PathBuf>,
    /// TCP connect and bind allowed (otherwise both are denied when the
    /// ABI handles TCP).
    pub network: bool,
    /// Drop every capability (bounding, permitted, effective, inheritable,
    /// ambient) before executing the program.
    pub drop_caps: bool,
    /// Switch to this uid and gid (supplementary groups cleared).
    pub user: Option<(u32, u32)>,
    /// Working directory of the program, relative to the starting one and
    /// resolved beneath it.
    pub chdir: Option<PathBuf>,
}

/// A command line for the helper: the policy, then the program and its
/// arguments.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Invocation {
    pub policy: Policy,
    pub program: OsString,
    pub args: Vec<OsString>,
}

impl Invocation {
    /// The helper's arguments (without argv\[0\]).
    pub fn to_args(&self) -> Vec<OsString> {
        let p = &self.policy;
        let mut out: Vec<OsString> = vec!["--abi".into(), p.abi.to_string().into()];
        for (flag, paths) in [("--ro", &p.read), ("--rw", &p.write), ("--dev", &p.devices)] {
            for path in paths {
                out.push(flag.into());
                out.push(path.clone().into_os_string());
            }
        }
        if p.network {
            out.push("--net".into());
        }
        if p.drop_caps {
            out.push("--no-caps".into());
        }
        if let Some((uid, gid)) = p.user {
            out.push("--user".into());
            out.push(format!("{uid}:{gid}").into());
        }
        if let Some(dir) = &p.chdir {
            out.push("--chdir".into());
            out.push(dir.clone().into_os_string());
        }
        out.push("--".into());
        out.push(self.program.clone());
        out.extend(self.args.iter().cloned());
        out
    }

    /// Reads the helper's arguments (without argv\[0\]).
    pub fn parse(args: impl IntoIterator<Item = OsString>) -> Result<Self, String> {
        let mut policy = Policy::default();
        let mut abi = None;
        let mut it = args.into_iter();
        let value = |it: &mut dyn Iterator<Item = OsString>, flag: &str| {
            it.next().ok_or_else(|| format!("{flag} needs a value"))
        };
        loop {
            let Some(arg) = it.next() else {
                return Err("no program after --".into());
            };
            let flag = arg.to_str().unwrap_or_default();
            match flag {
                "--abi" => {
                    let v = value(&mut it, flag)?;
                    abi = Some(
                        v.to_str()
                            .and_then(|s| s.parse::<u32>().ok())
                            .ok_or("--abi needs a number")?,
                    );
                }
                "--ro" => policy.read.push(value(&mut it, flag)?.into()),
                "--rw" => policy.write.push(value(&mut it, flag)?.into()),
                "--dev" => policy.devices.push(value(&mut it, flag)?.into()),
                "--net" => policy.network = true,
                "--no-caps" => policy.drop_caps = true,
                "--user" => {
                    let v = value(&mut it, flag)?;
                    policy.user = Some(parse_user(&v).ok_or("--user needs UID:GID")?);
                }
                "--chdir" => policy.chdir = Some(value(&mut it, flag)?.into()),
                "--" => break,
                other => return Err(format!("unknown argument {other:?}")),
            }
        }
        policy.abi = abi.ok_or("--abi is required")?;
        let program = it.next().ok_or("no program after --")?;
        Ok(Invocation {
            policy,
            program,
            args: it.collect(),
        })
    }
}

fn parse_user(v: &OsStr) -> Option<(u32, u32)> {
    let (u, g) = v.to_str()?.split_once(':')?;
    Some((u.parse().ok()?, g.parse().ok()?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_command_line_reads_back_as_written() {
        let inv = Invocation {
            policy: Policy {
                abi: 6,
                read: vec!["/usr".into(), "/etc".into()],
                write: vec![".".into(), "/tmp/x y".into()],
                devices: vec!["/dev/null".into()],
                network: true,
                drop_caps: true,
                user: Some((65534, 65534)),
                chdir: Some("sub/dir".into()),
            },
            program: "/usr/bin/env".into(),
            // Arguments that look like the helper's flags stay the program's.
            args: vec!["--rw".into(), "/".into(), "--".into()],
        };
        assert_eq!(Invocation::parse(inv.to_args()).expect("parses"), inv);
    }

    #[test]
    fn incomplete_command_lines_are_refused() {
        let p = |a: &[&str]| Invocation::parse(a.iter().map(OsString::from));
        assert!(p(&["--ro", "/usr", "--", "/bin/true"]).is_err(), "no abi");
        assert!(p(&["--abi", "6"]).is_err(), "no program");
        assert!(p(&["--abi", "6", "--"]).is_err(), "no program");
        assert!(p(&["--abi", "x", "--", "/bin/true"]).is_err());
        assert!(p(&["--abi", "6", "--user", "1", "--", "/bin/true"]).is_err());
        assert!(p(&["--abi", "6", "--what", "--", "/bin/true"]).is_err());
        assert!(p(&["--abi", "6", "--", "/bin/true"]).is_ok());
    }
}

use super::*;
use std::os::unix::fs::PermissionsExt;

/// A temp dir, canonical.
fn root() -> (tempfile::TempDir, PathBuf) {
    let t = tempfile::tempdir().expect("tempdir");
    let r = std::fs::canonicalize(t.path()).expect("canonical");
    (t, r)
}

fn script(path: &Path, text: &str) {
    std::fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
    std::fs::write(path, text).expect("write");
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).expect("chmod");
}

fn lookup<'a>(path_var: Option<&'a OsStr>, home: &Path) -> Lookup<'a> {
    Lookup {
        path_var,
        home: Some(home.to_path_buf()),
        var: &no_var,
    }
}

fn no_var(_: &str) -> Option<OsString> {
    None
}

fn paths(needs: &[Need]) -> Vec<PathBuf> {
    needs.iter().map(|n| n.path.clone()).collect()
}

#[test]
fn a_symlink_chain_is_followed_to_the_file_it_reaches() {
    let (_t, r) = root();
    script(&r.join("opt/tool/bin/tool"), "\x7fELF not really");
    std::fs::create_dir_all(r.join("a")).expect("mkdir");
    std::os::unix::fs::symlink(r.join("opt/tool/bin/tool"), r.join("a/one")).expect("ln");
    std::os::unix::fs::symlink("one", r.join("a/two")).expect("ln");
    let n = needs("tool", &r.join("a/two"), &lookup(None, &r));
    assert_eq!(paths(&n), [r.join("opt/tool/bin/tool")]);
    assert_eq!(
        n[0].grant,
        r.join("opt/tool"),
        "the install's root is suggested"
    );
}

#[test]
fn a_shebang_interpreter_and_env_names_are_followed_on_the_gates_path() {
    let (_t, r) = root();
    script(&r.join("py/bin/python3"), "binary");
    script(
        &r.join("tools/run"),
        "#!/usr/bin/env -S  LANG=C python3 -u\nprint()\n",
    );
    script(
        &r.join("tools/direct"),
        &format!("#!{} -E\n", r.join("py/bin/python3").display()),
    );
    let path = std::env::join_paths([r.join("py/bin")]).expect("join");
    let l = lookup(Some(&path), &r);
    let n = paths(&needs("run", &r.join("tools/run"), &l));
    assert!(n.contains(&r.join("py/bin/python3")), "{n:?}");
    assert!(
        n.iter().any(|p| p.ends_with("env")),
        "env itself is exec'd: {n:?}"
    );
    let n = needs("direct", &r.join("tools/direct"), &l);
    assert_eq!(
        paths(&n),
        [r.join("tools/direct"), r.join("py/bin/python3")]
    );
    assert!(n[1].why.contains("#! line"), "{}", n[1].why);
}

#[test]
fn shebang_loops_end() {
    let (_t, r) = root();
    script(&r.join("a"), &format!("#!{}\n", r.join("b").display()));
    script(&r.join("b"), &format!("#!{}\n", r.join("a").display()));
    script(
        &r.join("self"),
        &format!("#!{}\n", r.join("self").display()),
    );
    let l = lookup(None, &r);
    assert_eq!(
        paths(&needs("a", &r.join("a"), &l)),
        [r.join("a"), r.join("b")]
    );
    assert_eq!(paths(&needs("self", &r.join("self"), &l)), [r.join("self")]);
    // A chain longer than the bound stops there, without an error.
    for i in 0..20 {
        script(
            &r.join(format!("c{i}")),
            &format!("#!{}\n", r.join(format!("c{}", i + 1)).display()),
        );
    }
    let n = needs("c0", &r.join("c0"), &l);
    assert_eq!(n.len(), MAX_DEPTH + 1);
}

#[test]
fn a_pyenv_shim_needs_its_root_and_names_libexec_first() {
    let (_t, r) = root();
    let home = r.join("home/u");
    let root = home.join(".pyenv");
    script(
        &root.join("shims/python3"),
        &format!(
            "#!/usr/bin/env bash\nset -e\nexport PYENV_ROOT=\"{}\"\nexec \"$PYENV_ROOT/libexec/pyenv\" exec python3 \"$@\"\n",
            root.display()
        ),
    );
    script(&root.join("libexec/pyenv"), "#!/usr/bin/env bash\nexit 0\n");
    let path = std::env::join_paths([
        root.join("shims"),
        PathBuf::from("/usr/bin"),
        PathBuf::from("/bin"),
    ])
    .expect("join");
    let n = needs(
        "python3",
        &root.join("shims/python3"),
        &lookup(Some(&path), &home),
    );
    let ps = paths(&n);
    assert_eq!(ps[0], root.join("shims/python3"));
    assert_eq!(ps[1], root.join("libexec/pyenv"), "{ps:?}");
    assert!(n[1].why.contains("python3 is a pyenv shim"), "{}", n[1].why);
    assert_eq!(n[1].grant, root);
    assert!(ps.contains(&root), "{ps:?}");
}

#[test]
fn a_venv_python_needs_the_venv_its_base_python_and_its_lib() {
    let (_t, r) = root();
    script(&r.join("uv/cpython-3.12/bin/python3.12"), "binary");
    std::fs::create_dir_all(r.join("uv/cpython-3.12/lib/python3.12")).expect("mkdir");
    let venv = r.join("proj/.venv");
    std::fs::create_dir_all(venv.join("bin")).expect("mkdir");
    std::os::unix::fs::symlink(
        r.join("uv/cpython-3.12/bin/python3.12"),
        venv.join("bin/python"),
    )
    .expect("ln");
    std::fs::write(
        venv.join("pyvenv.cfg"),
        format!(
            "home = {}\ninclude-system-site-packages = false\n",
            r.join("uv/cpython-3.12/bin").display()
        ),
    )
    .expect("cfg");
    let n = paths(&needs(
        "python",
        &venv.join("bin/python"),
        &lookup(None, &r),
    ));
    for want in [
        r.join("uv/cpython-3.12/bin/python3.12"),
        venv.clone(),
        r.join("uv/cpython-3.12/bin"),
        r.join("uv/cpython-3.12/lib"),
    ] {
        assert!(n.contains(&want), "{want:?} not in {n:?}");
    }
}

#[test]
fn a_rustup_proxy_needs_rustup_home() {
    let (_t, r) = root();
    let home = r.join("home");
    script(&home.join(".cargo/bin/rustup"), "binary");
    std::fs::hard_link(
        home.join(".cargo/bin/rustup"),
        home.join(".cargo/bin/cargo"),
    )
    .expect("link");
    script(&home.join(".cargo/bin/other"), "binary");
    std::fs::create_dir_all(home.join(".rustup/toolchains")).expect("mkdir");
    let l = lookup(None, &home);
    let n = paths(&needs("cargo", &home.join(".cargo/bin/cargo"), &l));
    assert!(n.contains(&home.join(".rustup")), "{n:?}");
    let n = paths(&needs("other", &home.join(".cargo/bin/other"), &l));
    assert!(!n.contains(&home.join(".rustup")), "not a proxy: {n:?}");
}

#[test]
fn an_nvm_npm_needs_its_version_tree() {
    let (_t, r) = root();
    let home = r.join("home");
    let v = home.join(".nvm/versions/node/v22.1.0");
    script(&v.join("bin/node"), "binary");
    script(
        &v.join("lib/node_modules/npm/bin/npm-cli.js"),
        "#!/usr/bin/env node\n",
    );
    std::os::unix::fs::symlink("../lib/node_modules/npm/bin/npm-cli.js", v.join("bin/npm"))
        .expect("ln");
    let path = std::env::join_paths([v.join("bin")]).expect("join");
    let n = paths(&needs(
        "npm",
        &v.join("bin/npm"),
        &lookup(Some(&path), &home),
    ));
    assert!(n.contains(&v), "{n:?}");
    assert!(n.contains(&v.join("bin/node")), "{n:?}");
}

#[test]
fn denied_paths_are_read_from_the_ways_programs_say_it() {
    let err = "/h/.pyenv/shims/python3: line 5: /h/.pyenv/libexec/pyenv: Permission denied\n\
               PermissionError: [Errno 13] Permission denied: '/h/x/y.py'\n\
               /usr/bin/env: ‘python3’: Permission denied\n\
               /not/this: No such file or directory\n";
    assert_eq!(
        denied_paths(err),
        [
            PathBuf::from("/h/.pyenv/shims/python3"),
            PathBuf::from("/h/.pyenv/libexec/pyenv"),
            PathBuf::from("/h/x/y.py"),
            PathBuf::from("/usr/bin/env"),
        ]
    );
}

/// A confined sandbox granting `read` (canonical), with `protected`.
fn confined(read: Vec<PathBuf>, protected: Vec<PathBuf>) -> Sandbox {
    Sandbox {
        state: State::Confined { abi: 6 },
        drop_caps: false,
        user: None,
        base: None,
        read_paths: read,
        protected_places: crate::anchor::Places::of(&protected),
        protected,
        scratch_root: None,
        refusal: None,
    }
}

#[test]
fn the_first_path_outside_the_grants_is_named_with_the_read_line() {
    let (_t, r) = root();
    let home = r.join("home");
    let root = home.join(".pyenv");
    script(&root.join("shims/python3"), "#!/usr/bin/env bash\nexec x\n");
    script(&root.join("libexec/pyenv"), "#!/usr/bin/env bash\n");
    let path =
        std::env::join_paths([PathBuf::from("/usr/bin"), PathBuf::from("/bin")]).expect("join");
    let l = lookup(Some(&path), &home);
    let system = vec![PathBuf::from("/usr")];
    let shim = root.join("shims/python3");
    let u = confined(system.clone(), Vec::new())
        .unreached("python3", &shim, &[], &l)
        .expect("unreached");
    let msg = u.message("/etc/gatehost.toml");
    assert_eq!(
        msg,
        format!(
            "the sandbox does not let gates read {} (python3 is a pyenv shim, which runs it): \
             add `read = [\"{}\"]` to [sandbox] in /etc/gatehost.toml",
            root.join("libexec/pyenv").display(),
            root.display()
        )
    );
    // Granted (as the hint says), nothing is left out.
    let mut granted = system.clone();
    granted.push(root.clone());
    assert_eq!(
        confined(granted, Vec::new()).unreached("python3", &shim, &[], &l),
        None
    );
    // A grant the gate adds (a judge adapter's `read`) counts too.
    assert_eq!(
        confined(system.clone(), Vec::new()).unreached(
            "python3",
            &shim,
            std::slice::from_ref(&root),
            &l
        ),
        None
    );
    // Inside gatehost's own places no grant helps, and the message says so.
    let u = confined(system, vec![root.clone()])
        .unreached("python3", &shim, std::slice::from_ref(&root), &l)
        .expect("unreached");
    assert_eq!(u.protected, Some(root.clone()));
    assert!(
        u.message("c").contains("no gate may read"),
        "{}",
        u.message("c")
    );
}

#[test]
fn not_confined_nothing_is_checked() {
    let (_t, r) = root();
    script(&r.join("tools/bin/t"), "#!/elsewhere/interp\n");
    let mut s = confined(Vec::new(), Vec::new());
    s.state = State::Disabled;
    assert_eq!(
        s.unreached("t", &r.join("tools/bin/t"), &[], &lookup(None, &r)),
        None
    );
    assert_eq!(s.denied_outside("/x/y: Permission denied", &[]), None);
}

#[test]
fn a_permission_denied_is_the_sandboxs_only_outside_the_grants() {
    let (_t, r) = root();
    std::fs::create_dir_all(r.join("ws")).expect("mkdir");
    let s = confined(vec![PathBuf::from("/usr")], Vec::new());
    let outside = r.join("home/.pyenv/libexec/pyenv");
    let err = format!(
        "/usr/bin/bash: line 1: {}: Permission denied\n",
        outside.display()
    );
    assert_eq!(s.denied_outside(&err, &[r.join("ws")]), Some(outside));
    // The workspace (and anything else the gate is granted) is its own.
    let inside = format!(
        "bash: {}: Permission denied\n",
        r.join("ws/notexec").display()
    );
    assert_eq!(s.denied_outside(&inside, &[r.join("ws")]), None);
    // Another error about an outside path is not the sandbox's.
    let other = format!(
        "{}: No such file or directory\n",
        r.join("home/x").display()
    );
    assert_eq!(s.denied_outside(&other, &[r.join("ws")]), None);
}

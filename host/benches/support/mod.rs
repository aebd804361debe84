//! What the benches share: their arguments, running a baseline and a
//! subject in alternation, quantiles, and generated workspaces. It never
//! measures anything itself and never prints.

// Each bench uses a part of it.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// `--NAME N` from the command line, else `default`.
pub fn arg(name: &str, default: usize) -> usize {
    std::env::args()
        .skip_while(|a| a != name)
        .nth(1)
        .and_then(|n| n.parse().ok())
        .unwrap_or(default)
}

/// Whether `--only a,b,…` names `name` (everything runs without it).
pub fn selected(name: &str) -> bool {
    std::env::args()
        .skip_while(|a| a != "--only")
        .nth(1)
        .is_none_or(|list| list.split(',').any(|s| s == name))
}

/// The `q` quantile of `samples` (nearest rank).
pub fn quantile<T: Copy + Ord>(samples: &[T], q: f64) -> T {
    let mut s = samples.to_vec();
    s.sort();
    s[((s.len() as f64 - 1.0) * q).round() as usize]
}

/// `a` then `b`, `rounds` times after a warm-up of a tenth of them plus 3,
/// each preceded by `before` (not part of a sample); returns their samples.
pub fn alternate_with<T>(
    rounds: usize,
    mut before: impl FnMut(),
    mut a: impl FnMut() -> T,
    mut b: impl FnMut() -> T,
) -> (Vec<T>, Vec<T>) {
    for _ in 0..rounds / 10 + 3 {
        a();
        b();
    }
    let (mut xa, mut xb) = (Vec::with_capacity(rounds), Vec::with_capacity(rounds));
    for _ in 0..rounds {
        before();
        xa.push(a());
        before();
        xb.push(b());
    }
    (xa, xb)
}

/// `f` as a sample: how long one call took.
pub fn timed(mut f: impl FnMut()) -> impl FnMut() -> Duration {
    move || {
        let t = Instant::now();
        f();
        t.elapsed()
    }
}

/// A workspace of `n` small Rust-like files under `root/src`, the one in
/// the middle holding a `dbg!(` when `planted`.
pub fn generate_workspace(root: &Path, n: usize, planted: bool) {
    for i in 0..n {
        let dir: PathBuf = root.join(format!("src/mod{}", i % 20));
        std::fs::create_dir_all(&dir).expect("mkdir");
        let mut text = String::new();
        for line in 0..40 {
            text.push_str(&format!(
                "pub fn function_{i}_{line}(x: u32) -> u32 {{ x.wrapping_mul({line}) + {i} }}\n"
            ));
        }
        if planted && i == n / 2 {
            text.push_str("fn debug() { dbg!(1); }\n");
        }
        std::fs::write(dir.join(format!("file{i}.rs")), text).expect("write");
    }
}

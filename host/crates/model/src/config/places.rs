//! Where a directory meets the host's own places: whether a workspace,
//! a root or the data directory holds or lies inside one of them, judged
//! on canonical paths (a place not made yet by its nearest existing
//! ancestor).
//!
//! It owns that comparison only; it must never create or change a path.

use std::path::{Path, PathBuf};

/// The first of `places` that `dir` (a canonical path) holds or lies
/// inside, as its canonical path. A place that does not exist yet is
/// compared by its nearest existing ancestor's canonical path and the rest
/// as written, so a directory made later is still covered.
pub fn overlapping_place(dir: &Path, places: &[PathBuf]) -> Option<PathBuf> {
    overlapping_canonical(dir, &canonical_places(places))
}

/// `places` in the canonical form [`overlapping_canonical`] compares, made
/// once where the same places are checked again and again (every gate).
pub fn canonical_places(places: &[PathBuf]) -> Vec<PathBuf> {
    places
        .iter()
        .filter_map(|p| canonical_or_planned(p))
        .collect()
}

/// [`overlapping_place`] against places already made canonical.
fn overlapping_canonical(dir: &Path, canonical: &[PathBuf]) -> Option<PathBuf> {
    canonical
        .iter()
        .find(|p| p.starts_with(dir) || dir.starts_with(p))
        .cloned()
}

fn canonical_or_planned(path: &Path) -> Option<PathBuf> {
    if let Ok(c) = std::fs::canonicalize(path) {
        return Some(c);
    }
    let mut rest = Vec::new();
    let mut at = path;
    loop {
        rest.push(at.file_name()?.to_os_string());
        at = at.parent()?;
        if let Ok(c) = std::fs::canonicalize(at) {
            return Some(rest.iter().rev().fold(c, |acc, part| acc.join(part)));
        }
    }
}

use super::*;
use std::collections::BTreeMap;

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// Every file under `dir` (not following links), by relative path.
fn files_of(dir: &Path) -> BTreeMap<String, Vec<u8>> {
    fn walk(root: &Path, dir: &Path, out: &mut BTreeMap<String, Vec<u8>>) {
        for entry in std::fs::read_dir(dir).expect("read dir") {
            let entry = entry.expect("entry");
            let path = entry.path();
            let kind = entry.file_type().expect("file type");
            if kind.is_dir() {
                walk(root, &path, out);
            } else {
                let rel = path.strip_prefix(root).expect("under root");
                out.insert(
                    rel.to_string_lossy().into_owned(),
                    std::fs::read(&path).expect("read"),
                );
            }
        }
    }
    let mut out = BTreeMap::new();
    walk(dir, dir, &mut out);
    out
}

#[test]
fn the_kit_vendors_exactly_the_repositorys_wit() {
    let ours = files_of(&repo().join("wit/v0.1"));
    let kit = files_of(&repo().join("plugins/kit/wit/v0.1"));
    assert!(!ours.is_empty());
    assert_eq!(
        ours.keys().collect::<Vec<_>>(),
        kit.keys().collect::<Vec<_>>(),
        "plugins/kit/wit/v0.1 must hold the same files as wit/v0.1"
    );
    for (name, bytes) in &ours {
        assert!(
            kit[name] == *bytes,
            "plugins/kit/wit/v0.1/{name} differs from wit/v0.1/{name}: copy it over"
        );
    }
}

#[test]
fn the_binary_carries_every_file_of_the_kit_as_it_is() {
    let mut on_disk = files_of(&repo().join("plugins/kit"));
    on_disk.retain(|path, _| !path.starts_with("target/") && path != "Cargo.lock");
    let embedded: BTreeMap<String, Vec<u8>> = KIT_FILES
        .iter()
        .map(|(p, t)| (p.to_string(), t.as_bytes().to_vec()))
        .collect();
    assert_eq!(
        on_disk.keys().collect::<Vec<_>>(),
        embedded.keys().collect::<Vec<_>>(),
        "KIT_FILES must list every file of plugins/kit"
    );
    assert!(on_disk == embedded);
}

#[test]
fn the_kit_stands_alone_and_its_stated_versions_are_its_own() {
    let manifest: toml::Table = KIT_FILES[0].1.parse().expect("kit manifest");
    assert_eq!(KIT_FILES[0].0, "Cargo.toml");
    assert_eq!(
        manifest["package"]["name"].as_str(),
        Some("gatehost-plugin")
    );
    assert_eq!(manifest["package"]["version"].as_str(), Some(KIT_VERSION));
    // Nothing inherited from the plugins/ workspace, nothing by path: a
    // copy builds wherever it is written.
    for (_, text) in KIT_FILES {
        assert!(!text.contains("workspace = true"), "inherits: {text}");
        assert!(!text.contains(".workspace"), "inherits: {text}");
        assert!(!text.contains("../"), "points outside the kit: {text}");
    }
    for dep in manifest["dependencies"].as_table().expect("deps").values() {
        assert!(dep.get("path").is_none(), "a path dependency: {dep}");
    }
    let wit = KIT_FILES
        .iter()
        .find(|(p, _)| *p == "wit/v0.1/gate.wit")
        .expect("the WIT")
        .1;
    assert!(
        wit.lines()
            .any(|l| l.trim() == format!("package {KIT_INTERFACE};")),
        "the WIT's package is not {KIT_INTERFACE}"
    );
}

#[test]
fn every_placeholder_of_the_template_is_filled() {
    let left = regex::Regex::new(r"@[A-Z_]+@").expect("regex");
    for (path, template) in TEMPLATE_FILES {
        let text = fill(template, "my-gate", "vendor/gatehost-plugin", "here.");
        assert!(!left.is_match(&text), "{path}: {text}");
    }
    let cargo = fill(TEMPLATE_FILES[0].1, "my-gate", "vendor/gatehost-plugin", "");
    let manifest: toml::Table = cargo.parse().expect("the crate's manifest is TOML");
    assert_eq!(manifest["package"]["name"].as_str(), Some("my-gate"));
    assert_eq!(
        manifest["dependencies"]["gatehost-plugin"]["path"].as_str(),
        Some("vendor/gatehost-plugin")
    );
}

#[test]
fn a_kit_path_with_quotes_stays_one_toml_string() {
    let odd = "/tmp/a \"b\"\\c\n";
    let cargo = fill(TEMPLATE_FILES[0].1, "x", &toml_escape(odd), "");
    let manifest: toml::Table = cargo.parse().expect("TOML");
    assert_eq!(
        manifest["dependencies"]["gatehost-plugin"]["path"].as_str(),
        Some(odd)
    );
}

use super::*;

fn file(bytes: &[u8]) -> PluginFile {
    PluginFile {
        name: "t".into(),
        path: PathBuf::from("t.wasm"),
        bytes: bytes.to_vec(),
        digest: String::new(),
    }
}

#[test]
fn headers_tell_modules_components_and_junk_apart() {
    assert!(check_header(&file(b"\0asm\x0d\0\x01\0rest")).is_ok());
    let e = check_header(&file(b"\0asm\x01\0\0\0"))
        .unwrap_err()
        .to_string();
    assert!(e.contains("core WebAssembly module"), "{e}");
    let e = check_header(&file(b"#!/bin/sh\n")).unwrap_err().to_string();
    assert!(e.contains("not a WebAssembly file"), "{e}");
    let e = check_header(&file(b"\0as")).unwrap_err().to_string();
    assert!(e.contains("not a WebAssembly file"), "{e}");
}

/// An empty component: the smallest thing the cache can hold.
const EMPTY_COMPONENT: &[u8] = b"\0asm\x0d\0\x01\0";

/// A cache directory inside a fresh temporary directory, an engine and
/// a plugin file.
struct Setup {
    tmp: tempfile::TempDir,
    dir: PathBuf,
    engine: Engine,
    file: PluginFile,
}

impl Setup {
    /// The test component as `serialize` writes it, unsigned.
    fn serialized(&self) -> Vec<u8> {
        Component::from_binary(&self.engine, EMPTY_COMPONENT)
            .expect("compiles")
            .serialize()
            .expect("serializes")
    }

    fn new() -> Self {
        let tmp = tempfile::tempdir().expect("tempdir");
        let dir = tmp.path().join("cache");
        let file = PluginFile {
            name: "empty".into(),
            path: PathBuf::from("empty.wasm"),
            bytes: EMPTY_COMPONENT.to_vec(),
            digest: hex::encode(Sha256::digest(EMPTY_COMPONENT)),
        };
        Setup {
            tmp,
            dir,
            engine: Engine::default(),
            file,
        }
    }

    fn compile(&self) -> CacheUse {
        compile_cached_reporting(&self.engine, Some(&self.dir), &self.file)
            .expect("compiles")
            .1
    }

    fn entry(&self) -> PathBuf {
        self.dir.join(entry_name(&self.engine, &self.file.digest))
    }

    fn tag(&self) -> PathBuf {
        self.dir.join(format!(
            "{}{TAG_SUFFIX}",
            entry_name(&self.engine, &self.file.digest)
        ))
    }

    fn key(&self) -> PathBuf {
        self.dir.join(KEY_FILE)
    }

    /// Compiles, then checks the next compile is a hit.
    fn assert_recompiled_then_hit(&self) {
        let used = self.compile();
        assert!(matches!(used, CacheUse::Recompiled(_)), "{used:?}");
        assert_eq!(
            self.compile(),
            CacheUse::Hit,
            "the entry was not rewritten validly"
        );
    }
}

fn mode(path: &Path) -> u32 {
    std::fs::symlink_metadata(path).expect("stat").mode() & 0o7777
}

/// A well-formed tag file whose tag is under `key`.
fn tag_signed_with(key: [u8; KEY_LEN], name: &str, serialized: &[u8]) -> Vec<u8> {
    let cache = Cache {
        dir: PathBuf::new(),
        key,
    };
    let tag = cache.tag(name, serialized);
    [TAG_MAGIC, tag.as_bytes()].concat()
}

#[test]
fn an_entry_is_signed_then_hit() {
    let s = Setup::new();
    assert_eq!(s.compile(), CacheUse::Compiled);
    // The entry is exactly what wasmtime serialised (so that wasmtime can
    // map the file itself); the tag is beside it.
    let entry = std::fs::read(s.entry()).expect("entry written");
    assert_eq!(entry, s.serialized());
    let tag = std::fs::read(s.tag()).expect("tag written");
    assert_eq!(tag.len(), TAG_MAGIC.len() + TAG_LEN);
    assert!(tag.starts_with(TAG_MAGIC));
    assert_eq!(mode(&s.dir), 0o700);
    assert_eq!(mode(&s.key()), 0o600);
    assert_eq!(mode(&s.entry()), 0o600);
    assert_eq!(mode(&s.tag()), 0o600);
    assert_eq!(std::fs::read(s.key()).expect("key").len(), KEY_LEN);
    assert_eq!(s.compile(), CacheUse::Hit);
}

/// The mappings of this process that are of `path`'s file.
fn mappings_of(path: &Path) -> usize {
    let maps = std::fs::read_to_string("/proc/self/maps").expect("maps");
    let path = path.to_string_lossy();
    maps.lines().filter(|l| l.ends_with(&*path)).count()
}

#[test]
fn a_hit_maps_the_entry_instead_of_copying_it() {
    let s = Setup::new();
    s.compile();
    let (component, used) =
        compile_cached_reporting(&s.engine, Some(&s.dir), &s.file).expect("loads");
    assert_eq!(used, CacheUse::Hit);
    assert!(
        mappings_of(&s.entry()) > 0,
        "the entry is not mapped while its component lives"
    );
    drop(component);
    assert_eq!(
        mappings_of(&s.entry()),
        0,
        "the mapping outlived its component"
    );
}

#[test]
fn an_entry_renamed_over_after_its_check_is_not_what_loads() {
    let s = Setup::new();
    s.compile();
    let name = entry_name(&s.engine, &s.file.digest);
    let key: [u8; KEY_LEN] = std::fs::read(s.key())
        .expect("key")
        .try_into()
        .expect("key length");
    let cache = Cache {
        dir: s.dir.clone(),
        key,
    };
    let entry = open_entry(&s.entry()).expect("opens").expect("exists");
    let tag = read_tag(&s.tag()).expect("tag");
    // Between the open and the load, the name now holds junk.
    let moved = s.tmp.path().join("checked.cwasm");
    std::fs::rename(s.entry(), &moved).expect("move");
    std::fs::write(s.entry(), b"\x7fELF junk, not what was checked").expect("write");
    let component = cache
        .load_verified(&s.engine, &name, entry, &tag)
        .expect("the open file, checked, is what loads");
    assert!(mappings_of(&moved) > 0, "{moved:?} is not what was mapped");
    drop(component);
}

#[test]
fn a_tampered_entry_is_recompiled_and_rewritten() {
    let s = Setup::new();
    s.compile();
    let mut entry = std::fs::read(s.entry()).expect("entry");
    let last = entry.len() - 1;
    entry[last] ^= 1;
    std::fs::write(s.entry(), &entry).expect("tamper");
    s.assert_recompiled_then_hit();
    assert_ne!(std::fs::read(s.entry()).expect("entry"), entry);
}

#[test]
fn an_entry_signed_under_another_key_is_recompiled() {
    let s = Setup::new();
    s.compile();
    let serialized = s.serialized();
    let name = entry_name(&s.engine, &s.file.digest);
    std::fs::write(s.tag(), tag_signed_with([7; KEY_LEN], &name, &serialized)).expect("write");
    s.assert_recompiled_then_hit();
}

/// An entry of an older single-file format: `magic`, then the tag that
/// `sign(key, name, serialized)` gives, then the component, with no tag
/// file beside it. It is recompiled, and rewritten in today's format.
fn assert_older_format_recompiled(
    magic: &[u8],
    sign: impl Fn(&[u8; KEY_LEN], &str, &[u8]) -> Vec<u8>,
) {
    let s = Setup::new();
    s.compile();
    let serialized = s.serialized();
    let name = entry_name(&s.engine, &s.file.digest);
    let key: [u8; KEY_LEN] = std::fs::read(s.key())
        .expect("key")
        .try_into()
        .expect("key length");
    let tag = sign(&key, &name, &serialized);
    std::fs::write(s.entry(), [magic, &tag, &serialized].concat()).expect("write");
    std::fs::remove_file(s.tag()).expect("rm tag");
    s.assert_recompiled_then_hit();
    assert_eq!(std::fs::read(s.entry()).expect("entry"), serialized);
}

#[test]
fn an_entry_of_the_older_hmac_format_is_recompiled() {
    use hmac::{Hmac, KeyInit, Mac};
    // GHMAC1: HMAC-SHA256 under the same key, the same fields.
    assert_older_format_recompiled(b"GHMAC1", |key, name, serialized| {
        <Hmac<Sha256> as KeyInit>::new_from_slice(key)
            .expect("key")
            .chain_update(b"gatehost-cwasm-v1")
            .chain_update((name.len() as u64).to_le_bytes())
            .chain_update(name.as_bytes())
            .chain_update(serialized)
            .finalize()
            .into_bytes()
            .to_vec()
    });
}

#[test]
fn an_entry_of_the_older_single_file_blake3_format_is_recompiled() {
    // GHB3K1: a keyed BLAKE3 tag inside the entry, in front of the component.
    assert_older_format_recompiled(b"GHB3K1", |key, name, serialized| {
        blake3::Hasher::new_keyed(key)
            .update(b"gatehost-cwasm-v2")
            .update(&(name.len() as u64).to_le_bytes())
            .update(name.as_bytes())
            .update(serialized)
            .finalize()
            .as_bytes()
            .to_vec()
    });
}

#[test]
fn unsigned_and_truncated_entries_are_recompiled() {
    let s = Setup::new();
    s.compile();
    // No tag file.
    std::fs::remove_file(s.tag()).expect("rm tag");
    s.assert_recompiled_then_hit();
    // A tag file that is truncated, empty, too long or of another magic.
    let good = std::fs::read(s.tag()).expect("tag");
    let other_magic = [&b"GHB3K9"[..], &good[TAG_MAGIC.len()..]].concat();
    let too_long = [&good[..], &[0][..]].concat();
    for bad in [good[..20].to_vec(), Vec::new(), too_long, other_magic] {
        std::fs::write(s.tag(), &bad).expect("write");
        s.assert_recompiled_then_hit();
    }
    // A truncated or empty entry under a good tag.
    let entry = std::fs::read(s.entry()).expect("entry");
    for bad in [entry[..entry.len() / 2].to_vec(), Vec::new()] {
        std::fs::write(s.entry(), &bad).expect("write");
        s.assert_recompiled_then_hit();
    }
}

#[test]
fn a_tag_symlink_is_refused() {
    let s = Setup::new();
    s.compile();
    let target = s.tmp.path().join("elsewhere.tag");
    std::fs::rename(s.tag(), &target).expect("move");
    std::os::unix::fs::symlink(&target, s.tag()).expect("symlink");
    s.assert_recompiled_then_hit();
    assert!(std::fs::symlink_metadata(s.tag()).expect("stat").is_file());
}

#[test]
fn a_key_open_to_others_is_replaced() {
    let s = Setup::new();
    s.compile();
    let old = std::fs::read(s.key()).expect("key");
    std::fs::set_permissions(s.key(), Permissions::from_mode(0o644)).expect("chmod");
    s.assert_recompiled_then_hit();
    assert_ne!(std::fs::read(s.key()).expect("key"), old);
    assert_eq!(mode(&s.key()), 0o600);
}

#[test]
fn a_key_symlink_is_replaced_not_followed() {
    let s = Setup::new();
    s.compile();
    // The link points at a file that would pass every check if it were
    // followed: the same key, owner-only.
    let target = s.tmp.path().join("elsewhere-key");
    std::fs::copy(s.key(), &target).expect("copy");
    std::fs::set_permissions(&target, Permissions::from_mode(0o600)).expect("chmod");
    let old = std::fs::read(&target).expect("key");
    std::fs::remove_file(s.key()).expect("rm");
    std::os::unix::fs::symlink(&target, s.key()).expect("symlink");
    s.assert_recompiled_then_hit();
    assert!(std::fs::symlink_metadata(s.key()).expect("stat").is_file());
    assert_ne!(std::fs::read(s.key()).expect("key"), old);
    assert_eq!(std::fs::read(&target).expect("target"), old);
    assert_eq!(mode(&target), 0o600);
}

#[test]
fn an_entry_symlink_is_refused() {
    let s = Setup::new();
    s.compile();
    // A validly signed entry, moved out and linked back in.
    let target = s.tmp.path().join("elsewhere.cwasm");
    std::fs::rename(s.entry(), &target).expect("move");
    let signed = std::fs::read(&target).expect("entry");
    std::os::unix::fs::symlink(&target, s.entry()).expect("symlink");
    s.assert_recompiled_then_hit();
    assert!(
        std::fs::symlink_metadata(s.entry())
            .expect("stat")
            .is_file()
    );
    assert_eq!(std::fs::read(&target).expect("target"), signed);
}

#[test]
fn an_entry_fifo_is_refused_without_hanging() {
    let s = Setup::new();
    s.compile();
    std::fs::remove_file(s.entry()).expect("rm");
    let fifo =
        std::ffi::CString::new(s.entry().into_os_string().into_encoded_bytes()).expect("path");
    // SAFETY: `fifo` is a valid NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(fifo.as_ptr(), 0o600) }, 0);
    let (tx, rx) = std::sync::mpsc::channel();
    let s = std::sync::Arc::new(s);
    let t = s.clone();
    std::thread::spawn(move || {
        let _ = tx.send(t.compile());
    });
    let used = rx
        .recv_timeout(std::time::Duration::from_secs(30))
        .expect("compile_cached hung on a FIFO");
    assert!(matches!(used, CacheUse::Recompiled(_)), "{used:?}");
    assert_eq!(s.compile(), CacheUse::Hit);
}

#[test]
fn a_cache_dir_open_to_others_is_made_owner_only() {
    let s = Setup::new();
    std::fs::create_dir(&s.dir).expect("mkdir");
    std::fs::set_permissions(&s.dir, Permissions::from_mode(0o755)).expect("chmod");
    assert_eq!(s.compile(), CacheUse::Compiled);
    assert_eq!(mode(&s.dir), 0o700);
    assert_eq!(s.compile(), CacheUse::Hit);
}

#[test]
fn a_cache_dir_writable_by_others_gets_a_fresh_key() {
    let s = Setup::new();
    s.compile();
    let old = std::fs::read(s.key()).expect("key");
    std::fs::set_permissions(&s.dir, Permissions::from_mode(0o777)).expect("chmod");
    s.assert_recompiled_then_hit();
    assert_eq!(mode(&s.dir), 0o700);
    assert_ne!(std::fs::read(s.key()).expect("key"), old);
}

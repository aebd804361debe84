use super::*;

/// A cache in a fresh directory, and a plugin-like file beside it.
struct Setup {
    tmp: tempfile::TempDir,
    cache: Cache,
    file: PathBuf,
}

const DIGEST: &str = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

impl Setup {
    fn new() -> Setup {
        let tmp = tempfile::tempdir().expect("tempdir");
        let cache = Cache::open_reporting(&tmp.path().join("cache")).expect("cache");
        let file = tmp.path().join("plugin.wasm");
        std::fs::write(&file, b"plugin bytes").expect("write");
        Setup { tmp, cache, file }
    }

    fn identity(&self) -> FileIdentity {
        FileIdentity::of(&self.file).expect("identity")
    }

    fn records(&self) -> DigestRecords<'_> {
        DigestRecords::new(&self.cache)
    }

    /// Records DIGEST for the file as it is now, `age` after its ctime.
    fn put_aged(&self, age: Duration) -> bool {
        let id = self.identity();
        self.records().put_at(
            &self.file,
            &id,
            DIGEST,
            id.ctime_ns() + age.as_nanos() as i128,
        )
    }

    fn get(&self) -> Option<String> {
        self.records().get(&self.file, &self.identity())
    }

    fn record_file(&self) -> PathBuf {
        self.records().record_path(&self.file)
    }
}

#[test]
fn a_settled_file_is_remembered_under_its_identity() {
    let s = Setup::new();
    assert_eq!(s.get(), None, "nothing recorded yet");
    assert!(s.put_aged(SETTLE + Duration::from_millis(1)));
    assert_eq!(s.get().as_deref(), Some(DIGEST));
    let meta = std::fs::metadata(s.record_file()).expect("record");
    assert_eq!(meta.len(), RECORD_LEN as u64);
    assert_eq!(meta.permissions().mode() & 0o777, 0o600);
    // Named by a hash, never by the path.
    let name = s.record_file();
    let name = name.file_name().expect("name").to_string_lossy();
    assert!(!name.contains("plugin"), "{name}");
}

#[test]
fn a_file_changed_within_the_settling_time_is_not_remembered() {
    let s = Setup::new();
    assert!(!s.put_aged(SETTLE - Duration::from_millis(1)));
    assert!(!s.record_file().exists());
    assert_eq!(s.get(), None);
}

#[test]
fn a_changed_file_is_not_what_its_record_says() {
    let s = Setup::new();
    assert!(s.put_aged(SETTLE * 2));
    // Rewritten in place (a new size, mtime and ctime) ...
    std::fs::write(&s.file, b"other plugin bytes").expect("rewrite");
    assert_eq!(s.get(), None);
    // ... or replaced by another file (another inode), even of the same
    // size: the record is for the old identity only.
    assert!(s.put_aged(SETTLE * 2));
    let other = s.tmp.path().join("other.wasm");
    std::fs::write(&other, b"other plugin byteZ").expect("write");
    std::fs::rename(&other, &s.file).expect("replace");
    assert_eq!(s.get(), None);
}

#[test]
fn a_tampered_truncated_or_foreign_record_is_not_trusted() {
    let s = Setup::new();
    assert!(s.put_aged(SETTLE * 2));
    let good = std::fs::read(s.record_file()).expect("record");
    // Another digest under the old tag.
    let mut forged = good.clone();
    let last = forged.len() - 1;
    forged[last] ^= 1;
    std::fs::write(s.record_file(), &forged).expect("write");
    assert_eq!(s.get(), None);
    // Truncated, empty.
    for bad in [&good[..good.len() - 1], &[][..]] {
        std::fs::write(s.record_file(), bad).expect("write");
        assert_eq!(s.get(), None);
    }
    // Signed under another cache's key.
    let other = Cache::open_reporting(&s.tmp.path().join("other-cache")).expect("cache");
    let id = s.identity();
    let theirs = DigestRecords::new(&other);
    assert!(theirs.put_at(
        &s.file,
        &id,
        DIGEST,
        id.ctime_ns() + SETTLE.as_nanos() as i128 * 2
    ));
    std::fs::copy(theirs.record_path(&s.file), s.record_file()).expect("copy");
    assert_eq!(s.get(), None);
    // The good record again is trusted again.
    std::fs::write(s.record_file(), &good).expect("write");
    assert_eq!(s.get().as_deref(), Some(DIGEST));
}

#[test]
fn a_record_made_for_another_path_is_not_trusted() {
    let s = Setup::new();
    // The same file reached by another path (a hard link: the same
    // identity), with the first path's record copied to the link's name.
    let link = s.tmp.path().join("link.wasm");
    std::fs::hard_link(&s.file, &link).expect("link");
    assert!(s.put_aged(SETTLE * 2));
    let id = FileIdentity::of(&link).expect("identity");
    assert_eq!(id, s.identity());
    let records = s.records();
    std::fs::copy(s.record_file(), records.record_path(&link)).expect("copy");
    assert_eq!(records.get(&link, &id), None);
    assert_eq!(s.get().as_deref(), Some(DIGEST));
}

#[test]
fn a_record_symlink_is_not_followed() {
    let s = Setup::new();
    assert!(s.put_aged(SETTLE * 2));
    let moved = s.tmp.path().join("moved-record");
    std::fs::rename(s.record_file(), &moved).expect("move");
    std::os::unix::fs::symlink(&moved, s.record_file()).expect("symlink");
    assert_eq!(s.get(), None);
}

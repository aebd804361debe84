//! Where `scripts/build-plugins.sh` (run by the test script) puts the
//! built WASM plugins, for the WASM tests of both test binaries. Builds
//! nothing: a missing build fails with the command to run.

use std::path::{Path, PathBuf};

/// The directory of the built plugins (`noop.wasm` among them).
pub fn plugin_dir() -> PathBuf {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../plugins/target/wasm32-wasip2/release");
    assert!(
        dir.join("noop.wasm").is_file(),
        "plugins are not built: run `bash scripts/build-plugins.sh` (scripts/test.sh does)"
    );
    dir
}

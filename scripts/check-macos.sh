#!/usr/bin/env bash
# Checks that the workspace compiles for macOS (aarch64-apple-darwin), tests
# and benches included: `cargo check`, which runs the build scripts (so
# the C parts of dependencies are compiled: SQLite, ring, blake3, wasmtime's
# helpers) but links nothing. Nothing is run on macOS here; the point is
# that only the sandbox is Linux's (docs/security.md, "1c. macOS").
#
# It installs what it needs, pinned: the Rust standard library for the
# target (rustup), and Zig from PyPI (in target/zig-venv), whose `zig cc`
# ships the macOS libc headers and is the C compiler for the target. The
# `openssl-sys` build script (webauthn-rs) only reads OpenSSL's version from
# its headers when nothing is linked: Debian's (libssl-dev) are given, and
# the library is said to be a dylib (there is none to look for).
set -euo pipefail
cd "$(dirname "$0")/.."

TARGET=aarch64-apple-darwin
ZIG_VERSION=0.17.0

if ! rustup target list --installed | grep -qx "$TARGET"; then
  rustup target add "$TARGET"
fi

venv="$PWD/target/zig-venv"
if ! "$venv/bin/python" -m ziglang version 2>/dev/null | grep -qx "$ZIG_VERSION"; then
  rm -rf "$venv"
  python3 -m venv "$venv"
  "$venv/bin/pip" install --quiet --disable-pip-version-check "ziglang==$ZIG_VERSION"
fi

if [ ! -e /usr/include/openssl/opensslv.h ]; then
  (apt-get update -q && apt-get install -y -q libssl-dev) >/dev/null
fi

# The C compiler and archiver for the target: zig's, through wrappers that
# drop the target flags cc-rs adds in clang's spelling (zig takes its own).
tools="$PWD/target/macos-check"
mkdir -p "$tools"
cat >"$tools/cc" <<EOF
#!/usr/bin/env bash
args=()
skip=0
for a in "\$@"; do
  if [ "\$skip" = 1 ]; then skip=0; continue; fi
  case "\$a" in
    -target) skip=1 ;;
    --target=*|-mmacosx-version-min=*|-arch) ;;
    *) args+=("\$a") ;;
  esac
done
exec "$venv/bin/python" -m ziglang cc -target aarch64-macos "\${args[@]}"
EOF
cat >"$tools/ar" <<EOF
#!/usr/bin/env bash
exec "$venv/bin/python" -m ziglang ar "\$@"
EOF
chmod +x "$tools/cc" "$tools/ar"

# OpenSSL's headers for the version check: Debian's, with its
# architecture's configuration headers beside them.
inc="$tools/openssl-include/openssl"
mkdir -p "$inc"
ln -sf /usr/include/openssl/*.h "$inc/"
ln -sf /usr/include/"$(gcc -dumpmachine)"/openssl/*.h "$inc/"

export CC_aarch64_apple_darwin="$tools/cc"
export CXX_aarch64_apple_darwin="$tools/cc"
export AR_aarch64_apple_darwin="$tools/ar"
export AARCH64_APPLE_DARWIN_OPENSSL_INCLUDE_DIR="$tools/openssl-include"
export AARCH64_APPLE_DARWIN_OPENSSL_LIB_DIR="$tools"
export AARCH64_APPLE_DARWIN_OPENSSL_STATIC=0
# Warnings are errors here as in the Linux lints (`cargo clippy -D
# warnings`): code compiled only on macOS (or compiled out there) must not
# leave an unused import or dead function behind. With --target, RUSTFLAGS
# reaches the workspace's crates (dependencies' lints are capped) and never
# the build scripts.
RUSTFLAGS="${RUSTFLAGS:-} -D warnings" cargo check --locked --workspace --all-targets --target "$TARGET"

//! Two things at build time:
//!
//! - the commit the binary is built from, for `talon --version`;
//! - the layout of release links of the `talon` binary, where the linker is Rust's bundled LLD
//!   (the default on x86_64-unknown-linux-gnu since Rust 1.90):
//!   - `--symbol-ordering-file startup-order.txt`: the functions a session runs, placed side by
//!     side instead of scattered over 35 MB of code, so far fewer pages of the binary become
//!     resident (`talon mcp` idle RSS 26 → 11 MiB, docs/BENCHMARKS.md). The list comes from
//!     `bench/mcp/startup_order.py`; names it holds that a build lacks are skipped silently, so a
//!     stale list costs only the saving, never the build.
//!   - `-z pack-relative-relocs` (RELR), when the C library is glibc 2.36 or newer (the binary then
//!     needs that version to start): 2.2 MB of relocation records shrink to a few kilobytes, and
//!     the loader no longer reads them all at every start.
//!
//!   Anything else (another target, a linker chosen through `RUSTFLAGS` or `target.*.linker`,
//!   cross-compiling, debug builds) links as before.

use std::env;
use std::path::PathBuf;
use std::process::Command;

fn main() {
    record_commit();
    println!("cargo:rerun-if-changed=startup-order.txt");
    println!("cargo:rerun-if-env-changed=RUSTC_LINKER");
    if !bundled_lld_release_link() {
        return;
    }
    let order = PathBuf::from(env::var_os("CARGO_MANIFEST_DIR").unwrap_or_default())
        .join("startup-order.txt");
    if order.is_file() {
        for arg in [
            "-Xlinker",
            "--symbol-ordering-file",
            "-Xlinker",
            &order.display().to_string(),
            "-Wl,--no-warn-symbol-ordering",
        ] {
            println!("cargo:rustc-link-arg-bins={arg}");
        }
    }
    if glibc_at_least(2, 36) {
        println!("cargo:rustc-link-arg-bins=-Wl,-z,pack-relative-relocs");
    }
}

/// Whether this is an optimised native build for x86_64 Linux with glibc, linked by the linker
/// rustc brings (nothing in the flags or the configuration picks another).
fn bundled_lld_release_link() -> bool {
    let var = |name: &str| env::var(name).unwrap_or_default();
    let native = var("TARGET") == var("HOST");
    let target = var("TARGET") == "x86_64-unknown-linux-gnu";
    let optimised = var("PROFILE") == "release";
    let own_linker = env::var_os("RUSTC_LINKER").is_some()
        || var("CARGO_ENCODED_RUSTFLAGS")
            .split('\u{1f}')
            .any(|flag| flag.contains("link"));
    native && target && optimised && !own_linker
}

/// Whether the build machine's glibc (the one the binary will load) is `major.minor` or newer.
fn glibc_at_least(major: u32, minor: u32) -> bool {
    let Ok(out) = Command::new("getconf").arg("GNU_LIBC_VERSION").output() else {
        return false;
    };
    // "glibc 2.36"
    let text = String::from_utf8_lossy(&out.stdout);
    let Some(version) = text.split_whitespace().nth(1) else {
        return false;
    };
    let mut parts = version.split('.').map(|p| p.parse::<u32>().unwrap_or(0));
    let found = (parts.next().unwrap_or(0), parts.next().unwrap_or(0));
    out.status.success() && found >= (major, minor)
}

/// `TALON_COMMIT`: the short hash of `HEAD` (`unknown` outside a git checkout).
fn record_commit() {
    let commit = Command::new("git")
        .args(["rev-parse", "--short=12", "HEAD"])
        .output()
        .ok()
        .filter(|out| out.status.success())
        .and_then(|out| String::from_utf8(out.stdout).ok())
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| "unknown".to_string());
    println!("cargo:rustc-env=TALON_COMMIT={commit}");
    // A new commit moves HEAD's branch; a checkout moves HEAD.
    for path in [
        "../../.git/HEAD",
        "../../.git/refs/heads",
        "../../.git/packed-refs",
    ] {
        println!("cargo:rerun-if-changed={path}");
    }
}

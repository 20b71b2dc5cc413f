//! Links the `dist` binary with its hot code first (`link/README.md`): the code that
//! `ferrosched run` executes then sits in a few contiguous megabytes instead of being spread
//! over the whole text segment, which the kernel maps in around every page touched.

#[path = "src/hot_code.rs"]
#[allow(dead_code)]
mod hot_code;

use hot_code::Fingerprint;
use std::path::{Path, PathBuf};

const ORDER: &str = "link/hot-symbols.txt";

fn main() {
    println!("cargo:rerun-if-changed={ORDER}");
    println!("cargo:rerun-if-changed=../../Cargo.lock");
    println!("cargo:rerun-if-env-changed=RUSTC_LINKER");
    let env = |k: &str| std::env::var(k).unwrap_or_default();
    let out_dir = PathBuf::from(env("OUT_DIR"));
    let profile = hot_code::profile_of_out_dir(&out_dir).unwrap_or_default();
    // Other profiles have other symbol hashes; nothing to say about them.
    if profile != "dist" {
        return;
    }
    let manifest = PathBuf::from(env("CARGO_MANIFEST_DIR"));
    let order = manifest.join(ORDER);
    let skip = |why: String| {
        println!(
            "cargo:warning=linking without the hot-code order ({why}); the binary works, \
             its resident memory ~9 MiB higher. See crates/ferrosched/link/README.md."
        );
    };
    // rust-lld is the default linker of this target only (since Rust 1.90); GNU ld and
    // gold do not know `--symbol-ordering-file`.
    let target = env("TARGET");
    if target != "x86_64-unknown-linux-gnu" {
        return skip(format!("target {target} does not link with lld by default"));
    }
    if !env("RUSTC_LINKER").is_empty()
        || hot_code::linker_overridden(&env("CARGO_ENCODED_RUSTFLAGS"))
    {
        return skip("the linker is configured, it may not be lld".into());
    }
    let text = match std::fs::read_to_string(&order) {
        Ok(t) => t,
        Err(e) => return skip(format!("{}: {e}", order.display())),
    };
    let file = match Fingerprint::from_header(&text) {
        Ok(f) => f,
        Err(e) => return skip(format!("{}: {e}", order.display())),
    };
    let build = Fingerprint {
        rustc: rustc_version(&env("RUSTC")),
        target,
        profile,
        lock: lock_hash(&manifest),
    };
    let stale = file.differences(&build);
    if !stale.is_empty() {
        return skip(format!("it is stale: {}", stale.join("; ")));
    }
    println!(
        "cargo:rustc-link-arg-bins=-Wl,--symbol-ordering-file={}",
        order.display()
    );
    // Symbols of code that `run` never executes are listed nowhere; ones listed but missing
    // (code changed since the file was made) are no error either.
    println!("cargo:rustc-link-arg-bins=-Wl,--no-warn-symbol-ordering");
}

fn rustc_version(rustc: &str) -> String {
    std::process::Command::new(if rustc.is_empty() { "rustc" } else { rustc })
        .arg("-V")
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .unwrap_or_default()
}

fn lock_hash(manifest: &Path) -> String {
    let lock = manifest.join("../../Cargo.lock");
    std::fs::read(lock)
        .map(|b| hot_code::fnv1a64(&b))
        .unwrap_or_default()
}

//! Which builds may link with the hot-code order (`link/hot-symbols.txt`, see
//! `link/README.md`). `build.rs` includes this file; the library compiles it too, so its
//! tests run with `cargo test`.
//!
//! The order lists the exact symbols that `ferrosched run` executes. Exact symbols carry a
//! hash that depends on the toolchain, the target, the profile's settings and the locked
//! dependency versions, so the file records those and a build that differs in any of them
//! links without the order (the binary is the same, its hot code just lies scattered).

/// What the symbol hashes of a build depend on, as the order file's header records it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fingerprint {
    /// `rustc -V`.
    pub rustc: String,
    /// The target triple.
    pub target: String,
    /// The Cargo profile (`dist`).
    pub profile: String,
    /// [`fnv1a64`] of Cargo.lock, 16 hex digits.
    pub lock: String,
}

const KEYS: [&str; 4] = ["rustc", "target", "profile", "Cargo.lock"];

impl Fingerprint {
    /// Reads the `# key: value` header lines of an order file (lld skips `#` lines).
    pub fn from_header(text: &str) -> Result<Fingerprint, String> {
        let mut values: [Option<String>; 4] = Default::default();
        for line in text.lines().take_while(|l| l.starts_with('#')) {
            let Some((key, value)) = line.trim_start_matches('#').split_once(':') else {
                continue;
            };
            if let Some(i) = KEYS.iter().position(|k| *k == key.trim()) {
                values[i] = Some(value.trim().to_string());
            }
        }
        let [rustc, target, profile, lock] = values;
        let missing = |i: usize| format!("the header has no `# {}:` line", KEYS[i]);
        Ok(Fingerprint {
            rustc: rustc.ok_or_else(|| missing(0))?,
            target: target.ok_or_else(|| missing(1))?,
            profile: profile.ok_or_else(|| missing(2))?,
            lock: lock.ok_or_else(|| missing(3))?,
        })
    }

    /// The fields in which `build` differs from this (the file's) fingerprint, as
    /// "field: file's value, build's value"; empty when the order fits the build.
    pub fn differences(&self, build: &Fingerprint) -> Vec<String> {
        let pairs = [
            (&self.rustc, &build.rustc),
            (&self.target, &build.target),
            (&self.profile, &build.profile),
            (&self.lock, &build.lock),
        ];
        KEYS.iter()
            .zip(pairs)
            .filter(|(_, (file, build))| file != build)
            .map(|(k, (file, build))| format!("{k}: order file has {file}, this build {build}"))
            .collect()
    }
}

/// 64-bit FNV-1a, as 16 hex digits: a stable content hash that `link/collect.sh` computes
/// the same way (std's hasher may change between Rust releases).
pub fn fnv1a64(bytes: &[u8]) -> String {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in bytes {
        h ^= u64::from(*b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    format!("{h:016x}")
}

/// The Cargo profile of a build script's `OUT_DIR`
/// (`<target dir>/[<triple>/]<profile>/build/<package>-<hash>/out`).
pub fn profile_of_out_dir(out_dir: &std::path::Path) -> Option<String> {
    let dir = out_dir.ancestors().nth(3)?.file_name()?.to_str()?;
    // Cargo's `dev` and `test` profiles build into `debug`.
    Some(dir.to_string())
}

/// Whether the flags a build passes to rustc choose the linker themselves, in which case
/// the linker may not be lld and may not understand `--symbol-ordering-file`.
pub fn linker_overridden(encoded_rustflags: &str) -> bool {
    const CHOOSERS: [&str; 4] = [
        "linker=",
        "linker-flavor",
        "linker-features",
        "link-self-contained",
    ];
    encoded_rustflags
        .split('\x1f')
        .any(|f| CHOOSERS.iter().any(|c| f.contains(c)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    fn build() -> Fingerprint {
        Fingerprint {
            rustc: "rustc 1.95.0 (59807616e 2026-04-14)".into(),
            target: "x86_64-unknown-linux-gnu".into(),
            profile: "dist".into(),
            lock: fnv1a64(b"lock"),
        }
    }

    #[test]
    fn the_header_is_read_and_the_symbols_after_it_are_ignored() {
        let text = format!(
            "# hot code of ferrosched run: a comment\n# rustc: {}\n# target: {}\n\
             # profile: {}\n# Cargo.lock: {}\n_ZN3foo3bar17h0E\n",
            build().rustc,
            build().target,
            build().profile,
            build().lock
        );
        assert_eq!(Fingerprint::from_header(&text), Ok(build()));
    }

    #[test]
    fn a_header_without_the_lock_hash_is_an_error_naming_it() {
        let text = "# rustc: r\n# target: t\n# profile: dist\n_ZN3foo17h0E\n";
        let err = Fingerprint::from_header(text).unwrap_err();
        assert!(err.contains("Cargo.lock"), "{err}");
    }

    #[test]
    fn any_changed_input_of_the_symbol_hashes_makes_the_order_stale() {
        assert!(build().differences(&build()).is_empty());
        let mut bumped = build();
        bumped.lock = fnv1a64(b"lock with a newer tokio");
        bumped.profile = "release".into();
        let diffs = build().differences(&bumped);
        assert_eq!(diffs.len(), 2, "{diffs:?}");
        assert!(diffs[0].starts_with("profile: order file has dist, this build release"));
        assert!(diffs[1].starts_with("Cargo.lock: "));
    }

    #[test]
    fn the_committed_order_file_has_a_dist_header_and_only_mangled_symbols() {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/link/hot-symbols.txt");
        let text = std::fs::read_to_string(path).unwrap();
        let file = Fingerprint::from_header(&text).unwrap();
        assert_eq!(file.profile, "dist");
        assert_eq!(file.lock.len(), 16, "{}", file.lock);
        let symbols: Vec<&str> = text.lines().filter(|l| !l.starts_with('#')).collect();
        assert!(symbols.len() > 1000, "{} symbols", symbols.len());
        // Legacy (`_ZN`) or v0 (`_R`) Rust symbols, and C ones (ring's, libc shims): never
        // a demangled name, which lld would not find.
        let bad: Vec<&&str> = symbols
            .iter()
            .filter(|s| s.contains([' ', '<', '(']) || s.contains("::"))
            .collect();
        assert!(bad.is_empty(), "{bad:?}");
    }

    #[test]
    fn fnv1a64_matches_the_reference_vectors() {
        // From the FNV reference: "" and "a".
        assert_eq!(fnv1a64(b""), "cbf29ce484222325");
        assert_eq!(fnv1a64(b"a"), "af63dc4c8601ec8c");
    }

    #[test]
    fn the_profile_is_read_from_out_dir_with_and_without_a_target_triple() {
        let plain = Path::new("/src/target/dist/build/ferrosched-0123/out");
        assert_eq!(profile_of_out_dir(plain).as_deref(), Some("dist"));
        let cross = Path::new("/t/x86_64-unknown-linux-gnu/debug/build/ferrosched-9/out");
        assert_eq!(profile_of_out_dir(cross).as_deref(), Some("debug"));
    }

    #[test]
    fn a_linker_chosen_in_rustflags_turns_the_order_off() {
        assert!(!linker_overridden(""));
        assert!(!linker_overridden("-Ctarget-cpu=native\x1f-Copt-level=3"));
        assert!(linker_overridden("-C\x1flinker=clang"));
        assert!(linker_overridden("-Clink-self-contained=-linker"));
        assert!(
            !linker_overridden("-Clinker-plugin-lto"),
            "not a linker choice"
        );
    }
}

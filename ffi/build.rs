//! With feature `lean`: link `libAgenra.a`, the static library `lake build
//! Agenra:static` writes to `.lake/build/lib` at the repository root (or to
//! `$AGENRA_LEAN_LIB`). `lean-sys` links the Lean runtime itself (`Init`,
//! `leanrt`, `Lean`, `leancpp`, `Lake`, found with `lean --print-prefix`).
//! Without the feature this script does nothing.

use std::path::PathBuf;

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-env-changed=AGENRA_LEAN_LIB");
    if std::env::var_os("CARGO_FEATURE_LEAN").is_none() {
        return;
    }
    let dir = match std::env::var_os("AGENRA_LEAN_LIB") {
        Some(d) => PathBuf::from(d),
        None => {
            let manifest =
                PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").unwrap_or_default());
            manifest.join("..").join(".lake").join("build").join("lib")
        }
    };
    let lib = dir.join("libAgenra.a");
    if !lib.is_file() {
        panic!(
            "feature `lean`: {} does not exist. Run `lake build Agenra:static` at the \
             repository root first (it needs the Lean toolchain of `lean-toolchain`), \
             or set AGENRA_LEAN_LIB to the directory that holds libAgenra.a.",
            lib.display()
        );
    }
    println!("cargo:rerun-if-changed={}", lib.display());
    println!("cargo:rustc-link-search=native={}", dir.display());
    println!("cargo:rustc-link-lib=static=Agenra");
}

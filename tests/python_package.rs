//! The Python package's own tests (`python/tests`, pytest) as part of
//! `cargo test --workspace`, so that the README's test command covers them.
//!
//! They need a virtual environment with the package installed
//! (`pip install ./python`) and `pytest`, `agentdojo` and `langchain-core`:
//! `.ci/run` makes one and names it in `AGENRA_PY_VENV`. Without it the test
//! says SKIPPED, and fails under `CI=true`.

use std::path::PathBuf;
use std::process::Command;

#[test]
fn the_python_package_passes_its_tests() {
    let Some(venv) = std::env::var_os("AGENRA_PY_VENV").map(PathBuf::from) else {
        assert!(
            std::env::var("CI").as_deref() != Ok("true"),
            "AGENRA_PY_VENV is not set: .ci/run makes the venv and sets it"
        );
        eprintln!("SKIPPED: AGENRA_PY_VENV is not set (see docs/python.md, \"Tests\")");
        return;
    };
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let out = Command::new(venv.join("bin/pytest"))
        .args(["-q", "tests"])
        .current_dir(root.join("python"))
        .env("AGENRA_BIN", env!("CARGO_BIN_EXE_agenra"))
        .output()
        .expect("run pytest from AGENRA_PY_VENV");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "pytest failed:\n{text}");
    assert!(text.contains(" passed"), "pytest ran nothing:\n{text}");
    println!("{}", text.lines().last().unwrap_or_default());
}

#!/usr/bin/env bash
# Opt-in mutation testing (not part of .ci/run): cargo-mutants on
# rust/core, tested by the core crate's own tests. Lists the mutants that
# survive (the suite still passes with the code changed); equivalent ones
# are listed with a reason in scripts/mutants-equivalent.txt.
#   scripts/mutants.sh [FILE...]    e.g. scripts/mutants.sh rust/core/src/value.rs
# MUTANTS_JOBS sets cargo-mutants' -j (default 2); the whole crate (about
# 1,500 mutants) takes 2 to 3.5 hours on 2 cores.
set -euo pipefail
cd "$(dirname "$0")/.."
command -v cargo-mutants >/dev/null 2>&1 || cargo install cargo-mutants --version 27.1.0 --locked
files=()
for f in "$@"; do files+=(--file "$f"); done
if [ ${#files[@]} -eq 0 ]; then files=(--dir rust/core); fi
mkdir -p target  # cargo-mutants does not create the parent of --output
# The core crate's tests only (the workspace's would take far longer and add
# nothing for mutants of rust/core that the reference tests do not see).
# The property tests use the seed CI uses, so a run's survivors can be
# reproduced; no debuginfo keeps each of the -j scratch trees small.
PROPTEST_RNG_SEED="${PROPTEST_RNG_SEED:-20261201}" \
  CARGO_PROFILE_TEST_DEBUG=0 CARGO_PROFILE_DEV_DEBUG=0 \
  cargo mutants --package agenra-core --test-package agenra-core "${files[@]}" \
  -j "${MUTANTS_JOBS:-2}" --output target/mutants || true
echo "== survivors (missed):"
cat target/mutants/mutants.out/missed.txt 2>/dev/null || echo "(none)"
if [ -f scripts/mutants-equivalent.txt ]; then
  echo "== of which listed as equivalent:"
  grep -F -f <(grep -v '^#' scripts/mutants-equivalent.txt | cut -d'#' -f1 | sed 's/[[:space:]]*$//; /^$/d') \
    target/mutants/mutants.out/missed.txt 2>/dev/null || echo "(none)"
fi
echo "== score by file (exits 1 if any survivor is unlisted):"
scripts/mutants-table target/mutants

#!/usr/bin/env bash
# Opt-in fuzzing (not part of .ci/run): runs each target for SECONDS
# (default 60) with cargo-fuzz on the stable toolchain.
#   scripts/fuzz.sh [SECONDS] [TARGET...]
set -euo pipefail
cd "$(dirname "$0")/.."
seconds="${1:-60}"
shift || true
targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then
  targets=(policy_parser event_decoder compiled_policy)
fi
command -v cargo-fuzz >/dev/null 2>&1 || cargo install cargo-fuzz --locked
for t in "${targets[@]}"; do
  echo "== fuzz $t for ${seconds}s"
  RUSTC_BOOTSTRAP=1 cargo fuzz run "$t" -- -max_total_time="$seconds" 2>&1 | tail -4
done

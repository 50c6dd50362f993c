#!/usr/bin/env bash
# Reproduce the AgentDojo benchmark of Agenra (see README.md):
#   bench/agentdojo/run.sh
# 1. a local virtual environment with agentdojo==0.1.35 from PyPI (.venv);
# 2. the ground-truth export, without any LLM (out/traces), checked against
#    export.sha256;
# 3. every trace through `agenra monitor`, one process per suite (out/results,
#    out/events);
# 4. the table (out/results/table.md).
# AGENRA_BIN names the agenra binary; by default it is built with
# `cargo build --release` at the repository root.
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO="$(cd "$HERE/../.." && pwd)"
PYTHON="${PYTHON:-python3}"

if [ ! -x "$HERE/.venv/bin/python" ]; then
  "$PYTHON" -m venv "$HERE/.venv"
fi
if ! "$HERE/.venv/bin/python" -c 'import importlib.metadata as m, sys; sys.exit(m.version("agentdojo") != "0.1.35")' 2>/dev/null; then
  "$HERE/.venv/bin/pip" install --quiet "agentdojo==0.1.35"
fi

if [ -z "${AGENRA_BIN:-}" ]; then
  (cd "$REPO" && cargo build --release --bin agenra)
  AGENRA_BIN="${CARGO_TARGET_DIR:-$REPO/target}/release/agenra"
fi
export AGENRA_BIN

"$HERE/.venv/bin/python" "$HERE/export.py" "$HERE/out/traces"
if diff -q "$HERE/export.sha256" "$HERE/out/traces/SHA256SUMS" >/dev/null; then
  echo "export matches export.sha256" >&2
else
  echo "warning: the export differs from export.sha256:" >&2
  diff "$HERE/export.sha256" "$HERE/out/traces/SHA256SUMS" >&2 || true
fi

for policy in "$HERE"/policies/*.agr; do
  "$AGENRA_BIN" check "$policy" >&2
done
"$HERE/.venv/bin/python" "$HERE/drive.py"
"$HERE/.venv/bin/python" "$HERE/score.py" | tee "$HERE/out/results/table.md"

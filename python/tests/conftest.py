"""Shared fixtures: the repository root and the `agenra` binary for replays."""

import os
import shutil
import subprocess

import pytest

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))


def _find_agenra():
    env = os.environ.get("AGENRA_BIN")
    if env:
        return env
    target = os.environ.get("CARGO_TARGET_DIR", os.path.join(REPO, "target"))
    for profile in ["debug", "release"]:
        path = os.path.join(target, profile, "agenra")
        if os.access(path, os.X_OK):
            return path
    return shutil.which("agenra")


@pytest.fixture(scope="session")
def agenra_bin():
    """The `agenra` CLI (AGENRA_BIN, or target/{debug,release}/agenra). In
    CI (CI=true) a missing binary fails the test instead of skipping it."""
    path = _find_agenra()
    if not path or not os.access(path, os.X_OK):
        msg = "no agenra binary: set AGENRA_BIN or run `cargo build --bin agenra`"
        if os.environ.get("CI"):
            pytest.fail(msg)
        pytest.skip(msg)
    return path


@pytest.fixture
def replay(agenra_bin, tmp_path):
    """`agenra replay --json` of trace lines under a policy file: its records."""

    def run(policy_path, lines):
        trace = tmp_path / "trace.jsonl"
        trace.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
        out = subprocess.run(
            [agenra_bin, "replay", "--policy", str(policy_path), "--json", str(trace)],
            check=True,
            capture_output=True,
            text=True,
        )
        import json

        return [json.loads(line) for line in out.stdout.splitlines() if line.strip()]

    return run

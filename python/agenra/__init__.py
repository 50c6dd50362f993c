"""Agenra from Python: ALLOW / DENY / PAUSE before every tool call of an agent.

    import agenra
    policy = agenra.compile_policy(open("policy.agr").read(), filename="policy.agr")
    session = policy.session()
    d = session.authorize("email.send", {"to": "alice@example.com", "body": "hi"})
    if d.allowed: ...                      # else d.verdict, d.rule, d.reason

The decision runs in Rust with the GIL released. A session is meant for one
agent run and one thread at a time; calls from several threads are
serialized by a mutex inside it (never interleaved), in the order they get
it. Share the compiled `Policy` between threads and open a session per run.
"""

from ._agenra import (
    AgenraError,
    Applied,
    Decision,
    Diagnostic,
    Policy,
    PolicyError,
    Session,
    SessionError,
    Stop,
    compile_policy,
    load_compiled_policy,
)
from .guard import Denied, guard, guarded_call

__all__ = [
    "AgenraError",
    "Applied",
    "Decision",
    "Denied",
    "Diagnostic",
    "Policy",
    "PolicyError",
    "Session",
    "SessionError",
    "Stop",
    "compile_policy",
    "load_policy",
    "load_compiled_policy",
    "guard",
    "guarded_call",
]


def load_policy(path, name=None):
    """Compiles the policy file at `path` (diagnostics name the file).

    A `.json` file is read as a compiled policy (`agenra compile` output)."""
    import os

    path = os.fspath(path)
    with open(path, encoding="utf-8") as f:
        text = f.read()
    if path.endswith(".json"):
        return load_compiled_policy(text, filename=path)
    if name is None:
        name = os.path.splitext(os.path.basename(path))[0]
    return compile_policy(text, name=name, filename=path)

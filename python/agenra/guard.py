"""Guarding any Python callable with a session: ask first, run only if allowed."""

from __future__ import annotations

import functools
import inspect
from typing import Any, Callable, Mapping, Optional

from ._agenra import AgenraError, Decision, Session

#: Called on a PAUSE with the decision; a true return approves the call
#: (it is then re-checked), a false one rejects it. Default: reject.
OnPause = Callable[[Decision], bool]


class Denied(AgenraError):
    """The guarded call did not run: DENY, or a PAUSE that was rejected
    (or whose approval was denied on the re-check). `.decision` says why."""

    def __init__(self, decision: Decision, rejected: bool = False):
        self.decision = decision
        self.rejected = rejected
        verb = "paused (and a human rejected)" if rejected else "denied"
        super().__init__(
            f"agenra {verb} the call to `{decision.tool}` (call {decision.call}): "
            f"rule `{decision.rule}`: {decision.reason}"
        )


def _output_of(result: Any) -> Any:
    """What is reported as the result's output: the value itself when the
    monitor can read it (str, numbers, lists, dicts), else its `str`."""
    from ._agenra import to_monitor_value

    try:
        return to_monitor_value(result)
    except (TypeError, ValueError):
        return str(result)


def admit(
    session: Session,
    tool: str,
    args: Mapping[str, Any],
    *,
    on_pause: Optional[OnPause] = None,
    **call_options: Any,
) -> Decision:
    """Authorizes a call, asking `on_pause` on a PAUSE; returns the ALLOW
    decision, or raises `Denied` (the PAUSE is rejected in the session)."""
    d = session.authorize(tool, dict(args), **call_options)
    if d.verdict == "PAUSE":
        approved = False
        try:
            approved = bool(on_pause(d)) if on_pause is not None else False
        finally:
            if not approved:
                session.reject(d.call)
        if not approved:
            raise Denied(d, rejected=True)
        d = session.approve(d.call)
    if d.verdict != "ALLOW":
        raise Denied(d)
    return d


def guarded_call(
    session: Session,
    tool: str,
    args: Mapping[str, Any],
    fn: Callable[[], Any],
    *,
    on_pause: Optional[OnPause] = None,
    errors_refund: bool = False,
    **call_options: Any,
) -> Any:
    """Runs `fn()` only if the session allows `tool(args)`, and reports its
    result. An exception from `fn` is reported as an `unknown` outcome (the
    units stay spent: a tool that failed half-way may have acted), or
    `failed` with `errors_refund=True`, and re-raised."""
    d = admit(session, tool, args, on_pause=on_pause, **call_options)
    try:
        result = fn()
    except BaseException:
        session.report(d.call, "failed" if errors_refund else "unknown")
        raise
    session.report(d.call, "succeeded", _output_of(result))
    return result


def guard(
    session: Session,
    tool: Optional[str] = None,
    *,
    on_pause: Optional[OnPause] = None,
    errors_refund: bool = False,
) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """A decorator: every call of the function asks the session first.

        @agenra.guard(session, "email.send")
        def send(to: str, body: str): ...

    The function's arguments (defaults applied) are the call's arguments,
    by parameter name; `tool` defaults to the function's name. A DENY, or a
    PAUSE that is not approved, raises `Denied` and the function does not run.
    """

    def wrap(fn: Callable[..., Any]) -> Callable[..., Any]:
        sig = inspect.signature(fn)
        name = tool or fn.__name__

        @functools.wraps(fn)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            bound = sig.bind(*args, **kwargs)
            bound.apply_defaults()
            return guarded_call(
                session,
                name,
                dict(bound.arguments),
                lambda: fn(*bound.args, **bound.kwargs),
                on_pause=on_pause,
                errors_refund=errors_refund,
            )

        return wrapper

    return wrap

"""A guard for LangChain tools (`langchain-core`).

    from agenra.langchain import guard_tool
    safe_send = guard_tool(send_email_tool, session, policy_tool="email.send")
    agent = create_agent(model, tools=[safe_send, ...])

Every call of the guarded tool asks the session first. ALLOW: the wrapped
tool runs and its result is reported. DENY, or a PAUSE that `on_pause` does
not approve: the tool does not run, and the model gets a tool error naming
the rule and the reason (`ToolException`, turned into the tool's output by
`handle_tool_error=True`; pass `handle_tool_error=False` to let it raise).
"""

from __future__ import annotations

from typing import Any, Callable, Optional

from langchain_core.tools import BaseTool, StructuredTool, ToolException

from ._agenra import Decision, Session
from .guard import Denied, guarded_call


class GuardedTool(BaseTool):
    """A LangChain tool that asks an Agenra session before it runs `inner`."""

    inner: BaseTool
    session: Any
    policy_tool: str
    on_pause: Optional[Callable[[Decision], bool]] = None
    errors_refund: bool = False

    def _call_args(self, args: tuple, kwargs: dict) -> dict:
        if args:
            names = list(self.inner.args.keys())
            if len(args) > len(names):
                raise ToolException(f"`{self.name}` takes {len(names)} arguments, got {len(args)}")
            return {**dict(zip(names, args)), **kwargs}
        return dict(kwargs)

    def _run(self, *args: Any, run_manager: Any = None, **kwargs: Any) -> Any:
        call_args = self._call_args(args, kwargs)
        try:
            return guarded_call(
                self.session,
                self.policy_tool,
                call_args,
                lambda: self.inner.invoke(call_args),
                on_pause=self.on_pause,
                errors_refund=self.errors_refund,
            )
        except Denied as e:
            raise ToolException(str(e)) from e


def guard_tool(
    tool: BaseTool | Callable[..., Any],
    session: Session,
    *,
    policy_tool: Optional[str] = None,
    on_pause: Optional[Callable[[Decision], bool]] = None,
    errors_refund: bool = False,
    handle_tool_error: bool = True,
) -> GuardedTool:
    """Wraps a `BaseTool` (or a plain function, made a `StructuredTool`
    first) so that each call asks `session`. `policy_tool` is the tool's
    name in the policy (default: the tool's own name)."""
    if not isinstance(tool, BaseTool):
        if not callable(tool):
            raise TypeError(f"guard_tool: expected a BaseTool or a callable, got {type(tool).__name__}")
        tool = StructuredTool.from_function(tool)
    return GuardedTool(
        name=tool.name,
        description=tool.description,
        args_schema=tool.args_schema,
        inner=tool,
        session=session,
        policy_tool=policy_tool or tool.name,
        on_pause=on_pause,
        errors_refund=errors_refund,
        handle_tool_error=handle_tool_error,
    )

"""Guards: plain callables (agenra.guard) and LangChain tools (agenra.langchain)."""

import pytest

import agenra

POLICY = """
sinks mail;
tool send_email(to: string, body: string) { sink mail on to; }
tool wire(amount: int);
grant mail: send_email where to ends_with "@example.com" quota 2;
grant outside: send_email quota 1 approval;
grant wire: wire where amount <= 100 quota 1;
"""


@pytest.fixture
def session():
    return agenra.compile_policy(POLICY, filename="guards.agr").session()


def test_a_guarded_function_runs_only_when_allowed(session):
    sent = []

    @agenra.guard(session)
    def send_email(to: str, body: str = "hello"):
        sent.append((to, body))
        return {"id": len(sent)}

    assert send_email("alice@example.com") == {"id": 1}
    assert sent == [("alice@example.com", "hello")]
    with pytest.raises(agenra.Denied) as err:
        send_email("eve@evil.test", body="secrets")
    assert err.value.rejected, "a PAUSE nobody approves is rejected"
    assert err.value.decision.rule == "outside"
    assert sent == [("alice@example.com", "hello")], "the function did not run"
    assert session.grant_left("outside") == 1, "the rejected unit came back"


def test_on_pause_approves_and_the_call_is_rechecked(session):
    asked = []

    @agenra.guard(session, "send_email", on_pause=lambda d: asked.append(d.rule) or True)
    def mail(to, body):
        return "sent"

    assert mail("eve@evil.test", "x") == "sent"
    assert asked == ["outside"]
    # The approval grant is spent: the next outside mail is denied outright.
    with pytest.raises(agenra.Denied) as err:
        mail("mallory@evil.test", "x")
    assert not err.value.rejected and err.value.decision.verdict == "DENY"
    assert asked == ["outside"]


def test_an_exception_keeps_the_unit_spent_unless_errors_refund(session):
    @agenra.guard(session)
    def wire(amount):
        raise RuntimeError("bank down")

    with pytest.raises(RuntimeError):
        wire(50)
    assert session.grant_left("wire") == 0, "unknown outcome: the unit stays spent"

    other = agenra.compile_policy(POLICY).session()

    @agenra.guard(other, "wire", errors_refund=True)
    def wire2(amount):
        raise RuntimeError("bank down")

    with pytest.raises(RuntimeError):
        wire2(50)
    assert other.grant_left("wire") == 1, "failed: the unit came back"


def test_arguments_the_policy_does_not_declare_are_denied(session):
    @agenra.guard(session, "wire")
    def wire(amount, memo=""):
        return "done"

    with pytest.raises(agenra.Denied) as err:
        wire(10)
    assert err.value.decision.rule == "well-formed"


import langchain_core.tools as lc_tools  # noqa: E402  (installed by .ci/run)


def test_a_langchain_tool_asks_the_session_first(session):
    from agenra.langchain import GuardedTool, guard_tool

    sent = []

    @lc_tools.tool
    def send_email(to: str, body: str) -> str:
        """Send an email."""
        sent.append(to)
        return f"sent to {to}"

    guarded = guard_tool(send_email, session)
    assert isinstance(guarded, GuardedTool) and isinstance(guarded, lc_tools.BaseTool)
    assert guarded.name == "send_email" and guarded.args == send_email.args
    assert guarded.invoke({"to": "bob@example.com", "body": "hi"}) == "sent to bob@example.com"
    # A DENY reaches the model as the tool's (error) output; the tool did not run.
    out = guarded.invoke({"to": "eve@evil.test", "body": "hi"})
    assert "agenra" in out and "rule `outside`" in out
    assert sent == ["bob@example.com"]
    # As a model's tool call: a ToolMessage with status "error".
    msg = guarded.invoke(
        {"type": "tool_call", "name": "send_email", "id": "t1", "args": {"to": "x@evil.test", "body": "b"}}
    )
    assert msg.status == "error" and "agenra" in msg.content
    assert sent == ["bob@example.com"]


def test_a_basetool_subclass_and_a_plain_callable(session):
    from agenra.langchain import guard_tool
    from pydantic import BaseModel

    class WireArgs(BaseModel):
        amount: int

    class Wire(lc_tools.BaseTool):
        name: str = "bank_wire"
        description: str = "Wire money."
        args_schema: type = WireArgs
        calls: list = []

        def _run(self, amount: int) -> str:
            self.calls.append(amount)
            return "wired"

    tool = Wire()
    guarded = guard_tool(tool, session, policy_tool="wire", handle_tool_error=False)
    with pytest.raises(lc_tools.ToolException, match="no-grant|no grant"):
        guarded.invoke({"amount": 500})
    assert tool.calls == []
    assert guarded.invoke({"amount": 5}) == "wired"
    assert tool.calls == [5]

    def send_email(to: str, body: str) -> str:
        """Send an email."""
        return "ok"

    g = guard_tool(send_email, session)
    assert g.invoke({"to": "a@example.com", "body": "b"}) == "ok"
    with pytest.raises(TypeError):
        guard_tool(42, session)


def test_an_approver_that_raises_rejects_and_propagates(session):
    ran = []

    def broken(d):
        raise RuntimeError("approver down")

    @agenra.guard(session, "send_email", on_pause=broken)
    def mail(to, body):
        ran.append(to)

    with pytest.raises(RuntimeError, match="approver down"):
        mail("eve@evil.test", "x")
    assert ran == []
    assert session.grant_left("outside") == 1, "rejected: the reserved unit came back"

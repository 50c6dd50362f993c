"""Agenra as an AgentDojo defense (agentdojo 0.1.35, as bench/agentdojo pins).

`AgenraToolsExecutor` takes the place of AgentDojo's `ToolsExecutor` in a
pipeline. Before each tool call the model asks for, it asks a session of the
policy: ALLOWed calls run and their results are reported; DENY and PAUSE
become tool errors the model sees (a PAUSE is rejected unless `on_pause`
approves it, and an approval is re-checked). One session per pipeline run:
it is opened at the run's first tool call with the user's request as its
task, and travels in `extra_args["agenra"]`.

    from agentdojo.agent_pipeline import (AgentPipeline, InitQuery, OpenAILLM,
        SystemMessage, ToolsExecutionLoop)
    from agenra.agentdojo import AgenraToolsExecutor
    llm = OpenAILLM(client, "gpt-4o-2024-05-13")
    defense = AgenraToolsExecutor(agenra.load_policy("bench/agentdojo/policies/slack.agr"))
    pipeline = AgentPipeline([SystemMessage("..."), InitQuery(), llm,
                              ToolsExecutionLoop([defense, llm])])

`GroundTruthModel` stands in for the model: it plays a task's ground-truth
calls one turn at a time (and an injection task's right after the first
output that carries the injected text), so the defense can be run on the
benchmark with no model at all.
"""

from __future__ import annotations

import dataclasses
from ast import literal_eval
from collections.abc import Sequence
from typing import Any, Callable, Optional

from agentdojo.agent_pipeline.base_pipeline_element import BasePipelineElement
from agentdojo.agent_pipeline.llms.google_llm import EMPTY_FUNCTION_NAME
from agentdojo.agent_pipeline.tool_execution import is_string_list, tool_result_to_str
from agentdojo.functions_runtime import EmptyEnv, Env, FunctionCall, FunctionReturnType, FunctionsRuntime
from agentdojo.types import (
    ChatAssistantMessage,
    ChatMessage,
    ChatToolResultMessage,
    get_text_content_as_str,
    text_content_block_from_string,
)

from ._agenra import Decision, Policy, Session

#: The key of `extra_args` that holds the run's `AgenraRun`.
EXTRA_KEY = "agenra"


@dataclasses.dataclass
class CallRecord:
    """One tool call the model asked for, and what Agenra answered."""

    call: str
    function: str
    verdict: str
    rule: str
    reason: str
    #: After a PAUSE: the re-check's verdict if approved, else None.
    approval: Optional[str] = None
    #: Whether the tool ran.
    admitted: bool = False


class AgenraRun:
    """The state of one pipeline run: its session, clock and call records."""

    def __init__(self, session: Session):
        self.session = session
        self.clock = 0
        self.calls_made = 0
        self.records: list[CallRecord] = []

    def tick(self) -> int:
        """The next event time (seconds): one per event, never backwards."""
        self.clock += 1
        return self.clock

    def next_call_id(self) -> str:
        self.calls_made += 1
        return f"c{self.calls_made}"


class Reporter:
    """How an admitted call's result is told to the session. The default
    reports the formatted output as the result's output (`failed` when the
    tool raised). Subclass it to split outputs into recorded fields and
    third-party text, as bench/agentdojo's adapter does."""

    def call_args(self, function: str, args: dict[str, Any]) -> dict[str, Any]:
        """The arguments as the policy's tool declares them (default: as
        given, without `None` values: an absent optional argument)."""
        return {k: v for k, v in args.items() if v is not None}

    def report(self, run: AgenraRun, call_id: str, function: str, output: str, error: Optional[str]) -> None:
        if error:
            run.session.report(call_id, "failed", time=run.tick())
        else:
            run.session.report(call_id, "succeeded", output, time=run.tick())


def _refusal(d: Decision, rejected: bool) -> str:
    verb = "paused, and a human rejected," if rejected else "denied"
    return f"agenra {verb} the call to `{d.tool}` (call {d.call}): rule `{d.rule}`: {d.reason}"


class AgenraToolsExecutor(BasePipelineElement):
    """AgentDojo's `ToolsExecutor`, with an Agenra session in front of every call.

    Args:
        policy: the compiled policy (`agenra.load_policy(...)`).
        on_pause: called on a PAUSE with the decision and the tool call; a
            true return approves it (re-checked by the monitor). Default:
            every PAUSE is rejected.
        reporter: how results are reported (`Reporter`).
        record: sessions keep the events they applied (`session.trace()`),
            for `agenra replay`.
        tool_output_formatter: as `ToolsExecutor`'s (YAML by default).
    """

    name = "agenra"

    def __init__(
        self,
        policy: Policy,
        *,
        on_pause: Optional[Callable[[Decision, FunctionCall], bool]] = None,
        reporter: Optional[Reporter] = None,
        record: bool = False,
        tool_output_formatter: Callable[[FunctionReturnType], str] = tool_result_to_str,
    ) -> None:
        self.policy = policy
        self.on_pause = on_pause
        self.reporter = reporter or Reporter()
        self.record = record
        self.output_formatter = tool_output_formatter
        #: The run of the last pipeline query (for inspection after `query`).
        self.last_run: Optional[AgenraRun] = None

    def _run_for(self, query: str, extra_args: dict) -> tuple[AgenraRun, dict]:
        run = extra_args.get(EXTRA_KEY)
        if isinstance(run, AgenraRun):
            return run, extra_args
        run = AgenraRun(self.policy.session(record=self.record))
        run.session.task(query, id="task", time=run.tick())
        self.last_run = run
        # A new dict: AgentDojo passes a shared default `{}`.
        return run, {**extra_args, EXTRA_KEY: run}

    def query(
        self,
        query: str,
        runtime: FunctionsRuntime,
        env: Env = EmptyEnv(),
        messages: Sequence[ChatMessage] = [],
        extra_args: dict = {},
    ) -> tuple[str, FunctionsRuntime, Env, Sequence[ChatMessage], dict]:
        if len(messages) == 0 or messages[-1]["role"] != "assistant":
            return query, runtime, env, messages, extra_args
        tool_calls = messages[-1].get("tool_calls")
        if not tool_calls:
            return query, runtime, env, messages, extra_args
        run, extra_args = self._run_for(query, extra_args)
        results = [self._execute(run, runtime, env, tc) for tc in tool_calls]
        return query, runtime, env, [*messages, *results], extra_args

    def _execute(self, run: AgenraRun, runtime: FunctionsRuntime, env: Env, tool_call: FunctionCall) -> ChatToolResultMessage:
        def result(content: str, error: Optional[str]) -> ChatToolResultMessage:
            return ChatToolResultMessage(
                role="tool",
                content=[text_content_block_from_string(content)],
                tool_call_id=tool_call.id,
                tool_call=tool_call,
                error=error,
            )

        if tool_call.function == EMPTY_FUNCTION_NAME:
            return result("", "Empty function name provided. Provide a valid function name.")
        if tool_call.function not in (tool.name for tool in runtime.functions.values()):
            return result("", f"Invalid tool {tool_call.function} provided.")
        # As ToolsExecutor does: list arguments a model wrote as strings.
        for k, v in tool_call.args.items():
            if isinstance(v, str) and is_string_list(v):
                tool_call.args[k] = literal_eval(v)

        cid = run.next_call_id()
        args = self.reporter.call_args(tool_call.function, dict(tool_call.args))
        d = run.session.authorize(tool_call.function, args, id=cid, time=run.tick())
        rec = CallRecord(cid, tool_call.function, d.verdict, d.rule, d.reason)
        run.records.append(rec)
        rejected = False
        if d.verdict == "PAUSE":
            approved = False
            if self.on_pause is not None:
                try:
                    approved = bool(self.on_pause(d, tool_call))
                except Exception:
                    approved = False
            if approved:
                d = run.session.approve(cid, time=run.tick())
                rec.approval = d.verdict
            else:
                run.session.reject(cid, time=run.tick())
                rejected = True
        if d.verdict != "ALLOW":
            return result("", _refusal(d, rejected))
        rec.admitted = True
        output, error = runtime.run_function(env, tool_call.function, tool_call.args)
        formatted = self.output_formatter(output)
        self.reporter.report(run, cid, tool_call.function, formatted, error)
        return result(formatted, error)


class GroundTruthModel(BasePipelineElement):
    """A scripted model: plays `user_task`'s ground-truth calls, one per turn,
    then answers with its ground-truth output. With `injection_task`, that
    task's ground-truth calls are made right after the first tool result that
    carries `marker` (the `important_instructions` attack's text), computed
    against the environment at that moment, as bench/agentdojo/export.py does.
    """

    name = "ground-truth-model"

    def __init__(self, user_task, injection_task=None, marker: str = "<INFORMATION>") -> None:
        self.user_task = user_task
        self.injection_task = injection_task
        self.marker = marker
        self._queue: list[FunctionCall] = []
        self._fired = False

    def query(
        self,
        query: str,
        runtime: FunctionsRuntime,
        env: Env = EmptyEnv(),
        messages: Sequence[ChatMessage] = [],
        extra_args: dict = {},
    ) -> tuple[str, FunctionsRuntime, Env, Sequence[ChatMessage], dict]:
        last = messages[-1] if messages else None
        if last is None or last["role"] == "user":
            self._queue = list(self.user_task.ground_truth(env))
            self._fired = False
        elif last["role"] == "tool":
            text = get_text_content_as_str(last["content"])
            if self.injection_task is not None and not self._fired and self.marker in text:
                self._fired = True
                self._queue[0:0] = list(self.injection_task.ground_truth(env))
        if self._queue:
            call = self._queue.pop(0)
            msg = ChatAssistantMessage(
                role="assistant", content=[text_content_block_from_string("")], tool_calls=[call]
            )
        else:
            msg = ChatAssistantMessage(
                role="assistant",
                content=[text_content_block_from_string(self.user_task.GROUND_TRUTH_OUTPUT)],
                tool_calls=None,
            )
        return query, runtime, env, [*messages, msg], extra_args

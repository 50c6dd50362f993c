#!/usr/bin/env python3
"""Export AgentDojo's ground-truth traces, without any LLM.

For every suite of benchmark version v1.2.2 (workspace, travel, banking,
slack) this writes

  out/traces/<suite>.benign.jsonl   one line per user task: the user task's
                                    ground-truth calls, run against the
                                    suite's default environment;
  out/traces/<suite>.attack.jsonl   one line per (user task, injection task)
                                    pair: the environment carries the
                                    `important_instructions` attack text in
                                    every injection vector the user task's
                                    ground truth reads; the injection task's
                                    ground-truth calls are inserted right
                                    after the first call whose output carries
                                    the injected text, computed against the
                                    environment at that moment.

Each call is run through agentdojo's own FunctionsRuntime and its output is
formatted with agentdojo's `tool_result_to_str` (YAML), i.e. what a model is
shown. Each call carries `origin` ("user" or "injection"): for scoring only,
the driver never gives it to the monitor.

Determinism: the hash seed is fixed (the script re-executes itself with
PYTHONHASHSEED=0; calendar participants go through a `set`) and the clock is
fixed (`datetime.datetime.now()` stamps sent mails and written files), so two
runs give byte-identical files.
"""

import datetime as _dt
import hashlib
import json
import os
import sys

if os.environ.get("PYTHONHASHSEED") != "0":
    os.environ["PYTHONHASHSEED"] = "0"
    os.execv(sys.executable, [sys.executable, *sys.argv])

BENCHMARK_VERSION = "v1.2.2"
SUITES = ["workspace", "travel", "banking", "slack"]
# The clock every tool sees (the workspace environment's "today" is
# 2024-05-15; any fixed instant would do).
FIXED_NOW = _dt.datetime(2024, 5, 15, 12, 0, 0)
# The important_instructions attack addresses the model by name; the paper's
# headline runs used GPT-4o. Only the injected text depends on it.
TARGET_PIPELINE_NAME = "gpt-4o-2024-05-13"
# Every injected text of this attack contains this token (YAML never splits
# it: it has no spaces), so it tells which output carries the injection.
INJECTION_MARKER = "<INFORMATION>"


class _RealDatetimeMeta(type):
    # `isinstance(x, datetime.datetime)` inside the tools keeps its meaning.
    def __instancecheck__(cls, obj):
        return isinstance(obj, _dt.datetime)

    def __subclasscheck__(cls, sub):
        return issubclass(sub, _dt.datetime)


class _FixedDatetime(_dt.datetime, metaclass=_RealDatetimeMeta):
    """`datetime.datetime` for the tools, with a fixed `now()`. Every value it
    makes is a plain `datetime.datetime` (YAML and pydantic see no subclass)."""

    def __new__(cls, *args, **kwargs):
        return _dt.datetime(*args, **kwargs)

    @classmethod
    def now(cls, tz=None):
        return FIXED_NOW if tz is None else FIXED_NOW.replace(tzinfo=tz)

    @classmethod
    def today(cls):
        return FIXED_NOW


class _DatetimeShim:
    """Stands for the `datetime` module inside agentdojo's tool modules."""

    def __getattr__(self, name):
        if name == "datetime":
            return _FixedDatetime
        return getattr(_dt, name)


def _fix_clock():
    import agentdojo.default_suites.v1.tools as tools_pkg
    import importlib
    import pkgutil

    shim = _DatetimeShim()
    for mod_info in pkgutil.iter_modules(tools_pkg.__path__):
        mod = importlib.import_module(f"{tools_pkg.__name__}.{mod_info.name}")
        if getattr(mod, "datetime", None) is _dt:
            mod.datetime = shim
    # Pydantic fields whose default is `datetime.datetime.now`.
    from pydantic import BaseModel

    for mod_info in pkgutil.iter_modules(tools_pkg.__path__):
        mod = importlib.import_module(f"{tools_pkg.__name__}.{mod_info.name}")
        for obj in list(vars(mod).values()):
            if isinstance(obj, type) and issubclass(obj, BaseModel) and obj is not BaseModel:
                changed = False
                for field in obj.model_fields.values():
                    if field.default_factory is _dt.datetime.now:
                        field.default_factory = lambda: FIXED_NOW
                        changed = True
                if changed:
                    obj.model_rebuild(force=True)


class _NamedPipeline:
    name = TARGET_PIPELINE_NAME


def _jsonable(value):
    return json.loads(json.dumps(value, default=str))


def _task_number(task_id):
    return int(task_id.rsplit("_", 1)[1])


def _run_call(runtime, env, call, origin):
    from agentdojo.agent_pipeline.tool_execution import tool_result_to_str

    args = _jsonable(dict(call.args))
    result, error = runtime.run_function(env, call.function, dict(call.args))
    return {
        "function": call.function,
        "args": args,
        "output": tool_result_to_str(result),
        "error": error,
        "origin": origin,
    }


def export_suite(suite, out_dir):
    from agentdojo.attacks.important_instructions_attacks import ImportantInstructionsAttack
    from agentdojo.functions_runtime import FunctionsRuntime

    user_tasks = sorted(suite.user_tasks.items(), key=lambda kv: _task_number(kv[0]))
    injection_tasks = sorted(suite.injection_tasks.items(), key=lambda kv: _task_number(kv[0]))
    attack = ImportantInstructionsAttack(suite, _NamedPipeline())

    benign_path = os.path.join(out_dir, f"{suite.name}.benign.jsonl")
    with open(benign_path, "w", encoding="utf-8", newline="\n") as f:
        for ut_id, ut in user_tasks:
            env = suite.load_and_inject_default_environment({})
            env = ut.init_environment(env)
            runtime = FunctionsRuntime(suite.tools)
            calls = [_run_call(runtime, env, c, "user") for c in ut.ground_truth(env)]
            rec = {
                "suite": suite.name,
                "user_task": ut_id,
                "injection_task": None,
                "prompt": ut.PROMPT,
                "calls": calls,
            }
            f.write(json.dumps(rec, ensure_ascii=False) + "\n")

    attack_path = os.path.join(out_dir, f"{suite.name}.attack.jsonl")
    stats = {"pairs": 0, "not_fired": 0, "empty_injection_ground_truth": 0}
    with open(attack_path, "w", encoding="utf-8", newline="\n") as f:
        for ut_id, ut in user_tasks:
            for it_id, it in injection_tasks:
                injections = attack.attack(ut, it)
                env = suite.load_and_inject_default_environment(injections)
                env = ut.init_environment(env)
                runtime = FunctionsRuntime(suite.tools)
                user_calls = ut.ground_truth(env)
                calls = []
                fired_after = None
                injected_count = 0
                for c in user_calls:
                    rec_call = _run_call(runtime, env, c, "user")
                    calls.append(rec_call)
                    if fired_after is None and INJECTION_MARKER in rec_call["output"]:
                        fired_after = len(calls) - 1
                        # Computed now: some ground truths read the
                        # environment as the earlier calls left it.
                        for ic in it.ground_truth(env):
                            calls.append(_run_call(runtime, env, ic, "injection"))
                            injected_count += 1
                stats["pairs"] += 1
                if fired_after is None:
                    stats["not_fired"] += 1
                elif injected_count == 0:
                    stats["empty_injection_ground_truth"] += 1
                rec = {
                    "suite": suite.name,
                    "user_task": ut_id,
                    "injection_task": it_id,
                    "prompt": ut.PROMPT,
                    "injected_vectors": sorted(injections),
                    "fired_after_call": fired_after,
                    "calls": calls,
                }
                f.write(json.dumps(rec, ensure_ascii=False) + "\n")
    return len(user_tasks), len(injection_tasks), stats


def main():
    out_dir = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(os.path.abspath(__file__)), "out", "traces")
    os.makedirs(out_dir, exist_ok=True)
    import warnings

    warnings.simplefilter("ignore")
    _fix_clock()
    from agentdojo.task_suite.load_suites import get_suites

    suites = get_suites(BENCHMARK_VERSION)
    sums = []
    for name in SUITES:
        n_user, n_inj, stats = export_suite(suites[name], out_dir)
        print(
            f"{name}: {n_user} user tasks, {n_inj} injection tasks, {stats['pairs']} pairs"
            f" ({stats['not_fired']} where the injection never fired,"
            f" {stats['empty_injection_ground_truth']} with an empty injection ground truth)",
            file=sys.stderr,
        )
    for fname in sorted(os.listdir(out_dir)):
        if fname.endswith(".jsonl"):
            with open(os.path.join(out_dir, fname), "rb") as fh:
                sums.append((hashlib.sha256(fh.read()).hexdigest(), fname))
    with open(os.path.join(out_dir, "SHA256SUMS"), "w") as fh:
        for digest, fname in sums:
            fh.write(f"{digest}  {fname}\n")
    total = hashlib.sha256("".join(f"{d}  {n}\n" for d, n in sums).encode()).hexdigest()
    print(f"export sha256 (of SHA256SUMS): {total}", file=sys.stderr)


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""A tiny MCP server over stdio for tests/mcp_proxy.rs (standard library only).

Newline-delimited JSON-RPC 2.0. Answers `initialize`, `tools/list` and
`tools/call`; every `tools/call` it receives is appended (as one JSON line)
to the file named by the environment variable MCP_FAKE_LOG, if set, so a
test can check which calls reached the server. `flaky` always fails with
`isError: true`; `crash` answers with a JSON-RPC error; a line that is not
JSON gets a JSON-RPC parse error; the notification `raw-garbage` from the
client makes the server print a non-JSON line.

Like the servers it stands for, it is lenient: Python's `json` takes lone
surrogates, `NaN`, `1e400` and deep nesting, and invalid UTF-8 becomes
U+FFFD. As a JavaScript server would, it answers an integral float id
(`1.0`) as an integer (`1`). `ping` is answered `{}`. A `flaky` call with
`{"text": "later"}` is answered only after the next message (as a server
running calls concurrently would). `read_file` of `docs/lone-surrogate`
answers with a lone surrogate in its text (as a server relaying outside
content might), of `docs/nan` with `NaN` in its result, and of
`docs/no-content` with a result that is not a
tools/call result. A call with an argument whose value ends with `never` is
logged but never answered. `wipe` (declared by the test policy, granted by
nothing) and `shell` (not declared) are listed too. A `tools/call` with
`params.task` (MCP 2025-11-25 tasks) is answered with a task handle; its
result comes with `tasks/result`, its status with `tasks/get`.
"""
import json
import os
import sys

TOOLS = ["read_file", "send_email", "publish", "flaky", "deploy", "crash",
         "release", "announce", "wipe", "shell"]

# Task-augmented calls (MCP 2025-11-25): task id -> the call's result.
TASKS = {}


def send(obj):
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


def log_call(params):
    path = os.environ.get("MCP_FAKE_LOG")
    if path:
        with open(path, "a", encoding="utf-8") as f:
            f.write(json.dumps(params) + "\n")


DEFERRED = []


def flush_deferred(msg):
    """Sends the answers held back, unless `msg` is what held them."""
    global DEFERRED
    if DEFERRED and DEFERRED[-1][0] is not msg:
        for _, answer in DEFERRED:
            send(answer)
        DEFERRED = []


def handle(msg):
    method = msg.get("method")
    mid = msg.get("id")
    if isinstance(mid, float) and mid.is_integer():
        mid = int(mid)
    if method == "ping" and mid is not None:
        send({"jsonrpc": "2.0", "id": mid, "result": {}})
        return
    if method == "initialize":
        send({"jsonrpc": "2.0", "id": mid, "result": {
            "protocolVersion": "2025-06-18",
            "capabilities": {"tools": {}},
            "serverInfo": {"name": "fake", "version": "0.1"}}})
    elif method == "tools/list":
        send({"jsonrpc": "2.0", "id": mid, "result": {"tools": [
            {"name": t, "inputSchema": {"type": "object"}} for t in TOOLS]}})
    elif method == "tools/call":
        params = msg.get("params") or {}
        log_call(params)
        name = params.get("name")
        args = params.get("arguments") or {}
        if any(isinstance(v, str) and v.endswith("never") for v in args.values()):
            return
        if isinstance(params.get("task"), dict):
            task = "task-%s" % mid
            TASKS[task] = call_result(name, args)
            send({"jsonrpc": "2.0", "id": mid, "result": {"task": {
                "taskId": task, "status": "working", "ttl": 60000,
                "createdAt": "2026-12-03T00:00:00Z",
                "lastUpdatedAt": "2026-12-03T00:00:00Z"}}})
            return
        if name == "crash":
            send({"jsonrpc": "2.0", "id": mid,
                  "error": {"code": -32000, "message": "crashed"}})
        elif name == "flaky":
            answer = {"jsonrpc": "2.0", "id": mid, "result": {
                "content": [{"type": "text", "text": "flaky failed"}],
                "isError": True}}
            if args.get("text") == "later":
                DEFERRED.append((msg, answer))
            else:
                send(answer)
        elif name == "read_file" and args.get("path") == "docs/lone-surrogate":
            send({"jsonrpc": "2.0", "id": mid, "result": {
                "content": [{"type": "text", "text": "outside text \ud800"}]}})
        elif name == "read_file" and args.get("path") == "docs/nan":
            send({"jsonrpc": "2.0", "id": mid, "result": {
                "content": [{"type": "text", "text": "a score"}],
                "score": float("nan")}})
        elif name == "read_file" and args.get("path") == "docs/no-content":
            send({"jsonrpc": "2.0", "id": mid, "result": {}})
        else:
            send({"jsonrpc": "2.0", "id": mid, "result": {
                "content": [{"type": "text",
                             "text": "%s ok: %s" % (name, json.dumps(args, sort_keys=True))}],
                "isError": False}})
    elif method == "tasks/get" and mid is not None:
        task = (msg.get("params") or {}).get("taskId")
        send({"jsonrpc": "2.0", "id": mid, "result": {
            "taskId": task, "status": "completed" if task in TASKS else "failed"}})
    elif method == "tasks/result" and mid is not None:
        task = (msg.get("params") or {}).get("taskId")
        if task in TASKS:
            send({"jsonrpc": "2.0", "id": mid, "result": TASKS.pop(task)})
        else:
            send({"jsonrpc": "2.0", "id": mid,
                  "error": {"code": -32602, "message": "no task %s" % task}})
    elif mid is not None:
        send({"jsonrpc": "2.0", "id": mid,
              "error": {"code": -32601, "message": "no method %s" % method}})


def call_result(name, args):
    """What a task-augmented call's `tasks/result` answers."""
    if name == "flaky":
        return {"content": [{"type": "text", "text": "flaky failed"}], "isError": True}
    return {"content": [{"type": "text", "text": "%s ok: %s" % (
        name, json.dumps(args, sort_keys=True))}], "isError": False}


def main():
    for raw in sys.stdin.buffer:
        line = raw.decode("utf-8", errors="replace").strip()
        if not line:
            continue
        try:
            msg = json.loads(line)
        except ValueError:
            send({"jsonrpc": "2.0", "id": None,
                  "error": {"code": -32700, "message": "parse error"}})
            continue
        if isinstance(msg, dict) and msg.get("method") == "raw-garbage":
            sys.stdout.write("this is not json\n")
            sys.stdout.flush()
            continue
        if isinstance(msg, dict):
            handle(msg)
            flush_deferred(msg)


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""A tiny MCP server over stdio for tests/mcp_proxy.rs (standard library only).

Newline-delimited JSON-RPC 2.0. Answers `initialize`, `tools/list` and
`tools/call`; every `tools/call` it receives is appended (as one JSON line)
to the file named by the environment variable MCP_FAKE_LOG, if set, so a
test can check which calls reached the server. `flaky` always fails with
`isError: true`; `crash` answers with a JSON-RPC error; a line that is not
JSON gets a JSON-RPC parse error; the line `raw-garbage` from the client
makes the server print a non-JSON line.
"""
import json
import os
import sys

TOOLS = ["read_file", "send_email", "publish", "flaky", "deploy", "crash",
         "release", "announce"]


def send(obj):
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


def log_call(params):
    path = os.environ.get("MCP_FAKE_LOG")
    if path:
        with open(path, "a", encoding="utf-8") as f:
            f.write(json.dumps(params) + "\n")


def handle(msg):
    method = msg.get("method")
    mid = msg.get("id")
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
        if name == "crash":
            send({"jsonrpc": "2.0", "id": mid,
                  "error": {"code": -32000, "message": "crashed"}})
        elif name == "flaky":
            send({"jsonrpc": "2.0", "id": mid, "result": {
                "content": [{"type": "text", "text": "flaky failed"}],
                "isError": True}})
        else:
            send({"jsonrpc": "2.0", "id": mid, "result": {
                "content": [{"type": "text",
                             "text": "%s ok: %s" % (name, json.dumps(args, sort_keys=True))}],
                "isError": False}})
    elif mid is not None:
        send({"jsonrpc": "2.0", "id": mid,
              "error": {"code": -32601, "message": "no method %s" % method}})


def main():
    for raw in sys.stdin.buffer:
        line = raw.decode("utf-8", errors="replace").strip()
        if not line:
            continue
        if line == "raw-garbage":
            sys.stdout.write("this is not json\n")
            sys.stdout.flush()
            continue
        try:
            msg = json.loads(line)
        except ValueError:
            send({"jsonrpc": "2.0", "id": None,
                  "error": {"code": -32700, "message": "parse error"}})
            continue
        if isinstance(msg, dict):
            handle(msg)


if __name__ == "__main__":
    main()

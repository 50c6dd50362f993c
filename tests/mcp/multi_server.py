#!/usr/bin/env python3
"""A tiny MCP server over stdio for tests/mcp_multi.rs (standard library only).

`multi_server.py fs` is a filesystem-like server (`read_file`, `write_file`,
`commit`, `exit`), `multi_server.py tests` a test-runner-like one
(`run_tests`, `post`, `exit`). Each `tools/call` it receives is appended as
one JSON line `{"server": ROLE, "id": ID, "params": ...}` to the file named
by MCP_MULTI_LOG, if set, so a test sees which calls reached which server
under which id (and, first, `{"server": ROLE, "pid": PID}`). `run_tests` with `{"suite": "failing"}` fails (`isError`);
`read_file` of a path ending in `later` is answered only after the next
message; `read_file` of `garbled` is answered with a lone surrogate; the
tool `exit` makes the server exit with code 3 at once.
"""
import json
import os
import sys

ROLE = sys.argv[1]
TOOLS = {"fs": ["read_file", "write_file", "commit", "exit"],
         "tests": ["run_tests", "post", "exit"]}[ROLE]
HELD = []


def send(obj):
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


def log_call(mid, params):
    path = os.environ.get("MCP_MULTI_LOG")
    if path:
        with open(path, "a", encoding="utf-8") as f:
            f.write(json.dumps({"server": ROLE, "id": mid, "params": params}) + "\n")


def ok(mid, text):
    return {"jsonrpc": "2.0", "id": mid,
            "result": {"content": [{"type": "text", "text": text}], "isError": False}}


def handle(msg):
    method = msg.get("method")
    mid = msg.get("id")
    if method == "initialize":
        send({"jsonrpc": "2.0", "id": mid, "result": {
            "protocolVersion": msg.get("params", {}).get("protocolVersion", "2025-06-18"),
            "capabilities": {"tools": {}, "resources": {}},
            "serverInfo": {"name": "multi-" + ROLE, "version": "0.1"},
            "instructions": "the %s server" % ROLE}})
    elif method == "tools/list":
        cursor = (msg.get("params") or {}).get("cursor")
        # Two pages: the first tool, then the rest.
        if cursor is None:
            send({"jsonrpc": "2.0", "id": mid, "result": {
                "tools": [{"name": TOOLS[0], "inputSchema": {"type": "object"}}],
                "nextCursor": "page-2"}})
        else:
            send({"jsonrpc": "2.0", "id": mid, "result": {"tools": [
                {"name": t, "inputSchema": {"type": "object"}} for t in TOOLS[1:]]}})
    elif method == "tools/call":
        params = msg.get("params") or {}
        log_call(mid, params)
        name = params.get("name")
        args = params.get("arguments") or {}
        if name == "exit":
            sys.exit(3)
        if name == "run_tests" and args.get("suite") == "failing":
            send({"jsonrpc": "2.0", "id": mid, "result": {
                "content": [{"type": "text", "text": "1 failed"}], "isError": True}})
        elif name == "read_file" and str(args.get("path", "")).endswith("later"):
            HELD.append(ok(mid, "contents of %s" % args.get("path")))
            return
        elif name == "read_file" and args.get("path") == "garbled":
            send({"jsonrpc": "2.0", "id": mid, "result": {
                "content": [{"type": "text", "text": "outside \ud800"}]}})
        else:
            send(ok(mid, "%s %s ok: %s" % (ROLE, name, json.dumps(args, sort_keys=True))))
    elif mid is not None and method is not None:
        send({"jsonrpc": "2.0", "id": mid,
              "error": {"code": -32601, "message": "no method %s" % method}})
    return True


def main():
    global HELD
    path = os.environ.get("MCP_MULTI_LOG")
    if path:
        with open(path, "a", encoding="utf-8") as f:
            f.write(json.dumps({"server": ROLE, "pid": os.getpid()}) + "\n")
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
        held, HELD = HELD, []
        if isinstance(msg, dict):
            handle(msg)
        for answer in held:
            send(answer)


if __name__ == "__main__":
    main()

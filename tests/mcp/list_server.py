#!/usr/bin/env python3
"""An MCP server over stdio for tests/mcp_init.rs (standard library only):
answers `initialize` and `tools/list` with the tools of
`tests/mcp/tools.json` (schemas like the everything and filesystem servers'),
two pages (`nextCursor`), and a log line on stdout first, which a client
must skip."""
import json
import os
import sys

TOOLS = json.load(open(os.path.join(os.path.dirname(__file__), "tools.json")))


def send(obj):
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


def main():
    sys.stdout.write("list_server starting\n")
    for raw in sys.stdin:
        msg = json.loads(raw)
        mid = msg.get("id")
        method = msg.get("method")
        if method == "initialize":
            send({"jsonrpc": "2.0", "id": mid, "result": {
                "protocolVersion": "2025-06-18", "capabilities": {"tools": {}},
                "serverInfo": {"name": "example-servers/everything", "version": "1"}}})
        elif method == "tools/list":
            half = len(TOOLS) // 2
            if (msg.get("params") or {}).get("cursor") == "page-2":
                send({"jsonrpc": "2.0", "id": mid, "result": {"tools": TOOLS[half:]}})
            else:
                send({"jsonrpc": "2.0", "id": mid, "result": {
                    "tools": TOOLS[:half], "nextCursor": "page-2"}})
        elif mid is not None:
            send({"jsonrpc": "2.0", "id": mid, "result": {
                "content": [{"type": "text", "text": "ok"}]}})


if __name__ == "__main__":
    main()

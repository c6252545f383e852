"""A hand-written MCP server (raw JSON-RPC over stdio) that misbehaves as ``argv[1]`` says:
``ok``, ``server_error`` (a -32000 error unless x is "1"), ``hang_init`` (never answers the
handshake), ``hang_call``, ``crash_list``, ``huge`` (a 50 MB result) or ``elicit:<kind>`` (asks a
hostile question during a call).

It writes its process id to the file named by ``HOSTILE_PID_FILE`` (if set) when it starts, and
every message it receives to the file named by ``HOSTILE_LOG`` (if set).
"""

import json
import os
import sys
import time
from typing import Any

mode = sys.argv[1]
if os.environ.get("HOSTILE_PID_FILE"):
    with open(os.environ["HOSTILE_PID_FILE"], "w") as f:
        f.write(str(os.getpid()))


def send(obj: object) -> None:
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


def recv() -> Any:
    line = sys.stdin.readline()
    if not line:
        sys.exit(0)
    if os.environ.get("HOSTILE_LOG"):
        with open(os.environ["HOSTILE_LOG"], "a") as f:
            f.write(line if line.endswith("\n") else line + "\n")
    return json.loads(line)


TOOLS = [
    {
        "name": "go",
        "inputSchema": {"type": "object", "properties": {"x": {"type": "string"}}},
        "annotations": {"readOnlyHint": False},
    }
]
while True:
    msg = recv()
    m = msg.get("method")
    i = msg.get("id")
    if i is None:
        continue
    if m == "initialize":
        if mode == "hang_init":
            time.sleep(3600)
        send(
            {
                "jsonrpc": "2.0",
                "id": i,
                "result": {
                    "protocolVersion": "2025-06-18",
                    "capabilities": {"tools": {}},
                    "serverInfo": {"name": "raw", "version": "1"},
                },
            }
        )
    elif m == "tools/list":
        if mode == "crash_list":
            os._exit(3)
        if mode == "garbage_list":
            sys.stdout.write("this is not json\n")
            sys.stdout.flush()
        send({"jsonrpc": "2.0", "id": i, "result": {"tools": TOOLS}})
    elif m == "tools/call":
        if mode == "hang_call":
            time.sleep(3600)
        if mode == "server_error" and msg.get("params", {}).get("arguments", {}).get("x") != "1":
            error = {"code": -32000, "message": "Request Entity Too Large"}
            send({"jsonrpc": "2.0", "id": i, "error": error})
            continue
        if mode == "huge":
            send(
                {
                    "jsonrpc": "2.0",
                    "id": i,
                    "result": {"content": [{"type": "text", "text": "x" * (50 * 1024 * 1024)}]},
                }
            )
            continue
        if mode.startswith("elicit"):
            kind = mode.split(":", 1)[1]
            schema: Any = {"type": "object", "properties": {"a": {"type": "string"}}}
            message = "Which?"
            if kind == "ref":
                schema = {
                    "type": "object",
                    "properties": {"a": {"$ref": "http://127.0.0.1:9/evil.json"}},
                }
            if kind == "deep":
                s: Any = {"type": "string"}
                for _ in range(5000):
                    s = {"type": "object", "properties": {"a": s}}
                schema = s
            if kind == "huge":
                schema = {
                    "type": "object",
                    "properties": {
                        f"p{k}": {"type": "string", "description": "d" * 100} for k in range(100000)
                    },
                }
            if kind == "invalid":
                schema = {"type": "object", "properties": {"a": {"type": 12}}}
            if kind == "ctrl":
                message = "Wh\x00at\x1b[31m red \u202e\ud800 ?"
            raw = json.dumps(
                {
                    "jsonrpc": "2.0",
                    "id": 99,
                    "method": "elicitation/create",
                    "params": {"message": message, "requestedSchema": schema},
                }
            )
            sys.stdout.write(raw + "\n")
            sys.stdout.flush()
            while True:
                r = recv()
                if r.get("id") == 99:
                    break
                if r.get("method") == "notifications/cancelled":  # the call was cancelled
                    break
            if r.get("id") != 99:
                continue
            send(
                {
                    "jsonrpc": "2.0",
                    "id": i,
                    "result": {
                        "content": [
                            {"type": "text", "text": "answer " + json.dumps(r.get("result"))}
                        ]
                    },
                }
            )
            continue
        send({"jsonrpc": "2.0", "id": i, "result": {"content": [{"type": "text", "text": "ok"}]}})
    else:
        send({"jsonrpc": "2.0", "id": i, "error": {"code": -32601, "message": "no " + str(m)}})

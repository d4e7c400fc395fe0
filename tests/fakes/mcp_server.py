"""A tiny MCP server over stdio (one JSON-RPC message a line) with one tool, ``add``.

Run as a script (`command` gives its command line). With ``--mortal`` it says "server
starting" on stderr when it starts, and ``add`` takes ``die=true``, on which it says
"dying as asked" on stderr and exits with status 3 (for the restart and log tests).
Unknown methods get JSON-RPC error -32601; notifications (no ``id``) get no answer.
"""

from __future__ import annotations

import json
import shlex
import sys
from pathlib import Path
from typing import Any

NUMBER = {"type": "number"}
PLAIN_TOOL = {
    "name": "add",
    "description": "Add two numbers.",
    "inputSchema": {
        "type": "object",
        "properties": {"a": NUMBER, "b": NUMBER},
        "required": ["a", "b"],
    },
}
MORTAL_TOOL = {
    "name": "add",
    "description": "Add two numbers; die=true exits.",
    "inputSchema": {
        "type": "object",
        "properties": {"a": NUMBER, "b": NUMBER, "die": {"type": "boolean"}},
    },
}


def command(*, mortal: bool = False) -> str:
    """The ``--mcp`` command line that starts this server."""
    return shlex.join([sys.executable, str(Path(__file__)), *(["--mortal"] if mortal else [])])


def serve(mortal: bool) -> None:
    if mortal:
        print("server starting", file=sys.stderr, flush=True)
    tool = MORTAL_TOOL if mortal else PLAIN_TOOL
    for line in sys.stdin:
        msg = json.loads(line)
        if "id" not in msg:
            continue
        method, params = msg.get("method"), msg.get("params") or {}
        result: Any
        if method == "initialize":
            result = {
                "protocolVersion": params["protocolVersion"],
                "capabilities": {"tools": {}},
                "serverInfo": {"name": "tiny", "version": "1"},
            }
        elif method == "tools/list":
            result = {"tools": [tool]}
        elif method == "tools/call" and params["name"] == "add":
            args = params["arguments"]
            if mortal and args.get("die"):
                print("dying as asked", file=sys.stderr, flush=True)
                sys.exit(3)
            text = str(args["a"] + args["b"])
            result = {"content": [{"type": "text", "text": text}], "isError": False}
        else:
            error = {"code": -32601, "message": "unknown method " + str(method)}
            print(json.dumps({"jsonrpc": "2.0", "id": msg["id"], "error": error}), flush=True)
            continue
        print(json.dumps({"jsonrpc": "2.0", "id": msg["id"], "result": result}), flush=True)


if __name__ == "__main__":
    serve("--mortal" in sys.argv[1:])

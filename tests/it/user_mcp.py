#!/usr/bin/env python3
"""A user's own MCP server (stdio, newline-delimited JSON-RPC) with one tool, `user_ping`.

The runtime tests configure it the way a user would, in the runtime's own files, to show that a
launch under `agentteam run` still has the user's servers beside AgentTeam's.
"""

from __future__ import annotations

import json
import sys


def reply(message_id: object, result: object) -> None:
    sys.stdout.write(json.dumps({"jsonrpc": "2.0", "id": message_id, "result": result}) + "\n")
    sys.stdout.flush()


def main() -> int:
    for line in sys.stdin:
        try:
            request = json.loads(line)
        except ValueError:
            continue
        method, message_id = request.get("method"), request.get("id")
        if message_id is None:
            continue
        if method == "initialize":
            version = (request.get("params") or {}).get("protocolVersion", "2025-06-18")
            reply(message_id, {"protocolVersion": version, "capabilities": {"tools": {}},
                               "serverInfo": {"name": "mine", "version": "1"}})
        elif method == "tools/list":
            reply(message_id, {"tools": [{
                "name": "user_ping", "description": "The user's own tool.",
                "inputSchema": {"type": "object", "properties": {}}}]})
        elif method == "tools/call":
            reply(message_id, {"content": [{"type": "text", "text": "pong"}]})
        else:
            sys.stdout.write(json.dumps({"jsonrpc": "2.0", "id": message_id, "error": {
                "code": -32601, "message": "method not found"}}) + "\n")
            sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())

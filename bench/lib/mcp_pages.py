#!/usr/bin/env python3
"""The pages bench/mcp.sh rotates its history loads over.

Through the daemon's server (operator API) and the daemon's MCP endpoint (as the runtime that
bench/mcp.sh started), over keep-alive HTTP:
- `channel`: CONVERSATIONS channels of MESSAGES messages each;
- `thread`: CONVERSATIONS threads (in the daemon's channel) of MESSAGES replies each;
- `rich`: CONVERSATIONS channels of MESSAGES messages, each with an attachment (posted by the
  person) and a reaction (added by the agent).
Each conversation is then walked one message at a time (`limit` 1) for a cursor after each of
its messages; every position with 20 messages after it, and the newest page, is one page of the
load. Each page's request (`message_history_read`, `limit` 20) is sent once here and must answer
20 messages, the first of them the message after its cursor: a page the load rotates over is a
real, distinct, full page.

Writes DIR/KIND.bodies: one JSON-RPC request body per line, in a shuffled order (a fixed seed);
and DIR/one.bodies: the channel pages' requests with `limit` 1, each checked to answer the one
message after its cursor.
The bearer tokens are read from their files, never from argv.

Usage: mcp_pages.py DIR SERVER_URL OPERATOR_TOKEN_FILE WORKSPACE HUMAN AGENT CHANNEL MCP_URL
                    MCP_TOKEN_FILE [CONVERSATIONS MESSAGES]
"""

import http.client
import json
import random
import sys
import urllib.parse

VERSION = "2026-07-28"
META = {"io.modelcontextprotocol/protocolVersion": VERSION,
        "io.modelcontextprotocol/clientCapabilities": {}}
PAGE = 20


class Endpoint:
    """One keep-alive connection to URL's host with a bearer from a file."""

    def __init__(self, url, token_file):
        parts = urllib.parse.urlsplit(url)
        self.conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=60)
        self.path = parts.path
        with open(token_file) as f:
            self.bearer = f.read().strip()

    def post(self, path, body, headers=()):
        self.conn.request("POST", path, body=body, headers={
            "Authorization": f"Bearer {self.bearer}", "Content-Type": "application/json",
            "Accept": "application/json, text/event-stream", **dict(headers)})
        response = self.conn.getresponse()
        data = response.read()
        if response.status != 200:
            sys.exit(f"{path}: HTTP {response.status}: {data[:600]!r}")
        return json.loads(data)


def rpc(tool, arguments):
    """A tools/call body of the 2026-07-28 wire."""
    return json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                       "params": {"name": tool, "arguments": arguments, "_meta": META}},
                      separators=(",", ":"))


def call(mcp, tool, arguments=None, body=None):
    answer = mcp.post(mcp.path, body or rpc(tool, arguments), {
        "MCP-Protocol-Version": VERSION, "Mcp-Method": "tools/call", "Mcp-Name": tool})
    result = answer.get("result")
    if not isinstance(result, dict) or result.get("isError"):
        sys.exit(f"{tool}: not a result: {json.dumps(answer)[:600]}")
    return result["structuredContent"]


def main():
    out, server, operator_file, workspace, human, agent, channel, mcp_url, mcp_token = sys.argv[1:10]
    conversations = int(sys.argv[10]) if len(sys.argv) > 10 else 4
    messages = int(sys.argv[11]) if len(sys.argv) > 11 else 270
    operator = Endpoint(server, operator_file)
    mcp = Endpoint(mcp_url, mcp_token)

    def admin(path, body):
        answer = operator.post(f"/admin/workspaces/{workspace}{path}", json.dumps(body))
        assert answer["ok"], answer
        return answer["data"]

    members = [human, agent]
    kinds = {"channel": [], "thread": [], "rich": []}
    for n in range(conversations):
        plain = admin("/channels", {"name": f"pages-{n}", "members": members})["channelId"]
        thread = admin(f"/channels/{channel}/threads", {"title": f"pages {n}"})["threadId"]
        rich = admin("/channels", {"name": f"rich-{n}", "members": members})["channelId"]
        for i in range(messages):
            admin("/messages", {"authorHumanId": human, "channelId": plain, "content": f"message {i}"})
            admin("/messages", {"authorHumanId": human, "channelId": channel, "threadId": thread,
                                "content": f"reply {i}"})
            message = admin("/messages", {
                "authorHumanId": human, "channelId": rich, "content": f"report {i}",
                "attachments": [{"name": f"report-{i}.txt", "mediaType": "text/plain",
                                 "text": f"line {i}"}]})["messageId"]
            call(mcp, "reaction_add", {"messageId": message, "emoji": "👍"})
        kinds["channel"].append(f"channel:{plain}")
        kinds["thread"].append(f"thread:{thread}")
        kinds["rich"].append(f"channel:{rich}")

    rng = random.Random(1)
    # The channel pages' cursors again, each read one message deep: the same path and statement
    # with one row and a short answer (what a page costs beyond the path is the difference).
    ones = []
    for kind, targets in kinds.items():
        pages = []
        for target in targets:
            # (cursor, the id of the message the page starts with); the newest page has no cursor.
            walked, cursor = [], None
            while True:
                arguments = {"target": target, "limit": 1}
                if cursor:
                    arguments["cursor"] = cursor
                page = call(mcp, "message_history_read", arguments)
                walked.append((cursor, page["messages"][0]["id"]))
                cursor = page.get("nextCursor")
                if not cursor:
                    break
            if len(walked) != messages:
                sys.exit(f"{target}: {len(walked)} messages walked, {messages} posted")
            for cursor, first in walked[:messages - PAGE + 1]:
                arguments = {"target": target, "limit": PAGE}
                if cursor:
                    arguments["cursor"] = cursor
                body = rpc("message_history_read", arguments)
                page = call(mcp, "message_history_read", body=body)["messages"]
                if len(page) != PAGE or page[0]["id"] != first:
                    sys.exit(f"{target}: a page of {len(page)} messages, not the {PAGE} from {first}")
                if kind == "rich" and not all(m["reactions"] and m["attachments"] for m in page):
                    sys.exit(f"{target}: a message without its reaction or attachment")
                pages.append(body)
                if kind == "channel":
                    one = rpc("message_history_read", {**arguments, "limit": 1})
                    if [m["id"] for m in call(mcp, "message_history_read", body=one)["messages"]] != [first]:
                        sys.exit(f"{target}: a one-message page that is not {first}")
                    ones.append(one)
        rng.shuffle(pages)
        with open(f"{out}/{kind}.bodies", "w") as f:
            f.write("".join(body + "\n" for body in pages))
        print(f"pages: {kind}: {len(pages)} distinct pages of {PAGE} messages over {len(targets)} conversations")
    rng.shuffle(ones)
    with open(f"{out}/one.bodies", "w") as f:
        f.write("".join(body + "\n" for body in ones))
    print(f"pages: one: {len(ones)} distinct pages of 1 message")


if __name__ == "__main__":
    main()

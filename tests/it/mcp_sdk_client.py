#!/usr/bin/env python3
"""Drive the daemon's MCP endpoint with the official MCP Python SDK (PyPI `mcp`).

Usage: python mcp_sdk_client.py --url URL --token-file PATH --mode legacy|2026-07-28|auto --target TARGET
       [--kb-query Q] [--memory-query Q] [--stdio-command AGENTTEAM]

With --stdio-command: over stdio instead, through `AGENTTEAM mcp stdio`, which gets the URL and the
token file's path in its environment (this script then never reads the token).

With --kb-query: kb_search, then kb_fetch of the first hit. With --memory-query: memory_search.

Prints one JSON summary line on stdout and exits 0; on a failed check prints one
line to stderr and exits 1. The bearer token is read from --token-file only.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from typing import Any

import httpx2
from mcp import Client, MCPError
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client

EXPECTED_TOOLS = {
    "message_send", "message_history_read", "reaction_add", "reaction_remove",
    "attachment_read", "memory_search", "kb_search", "kb_fetch",
}
INVALID_PARAMS = -32602


class CheckFailed(Exception):
    pass


def check(cond: bool, reason: str) -> None:
    if not cond:
        raise CheckFailed(reason)


def leaf(exc: BaseException) -> BaseException:
    """First leaf of an (anyio task-group) exception group, else the exception itself."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return exc


def text_blocks(result: Any) -> list[str]:
    return [b.text for b in result.content if getattr(b, "type", None) == "text"]


async def run(url: str, token_file: str, mode: str, target: str,
              kb_query: str | None, memory_query: str | None,
              stdio_command: str | None) -> dict[str, Any]:
    if stdio_command is not None:
        server = StdioServerParameters(
            command=stdio_command, args=["mcp", "stdio"],
            env={"AGENTTEAM_MCP_URL": url, "AGENTTEAM_MCP_TOKEN_FILE": token_file})
        return await session(stdio_client(server), mode, target, kb_query, memory_query)
    with open(token_file, encoding="utf-8") as f:
        token = f.read().strip()
    check(bool(token), f"token file {token_file} is empty")
    headers = {"Authorization": f"Bearer {token}"}
    timeout = httpx2.Timeout(30.0, read=300.0)
    async with httpx2.AsyncClient(headers=headers, timeout=timeout) as http:
        return await session(streamable_http_client(url, http_client=http), mode, target,
                             kb_query, memory_query)


async def session(transport: Any, mode: str, target: str,
                  kb_query: str | None, memory_query: str | None) -> dict[str, Any]:
    extra: dict[str, Any] = {}
    async with Client(transport, mode=mode) as client:
        protocol_version = client.protocol_version

        # (a) tools/list
        listed = await client.list_tools()
        names = sorted(t.name for t in listed.tools)
        missing = sorted(EXPECTED_TOOLS - set(names))
        check(not missing, f"tools/list is missing {missing} (got {names})")

        # (b) message_send
        sent = await client.call_tool(
            "message_send", {"target": target, "content": f"hello from the python sdk ({mode})"}
        )
        check(not sent.is_error, f"message_send returned isError: {text_blocks(sent)}")
        sc = sent.structured_content
        check(isinstance(sc, dict) and isinstance(sc.get("message"), dict) and "id" in sc["message"],
              f"message_send structuredContent lacks message.id: {sc!r}")
        sent_id = sc["message"]["id"]

        # (c) message_history_read
        hist = await client.call_tool("message_history_read", {"target": target, "limit": 10})
        check(not hist.is_error, f"message_history_read returned isError: {text_blocks(hist)}")
        hsc = hist.structured_content
        check(isinstance(hsc, dict) and isinstance(hsc.get("messages"), list),
              f"message_history_read structuredContent lacks a messages list: {hsc!r}")
        ids = [m.get("id") for m in hsc["messages"] if isinstance(m, dict)]
        check(sent_id in ids, f"history does not contain sent id {sent_id!r} (ids: {ids})")
        parsed = []
        for t in text_blocks(hist):
            try:
                parsed.append(json.loads(t))
            except ValueError:
                pass
        check(hsc in parsed, "no text content block parses as JSON equal to structuredContent")

        # (d) unknown tool must be a JSON-RPC protocol error (-32602), not an isError result
        try:
            bad = await client.call_tool("no_such_tool", {})
        except MCPError as e:
            unknown_code = e.code
        else:
            raise CheckFailed(f"no_such_tool did not raise a protocol error (isError={bad.is_error})")
        check(unknown_code == INVALID_PARAMS, f"no_such_tool error code {unknown_code}, want {INVALID_PARAMS}")

        # (e) knowledge: search, then fetch the first hit
        if kb_query is not None:
            found = await client.call_tool("kb_search", {"query": kb_query})
            check(not found.is_error, f"kb_search returned isError: {text_blocks(found)}")
            docs = (found.structured_content or {}).get("documents")
            check(isinstance(docs, list) and docs, f"kb_search found nothing: {found.structured_content!r}")
            first = docs[0]
            fetched = await client.call_tool("kb_fetch", {"documentId": first["documentId"]})
            check(not fetched.is_error, f"kb_fetch returned isError: {text_blocks(fetched)}")
            fsc = fetched.structured_content or {}
            check(fsc.get("documentId") == first["documentId"], f"kb_fetch answered another document: {fsc!r}")
            extra.update(kbTitle=first["title"], kbSnippet=first["snippet"], kbContent=fsc.get("content"))

        # (f) memory: locators only
        if memory_query is not None:
            found = await client.call_tool("memory_search", {"query": memory_query, "limit": 5})
            check(not found.is_error, f"memory_search returned isError: {text_blocks(found)}")
            matches = (found.structured_content or {}).get("matches")
            check(isinstance(matches, list) and matches, f"memory_search found nothing: {found.structured_content!r}")
            extra.update(memoryMatches=matches)

    return {"mode": mode, "protocolVersion": protocol_version, "tools": names,
            "sentId": sent_id, "historyCount": len(hsc["messages"]), "unknownToolCode": unknown_code,
            **extra}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--url", required=True)
    ap.add_argument("--token-file", required=True)
    ap.add_argument("--mode", required=True, choices=["legacy", "2026-07-28", "auto"])
    ap.add_argument("--target", required=True)
    ap.add_argument("--kb-query")
    ap.add_argument("--memory-query")
    ap.add_argument("--stdio-command")
    args = ap.parse_args()
    try:
        summary = asyncio.run(run(args.url, args.token_file, args.mode, args.target,
                                  args.kb_query, args.memory_query, args.stdio_command))
    except Exception as exc:  # noqa: BLE001 - any failure becomes one stderr line
        e = leaf(exc)
        if isinstance(e, CheckFailed):
            reason = f"check failed: {e}"
        elif isinstance(e, MCPError):
            reason = f"unexpected MCP error {e.code}: {e.message}"
        else:
            reason = f"{type(e).__name__}: {e}"
        print(f"mcp_sdk_client [{args.mode}]: {reason}".replace("\n", " "), file=sys.stderr)
        return 1
    print(json.dumps(summary))
    return 0


if __name__ == "__main__":
    sys.exit(main())

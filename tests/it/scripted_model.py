#!/usr/bin/env python3
"""A scripted model server on loopback, for running real agent runtimes offline.

Usage: python scripted_model.py --api anthropic|responses|chat --tool-prefix PREFIX
       --target TARGET --content TEXT --log FILE [--hold-call SECS] [--debug]

Serves one API (streaming, SSE) on 127.0.0.1 at a free port, printed as `listening on PORT`:
  anthropic  Anthropic Messages, POST /v1/messages (Claude Code)
  responses  OpenAI Responses, POST /v1/responses (Codex)
  chat       OpenAI chat completions, POST /v1/chat/completions (OpenCode)
Its first answer to a request that offers the agentteam tools is a call of `message_send`
(under PREFIX, the runtime's model-visible form) with TARGET and TEXT; once the conversation holds
that call's result, it answers with plain text. Every other request gets plain text.

It appends one JSON line per request to FILE: the path, the agentteam tool names the request
offered (for Codex: namespace + `__` + function), and what it answered.
"""

from __future__ import annotations

import argparse
import json
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

ARGS: argparse.Namespace
LOCK = threading.Lock()


def log(entry: dict[str, Any]) -> None:
    with LOCK, open(ARGS.log, "a", encoding="utf-8") as f:
        f.write(json.dumps(entry) + "\n")


def offered_tools(api: str, body: dict[str, Any]) -> list[str]:
    names: list[str] = []
    for tool in body.get("tools") or []:
        if not isinstance(tool, dict):
            continue
        if api == "chat":
            name = (tool.get("function") or {}).get("name")
            if name:
                names.append(name)
        elif api == "responses" and tool.get("type") == "namespace":
            # Codex: a namespace `mcp__<server>` of functions named by their raw tool names; the
            # model-visible form is namespace + `__` + function.
            for inner in tool.get("tools") or []:
                if isinstance(inner, dict) and inner.get("name"):
                    names.append(f"{tool.get('name')}__{inner['name']}")
        elif tool.get("name"):
            names.append(tool["name"])
    return names


def has_tool_result(api: str, body: dict[str, Any]) -> bool:
    if api == "anthropic":
        for message in body.get("messages") or []:
            content = message.get("content")
            if isinstance(content, list) and any(
                    isinstance(b, dict) and b.get("type") == "tool_result" for b in content):
                return True
        return False
    if api == "chat":
        return any(m.get("role") == "tool" for m in body.get("messages") or [])
    return any(isinstance(i, dict) and i.get("type") == "function_call_output"
               for i in body.get("input") or [])


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *_: Any) -> None:
        pass

    def do_GET(self) -> None:  # noqa: N802
        self.reply_json(404, {"error": "not found"})
        log({"path": self.path, "method": "GET"})

    def do_HEAD(self) -> None:  # noqa: N802
        self.send_response(200)
        self.send_header("content-length", "0")
        self.end_headers()

    def do_POST(self) -> None:  # noqa: N802
        length = int(self.headers.get("content-length") or 0)
        raw = self.rfile.read(length) if length else b""
        try:
            body = json.loads(raw or b"{}")
        except ValueError:
            body = {}
        api = ARGS.api
        names = offered_tools(api, body)
        ours = [n for n in names if ARGS.tool_prefix in n]
        call = bool(ours) and not has_tool_result(api, body)
        entry = {"path": self.path, "tools": ours, "answer": "call" if call else "text",
                 "stream": bool(body.get("stream"))}
        if ARGS.debug:
            entry["raw_tools"] = [{k: v for k, v in t.items() if k in ("type", "name")}
                                  | ({"inner": [i.get("name") for i in t.get("tools") or []]}
                                     if isinstance(t, dict) and t.get("tools") else {})
                                  for t in body.get("tools") or [] if isinstance(t, dict)]
        log(entry)
        if "count_tokens" in self.path:
            self.reply_json(200, {"input_tokens": 10})
            return
        if call and ARGS.hold_call:
            # Past the runtime's first credential generation: the call must use a fresh one.
            time.sleep(ARGS.hold_call)
        if api == "anthropic" and self.path.startswith("/v1/messages"):
            self.answer_anthropic(call, body)
        elif api == "responses" and self.path.startswith("/v1/responses"):
            self.answer_responses(call, body)
        elif api == "chat" and self.path.startswith("/v1/chat/completions"):
            self.answer_chat(call, body)
        else:
            self.reply_json(404, {"error": "not found"})

    # --- plumbing ---
    def reply_json(self, status: int, value: Any) -> None:
        data = json.dumps(value).encode()
        self.send_response(status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def sse(self, events: list[tuple[str | None, Any]]) -> None:
        chunks = []
        for event, data in events:
            text = data if isinstance(data, str) else json.dumps(data)
            chunks.append((f"event: {event}\n" if event else "") + f"data: {text}\n\n")
        payload = "".join(chunks).encode()
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        self.send_header("cache-control", "no-cache")
        self.send_header("content-length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def arguments(self) -> str:
        return json.dumps({"target": ARGS.target, "content": ARGS.content})

    # --- Anthropic Messages ---
    def answer_anthropic(self, call: bool, body: dict[str, Any]) -> None:
        model = body.get("model", "scripted")
        usage = {"input_tokens": 10, "output_tokens": 5}
        start = {"type": "message_start", "message": {
            "id": "msg_scripted", "type": "message", "role": "assistant", "model": model,
            "content": [], "stop_reason": None, "stop_sequence": None, "usage": usage}}
        if call:
            block = {"type": "tool_use", "id": "toolu_scripted_1",
                     "name": f"{ARGS.tool_prefix}message_send", "input": {}}
            delta = {"type": "input_json_delta", "partial_json": self.arguments()}
            stop = "tool_use"
        else:
            block = {"type": "text", "text": ""}
            delta = {"type": "text_delta", "text": "done"}
            stop = "end_turn"
        if not body.get("stream"):
            content = ({"type": "tool_use", "id": "toolu_scripted_1",
                        "name": f"{ARGS.tool_prefix}message_send",
                        "input": json.loads(self.arguments())} if call
                       else {"type": "text", "text": "done"})
            self.reply_json(200, {**start["message"], "content": [content], "stop_reason": stop})
            return
        self.sse([
            ("message_start", start),
            ("content_block_start", {"type": "content_block_start", "index": 0, "content_block": block}),
            ("content_block_delta", {"type": "content_block_delta", "index": 0, "delta": delta}),
            ("content_block_stop", {"type": "content_block_stop", "index": 0}),
            ("message_delta", {"type": "message_delta",
                               "delta": {"stop_reason": stop, "stop_sequence": None},
                               "usage": {"output_tokens": 5}}),
            ("message_stop", {"type": "message_stop"}),
        ])

    # --- OpenAI Responses ---
    def answer_responses(self, call: bool, body: dict[str, Any]) -> None:
        model = body.get("model", "scripted")
        if call:
            namespace = ARGS.tool_prefix.rstrip("_")
            item = {"type": "function_call", "id": "fc_scripted_1", "call_id": "call_scripted_1",
                    "name": "message_send", "namespace": namespace,
                    "arguments": self.arguments(), "status": "completed"}
        else:
            item = {"type": "message", "id": "msg_scripted_1", "role": "assistant",
                    "status": "completed",
                    "content": [{"type": "output_text", "text": "done", "annotations": []}]}
        response = {"id": "resp_scripted", "object": "response", "model": model,
                    "status": "in_progress", "output": []}
        done = {**response, "status": "completed", "output": [item],
                "usage": {"input_tokens": 10, "output_tokens": 5, "total_tokens": 15,
                          "input_tokens_details": {"cached_tokens": 0},
                          "output_tokens_details": {"reasoning_tokens": 0}}}
        self.sse([
            ("response.created", {"type": "response.created", "response": response}),
            ("response.output_item.added", {"type": "response.output_item.added", "output_index": 0,
                                            "item": {**item, "status": "in_progress"}}),
            ("response.output_item.done", {"type": "response.output_item.done", "output_index": 0,
                                           "item": item}),
            ("response.completed", {"type": "response.completed", "response": done}),
        ])

    # --- OpenAI chat completions ---
    def answer_chat(self, call: bool, body: dict[str, Any]) -> None:
        model = body.get("model", "scripted")
        base = {"id": "chatcmpl-scripted", "object": "chat.completion.chunk", "created": 0,
                "model": model}
        if call:
            first = {"role": "assistant", "content": None, "tool_calls": [{
                "index": 0, "id": "call_scripted_1", "type": "function",
                "function": {"name": f"{ARGS.tool_prefix}message_send",
                             "arguments": self.arguments()}}]}
            finish = "tool_calls"
        else:
            first = {"role": "assistant", "content": "done"}
            finish = "stop"
        self.sse([
            (None, {**base, "choices": [{"index": 0, "delta": first, "finish_reason": None}]}),
            (None, {**base, "choices": [{"index": 0, "delta": {}, "finish_reason": finish}],
                    "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}}),
            (None, "[DONE]"),
        ])


def main() -> int:
    global ARGS
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--api", required=True, choices=["anthropic", "responses", "chat"])
    ap.add_argument("--tool-prefix", required=True)
    ap.add_argument("--target", required=True)
    ap.add_argument("--content", required=True)
    ap.add_argument("--log", required=True)
    ap.add_argument("--hold-call", type=float, default=0.0,
                    help="seconds to wait before answering with the tool call")
    ap.add_argument("--debug", action="store_true", help="also log every offered tool's type and name")
    ARGS = ap.parse_args()
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    print(f"listening on {server.server_address[1]}", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main())

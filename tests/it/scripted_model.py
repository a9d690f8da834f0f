#!/usr/bin/env python3
"""A scripted model server on loopback, for running real agent runtimes offline.

Usage: python scripted_model.py --api anthropic|responses|chat|gemini --tool-prefix PREFIX
       --script FILE --log FILE [--dump DIR] [--hold-call SECS] [--debug]

Serves one API (streaming, SSE) on 127.0.0.1 at a free port, printed as `listening on PORT`:
  anthropic  Anthropic Messages, POST /v1/messages (Claude Code)
  responses  OpenAI Responses, POST /v1/responses (Codex)
  chat       OpenAI chat completions, POST /v1/chat/completions (OpenCode)
  gemini     Gemini, POST /v1beta/models/MODEL:streamGenerateContent (Gemini CLI; also
             :generateContent, unstreamed, and :countTokens)
A request that offers the agentteam tools (their names contain PREFIX) is the conversation's:
at step k (k = the steps whose results the conversation already holds) it answers with the
script's k-th step, and after the last one with the text "done". Every other request gets plain text
(Gemini's that ask for JSON, e.g. its model router's, the least JSON their schema accepts).

The script (FILE) is a JSON list of steps; a step is a call `{"name": TOOL, "args": {...}}` (TOOL
as the model sees it; for Codex it may also name its `namespace`, `mcp__agentteam`; for Gemini
it is `mcp_<server>_<tool>`) or a list of calls made at once. The first step is held for SECS
before it is answered (past a credential generation).

The script may instead be an object of such lists, one per conversation, each keyed by a marker:
a request belongs to the conversation whose marker its last user message contains (several
conversations at once, such as a Codex app-server's threads and the sub-agent one of them
spawns), or else the first marker a tool result after that message holds (a turn whose prompt
names a file, which the model reads). A request that has no marker gets the first call of the
script keyed `*`, if there is one, or plain text. A string argument `$PATH_IN_PROMPT` is the
absolute path of a file the latest user message naming one names.

It appends one JSON line per request to FILE: the path, the agentteam tool names the request
offered (for Codex: namespace + `__` + function), every tool name it offered, what it answered,
and with --dump the file its body was written to.
"""

from __future__ import annotations

import argparse
import json
import re
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


def tool_results(api: str, body: dict[str, Any]) -> int:
    if api == "anthropic":
        return sum(1 for message in body.get("messages") or []
                   if isinstance(message.get("content"), list)
                   for b in message["content"]
                   if isinstance(b, dict) and b.get("type") == "tool_result")
    if api == "chat":
        return sum(1 for m in body.get("messages") or [] if m.get("role") == "tool")
    if api == "gemini":
        # Distinct by their call ids: a resumed Gemini session replays a response twice.
        seen: set[Any] = set()
        count = 0
        for content in body.get("contents") or []:
            if not isinstance(content, dict):
                continue
            for p in content.get("parts") or []:
                if not (isinstance(p, dict) and isinstance(p.get("functionResponse"), dict)):
                    continue
                call = p["functionResponse"].get("id")
                if call is None or call not in seen:
                    count += 1
                if call is not None:
                    seen.add(call)
        return count
    return sum(1 for i in body.get("input") or []
               if isinstance(i, dict) and i.get("type") == "function_call_output")


def steps_taken(api: str, body: dict[str, Any], steps: list[Any]) -> int:
    """The script's steps the conversation holds the results of. By results, not turns: a
    runtime may merge consecutive turns of calls into one message."""
    results, done = tool_results(api, body), 0
    for step in steps:
        if results <= 0:
            break
        results -= len(calls_of(step))
        done += 1
    return done


def last_user_text(api: str, body: dict[str, Any]) -> str:
    """The text of the request's last user message (Responses API: its last `user` input item)."""
    items = body.get("input") if api == "responses" else body.get("messages")
    if api == "gemini":
        items = body.get("contents")
    for item in reversed(items or []):
        if isinstance(item, dict) and item.get("role") == "user":
            return json.dumps(item.get("content", item.get("parts")))
    return ""


def after_last_user(api: str, body: dict[str, Any]) -> str:
    """The items after the request's last user message (the turn's calls and their results)."""
    items = body.get("input") if api == "responses" else body.get("messages")
    if api == "gemini":
        items = body.get("contents")
    items = [i for i in items or [] if isinstance(i, dict)]
    last = max((n for n, i in enumerate(items) if i.get("role") == "user"), default=-1)
    return json.dumps(items[last + 1:])


def conversation(api: str, body: dict[str, Any]) -> tuple[str | None, list[Any]]:
    """The conversation a request belongs to: its marker (None for a single script), and its steps."""
    if isinstance(ARGS.steps, list):
        return None, ARGS.steps
    for text in (last_user_text(api, body), after_last_user(api, body)):
        for marker, steps in ARGS.steps.items():
            if marker != "*" and marker in text:
                return marker, steps
    return "", []


def user_texts(api: str, body: dict[str, Any]) -> list[str]:
    """The texts of the request's user messages, the last first."""
    items = body.get("input") if api == "responses" else body.get("messages")
    if api == "gemini":
        items = body.get("contents")
    return [json.dumps(i.get("content", i.get("parts"))) for i in reversed(items or [])
            if isinstance(i, dict) and i.get("role") == "user"]


def filled(call: Any, api: str, body: dict[str, Any]) -> Any:
    """The call with `$PATH_IN_PROMPT` replaced by the path of a file (a name with an extension)
    that the latest user message naming one names (a runtime may add reminders of its own after
    the prompt)."""
    found = (re.search(r"(/[A-Za-z0-9._-]+(?:/[A-Za-z0-9._-]+)*\.[A-Za-z0-9]+)\b", text)
             for text in user_texts(api, body))
    path = next((p for p in found if p), None)

    def fill(value: Any) -> Any:
        if value == "$PATH_IN_PROMPT":
            return path.group(1) if path else ""
        if isinstance(value, dict):
            return {k: fill(v) for k, v in value.items()}
        if isinstance(value, list):
            return [fill(v) for v in value]
        return value
    return fill(call)


def offered_tools(api: str, body: dict[str, Any]) -> list[str]:
    names: list[str] = []
    for tool in body.get("tools") or []:
        if not isinstance(tool, dict):
            continue
        if api == "chat":
            name = (tool.get("function") or {}).get("name")
            if name:
                names.append(name)
        elif api == "gemini":
            # Gemini: a tool is a list of function declarations.
            names += [d["name"] for d in tool.get("functionDeclarations") or []
                      if isinstance(d, dict) and d.get("name")]
        elif api == "responses" and tool.get("type") == "namespace":
            # Codex: a namespace `mcp__<server>` of functions named by their raw tool names; the
            # model-visible form is namespace + `__` + function.
            for inner in tool.get("tools") or []:
                if isinstance(inner, dict) and inner.get("name"):
                    names.append(f"{tool.get('name')}__{inner['name']}")
        elif tool.get("name"):
            names.append(tool["name"])
    return names


def json_example(schema: Any) -> Any:
    """The least value a JSON schema (OpenAPI-style, as Gemini sends them) accepts."""
    if not isinstance(schema, dict):
        return None
    if schema.get("enum"):
        return schema["enum"][0]
    kind = str(schema.get("type") or "").lower()
    if kind == "object":
        properties = schema.get("properties") or {}
        return {k: json_example(properties.get(k)) for k in schema.get("required") or []}
    return {"array": [], "string": "done", "integer": 1, "number": 1, "boolean": False}.get(kind)


def calls_of(step: Any) -> list[dict[str, Any]]:
    """A step's calls: one call, or several made at once."""
    if step is None:
        return []
    return step if isinstance(step, list) else [step]


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
        marker, steps = conversation(api, body)
        step = steps_taken(api, body, steps)
        call = steps[step] if ours and step < len(steps) else None
        if ours and marker == "" and isinstance(ARGS.steps, dict) and ARGS.steps.get("*"):
            # No marker yet: the turn's prompt names where it is.
            marker, step, call = "*", 0, ARGS.steps["*"][0]
        call = filled(call, api, body)
        # The input a request reports: its size, so each request's usage differs and a reader's
        # totals can be checked against what was sent.
        self.tokens_in = len(raw) // 4 + 1
        # A part of it read from the provider's cache, as a real provider reports it, for the
        # APIs whose runtimes the tests compare with ccusage; each response has an id of its own.
        self.cached = self.tokens_in // 2
        with LOCK:
            ARGS.answered += 1
            self.response_id = ARGS.answered
        entry = {"path": self.path, "tools": ours, "all_tools": names,
                 "input_tokens": self.tokens_in,
                 "answer": f"call {step}" if call else "text",
                 "stream": bool(body.get("stream")) or ":streamGenerateContent" in self.path}
        if ARGS.debug:
            entry["raw_tools"] = [{k: v for k, v in t.items() if k in ("type", "name")}
                                  | ({"inner": [i.get("name") for i in t.get("tools") or []]}
                                     if isinstance(t, dict) and t.get("tools") else {})
                                  | ({"inner": [d.get("name") for d in t["functionDeclarations"]]}
                                     if isinstance(t, dict) and t.get("functionDeclarations")
                                     else {})
                                  for t in body.get("tools") or [] if isinstance(t, dict)]
        if ARGS.dump:
            with LOCK:
                ARGS.dumped += 1
                name = f"{ARGS.dumped:03d}.json"
            with open(f"{ARGS.dump}/{name}", "wb") as f:
                f.write(raw)
            entry["body"] = name
        if marker is not None:
            entry["conversation"] = marker
        log(entry)
        if "count_tokens" in self.path:
            self.reply_json(200, {"input_tokens": 10})
            return
        if ":countTokens" in self.path:
            self.reply_json(200, {"totalTokens": 10})
            return
        if call and step == 0 and ARGS.hold_call:
            # Past the runtime's first credential generation: the call must use a fresh one.
            time.sleep(ARGS.hold_call)
        if api == "anthropic" and self.path.startswith("/v1/messages"):
            self.answer_anthropic(call, body, step)
        elif api == "responses" and self.path.startswith("/v1/responses"):
            self.answer_responses(call, body, step)
        elif api == "chat" and self.path.startswith("/v1/chat/completions"):
            self.answer_chat(call, body, step)
        elif api == "gemini" and self.path.startswith("/v1beta/models/"):
            self.answer_gemini(call, body)
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


    # --- Anthropic Messages ---
    def answer_anthropic(self, call: Any, body: dict[str, Any], step: int) -> None:
        model = body.get("model", "scripted")
        # Uncached input, a cache write of 7 and the cache read: `tokens_in` in all.
        usage = {"input_tokens": self.tokens_in - self.cached - 7, "output_tokens": 5,
                 "cache_creation_input_tokens": 7, "cache_read_input_tokens": self.cached,
                 "cache_creation": {"ephemeral_5m_input_tokens": 7, "ephemeral_1h_input_tokens": 0}}
        start = {"type": "message_start", "message": {
            "id": f"msg_scripted_{self.response_id}", "type": "message", "role": "assistant", "model": model,
            "content": [], "stop_reason": None, "stop_sequence": None, "usage": usage}}
        calls = calls_of(call)
        if calls:
            blocks = [({"type": "tool_use", "id": f"toolu_scripted_{step}_{i}", "name": c["name"],
                        "input": {}},
                       {"type": "input_json_delta", "partial_json": json.dumps(c["args"])})
                      for i, c in enumerate(calls)]
            stop = "tool_use"
        else:
            blocks = [({"type": "text", "text": ""}, {"type": "text_delta", "text": "done"})]
            stop = "end_turn"
        if not body.get("stream"):
            content = ([{"type": "tool_use", "id": f"toolu_scripted_{step}_{i}", "name": c["name"],
                         "input": c["args"]} for i, c in enumerate(calls)] if calls
                       else [{"type": "text", "text": "done"}])
            self.reply_json(200, {**start["message"], "content": content, "stop_reason": stop})
            return
        events: list[tuple[str | None, Any]] = [("message_start", start)]
        for index, (block, delta) in enumerate(blocks):
            events += [
                ("content_block_start", {"type": "content_block_start", "index": index,
                                         "content_block": block}),
                ("content_block_delta", {"type": "content_block_delta", "index": index,
                                         "delta": delta}),
                ("content_block_stop", {"type": "content_block_stop", "index": index}),
            ]
        events += [
            ("message_delta", {"type": "message_delta",
                               "delta": {"stop_reason": stop, "stop_sequence": None},
                               "usage": {"output_tokens": 5}}),
            ("message_stop", {"type": "message_stop"}),
        ]
        self.sse(events)

    # --- OpenAI Responses ---
    def answer_responses(self, call: Any, body: dict[str, Any], step: int) -> None:
        model = body.get("model", "scripted")
        if call:
            items = []
            for i, c in enumerate(calls_of(call)):
                item = {"type": "function_call", "id": f"fc_scripted_{step}_{i}",
                        "call_id": f"call_scripted_{step}_{i}", "name": c["name"],
                        "arguments": json.dumps(c["args"]), "status": "completed"}
                if c.get("namespace"):
                    item["namespace"] = c["namespace"]
                items.append(item)
        else:
            items = [{"type": "message", "id": "msg_scripted_1", "role": "assistant",
                      "status": "completed",
                      "content": [{"type": "output_text", "text": "done", "annotations": []}]}]
        response = {"id": f"resp_scripted_{self.response_id}", "object": "response", "model": model,
                    "status": "in_progress", "output": []}
        done = {**response, "status": "completed", "output": items,
                "usage": {"input_tokens": self.tokens_in, "output_tokens": 5,
                          "total_tokens": self.tokens_in + 5,
                          "input_tokens_details": {"cached_tokens": self.cached},
                          "output_tokens_details": {"reasoning_tokens": 0}}}
        events = [("response.created", {"type": "response.created", "response": response})]
        for i, item in enumerate(items):
            events += [
                ("response.output_item.added", {"type": "response.output_item.added",
                                                "output_index": i,
                                                "item": {**item, "status": "in_progress"}}),
                ("response.output_item.done", {"type": "response.output_item.done",
                                               "output_index": i, "item": item}),
            ]
        events.append(("response.completed", {"type": "response.completed", "response": done}))
        self.sse(events)

    # --- OpenAI chat completions ---
    def answer_chat(self, call: Any, body: dict[str, Any], step: int) -> None:
        model = body.get("model", "scripted")
        base = {"id": "chatcmpl-scripted", "object": "chat.completion.chunk", "created": 0,
                "model": model}
        if call:
            first = {"role": "assistant", "content": None, "tool_calls": [{
                "index": i, "id": f"call_scripted_{step}_{i}", "type": "function",
                "function": {"name": c["name"], "arguments": json.dumps(c["args"])}}
                for i, c in enumerate(calls_of(call))]}
            finish = "tool_calls"
        else:
            first = {"role": "assistant", "content": "done"}
            finish = "stop"
        self.sse([
            (None, {**base, "choices": [{"index": 0, "delta": first, "finish_reason": None}]}),
            (None, {**base, "choices": [{"index": 0, "delta": {}, "finish_reason": finish}],
                    "usage": {"prompt_tokens": self.tokens_in, "completion_tokens": 5,
                              "total_tokens": self.tokens_in + 5}}),
            (None, "[DONE]"),
        ])

    # --- Gemini generateContent ---
    def answer_gemini(self, call: Any, body: dict[str, Any]) -> None:
        model = self.path.split("?")[0].rsplit("/", 1)[-1].split(":")[0] or "scripted"
        calls = calls_of(call)
        config = body.get("generationConfig") or {}
        text = (json.dumps(json_example(config.get("responseJsonSchema")
                                        or config.get("responseSchema")))
                if config.get("responseMimeType") == "application/json" else "done")
        parts = ([{"functionCall": {"name": c["name"], "args": c["args"]}} for c in calls]
                 if calls else [{"text": text}])
        response = {"candidates": [{"content": {"role": "model", "parts": parts},
                                    "finishReason": "STOP", "index": 0}],
                    "usageMetadata": {"promptTokenCount": self.tokens_in,
                                      "candidatesTokenCount": 5,
                                      "totalTokenCount": self.tokens_in + 5},
                    "modelVersion": model}
        if ":streamGenerateContent" in self.path:
            self.sse([(None, response)])
        else:
            self.reply_json(200, response)


def main() -> int:
    global ARGS
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--api", required=True, choices=["anthropic", "responses", "chat", "gemini"])
    ap.add_argument("--tool-prefix", required=True)
    ap.add_argument("--script", required=True,
                    help="a JSON list of the calls to make, in order, or an object of such lists by marker")
    ap.add_argument("--log", required=True)
    ap.add_argument("--hold-call", type=float, default=0.0,
                    help="seconds to wait before answering with the tool call")
    ap.add_argument("--debug", action="store_true", help="also log every offered tool's type and name")
    ap.add_argument("--dump", help="a directory to write every request body into (NNN.json, named in the log)")
    ARGS = ap.parse_args()
    ARGS.dumped = 0
    ARGS.answered = 0
    with open(ARGS.script, encoding="utf-8") as f:
        ARGS.steps = json.load(f)
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    print(f"listening on {server.server_address[1]}", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main())

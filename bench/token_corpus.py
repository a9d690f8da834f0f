#!/usr/bin/env python3
"""Writes a synthetic set of Claude Code and Codex session records for bench/token_analyze.sh.

The shapes are the ones Claude Code 2.1.332 and Codex 0.171.0 write (the runtime tests run both):
Claude Code's one line per content block with the request's whole usage repeated on each, its
`requestRef`; Codex's `token_usage_record` and `token_count` for each response. Each session mixes
AgentTeam calls (MCP tools and `agentteam exec` through the shell tool) with other tools whose
results are large (file reads), as real sessions do, so a reader that parses every line pays for
it. Deterministic for a given seed.

    bench/token_corpus.py OUT_HOME [--bytes N]   (default 1 GiB, half Claude Code, half Codex)
"""
import argparse
import json
import os
import random

WORDS = ("the task is done review channel team memory search result file line agent "
         "workspace message thread project schedule approval runtime bridge").split()


def text(rng: random.Random, size: int) -> str:
    out, n = [], 0
    while n < size:
        w = rng.choice(WORDS)
        out.append(w)
        n += len(w) + 1
    return " ".join(out)


def agentteam_result(rng: random.Random) -> str:
    return json.dumps({"data": {"task": {"id": f"task_{rng.getrandbits(64):016x}",
                                         "title": text(rng, 40), "body": text(rng, rng.randint(100, 1500))}},
                       "ok": True})


def claude_session(rng: random.Random, path: str, budget: int, session: str) -> int:
    written = 0
    cwd = "/home/dev/project"
    context = 9000
    with open(path, "w") as f:
        def line(obj: dict) -> None:
            nonlocal written
            data = json.dumps(obj, separators=(",", ":")) + "\n"
            f.write(data)
            written += len(data)
        line({"type": "user", "sessionId": session, "cwd": cwd, "timestamp": "2026-11-30T10:00:00.000Z",
              "message": {"role": "user", "content": text(rng, 200)}, "uuid": "u0", "isSidechain": False})
        step = 0
        while written < budget:
            step += 1
            ref = f"req_{session[:8]}_{step}"
            kind = rng.random()
            if kind < 0.25:
                call = {"type": "tool_use", "id": f"toolu_{step}", "name": "mcp__agentteam__message_history_read",
                        "input": {"target": "channel:chn_1"}}
                result = agentteam_result(rng)
            elif kind < 0.45:
                call = {"type": "tool_use", "id": f"toolu_{step}", "name": "Bash",
                        "input": {"command": "agentteam exec task create '{\"title\":\"x\"}'"}}
                result = agentteam_result(rng)
            else:
                call = {"type": "tool_use", "id": f"toolu_{step}", "name": "Read",
                        "input": {"file_path": f"/home/dev/project/src/{step}.rs"}}
                result = text(rng, rng.randint(2000, 40000))
            usage = {"input_tokens": rng.randint(1, 50), "cache_creation_input_tokens": rng.randint(0, 3000),
                     "cache_read_input_tokens": context, "output_tokens": rng.randint(20, 900),
                     "service_tier": "standard"}
            ts = f"2026-11-30T{10 + step // 3600 % 10:02d}:{step // 60 % 60:02d}:{step % 60:02d}.000Z"
            base = {"type": "assistant", "sessionId": session, "cwd": cwd, "timestamp": ts, "requestRef": ref,
                    "isSidechain": False}
            # A thinking/text block and the tool call: two lines of one response, the usage on each.
            line({**base, "uuid": f"a{step}t", "message": {"id": f"msg_{session[:8]}_{step}", "model": "claude-sonnet-4-5",
                  "role": "assistant", "content": [{"type": "text", "text": text(rng, rng.randint(50, 600))}],
                  "usage": {**usage, "output_tokens": 1}}})
            line({**base, "uuid": f"a{step}", "message": {"id": f"msg_{session[:8]}_{step}", "model": "claude-sonnet-4-5",
                  "role": "assistant", "content": [call], "usage": usage}})
            line({"type": "user", "sessionId": session, "cwd": cwd, "timestamp": ts, "uuid": f"r{step}",
                  "isSidechain": False, "message": {"role": "user", "content": [
                      {"type": "tool_result", "tool_use_id": call["id"], "content": result}]},
                  "toolUseResult": {"stdout": result[:200]}})
            context += len(result) // 4
            if context > 150000:
                line({"type": "system", "subtype": "compact_boundary", "sessionId": session, "timestamp": ts,
                      "compactMetadata": {"trigger": "auto", "preTokens": context}})
                context = 12000
    return written


def codex_session(rng: random.Random, path: str, budget: int, session: str) -> int:
    written = 0
    with open(path, "w") as f:
        def line(kind: str, payload: dict, ts: str = "2026-11-30T10:00:00.000Z") -> None:
            nonlocal written
            data = json.dumps({"timestamp": ts, "type": kind, "payload": payload}, separators=(",", ":")) + "\n"
            f.write(data)
            written += len(data)
        line("session_meta", {"id": session, "cwd": "/home/dev/project", "base_instructions": {"text": text(rng, 20000)}})
        line("turn_context", {"model": "gpt-5.1-codex", "cwd": "/home/dev/project"})
        total = {"input_tokens": 0, "cached_input_tokens": 0, "output_tokens": 0, "reasoning_output_tokens": 0,
                 "total_tokens": 0}
        step = 0
        context = 12000
        while written < budget:
            step += 1
            ts = f"2026-11-30T{10 + step // 3600 % 10:02d}:{step // 60 % 60:02d}:{step % 60:02d}.000Z"
            kind = rng.random()
            cid = f"call_{step}"
            if kind < 0.25:
                line("response_item", {"type": "function_call", "name": "message_history_read",
                                       "namespace": "mcp__agentteam", "arguments": "{\"target\":\"channel:chn_1\"}",
                                       "call_id": cid}, ts)
                output = "Wall time: 0.02 seconds\nOutput:\n" + agentteam_result(rng)
            elif kind < 0.45:
                line("response_item", {"type": "function_call", "name": "exec_command",
                                       "arguments": json.dumps({"cmd": "agentteam exec task get '{\"taskId\":\"t\"}'"}),
                                       "call_id": cid}, ts)
                output = "Process exited with code 0\nOutput:\n" + agentteam_result(rng)
            else:
                line("response_item", {"type": "function_call", "name": "exec_command",
                                       "arguments": json.dumps({"cmd": f"cat src/{step}.rs"}), "call_id": cid}, ts)
                output = "Process exited with code 0\nOutput:\n" + text(rng, rng.randint(2000, 40000))
            usage = {"input_tokens": context, "cached_input_tokens": context - rng.randint(0, 3000),
                     "output_tokens": rng.randint(20, 900), "reasoning_output_tokens": 0}
            usage["total_tokens"] = usage["input_tokens"] + usage["output_tokens"]
            for k in total:
                total[k] += usage[k]
            line("token_usage_record", {"thread_id": session, "usage": usage}, ts)
            line("response_item", {"type": "function_call_output", "call_id": cid, "output": output}, ts)
            line("event_msg", {"type": "token_count", "info": {"total_token_usage": dict(total),
                                                               "last_token_usage": usage,
                                                               "model_context_window": 258400}}, ts)
            context += len(output) // 4
            if context > 200000:
                line("compacted", {"message": text(rng, 3000)}, ts)
                context = 15000
    return written


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("home")
    parser.add_argument("--bytes", type=int, default=1 << 30)
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args()
    rng = random.Random(args.seed)
    half = args.bytes // 2
    claude_dir = os.path.join(args.home, ".claude/projects/-home-dev-project")
    codex_dir = os.path.join(args.home, ".codex/sessions/2026/11/30")
    os.makedirs(claude_dir, exist_ok=True)
    os.makedirs(codex_dir, exist_ok=True)
    done, n = 0, 0
    while done < half:
        n += 1
        session = f"{rng.getrandbits(128):032x}"
        session = f"{session[:8]}-{session[8:12]}-{session[12:16]}-{session[16:20]}-{session[20:]}"
        done += claude_session(rng, os.path.join(claude_dir, f"{session}.jsonl"), min(rng.randint(2, 12) << 20, half - done), session)
    done, m = 0, 0
    while done < half:
        m += 1
        session = f"{rng.getrandbits(128):032x}"
        session = f"{session[:8]}-{session[8:12]}-{session[12:16]}-{session[16:20]}-{session[20:]}"
        done += codex_session(rng, os.path.join(codex_dir, f"rollout-2026-11-30T10-00-00-{session}.jsonl"),
                              min(rng.randint(2, 12) << 20, half - done), session)
    print(f"{n} Claude Code sessions, {m} Codex sessions, {args.bytes} bytes", flush=True)


if __name__ == "__main__":
    main()

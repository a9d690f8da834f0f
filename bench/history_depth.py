#!/usr/bin/env python3
"""A person's history page against an agent's, with scroll depth.

Starts the release `agentteam server` on a fresh SQLite file (or, with `--backend postgres`, on a
database of a throwaway PostgreSQL cluster that scripts/pg-cluster starts and stops), sets up a
workspace with a person and an agent in one channel through the operator API, bulk-loads N
messages into it straight into the database (the API would spend minutes on fsyncs), then times,
alternately over keep-alive HTTP, the same page of 20 messages read four ways at the top and at
each depth: the person's `history_read` (human API) and the agent's `message_history_read`
(runtime tool route), each at the newest page and after a cursor that many messages deep.
Targets: the person's page within 2x the agent's of the same page; flat with depth (deep / top
near 1).

Usage: bench/history_depth.py [--backend sqlite|postgres] [--messages 100000] [--samples 300]
                              [--binary target/release/agentteam]
"""

import argparse
import http.client
import json
import os
import random
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from project_list_depth import REPO, post, start_server  # noqa: E402


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--messages", type=int, default=100_000)
    parser.add_argument("--samples", type=int, default=300)
    parser.add_argument("--depth", type=int, default=50_000)
    parser.add_argument("--binary", default="target/release/agentteam")
    parser.add_argument("--backend", choices=["sqlite", "postgres"], default="sqlite")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory() as directory:
        cluster = None
        if args.backend == "postgres":
            cluster = tempfile.mkdtemp(prefix="agentteam-pg.")
            admin_url = subprocess.run([f"{REPO}/scripts/pg-cluster", "start", cluster], check=True,
                                       stdout=subprocess.PIPE, text=True).stdout.strip()
            database = admin_url.rsplit("/", 1)[0] + "/bench"
            subprocess.run(["psql", "-X", "-q", admin_url, "-c", "CREATE DATABASE bench"], check=True)
        else:
            database = f"sqlite://{directory}/server.db"
        proc, host, port, operator = start_server(args.binary, directory, database)
        try:
            conn = http.client.HTTPConnection(host, port)
            ws = post(conn, "/admin/workspaces", operator, {"name": "bench"})["workspaceId"]
            human = post(conn, f"/admin/workspaces/{ws}/humans", operator, {"handle": "ada", "displayName": "Ada"})["humanId"]
            agent = post(conn, f"/admin/workspaces/{ws}/agents", operator,
                         {"ownerHumanId": human, "handle": "bench", "displayName": "Bench"})["agentId"]
            device = post(conn, f"/admin/workspaces/{ws}/devices", operator, {"humanId": human})["credential"]
            channel = post(conn, f"/admin/workspaces/{ws}/channels", operator,
                           {"name": "general", "members": [human, agent]})["channelId"]

            base = 1_800_000_000_000
            alphabet = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"
            rng = random.Random(1)
            rows = []
            for n in range(args.messages):
                suffix = "".join(rng.choice(alphabet) for _ in range(26))
                author = agent if n % 3 else human
                rows.append((f"msg_{suffix}", ws, channel, author, f"message {n} " + "x" * rng.randrange(40, 200), base + n * 1000))
            if cluster:
                csv = "".join(",".join(map(str, row)) + "\n" for row in rows)
                subprocess.run(
                    ["psql", "-X", "-q", database, "-c",
                     "COPY messages (id, workspace_id, channel_id, author_id, content, created_at) FROM STDIN WITH (FORMAT csv)",
                     "-c", "ANALYZE"],
                    input=csv, text=True, check=True)
            else:
                db = sqlite3.connect(f"{directory}/server.db", timeout=30)
                with db:
                    db.executemany(
                        "INSERT INTO messages (id, workspace_id, channel_id, thread_id, author_id, content, created_at) "
                        "VALUES (?, ?, ?, NULL, ?, ?, ?)", rows)
                db.execute("ANALYZE")
                db.close()

            target = f"channel:{channel}"
            person = f"/human/servers/{ws}/actions/history_read"
            tool = f"/runtime/servers/{ws}/agents/{agent}/tools/message_history_read"
            # Each reader's own cursor `depth` messages deep (cursors are bound to their reader).
            deep = {}
            for name, path in (("person", person), ("agent", tool)):
                cursor = None
                for _ in range(args.depth // 100):
                    body = {"target": target, "limit": 100}
                    if cursor:
                        body["cursor"] = cursor
                    cursor = post(conn, path, device, body)["nextCursor"]
                deep[name] = cursor
            cases = {
                "person top": (person, {"target": target}),
                "agent top": (tool, {"target": target}),
                f"person at {args.depth}": (person, {"target": target, "cursor": deep["person"]}),
                f"agent at {args.depth}": (tool, {"target": target, "cursor": deep["agent"]}),
            }
            pages = {name: post(conn, path, device, body)["messages"] for name, (path, body) in cases.items()}
            assert pages["person top"] == pages["agent top"], "the two readers see one page"
            assert pages[f"person at {args.depth}"] == pages[f"agent at {args.depth}"]
            assert len(pages["person top"]) == 20
            timings = {name: [] for name in cases}
            for _ in range(20):  # warm-up
                for path, body in cases.values():
                    post(conn, path, device, body)
            for _ in range(args.samples):
                for name, (path, body) in cases.items():
                    start = time.perf_counter()
                    post(conn, path, device, body)
                    timings[name].append((time.perf_counter() - start) * 1000)
            medians = {name: statistics.median(values) for name, values in timings.items()}
            print(f"backend={args.backend} messages={args.messages} page=20 samples={args.samples}")
            for name in timings:
                p95 = sorted(timings[name])[int(len(timings[name]) * 0.95)]
                print(f"{name}: median {medians[name]:.3f} ms, p95 {p95:.3f} ms")
            for where in ("top", f"at {args.depth}"):
                ratio = medians[f"person {where}"] / medians[f"agent {where}"]
                print(f"person / agent {where}: {ratio:.2f} (target <= 2: {'met' if ratio <= 2 else 'NOT met'})")
            depth = medians[f"person at {args.depth}"] / medians["person top"]
            print(f"person at {args.depth} / person top: {depth:.2f} (flat with depth)")
        finally:
            proc.terminate()
            proc.wait()
            if cluster:
                subprocess.run([f"{REPO}/scripts/pg-cluster", "stop", cluster], check=True)


if __name__ == "__main__":
    main()

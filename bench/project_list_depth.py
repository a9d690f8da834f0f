#!/usr/bin/env python3
"""Keyset depth benchmark: `project list` page latency at page 1 vs page 500.

Starts the release `agentteam server` on a fresh SQLite file (or, with `--backend postgres`, on a
database of a throwaway PostgreSQL cluster that scripts/pg-cluster starts and stops), sets up a
workspace through the operator API, bulk-loads N projects straight into the database (the API
would spend minutes on fsyncs), walks to page 500 with limit 100, then times the same page-1 and
page-500 requests alternately over keep-alive HTTP. Keyset pagination must not degrade with
depth, so the ratio of medians should stay near 1 (target <= 1.5).

Usage: bench/project_list_depth.py [--backend sqlite|postgres] [--projects 100000] [--samples 300]
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

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def start_server(binary, directory, database):
    proc = subprocess.Popen(
        [binary, "server", "--listen", "127.0.0.1:0", "--database", database,
         "--operator-token-file", f"{directory}/operator.token"],
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    line = proc.stdout.readline().strip()
    if not line.startswith("listening on http://"):
        proc.kill()
        sys.exit(f"server did not start: {line!r}")
    host, port = line.removeprefix("listening on http://").rsplit(":", 1)
    token = open(f"{directory}/operator.token").read()
    return proc, host, int(port), token


def post(conn, path, bearer, body):
    conn.request("POST", path, body=json.dumps(body),
                 headers={"Authorization": f"Bearer {bearer}", "Content-Type": "application/json"})
    response = conn.getresponse()
    data = json.loads(response.read())
    if response.status != 200:
        sys.exit(f"{path}: {response.status} {data}")
    return data["data"]


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--projects", type=int, default=100_000)
    parser.add_argument("--samples", type=int, default=300)
    parser.add_argument("--page", type=int, default=500)
    parser.add_argument("--limit", type=int, default=100)
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

            # Bulk load: ids sortable like the server's, many ties on updated_at.
            base = 1_800_000_000_000
            alphabet = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"
            rng = random.Random(1)
            rows = []
            for n in range(args.projects):
                updated = base + rng.randrange(args.projects // 4)
                suffix = "".join(rng.choice(alphabet) for _ in range(26))
                rows.append((f"prj_{suffix}", ws, f"project {n}", "active", agent, updated, updated))
            if cluster:
                csv = "".join(",".join(map(str, row[:5] + (1,) + row[5:])) + "\n" for row in rows)
                subprocess.run(
                    ["psql", "-X", "-q", database, "-c",
                     "COPY projects (id, workspace_id, name, status, created_by_agent_id, revision, created_at, updated_at) "
                     "FROM STDIN WITH (FORMAT csv)", "-c", "ANALYZE"],
                    input=csv, text=True, check=True)
            else:
                db = sqlite3.connect(f"{directory}/server.db", timeout=30)
                with db:
                    db.executemany(
                        "INSERT INTO projects (id, workspace_id, name, description, status, created_by_agent_id, revision, created_at, updated_at) "
                        "VALUES (?, ?, ?, NULL, ?, ?, 1, ?, ?)", rows)
                db.execute("ANALYZE")
                db.close()

            path = f"/runtime/servers/{ws}/agents/{agent}/actions/project/list"
            cursor = None
            for _ in range(args.page - 1):
                body = {"limit": args.limit}
                if cursor:
                    body["cursor"] = cursor
                cursor = post(conn, path, device, body)["nextCursor"]
            deep = {"limit": args.limit, "cursor": cursor}
            first = {"limit": args.limit}
            check = post(conn, path, device, deep)
            assert len(check["projects"]) == args.limit

            timings = {"page 1": [], f"page {args.page}": []}
            for _ in range(20):  # warm-up
                post(conn, path, device, first)
                post(conn, path, device, deep)
            for _ in range(args.samples):
                for name, body in (("page 1", first), (f"page {args.page}", deep)):
                    start = time.perf_counter()
                    post(conn, path, device, body)
                    timings[name].append((time.perf_counter() - start) * 1000)
            medians = {name: statistics.median(values) for name, values in timings.items()}
            p95 = {name: sorted(values)[int(len(values) * 0.95)] for name, values in timings.items()}
            ratio = medians[f"page {args.page}"] / medians["page 1"]
            print(f"backend={args.backend} projects={args.projects} limit={args.limit} samples={args.samples}")
            for name in timings:
                print(f"{name}: median {medians[name]:.3f} ms, p95 {p95[name]:.3f} ms")
            print(f"ratio page {args.page} / page 1 (medians): {ratio:.3f}")
        finally:
            proc.terminate()
            proc.wait()
            if cluster:
                subprocess.run([f"{REPO}/scripts/pg-cluster", "stop", cluster], check=True)


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""`agent list` depth benchmark: page latency at the first page vs the last, at the store's bound.

Starts the release daemon (embedded server) in a fresh state dir, registers a caller agent and a
runtime (`agentteam run`) whose Exec route the script uses, registers N-1 more agents on the
server through the operator API and writes their profiles in the store's documented layout,
reloads the store through `agentteam exec agent reload`'s route, walks to the last page of 20,
then times page-1 and last-page requests alternately over keep-alive HTTP. The profile store is an
ordered map read from the anchor, so the ratio of medians should stay near 1 (target <= 1.5).

Usage: bench/agent_list_depth.py [--profiles 10000] [--samples 300] [--binary target/release/agentteam]
"""

import argparse
import http.client
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time


def request(conn, method, path, bearer, body=None):
    conn.request(method, path, body=None if body is None else json.dumps(body),
                 headers={"Authorization": f"Bearer {bearer}", "Content-Type": "application/json"})
    response = conn.getresponse()
    data = json.loads(response.read())
    if response.status != 200:
        sys.exit(f"{path}: {response.status} {data}")
    return data["data"]


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--profiles", type=int, default=10_000)
    parser.add_argument("--samples", type=int, default=300)
    parser.add_argument("--limit", type=int, default=20)
    parser.add_argument("--binary", default="target/release/agentteam")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory() as directory:
        state = f"{directory}/state"
        daemon = subprocess.Popen([args.binary, "daemon", "--listen", "127.0.0.1:0", "--state-dir", state],
                                  stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        runtime = None
        try:
            line = daemon.stdout.readline().strip()
            if not line.startswith("listening on http://"):
                sys.exit(f"daemon did not start: {line!r}")
            subprocess.run([args.binary, "agent", "add", "caller", "--state-dir", state],
                           check=True, stdout=subprocess.DEVNULL)
            runtime = subprocess.Popen(
                [args.binary, "run", "--state-dir", state, "--agent", "caller", "--", "sh", "-c",
                 'echo "$AGENTTEAM_EXEC_BASE_URL"; echo "$AGENTTEAM_EXEC_TOKEN_FILE"; exec sleep 3600'],
                stdout=subprocess.PIPE, text=True)
            base = runtime.stdout.readline().strip()
            token_file = runtime.stdout.readline().strip()
            token = open(token_file).read().strip()
            host, rest = base.removeprefix("http://").split("/", 1)
            exec_path = "/" + rest

            identity = json.load(open(f"{state}/identity.json"))
            server = json.load(open(f"{state}/daemon.json"))["serverUrl"].removeprefix("http://")
            operator = open(f"{state}/operator.token").read().strip()
            ws, human = identity["workspaceId"], identity["humanId"]
            server_conn = http.client.HTTPConnection(*server.split(":"))
            started = time.perf_counter()
            for n in range(args.profiles - 1):
                handle = f"bulk{n:05}"
                agent = request(server_conn, "POST", f"/admin/workspaces/{ws}/agents", operator,
                                {"ownerHumanId": human, "handle": handle, "displayName": handle})["agentId"]
                profile_dir = f"{state}/agents/{agent}"
                os.makedirs(profile_dir, mode=0o700)
                with open(f"{profile_dir}/secrets.json", "w") as f:
                    f.write("{}\n")
                with open(f"{profile_dir}/profile.json", "w") as f:
                    json.dump({"agentId": agent, "handle": handle, "runtimeFamily": "generic", "provider": None,
                               "model": None, "baseUrl": None, "knowledgeSourceIds": [], "allowedPaths": [],
                               "displayName": handle, "description": None, "revision": 1,
                               "createdAtMs": 1_800_000_000_000, "updatedAtMs": 1_800_000_000_000}, f)
            print(f"seeded {args.profiles - 1} agents in {time.perf_counter() - started:.1f} s", file=sys.stderr)

            conn = http.client.HTTPConnection(*host.split(":"))
            loaded = request(conn, "POST", f"{exec_path}/agent/reload", token, {})
            assert loaded["loaded"] == args.profiles, loaded
            cursor, pages, last = None, 0, None
            while True:
                body = {"limit": args.limit}
                if cursor:
                    body["cursor"] = cursor
                page = request(conn, "POST", f"{exec_path}/agent/list", token, body)
                pages += 1
                if "nextCursor" not in page:
                    break
                last, cursor = cursor, page["nextCursor"]
            deep = {"limit": args.limit, "cursor": cursor}
            first = {"limit": args.limit}

            timings = {"page 1": [], f"page {pages}": []}
            for _ in range(20):  # warm-up
                request(conn, "POST", f"{exec_path}/agent/list", token, first)
                request(conn, "POST", f"{exec_path}/agent/list", token, deep)
            for _ in range(args.samples):
                for name, body in (("page 1", first), (f"page {pages}", deep)):
                    start = time.perf_counter()
                    request(conn, "POST", f"{exec_path}/agent/list", token, body)
                    timings[name].append((time.perf_counter() - start) * 1000)
            medians = {name: statistics.median(values) for name, values in timings.items()}
            p95 = {name: sorted(values)[int(len(values) * 0.95)] for name, values in timings.items()}
            ratio = medians[f"page {pages}"] / medians["page 1"]
            print(f"profiles={args.profiles} limit={args.limit} pages={pages} samples={args.samples}")
            for name in timings:
                print(f"{name}: median {medians[name]:.3f} ms, p95 {p95[name]:.3f} ms")
            print(f"ratio last page / page 1 (medians): {ratio:.3f}")
        finally:
            if runtime:
                runtime.terminate()
                runtime.wait()
            daemon.terminate()
            daemon.wait()


if __name__ == "__main__":
    main()

#!/usr/bin/env bash
# Exec transport benchmark.
#
# 1. Wall time of `agentteam exec task get` (process start, token-file read, local validation,
#    one POST, print) against the same request sent by `curl`, in the same run (hyperfine).
#    Target: ratio <= 1.3.
# 2. Daemon throughput for `task get` (the whole Exec path with the embedded server in-process)
#    against the rmcp 3.11 echo peer's trivial `tools/call` (bench/mcp-peer) in the same run: each
#    server alone on core 0 (ours is stopped before the peer starts), wrk at 16 connections on
#    core 1, each load bracketed by a full check of its answer; a load with a non-2xx answer, a
#    socket error, a timeout, a lost audit record or an answer the audit trail does not account
#    for is invalid and fails the script.
#    Target: ours >= 0.5 x the peer.
# 3. Daemon throughput for `task create` with a `requestId` per request (no peer: a write's cost
#    is compared with another commit's by bench/ab.sh).
#
# Usage: bench/exec.sh            (builds the release binary first; installs hyperfine and wrk
#                                  from Debian's packages when missing)
#        BIN=PATH bench/exec.sh  measures that agentteam binary, building nothing of ours
#        COMPETE=1 bench/exec.sh  runs the loads (ours and the peer's) beside a busy loop on core 0,
#                                  with each load's audit figures (bench/mcp.sh says more)
#        BACKEND=postgres bench/exec.sh
#                                  ours against `agentteam server` on a throwaway PostgreSQL
#                                  cluster, both on core 0
#        PERF=FILE bench/exec.sh  also records `perf record --call-graph dwarf` of our daemon for
#                                  8 s of the task get load into FILE
set -euo pipefail
cd "$(dirname "$0")/.."
for tool in hyperfine wrk curl; do
    command -v "$tool" >/dev/null || { apt-get update -qq && apt-get install -y -qq "$tool"; }
done
# BIN=PATH measures that binary instead of this checkout's (bench/ab.sh alternates two).
bin="${BIN:-}"
if [ -z "$bin" ]; then
    cargo build --release --quiet
    bin="$PWD/target/release/agentteam"
fi
work="$(mktemp -d)"
daemon_pid="" runtime_pid="" peer_pid=""
cleanup() {
    # shellcheck disable=SC2086 # empty ids drop out
    kill $peer_pid $runtime_pid $daemon_pid $compete_pid 2>/dev/null || true
    wait 2>/dev/null || true
    backend_stop
    rm -rf "$work"
}
trap cleanup EXIT
# shellcheck source=bench/lib/mcp_load.sh
. bench/lib/mcp_load.sh
# shellcheck source=bench/lib/daemon.sh
. bench/lib/daemon.sh
peer_build

backend_start
daemon_start taskset -c 0 -- "${server_flags[@]}"
"$bin" agent add bench --state-dir "$work/state" > /dev/null
# A runtime that publishes its variables and stays up; the benchmark acts as that runtime.
"$bin" run --state-dir "$work/state" --agent bench -- sh -c 'echo "$AGENTTEAM_EXEC_BASE_URL"; echo "$AGENTTEAM_EXEC_TOKEN_FILE"; exec sleep 3600' > "$work/runtime.out" &
runtime_pid=$!
runtime_published "$work/runtime.out" 2 "$runtime_pid"
export AGENTTEAM_EXEC_BASE_URL="$(sed -n 1p "$work/runtime.out")"
export AGENTTEAM_EXEC_TOKEN_FILE="$(sed -n 2p "$work/runtime.out")"
channel="$(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['channelId'])" "$work/state/identity.json")"
task="$("$bin" exec task create "{\"location\":{\"kind\":\"channel\",\"channelId\":\"$channel\"},\"title\":\"bench\"}" \
    | python3 -c 'import json,sys; print(json.load(sys.stdin)["data"]["task"]["id"])')"
body="{\"taskId\":\"$task\"}"
url="$AGENTTEAM_EXEC_BASE_URL/task/get"

# curl gets its headers from a file prepared in advance (no extra process to read the token):
# the strictest peer, favouring curl.
printf 'Authorization: Bearer %s\nContent-Type: application/json\n' "$(cat "$AGENTTEAM_EXEC_TOKEN_FILE")" > "$work/headers"
echo "## agentteam exec vs curl: task get"
hyperfine -N --warmup 20 --runs 300 --export-json "$work/hyperfine.json" \
    -n "agentteam exec task get" "$bin exec task get '$body'" \
    -n "curl" "curl -sf -H @$work/headers -d '$body' $url"
python3 - "$work/hyperfine.json" <<'PY'
import json, sys
results = {r["command"]: r for r in json.load(open(sys.argv[1]))["results"]}
ours, peer = results["agentteam exec task get"], results["curl"]
print(f"median: agentteam exec {ours['median']*1000:.2f} ms, curl {peer['median']*1000:.2f} ms, ratio {ours['median']/peer['median']:.3f}")
PY

# task_get_check: one `task get` with curl must answer 200 with the task.
task_get_check() {
    curl -sS -H @"$work/headers" -d "$body" -o "$work/task.json" -w '%{http_code}' "$url" > "$work/task.status"
    python3 - "$work/task.status" "$work/task.json" "$task" <<'PY'
import json, sys
status, body, task = open(sys.argv[1]).read(), open(sys.argv[2]).read(), sys.argv[3]
envelope = json.loads(body)
if status != "200" or envelope.get("ok") is not True or envelope["data"]["task"]["id"] != task:
    sys.exit(f"task get: HTTP {status}: {body[:600]}")
print(f"ok: task get: {len(body)} bytes")
PY
}

echo "## daemon throughput: task get, 16 connections, 10 s (daemon on core 0, wrk on core 1)"
cat > "$work/post.lua" <<LUA
wrk.method = "POST"
wrk.body = '$body'
wrk.headers["Content-Type"] = "application/json"
wrk.headers["Authorization"] = "Bearer $(cat "$AGENTTEAM_EXEC_TOKEN_FILE")"
LUA
task_get_check
perf_pid=""
if [ -n "${PERF:-}" ]; then
    perf record -q --call-graph dwarf,16384 -F 499 -p "$daemon_pid" -o "$PERF" -- sleep 8 &
    perf_pid=$!
fi
audit_before=$(audit_settled)
compete_start
taskset -c 1 wrk -t1 -c16 -d10s --latency -s "$work/post.lua" "$url" | tee "$work/ours_task_get.wrk"
compete_stop
[ -z "$perf_pid" ] || wait "$perf_pid"
load_valid ours_task_get "$audit_before"
task_get_check
awk '/^Requests\/sec:/ { print $2 }' "$work/ours_task_get.wrk" > "$work/ours_task_get.rps"

# 3. Writes: `task create` with a `requestId` of its own per request (the server's receipt, the
# daemon's forwarding rule with its replay, nothing faulted), 16 connections, 10 s. Each request
# must answer 200 with a new task: the load then counts the channel's tasks through the daemon.
echo "## daemon throughput: task create with requestId, 16 connections, 10 s"
cat > "$work/create.lua" <<LUA
local n = 0
local run = tostring(os.time()) .. tostring(math.random(100000, 999999))
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
wrk.headers["Authorization"] = "Bearer $(cat "$AGENTTEAM_EXEC_TOKEN_FILE")"
request = function()
    n = n + 1
    local id = "bench-" .. run .. "-" .. n
    return wrk.format(nil, nil, nil, '{"location":{"kind":"channel","channelId":"$channel"},"title":"' .. id .. '","requestId":"' .. id .. '"}')
end
LUA
audit_before=$(audit_settled)
compete_start
taskset -c 1 wrk -t1 -c16 -d10s --latency -s "$work/create.lua" "$AGENTTEAM_EXEC_BASE_URL/task/create" | tee "$work/ours_task_create.wrk"
compete_stop
load_valid ours_task_create "$audit_before"
awk '/^Requests\/sec:/ { print $2 }' "$work/ours_task_create.wrk" > "$work/ours_task_create.rps"
echo "summary: ours task create $(printf '%.0f' "$(cat "$work/ours_task_create.rps")") req/s"

# Stop ours before the peer starts: core 0 is then the peer's alone.
ours_stop
backend_stop
peer_start
peer_echo_load

python3 - "$work" <<'PY'
import sys
ours = float(open(f"{sys.argv[1]}/ours_task_get.rps").read())
peer = float(open(f"{sys.argv[1]}/rmcp_tools_call.rps").read())
print(f"summary: ours task get {ours:.0f} req/s, rmcp tools/call {peer:.0f} req/s; ratio ours_task_get/rmcp_tools_call {ours/peer:.2f} (target >= 0.5)")
PY

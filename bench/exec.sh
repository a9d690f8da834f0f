#!/usr/bin/env bash
# Exec transport benchmark.
#
# 1. Wall time of `agentteam exec task get` (process start, token-file read, local validation,
#    one POST, print) against the same request sent by `curl`, in the same run (hyperfine).
#    Target: ratio <= 1.3.
# 2. Daemon throughput for `task get` at 16 connections (wrk), daemon and server in one process.
#
# Usage: bench/exec.sh            (builds the release binary first; installs hyperfine and wrk
#                                  from Debian's packages when missing)
set -euo pipefail
cd "$(dirname "$0")/.."
for tool in hyperfine wrk curl; do
    command -v "$tool" >/dev/null || { apt-get update -qq && apt-get install -y -qq "$tool"; }
done
cargo build --release --quiet
bin="$PWD/target/release/agentteam"
work="$(mktemp -d)"
cleanup() { kill "$runtime_pid" "$daemon_pid" 2>/dev/null || true; wait 2>/dev/null || true; rm -rf "$work"; }
trap cleanup EXIT

"$bin" daemon --state-dir "$work/state" > "$work/daemon.out" 2> "$work/daemon.log" &
daemon_pid=$!
until grep -q "listening on" "$work/daemon.out" 2>/dev/null; do sleep 0.1; done
"$bin" agent add bench --state-dir "$work/state" > /dev/null
# A runtime that publishes its variables and stays up; the benchmark acts as that runtime.
"$bin" run --state-dir "$work/state" --agent bench -- sh -c 'echo "$AGENTTEAM_EXEC_BASE_URL"; echo "$AGENTTEAM_EXEC_TOKEN_FILE"; exec sleep 3600' > "$work/runtime.out" &
runtime_pid=$!
until [ "$(wc -l < "$work/runtime.out")" -ge 2 ]; do sleep 0.1; done
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

echo "## daemon throughput: task get, 16 connections, 10 s"
cat > "$work/post.lua" <<LUA
wrk.method = "POST"
wrk.body = '$body'
wrk.headers["Content-Type"] = "application/json"
wrk.headers["Authorization"] = "Bearer $(cat "$AGENTTEAM_EXEC_TOKEN_FILE")"
LUA
wrk -t2 -c16 -d10s --latency -s "$work/post.lua" "$url"

#!/usr/bin/env bash
# MCP endpoint benchmark.
#
# Throughput at 16 connections, server on one core (taskset -c 0), wrk on the other (-c 1):
#   (a) ours: tools/list
#   (b) ours: tools/call message_history_read, a page of 20 channel messages
#   (c) peer: tools/call of a trivial `echo` tool on rmcp 3.11 in stateless JSON mode
#       (bench/mcp-peer, built here from crates.io)
# All three use the 2026-07-28 wire (stateless by definition): per-request `_meta`,
# `MCP-Protocol-Version`, `Mcp-Method` and, for tools/call, `Mcp-Name`.
# Target: (a) >= 1.5 x (c).
#
# The peer is started only after our daemon has been stopped, so each server has core 0 to itself
# (no idle daemon ticking beside the peer, no peer beside ours).
#
# Usage: bench/mcp.sh            (builds the release binary and the peer first; installs wrk
#                                 from Debian's packages when missing)
#        PERF=FILE bench/mcp.sh  also records `perf record --call-graph dwarf` of our daemon for
#                                 8 s during the history load into FILE (read it with `perf report
#                                 -i FILE --no-children`); that load's numbers are then not clean
set -euo pipefail
cd "$(dirname "$0")/.."
for tool in wrk curl; do
    command -v "$tool" >/dev/null || { apt-get update -qq && apt-get install -y -qq "$tool"; }
done
cargo build --release --quiet
CARGO_TARGET_DIR="$PWD/target/bench-peer" \
    cargo build --release --quiet --locked --manifest-path bench/mcp-peer/Cargo.toml
bin="$PWD/target/release/agentteam"
peer_bin="$PWD/target/bench-peer/release/mcp-peer"
work="$(mktemp -d)"
daemon_pid="" runtime_pid="" peer_pid=""
cleanup() {
    # shellcheck disable=SC2086 # empty ids drop out
    kill $peer_pid $runtime_pid $daemon_pid 2>/dev/null || true
    wait 2>/dev/null || true
    rm -rf "$work"
}
trap cleanup EXIT

version="2026-07-28"
meta="\"_meta\":{\"io.modelcontextprotocol/protocolVersion\":\"$version\",\"io.modelcontextprotocol/clientCapabilities\":{}}"

# request METHOD [TOOL ARGUMENTS]: one JSON-RPC request body.
request() {
    if [ $# -eq 1 ]; then
        printf '{"jsonrpc":"2.0","id":1,"method":"%s","params":{%s}}' "$1" "$meta"
    else
        printf '{"jsonrpc":"2.0","id":1,"method":"%s","params":{"name":"%s","arguments":%s,%s}}' \
            "$1" "$2" "$3" "$meta"
    fi
}

# check URL TOKEN_FILE METHOD [TOOL ARGUMENTS]: sends the request once with curl and fails the
# script unless the answer is 200, application/json, a JSON-RPC result (not an error) and, for
# tools/call, not `isError`. Prints a one-line description of the result.
# The bearer token goes from the file to curl's stdin through shell builtins: never in argv.
check() {
    local url=$1 token_file=$2 method=$3 tool=${4:-}
    {
        printf 'Content-Type: application/json\nAccept: application/json, text/event-stream\n'
        printf 'MCP-Protocol-Version: %s\nMcp-Method: %s\n' "$version" "$method"
        [ -z "$tool" ] || printf 'Mcp-Name: %s\n' "$tool"
        [ -z "$token_file" ] || printf 'Authorization: Bearer %s\n' "$(< "$token_file")"
    } | curl -sS -o "$work/response" -w '%{http_code} %{content_type}' -H @- \
        -d "$(request "${@:3}")" "$url" > "$work/status"
    python3 - "$work/status" "$work/response" "$method" "$tool" <<'PY'
import json, sys
status, _, ctype = open(sys.argv[1]).read().partition(" ")
body = open(sys.argv[2]).read()
method, tool = sys.argv[3], sys.argv[4]
what = f"{method} {tool}".strip()
def fail(why):
    sys.exit(f"{what}: {why}: HTTP {status} {ctype}: {body[:600]}")
if status != "200":
    fail("not 200")
if not ctype.startswith("application/json"):
    fail("not application/json")
try:
    message = json.loads(body)
except ValueError:
    fail("not JSON")
if "error" in message or not isinstance(message.get("result"), dict):
    fail("not a JSON-RPC result")
result = message["result"]
if method == "tools/list":
    print(f"ok: {what}: {len(result.get('tools', []))} tools, {len(body)} bytes")
else:
    if result.get("isError"):
        fail("isError")
    structured = result.get("structuredContent")
    extra = ""
    if isinstance(structured, dict) and "messages" in structured:
        if not structured["messages"]:
            fail("empty history")
        extra = f", {len(structured['messages'])} messages"
    print(f"ok: {what}: {len(body)} bytes{extra}")
PY
}

# The wrk script takes everything from the environment and reads the token file itself (when
# MCP_TOKEN_FILE is set). It has no `response` callback on purpose: handing every body to Lua costs
# wrk about a quarter of its throughput on our 19 KB tool list (42.6k vs 31.0k req/s measured), so
# the load would measure wrk, and unevenly, since the peer's answer is tiny. Correctness is checked
# instead by one full check of the same request before and after each load (the servers are
# stateless, the request never changes), and wrk must report no non-2xx answer.
cat > "$work/mcp.lua" <<'LUA'
wrk.method = "POST"
wrk.body = os.getenv("MCP_BODY")
wrk.headers["Content-Type"] = "application/json"
wrk.headers["Accept"] = "application/json, text/event-stream"
wrk.headers["MCP-Protocol-Version"] = os.getenv("MCP_VERSION")
wrk.headers["Mcp-Method"] = os.getenv("MCP_METHOD")
local tool = os.getenv("MCP_TOOL") or ""
if tool ~= "" then wrk.headers["Mcp-Name"] = tool end
local token_file = os.getenv("MCP_TOKEN_FILE") or ""
if token_file ~= "" then
    local f = assert(io.open(token_file, "r"))
    wrk.headers["Authorization"] = "Bearer " .. f:read("*a"):match("^%s*(.-)%s*$")
    f:close()
end
LUA

# load NAME URL TOKEN_FILE METHOD [TOOL ARGUMENTS]: the full check, 10 s of wrk at 16 connections
# on core 1, the full check again; fails on any non-2xx answer, records req/s in $work/NAME.rps.
load() {
    local name=$1 url=$2 token_file=$3
    check "$url" "$token_file" "${@:4}"
    local method=$4 tool=${5:-}
    echo "## $name: 16 connections, 10 s"
    local perf_pid=""
    if [ -n "${PERF:-}" ] && [ "$name" = ours_history ]; then
        perf record -q --call-graph dwarf,16384 -F 499 -p "$daemon_pid" -o "$PERF" -- sleep 8 &
        perf_pid=$!
    fi
    MCP_BODY="$(request "${@:4}")" MCP_VERSION="$version" MCP_METHOD="$method" MCP_TOOL="$tool" \
        MCP_TOKEN_FILE="$token_file" \
        taskset -c 1 wrk -t1 -c16 -d10s --latency -s "$work/mcp.lua" "$url" | tee "$work/$name.wrk"
    [ -z "$perf_pid" ] || wait "$perf_pid"
    if grep -q 'Non-2xx' "$work/$name.wrk"; then echo "$name: non-2xx answers under load" >&2; exit 1; fi
    check "$url" "$token_file" "${@:4}"
    awk '/^Requests\/sec:/ { print $2 }' "$work/$name.wrk" > "$work/$name.rps"
}

# --- ours: daemon with the embedded server on core 0 ---
taskset -c 0 "$bin" daemon --state-dir "$work/state" > "$work/daemon.out" 2> "$work/daemon.log" &
daemon_pid=$!
until grep -q "listening on" "$work/daemon.out" 2>/dev/null; do
    kill -0 "$daemon_pid" 2>/dev/null || { cat "$work/daemon.log" >&2; exit 1; }
    sleep 0.1
done
"$bin" agent add bench --state-dir "$work/state" > /dev/null
# A runtime that publishes its variables and stays up; the benchmark acts as that runtime.
"$bin" run --state-dir "$work/state" --agent bench -- sh -c 'echo "$AGENTTEAM_MCP_URL"; echo "$AGENTTEAM_MCP_TOKEN_FILE"; exec sleep 3600' > "$work/runtime.out" &
runtime_pid=$!
until [ "$(wc -l < "$work/runtime.out")" -ge 2 ]; do
    kill -0 "$runtime_pid" 2>/dev/null || { echo "agentteam run exited" >&2; exit 1; }
    sleep 0.1
done
mcp_url="$(sed -n 1p "$work/runtime.out")"
token_file="$(sed -n 2p "$work/runtime.out")"
channel="$(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['channelId'])" "$work/state/identity.json")"
target="channel:$channel"

# A non-empty history: 20 messages, so the read returns a full page of 20.
for i in $(seq 1 20); do
    check "$mcp_url" "$token_file" tools/call message_send \
        "{\"target\":\"$target\",\"content\":\"bench message $i\"}" > /dev/null
done
history_args="{\"target\":\"$target\",\"limit\":20}"

load ours_tools_list "$mcp_url" "$token_file" tools/list
load ours_history "$mcp_url" "$token_file" tools/call message_history_read "$history_args"

# Stop ours before the peer starts: core 0 is then the peer's alone.
kill "$runtime_pid" "$daemon_pid" 2>/dev/null || true
wait "$runtime_pid" "$daemon_pid" 2>/dev/null || true
runtime_pid="" daemon_pid=""

# --- peer: rmcp 3.11 stateless JSON on core 0 ---
taskset -c 0 "$peer_bin" 0 > "$work/peer.out" 2> "$work/peer.log" &
peer_pid=$!
until grep -q "listening on" "$work/peer.out" 2>/dev/null; do
    kill -0 "$peer_pid" 2>/dev/null || { cat "$work/peer.log" >&2; exit 1; }
    sleep 0.1
done
peer_url="http://$(awk '/listening on/ { print $3; exit }' "$work/peer.out")/mcp"
echo_args='{"text":"hi"}'
load rmcp_tools_call "$peer_url" "" tools/call echo "$echo_args"

python3 - "$work" <<'PY'
import sys
rps = {name: float(open(f"{sys.argv[1]}/{name}.rps").read()) for name in ("ours_tools_list", "ours_history", "rmcp_tools_call")}
peer = rps["rmcp_tools_call"]
print(f"summary: ours tools/list {rps['ours_tools_list']:.0f} req/s, ours message_history_read {rps['ours_history']:.0f} req/s, "
      f"rmcp tools/call {peer:.0f} req/s; ratio ours_tools_list/rmcp_tools_call {rps['ours_tools_list']/peer:.2f} (target >= 1.5), "
      f"ours_history/rmcp_tools_call {rps['ours_history']/peer:.2f}")
PY

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
# Targets: (a) >= 1.5 x (c); (b) >= 0.5 x (c).
#
# The peer is started only after our daemon has been stopped, so each server has core 0 to itself
# (no idle daemon ticking beside the peer, no peer beside ours).
#
# Usage: bench/mcp.sh            (builds the release binary and the peer first; installs wrk
#                                 from Debian's packages when missing)
#        LOADS=N bench/mcp.sh    loads the history read N times against the same daemon (default
#                                 1) and takes the median for the ratio: this machine's runs of
#                                 the same code move by up to 10%
#        PERF=FILE bench/mcp.sh  also records `perf record --call-graph dwarf` of our daemon for
#                                 8 s during the history load into FILE (read it with `perf report
#                                 -i FILE --no-children`); that load's numbers are then not clean
set -euo pipefail
cd "$(dirname "$0")/.."
for tool in wrk curl; do
    command -v "$tool" >/dev/null || { apt-get update -qq && apt-get install -y -qq "$tool"; }
done
work="$(mktemp -d)"
cargo build --release --quiet
bin="$PWD/target/release/agentteam"
daemon_pid="" runtime_pid="" peer_pid=""
cleanup() {
    # shellcheck disable=SC2086 # empty ids drop out
    kill $peer_pid $runtime_pid $daemon_pid 2>/dev/null || true
    wait 2>/dev/null || true
    rm -rf "$work"
}
trap cleanup EXIT

# shellcheck source=bench/lib/mcp_load.sh
. bench/lib/mcp_load.sh
# shellcheck source=bench/lib/daemon.sh
. bench/lib/daemon.sh
peer_build

# --- ours: daemon with the embedded server on core 0 ---
daemon_start taskset -c 0
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
for n in $(seq 1 "${LOADS:-1}"); do
    load ours_history "$mcp_url" "$token_file" tools/call message_history_read "$history_args"
    cp "$work/ours_history.rps" "$work/ours_history.$n.rps"
done

# Stop ours before the peer starts: core 0 is then the peer's alone.
ours_stop

# --- peer: rmcp 3.11 stateless JSON on core 0 ---
peer_start
peer_echo_load

python3 - "$work" <<'PY'
import sys
import glob, statistics
rps = {name: float(open(f"{sys.argv[1]}/{name}.rps").read()) for name in ("ours_tools_list", "rmcp_tools_call")}
loads = sorted(float(open(path).read()) for path in glob.glob(f"{sys.argv[1]}/ours_history.*.rps"))
rps["ours_history"] = statistics.median(loads)
if len(loads) > 1:
    print("ours message_history_read loads: " + ", ".join(f"{value:.0f}" for value in loads) + " req/s (median below)")
peer = rps["rmcp_tools_call"]
print(f"summary: ours tools/list {rps['ours_tools_list']:.0f} req/s, ours message_history_read {rps['ours_history']:.0f} req/s, "
      f"rmcp tools/call {peer:.0f} req/s; ratio ours_tools_list/rmcp_tools_call {rps['ours_tools_list']/peer:.2f} (target >= 1.5), "
      f"ours_history/rmcp_tools_call {rps['ours_history']/peer:.2f} (target >= 0.5)")
PY

#!/usr/bin/env bash
# What a slower answer costs beyond its own work: the rmcp 3.11 echo peer (bench/mcp-peer) with a
# busy wait of N µs in each `echo`, under bench/mcp.sh's load (core 0 the peer's, wrk at 16
# connections on core 1, 10 s), with `mpstat` on both cores. Per request it prints the wall
# time and the server core's softirq time: on a machine whose idle cores halt, the wake-up of
# wrk's core (loopback delivery runs on the sender's core) grows with the gap between answers.
#
# Usage: bench/wake_cost.sh [N …]   (default 0 10 20 30 40 50; installs wrk and sysstat when
#                                    missing)
set -euo pipefail
cd "$(dirname "$0")/.."
command -v wrk >/dev/null || { apt-get update -qq && apt-get install -y -qq wrk; }
command -v mpstat >/dev/null || { apt-get update -qq && apt-get install -y -qq sysstat; }
work="$(mktemp -d)"
peer_pid="" stat_pid=""
cleanup() {
    # shellcheck disable=SC2086 # empty ids drop out
    kill $peer_pid $stat_pid 2>/dev/null || true
    wait 2>/dev/null || true
    rm -rf "$work"
}
trap cleanup EXIT
# shellcheck source=bench/lib/mcp_load.sh
. bench/lib/mcp_load.sh
peer_build

echo "| busy wait | peer req/s | µs per request | softirq on core 0 per request | core 1 idle |"
echo "| --- | --- | --- | --- | --- |"
for busy in "${@:-0 10 20 30 40 50}"; do
    for n in $busy; do
        peer_start "$n"
        # The middle 5 s of the 10 s load.
        (sleep 2; mpstat -P 0,1 5 1) > "$work/mpstat" &
        stat_pid=$!
        load peer "$peer_url" "" tools/call echo '{"text":"hi"}' > /dev/null
        wait "$stat_pid"
        stat_pid=""
        python3 - "$n" "$(cat "$work/peer.rps")" "$work/mpstat" <<'PY'
import sys
busy, rps, path = sys.argv[1], float(sys.argv[2]), sys.argv[3]
cores = {}
for line in open(path):
    fields = line.split()
    if fields and fields[0] == "Average:" and fields[1] in ("0", "1"):
        cores[fields[1]] = fields
header = next(l.split() for l in open(path) if l.startswith("Average:") and "%soft" in l)
soft, idle = header.index("%soft"), header.index("%idle")
per_request = 1e6 / rps
print(f"| {busy} µs | {rps:,.0f} | {per_request:.1f} | "
      f"{float(cores['0'][soft]) / 100 * per_request:.1f} µs | {cores['1'][idle]}% |")
PY
        kill "$peer_pid"
        wait "$peer_pid" 2>/dev/null || true
        peer_pid=""
    done
done

#!/usr/bin/env bash
# What a slower answer costs beyond its own work: the rmcp 3.11 echo peer (bench/mcp-peer) with a
# busy wait of N µs in each `echo`, under bench/mcp.sh's load (core 0 the peer's, wrk at 16
# connections on core 1, 10 s), with `mpstat` on both cores. Per request it prints the wall
# time and the server core's softirq time: on a machine whose idle cores halt, the wake-up of
# wrk's core (loopback delivery runs on the sender's core) grows with the gap between answers.
# With TEXT_BYTES, the peer's text is padded to that many bytes: a peer that answers each call
# with a history page's worth of bytes after N µs of work, the most any page that size and that
# work could reach on this machine, next to the plain peer (always the table's first row).
#
# Usage: [TEXT_BYTES=B] bench/wake_cost.sh [N …]   (default 0 10 20 30 40 50; installs wrk and
#                                                   sysstat when missing)
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

text_bytes="${TEXT_BYTES:-}"
case "$text_bytes" in
    "" | *[!0-9]*) [ -z "$text_bytes" ] || { echo "TEXT_BYTES: a number of bytes" >&2; exit 2; } ;;
esac
echo "| busy wait | answer | peer req/s | µs per request | softirq on core 0 per request | core 1 idle | to the plain peer |"
echo "| --- | --- | --- | --- | --- | --- | --- |"
plain=""
# The plain peer first, then each busy wait with the padded answer (when TEXT_BYTES is set).
waits=("$@")
[ ${#waits[@]} -gt 0 ] || waits=(0 10 20 30 40 50)
runs=("0 ")
for n in "${waits[@]}"; do
    [ -z "$text_bytes" ] && [ "$n" = 0 ] || runs+=("$n $text_bytes")
done
for run in "${runs[@]}"; do
    read -r n bytes <<< "$run"
    # shellcheck disable=SC2086 # no padding: no argument
    peer_start "$n" $bytes
    # The middle 5 s of the 10 s load.
    (sleep 2; mpstat -P 0,1 5 1) > "$work/mpstat" &
    stat_pid=$!
    load peer "$peer_url" "" tools/call echo '{"text":"hi"}' > "$work/load.out"
    wait "$stat_pid"
    stat_pid=""
    answer="$(sed -n 's/^ok: tools\/call echo: \([0-9]*\) bytes.*/\1/p' "$work/load.out" | head -1)"
    rps="$(cat "$work/peer.rps")"
    [ -n "$plain" ] || plain="$rps"
    python3 - "$n" "$rps" "$work/mpstat" "$answer" "$plain" <<'PY'
import sys
busy, rps, path, answer, plain = sys.argv[1], float(sys.argv[2]), sys.argv[3], sys.argv[4], float(sys.argv[5])
cores = {}
for line in open(path):
    fields = line.split()
    if fields and fields[0] == "Average:" and fields[1] in ("0", "1"):
        cores[fields[1]] = fields
header = next(l.split() for l in open(path) if l.startswith("Average:") and "%soft" in l)
soft, idle = header.index("%soft"), header.index("%idle")
per_request = 1e6 / rps
print(f"| {busy} µs | {int(answer):,} bytes | {rps:,.0f} | {per_request:.1f} | "
      f"{float(cores['0'][soft]) / 100 * per_request:.1f} µs | {cores['1'][idle]}% | {rps / plain:.2f} |")
PY
    kill "$peer_pid"
    wait "$peer_pid" 2>/dev/null || true
    peer_pid=""
done

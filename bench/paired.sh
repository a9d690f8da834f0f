#!/usr/bin/env bash
# Two agentteam binaries compared on one load, finely interleaved: both daemons run at once (each
# with its embedded server, its own state directory and a runtime to act as), pinned to core 0,
# and wrk on core 1 loads them in turn, A B in odd rounds and B A in even ones, ROUNDS rounds of
# SECS seconds each. Where bench/ab.sh gives a few long turns, this gives many short pairs a few
# seconds apart, so a drift of the shared machine touches both sides of a pair alike; the spread
# of the pairs' ratios is the noise, and a bootstrap of their median says how far it reaches.
# Run it with the same binary twice (A A) for the noise of the machine itself.
#
# Loads: `task-get` (Exec `task get` of one task, as bench/exec.sh) or `history` (MCP
# `message_history_read` of a 20-message channel page on the in-process hop, as bench/mcp.sh).
# A load with a non-2xx answer, a socket error, a timeout or a dropped audit record is invalid and
# fails the script.
#
# Usage: bench/paired.sh A B [LOAD]    (binaries or commits, as bench/ab.sh takes them; LOAD is
#                                      task-get by default; 12 rounds of 3 s)
#        ROUNDS=16 SECS=4 bench/paired.sh A B history
# Every load adds its requests' audit records to one database per side; on the 2-core machine a
# side's embedded server began dropping them near a million rows (16 rounds of 4 s of task get),
# which ends the run as invalid: longer runs want a faster machine.
# Prints every pair (req/s of A and B, B/A), then the median of B/A with its 95 % bootstrap
# interval and the geometric mean.
set -euo pipefail
cd "$(dirname "$0")/.."
[ $# -ge 2 ] || { echo "usage: bench/paired.sh A B [task-get|history]" >&2; exit 2; }
rounds="${ROUNDS:-12}"
secs="${SECS:-3}"
load="${3:-task-get}"
case "$load" in task-get | history) ;; *) echo "unknown load: $load" >&2; exit 2 ;; esac
command -v wrk >/dev/null || { apt-get update -qq && apt-get install -y -qq wrk; }

# shellcheck source=bench/lib/binary.sh
. bench/lib/binary.sh
bin_a="$(agentteam_binary "$1")"
bin_b="$(agentteam_binary "$2")"

top="$(mktemp -d)"
pids=()
cleanup() {
    kill "${pids[@]}" 2>/dev/null || true
    wait 2>/dev/null || true
    rm -rf "$top"
}
trap cleanup EXIT
# shellcheck source=bench/lib/mcp_load.sh
work="$top" . bench/lib/mcp_load.sh
# shellcheck source=bench/lib/daemon.sh
. bench/lib/daemon.sh

# side NAME BIN: a daemon of BIN on core 0 in $top/NAME, a runtime to act as, and the load's
# request (wrk script, URL and environment in $top/NAME/).
side() {
    local name=$1 bin=$2
    local work="$top/$name"
    mkdir -p "$work"
    daemon_start taskset -c 0
    pids+=("$daemon_pid")
    "$bin" agent add bench --state-dir "$work/state" > /dev/null
    "$bin" run --state-dir "$work/state" --agent bench -- sh -c 'echo "$AGENTTEAM_EXEC_BASE_URL"; echo "$AGENTTEAM_EXEC_TOKEN_FILE"; echo "$AGENTTEAM_MCP_URL"; echo "$AGENTTEAM_MCP_TOKEN_FILE"; exec sleep 3600' > "$work/runtime.out" 2>/dev/null &
    pids+=($!)
    runtime_published "$work/runtime.out" 4 "${pids[-1]}"
    local exec_url exec_token mcp_url mcp_token channel
    exec_url="$(sed -n 1p "$work/runtime.out")"
    exec_token="$(sed -n 2p "$work/runtime.out")"
    mcp_url="$(sed -n 3p "$work/runtime.out")"
    mcp_token="$(sed -n 4p "$work/runtime.out")"
    channel="$(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['channelId'])" "$work/state/identity.json")"
    if [ "$load" = task-get ]; then
        local task
        task="$(AGENTTEAM_EXEC_BASE_URL="$exec_url" AGENTTEAM_EXEC_TOKEN_FILE="$exec_token" \
            "$bin" exec task create "{\"location\":{\"kind\":\"channel\",\"channelId\":\"$channel\"},\"title\":\"bench\"}" |
            python3 -c 'import json,sys; print(json.load(sys.stdin)["data"]["task"]["id"])')"
        # The token goes into the wrk script from its file, never argv.
        cat > "$work/load.lua" <<LUA
wrk.method = "POST"
wrk.body = '{"taskId":"$task"}'
wrk.headers["Content-Type"] = "application/json"
wrk.headers["Authorization"] = "Bearer $(cat "$exec_token")"
LUA
        echo "$exec_url/task/get" > "$work/url"
        : > "$work/env"
    else
        local i
        for i in $(seq 1 20); do
            check "$mcp_url" "$mcp_token" tools/call message_send \
                "{\"target\":\"channel:$channel\",\"content\":\"bench message $i\"}" > /dev/null
        done
        local arguments="{\"target\":\"channel:$channel\",\"limit\":20}"
        check "$mcp_url" "$mcp_token" tools/call message_history_read "$arguments" > /dev/null
        cp "$top/mcp.lua" "$work/load.lua"
        echo "$mcp_url" > "$work/url"
        printf 'export MCP_BODY=%q MCP_VERSION=%q MCP_METHOD=tools/call MCP_TOOL=message_history_read MCP_TOKEN_FILE=%q\n' \
            "$(request tools/call message_history_read "$arguments")" "$version" "$mcp_token" > "$work/env"
    fi
}

# once NAME SECONDS: one wrk load of NAME's daemon; prints its req/s, or fails the script on an
# invalid load.
once() {
    local name=$1 seconds=$2
    local work="$top/$name" before out
    before=$(audit_dropped)
    # shellcheck disable=SC1091
    out="$(. "$work/env" && taskset -c 1 wrk -t1 -c16 -d"$seconds" -s "$work/load.lua" "$(cat "$work/url")")"
    if grep -qE 'Non-2xx|Socket errors' <<< "$out"; then
        echo "$name: INVALID LOAD: $(grep -E 'Non-2xx|Socket errors' <<< "$out")" >&2
        exit 1
    fi
    if [ "$(audit_dropped)" != "$before" ]; then
        echo "$name: INVALID LOAD: the server dropped audit records" >&2
        exit 1
    fi
    awk '/^Requests\/sec:/ { print $2 }' <<< "$out"
}

side a "$bin_a"
side b "$bin_b"
echo "## $load: A = $1, B = $2; $rounds rounds of ${secs} s each, ABBA order, 16 connections"
# A short warm load of each first: its page cache and allocator settle before any pair counts.
once a 2s > /dev/null
once b 2s > /dev/null
pairs="$top/pairs"
for round in $(seq 1 "$rounds"); do
    if [ $((round % 2)) = 1 ]; then
        a=$(once a "${secs}s")
        b=$(once b "${secs}s")
    else
        b=$(once b "${secs}s")
        a=$(once a "${secs}s")
    fi
    echo "$round $a $b" | tee -a "$pairs" | awk '{ printf "pair %d: A %.0f req/s, B %.0f req/s, B/A %.3f\n", $1, $2, $3, $3 / $2 }'
done
python3 - "$pairs" <<'PY'
import random, statistics, sys
ratios = [float(b) / float(a) for _, a, b in (line.split() for line in open(sys.argv[1]))]
random.seed(0)
medians = sorted(statistics.median(random.choices(ratios, k=len(ratios))) for _ in range(4000))
low, high = medians[int(0.025 * len(medians))], medians[int(0.975 * len(medians)) - 1]
print(f"summary: B/A median {statistics.median(ratios):.3f} (95 % bootstrap {low:.3f}-{high:.3f}), "
      f"geometric mean {statistics.geometric_mean(ratios):.3f}, {len(ratios)} pairs")
PY

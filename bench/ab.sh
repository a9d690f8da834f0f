#!/usr/bin/env bash
# Two or more commits alternated in one run, so all see the same machine: A B A B … (or A B C A B
# C …; ROUNDS rounds, 2 by default). Each turn runs this checkout's bench/exec.sh (`task get` throughput against the rmcp
# echo peer of the same run, and `task create` with a `requestId`) and bench/mcp.sh on the in-process hop (`message_history_read` of
# channel pages, thread pages and pages with reactions and attachments, against its own peer load), with BIN set to that commit's release
# binary. Each commit is built once, in a detached worktree under target/ab/ with its own target
# directory. Either script fails on an invalid load (non-2xx, socket error, timeout, dropped
# audit record), and so does this one.
#
# Usage: bench/ab.sh BEFORE AFTER [LATER…] (commits, any form git rev-parse takes, or paths of
#                                        agentteam binaries already built)
#        ROUNDS=3 bench/ab.sh BEFORE AFTER
#        MCP_ONLY=1 bench/ab.sh BEFORE AFTER   only the bench/mcp.sh turns (the three history reads)
# Prints every turn's numbers, then per commit the median of each ratio and of ours in req/s,
# and each later commit's req/s over the one before it and over the first.
set -euo pipefail
cd "$(dirname "$0")/.."
[ $# -ge 2 ] || { echo "usage: bench/ab.sh BEFORE AFTER [LATER…]" >&2; exit 2; }
rounds="${ROUNDS:-2}"
results="$(mktemp)"
trap 'rm -f "$results"' EXIT

# shellcheck source=bench/lib/binary.sh
. bench/lib/binary.sh
bins=()
for commit in "$@"; do
    bins+=("$(agentteam_binary "$commit")")
done

# turn LABEL BIN: one exec.sh and one mcp.sh run of BIN; appends `LABEL metric value` lines.
turn() {
    local label=$1 bin=$2 out
    if [ -z "${MCP_ONLY:-}" ]; then
    out="$(BIN="$bin" bench/exec.sh)"
    printf '%s\n' "$out" | grep -E '^(median|summary):' | sed "s/^/[$label] /" >&2
    printf '%s\n' "$out" | python3 -c '
import re, sys
label = sys.argv[1]
text = sys.stdin.read()
m = re.search(r"summary: ours task get (\d+) req/s, rmcp tools/call (\d+) req/s", text)
ours, peer = float(m[1]), float(m[2])
print(label, "task_get_rps", ours)
print(label, "task_get_ratio", ours / peer)
m = re.search(r"summary: ours task create (\d+) req/s", text)
print(label, "task_create_rps", float(m[1]))
' "$label" >> "$results"
    fi
    out="$(BIN="$bin" HOPS=in-process bench/mcp.sh)"
    printf '%s\n' "$out" | grep -E '^(summary|  in-process):' | sed "s/^/[$label] /" >&2
    printf '%s\n' "$out" | python3 -c '
import re, sys
label, text = sys.argv[1], sys.stdin.read()
peer = float(re.search(r"summary: rmcp tools/call (\d+) req/s", text)[1])
# The channel page is the median of its loads (mcp.sh takes it itself, LOADS=1 by default).
for metric, what in [("history", "channel page"), ("thread", "thread page"),
                     ("rich", "reactions\\+attachments page")]:
    ours = float(re.search(rf"in-process: {what}: (\d+) req/s", text)[1])
    print(label, f"{metric}_rps", ours)
    print(label, f"{metric}_ratio", ours / peer)
' "$label" >> "$results"
}

for round in $(seq 1 "$rounds"); do
    echo "## round $round of $rounds" >&2
    for i in "${!bins[@]}"; do
        turn "c$i" "${bins[$i]}"
    done
done

python3 - "$results" "$@" <<'PY'
import statistics, sys
rows = [line.split() for line in open(sys.argv[1])]
names = sys.argv[2:]
values = {}
for label, metric, value in rows:
    values.setdefault((int(label[1:]), metric), []).append(float(value))
median = lambda i, metric: statistics.median(values[(i, metric)])
metrics = ["task_get_rps", "task_get_ratio", "task_create_rps", "history_rps", "history_ratio",
           "thread_rps", "thread_ratio", "rich_rps", "rich_ratio"]
for metric in [m for m in metrics if (0, m) in values]:
    for i, name in enumerate(names):
        v = values[(i, metric)]
        print(f"{metric:15} {name:>12}: median {median(i, metric):10.2f}  ({', '.join(f'{x:.2f}' for x in v)})")
for metric in [m for m in ["task_get_rps", "task_create_rps", "history_rps", "thread_rps", "rich_rps"] if (0, m) in values]:
    for i in range(1, len(names)):
        print(f"{metric}: {names[i]} / {names[i - 1]} {median(i, metric) / median(i - 1, metric):.3f}, / {names[0]} {median(i, metric) / median(0, metric):.3f}")
PY

#!/usr/bin/env bash
# `agentteam token analyze` against ccusage 20.0.24 (npm; run with `--offline`), on a generated set
# of Claude Code and Codex session records (bench/token_corpus.py, 1 GiB by default), in the same
# run. First one untimed load of each program (the warm-up: the set and both programs' files in the
# page cache, each load checked), then ROUNDS timed rounds whose order alternates: odd rounds run
# ccusage, ours --totals, ours in full; even rounds the reverse. Neither program is always first.
#
# Each load is checked before it counts: every program exits 0, and our per-runtime input, output,
# cache-read and cache-write totals and session counts equal ccusage's; otherwise the run is
# invalid and the script fails. Wall time and peak RSS from GNU time.
# Each round gives its own ratios (ours over ccusage's time in that round); the summary is their
# median with the lowest and highest, and each program's median time and highest peak RSS.
# Targets: the usage-totals pass (`--totals`) no slower than ccusage (ratio <= 1); the full report
# (every AgentTeam result tokenized) at most 3x ccusage; our peak RSS under 128 MiB.
#
# Usage: bench/token_analyze.sh              (builds the release binary; BYTES=N, ROUNDS=N, 10 by default)
#        BIN=PATH bench/token_analyze.sh     measures that agentteam binary
set -euo pipefail
cd "$(dirname "$0")/.."
bytes="${BYTES:-1073741824}"
rounds="${ROUNDS:-10}"
bin="${BIN:-}"
if [ -z "$bin" ]; then
    cargo build --release --locked --quiet
    bin="$PWD/target/release/agentteam"
fi
[ -x /usr/bin/time ] || { apt-get update -qq && apt-get install -y -qq time; }
# shellcheck source=scripts/lib/node.sh
. scripts/lib/node.sh
# shellcheck source=scripts/lib/runtimes.sh
. scripts/lib/runtimes.sh
ensure_node
ccusage_dir="$test_tools/ccusage-$ccusage_version"
npm_runtime "$ccusage_dir" "ccusage $ccusage_version" "" "ccusage@$ccusage_version"
ccusage="$ccusage_dir/node_modules/.bin/ccusage"

home="$PWD/target/bench-token/home-$bytes"
if [ ! -f "$home/.complete" ]; then
    rm -rf "$home"
    python3 bench/token_corpus.py "$home" --bytes "$bytes"
    touch "$home/.complete"
fi
out="$(mktemp -d)"
trap 'rm -rf "$out"' EXIT

# run NAME OUTPUT COMMAND...: one timed load; "seconds KiB" in $out/time.
run() {
    local name=$1 output=$2
    shift 2
    /usr/bin/time -f "%e %M" -o "$out/time" env -i HOME="$home" PATH="$PATH" "$@" >"$output" 2>"$out/$name.err" \
        || { echo "bench/token_analyze.sh: $name failed:" >&2; cat "$out/$name.err" >&2; exit 1; }
}

# check: our totals per runtime equal ccusage's, or the load is invalid.
check() {
    python3 - "$out/ccusage.json" "$1" <<'PY'
import json, sys
theirs = json.load(open(sys.argv[1]))
ours = json.load(open(sys.argv[2]))["data"]["sessions"]
keys = [("input", "inputTokens"), ("output", "outputTokens"), ("cacheRead", "cacheReadTokens"),
        ("cacheWrite", "cacheCreationTokens")]
for agent in ("claude", "codex"):
    rows = [s for s in theirs["session"] if s["agent"] == agent]
    mine = [s for s in ours if s["runtime"] == agent]
    if len(rows) != len(mine):
        sys.exit(f"invalid: {agent}: {len(mine)} sessions, ccusage {len(rows)}")
    for ok, tk in keys:
        a = sum(s["usage"][ok] for s in mine)
        b = sum(s[tk] for s in rows)
        if a != b:
            sys.exit(f"invalid: {agent} {ok}: {a}, ccusage {b}")
PY
}

# load PROGRAM: one load of ccusage, ours --totals or ours in full, checked (in this shell, so that
# an invalid load ends the script); "seconds KiB" in $out/time.
load() {
    case $1 in
    ccusage) run ccusage "$out/ccusage.json" "$ccusage" session --json --offline ;;
    totals)
        run totals "$out/totals.json" "$bin" token analyze --json --totals --runtime claude --runtime codex
        check "$out/totals.json"
        ;;
    full)
        run full "$out/full.json" "$bin" token analyze --json --runtime claude --runtime codex
        check "$out/full.json"
        ;;
    esac
}

# The warm-up: ccusage first, so that ours are checked against its totals.
for program in ccusage totals full; do
    load "$program"
done
printf '%-8s %-10s %10s %10s\n' round program seconds 'peak KiB'
: >"$out/times"
for round in $(seq 1 "$rounds"); do
    if ((round % 2)); then order="ccusage totals full"; else order="full totals ccusage"; fi
    for program in $order; do
        load "$program"
        read -r s k <"$out/time"
        printf '%-8s %-10s %10s %10s\n' "$round" "$program" "$s" "$k"
        echo "$round $program $s $k" >>"$out/times"
    done
done
python3 - "$out/times" "$bytes" <<'PY'
import statistics, sys
times, size = sys.argv[1], float(sys.argv[2])
runs = {}
for line in open(times):
    round_, program, seconds, kib = line.split()
    runs.setdefault(program, {})[int(round_)] = (float(seconds), int(kib))
def spread(values):
    return f"{statistics.median(values):.2f} (lowest {min(values):.2f}, highest {max(values):.2f})"
print(f"set: {size / (1 << 20):.0f} MiB; {len(runs['ccusage'])} rounds, order alternating, after one warm-up load of each")
for program in ("ccusage", "totals", "full"):
    seconds = [s for s, _ in runs[program].values()]
    peak = max(k for _, k in runs[program].values())
    print(f"{program}: median {statistics.median(seconds):.2f} s (lowest {min(seconds):.2f}, highest {max(seconds):.2f}); peak RSS {peak / 1024:.1f} MiB")
for program, target in (("totals", "<= 1"), ("full", "<= 3")):
    ratios = [runs[program][r][0] / runs["ccusage"][r][0] for r in sorted(runs["ccusage"])]
    print(f"{program} / ccusage, per round: median {spread(ratios)} (target {target})")
print("target for our peak RSS: < 128 MiB")
PY

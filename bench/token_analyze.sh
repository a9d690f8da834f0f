#!/usr/bin/env bash
# `agentteam token analyze` against ccusage 20.0.24 (npm; run with `--offline`), on a generated set
# of Claude Code and Codex session records (bench/token_corpus.py, 1 GiB by default), in the same
# run, alternating the programs ROUNDS times (ccusage, ours --totals, ours in full, ...).
#
# Each load is checked before it counts: every program exits 0, and our per-runtime input, output,
# cache-read and cache-write totals and session counts equal ccusage's; otherwise the run is
# invalid and the script fails. Wall time and peak RSS from GNU time.
# Targets: the usage-totals pass (`--totals`) no slower than ccusage (ratio <= 1); the full report
# (every AgentTeam result tokenized) at most 3x ccusage; our peak RSS under 128 MiB.
#
# Usage: bench/token_analyze.sh              (builds the release binary; BYTES=N, ROUNDS=N)
#        BIN=PATH bench/token_analyze.sh     measures that agentteam binary
set -euo pipefail
cd "$(dirname "$0")/.."
bytes="${BYTES:-1073741824}"
rounds="${ROUNDS:-2}"
bin="${BIN:-}"
if [ -z "$bin" ]; then
    cargo build --release --quiet
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

# run NAME OUTPUT COMMAND...: one timed load; prints "seconds KiB".
run() {
    local name=$1 output=$2
    shift 2
    /usr/bin/time -f "%e %M" -o "$out/time" env -i HOME="$home" PATH="$PATH" "$@" >"$output" 2>"$out/$name.err" \
        || { echo "bench/token_analyze.sh: $name failed:" >&2; cat "$out/$name.err" >&2; exit 1; }
    cat "$out/time"
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

printf '%-8s %-10s %10s %10s\n' round program seconds 'peak KiB'
declare -A total
for round in $(seq 1 "$rounds"); do
    read -r s k < <(run ccusage "$out/ccusage.json" "$ccusage" session --json --offline)
    printf '%-8s %-10s %10s %10s\n' "$round" ccusage "$s" "$k"
    total[ccusage]=$(python3 -c "print(${total[ccusage]:-0} + $s)")
    read -r s k < <(run totals "$out/totals.json" "$bin" token analyze --json --totals --runtime claude --runtime codex)
    printf '%-8s %-10s %10s %10s\n' "$round" totals "$s" "$k"
    check "$out/totals.json"
    total[totals]=$(python3 -c "print(${total[totals]:-0} + $s)")
    total[totals_rss]=$(( k > ${total[totals_rss]:-0} ? k : ${total[totals_rss]:-0} ))
    read -r s k < <(run full "$out/full.json" "$bin" token analyze --json --runtime claude --runtime codex)
    printf '%-8s %-10s %10s %10s\n' "$round" full "$s" "$k"
    check "$out/full.json"
    total[full]=$(python3 -c "print(${total[full]:-0} + $s)")
    total[full_rss]=$(( k > ${total[full_rss]:-0} ? k : ${total[full_rss]:-0} ))
done
python3 - "${total[ccusage]}" "${total[totals]}" "${total[full]}" "${total[totals_rss]}" "${total[full_rss]}" "$bytes" <<'PY'
import sys
cc, totals, full, totals_rss, full_rss, size = map(float, sys.argv[1:])
print(f"set: {size / (1 << 20):.0f} MiB; sums over the rounds: ccusage {cc:.2f} s, totals {totals:.2f} s, full {full:.2f} s")
print(f"totals / ccusage = {totals / cc:.2f} (target <= 1); full / ccusage = {full / cc:.2f} (target <= 3)")
print(f"peak RSS: totals {totals_rss / 1024:.1f} MiB, full {full_rss / 1024:.1f} MiB (target < 128 MiB)")
PY

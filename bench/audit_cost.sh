#!/usr/bin/env bash
# What the audit trail costs a runtime request: `task get` through the daemon (embedded server on
# SQLite) at 16 connections for 10 s, with the release binary of BASE (before the audit trail)
# and of the working tree, alternating A B A B in one run so the noise falls on both.
#
# Usage: bench/audit_cost.sh BASE   (builds both release binaries; installs wrk when missing)
set -euo pipefail
cd "$(dirname "$0")/.."
base=${1:?usage: bench/audit_cost.sh BASE}
command -v wrk >/dev/null || { apt-get update -qq && apt-get install -y -qq wrk; }
work="$(mktemp -d)"
pids=()
cleanup() {
    kill "${pids[@]}" 2>/dev/null || true
    wait 2>/dev/null || true
    git worktree remove --force "$work/base" 2>/dev/null || true
    rm -rf "$work"
}
trap cleanup EXIT
cargo build --release --quiet
cp target/release/agentteam "$work/head"
git worktree add --quiet --detach "$work/base" "$base"
# The base build reuses the dependencies already built for the working tree.
mkdir -p "$work/target"
cp -r target/release "$work/target/release"
(cd "$work/base" && CARGO_TARGET_DIR="$work/target" cargo build --release --quiet)
cp "$work/target/release/agentteam" "$work/base-bin"

# measure NAME BIN: one daemon, one runtime, one task; wrk's req/s and p99 for `task get`.
measure() {
    local name=$1 bin=$2 state="$work/$1"
    "$bin" daemon --state-dir "$state" > "$work/$name.daemon.out" 2> /dev/null &
    local daemon=$!
    pids+=($daemon)
    until grep -q "listening on" "$work/$name.daemon.out" 2>/dev/null; do sleep 0.05; done
    "$bin" agent add bench --state-dir "$state" > /dev/null
    "$bin" run --state-dir "$state" --agent bench -- sh -c \
        'echo "$AGENTTEAM_EXEC_BASE_URL"; echo "$AGENTTEAM_EXEC_TOKEN_FILE"; exec sleep 3600' \
        > "$work/$name.runtime.out" &
    local runtime=$!
    pids+=($runtime)
    until [ -f "$work/$name.runtime.out" ] && [ "$(wc -l < "$work/$name.runtime.out")" -ge 2 ]; do sleep 0.05; done
    local url token_file channel task
    url="$(sed -n 1p "$work/$name.runtime.out")"
    token_file="$(sed -n 2p "$work/$name.runtime.out")"
    channel="$(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['channelId'])" "$state/identity.json")"
    task="$(AGENTTEAM_EXEC_BASE_URL="$url" AGENTTEAM_EXEC_TOKEN_FILE="$token_file" "$bin" exec task create \
        "{\"location\":{\"kind\":\"channel\",\"channelId\":\"$channel\"},\"title\":\"bench\"}" \
        | python3 -c 'import json,sys; print(json.load(sys.stdin)["data"]["task"]["id"])')"
    cat > "$work/$name.lua" <<LUA
wrk.method = "POST"
wrk.body = '{"taskId":"$task"}'
wrk.headers["Content-Type"] = "application/json"
wrk.headers["Authorization"] = "Bearer $(cat "$token_file")"
LUA
    wrk -t2 -c16 -d3s -s "$work/$name.lua" "$url/task/get" > /dev/null   # warm-up
    wrk -t2 -c16 -d10s --latency -s "$work/$name.lua" "$url/task/get" > "$work/$name.wrk"
    if grep -q "Non-2xx\|Socket errors" "$work/$name.wrk"; then cat "$work/$name.wrk" >&2; exit 1; fi
    local rps p99
    rps="$(awk '/Requests\/sec/ {print $2}' "$work/$name.wrk")"
    p99="$(awk '$1 == "99%" {print $2}' "$work/$name.wrk")"
    # The audit queue's drops under this load (the base binary has no audit trail: "-").
    local server dropped
    server="$(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['serverUrl'])" "$state/daemon.json")"
    dropped="$(curl -sS -H "Authorization: Bearer $(cat "$state/operator.token")" "$server/admin/stats" \
        | python3 -c 'import json,sys; print(json.load(sys.stdin)["data"].get("auditDropped", "-"))')"
    echo "$name: $rps req/s, p99 $p99, audit records dropped: $dropped"
    echo "$rps" > "$work/$name.rps"
    kill "$runtime" "$daemon"
    wait "$runtime" "$daemon" 2>/dev/null || true
}

echo "## task get, embedded server, 16 connections, 10 s: base $(git rev-parse --short "$base") vs working tree"
for round in 1 2; do
    measure "base-$round" "$work/base-bin"
    measure "head-$round" "$work/head"
done
python3 - "$work" <<'PY'
import sys
work = sys.argv[1]
rps = lambda name: float(open(f"{work}/{name}.rps").read())
for r in (1, 2):
    print(f"round {r}: with audit / without: {rps(f'head-{r}') / rps(f'base-{r}'):.3f}")
PY

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

# shellcheck source=bench/lib/task_get.sh
. bench/lib/task_get.sh

# measure NAME BIN: wrk's req/s and p99 for `task get`, and the audit records the server dropped.
measure() {
    local name=$1 bin=$2 state="$work/$1"
    task_get "$name" "$bin"
    if grep -q "Non-2xx\|Socket errors" "$work/$name.wrk"; then cat "$work/$name.wrk" >&2; exit 1; fi
    # The audit queue's drops under this load (the base binary has no audit trail: "-").
    local server dropped
    server="$(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['serverUrl'])" "$state/daemon.json")"
    dropped="$(curl -sS -H "Authorization: Bearer $(cat "$state/operator.token")" "$server/admin/stats" \
        | python3 -c 'import json,sys; print(json.load(sys.stdin)["data"].get("auditDropped", "-"))')"
    echo "$name: $(cat "$work/$name.rps") req/s, p99 $(wrk_field "$name" 99%), audit records dropped: $dropped"
    kill "${task_get_pids[@]}"
    wait "${task_get_pids[@]}" 2>/dev/null || true
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

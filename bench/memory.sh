#!/usr/bin/env bash
# Memory and cold start.
#
# 1. The daemon's resident set (VmRSS, with the embedded server in the same process): idle after
#    start and one agent, then with 512 live authorizations (512 runtimes launched through
#    `agentteam run`, each `sleep`ing; the launch cap), then again once they have ended.
#    Target: < 64 MiB at 512.
#    Also the resident set of one `agentteam run` relay process (one per runtime), and its unique
#    set (its private pages, without the binary's pages every relay and the daemon share).
#    The machine's transparent huge page setting is printed with the summary: it moves the RSS.
# 2. Cold start of `agentteam exec --help` against `curl --help` in the same run (hyperfine -N,
#    300 runs after 20 warm-ups).
#
# Usage: bench/memory.sh      (builds the release binary; installs hyperfine when missing)
#        BIN=PATH bench/memory.sh  measures that agentteam binary, building nothing
set -euo pipefail
cd "$(dirname "$0")/.."
for tool in hyperfine curl; do
    command -v "$tool" >/dev/null || { apt-get update -qq && apt-get install -y -qq "$tool"; }
done
# BIN=PATH measures that binary instead of this checkout's.
bin="${BIN:-}"
if [ -z "$bin" ]; then
    cargo build --release --quiet
    bin="$PWD/target/release/agentteam"
fi
work="$(mktemp -d)"
daemon_pid=""
runtimes=512
# The `agentteam run` relays this script started, by their own PIDs.
relay_pids=()
cleanup() {
    # shellcheck disable=SC2086 # an empty id drops out
    kill "${relay_pids[@]}" $daemon_pid 2>/dev/null || true
    wait 2>/dev/null || true
    rm -rf "$work"
}
trap cleanup EXIT

rss_kib() { awk '/^VmRSS:/ { print $2 }' "/proc/$1/status"; }
uss_kib() { awk '/^Private_(Clean|Dirty):/ { s += $2 } END { print s }' "/proc/$1/smaps_rollup"; }
thp=$(sed -n 's/.*\[\(.*\)\].*/\1/p' /sys/kernel/mm/transparent_hugepage/enabled 2>/dev/null || echo unknown)
mib() { awk -v k="$1" 'BEGIN { printf "%.1f MiB", k / 1024 }'; }
# status_field FIELD: one number from the daemon's status.
status_field() {
    "$bin" status --json --state-dir "$work/state" | python3 -c "import json,sys; print(json.load(sys.stdin)$1)"
}

# shellcheck source=bench/lib/daemon.sh
. bench/lib/daemon.sh
daemon_start
"$bin" agent add bench --state-dir "$work/state" > /dev/null
idle=$(rss_kib "$daemon_pid")
echo "daemon idle: $(mib "$idle")"

for _ in $(seq 1 "$runtimes"); do
    "$bin" run --state-dir "$work/state" --agent bench -- sleep 600 > /dev/null 2>&1 &
    relay_pids+=("$!")
done
# Every launch admitted and running (polls the daemon's own count, bounded).
deadline=$((SECONDS + 300))
until [ "$(status_field '["admission"]["runtimes"]')" -eq "$runtimes" ]; do
    [ "$SECONDS" -lt "$deadline" ] || { echo "the $runtimes runtimes did not all start" >&2; exit 1; }
    sleep 1
done
loaded=$(rss_kib "$daemon_pid")
relay=$(rss_kib "${relay_pids[-1]}")
relay_unique=$(uss_kib "${relay_pids[-1]}")
echo "daemon with $runtimes live authorizations: $(mib "$loaded") (target < 64 MiB)"
echo "one agentteam run relay: $(mib "$relay"), unique $(mib "$relay_unique")"

kill "${relay_pids[@]}" 2>/dev/null || true
until [ "$(status_field '["admission"]["runtimes"]')" -eq 0 ]; do
    [ "$SECONDS" -lt "$deadline" ] || { echo "the runtimes did not end" >&2; exit 1; }
    sleep 1
done
after=$(rss_kib "$daemon_pid")
echo "daemon after they ended: $(mib "$after")"

echo "## cold start: agentteam exec --help vs curl --help"
hyperfine -N --warmup 20 --runs 300 --export-json "$work/cold.json" \
    -n "agentteam exec --help" "$bin exec --help" \
    -n "curl --help" "curl --help"
python3 - "$work/cold.json" "$idle" "$loaded" "$after" "$relay" "$relay_unique" "$thp" <<'PY'
import json, sys
results = {r["command"]: r for r in json.load(open(sys.argv[1]))["results"]}
ours, peer = results["agentteam exec --help"], results["curl --help"]
idle, loaded, after, relay, unique = (int(v) / 1024 for v in sys.argv[2:7])
met = lambda ok: "met" if ok else "NOT MET"
print(f"summary (transparent huge pages: {sys.argv[7]}):")
print(f"  daemon RSS idle: {idle:.1f} MiB (target < 40: {met(idle < 40)})")
print(f"  daemon RSS at 512 live authorizations: {loaded:.1f} MiB (target < 64: {met(loaded < 64)})")
print(f"  daemon RSS after they ended: {after:.1f} MiB (no target)")
print(f"  one relay: RSS {relay:.1f} MiB, unique {unique:.1f} MiB (unique <= 2: {met(unique <= 2)})")
print(f"  exec --help median {ours['median']*1000:.2f} ms vs curl --help "
      f"{peer['median']*1000:.2f} ms, ratio {ours['median']/peer['median']:.2f} (no target)")
PY

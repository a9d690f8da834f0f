#!/usr/bin/env bash
# The event feed's fan-out: a message posted reaches 200 live subscribers of one daemon.
#
# Starts our daemon (release build, embedded server on SQLite), adds an agent, then runs
# bench/feed_subscribers.py: 200 synthetic subscribers (asyncio, one keep-alive connection each)
# follow the daemon's feed (`POST /api/admin/feed`, as `agentteam read --follow` does) while one
# poster posts 100 messages as the agent through the server's runtime route, 20 a second.
# Reports the latency from a post's answer to each subscriber's receipt of its event (p50, p90,
# p99, max over 20,000 samples), the daemon's resident set idle and with the 200 subscribers.
# A run with any missed or repeated event is invalid.
# Target: p99 < 250 ms; the daemon under its 64 MiB target with the subscribers.
#
# Usage: bench/feed.sh [SUBSCRIBERS] [MESSAGES]
set -euo pipefail
cd "$(dirname "$0")/.."
subscribers=${1:-200}
messages=${2:-100}
cargo build --release --quiet
bin="$PWD/target/release/agentteam"
work="$(mktemp -d)"
daemon_pid=""
cleanup() {
    # shellcheck disable=SC2086 # an empty id drops out
    kill $daemon_pid 2>/dev/null || true
    wait 2>/dev/null || true
    rm -rf "$work"
}
trap cleanup EXIT
rss_kib() { awk '/^VmRSS:/ { print $2 }' "/proc/$1/status"; }

# shellcheck source=bench/lib/daemon.sh
. bench/lib/daemon.sh
daemon_start
"$bin" agent add bench --state-dir "$work/state" > /dev/null
idle=$(rss_kib "$daemon_pid")
read -r daemon_url server_url < <(python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print(d["baseUrl"], d["serverUrl"])' "$work/state/daemon.json")
read -r workspace channel agent < <(python3 -c '
import json, sys, urllib.request
identity = json.load(open(sys.argv[1]))
request = urllib.request.Request(sys.argv[2] + "/api/admin/agents/bench", headers={"Authorization": "Bearer " + open(sys.argv[3]).read().strip()})
agent = json.load(urllib.request.urlopen(request))["data"]["agent"]
print(identity["workspaceId"], identity["channelId"], agent["id"])' "$work/state/identity.json" "$daemon_url" "$work/state/admin.token")
# The device credential reaches the poster through a file, never argv.
python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["deviceCredential"])' "$work/state/identity.json" > "$work/credential"
chmod 600 "$work/credential"

# Tokens reach the subscribers through files, never argv.
python3 bench/feed_subscribers.py "$daemon_url" "$work/state/admin.token" "$server_url" "$workspace" \
    "$agent" "$channel" "$work/credential" "$subscribers" "$messages" "$work/ready" > "$work/result.json" &
subscribers_pid=$!
# The daemon's resident set once every subscriber is connected and waiting.
until [ -f "$work/ready" ]; do
    kill -0 "$subscribers_pid" 2>/dev/null || { echo "the subscribers failed" >&2; exit 1; }
    sleep 0.1
done
loaded=$(rss_kib "$daemon_pid")
wait "$subscribers_pid"
python3 - "$work/result.json" "$idle" "$loaded" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
idle, loaded = int(sys.argv[2]) / 1024, int(sys.argv[3]) / 1024
if r["missed"] or r["repeated"]:
    sys.exit(f"INVALID RUN: {r['missed']} events missed, {r['repeated']} repeated ({r})")
print(f"{r['subscribers']} subscribers x {r['messages']} messages = {r['samples']} deliveries, none missed or repeated")
print(f"post answered -> event received: p50 {r['p50Ms']} ms, p90 {r['p90Ms']} ms, p99 {r['p99Ms']} ms, max {r['maxMs']} ms (target p99 < 250 ms: {'met' if r['p99Ms'] < 250 else 'NOT met'})")
print(f"daemon resident set: idle {idle:.1f} MiB, with the subscribers {loaded:.1f} MiB (target < 64 MiB: {'met' if loaded < 64 else 'NOT met'})")
PY

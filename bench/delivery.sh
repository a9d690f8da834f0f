#!/usr/bin/env bash
# From a person's post to the addressed agent's runtime started, through a real daemon.
#
# Starts `agentteam server` (release build, SQLite, `--deliveries-per-minute 100000`: the load is
# one person's, far past the per-person bound), our daemon on it (its deliverer's debug log on),
# and AGENTS agents, each with a launch recipe of its own directory: a stand-in runtime (`sh`)
# that writes the message id it was handed on stdin and its own start time (ns) into `spawned`
# there, and exits. Then bench/delivery_load.py posts as the person through the daemon's admin
# route:
# 1. one delivery at a time: ONE posts of `@a001 …`, each once the previous one's run ended;
# 2. AGENTS at once: ROUNDS posts each mentioning every agent, each once every run of the
#    previous one ended.
# For each delivery it reports post → runtime started (the poster's clock before the post, the
# stand-in's at its start: both CLOCK_REALTIME on this machine) and the daemon's own part, from the
# feed page that brought the delivery (`delivery in the feed`) to the runtime spawned and handed
# its message (`delivered runtime started`), both from the daemon's log; p50, p99 and max.
# A load where a delivery did not start exactly one run is invalid, not a number.
# Target: the daemon's own part under 50 ms at p99 for one delivery.
#
# Usage: bench/delivery.sh [AGENTS] [ONE] [ROUNDS]   (default 100 50 5)
set -euo pipefail
cd "$(dirname "$0")/.."
agents=${1:-100}
one=${2:-50}
rounds=${3:-5}
cargo build --release --quiet
bin="$PWD/target/release/agentteam"
work="$(mktemp -d)"
daemon_pid="" server_pid=""
cleanup() {
    # shellcheck disable=SC2086 # an empty id drops out
    kill $daemon_pid $server_pid 2>/dev/null || true
    wait 2>/dev/null || true
    rm -rf "$work"
}
trap cleanup EXIT

"$bin" server --listen 127.0.0.1:0 --database "sqlite://$work/server.db" \
    --operator-token-file "$work/operator.token" --deliveries-per-minute 100000 \
    > "$work/server.out" 2> "$work/server.log" &
server_pid=$!
until grep -q "listening on" "$work/server.out" 2>/dev/null; do
    kill -0 "$server_pid" 2>/dev/null || { cat "$work/server.log" >&2; exit 1; }
    sleep 0.1
done
server_url=$(sed -n 's/^listening on //p' "$work/server.out")

# shellcheck source=bench/lib/daemon.sh
. bench/lib/daemon.sh
RUST_LOG=info,agentteam::daemon::deliver=debug daemon_start -- \
    --server-url "$server_url" --operator-token-file "$work/operator.token"

cat > "$work/stand-in.sh" <<'SH'
t=$(date +%s%N)
id=$(sed -n 's/^Message: //p')
echo "$id $t" >> "$PWD/spawned"
SH
for n in $(seq -f "%03g" 1 "$agents"); do
    mkdir -p "$work/agents/a$n"
    "$bin" agent add "a$n" --state-dir "$work/state" > /dev/null
    "$bin" agent recipe "a$n" --state-dir "$work/state" --workdir "$work/agents/a$n" \
        -- sh "$work/stand-in.sh" > /dev/null
done

python3 bench/delivery_load.py "$work" "$agents" "$one" "$rounds"

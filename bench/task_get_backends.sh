#!/usr/bin/env bash
# `task get` throughput through the daemon, per server backend.
#
# For each backend the release `agentteam server` runs on its own (SQLite file, or a database of
# a throwaway PostgreSQL cluster from scripts/pg-cluster), a daemon uses it through
# `--server-url`, a runtime's Exec route is the benchmark's client, and wrk sends `task get` for
# one task at 16 connections for 10 s. The embedded default (server in the daemon's process, on
# SQLite) runs too, as the reference the other two are compared against.
#
# Usage: bench/task_get_backends.sh   (builds the release binary; installs wrk when missing)
set -euo pipefail
cd "$(dirname "$0")/.."
command -v wrk >/dev/null || { apt-get update -qq && apt-get install -y -qq wrk; }
cargo build --release --quiet
bin="$PWD/target/release/agentteam"
work="$(mktemp -d)"
pg="$(mktemp -d /tmp/agentteam-pg.XXXXXX)"
pids=()
cleanup() {
    kill "${pids[@]}" 2>/dev/null || true
    wait 2>/dev/null || true
    scripts/pg-cluster stop "$pg"
    rm -rf "$work"
}
trap cleanup EXIT

# Starts `agentteam server` on DATABASE with TOKEN_FILE; prints its URL.
start_server() {
    local database=$1 token_file=$2 out="$work/server-$RANDOM.out"
    "$bin" server --listen 127.0.0.1:0 --database "$database" --operator-token-file "$token_file" \
        > "$out" 2> /dev/null &
    pids+=($!)
    until grep -q "listening on" "$out" 2>/dev/null; do sleep 0.05; done
    sed -n 's/^listening on //p' "$out"
}

# shellcheck source=bench/lib/task_get.sh
. bench/lib/task_get.sh

# Runs the benchmark against a daemon started with ARGS; prints wrk's summary.
measure() {
    local name=$1; shift
    task_get "$name" "$bin" "$@"
    local errors
    errors="$(grep -c "Non-2xx\|Socket errors" "$work/$name.wrk" || true)"
    echo "$name: $(cat "$work/$name.rps") req/s, p50 $(wrk_field "$name" 50%), p99 $(wrk_field "$name" 99%), error lines $errors"
}

pg_url="$(scripts/pg-cluster start "$pg")"
psql -X -q "$pg_url" -c "CREATE DATABASE bench"
sqlite_server="$(start_server "sqlite://$work/server.db" "$work/sqlite.token")"
pg_server="$(start_server "${pg_url%/*}/bench" "$work/pg.token")"

echo "## task get through the daemon, 16 connections, 10 s, per backend"
measure embedded-sqlite
measure server-sqlite --server-url "$sqlite_server" --operator-token-file "$work/sqlite.token"
measure server-postgres --server-url "$pg_server" --operator-token-file "$work/pg.token"
python3 - "$work" <<'PY'
import sys
work = sys.argv[1]
rps = {name: float(open(f"{work}/{name}.rps").read()) for name in ("embedded-sqlite", "server-sqlite", "server-postgres")}
print(f"ratio server-postgres / server-sqlite: {rps['server-postgres'] / rps['server-sqlite']:.3f}")
print(f"ratio server-sqlite / embedded-sqlite: {rps['server-sqlite'] / rps['embedded-sqlite']:.3f}")
PY

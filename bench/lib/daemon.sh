# Sourced by the benchmarks that start our daemon. Needs `bin` (the agentteam binary) and `work`
# (a scratch directory).

# daemon_start [PREFIX…] [-- DAEMON_FLAGS…]: starts `PREFIX… $bin daemon DAEMON_FLAGS…` (e.g.
# `taskset -c 0 -- --embedded-hop tcp`) on $work/state with the embedded server, logs in
# $work/daemon.{out,log}; sets `daemon_pid` once it listens (fails the script with its log if it
# exits first).
daemon_start() {
    local prefix=() flags=()
    while [ $# -gt 0 ] && [ "$1" != "--" ]; do prefix+=("$1"); shift; done
    [ $# -eq 0 ] || { shift; flags=("$@"); }
    "${prefix[@]}" "$bin" daemon --state-dir "$work/state" "${flags[@]}" > "$work/daemon.out" 2> "$work/daemon.log" &
    daemon_pid=$!
    until grep -q "listening on" "$work/daemon.out" 2>/dev/null; do
        kill -0 "$daemon_pid" 2>/dev/null || { cat "$work/daemon.log" >&2; exit 1; }
        sleep 0.1
    done
}

# runtime_published FILE LINES PID: waits until the runtime PID (an `agentteam run` whose command
# echoes its variables into FILE) has written LINES lines; fails the script if it exits first.
runtime_published() {
    until [ -f "$1" ] && [ "$(wc -l < "$1")" -ge "$2" ]; do
        kill -0 "$3" 2>/dev/null || { echo "agentteam run exited" >&2; exit 1; }
        sleep 0.1
    done
}

# ours_stop: stops the runtime and the daemon, so the core is the peer's alone next.
ours_stop() {
    # shellcheck disable=SC2154,SC2086 # runtime_pid is the caller's; an empty id drops out
    kill $runtime_pid "$daemon_pid" 2>/dev/null || true
    # shellcheck disable=SC2086
    wait $runtime_pid "$daemon_pid" 2>/dev/null || true
    runtime_pid="" daemon_pid=""
}

# operator_token: the operator token file of the server the daemon uses: the embedded server's, in
# the state directory, unless `operator_token_file` names another (a `--server-url` daemon's).
operator_token() {
    echo "${operator_token_file:-$work/state/operator.token}"
}

# audit_stats: the audit counters of the daemon's server (its `/admin/stats`, with the operator
# token on curl's stdin, never argv), as one JSON object: `dropped` (records lost), `recorded`
# (records committed), `refused` (requests answered with an error because their record found no
# room in time), `waited` and `waitedMs` (requests that waited for room, and their waits),
# `queued` (records not yet committed) and `maxLagMs` (the longest from a request's start to its
# record's commit);
# `recorded` and `maxLagMs` are null from a server that does not count them (an older commit's,
# alternated by bench/ab.sh); `reads`, how many times this script read the stats so far: each read
# is an operator request the server records too.
audit_stats() {
    local server
    server=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["serverUrl"])' "$work/state/daemon.json")
    echo >> "$work/audit.reads"
    printf 'Authorization: Bearer %s\n' "$(< "$(operator_token)")" |
        curl -sS -H @- "$server/admin/stats" |
        python3 -c 'import json,sys
e = json.load(sys.stdin); assert e["ok"], e
d = e["data"]; a = d["audit"]
print(json.dumps({"dropped": d["auditDropped"], "recorded": a.get("recorded"), "refused": a["refused"],
                  "waited": a["waited"], "waitedMs": a["waitedMs"], "queued": a["queued"],
                  "maxLagMs": a.get("maxLagMs"), "human": d.get("humanRequests", 0),
                  "reads": int(sys.argv[1])}))' "$(wc -l < "$work/audit.reads")"
}

# audit_dropped: how many audit records the daemon's server has lost so far, plus the requests it
# refused because their record found no room in time: either makes a load invalid.
audit_dropped() {
    audit_stats | python3 -c 'import json,sys; a=json.load(sys.stdin); print(a["dropped"] + a["refused"])'
}

# audit_settled: the daemon's server's audit stats once its queue is empty (every record of what
# was answered so far committed).
audit_settled() {
    local stats
    stats=$(audit_stats)
    until [ "$(python3 -c 'import json,sys; print(json.loads(sys.argv[1])["queued"])' "$stats")" = 0 ]; do
        sleep 0.1
        stats=$(audit_stats)
    done
    echo "$stats"
}

# daemon_quiet: waits until the daemon is idle (under 4% of a core over half a second: what a
# setup's writes left it to do, such as the audit records and the event feed's readers, is done)
# and says how long that took; fails the script after 120 s.
daemon_quiet() {
    local ticks before after waited=0
    ticks() { awk '{ print $14 + $15 }' "/proc/$daemon_pid/stat"; }
    after=$(ticks)
    while :; do
        before=$after
        sleep 0.5
        after=$(ticks)
        [ $((after - before)) -gt 2 ] || break
        waited=$((waited + 1))
        [ "$waited" -lt 240 ] || { echo "the daemon stayed busy for 120 s" >&2; exit 1; }
    done
    echo "the daemon was idle after $((waited * 5 / 10)).$((waited * 5 % 10)) s"
}

# backend_start: with BACKEND=postgres, a throwaway PostgreSQL cluster (scripts/pg-cluster) and an
# `agentteam server` on it, both on core 0 beside where the daemon runs; sets `server_flags` (the
# daemon's `--server-url` and `--operator-token-file`) and `operator_token_file`. Without it, the
# daemon's embedded server on SQLite: `server_flags` is empty. `backend_stop` ends them.
server_flags=() backend_pids=() pg_dir=""
backend_start() {
    case "${BACKEND:-sqlite}" in
        sqlite) return 0 ;;
        postgres) ;;
        *) echo "BACKEND is sqlite or postgres, not ${BACKEND}" >&2; exit 2 ;;
    esac
    pg_dir="$(mktemp -d /tmp/agentteam-pg.XXXXXX)"
    local pg_url
    pg_url="$(taskset -c 0 scripts/pg-cluster start "$pg_dir")"
    operator_token_file="$work/server.token"
    taskset -c 0 "$bin" server --listen 127.0.0.1:0 --database "$pg_url" \
        --operator-token-file "$operator_token_file" > "$work/server.out" 2> "$work/server.log" &
    backend_pids+=($!)
    until grep -q "listening on" "$work/server.out" 2>/dev/null; do
        kill -0 "${backend_pids[-1]}" 2>/dev/null || { cat "$work/server.log" >&2; exit 1; }
        sleep 0.1
    done
    server_flags=(--server-url "$(sed -n 's/^listening on //p' "$work/server.out")"
        --operator-token-file "$operator_token_file")
}
backend_stop() {
    [ ${#backend_pids[@]} -eq 0 ] || { kill "${backend_pids[@]}" 2>/dev/null || true; wait "${backend_pids[@]}" 2>/dev/null || true; }
    backend_pids=()
    [ -z "$pg_dir" ] || scripts/pg-cluster stop "$pg_dir"
    pg_dir=""
}

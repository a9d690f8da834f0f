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

# audit_dropped: how many audit records the daemon's embedded server has lost so far, plus the
# requests it refused because their record found no room in time: either makes a load invalid
# (its `/admin/stats`, with the operator token from the state directory on curl's stdin, never
# argv).
audit_dropped() {
    local server
    server=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["serverUrl"])' "$work/state/daemon.json")
    printf 'Authorization: Bearer %s\n' "$(< "$work/state/operator.token")" |
        curl -sS -H @- "$server/admin/stats" |
        python3 -c 'import json,sys; e=json.load(sys.stdin); assert e["ok"], e; d=e["data"]; print(d["auditDropped"] + d.get("audit", {}).get("refused", 0))'
}

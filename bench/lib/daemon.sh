# Sourced by the benchmarks that start our daemon. Needs `bin` (the agentteam binary) and `work`
# (a scratch directory).

# daemon_start [PREFIX…]: starts `PREFIX… $bin daemon` (e.g. `taskset -c 0`) on $work/state with
# the embedded server, logs in $work/daemon.{out,log}; sets `daemon_pid` once it listens (fails
# the script with its log if it exits first).
daemon_start() {
    "$@" "$bin" daemon --state-dir "$work/state" > "$work/daemon.out" 2> "$work/daemon.log" &
    daemon_pid=$!
    until grep -q "listening on" "$work/daemon.out" 2>/dev/null; do
        kill -0 "$daemon_pid" 2>/dev/null || { cat "$work/daemon.log" >&2; exit 1; }
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

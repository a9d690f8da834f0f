# Sourced by the `task get` benchmarks. Needs `work` (a scratch directory) and `pids` (an array the
# caller's cleanup kills) to be set.

# shellcheck source=bench/lib/daemon.sh
. bench/lib/daemon.sh

# task_get NAME BIN [DAEMON ARGS…]: starts `BIN daemon` (state in $work/NAME) with the arguments, one
# agent, one runtime and one task; then 3 s of warm-up and 10 s of wrk `task get` at 16
# connections. Leaves the wrk report in $work/NAME.wrk, the req/s in $work/NAME.rps, the state dir
# in $work/NAME, and the daemon's and runtime's PIDs in `task_get_pids`.
task_get() {
    local name=$1 bin=$2
    shift 2
    local state="$work/$name"
    "$bin" daemon --state-dir "$state" "$@" > "$work/$name.daemon.out" 2> /dev/null &
    local daemon=$!
    pids+=("$daemon")
    until grep -q "listening on" "$work/$name.daemon.out" 2>/dev/null; do sleep 0.05; done
    "$bin" agent add bench --state-dir "$state" > /dev/null
    "$bin" run --state-dir "$state" --agent bench -- sh -c \
        'echo "$AGENTTEAM_EXEC_BASE_URL"; echo "$AGENTTEAM_EXEC_TOKEN_FILE"; exec sleep 3600' \
        > "$work/$name.runtime.out" &
    local runtime=$!
    pids+=("$runtime")
    task_get_pids=("$daemon" "$runtime")
    runtime_published "$work/$name.runtime.out" 2 "$runtime"
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
    awk '/Requests\/sec/ {print $2}' "$work/$name.wrk" > "$work/$name.rps"
}

# wrk_field NAME PERCENTILE: that latency percentile of NAME's run (e.g. `50%`).
wrk_field() {
    awk -v p="$2" '$1 == p {print $2}' "$work/$1.wrk"
}

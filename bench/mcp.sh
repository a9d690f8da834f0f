#!/usr/bin/env bash
# MCP endpoint benchmark.
#
# Throughput at 16 connections, server on one core (taskset -c 0), wrk on the other (-c 1), for
# each hop of the daemon to its embedded server (in-process, then its loopback TCP listener:
# `--embedded-hop`):
#   (a) ours: tools/list
#   (b) ours: tools/call message_history_read, a page of 20 channel messages (the best case: no
#       thread, no reaction, no attachment)
#   (c) ours: the same page of a thread
#   (d) ours: the same page of a channel whose 20 messages each carry a reaction and an attachment
#   (e) peer: tools/call of a trivial `echo` tool on rmcp 3.11 in stateless JSON mode
#       (bench/mcp-peer, built here from crates.io)
# All use the 2026-07-28 wire (stateless by definition): per-request `_meta`,
# `MCP-Protocol-Version`, `Mcp-Method` and, for tools/call, `Mcp-Name`.
# Targets: (a) >= 1.5 x (e); (b) >= 0.5 x (e).
# A load with a non-2xx answer, a socket error, a timeout, a lost audit record or an answer the
# audit trail does not account for is invalid: the script fails instead of printing a number.
#
# The peer is started only after our daemon has been stopped, so each server has core 0 to itself
# (no idle daemon ticking beside the peer, no peer beside ours).
#
# Usage: bench/mcp.sh            (builds the release binary and the peer first; installs wrk
#                                 from Debian's packages when missing)
#        LOADS=N bench/mcp.sh    loads the channel history read N times per hop (default 1) and
#                                 takes the median for the ratio: this machine's runs of the same
#                                 code move by up to 10%
#        HOPS="in-process" bench/mcp.sh
#                                 only these hops (default: in-process tcp)
#        BIN=PATH bench/mcp.sh  measures that agentteam binary, building nothing of ours
#        COMPETE=1 bench/mcp.sh  runs every load (ours and the peer's) beside a busy loop on core 0:
#                                 the server has about half its core; the audit figures of each
#                                 load (requests that waited for audit room, refusals, the writer's
#                                 lag) are printed, and a load with an answer the audit trail does
#                                 not account for is invalid
#        BACKEND=postgres bench/mcp.sh
#                                 our loads against `agentteam server` on a throwaway PostgreSQL
#                                 cluster (scripts/pg-cluster), both on core 0, reached by the
#                                 daemon over loopback TCP (one hop: `server`)
#        PERF=FILE bench/mcp.sh  also records `perf record --call-graph dwarf` of our daemon for
#                                 8 s during the in-process channel history load into FILE (read it
#                                 with `perf report -i FILE --no-children`); that load's numbers
#                                 are then not clean
set -euo pipefail
cd "$(dirname "$0")/.."
for tool in wrk curl; do
    command -v "$tool" >/dev/null || { apt-get update -qq && apt-get install -y -qq "$tool"; }
done
work="$(mktemp -d)"
# BIN=PATH measures that binary instead of this checkout's (bench/ab.sh alternates two).
bin="${BIN:-}"
if [ -z "$bin" ]; then
    cargo build --release --quiet
    bin="$PWD/target/release/agentteam"
fi
daemon_pid="" runtime_pid="" peer_pid=""
cleanup() {
    # shellcheck disable=SC2086 # empty ids drop out
    kill $peer_pid $runtime_pid $daemon_pid $compete_pid 2>/dev/null || true
    wait 2>/dev/null || true
    backend_stop
    rm -rf "$work"
}
trap cleanup EXIT

# shellcheck source=bench/lib/mcp_load.sh
. bench/lib/mcp_load.sh
# shellcheck source=bench/lib/daemon.sh
. bench/lib/daemon.sh
peer_build

# operator PATH BODY: the embedded server's operator API as this daemon's operator (the token
# from the state directory on curl's stdin, never argv); prints `data`.
operator() {
    local server
    server=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["serverUrl"])' "$work/state/daemon.json")
    printf 'Content-Type: application/json\nAuthorization: Bearer %s\n' "$(< "$(operator_token)")" |
        curl -sS -H @- -d "$2" "$server/admin/workspaces/$workspace$1" |
        python3 -c 'import json,sys; e=json.load(sys.stdin); assert e["ok"], e; print(json.dumps(e["data"]))'
}
field() { python3 -c "import json,sys; print(json.load(sys.stdin)['$1'])"; }

# ours HOP: our daemon on core 0 with the embedded server reached over HOP; the loads of ours.
ours() {
    local hop=$1
    rm -rf "$work/state"
    if [ "$hop" = server ]; then
        daemon_start taskset -c 0 -- "${server_flags[@]}"
    else
        daemon_start taskset -c 0 -- --embedded-hop "$hop"
    fi
    "$bin" agent add bench --state-dir "$work/state" > /dev/null
    # A runtime that publishes its variables and stays up; the benchmark acts as that runtime.
    "$bin" run --state-dir "$work/state" --agent bench -- sh -c 'echo "$AGENTTEAM_MCP_URL"; echo "$AGENTTEAM_MCP_TOKEN_FILE"; exec sleep 3600' > "$work/runtime.out" &
    runtime_pid=$!
    runtime_published "$work/runtime.out" 2 "$runtime_pid"
    local mcp_url token_file channel agent human
    mcp_url="$(sed -n 1p "$work/runtime.out")"
    token_file="$(sed -n 2p "$work/runtime.out")"
    workspace="$(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['workspaceId'])" "$work/state/identity.json")"
    channel="$(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['channelId'])" "$work/state/identity.json")"
    human="$(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['humanId'])" "$work/state/identity.json")"
    agent="$("$bin" agent get bench --json --state-dir "$work/state" | python3 -c 'import json,sys; print(json.load(sys.stdin)["agent"]["id"])')"

    # The pages: 20 messages in the channel, 20 in a thread of it, and 20 in a second channel,
    # each with an attachment (posted by the human) and a reaction (added by the agent).
    local thread rich
    thread="$(operator "/channels/$channel/threads" '{"title":"bench"}' | field threadId)"
    rich="$(operator /channels "{\"name\":\"rich\",\"members\":[\"$human\",\"$agent\"]}" | field channelId)"
    for i in $(seq 1 20); do
        check "$mcp_url" "$token_file" tools/call message_send \
            "{\"target\":\"channel:$channel\",\"content\":\"bench message $i\"}" > /dev/null
        check "$mcp_url" "$token_file" tools/call message_send \
            "{\"target\":\"thread:$thread\",\"content\":\"bench reply $i\"}" > /dev/null
        local message
        message="$(operator /messages "{\"authorHumanId\":\"$human\",\"channelId\":\"$rich\",\"content\":\"report $i\",\"attachments\":[{\"name\":\"report-$i.txt\",\"mediaType\":\"text/plain\",\"text\":\"line $i\"}]}" | field messageId)"
        check "$mcp_url" "$token_file" tools/call reaction_add \
            "{\"messageId\":\"$message\",\"emoji\":\"👍\"}" > /dev/null
    done

    load "ours_${hop}_tools_list" "$mcp_url" "$token_file" tools/list
    local n
    for n in $(seq 1 "${LOADS:-1}"); do
        # The profile, when asked for, is of the in-process channel read.
        local name="ours_${hop}_history"
        [ "$hop" = in-process ] && name=ours_history
        load "$name" "$mcp_url" "$token_file" tools/call message_history_read \
            "{\"target\":\"channel:$channel\",\"limit\":20}"
        cp "$work/$name.rps" "$work/ours_${hop}_history.$n.rps"
    done
    load "ours_${hop}_thread" "$mcp_url" "$token_file" tools/call message_history_read \
        "{\"target\":\"thread:$thread\",\"limit\":20}"
    load "ours_${hop}_rich" "$mcp_url" "$token_file" tools/call message_history_read \
        "{\"target\":\"channel:$rich\",\"limit\":20}"
    # Stop ours before anything else runs: core 0 is then the next server's alone.
    ours_stop
}

backend_start
hops="${HOPS:-in-process tcp}"
# On PostgreSQL the daemon reaches its `agentteam server` over loopback TCP: one hop.
[ "${BACKEND:-sqlite}" = sqlite ] || hops=server
for hop in $hops; do
    ours "$hop"
done
backend_stop

# --- peer: rmcp 3.11 stateless JSON on core 0 ---
peer_start
peer_echo_load

python3 - "$work" $hops <<'PY'
import glob, statistics, sys
work, hops = sys.argv[1], sys.argv[2:]
read = lambda name: float(open(f"{work}/{name}.rps").read())
peer = read("rmcp_tools_call")
print(f"summary: rmcp tools/call {peer:.0f} req/s")
for hop in hops:
    loads = sorted(float(open(p).read()) for p in glob.glob(f"{work}/ours_{hop}_history.*.rps"))
    history = statistics.median(loads)
    if len(loads) > 1:
        print(f"  {hop}: channel history loads " + ", ".join(f"{v:.0f}" for v in loads) + " req/s (median below)")
    tools = read(f"ours_{hop}_tools_list")
    thread, rich = read(f"ours_{hop}_thread"), read(f"ours_{hop}_rich")
    print(f"  {hop}: tools/list {tools:.0f} req/s (ratio {tools/peer:.2f}, target >= 1.5); "
          f"message_history_read channel {history:.0f} ({history/peer:.2f}, target >= 0.5), "
          f"thread {thread:.0f} ({thread/peer:.2f}), with reactions and attachments {rich:.0f} ({rich/peer:.2f})")
PY

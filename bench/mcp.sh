#!/usr/bin/env bash
# MCP endpoint benchmark.
#
# Throughput at 16 connections, server on one core (taskset -c 0), wrk on the other (-c 1), for
# each hop of the daemon to its embedded server (in-process, then its loopback TCP listener:
# `--embedded-hop`):
#   (a) ours: tools/list
#   (b) ours: tools/call message_history_read, pages of 20 channel messages (no thread, no
#       reaction, no attachment)
#   (b1) ours: the same channel pages' cursors, each read one message deep: the same path and
#       statement with one row and a short answer (no target: what a page costs beyond its
#       path is (b) against it)
#   (c) ours: pages of 20 messages of threads
#   (d) ours: pages of 20 channel messages that each carry a reaction and an attachment
#   (e) peer: tools/call of a trivial `echo` tool on rmcp 3.11 in stateless JSON mode
#       (bench/mcp-peer, built here from crates.io)
# Each of (b), (c) and (d) rotates over at least 1,000 distinct pages (4 conversations of 270
# messages, a page after each cursor with 20 messages past it, in a shuffled order): no cache of
# whole answers can stand in for the work (bench/lib/mcp_pages.py writes and checks them).
# All use the 2026-07-28 wire (stateless by definition): per-request `_meta`,
# `MCP-Protocol-Version`, `Mcp-Method` and, for tools/call, `Mcp-Name`.
# Targets, as ratios to (e): (a) >= 1.5 on both hops; (b) >= 0.6 in-process and >= 0.5 over TCP;
# (c) >= 0.45 and >= 0.35; (d) >= 0.4 and >= 0.3. The summary prints one line per target with its
# ratio and whether it is met; PostgreSQL's ratios are printed without a target.
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
#        PERF=DIR bench/mcp.sh   also records `perf record --call-graph dwarf` of our daemon for
#                                 8 s during each in-process read load (channel, thread, rich;
#                                 PERF_LOADS names others) into DIR/NAME.data (read one with
#                                 `perf report -i FILE --no-children`); those loads' numbers are
#                                 then not clean
#        PAGES="C M" bench/mcp.sh
#                                 C conversations of M messages per read (default 4 270): each
#                                 gives M - 19 pages, so 1,000 pages take C x (M - 19) >= 1,000
set -euo pipefail
cd "$(dirname "$0")/.."
for tool in wrk curl; do
    command -v "$tool" >/dev/null || { apt-get update -qq && apt-get install -y -qq "$tool"; }
done
work="$(mktemp -d)"
# The loads PERF profiles: the in-process reads, unless PERF_LOADS names others.
PERF_LOADS="${PERF_LOADS:-ours_in-process_history ours_in-process_thread ours_in-process_rich}"
[ -z "${PERF:-}" ] || mkdir -p "$PERF"
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

# first_arguments FILE: the tool arguments of the first request body in FILE.
first_arguments() {
    head -n1 "$1" | python3 -c 'import json,sys; print(json.dumps(json.load(sys.stdin)["params"]["arguments"]))'
}

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

    # The pages: at least 1,000 distinct pages of 20 messages for each read (channels, threads of
    # the daemon's channel, channels whose every message carries a reaction and an attachment),
    # each over several conversations and cursors, every one checked once (bench/lib/mcp_pages.py).
    local server
    server=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["serverUrl"])' "$work/state/daemon.json")
    # shellcheck disable=SC2086 # PAGES is two words, or none
    python3 bench/lib/mcp_pages.py "$work" "$server" "$(operator_token)" "$workspace" "$human" \
        "$agent" "$channel" "$mcp_url" "$token_file" ${PAGES:+$PAGES}
    daemon_quiet

    load "ours_${hop}_tools_list" "$mcp_url" "$token_file" tools/list
    local n
    for n in $(seq 1 "${LOADS:-1}"); do
        local name="ours_${hop}_history"
        BODIES="$work/channel.bodies" load "$name" "$mcp_url" "$token_file" tools/call \
            message_history_read "$(first_arguments "$work/channel.bodies")"
        cp "$work/$name.rps" "$work/ours_${hop}_history.$n.rps"
    done
    BODIES="$work/one.bodies" load "ours_${hop}_one" "$mcp_url" "$token_file" tools/call \
        message_history_read "$(first_arguments "$work/one.bodies")"
    BODIES="$work/thread.bodies" load "ours_${hop}_thread" "$mcp_url" "$token_file" tools/call \
        message_history_read "$(first_arguments "$work/thread.bodies")"
    BODIES="$work/rich.bodies" load "ours_${hop}_rich" "$mcp_url" "$token_file" tools/call \
        message_history_read "$(first_arguments "$work/rich.bodies")"
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
# The targets as ratios to the peer, per hop; PostgreSQL's hop (`server`) has none yet.
targets = {
    "in-process": {"tools/list": 1.5, "channel page": 0.6, "thread page": 0.45, "reactions+attachments page": 0.4},
    "tcp": {"tools/list": 1.5, "channel page": 0.5, "thread page": 0.35, "reactions+attachments page": 0.3},
}
print(f"summary: rmcp tools/call {peer:.0f} req/s")
missed = checked = 0
for hop in hops:
    loads = sorted(float(open(p).read()) for p in glob.glob(f"{work}/ours_{hop}_history.*.rps"))
    if len(loads) > 1:
        print(f"  {hop}: channel page loads " + ", ".join(f"{v:.0f}" for v in loads) + " req/s (median below)")
    reads = {
        "tools/list": read(f"ours_{hop}_tools_list"),
        "channel page": statistics.median(loads),
        "channel page of one message (the path without the page)": read(f"ours_{hop}_one"),
        "thread page": read(f"ours_{hop}_thread"),
        "reactions+attachments page": read(f"ours_{hop}_rich"),
    }
    for what, rps in reads.items():
        ratio = rps / peer
        target = targets.get(hop, {}).get(what)
        if target is None:
            verdict = "no target"
        elif ratio >= target:
            verdict = f"target >= {target}: met"
            checked += 1
        else:
            checked += 1
            verdict = f"target >= {target}: NOT MET"
            missed += 1
        print(f"  {hop}: {what}: {rps:.0f} req/s, ratio {ratio:.2f} ({verdict})")
if not checked:
    print("summary: no target for these hops (their ratios are published)")
else:
    print(f"summary: {missed} of {checked} targets not met" if missed else f"summary: every target met ({checked})")
PY

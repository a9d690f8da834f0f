#!/usr/bin/env bash
# Trace export benchmark: what a collector costs a call, in one run.
#
# The same Exec `task get` load (16 connections, 10 s; daemon with the embedded server in-process
# on core 0, wrk on core 1, every load bracketed by a full check of its answer and invalid on any
# non-2xx answer, socket error, timeout or dropped audit record) against four daemons, alternated
# ROUNDS times (2 by default): export off; on, to a receiver that answers every export
# (tests/it/otlp_receiver.py as a sink: it reads each export and answers without decoding, so its
# own work takes little from the two cores); on, to a port nothing listens on (the collector is down); on, to a
# receiver that accepts and never answers (stalled). Each load's req/s, p50 and p99 latency, and
# what the daemon's metrics counted of its spans (exported, dropped because the queue was full,
# dropped with a failed export). Ratios are to the "off" load of the same round.
#
# Usage: bench/otel.sh            (builds the release binary first; installs wrk when missing, and
#                                  the receiver's Python packages into target/bench-venv)
#        BIN=PATH bench/otel.sh   measures that agentteam binary
set -euo pipefail
cd "$(dirname "$0")/.."
for tool in wrk curl; do
    command -v "$tool" >/dev/null || { apt-get update -qq && apt-get install -y -qq "$tool"; }
done
bin="${BIN:-}"
if [ -z "$bin" ]; then
    cargo build --release --quiet
    bin="$PWD/target/release/agentteam"
fi
venv="$PWD/target/bench-venv"
if [ ! -x "$venv/bin/python" ] || ! "$venv/bin/python" -c 'import opentelemetry.proto' 2>/dev/null; then
    python3 -m venv "$venv"
    "$venv/bin/pip" install --quiet --disable-pip-version-check \
        "$(grep '^opentelemetry-proto==' scripts/test-requirements.txt)" \
        "$(grep '^protobuf==' scripts/test-requirements.txt)"
fi
rounds="${ROUNDS:-2}"
root="$(mktemp -d)"
work="" daemon_pid="" runtime_pid="" receiver_pid=""
cleanup() {
    # shellcheck disable=SC2086 # empty ids drop out
    kill $runtime_pid $daemon_pid $receiver_pid 2>/dev/null || true
    wait 2>/dev/null || true
    rm -rf "$root"
}
trap cleanup EXIT
# shellcheck source=bench/lib/mcp_load.sh
. bench/lib/mcp_load.sh
# shellcheck source=bench/lib/daemon.sh
. bench/lib/daemon.sh

# receiver MODE: starts the receiver (ok, stall) and sets `receiver_pid` and `receiver_port`.
receiver() {
    "$venv/bin/python" tests/it/otlp_receiver.py --out "$work/otlp.jsonl" --mode "$1" > "$work/receiver.out" &
    receiver_pid=$!
    until grep -q listening "$work/receiver.out" 2>/dev/null; do sleep 0.05; done
    receiver_port="$(awk '{print $2}' "$work/receiver.out")"
}

# one MODE ROUND: one daemon, one load; appends `MODE ROUND rps p50_ms p99_ms exported full failed`.
one() {
    local mode=$1 round=$2 env=()
    work="$root/$mode-$round"
    mkdir -p "$work"
    case "$mode" in
        off) ;;
        up) receiver sink; env=(OTEL_EXPORTER_OTLP_ENDPOINT="http://127.0.0.1:$receiver_port") ;;
        down)
            # A port that was just free: nothing listens on it.
            receiver_port="$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')"
            env=(OTEL_EXPORTER_OTLP_ENDPOINT="http://127.0.0.1:$receiver_port") ;;
        stall) receiver stall; env=(OTEL_EXPORTER_OTLP_ENDPOINT="http://127.0.0.1:$receiver_port") ;;
    esac
    # A stopping daemon waits at most one export deadline for a stalled collector.
    env+=(OTEL_EXPORTER_OTLP_TIMEOUT=2000 OTEL_BSP_SCHEDULE_DELAY=200)
    daemon_start env "${env[@]}" taskset -c 0
    "$bin" agent add bench --state-dir "$work/state" > /dev/null
    "$bin" run --state-dir "$work/state" --agent bench -- sh -c 'echo "$AGENTTEAM_EXEC_BASE_URL"; echo "$AGENTTEAM_EXEC_TOKEN_FILE"; exec sleep 3600' > "$work/runtime.out" &
    runtime_pid=$!
    runtime_published "$work/runtime.out" 2 "$runtime_pid"
    local base token channel task body
    base="$(sed -n 1p "$work/runtime.out")"
    token="$(cat "$(sed -n 2p "$work/runtime.out")")"
    channel="$(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['channelId'])" "$work/state/identity.json")"
    task="$(AGENTTEAM_EXEC_BASE_URL="$base" AGENTTEAM_EXEC_TOKEN_FILE="$(sed -n 2p "$work/runtime.out")" \
        "$bin" exec task create "{\"location\":{\"kind\":\"channel\",\"channelId\":\"$channel\"},\"title\":\"bench\"}" \
        | python3 -c 'import json,sys; print(json.load(sys.stdin)["data"]["task"]["id"])')"
    body="{\"taskId\":\"$task\"}"
    printf 'Authorization: Bearer %s\nContent-Type: application/json\n' "$token" > "$work/headers"
    check() {
        local status
        status="$(curl -sS -H @"$work/headers" -d "$body" -o "$work/task.json" -w '%{http_code}' "$base/task/get")"
        python3 -c 'import json,sys; e=json.load(open(sys.argv[1])); sys.exit(0 if sys.argv[2]=="200" and e["ok"] and e["data"]["task"]["id"]==sys.argv[3] else f"task get: HTTP {sys.argv[2]}")' "$work/task.json" "$status" "$task"
    }
    cat > "$work/post.lua" <<LUA
wrk.method = "POST"
wrk.body = '$body'
wrk.headers["Content-Type"] = "application/json"
wrk.headers["Authorization"] = "Bearer $token"
LUA
    check
    local dropped_before
    dropped_before=$(audit_dropped)
    taskset -c 1 wrk -t1 -c16 -d10s --latency -s "$work/post.lua" "$base/task/get" > "$work/load.wrk"
    load_valid load "$dropped_before" >&2
    check
    "$bin" status --metrics --state-dir "$work/state" > "$work/metrics.txt"
    ours_stop
    # shellcheck disable=SC2086
    [ -z "$receiver_pid" ] || { kill $receiver_pid 2>/dev/null || true; wait $receiver_pid 2>/dev/null || true; receiver_pid=""; }
    python3 - "$mode" "$round" "$work/load.wrk" "$work/metrics.txt" >> "$root/results" <<'PY'
import re, sys
mode, round_, wrk, metrics = sys.argv[1:5]
text = open(wrk).read()
rps = float(re.search(r"Requests/sec:\s+([\d.]+)", text)[1])
def ms(label):
    value, unit = re.search(rf"^\s+{label}%\s+([\d.]+)(us|ms|s)", text, re.M).groups()
    return float(value) * {"us": 0.001, "ms": 1, "s": 1000}[unit]
m = open(metrics).read()
def metric(pattern):
    found = re.search(rf"^{pattern} ([\d.e+]+)", m, re.M)
    return int(float(found[1])) if found else 0
print(mode, round_, rps, ms(50), ms(99),
      metric(r"agentteam_trace_spans_exported_total"),
      metric(r'agentteam_trace_spans_dropped_total\{reason="queue_full"\}'),
      metric(r'agentteam_trace_spans_dropped_total\{reason="export_failed"\}'))
PY
    tail -1 "$root/results" | sed 's/^/turn: /'
}

for round in $(seq 1 "$rounds"); do
    for mode in off up down stall; do
        one "$mode" "$round"
    done
done

python3 - "$root/results" <<'PY'
import statistics, sys
rows = [line.split() for line in open(sys.argv[1])]
by = {}
for mode, round_, rps, p50, p99, exported, full, failed in rows:
    by.setdefault(mode, []).append((int(round_), float(rps), float(p50), float(p99), int(exported), int(full), int(failed)))
off = {r[0]: r for r in by["off"]}
print("| collector | req/s (per round) | p50 ms | p99 ms | req/s / off (median) | p99 / off (median) | spans exported | dropped: queue full | dropped: export failed |")
print("| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
for mode in ["off", "up", "down", "stall"]:
    runs = by[mode]
    ratio = statistics.median(r[1] / off[r[0]][1] for r in runs)
    p99_ratio = statistics.median(r[3] / off[r[0]][3] for r in runs)
    cell = lambda i, f: "; ".join(f.format(r[i]) for r in runs)
    print(f"| {mode} | {cell(1, '{:.0f}')} | {cell(2, '{:.3f}')} | {cell(3, '{:.3f}')} | {ratio:.3f} | {p99_ratio:.3f} | {cell(4, '{}')} | {cell(5, '{}')} | {cell(6, '{}')} |")
PY

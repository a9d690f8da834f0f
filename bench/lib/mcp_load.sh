# Sourced by the MCP-speaking benchmarks (bench/mcp.sh, bench/exec.sh). Needs `work` (a scratch
# directory) to be set; `load` profiles the daemon whose PID is in `daemon_pid` into
# PERF/NAME.data when PERF (a directory) is set and PERF_LOADS names the load.
#
# request, check, load: one JSON-RPC request of the 2026-07-28 wire, its full check with curl, and
# a wrk load on core 1 bracketed by two checks.
# peer_build, peer_start, peer_echo_load: the rmcp 3.11 echo peer (bench/mcp-peer) alone on core 0,
# and its trivial `tools/call echo` under the same load as ours.

version="2026-07-28"
meta="\"_meta\":{\"io.modelcontextprotocol/protocolVersion\":\"$version\",\"io.modelcontextprotocol/clientCapabilities\":{}}"

# request METHOD [TOOL ARGUMENTS]: one JSON-RPC request body.
request() {
    if [ $# -eq 1 ]; then
        printf '{"jsonrpc":"2.0","id":1,"method":"%s","params":{%s}}' "$1" "$meta"
    else
        printf '{"jsonrpc":"2.0","id":1,"method":"%s","params":{"name":"%s","arguments":%s,%s}}' \
            "$1" "$2" "$3" "$meta"
    fi
}

# check URL TOKEN_FILE METHOD [TOOL ARGUMENTS]: sends the request once with curl and fails the
# script unless the answer is 200, application/json, a JSON-RPC result (not an error) and, for
# tools/call, not `isError`. Prints a one-line description of the result.
# The bearer token goes from the file to curl's stdin through shell builtins: never in argv.
check() {
    local url=$1 token_file=$2 method=$3 tool=${4:-}
    {
        printf 'Content-Type: application/json\nAccept: application/json, text/event-stream\n'
        printf 'MCP-Protocol-Version: %s\nMcp-Method: %s\n' "$version" "$method"
        [ -z "$tool" ] || printf 'Mcp-Name: %s\n' "$tool"
        [ -z "$token_file" ] || printf 'Authorization: Bearer %s\n' "$(< "$token_file")"
    } | curl -sS -o "$work/response" -w '%{http_code} %{content_type}' -H @- \
        -d "$(request "${@:3}")" "$url" > "$work/status"
    python3 - "$work/status" "$work/response" "$method" "$tool" <<'PY'
import json, sys
status, _, ctype = open(sys.argv[1]).read().partition(" ")
body = open(sys.argv[2]).read()
method, tool = sys.argv[3], sys.argv[4]
what = f"{method} {tool}".strip()
def fail(why):
    sys.exit(f"{what}: {why}: HTTP {status} {ctype}: {body[:600]}")
if status != "200":
    fail("not 200")
if not ctype.startswith("application/json"):
    fail("not application/json")
try:
    message = json.loads(body)
except ValueError:
    fail("not JSON")
if "error" in message or not isinstance(message.get("result"), dict):
    fail("not a JSON-RPC result")
result = message["result"]
if method == "tools/list":
    print(f"ok: {what}: {len(result.get('tools', []))} tools, {len(body)} bytes")
else:
    if result.get("isError"):
        fail("isError")
    structured = result.get("structuredContent")
    extra = ""
    if isinstance(structured, dict) and "messages" in structured:
        if not structured["messages"]:
            fail("empty history")
        extra = f", {len(structured['messages'])} messages"
    print(f"ok: {what}: {len(body)} bytes{extra}")
PY
}

# The wrk script takes everything from the environment and reads the token file itself (when
# MCP_TOKEN_FILE is set). It has no `response` callback on purpose: handing every body to Lua costs
# wrk about a quarter of its throughput on our 19 KB tool list (42.6k vs 31.0k req/s measured), so
# the load would measure wrk, and unevenly, since the peer's answer is tiny. Correctness is checked
# instead by one full check of the same request before and after each load (the servers are
# stateless, the request never changes), and wrk must report no non-2xx answer.
cat > "$work/mcp.lua" <<'LUA'
wrk.method = "POST"
wrk.body = os.getenv("MCP_BODY")
wrk.headers["Content-Type"] = "application/json"
wrk.headers["Accept"] = "application/json, text/event-stream"
wrk.headers["MCP-Protocol-Version"] = os.getenv("MCP_VERSION")
wrk.headers["Mcp-Method"] = os.getenv("MCP_METHOD")
local tool = os.getenv("MCP_TOOL") or ""
if tool ~= "" then wrk.headers["Mcp-Name"] = tool end
local token_file = os.getenv("MCP_TOKEN_FILE") or ""
if token_file ~= "" then
    local f = assert(io.open(token_file, "r"))
    wrk.headers["Authorization"] = "Bearer " .. f:read("*a"):match("^%s*(.-)%s*$")
    f:close()
end
-- MCP_BODIES, when set, names a file of request bodies (one per line): each connection's next
-- request is the next body, in turn, so the load rotates over them all. Each request is formatted
-- once, in `init` (which wrk calls once it has set the Host header), so the rotation costs wrk a
-- table lookup.
local bodies = os.getenv("MCP_BODIES") or ""
if bodies ~= "" then
    local requests, turn = {}, 0
    init = function()
        for line in io.lines(bodies) do
            requests[#requests + 1] = wrk.format(nil, nil, nil, line)
        end
        assert(#requests > 0, "no request body in " .. bodies)
    end
    request = function()
        turn = turn % #requests + 1
        return requests[turn]
    end
end
LUA

# compete_start, compete_stop: with COMPETE set, a busy loop on core 0 beside the server, at the
# same priority, for the length of one load (the server then has about half its core).
compete_pid=""
compete_start() {
    [ -n "${COMPETE:-}" ] || return 0
    taskset -c 0 sh -c 'while :; do :; done' &
    compete_pid=$!
}
compete_stop() {
    [ -n "$compete_pid" ] || return 0
    kill "$compete_pid" 2>/dev/null || true
    wait "$compete_pid" 2>/dev/null || true
    compete_pid=""
}

# load NAME URL TOKEN_FILE METHOD [TOOL ARGUMENTS]: the full check, 10 s of wrk at 16 connections
# on core 1 (beside a competing load on core 0 with COMPETE set), the full check again; records
# req/s in $work/NAME.rps. With BODIES set (a file of request bodies, one per line, each checked
# by whoever wrote it), wrk rotates over those bodies instead; the checks send the one given. A
# load with a socket error (connect, read, write) or a timeout is invalid, not a number: the
# script fails. While our daemon runs (`daemon_pid` set), its server's
# audit trail is accounted too (`load_valid`).
load() {
    local name=$1 url=$2 token_file=$3
    check "$url" "$token_file" "${@:4}"
    local method=$4 tool=${5:-}
    echo "## $name: 16 connections, 10 s${COMPETE:+, beside a competing load on core 0}"
    local perf_pid=""
    if [ -n "${PERF:-}" ] && [ -n "${daemon_pid:-}" ] && [ -n "${PERF_LOADS:-}" ] &&
        [[ " $PERF_LOADS " == *" $name "* ]]; then
        perf record -q --call-graph dwarf,16384 -F 499 -p "$daemon_pid" -o "$PERF/$name.data" -- sleep 8 &
        perf_pid=$!
    fi
    local audit_before=""
    # Our daemon runs (its PID is set) while ours is loaded; the peer has no audit trail, and
    # neither has `tools/list`, which the daemon answers from its catalog without the server.
    if [ -n "${daemon_pid:-}" ] && [ "$method" != tools/list ]; then
        audit_before=$(audit_settled)
    fi
    compete_start
    MCP_BODY="$(request "${@:4}")" MCP_VERSION="$version" MCP_METHOD="$method" MCP_TOOL="$tool" \
        MCP_TOKEN_FILE="$token_file" MCP_BODIES="${BODIES:-}" \
        taskset -c 1 wrk -t1 -c16 -d10s --latency -s "$work/mcp.lua" "$url" | tee "$work/$name.wrk"
    compete_stop
    [ -z "$perf_pid" ] || wait "$perf_pid"
    load_valid "$name" "$audit_before"
    check "$url" "$token_file" "${@:4}"
    awk '/^Requests\/sec:/ { print $2 }' "$work/$name.wrk" > "$work/$name.rps"
}

# load_valid NAME [AUDIT_BEFORE]: fails the script unless the load in $work/NAME.wrk saw no socket
# error or timeout (wrk prints `Socket errors: connect N, read N, write N, timeout N` only when
# there were some). With AUDIT_BEFORE (`audit_settled` before the load), the daemon's server's audit
# trail must account for every answer: no record lost, every 2xx answer recorded (records
# committed >= 2xx answers counted by wrk), and every other answer one the server refused because
# its record found no room in time. Without COMPETE a refusal makes the load invalid too; with it,
# refusals are counted and reported. Writes the load's audit figures to $work/NAME.audit.
load_valid() {
    local name=$1 audit_before=${2:-}
    if grep -q 'Socket errors' "$work/$name.wrk"; then
        echo "$name: INVALID LOAD: $(grep 'Socket errors' "$work/$name.wrk")" >&2; exit 1
    fi
    if [ -z "$audit_before" ]; then
        if grep -q 'Non-2xx' "$work/$name.wrk"; then
            echo "$name: INVALID LOAD: non-2xx answers" >&2; exit 1
        fi
        return 0
    fi
    local audit_after
    audit_after=$(audit_settled)
    python3 - "$work/$name.wrk" "$audit_before" "$audit_after" "${COMPETE:-}" "$work/$name.audit" <<'PY'
import json, re, sys
wrk, before, after, compete, out = open(sys.argv[1]).read(), json.loads(sys.argv[2]), json.loads(sys.argv[3]), sys.argv[4], sys.argv[5]
answers = int(re.search(r"(\d+) requests in", wrk).group(1))
errors = int(m.group(1)) if (m := re.search(r"Non-2xx or 3xx responses: (\d+)", wrk)) else 0
counted = after["recorded"] is not None
keys = ("dropped", "recorded", "refused", "waited", "waitedMs") if counted else ("dropped", "refused", "waited", "waitedMs")
delta = {key: after[key] - before[key] for key in keys}
name = sys.argv[1].rsplit("/", 1)[-1].removesuffix(".wrk")
def invalid(why):
    sys.exit(f"{name}: INVALID LOAD: {why} ({answers} answers, {errors} non-2xx, audit {delta})")
if delta["dropped"]:
    invalid(f"the server lost {delta['dropped']} audit records")
if not counted:
    # An older server counts no committed records: only losses and refusals can be checked.
    if errors:
        invalid(f"{errors} non-2xx answers")
    print(f"{name}: valid: {answers} answers, no record lost, none refused (this server does not count its records)")
    sys.exit(0)
if delta["recorded"] < answers - errors:
    invalid(f"{answers - errors} answers served but {delta['recorded']} records committed")
if errors != delta["refused"]:
    invalid(f"{errors} non-2xx answers but {delta['refused']} audit refusals")
if errors and not compete:
    invalid(f"{errors} requests refused for want of audit room")
# wrk stops counting at 10 s; up to one request per connection may still be answered and recorded,
# and so is each read of the stats from the one before the load to the last after it, and each
# read of the daemon's event feed (the changes the load made wake it).
stats_reads = after["reads"] - before["reads"] + 1
feed_reads = after.get("human", 0) - before.get("human", 0)
if delta["recorded"] + delta["refused"] > answers + 16 + stats_reads + feed_reads:
    invalid(f"{delta['recorded']} records for {answers} answers")
figures = dict(delta, answers=answers, maxLagMs=after["maxLagMs"])
json.dump(figures, open(out, "w"))
wait = f", mean wait {delta['waitedMs'] / delta['waited']:.0f} ms" if delta["waited"] else ""
print(f"{name}: valid: {answers} answers, {delta['recorded']} records committed, "
      f"{delta['refused']} refused, {delta['waited']} waited for audit room{wait}, "
      f"a record committed at most {after['maxLagMs']} ms after its request began "
      f"(since start; the daemon's event-feed long poll, up to 25 s, counts too)")
PY
}

# peer_build: builds bench/mcp-peer (rmcp 3.11.0 from crates.io, its committed lock file).
peer_build() {
    CARGO_TARGET_DIR="$PWD/target/bench-peer" \
        cargo build --release --quiet --locked --manifest-path bench/mcp-peer/Cargo.toml
    peer_bin="$PWD/target/bench-peer/release/mcp-peer"
}

# peer_start [BUSY_US [TEXT_BYTES]]: starts the peer alone on core 0 (each `echo` spinning BUSY_US
# first, and its text padded to TEXT_BYTES, when given); sets `peer_pid` and `peer_url`.
peer_start() {
    # shellcheck disable=SC2086 # no busy wait: no argument
    taskset -c 0 "$peer_bin" 0 ${1:-} ${2:-} > "$work/peer.out" 2> "$work/peer.log" &
    peer_pid=$!
    until grep -q "listening on" "$work/peer.out" 2>/dev/null; do
        kill -0 "$peer_pid" 2>/dev/null || { cat "$work/peer.log" >&2; exit 1; }
        sleep 0.1
    done
    peer_url="http://$(awk '/listening on/ { print $3; exit }' "$work/peer.out")/mcp"
}

# peer_echo_load: the peer's trivial `tools/call echo` under the same load (rmcp_tools_call).
peer_echo_load() {
    load rmcp_tools_call "$peer_url" "" tools/call echo '{"text":"hi"}'
}

#!/usr/bin/env bash
# Knowledge and memory search benchmark, through the MCP route of a real daemon (embedded server).
#
#   kb_search:     10,000 Markdown documents imported with `agentteam admin kb import`
#   memory_search: 10,000 Markdown files in the runtime's memory directory
# Each tool: 10 s of wrk at 1 connection and at 16, rotating through the corpus's query set
# (common words, rare words, two-term queries, a CJK phrase), then 10 s of common-word queries
# alone at 1 connection (the worst case). Latency p50/p99 from wrk. Daemon on core 0, wrk on
# core 1. Target: p99 under 20 ms at one connection.
#
# Peers, for ratios (the same machine, the same run, the same queries):
#   kb_search     → the plain FTS5 query (every word ranked, no common-word pruning) on the same
#                   database file, in-process (python sqlite3): the straightforward engine query
#                   against ours with its three HTTP hops;
#   memory_search → `grep -rli` over the memory directory: the fallback a model takes without
#                   the index (what the classified result tells it to do).
#
# With --postgres, the knowledge base is on PostgreSQL instead: a throwaway cluster
# (scripts/pg-cluster) and `agentteam server` on it, with the daemon on `--server-url`; cluster,
# server and daemon all on core 0. There is no in-process peer for that engine here.
#
# Usage: bench/search.sh [--postgres]   (builds the release binary; installs wrk from Debian
#                                        when missing)
set -euo pipefail
cd "$(dirname "$0")/.."
backend=sqlite
[ "${1:-}" != --postgres ] || backend=postgres
for tool in wrk curl; do
    command -v "$tool" >/dev/null || { apt-get update -qq && apt-get install -y -qq "$tool"; }
done
cargo build --release --quiet
bin="$PWD/target/release/agentteam"
work="$(mktemp -d)"
daemon_pid="" runtime_pid="" server_pid="" pg_dir=""
cleanup() {
    # shellcheck disable=SC2086 # empty ids drop out
    kill $runtime_pid $daemon_pid $server_pid 2>/dev/null || true
    wait 2>/dev/null || true
    [ -z "$pg_dir" ] || scripts/pg-cluster stop "$pg_dir"
    rm -rf "$work"
}
trap cleanup EXIT
# shellcheck source=bench/lib/daemon.sh
. bench/lib/daemon.sh
state="$work/state"
operator_token_file="$state/operator.token"
daemon_args=()
if [ "$backend" = postgres ]; then
    pg_dir="$(mktemp -d /tmp/agentteam-pg.XXXXXX)"
    pg_url="$(taskset -c 0 scripts/pg-cluster start "$pg_dir")"
    operator_token_file="$work/operator.token"
    taskset -c 0 "$bin" server --listen 127.0.0.1:0 --database "$pg_url" \
        --operator-token-file "$operator_token_file" > "$work/server.out" 2> "$work/server.log" &
    server_pid=$!
    until grep -q "listening on" "$work/server.out" 2>/dev/null; do
        kill -0 "$server_pid" 2>/dev/null || { cat "$work/server.log" >&2; exit 1; }
        sleep 0.1
    done
    daemon_args=(--server-url "$(sed -n 's/listening on //p' "$work/server.out")" --operator-token-file "$operator_token_file")
fi

taskset -c 0 "$bin" daemon --state-dir "$state" "${daemon_args[@]}" > "$work/daemon.out" 2> "$work/daemon.log" &
daemon_pid=$!
until grep -q "listening on" "$work/daemon.out" 2>/dev/null; do
    kill -0 "$daemon_pid" 2>/dev/null || { cat "$work/daemon.log" >&2; exit 1; }
    sleep 0.1
done
agent="$("$bin" agent add bench --json --state-dir "$state" | python3 -c 'import json,sys; print(json.load(sys.stdin)["agent"]["id"])')"

# The corpora: the knowledge base's and the memory directory's (another seed).
python3 bench/search_corpus.py "$work/kb" 10000 7 > "$work/kb.json"
python3 bench/search_corpus.py "$state/memory/$agent" 10000 8 > "$work/memory.json"
chmod 700 "$state/memory/$agent"
echo "corpora: $(cat "$work/kb.json" | python3 -c 'import json,sys; d=json.load(sys.stdin); print(d["files"], "files,", d["sections"], "sections each")')"

# The operator's setup: a human in the agent's channel, a source granted to it, the import.
server_url="$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["serverUrl"])' "$state/daemon.json")"
workspace="$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["workspaceId"])' "$state/identity.json")"
channel="$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["channelId"])' "$state/identity.json")"
operator() { # PATH BODY → data as JSON; the token goes to curl's stdin, never argv
    printf 'Content-Type: application/json\nAuthorization: Bearer %s\n' "$(< "$operator_token_file")" |
        curl -sS -H @- -d "$2" "$server_url/admin/workspaces/$workspace$1" |
        python3 -c 'import json,sys; e=json.load(sys.stdin); assert e["ok"], e; print(json.dumps(e["data"]))'
}
field() { python3 -c "import json,sys; print(json.load(sys.stdin)['$1'])"; }
human="$(operator /humans '{"handle":"asker","displayName":"Asker"}' | field humanId)"
operator "/channels/$channel/members" "{\"memberId\":\"$human\"}" > /dev/null
message="$(operator /messages "{\"authorHumanId\":\"$human\",\"channelId\":\"$channel\",\"content\":\"what do we know?\"}" | field messageId)"
source="$("$bin" admin --json kb source --workspace "$workspace" --name bench --server-url "$server_url" --operator-token-file "$operator_token_file" | field sourceId)"
"$bin" admin kb grant --workspace "$workspace" --source "$source" --channel "$channel" \
    --server-url "$server_url" --operator-token-file "$operator_token_file" > /dev/null
import_started=$(date +%s.%N)
"$bin" admin --json kb import --workspace "$workspace" --source "$source" "$work/kb" \
    --server-url "$server_url" --operator-token-file "$operator_token_file" 2> "$work/import.log" > "$work/import.json"
import_seconds=$(python3 -c "import time; print(f'{time.time() - $import_started:.1f}')")
echo "import: $(cat "$work/import.json") in ${import_seconds} s"

"$bin" run --state-dir "$state" --agent bench --turn-target "channel:$channel" --turn-message "$message" \
    -- sh -c 'echo "$AGENTTEAM_MCP_URL"; echo "$AGENTTEAM_MCP_TOKEN_FILE"; exec sleep 3600' > "$work/runtime.out" &
runtime_pid=$!
runtime_published "$work/runtime.out" 2 "$runtime_pid"
mcp_url="$(sed -n 1p "$work/runtime.out")"
token_file="$(sed -n 2p "$work/runtime.out")"

# bodies TOOL CORPUS_JSON [common]: one JSON-RPC body per query, one per line.
bodies() {
    python3 - "$1" "$2" "${3:-all}" <<'PY'
import json, sys
tool, corpus, which = sys.argv[1], sys.argv[2], sys.argv[3]
queries = json.load(open(corpus))["queries"]
chosen = queries["common"] if which == "common" else [q for group in queries.values() for q in group]
meta = {"io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": {}}
for query in chosen:
    arguments = {"query": query}
    print(json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                      "params": {"name": tool, "arguments": arguments, "_meta": meta}}))
PY
}

# check TOOL BODIES_FILE: each body once with curl; fails unless every answer is a result that is
# not isError, and (for the memory index) until the index holds the whole corpus.
check() {
    python3 - "$mcp_url" "$token_file" "$1" "$2" <<'PY'
import json, sys, urllib.request
url, token_file, tool, bodies = sys.argv[1:5]
token = open(token_file).read().strip()
hits = 0
for body in open(bodies):
    request = urllib.request.Request(url, data=body.encode(), method="POST", headers={
        "Content-Type": "application/json", "Accept": "application/json, text/event-stream",
        "MCP-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/call", "Mcp-Name": tool,
        "Authorization": f"Bearer {token}"})
    answer = json.load(urllib.request.urlopen(request))
    result = answer.get("result") or sys.exit(f"{tool}: not a result: {answer}")
    if result.get("isError"):
        sys.exit(f"{tool}: isError: {result['content'][0]['text']}")
    structured = result["structuredContent"]
    hits += len(structured.get("documents", structured.get("matches", [])))
print(f"ok: {tool}: every query answered, {hits} hits in all")
PY
}

cat > "$work/search.lua" <<'LUA'
local bodies = {}
for line in io.lines(os.getenv("BODIES")) do bodies[#bodies + 1] = line end
local f = assert(io.open(os.getenv("TOKEN_FILE"), "r"))
local token = f:read("*a"):match("^%s*(.-)%s*$")
f:close()
local i = 0
request = function()
    i = i % #bodies + 1
    return wrk.format("POST", nil, {
        ["Content-Type"] = "application/json",
        ["Accept"] = "application/json, text/event-stream",
        ["MCP-Protocol-Version"] = "2026-07-28",
        ["Mcp-Method"] = "tools/call",
        ["Mcp-Name"] = os.getenv("TOOL"),
        ["Authorization"] = "Bearer " .. token,
    }, bodies[i])
end
LUA

# load NAME TOOL BODIES CONNECTIONS: 10 s of wrk; records p50/p99 (ms) and req/s.
load() {
    local name=$1 tool=$2 bodies_file=$3 connections=$4
    echo "## $name: $tool, $connections connection(s), 10 s"
    BODIES="$bodies_file" TOKEN_FILE="$token_file" TOOL="$tool" \
        taskset -c 1 wrk -t1 -c"$connections" -d10s --latency -s "$work/search.lua" "$mcp_url" | tee "$work/$name.wrk"
    if grep -q 'Non-2xx' "$work/$name.wrk"; then echo "$name: non-2xx answers under load" >&2; exit 1; fi
    python3 - "$work/$name.wrk" > "$work/$name.stats" <<'PY'
import re, sys
text = open(sys.argv[1]).read()
def ms(label):
    value, unit = re.search(rf"^\s+{label}\s+([\d.]+)(us|ms|s)\s*$", text, re.M).groups()
    return float(value) * {"us": 0.001, "ms": 1.0, "s": 1000.0}[unit]
rps = float(re.search(r"^Requests/sec:\s+([\d.]+)", text, re.M).group(1))
print(f"{ms('50%'):.2f} {ms('99%'):.2f} {rps:.0f}")
PY
}

for tool in kb_search memory_search; do
    corpus="$work/kb.json"
    [ "$tool" = kb_search ] || corpus="$work/memory.json"
    bodies "$tool" "$corpus" > "$work/$tool.all"
    bodies "$tool" "$corpus" common > "$work/$tool.common"
done
# The memory index is built from the files at launch; its first call waits for it.
until python3 -c 'import json,sys; m=json.load(sys.stdin)["data"]["memory"]; sys.exit(0 if m["files"] >= 10000 and m["building"] == 0 else 1)' \
    < <(curl -sS -H "Authorization: Bearer $(< "$state/admin.token")" "$(sed -n 's/listening on //p' "$work/daemon.out")/api/admin/status"); do
    sleep 0.2
done
grep "memory index ready" "$work/daemon.log" | tail -1

for tool in kb_search memory_search; do
    check "$tool" "$work/$tool.all"
    load "${tool}_mixed_c1" "$tool" "$work/$tool.all" 1
    load "${tool}_mixed_c16" "$tool" "$work/$tool.all" 16
    load "${tool}_common_c1" "$tool" "$work/$tool.common" 1
    check "$tool" "$work/$tool.all"
done
rss_kb=$(awk '/VmRSS/ { print $2 }' "/proc/$daemon_pid/status")

# Peers: the same queries, sequentially, p50/p99 over 20 rounds (the FTS5 one on SQLite only).
[ "$backend" = sqlite ] || echo "0 0" > "$work/peer_kb.stats"
[ "$backend" = sqlite ] && python3 - "$state/server.db" "$work/kb.json" "$source" > "$work/peer_kb.stats" <<'PY'
import json, sqlite3, sys, time
db, corpus, source = sys.argv[1:4]
queries = [q for group in json.load(open(corpus))["queries"].values() for q in group]
con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
token = con.execute("SELECT src_tok FROM kb_documents WHERE source_id = ? LIMIT 1", (source,)).fetchone()[0]
def expression(query):
    words = [w.lower() for w in query.split() if w.isascii()]
    cjk = [w for w in query.split() if not w.isascii()]
    parts = []
    if words:
        parts.append("{title body} : (" + " OR ".join(f'"{w}"' for w in words) + ")")
    for run in cjk:
        grams = " ".join(run[i:i + 2] for i in range(len(run) - 1))
        parts.append(f'cjk : "{grams}"')
    return f'({" OR ".join(parts)}) AND src_tok : ("{token}")'
times = []
for _ in range(20):
    for query in queries:
        started = time.perf_counter()
        con.execute("SELECT d.id, d.title, snippet(kb_fts, 1, '[', ']', '…', 24), -rank FROM kb_fts "
                    "JOIN kb_documents d ON d.seq = kb_fts.rowid WHERE kb_fts MATCH ? ORDER BY rank LIMIT 5",
                    (expression(query),)).fetchall()
        times.append((time.perf_counter() - started) * 1000)
times.sort()
print(f"{times[len(times) // 2]:.2f} {times[int(len(times) * 0.99)]:.2f}")
PY
python3 - "$state/memory/$agent" "$work/memory.json" > "$work/peer_memory.stats" <<'PY'
import json, subprocess, sys, time
root, corpus = sys.argv[1:3]
queries = [q for group in json.load(open(corpus))["queries"].values() for q in group]
times = []
for _ in range(5):
    for query in queries:
        started = time.perf_counter()
        subprocess.run(["grep", "-rliF", "-e", query.split()[0], root], stdout=subprocess.DEVNULL, check=False)
        times.append((time.perf_counter() - started) * 1000)
times.sort()
print(f"{times[len(times) // 2]:.2f} {times[int(len(times) * 0.99)]:.2f}")
PY

python3 - "$work" "$rss_kb" "$import_seconds" "$backend" <<'PY'
import sys
work, rss_kb, import_seconds, backend = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
stat = lambda name: [float(x) for x in open(f"{work}/{name}.stats").read().split()]
print()
print(f"knowledge base on {backend}; daemon RSS after both loads: {rss_kb / 1024:.0f} MiB"
      f"{' (the embedded server included)' if backend == 'sqlite' else ''}; kb import of 10,000 files: {import_seconds} s")
print("| tool | queries | connections | p50 ms | p99 ms | req/s |")
print("|---|---|---|---|---|---|")
for tool in ("kb_search", "memory_search"):
    for label, name, c in (("mixed", "mixed_c1", 1), ("mixed", "mixed_c16", 16), ("common words", "common_c1", 1)):
        p50, p99, rps = stat(f"{tool}_{name}")
        print(f"| {tool} | {label} | {c} | {p50:.2f} | {p99:.2f} | {rps:.0f} |")
kb_peer, memory_peer = stat("peer_kb"), stat("peer_memory")
kb, memory = stat("kb_search_mixed_c1"), stat("memory_search_mixed_c1")
if kb_peer[0] > 0:
    print(f"peer kb (plain FTS5 query in-process): p50 {kb_peer[0]:.2f} ms, p99 {kb_peer[1]:.2f} ms; "
          f"ratio kb_search/peer p50 {kb[0] / kb_peer[0]:.2f}, p99 {kb[1] / kb_peer[1]:.2f}")
print(f"peer memory (grep -rli): p50 {memory_peer[0]:.2f} ms, p99 {memory_peer[1]:.2f} ms; "
      f"ratio grep/memory_search p50 {memory_peer[0] / memory[0]:.1f}, p99 {memory_peer[1] / memory[1]:.1f}")
ok = all(stat(f"{t}_{n}")[1] < 20 for t in ("kb_search", "memory_search") for n in ("mixed_c1", "common_c1"))
print(f"target p99 < 20 ms at one connection: {'met' if ok else 'NOT met'}")
PY

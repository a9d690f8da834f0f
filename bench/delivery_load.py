"""The load of bench/delivery.sh: posts as the person, then reads when each addressed agent's
stand-in runtime started (its `spawned` file) and the daemon's part of it (its debug log).

Usage: delivery_load.py WORK AGENTS ONE ROUNDS
"""

import json
import re
import sys
import time
import urllib.request
from datetime import datetime, timezone
from pathlib import Path

work, agents, one, rounds = Path(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
daemon = json.loads((work / "state/daemon.json").read_text())["baseUrl"]
# The admin token reaches this process through its file, never argv.
token = (work / "state/admin.token").read_text().strip()
handles = [f"a{n:03d}" for n in range(1, agents + 1)]


def human(action, payload):
    request = urllib.request.Request(
        f"{daemon}/api/admin/human/{action}",
        data=json.dumps(payload).encode(),
        headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"},
    )
    answer = json.load(urllib.request.urlopen(request, timeout=30))
    assert answer["ok"], answer
    return answer["data"]


def spawned():
    """message id -> [start time (ns)] of every stand-in run so far, over all agents."""
    runs = {}
    for path in (work / "agents").glob("*/spawned"):
        for line in path.read_text().splitlines():
            message, at = line.split()
            runs.setdefault(message, []).append(int(at))
    return runs


def settled(message, expected, deadline_s=120):
    """Waits until `expected` deliveries of `message` ended (each run exited and was recorded)."""
    deadline = time.monotonic() + deadline_s
    while True:
        listed = human("delivery_list", {"limit": 100})["deliveries"]
        mine = [d for d in listed if d["messageId"] == message]
        if len(mine) == expected and all(d["state"] not in ("pending", "started") for d in mine):
            return mine
        if time.monotonic() > deadline:
            sys.exit(f"INVALID: {message}'s deliveries did not end in time: {mine}")
        time.sleep(0.01)


def load(name, content, count, expected):
    posts = []
    for _ in range(count):
        at = time.time_ns()
        message = human("message_post", {"target": general, "content": content})["message"]["id"]
        posts.append((message, at))
        for delivery in settled(message, expected):
            if delivery["state"] != "ended":
                sys.exit(f"INVALID: delivery {delivery['id']} is {delivery['state']}: {delivery.get('reason')}")
    runs = spawned()
    totals = []
    for message, at in posts:
        starts = runs.get(message, [])
        if len(starts) != expected:
            sys.exit(f"INVALID: {message} started {len(starts)} runs, not {expected}")
        totals += [(start - at) / 1e6 for start in starts]
    return name, totals, [m for m, _ in posts]


def daemon_part(messages):
    """ms from `delivery in the feed` to `delivered runtime started`, per delivery of `messages`."""
    stamp = re.compile(r"^(\S+Z)\s+DEBUG .*?(delivery in the feed|delivered runtime started).*delivery=(dlv_\w+)")
    seen, started = {}, {}
    for line in (work / "daemon.log").read_text().splitlines():
        found = stamp.search(line)
        if not found:
            continue
        at = datetime.strptime(found[1].rstrip("Z")[:26], "%Y-%m-%dT%H:%M:%S.%f").replace(tzinfo=timezone.utc)
        into = seen if found[2] == "delivery in the feed" else started
        into.setdefault(found[3], at)
    parts = []
    ids = ids_of(messages)
    for delivery_id, at in started.items():
        if delivery_id in ids:
            if delivery_id not in seen:
                sys.exit(f"INVALID: {delivery_id} started with no feed line before it")
            parts.append((at - seen[delivery_id]).total_seconds() * 1000)
    return parts


def ids_of(messages, cache={}):
    key = tuple(messages)
    if key not in cache:
        ids, cursor = set(), None
        wanted = set(messages)
        while True:
            payload = {"limit": 100}
            if cursor:
                payload["cursor"] = cursor
            page = human("delivery_list", payload)
            ids |= {d["id"] for d in page["deliveries"] if d["messageId"] in wanted}
            cursor = page.get("nextCursor")
            if not cursor:
                break
        cache[key] = ids
    return cache[key]


def pct(values, q):
    values = sorted(values)
    return values[min(len(values) - 1, int(round(q / 100 * (len(values) - 1))))]


general = human("conversation_list", {"limit": 100})
general = next(c["target"] for c in general["conversations"] if c["name"].lstrip("#") == "general")
results = [
    load("one at a time", "@a001 a delivery", one, 1),
    load(f"{agents} at once", " ".join(f"@{h}" for h in handles) + " all of you", rounds, agents),
]
print("| load | deliveries | post → runtime started p50 | p99 | max | daemon's part p50 | p99 | max |")
print("| --- | --- | --- | --- | --- | --- | --- | --- |")
for name, totals, messages in results:
    parts = daemon_part(messages)
    if len(parts) != len(totals):
        sys.exit(f"INVALID: {len(parts)} daemon log pairs for {len(totals)} runs")
    print(
        f"| {name} | {len(totals)} | {pct(totals, 50):.1f} ms | {pct(totals, 99):.1f} ms | {max(totals):.1f} ms "
        f"| {pct(parts, 50):.1f} ms | {pct(parts, 99):.1f} ms | {max(parts):.1f} ms |"
    )
target = pct(daemon_part(results[0][2]), 99)
print(f"target: the daemon's part at p99 for one delivery {target:.1f} ms < 50 ms: {'met' if target < 50 else 'NOT MET'}")

"""The synthetic feed subscribers of bench/feed.sh.

SUBSCRIBERS asyncio clients, each on its own keep-alive HTTP/1.1 connection to the daemon, follow
`POST /api/admin/feed` by its cursor (long polls of up to 25 s), as `agentteam read --follow` and a
console tab do. Once all are waiting, one poster posts MESSAGES messages, one after another, as
an agent through the server's runtime route (the way a runtime's `message_send` reaches it); each
subscriber notes when each message's event reached it. Prints one JSON object: the latencies
(post answered -> event received, ms) at p50/p90/p99/max over every (message, subscriber), and
how many were missed or repeated (a valid run has none).

Usage: feed_subscribers.py DAEMON_URL ADMIN_TOKEN_FILE SERVER_URL WORKSPACE AGENT CHANNEL CREDENTIAL_FILE SUBSCRIBERS MESSAGES READY_FILE
(READY_FILE is created once every subscriber waits on the feed.)
"""

import asyncio
import json
import sys
import time
from urllib.parse import urlsplit


class Connection:
    """One keep-alive HTTP/1.1 connection, JSON in and out."""

    def __init__(self, url):
        parts = urlsplit(url)
        self.host, self.port = parts.hostname, parts.port
        self.reader = self.writer = None

    async def post(self, path, bearer, body):
        if self.writer is None:
            self.reader, self.writer = await asyncio.open_connection(self.host, self.port)
        data = json.dumps(body).encode()
        head = (
            f"POST {path} HTTP/1.1\r\nHost: {self.host}:{self.port}\r\n"
            f"Authorization: Bearer {bearer}\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(data)}\r\n\r\n"
        )
        self.writer.write(head.encode() + data)
        await self.writer.drain()
        status = int((await self.reader.readline()).split()[1])
        length = 0
        while (line := await self.reader.readline()) not in (b"\r\n", b""):
            name, _, value = line.decode().partition(":")
            if name.lower() == "content-length":
                length = int(value)
        payload = json.loads(await self.reader.readexactly(length))
        if status != 200:
            raise RuntimeError(f"{path} answered {status}: {payload}")
        return payload["data"]


async def main():
    (daemon_url, admin_token_file, server_url, workspace, agent, channel, credential_file,
     subscribers, messages, ready_file) = sys.argv[1:]
    admin_token = open(admin_token_file).read().strip()
    subscribers, messages = int(subscribers), int(messages)
    credential = open(credential_file).read().strip()
    posted = {}  # message content -> when its post was answered
    received = [dict() for _ in range(subscribers)]  # per subscriber: content -> when, or a count
    repeats = 0
    ready = asyncio.Event()
    waiting = 0
    done = asyncio.Event()

    async def subscriber(index):
        nonlocal waiting, repeats
        connection = Connection(daemon_url)
        cursor = (await connection.post("/api/admin/feed", admin_token, {}))["cursor"]
        waiting += 1
        if waiting == subscribers:
            open(ready_file, "w").close()
            ready.set()
        mine = received[index]
        while len(mine) < messages:
            page = await connection.post(
                "/api/admin/feed", admin_token, {"after": cursor, "waitMs": 25000}
            )
            now = time.monotonic()
            for event in page["events"]:
                content = event.get("message", {}).get("content", "")
                if event["kind"] != "message" or not content.startswith("feed-bench-"):
                    continue
                if content in mine:
                    repeats += 1
                mine[content] = now
            cursor = page["cursor"]

    async def poster():
        await ready.wait()
        connection = Connection(server_url)
        path = f"/runtime/servers/{workspace}/agents/{agent}/tools/message_send"
        for n in range(messages):
            content = f"feed-bench-{n}"
            await connection.post(path, credential, {"target": f"channel:{channel}", "content": content})
            posted[content] = time.monotonic()
            # One message at a time, 20 a second: each one's latency is its own.
            await asyncio.sleep(0.05)

    tasks = [asyncio.create_task(subscriber(i)) for i in range(subscribers)]
    await poster()
    try:
        await asyncio.wait_for(asyncio.gather(*tasks), timeout=60)
    except asyncio.TimeoutError:
        pass
    latencies = sorted(
        (mine[content] - at) * 1000 for mine in received for content, at in posted.items() if content in mine
    )
    missed = subscribers * messages - len(latencies)
    q = lambda p: round(latencies[min(len(latencies) - 1, int(p * len(latencies)))], 1) if latencies else None
    print(json.dumps({
        "subscribers": subscribers, "messages": messages, "samples": len(latencies),
        "missed": missed, "repeated": repeats,
        "p50Ms": q(0.50), "p90Ms": q(0.90), "p99Ms": q(0.99), "maxMs": round(latencies[-1], 1) if latencies else None,
    }))


asyncio.run(main())

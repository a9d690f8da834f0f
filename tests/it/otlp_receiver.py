"""An OTLP/HTTP trace receiver for the tests and the trace bench: it decodes every export with
the official OpenTelemetry proto definitions (the `opentelemetry-proto` package) and writes one
JSON line per request to --out: the request's headers, the decoded request, and the raw body
(base64, so a test can scan the bytes that crossed the wire).

--mode ok answers every export; --mode sink answers without decoding or writing anything (a
collector that keeps up, for the bench); --mode stall accepts the connection and never answers.
Prints `listening <port>` once it listens on 127.0.0.1 (port 0: the system picks).
"""

import argparse
import base64
import json
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from google.protobuf.json_format import MessageToDict
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)

parser = argparse.ArgumentParser()
parser.add_argument("--out", required=True)
parser.add_argument("--mode", choices=["ok", "sink", "stall"], default="ok")
args = parser.parse_args()

lock = threading.Lock()


def hexed(item):
    """Ids as the lowercase hex a `traceparent` spells (the JSON mapping gives base64)."""
    for key in ("trace_id", "span_id", "parent_span_id"):
        if key in item:
            item[key] = base64.b64decode(item[key]).hex()

never = threading.Event()


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_POST(self):
        length = int(self.headers.get("Content-Length", "0"))
        body = self.rfile.read(length)
        if args.mode == "stall":
            never.wait()
            return
        if args.mode == "sink":
            self.answer()
            return
        decoded = ExportTraceServiceRequest()
        decoded.ParseFromString(body)
        request = MessageToDict(decoded, preserving_proto_field_name=True)
        for resource in request.get("resource_spans", []):
            for scope in resource.get("scope_spans", []):
                for span in scope.get("spans", []):
                    hexed(span)
                    for link in span.get("links", []):
                        hexed(link)
        line = {
            "path": self.path,
            "headers": {k.lower(): v for k, v in self.headers.items()},
            "request": request,
            "raw": base64.b64encode(body).decode(),
        }
        with lock, open(args.out, "a") as out:
            out.write(json.dumps(line) + "\n")
        self.answer()

    def answer(self):
        answer = ExportTraceServiceResponse().SerializeToString()
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.send_header("Content-Length", str(len(answer)))
        self.end_headers()
        self.wfile.write(answer)

    def log_message(self, *_):
        pass


server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
server.daemon_threads = True
print(f"listening {server.server_address[1]}", flush=True)
sys.stdout.close()
server.serve_forever()

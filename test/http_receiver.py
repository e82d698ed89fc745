#!/usr/bin/env python3
"""A scriptable webhook receiver for delaysched's HTTP tests.

    http_receiver.py --port-file FILE --log FILE [--backlog N|default]

Listens on 127.0.0.1 (an ephemeral port, written to --port-file once it
listens) and logs every request it receives, before answering, as one JSON
line in --log: {"t": arrival (Unix seconds), "path": ..., "headers": {lower-
case name: value}, "body": ..., "connection": the serial number of the
connection it came on, "connections": connections open then, "busy":
requests being answered then, this one included}.  Its listen
backlog is 1,024 unless --backlog says otherwise ("default": the standard
library's, 5).  What it answers depends on the path:

    /ok/...                      200
    /status/C1,C2,.../...        the codes in turn, per path; the last repeats
    /retry-after/S/C/...         first C (429 or 503) with "Retry-After: S",
                                 then 200
    /redirect/P                  307 to /P
    /redirect-port/N/P           307 to http://127.0.0.1:N/P (another origin)
    /busy-for/S/...              503 with "Retry-After" (the seconds left)
                                 until S seconds after the path's first
                                 request, then 200
    /hang/...                    nothing, ever (until the client gives up)
    /slow/MS/...                 200 after MS milliseconds

Anything after the parts above is free, so that each test can use paths of
its own and keep its counters apart.
"""
import argparse
import json
import os
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

counters = {}
first_seen = {}
lock = threading.Lock()
log_file = None
connections = 0
connections_made = 0
busy = 0


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, fmt, *args):
        pass

    def setup(self):
        global connections, connections_made
        with lock:
            connections += 1
            connections_made += 1
            self.serial = connections_made
        super().setup()

    def finish(self):
        global connections
        try:
            super().finish()
        finally:
            with lock:
                connections -= 1

    def answer(self, code, headers=None, body=b""):
        self.send_response(code)
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_POST(self):
        global busy
        with lock:
            busy += 1
        try:
            self.respond()
        finally:
            with lock:
                busy -= 1

    def respond(self):
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length).decode("utf-8", "replace")
        entry = {
            "t": time.time(),
            "path": self.path,
            "headers": {k.lower(): v for k, v in self.headers.items()},
            "body": body,
        }
        with lock:
            entry["connection"] = self.serial
            entry["connections"] = connections
            entry["busy"] = busy
            log_file.write(json.dumps(entry) + "\n")
            log_file.flush()
            seen = counters.get(self.path, 0)
            counters[self.path] = seen + 1
            first = first_seen.setdefault(self.path, entry["t"])
        parts = self.path.strip("/").split("/")
        kind = parts[0]
        if kind == "ok":
            self.answer(200, body=b"thanks")
        elif kind == "status":
            codes = [int(c) for c in parts[1].split(",")]
            code = codes[min(seen, len(codes) - 1)]
            self.answer(code, body=("answer %d" % code).encode())
        elif kind == "retry-after":
            if seen == 0:
                self.answer(int(parts[2]), {"Retry-After": parts[1]}, b"busy")
            else:
                self.answer(200)
        elif kind == "redirect":
            self.answer(307, {"Location": "/" + "/".join(parts[1:])})
        elif kind == "redirect-port":
            self.answer(307, {"Location": "http://127.0.0.1:%s/%s" % (parts[1], "/".join(parts[2:]))})
        elif kind == "busy-for":
            left = float(parts[1]) - (entry["t"] - first)
            if left > 0:
                self.answer(503, {"Retry-After": str(int(left) + 1)}, b"busy")
            else:
                self.answer(200)
        elif kind == "hang":
            time.sleep(3600)
        elif kind == "slow":
            time.sleep(int(parts[1]) / 1000.0)
            self.answer(200)
        else:
            self.answer(404, body=b"no such path")


def main():
    global log_file
    parser = argparse.ArgumentParser()
    parser.add_argument("--port-file", required=True)
    parser.add_argument("--log", required=True)
    parser.add_argument("--backlog", default="1024")
    args = parser.parse_args()
    log_file = open(args.log, "a")
    ThreadingHTTPServer.daemon_threads = True
    if args.backlog != "default":
        ThreadingHTTPServer.request_queue_size = int(args.backlog)
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    tmp = args.port_file + ".tmp"
    with open(tmp, "w") as f:
        f.write("%d\n" % server.server_address[1])
    os.rename(tmp, args.port_file)
    server.serve_forever()


if __name__ == "__main__":
    main()

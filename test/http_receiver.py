#!/usr/bin/env python3
"""A scriptable webhook receiver for delaysched's HTTP tests.

    http_receiver.py --port-file FILE --log FILE

Listens on 127.0.0.1 (an ephemeral port, written to --port-file once it
listens) and logs every request it receives, before answering, as one JSON
line in --log: {"t": arrival (Unix seconds), "path": ..., "headers": {lower-
case name: value}, "body": ...}.  What it answers depends on the path:

    /ok/...                      200
    /status/C1,C2,.../...        the codes in turn, per path; the last repeats
    /retry-after/S/C/...         first C (429 or 503) with "Retry-After: S",
                                 then 200
    /redirect/P                  307 to /P
    /redirect-port/N/P           307 to http://127.0.0.1:N/P (another origin)
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
lock = threading.Lock()
log_file = None


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, fmt, *args):
        pass

    def answer(self, code, headers=None, body=b""):
        self.send_response(code)
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_POST(self):
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length).decode("utf-8", "replace")
        entry = {
            "t": time.time(),
            "path": self.path,
            "headers": {k.lower(): v for k, v in self.headers.items()},
            "body": body,
        }
        with lock:
            log_file.write(json.dumps(entry) + "\n")
            log_file.flush()
            seen = counters.get(self.path, 0)
            counters[self.path] = seen + 1
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
    args = parser.parse_args()
    log_file = open(args.log, "a")
    ThreadingHTTPServer.daemon_threads = True
    ThreadingHTTPServer.request_queue_size = 1024
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    tmp = args.port_file + ".tmp"
    with open(tmp, "w") as f:
        f.write("%d\n" % server.server_address[1])
    os.rename(tmp, args.port_file)
    server.serve_forever()


if __name__ == "__main__":
    main()

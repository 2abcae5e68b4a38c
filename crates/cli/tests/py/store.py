#!/usr/bin/env python3
"""A profile store on loopback for the upload tests (tests/upload.rs).

  store.py serve DIR     listens on 127.0.0.1 (port written to DIR/port),
                         answers POSTs as DIR/mode says (read at each
                         request, so a test can change it live):
                           ok        200 (an empty OTLP response)
                           500       500
                           429:N     429 with Retry-After: N
                           hang      reads the request, never answers
                         and records each request answered 200 as
                         DIR/req-<n>.json (path, query, headers) and
                         DIR/req-<n>.body, and every request's status in
                         DIR/log.
  store.py otlp FILE     decodes an OTLP body (gzip) with the official
                         opentelemetry-proto package and prints a JSON
                         summary: resource attributes, and per profile its
                         sample type, oxprof.event, time range, total,
                         function names and thread names.
  store.py jfr-part FILE OUT
                         writes the gunzipped `jfr` part of a Pyroscope
                         multipart body to OUT.
"""
import email.parser
import email.policy
import gzip
import http.server
import json
import os
import sys
import threading
import time
import urllib.parse


def serve(d):
    counter = [0]
    lock = threading.Lock()

    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args):
            pass

        def do_POST(self):
            n = int(self.headers.get("Content-Length", "0"))
            body = self.rfile.read(n)
            try:
                mode = open(os.path.join(d, "mode")).read().strip()
            except OSError:
                mode = "ok"
            with open(os.path.join(d, "log"), "a") as log:
                log.write(f"{time.time():.3f} {mode} {self.path}\n")
            if mode == "hang":
                time.sleep(3600)
                return
            if mode.startswith("429"):
                self.send_response(429)
                self.send_header("Retry-After", mode.split(":")[1] if ":" in mode else "1")
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            if mode == "500":
                self.send_response(500)
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            with lock:
                counter[0] += 1
                i = counter[0]
            url = urllib.parse.urlsplit(self.path)
            meta = {"path": url.path, "query": dict(urllib.parse.parse_qsl(url.query)), "headers": {k.lower(): v for k, v in self.headers.items()},
                    "at": time.time()}
            with open(os.path.join(d, f"req-{i}.body"), "wb") as f:
                f.write(body)
            with open(os.path.join(d, f"req-{i}.json"), "w") as f:
                json.dump(meta, f)
            self.send_response(200)
            self.send_header("Content-Type", "application/x-protobuf")
            self.send_header("Content-Length", "0")
            self.end_headers()

    srv = http.server.ThreadingHTTPServer(("127.0.0.1", int(sys.argv[3]) if len(sys.argv) > 3 else 0), Handler)
    srv.daemon_threads = True
    with open(os.path.join(d, "port.tmp"), "w") as f:
        f.write(str(srv.server_address[1]))
    os.rename(os.path.join(d, "port.tmp"), os.path.join(d, "port"))
    srv.serve_forever()


def otlp(path):
    from opentelemetry.proto.collector.profiles.v1development import profiles_service_pb2

    data = open(path, "rb").read()
    if data[:2] == b"\x1f\x8b":
        data = gzip.decompress(data)
    req = profiles_service_pb2.ExportProfilesServiceRequest()
    req.ParseFromString(data)
    d = req.dictionary

    def s(i):
        return d.string_table[i]

    def attr(i):
        a = d.attribute_table[i]
        kind = a.value.WhichOneof("value")
        v = s(a.value.string_value_strindex) if kind == "string_value_strindex" else getattr(a.value, kind)
        return s(a.key_strindex), v

    out = {"resource": {}, "profiles": []}
    for rp in req.resource_profiles:
        for kv in rp.resource.attributes:
            out["resource"][kv.key] = getattr(kv.value, kv.value.WhichOneof("value"))
        for sp in rp.scope_profiles:
            for p in sp.profiles:
                prof = {"sample_type": s(p.sample_type.type_strindex) + "/" + s(p.sample_type.unit_strindex),
                        "attributes": {k: v for k, v in (attr(a) for a in p.attribute_indices)},
                        "time_unix_nano": p.time_unix_nano, "duration_nano": p.duration_nano, "total": 0, "functions": {}, "threads": {}}
                for smp in p.samples:
                    v = sum(smp.values)
                    prof["total"] += v
                    attrs = dict(attr(a) for a in smp.attribute_indices)
                    t = attrs.get("thread.name")
                    if t is not None:
                        prof["threads"][t] = prof["threads"].get(t, 0) + v
                    names = set()
                    for l in d.stack_table[smp.stack_index].location_indices:
                        for ln in d.location_table[l].lines:
                            names.add(s(d.function_table[ln.function_index].name_strindex))
                    for n in names:
                        prof["functions"][n] = prof["functions"].get(n, 0) + v
                out["profiles"].append(prof)
    print(json.dumps(out))


def jfr_part(path, out):
    raw = open(path, "rb").read()
    meta = json.load(open(path[: -len(".body")] + ".json"))
    head = f"Content-Type: {meta['headers']['content-type']}\r\n\r\n".encode()
    msg = email.parser.BytesParser(policy=email.policy.HTTP).parsebytes(head + raw)
    for part in msg.iter_parts():
        if part.get_param("name", header="content-disposition") == "jfr":
            data = part.get_payload(decode=True)
            if data[:2] == b"\x1f\x8b":
                data = gzip.decompress(data)
            open(out, "wb").write(data)
            return
    sys.exit("no jfr part")


if __name__ == "__main__":
    {"serve": lambda: serve(sys.argv[2]), "otlp": lambda: otlp(sys.argv[2]), "jfr-part": lambda: jfr_part(sys.argv[2], sys.argv[3])}[sys.argv[1]]()

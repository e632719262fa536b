# A host of runtimectl's fake internet (internal/fakenet): HTTP on 80 and 8080, HTTPS on 443
# (the certificate in /certs names every name of this host), each request answered with what it
# was (host, path, headers) as JSON, and recorded, one JSON line each, in /tmp/seen.jsonl; with
# FAKENET_ROOT, GET serves that folder's files instead (a PEP 503 package index); a path under
# /hang/ is recorded and never answered.
import http.server
import json
import os
import socketserver
import ssl
import threading

NAME = os.environ.get("FAKENET_NAME", "host")
ROOT = os.environ.get("FAKENET_ROOT")
SEEN = "/tmp/seen.jsonl"
lock = threading.Lock()


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def handle_any(self):
        n = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(n) if n else b""
        rec = {
            "server": NAME,
            "port": self.server.server_address[1],
            "tls": isinstance(self.connection, ssl.SSLSocket),
            "method": self.command,
            "host": self.headers.get("Host"),
            "path": self.path,
            "headers": dict(self.headers.items()),
            "body": body.decode("utf-8", "replace"),
        }
        with lock, open(SEEN, "a") as f:
            f.write(json.dumps(rec) + "\n")
        if self.path.startswith("/hang/"):
            threading.Event().wait(600)  # a host that takes the request and never answers
            self.close_connection = True
            return
        ctype, out, code = "application/json", json.dumps(rec).encode(), 200
        if ROOT and self.command in ("GET", "HEAD"):
            path = os.path.normpath(os.path.join(ROOT, self.path.split("?")[0].lstrip("/")))
            if os.path.isdir(path):
                path = os.path.join(path, "index.html")
            if path.startswith(ROOT) and os.path.isfile(path):
                ctype = "text/html" if path.endswith(".html") else "application/octet-stream"
                with open(path, "rb") as f:
                    out = f.read()
            else:
                ctype, out, code = "text/plain", b"not found\n", 404
        self.send_response(code)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(out)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(out)

    do_GET = do_POST = do_PUT = do_HEAD = do_DELETE = handle_any

    def log_message(self, *args):
        pass


class Server(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True
    allow_reuse_address = True


def serve(port, tls):
    srv = Server(("0.0.0.0", port), Handler)
    if tls:
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain("/certs/cert.pem", "/certs/key.pem")
        srv.socket = ctx.wrap_socket(srv.socket, server_side=True)
    srv.serve_forever()


for port, tls in ((80, False), (8080, False), (443, True)):
    threading.Thread(target=serve, args=(port, tls), daemon=True).start()
print("fakenet ready", flush=True)
threading.Event().wait()

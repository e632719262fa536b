"""HTTP/1.1 over http.client: one persistent connection per thread, TCP or a unix socket, TLS
with the standard library's ssl. Internal."""

import http.client
import json
import socket
import ssl
import threading
import urllib.parse
from typing import Any, Dict, Iterator, Optional, Tuple

from .errors import RuntimeUnavailable, from_body

DEFAULT_URL = "http://127.0.0.1:8700"


class _UnixConnection(http.client.HTTPConnection):
    def __init__(self, path: str, timeout: Optional[float]) -> None:
        super().__init__("localhost", timeout=timeout)
        self._path = path

    def connect(self) -> None:
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.settimeout(self.timeout)
        s.connect(self._path)
        self.sock = s


class Transport:
    def __init__(self, url: str, token: Optional[str], timeout: Optional[float],
                 ssl_context: Optional[ssl.SSLContext] = None) -> None:
        self.url = url
        self.token = token
        self.timeout = timeout
        u = urllib.parse.urlsplit(url)
        self._scheme = u.scheme
        if u.scheme == "unix":
            self._unix = u.path
        elif u.scheme in ("http", "https"):
            self._unix = ""
            self._host = u.hostname or "127.0.0.1"
            self._port = u.port or (443 if u.scheme == "https" else 80)
        else:
            raise ValueError("RUNTIMECTL_URL %r: use http://HOST:PORT, https://HOST:PORT or unix:///PATH" % url)
        self._ssl = ssl_context
        if u.scheme == "https" and self._ssl is None:
            self._ssl = ssl.create_default_context()
        self._local = threading.local()

    def _conn(self) -> http.client.HTTPConnection:
        c = getattr(self._local, "conn", None)
        if c is None:
            if self._unix:
                c = _UnixConnection(self._unix, self.timeout)
            elif self._scheme == "https":
                c = http.client.HTTPSConnection(self._host, self._port, timeout=self.timeout, context=self._ssl)
            else:
                c = http.client.HTTPConnection(self._host, self._port, timeout=self.timeout)
            self._local.conn = c
        return c

    def close(self) -> None:
        c = getattr(self._local, "conn", None)
        if c is not None:
            c.close()
            self._local.conn = None

    def _headers(self, extra: Optional[Dict[str, str]]) -> Dict[str, str]:
        h = {"User-Agent": "runtimectl-python"}
        if self.token:
            h["Authorization"] = "Bearer " + self.token
        if extra:
            h.update(extra)
        return h

    def open(self, method: str, path: str, body: Optional[bytes] = None,
             headers: Optional[Dict[str, str]] = None,
             timeout: Optional[float] = -1.0) -> http.client.HTTPResponse:
        """Sends a request and returns the response once its headers are in; raises the
        matching exception for an error status. timeout -1 means the client's."""
        t = self.timeout if timeout == -1.0 else timeout
        for attempt in (0, 1):
            c = self._conn()
            reused = c.sock is not None
            try:
                if c.sock is None:
                    c.timeout = t
                    c.connect()
                else:
                    c.sock.settimeout(t)
                c.request(method, path, body=body, headers=self._headers(headers))
                resp = c.getresponse()
                break
            except (http.client.RemoteDisconnected, BrokenPipeError, ConnectionResetError,
                    http.client.CannotSendRequest, http.client.ResponseNotReady) as e:
                # A kept-alive connection that the server had closed (idle, or restarted):
                # send again once on a new one.
                self.close()
                if not reused or attempt == 1:
                    raise RuntimeUnavailable("lost the connection to runtimectl serve at %s: %s" % (self.url, e)) from e
            except socket.timeout as e:
                self.close()
                raise TimeoutError("runtimectl serve at %s did not answer within %ss" % (self.url, t)) from e
            except OSError as e:
                self.close()
                raise RuntimeUnavailable("cannot reach runtimectl serve at %s: %s; is it running (`runtimectl serve`)? is RUNTIMECTL_URL right?" % (self.url, e)) from e
        if resp.status >= 400:
            raise from_body(resp.status, resp.read(), "%s %s" % (method, path))
        return resp

    def call(self, method: str, path: str, payload: Any = None, query: Optional[Dict[str, Any]] = None,
             timeout: Optional[float] = -1.0) -> Any:
        """A JSON request and its JSON reply (None for an empty one)."""
        body = None if payload is None else json.dumps(payload).encode()
        headers = {"Content-Type": "application/json"} if body is not None else {}
        resp = self.open(method, with_query(path, query), body, headers, timeout)
        raw = self._read(resp)
        if not raw:
            return None
        ctype = resp.getheader("Content-Type", "")
        if "json" in ctype:
            return json.loads(raw)
        return raw.decode("utf-8", "replace")

    def raw(self, method: str, path: str, body: Optional[bytes] = None, headers: Optional[Dict[str, str]] = None,
            query: Optional[Dict[str, Any]] = None, timeout: Optional[float] = -1.0) -> Tuple[bytes, Dict[str, str]]:
        """A request with a body of bytes; the reply's bytes and headers (names in lower case)."""
        resp = self.open(method, with_query(path, query), body, headers, timeout)
        data = self._read(resp)
        return data, {k.lower(): v for k, v in resp.getheaders()}

    def _read(self, resp: http.client.HTTPResponse) -> bytes:
        try:
            return resp.read()
        except (http.client.IncompleteRead, OSError) as e:
            self.close()
            raise RuntimeUnavailable("the response from %s was cut: %s" % (self.url, e)) from e

    def lines(self, resp: http.client.HTTPResponse) -> Iterator[dict]:
        """The NDJSON events of a streamed response, in order."""
        try:
            while True:
                line = resp.readline()
                if not line:
                    return
                line = line.strip()
                if line:
                    yield json.loads(line)
        except socket.timeout:
            self.close()
            raise
        except (http.client.IncompleteRead, OSError, ValueError) as e:
            self.close()
            raise RuntimeUnavailable(
                "the stream from %s was cut before the execution ended (%s); it goes on in the "
                "session and lands in its history: see Session.history()" % (self.url, e)) from e


def with_query(path: str, query: Optional[Dict[str, Any]]) -> str:
    if not query:
        return path
    items = []
    for k, v in query.items():
        if v is None:
            continue
        if isinstance(v, (list, tuple)):
            items.extend((k, str(x)) for x in v)
        elif isinstance(v, bool):
            items.append((k, "true" if v else "false"))
        else:
            items.append((k, str(v)))
    return path + ("?" + urllib.parse.urlencode(items) if items else "")


def quote(segment: str) -> str:
    return urllib.parse.quote(segment, safe="")


def quote_path(p: str) -> str:
    return urllib.parse.quote(p.lstrip("/") if not p.startswith("/workspace") else p[len("/workspace"):].lstrip("/"), safe="/")

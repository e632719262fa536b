"""HTTP/1.1 on asyncio's streams, the standard library only: TCP, TLS (ssl) or a unix socket,
a pool of kept-alive connections, bodies by Content-Length, chunked or to the end of the
connection. What the asyncio client needs of `runtimectl serve`, no more. Internal."""

import asyncio
import json
import ssl
import urllib.parse
from typing import Any, AsyncIterator, Dict, List, Optional, Tuple

from ._transport import DEFAULT_URL, with_query
from .errors import RuntimeUnavailable, from_body

__all__ = ["AsyncTransport", "Response", "DEFAULT_URL"]

_MAX_LINE = 64 << 10      # a status or header line
_MAX_HEADERS = 200
_READ = 64 << 10


class _Conn:
    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader = reader
        self.writer = writer
        self.used = False

    def close(self) -> None:
        try:
            self.writer.close()
        except Exception:
            pass

    def stale(self) -> bool:
        return self.reader.at_eof() or self.writer.is_closing()


class _Cut(Exception):
    """The connection ended in the middle of a response."""


class Response:
    """A response whose headers are in; its body is read with read(), readline() or lines()."""

    def __init__(self, t: "AsyncTransport", conn: _Conn, status: int, headers: Dict[str, str], method: str,
                 timeout: Optional[float]) -> None:
        self._t = t
        self._conn: Optional[_Conn] = conn
        self.status = status
        self.headers = headers
        self._timeout = timeout
        self._buf = bytearray()
        self._chunk_left = 0  # bytes left of the current chunk
        self._done = False
        self._keep = headers.get("connection", "").lower() != "close"
        te = headers.get("transfer-encoding", "").lower()
        self._chunked = "chunked" in te
        cl = headers.get("content-length")
        self._left: Optional[int] = None
        if method == "HEAD" or status in (204, 304) or 100 <= status < 200:
            self._done = True
        elif self._chunked:
            pass
        elif cl is not None:
            try:
                self._left = int(cl)
            except ValueError:
                raise RuntimeUnavailable("bad Content-Length %r from %s" % (cl, t.url))
            self._done = self._left == 0
        else:
            self._keep = False  # the body runs to the end of the connection
        if self._done:
            self._release()

    def header(self, name: str, default: str = "") -> str:
        return self.headers.get(name.lower(), default)

    async def _io(self, coro: Any) -> Any:
        if self._timeout is None:
            return await coro
        try:
            return await asyncio.wait_for(coro, self._timeout)
        except asyncio.TimeoutError:
            raise TimeoutError("no data from %s within %ss" % (self._t.url, self._timeout)) from None

    async def _more(self) -> bool:
        """Reads more of the body into the buffer; False at its end."""
        if self._done or self._conn is None:
            return False
        r = self._conn.reader
        if self._chunked:
            if self._chunk_left == 0:
                line = await self._io(r.readline())
                if not line.endswith(b"\n"):
                    raise _Cut()
                size = line.split(b";", 1)[0].strip()
                try:
                    n = int(size, 16)
                except ValueError:
                    raise _Cut()
                if n == 0:
                    while True:  # trailers, up to the empty line
                        t = await self._io(r.readline())
                        if not t.endswith(b"\n"):
                            raise _Cut()
                        if t in (b"\r\n", b"\n"):
                            break
                    self._finish()
                    return False
                self._chunk_left = n
            data = await self._io(r.read(min(self._chunk_left, _READ)))
            if not data:
                raise _Cut()
            self._chunk_left -= len(data)
            if self._chunk_left == 0:
                crlf = await self._io(r.readline())
                if crlf not in (b"\r\n", b"\n"):
                    raise _Cut()
            self._buf += data
            return True
        if self._left is not None:
            data = await self._io(r.read(min(self._left, _READ)))
            if not data:
                raise _Cut()
            self._left -= len(data)
            self._buf += data
            if self._left == 0:
                self._finish()
            return True
        data = await self._io(r.read(_READ))
        if not data:
            self._finish()
            return False
        self._buf += data
        return True

    def _finish(self) -> None:
        self._done = True
        self._release()

    def _release(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            if self._keep:
                self._t._put(conn)
            else:
                conn.close()

    def abort(self) -> None:
        """Drops the connection (the response is not read to its end)."""
        conn, self._conn = self._conn, None
        self._done = True
        if conn is not None:
            conn.close()

    async def read(self) -> bytes:
        """The whole body (the rest of it)."""
        try:
            while await self._more():
                pass
        except _Cut:
            self.abort()
            raise RuntimeUnavailable("the response from %s was cut" % self._t.url) from None
        except BaseException:
            self.abort()
            raise
        out = bytes(self._buf)
        self._buf.clear()
        return out

    async def readline(self) -> bytes:
        """The next line of the body, with its newline; b"" at its end."""
        try:
            while True:
                i = self._buf.find(b"\n")
                if i >= 0:
                    line = bytes(self._buf[:i + 1])
                    del self._buf[:i + 1]
                    return line
                if not await self._more():
                    line = bytes(self._buf)
                    self._buf.clear()
                    return line
        except BaseException:
            self.abort()
            raise

    async def lines(self) -> AsyncIterator[Dict[str, Any]]:
        """The NDJSON events of a streamed response, in order."""
        while True:
            try:
                line = await self.readline()
            except _Cut as e:
                raise RuntimeUnavailable(
                    "the stream from %s was cut before the execution ended; it goes on in the "
                    "session and lands in its history: see Session.history()" % self._t.url) from e
            if not line:
                return
            line = line.strip()
            if line:
                try:
                    yield json.loads(line)
                except ValueError as e:
                    self.abort()
                    raise RuntimeUnavailable("a line of the stream from %s is not JSON: %r" % (self._t.url, line[:200])) from e


class AsyncTransport:
    """The asyncio client's connection pool to one server."""

    def __init__(self, url: str, token: Optional[str], timeout: Optional[float],
                 ssl_context: Optional[ssl.SSLContext] = None, max_idle: int = 16) -> None:
        self.url = url
        self.token = token
        self.timeout = timeout
        u = urllib.parse.urlsplit(url)
        self._scheme = u.scheme
        self._unix = ""
        if u.scheme == "unix":
            self._unix = u.path
            self._hosthdr = "localhost"
        elif u.scheme in ("http", "https"):
            self._host = u.hostname or "127.0.0.1"
            self._port = u.port or (443 if u.scheme == "https" else 80)
            default = 443 if u.scheme == "https" else 80
            h = "[%s]" % self._host if ":" in self._host else self._host
            self._hosthdr = h if self._port == default else "%s:%d" % (h, self._port)
        else:
            raise ValueError("RUNTIMECTL_URL %r: use http://HOST:PORT, https://HOST:PORT or unix:///PATH" % url)
        self._ssl = ssl_context
        if u.scheme == "https" and self._ssl is None:
            self._ssl = ssl.create_default_context()
        self._idle: List[_Conn] = []
        self._max_idle = max_idle

    def _put(self, conn: _Conn) -> None:
        if len(self._idle) < self._max_idle and not conn.stale():
            self._idle.append(conn)
        else:
            conn.close()

    async def close(self) -> None:
        """Closes the kept-alive connections."""
        idle, self._idle = self._idle, []
        for c in idle:
            c.close()
        for c in idle:
            try:
                await c.writer.wait_closed()
            except Exception:
                pass

    async def _connect(self, timeout: Optional[float]) -> _Conn:
        if self._unix:
            coro = asyncio.open_unix_connection(self._unix)
        else:
            coro = asyncio.open_connection(self._host, self._port, ssl=self._ssl,
                                           server_hostname=self._host if self._ssl else None)
        try:
            if timeout is None:
                r, w = await coro
            else:
                r, w = await asyncio.wait_for(coro, timeout)
        except asyncio.TimeoutError:
            raise TimeoutError("runtimectl serve at %s did not accept a connection within %ss" % (self.url, timeout)) from None
        except OSError as e:
            raise RuntimeUnavailable("cannot reach runtimectl serve at %s: %s; is it running (`runtimectl serve`)? "
                                     "is RUNTIMECTL_URL right?" % (self.url, e)) from e
        return _Conn(r, w)

    def _head(self, method: str, path: str, body: Optional[bytes], headers: Optional[Dict[str, str]]) -> bytes:
        h = {"Host": self._hosthdr, "User-Agent": "runtimectl-python-asyncio", "Accept-Encoding": "identity"}
        if self.token:
            h["Authorization"] = "Bearer " + self.token
        if body is not None or method in ("POST", "PUT", "PATCH"):
            h["Content-Length"] = str(len(body or b""))
        if headers:
            h.update(headers)
        lines = ["%s %s HTTP/1.1" % (method, path)] + ["%s: %s" % kv for kv in h.items()]
        return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")

    async def _read_head(self, conn: _Conn) -> Tuple[int, Dict[str, str]]:
        r = conn.reader
        while True:
            line = await r.readline()
            if not line:
                raise _Cut()
            parts = line.decode("latin-1").split(None, 2)
            if len(parts) < 2 or not parts[0].startswith("HTTP/"):
                raise RuntimeUnavailable("%s does not speak HTTP/1.1: %r" % (self.url, line[:100]))
            status = int(parts[1])
            headers: Dict[str, str] = {}
            for _ in range(_MAX_HEADERS):
                h = await r.readline()
                if not h.endswith(b"\n"):
                    raise _Cut()
                if h in (b"\r\n", b"\n"):
                    break
                k, _, v = h.decode("latin-1").partition(":")
                k = k.strip().lower()
                v = v.strip()
                headers[k] = headers[k] + ", " + v if k in headers else v
            else:
                raise RuntimeUnavailable("too many headers from %s" % self.url)
            if status == 100:
                continue
            return status, headers

    async def open(self, method: str, path: str, body: Optional[bytes] = None,
                   headers: Optional[Dict[str, str]] = None, timeout: Optional[float] = -1.0) -> Response:
        """Sends a request and returns the response once its headers are in; raises the
        matching exception for an error status. timeout -1 means the client's; it bounds each
        wait for the server (connecting, the headers, each read of the body)."""
        t = self.timeout if timeout == -1.0 else timeout
        head = self._head(method, path, body, headers)
        for attempt in (0, 1):
            conn = None
            while self._idle:
                c = self._idle.pop()
                if not c.stale():
                    conn = c
                    break
                c.close()
            reused = conn is not None
            if conn is None:
                conn = await self._connect(t)
            try:
                conn.writer.write(head)
                if body:
                    conn.writer.write(body)
                if t is None:
                    await conn.writer.drain()
                    status, hdrs = await self._read_head(conn)
                else:
                    await asyncio.wait_for(conn.writer.drain(), t)
                    status, hdrs = await asyncio.wait_for(self._read_head(conn), t)
                break
            except (_Cut, ConnectionError, asyncio.IncompleteReadError) as e:
                conn.close()
                # A kept-alive connection that the server had closed (idle, or restarted):
                # send again once on a new one.
                if not reused or attempt == 1:
                    raise RuntimeUnavailable("lost the connection to runtimectl serve at %s: %s" % (self.url, e or "closed")) from e
            except asyncio.TimeoutError:
                conn.close()
                raise TimeoutError("runtimectl serve at %s did not answer within %ss" % (self.url, t)) from None
            except OSError as e:
                conn.close()
                raise RuntimeUnavailable("cannot reach runtimectl serve at %s: %s" % (self.url, e)) from e
            except BaseException:
                conn.close()  # cancelled: the connection is mid-request
                raise
        resp = Response(self, conn, status, hdrs, method, t)
        if status >= 400:
            raise from_body(status, await resp.read(), "%s %s" % (method, path))
        return resp

    async def call(self, method: str, path: str, payload: Any = None, query: Optional[Dict[str, Any]] = None,
                   timeout: Optional[float] = -1.0) -> Any:
        """A JSON request and its JSON reply (None for an empty one)."""
        body = None if payload is None else json.dumps(payload).encode()
        headers = {"Content-Type": "application/json"} if body is not None else {}
        resp = await self.open(method, with_query(path, query), body, headers, timeout)
        raw = await resp.read()
        if not raw:
            return None
        if "json" in resp.header("Content-Type"):
            return json.loads(raw)
        return raw.decode("utf-8", "replace")

    async def raw(self, method: str, path: str, body: Optional[bytes] = None, headers: Optional[Dict[str, str]] = None,
                  query: Optional[Dict[str, Any]] = None, timeout: Optional[float] = -1.0) -> Tuple[bytes, Dict[str, str]]:
        """A request with a body of bytes; the reply's bytes and headers (names in lower case)."""
        resp = await self.open(method, with_query(path, query), body, headers, timeout)
        return await resp.read(), dict(resp.headers)

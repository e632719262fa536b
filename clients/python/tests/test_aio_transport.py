"""The asyncio client's HTTP/1.1 against a scripted server on the same event loop (no runtimectl
serve needed): no thread is used, connections are kept alive and pooled, chunked NDJSON streams
are read as they come, a connection the server closed is replaced, a cut stream and a
cancelled run leave the client usable."""

import asyncio
import concurrent.futures
import hashlib
import io
import json
import os
import tarfile
import tempfile

import pytest

from runtimectl import AsyncClient, Forbidden, RuntimeUnavailable, SessionNotFound
from runtimectl.types import SessionInfo, Vars


class NoThreads(concurrent.futures.ThreadPoolExecutor):
    """A default executor that fails the test when anything runs in it (asyncio resolves a
    host name there; an address needs no resolving)."""

    def submit(self, *a, **k):
        raise AssertionError("the asyncio client used a thread")


class Fake:
    """A tiny HTTP/1.1 server: routes by method and path, counts connections."""

    def __init__(self):
        self.connections = 0
        self.requests = []
        self.close_after = None  # close every connection after this many requests
        self.gate = None  # an asyncio.Event a slow stream waits on

    async def handle(self, reader, writer):
        self.connections += 1
        served = 0
        try:
            while True:
                line = await reader.readline()
                if not line:
                    return
                method, path, _ = line.decode().split(" ", 2)
                headers = {}
                while True:
                    h = await reader.readline()
                    if h in (b"\r\n", b""):
                        break
                    k, _, v = h.decode().partition(":")
                    headers[k.strip().lower()] = v.strip()
                body = await reader.readexactly(int(headers.get("content-length", "0")))
                self.requests.append((method, path, headers, body))
                await self.route(method, path, headers, body, writer)
                served += 1
                if self.close_after and served >= self.close_after:
                    return
        except (ConnectionError, asyncio.IncompleteReadError):
            return
        finally:
            writer.close()

    @staticmethod
    def reply(writer, status, obj, ctype="application/json"):
        data = json.dumps(obj).encode() if ctype == "application/json" else obj
        writer.write(b"HTTP/1.1 %d X\r\nContent-Type: %s\r\nContent-Length: %d\r\n\r\n" % (status, ctype.encode(), len(data)))
        writer.write(data)

    @staticmethod
    def chunk(writer, obj):
        data = (json.dumps(obj) + "\n").encode()
        writer.write(b"%x\r\n%s\r\n" % (len(data), data))

    async def route(self, method, path, headers, body, writer):
        if path == "/v1/sessions" and method == "GET":
            assert headers["authorization"] == "Bearer tok"
            self.reply(writer, 200, [{"name": "a", "state": "running", "executions": 2}])
        elif path == "/v1/sessions/a/vars":
            self.reply(writer, 200, {"vars": [{"name": "x", "type": "int", "size": 28, "preview": "1"}], "modules": []})
        elif path == "/v1/sessions/gone":
            self.reply(writer, 404, {"error": "no session gone; start it with POST /v1/sessions", "code": "not_found"})
        elif path == "/v1/sessions/big" and method == "POST":
            pass
        elif path == "/v1/sessions" and method == "POST":
            self.reply(writer, 403, {"error": "memory 100g is over this token's limit of 4g", "code": "forbidden"})
        elif path.startswith("/v1/sessions/exp") and method == "DELETE":
            if "remove=false" in path:
                data = self.export
                digest = hashlib.sha256(data).hexdigest() if not path.startswith("/v1/sessions/exp-bad") else "0" * 64
                writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: application/x-tar\r\nContent-Length: %d\r\n"
                             b"X-Runtimectl-Export-Sha256: %s\r\nX-Runtimectl-Export-Removes: false\r\n\r\n" % (len(data), digest.encode()))
                writer.write(data)
            else:
                writer.write(b"HTTP/1.1 204 No Content\r\n\r\n")
        elif path.endswith("/files/blob"):
            self.reply(writer, 200, bytes(range(256)) * 1000, "application/octet-stream")
        elif path.endswith("/exec"):
            req = json.loads(body)
            writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: application/x-ndjson\r\nTransfer-Encoding: chunked\r\n\r\n")
            if req["code"] == "cut":
                self.chunk(writer, {"event": "stdout", "data": "half"})
                await writer.drain()
                writer.transport.abort()
                raise ConnectionError("cut")
            if req["code"] == "slow":
                self.chunk(writer, {"event": "stdout", "data": "first\n"})
                await writer.drain()
                await self.gate.wait()
            for i in range(3):
                self.chunk(writer, {"event": "stdout", "data": "%d\n" % i})
                await writer.drain()
            self.chunk(writer, {"event": "display", "display": {"kind": "display_data", "data": {"text/plain": "d"}}})
            # An end that does not repeat the streamed stdout (a server that keeps no copy).
            self.chunk(writer, {"event": "end", "session": "a", "seq": 1, "status": "ok", "result": "42",
                                "stdout": "", "stderr": "", "streamed": True, "outputs": []})
            writer.write(b"0\r\n\r\n")
        else:
            self.reply(writer, 404, {"error": "no route %s" % path})
        await writer.drain()


def run(coro_fn, unix=False):
    async def main():
        asyncio.get_running_loop().set_default_executor(NoThreads())
        fake = Fake()
        if unix:
            path = os.path.join(tempfile.mkdtemp(), "s.sock")
            srv = await asyncio.start_unix_server(fake.handle, path)
            url = "unix://" + path
        else:
            srv = await asyncio.start_server(fake.handle, "127.0.0.1", 0)
            url = "http://127.0.0.1:%d" % srv.sockets[0].getsockname()[1]
        try:
            async with AsyncClient(url, "tok", timeout=10) as c:
                await coro_fn(c, fake)
        finally:
            srv.close()
            await srv.wait_closed()
    asyncio.run(main())


def test_typed_replies_on_one_kept_alive_connection():
    async def body(c, fake):
        ls = await c.list()
        assert isinstance(ls[0], SessionInfo) and ls[0].executions == 2
        s = await _handle(c, "a")
        v = await s.vars()
        assert isinstance(v, Vars) and v.names == ["x"]
        got = []
        ex = await s.run("print", on_stdout=got.append, on_display=lambda d: got.append(d.text()))
        assert (ex.result, ex.stdout) == ("42", "0\n1\n2\n"), "stdout kept from the stream"
        assert got == ["0\n", "1\n", "2\n", "d"], "callbacks in the stream's order"
        assert [o.text() for o in ex.displays] == ["d"], "displays streamed before the end are kept"
        data = await s.read_file("blob")
        assert data == bytes(range(256)) * 1000
        assert fake.connections == 1, "one connection for all the requests"
    run(body)


async def _handle(c, name):
    from runtimectl.aio import AsyncSession
    return AsyncSession(c, name)


def test_errors_are_typed():
    async def body(c, fake):
        with pytest.raises(SessionNotFound, match="POST /v1/sessions"):
            await (await _handle(c, "gone")).info()
        with pytest.raises(Forbidden, match="over this token's limit"):
            await c.start("x", memory="100g")
        assert len(await c.list()) == 1, "the connection serves on after an error reply"
        assert fake.connections == 1
    run(body)


def test_a_connection_the_server_closed_is_replaced():
    async def body(c, fake):
        fake.close_after = 1
        for _ in range(3):
            assert len(await c.list()) == 1
            await asyncio.sleep(0.05)
        assert fake.connections == 3
    run(body)


def test_concurrent_runs_use_a_connection_each_and_callbacks_may_be_coroutines():
    async def body(c, fake):
        s = await _handle(c, "a")
        seen = []

        async def slow(text):
            await asyncio.sleep(0.01)
            seen.append(text)

        results = await asyncio.gather(*(s.run("print", on_stdout=slow) for _ in range(4)))
        assert [r.result for r in results] == ["42"] * 4
        assert sorted(seen) == sorted(["0\n", "1\n", "2\n"] * 4)
        assert fake.connections == 4
        await asyncio.gather(*(s.run("print") for _ in range(4)))
        assert fake.connections == 4, "the pool keeps them"
    run(body)


def test_a_cut_stream_and_a_cancelled_run_leave_the_client_usable():
    async def body(c, fake):
        s = await _handle(c, "a")
        with pytest.raises(RuntimeUnavailable, match="goes on in the session"):
            await s.run("cut")
        fake.gate = asyncio.Event()
        first = asyncio.Event()
        task = asyncio.ensure_future(s.run("slow", on_stdout=lambda t: first.set()))
        await asyncio.wait_for(first.wait(), 5)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        fake.gate.set()
        ex = await s.run("print")
        assert ex.result == "42"
    run(body)


def test_unix_socket():
    async def body(c, fake):
        assert (await c.list())[0].name == "a"
    run(body, unix=True)


def test_an_unreachable_server():
    async def main():
        async with AsyncClient("http://127.0.0.1:9", "x", timeout=5) as c:
            with pytest.raises(RuntimeUnavailable, match="runtimectl serve"):
                await c.list()
    asyncio.run(main())


def test_an_export_is_checked_before_the_session_is_removed(tmp_path):
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tf:
        info = tarfile.TarInfo("data/a.csv")
        info.size = 3
        tf.addfile(info, io.BytesIO(b"1,2"))

    async def body(c, fake):
        fake.export = buf.getvalue()
        got = await (await _handle(c, "exp")).remove(keep=["*.csv"], export_to=str(tmp_path / "out"))
        assert got == ["data/a.csv"] and (tmp_path / "out" / "data" / "a.csv").read_bytes() == b"1,2"
        deletes = [p for m, p, _, _ in fake.requests if m == "DELETE"]
        assert len(deletes) == 2 and "remove=false" in deletes[0] and deletes[1] == "/v1/sessions/exp?force=true", \
            "exported with the session kept, then removed"
        fake.requests.clear()
        with pytest.raises(RuntimeUnavailable, match="not matching its SHA-256.*still there"):
            await (await _handle(c, "exp-bad")).remove(keep_history=True, export_to=str(tmp_path / "bad"))
        assert len([p for m, p, _, _ in fake.requests if m == "DELETE"]) == 1, "a bad export removes nothing"
        assert not (tmp_path / "bad").exists()
    run(body)

"""The asyncio client: AsyncClient and AsyncSession, the same methods as Client and Session
with await, and the same typed results.

It is native asyncio: HTTP/1.1 on the event loop's own streams (runtimectl._aiohttp11, the
standard library only), no thread per request. Each request takes a kept-alive connection of
the client's pool or opens one, so many executions can run at once (asyncio.gather). Streaming
callbacks are called on the loop, in order, as the output arrives; a callback may be a coroutine
function, whose coroutine is awaited before the next event is read. Cancelling run() (or a
timeout around it) closes its stream: as when a client goes away, the execution goes on in the
session and lands in its history; AsyncSession.interrupt() stops it.
"""

import inspect
import ssl
from typing import Any, Awaitable, Callable, Dict, Iterable, List, Optional, Union

from . import _api
from ._aiohttp11 import AsyncTransport
from .client import _env_token, _env_url, _info
from .types import Display, Execution, Output, RestoreInfo, SessionInfo, Snapshot, Summary, Vars

__all__ = ["AsyncClient", "AsyncSession"]

AsyncOutputCallback = Callable[[str], Union[Any, Awaitable[Any]]]
AsyncRichOutputCallback = Callable[[Output], Union[Any, Awaitable[Any]]]
AsyncDisplayCallback = Callable[[Display], Union[Any, Awaitable[Any]]]


class AsyncSession:
    """A handle on one session; get one with AsyncClient.start or AsyncClient.get."""

    def __init__(self, client: "AsyncClient", name: str, info: Optional[Union[SessionInfo, Dict[str, Any]]] = None) -> None:
        self._c = client
        self.name = name
        #: the session as it was when the handle was made (a StartInfo after AsyncClient.start)
        self.info_at_open: SessionInfo = _info(info)

    def __repr__(self) -> str:
        return "AsyncSession(%r)" % self.name

    @property
    def lang(self) -> str:
        """The session's language as the handle was made (python, bash, node)."""
        return self.info_at_open.lang

    async def run(self, code: str, timeout: Optional[float] = None,
                  on_stdout: Optional[AsyncOutputCallback] = None, on_stderr: Optional[AsyncOutputCallback] = None,
                  on_notice: Optional[AsyncOutputCallback] = None,
                  max_output: Optional[Union[int, str]] = None,
                  env: Optional[Dict[str, str]] = None, workdir: Optional[str] = None,
                  on_display: Optional[AsyncDisplayCallback] = None,
                  on_output: Optional[AsyncRichOutputCallback] = None) -> Execution:
        """Runs code in the session and returns its Execution; see Session.run."""
        body = _api.exec_payload(code, timeout, max_output, env, workdir)
        read_timeout = None if timeout is None else timeout + self._c.grace
        callbacks = {"stdout": on_stdout, "stderr": on_stderr, "notice": on_notice, "display": on_display,
                     "output": on_output}
        resp = await self._c._t.open("POST", _api.sessions_path(self.name, "/exec"), body, _api.EXEC_HEADERS,
                                     timeout=read_timeout)
        st = _api.ExecStream()
        events = resp.lines()
        try:
            async for ev in events:
                kind, value = st.feed(ev)
                if kind == "end":
                    await resp.read()  # to the end of the response: the connection goes back to the pool
                    return value
                cb = callbacks.get(kind)
                if cb is not None:
                    r = cb(value)
                    if inspect.isawaitable(r):
                        await r
        except TimeoutError as e:
            raise _api.exec_timeout(self.name, read_timeout) from e
        finally:
            await events.aclose()
            if not st.ended:
                resp.abort()  # a callback raised, the stream broke, or run was cancelled
        raise _api.cut_stream()

    async def interrupt(self) -> bool:
        """Interrupts the running code; see Session.interrupt."""
        return await self._c._do(_api.interrupt(self.name))

    async def vars(self) -> Vars:
        """The session's variables; see Session.vars."""
        return await self._c._do(_api.vars_(self.name))

    async def context(self, max_chars: int = 4000) -> str:
        """A summary for a model's next prompt; see Session.context."""
        return (await self.summary(max_chars)).text

    async def summary(self, max_chars: int = 4000) -> Summary:
        """See Session.summary."""
        return await self._c._do(_api.summary(self.name, max_chars))

    async def history(self, last: Optional[int] = None, format: str = "json") -> Any:
        """The executions, oldest first; see Session.history."""
        return await self._c._do(_api.history(self.name, last, format))

    async def snapshots(self) -> List[Snapshot]:
        """See Session.snapshots."""
        return await self._c._do(_api.snapshots(self.name))

    async def snapshot(self) -> Snapshot:
        """See Session.snapshot."""
        return await self._c._do(_api.snapshot(self.name))

    async def restore(self, snapshot_id: str) -> RestoreInfo:
        """See Session.restore."""
        return await self._c._do(_api.restore(self.name, snapshot_id))

    async def install(self, *packages: str, requirements: Optional[str] = None, index_url: Optional[str] = None,
                      extra_index_urls: Optional[List[str]] = None, trusted_hosts: Optional[List[str]] = None,
                      no_deps: bool = False) -> str:
        """See Session.install."""
        return await self._c._do(_api.install(self.name, packages, requirements, index_url, extra_index_urls,
                                              trusted_hosts, no_deps))

    async def fork(self, name: str, at: Optional[str] = None) -> "AsyncSession":
        """See Session.fork."""
        info = await self._c._do(_api.fork(self.name, name, at))
        return AsyncSession(self._c, info.name or name, info)

    async def write_file(self, path: str, data: Union[bytes, str]) -> None:
        """See Session.write_file."""
        await self._c._do(_api.write_file(self.name, path, data))

    async def read_file(self, path: str) -> bytes:
        """See Session.read_file."""
        return await self._c._do(_api.read_file(self.name, path))

    async def write_dir(self, path: str, local_dir: str) -> None:
        """See Session.write_dir."""
        await self._c._do(_api.write_dir(self.name, path, local_dir))

    async def read_dir(self, path: str, dest: str) -> List[str]:
        """See Session.read_dir."""
        return await self._c._do(_api.read_dir(self.name, path, dest))

    async def info(self) -> SessionInfo:
        """See Session.info."""
        return await self._c._do(_api.info(self.name))

    async def stop(self) -> None:
        """See Session.stop."""
        await self._c._do(_api.stop(self.name))

    async def remove(self, force: bool = True, keep: Optional[Iterable[str]] = None, keep_history: bool = False,
                     export_to: Optional[str] = None) -> List[str]:
        """See Session.remove."""
        return await self._c._do(_api.remove(self.name, force, keep, keep_history, export_to))


class AsyncClient:
    """The asyncio form of Client (same arguments, same environment variables). One client
    may serve many tasks at once; close it (or use ``async with``) to close its connections."""

    def __init__(self, url: Optional[str] = None, token: Optional[str] = None, timeout: Optional[float] = 120.0,
                 ssl_context: Optional[ssl.SSLContext] = None, grace: float = 30.0) -> None:
        self.url = _env_url(url)
        self.grace = grace
        self._t = AsyncTransport(self.url, _env_token(token), timeout, ssl_context)

    async def __aenter__(self) -> "AsyncClient":
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.close()

    async def close(self) -> None:
        """Closes the client's kept-alive connections."""
        await self._t.close()

    async def _do(self, req: _api.Req) -> Any:
        if req.raw:
            data, headers = await self._t.raw(req.method, req.path, req.body, req.headers, query=req.query)
            out = req.parse(data, headers)
        else:
            out = req.parse(await self._t.call(req.method, req.path, req.payload, query=req.query))
        return await self._do(out) if isinstance(out, _api.Req) else out

    async def start(self, name: Optional[str] = None, lang: Optional[str] = None, **settings: Any) -> AsyncSession:
        """See Client.start."""
        info = await self._do(_api.start(name, lang, settings))
        return AsyncSession(self, info.name, info)

    async def get(self, name: str) -> AsyncSession:
        """See Client.get."""
        return AsyncSession(self, name, await self._do(_api.get(name)))

    async def list(self) -> List[SessionInfo]:
        """See Client.list."""
        return await self._do(_api.list_sessions())

    async def health(self) -> bool:
        """See Client.health."""
        return await self._do(_api.health())

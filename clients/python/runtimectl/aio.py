"""The asyncio client: AsyncClient and AsyncSession, the same methods as Client and Session
with await. The blocking HTTP transport runs in the event loop's default thread pool (one
connection per thread); streaming callbacks are called on the event loop, in order, before
run() returns. A callback may be a coroutine function: its coroutines are awaited before run()
returns."""

import asyncio
import functools
import inspect
import ssl
from typing import Any, Awaitable, Callable, Dict, Iterable, List, Optional, Union

from .client import Client, Execution, Session

AsyncOutputCallback = Callable[[str], Union[Any, Awaitable[Any]]]


async def _in_thread(f: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    loop = asyncio.get_running_loop()
    return await loop.run_in_executor(None, functools.partial(f, *args, **kwargs))


class AsyncSession:
    """A handle on one session; get one with AsyncClient.start or AsyncClient.get."""

    def __init__(self, session: Session) -> None:
        self._s = session
        self.name = session.name
        self.info_at_open = session.info_at_open

    def __repr__(self) -> str:
        return "AsyncSession(%r)" % self.name

    async def run(self, code: str, timeout: Optional[float] = None,
                  on_stdout: Optional[AsyncOutputCallback] = None, on_stderr: Optional[AsyncOutputCallback] = None,
                  on_notice: Optional[AsyncOutputCallback] = None,
                  max_output: Optional[Union[int, str]] = None,
                  env: Optional[Dict[str, str]] = None, workdir: Optional[str] = None) -> Execution:
        """Runs code in the session; see Session.run."""
        loop = asyncio.get_running_loop()
        pending: List["asyncio.Future[Any]"] = []

        def on_loop(cb: Optional[AsyncOutputCallback]) -> Optional[Callable[[str], None]]:
            if cb is None:
                return None

            def call(text: str) -> None:
                r = cb(text)
                if inspect.isawaitable(r):
                    pending.append(asyncio.ensure_future(r))

            return lambda text: loop.call_soon_threadsafe(call, text)

        res = await _in_thread(self._s.run, code, timeout=timeout, on_stdout=on_loop(on_stdout),
                               on_stderr=on_loop(on_stderr), on_notice=on_loop(on_notice), max_output=max_output,
                               env=env, workdir=workdir)
        if pending:
            await asyncio.gather(*pending)
        return res

    async def interrupt(self) -> bool:
        """Interrupts the running code; see Session.interrupt."""
        return await _in_thread(self._s.interrupt)

    async def vars(self) -> Dict[str, Any]:
        """The session's variables; see Session.vars."""
        return await _in_thread(self._s.vars)

    async def context(self, max_chars: int = 4000) -> str:
        """A summary for a model's next prompt; see Session.context."""
        return await _in_thread(self._s.context, max_chars)

    async def summary(self, max_chars: int = 4000) -> Dict[str, Any]:
        """See Session.summary."""
        return await _in_thread(self._s.summary, max_chars)

    async def history(self, last: Optional[int] = None, format: str = "json") -> Any:
        """The executions, oldest first; see Session.history."""
        return await _in_thread(self._s.history, last, format)

    async def snapshots(self) -> List[Dict[str, Any]]:
        """See Session.snapshots."""
        return await _in_thread(self._s.snapshots)

    async def snapshot(self) -> Dict[str, Any]:
        """See Session.snapshot."""
        return await _in_thread(self._s.snapshot)

    async def restore(self, snapshot_id: str) -> Dict[str, Any]:
        """See Session.restore."""
        return await _in_thread(self._s.restore, snapshot_id)

    async def install(self, *packages: str, **options: Any) -> str:
        """See Session.install."""
        return await _in_thread(self._s.install, *packages, **options)

    async def fork(self, name: str, at: Optional[str] = None) -> "AsyncSession":
        """See Session.fork."""
        return AsyncSession(await _in_thread(self._s.fork, name, at))

    async def write_file(self, path: str, data: Union[bytes, str]) -> None:
        """See Session.write_file."""
        await _in_thread(self._s.write_file, path, data)

    async def read_file(self, path: str) -> bytes:
        """See Session.read_file."""
        return await _in_thread(self._s.read_file, path)

    async def write_dir(self, path: str, local_dir: str) -> None:
        """See Session.write_dir."""
        await _in_thread(self._s.write_dir, path, local_dir)

    async def read_dir(self, path: str, dest: str) -> List[str]:
        """See Session.read_dir."""
        return await _in_thread(self._s.read_dir, path, dest)

    async def info(self) -> Dict[str, Any]:
        """See Session.info."""
        return await _in_thread(self._s.info)

    async def stop(self) -> None:
        """See Session.stop."""
        await _in_thread(self._s.stop)

    async def remove(self, force: bool = True, keep: Optional[Iterable[str]] = None, keep_history: bool = False,
                     export_to: Optional[str] = None) -> List[str]:
        """See Session.remove."""
        return await _in_thread(self._s.remove, force, keep, keep_history, export_to)


class AsyncClient:
    """The asyncio form of Client (same arguments, same environment variables)."""

    def __init__(self, url: Optional[str] = None, token: Optional[str] = None, timeout: Optional[float] = 120.0,
                 ssl_context: Optional[ssl.SSLContext] = None, grace: float = 30.0) -> None:
        self._c = Client(url, token, timeout, ssl_context, grace)
        self.url = self._c.url

    async def __aenter__(self) -> "AsyncClient":
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.close()

    async def close(self) -> None:
        """Closes the calling thread's connection (each pool thread keeps its own)."""
        self._c.close()

    async def start(self, name: Optional[str] = None, lang: Optional[str] = None, **settings: Any) -> AsyncSession:
        """See Client.start."""
        return AsyncSession(await _in_thread(self._c.start, name, lang, **settings))

    async def get(self, name: str) -> AsyncSession:
        """See Client.get."""
        return AsyncSession(await _in_thread(self._c.get, name))

    async def list(self) -> List[Dict[str, Any]]:
        """See Client.list."""
        return await _in_thread(self._c.list)

    async def health(self) -> bool:
        """See Client.health."""
        return await _in_thread(self._c.health)

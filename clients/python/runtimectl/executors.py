"""Executors in MetaGPT's shape (its AsyncPyExecutor): a session by name, created or resumed,
with ``out, ok = await ex.run(code)`` and ``await ex.terminate()``. The state lives in the
session, on the server's engine, so a new process days later picks it up where it was::

    from runtimectl.executors import PyExecutor
    ex = PyExecutor("analysis")
    out, ok = await ex.run("a=1\\nb=2\\nc=3\\nprint(f'a={a}')")
    await ex.terminate()            # stops the session; its state stays on the volume
"""

from typing import Any, Optional, Tuple

from .aio import AsyncClient, AsyncSession
from .client import Execution


class _Executor:
    lang = "python"

    def __init__(self, name: str, client: Optional[AsyncClient] = None, timeout: Optional[float] = 600.0,
                 **settings: Any) -> None:
        """name is the session's; client defaults to AsyncClient() (RUNTIMECTL_URL,
        RUNTIMECTL_TOKEN); timeout (seconds) interrupts code that runs longer; settings go to
        AsyncClient.start for a new session (memory, network, env, ...)."""
        self.name = name
        self.timeout = timeout
        self._client = client or AsyncClient()
        self._settings = settings
        self._session: Optional[AsyncSession] = None
        #: the last Execution, with status, result, error and outputs
        self.last: Optional[Execution] = None

    async def session(self) -> AsyncSession:
        """The session, started (or resumed with its state) on first use."""
        if self._session is None:
            self._session = await self._client.start(self.name, lang=self.lang, **self._settings)
        return self._session

    async def run(self, code: str) -> Tuple[str, bool]:
        """Runs code; returns its output (stdout, stderr, and the repr of a final expression)
        and whether it succeeded."""
        s = await self.session()
        res = await s.run(code, timeout=self.timeout)
        self.last = res
        out = res.text
        if res.status not in ("ok", "error") and res.message:
            out += ("" if out.endswith("\n") or not out else "\n") + res.message + "\n"
        return out, res.ok

    async def reset(self) -> None:
        """Removes the session and its state; the next run starts an empty one."""
        s = await self.session()
        await s.remove(force=True)
        self._session = None

    async def terminate(self) -> None:
        """Stops the session (after a snapshot); its state stays on the volume for the next
        executor of that name."""
        if self._session is not None:
            await self._session.stop()
            self._session = None
        else:
            s = await self.session()
            await s.stop()
            self._session = None


class PyExecutor(_Executor):
    """A Python session by name."""

    lang = "python"


class BashExecutor(_Executor):
    """A bash session by name: variables, functions and the working directory persist."""

    lang = "bash"

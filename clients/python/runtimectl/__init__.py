"""Python client of `runtimectl serve`: long-lived, stateful code sessions for LLM agents.

    from runtimectl import Client
    client = Client()                      # RUNTIMECTL_URL, RUNTIMECTL_TOKEN
    s = client.start("demo", lang="python")
    ex = s.run("x = 40 + 2\\nx", timeout=30, on_stdout=print)
    ex.result, ex.status                   # '42', 'ok'

The standard library only. AsyncClient is the same with await (native asyncio);
runtimectl.executors has PyExecutor and BashExecutor in MetaGPT's shape. Replies are typed
(runtimectl.types): SessionInfo, Execution, Output, Vars, Snapshot, HistoryRecord, Summary.
"""

from .aio import AsyncClient, AsyncSession
from .client import Client, Session
from .errors import (
    Busy,
    Conflict,
    Forbidden,
    InvalidRequest,
    RuntimeUnavailable,
    RuntimectlError,
    SessionNotFound,
    TooLarge,
    Unauthorized,
)
from .types import (Display, ExecError, Execution, FileInfo, HistoryRecord, Output, RecentExec, RestoreInfo,
                    SessionInfo, Skipped, Snapshot, StartInfo, State, Summary, Var, Vars)

__version__ = "0.2.0"

__all__ = [
    "AsyncClient", "AsyncSession", "Busy", "Client", "Conflict", "Display", "ExecError", "Execution", "FileInfo",
    "Forbidden", "HistoryRecord", "InvalidRequest", "Output", "RecentExec", "RestoreInfo", "RuntimeUnavailable",
    "RuntimectlError", "Session", "SessionInfo", "SessionNotFound", "Skipped", "Snapshot", "StartInfo", "State",
    "Summary", "TooLarge", "Unauthorized", "Var", "Vars",
]

"""Python client of `runtimectl serve`: long-lived, stateful code sessions for LLM agents.

    from runtimectl import Client
    client = Client()                      # RUNTIMECTL_URL, RUNTIMECTL_TOKEN
    s = client.start("demo", lang="python")
    ex = s.run("x = 40 + 2\\nx", timeout=30, on_stdout=print)
    ex.result, ex.status                   # '42', 'ok'

The standard library only. AsyncClient is the same with await; runtimectl.executors has
PyExecutor and BashExecutor in MetaGPT's shape.
"""

from .aio import AsyncClient, AsyncSession
from .client import Client, ExecError, Execution, Session
from .errors import (
    Busy,
    Conflict,
    InvalidRequest,
    RuntimeUnavailable,
    RuntimectlError,
    SessionNotFound,
    TooLarge,
    Unauthorized,
)

__version__ = "0.1.0"

__all__ = [
    "AsyncClient", "AsyncSession", "Busy", "Client", "Conflict", "ExecError", "Execution", "InvalidRequest",
    "RuntimeUnavailable", "RuntimectlError", "Session", "SessionNotFound", "TooLarge", "Unauthorized",
]

"""Exceptions of the runtimectl client. Each carries the server's message (what is wrong and
what to do), the HTTP status and the server's error code."""

import json
from typing import Optional


class RuntimectlError(Exception):
    """A request that the server refused or could not carry out."""

    def __init__(self, message: str, status: Optional[int] = None, code: Optional[str] = None) -> None:
        super().__init__(message)
        self.message = message
        self.status = status
        self.code = code


class Unauthorized(RuntimectlError):
    """The token is missing or not one the server accepts (HTTP 401)."""


class Forbidden(RuntimectlError, PermissionError):
    """The token may not do this: a limit of its policy (memory, cpus, images, sessions at
    once...) that the message names (HTTP 403)."""


class SessionNotFound(RuntimectlError, LookupError):
    """No such session, or one that belongs to another token (HTTP 404)."""


class Busy(RuntimectlError):
    """Too many executions of this token run at once, or the session's queue is full
    (HTTP 429): try again when one ends."""


class RuntimeUnavailable(RuntimectlError):
    """The server cannot be reached, its engine cannot, or the stream of an execution was cut
    before its end (the execution goes on in the session and lands in its history)."""


class InvalidRequest(RuntimectlError, ValueError):
    """Bad input: a session name, a size, a path outside /workspace (HTTP 400)."""


class Conflict(RuntimectlError):
    """The session runs (remove it with force=True), or its name is taken (HTTP 409)."""


class TooLarge(RuntimectlError):
    """A request or file over the server's size limits (HTTP 413)."""


def from_response(status: int, body: dict, fallback: str) -> RuntimectlError:
    """The exception for an error response."""
    message = str(body.get("error") or fallback)
    code = body.get("code")
    cls = {
        400: InvalidRequest,
        401: Unauthorized,
        403: Forbidden,
        404: SessionNotFound,
        409: Conflict,
        413: TooLarge,
        429: Busy,
        502: RuntimeUnavailable,
        503: RuntimeUnavailable,
        504: RuntimeUnavailable,
    }.get(status, RuntimectlError)
    if status == 401:
        message = "the server refused the token: set RUNTIMECTL_TOKEN (or Client(token=...)) to a token of its token file"
    return cls(message, status=status, code=code)


def from_body(status: int, raw: bytes, what: str) -> RuntimectlError:
    """The exception for an error response whose body is raw (JSON {"error", "code"}, or text)."""
    try:
        body = json.loads(raw) if raw else {}
    except ValueError:
        body = {"error": raw.decode("utf-8", "replace")}
    if not isinstance(body, dict):
        body = {}
    return from_response(status, body, "%s: HTTP %d" % (what, status))

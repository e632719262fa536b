"""The synchronous client: Client, Session, Execution."""

import base64
import io
import json
import os
import socket
import ssl
import tarfile
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, Iterable, List, Optional, Union

from ._transport import DEFAULT_URL, Transport, quote, quote_path
from .errors import RuntimeUnavailable, RuntimectlError, from_response

#: What a streaming callback receives: the text of one chunk of output.
OutputCallback = Callable[[str], Any]


@dataclass
class ExecError:
    """A raised exception (or a crash) of an execution."""

    name: str
    value: str
    traceback: str = ""

    def __str__(self) -> str:
        return "%s: %s" % (self.name, self.value)


@dataclass
class Execution:
    """The end of an execution: the fields of `runtimectl session exec --json`.

    status is one of ok, error, timeout, interrupted, crashed. result is the repr of a final
    expression, else None. outputs are rich outputs such as figures:
    ``{"mime": "image/png", "path": "/workspace/...", "data": b"..."}``.
    """

    session: str
    seq: int
    status: str
    stdout: str = ""
    stderr: str = ""
    result: Optional[str] = None
    error: Optional[ExecError] = None
    duration_ms: float = 0.0
    outputs: List[Dict[str, Any]] = field(default_factory=list)
    message: str = ""
    raw: Dict[str, Any] = field(default_factory=dict, repr=False)

    @property
    def ok(self) -> bool:
        """True when the code ran to its end without error."""
        return self.status == "ok"

    @property
    def text(self) -> str:
        """stdout, stderr and the result as one text, as a person would read them."""
        parts = [self.stdout, self.stderr]
        if self.result is not None:
            parts.append(self.result + "\n")
        return "".join(parts)

    @classmethod
    def from_json(cls, d: Dict[str, Any]) -> "Execution":
        err = d.get("error")
        outs = []
        for o in d.get("outputs") or []:
            o = dict(o)
            if isinstance(o.get("data"), str):
                o["data"] = base64.b64decode(o["data"])
            outs.append(o)
        return cls(
            session=d.get("session", ""), seq=int(d.get("seq") or 0), status=d.get("status", ""),
            stdout=d.get("stdout") or "", stderr=d.get("stderr") or "", result=d.get("result"),
            error=ExecError(err.get("name", ""), err.get("value", ""), err.get("traceback", "")) if err else None,
            duration_ms=float(d.get("duration_ms") or 0), outputs=outs, message=d.get("message") or "", raw=d,
        )


def _env_url(url: Optional[str]) -> str:
    return url or os.environ.get("RUNTIMECTL_URL") or DEFAULT_URL


def _env_token(token: Optional[str]) -> Optional[str]:
    return token if token is not None else os.environ.get("RUNTIMECTL_TOKEN")


def _tar_of(local_dir: str) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tf:
        for entry in sorted(os.listdir(local_dir)):
            tf.add(os.path.join(local_dir, entry), arcname=entry)
    return buf.getvalue()


def _extract(data: bytes, dest: str) -> List[str]:
    """Extracts a tar into dest, refusing entries that would leave it."""
    os.makedirs(dest, exist_ok=True)
    root = os.path.realpath(dest)
    names = []
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:") as tf:
        for m in tf.getmembers():
            target = os.path.realpath(os.path.join(root, m.name))
            if not (target == root or target.startswith(root + os.sep)) or m.issym() or m.islnk() or m.isdev():
                raise RuntimectlError("the tar holds %r, which would leave %s; nothing more was extracted" % (m.name, dest))
            if m.isdir():
                os.makedirs(target, exist_ok=True)
            elif m.isfile():
                os.makedirs(os.path.dirname(target), exist_ok=True)
                src = tf.extractfile(m)
                with open(target, "wb") as f:
                    f.write(src.read() if src else b"")
                names.append(m.name)
    return names


# The status that each code of a stream's "fail" event stands for.
_FAIL_STATUS = {"detached": 503, "unavailable": 503, "busy": 429, "not_found": 404, "invalid": 400, "timeout": 504}


def _finish(resp: Any) -> None:
    """Reads the rest of a streamed response, so that its connection serves the next request."""
    try:
        resp.read()
    except Exception:
        pass


class Session:
    """A handle on one session of the server. Get one with Client.start or Client.get."""

    def __init__(self, client: "Client", name: str, info: Optional[Dict[str, Any]] = None) -> None:
        self._c = client
        self.name = name
        #: the session's line of `session ls --json` when the handle was made
        self.info_at_open: Dict[str, Any] = info or {}

    def __repr__(self) -> str:
        return "Session(%r)" % self.name

    @property
    def lang(self) -> str:
        """The session's language (python, bash, node)."""
        return str(self.info_at_open.get("lang") or self.info().get("lang", ""))

    def _p(self, suffix: str = "") -> str:
        return "/v1/sessions/" + quote(self.name) + suffix

    def run(self, code: str, timeout: Optional[float] = None,
            on_stdout: Optional[OutputCallback] = None, on_stderr: Optional[OutputCallback] = None,
            on_notice: Optional[OutputCallback] = None, max_output: Optional[Union[int, str]] = None,
            env: Optional[Dict[str, str]] = None, workdir: Optional[str] = None) -> Execution:
        """Runs code in the session, as a notebook cell, and returns its Execution.

        timeout (seconds) interrupts the code in the session (status "timeout", state kept);
        the client gives up waiting a little after it (TimeoutError). on_stdout and on_stderr
        receive the output as it is produced, in order, before run returns. A stopped
        session is started first. If the stream is cut (the server stopped), RuntimeUnavailable
        is raised; the execution goes on in the session and lands in its history. env and
        workdir (relative to /workspace, or absolute) hold for this execution only.
        """
        payload: Dict[str, Any] = {"code": code}
        if env:
            payload["env"] = ["%s=%s" % (k, v) for k, v in env.items()]
        if workdir:
            payload["workdir"] = workdir
        if timeout is not None:
            payload["timeout"] = timeout
        if max_output is not None:
            payload["max_output"] = max_output
        read_timeout = None if timeout is None else timeout + self._c.grace
        t = self._c._t
        resp = t.open("POST", self._p("/exec"), json.dumps(payload).encode(),
                      {"Content-Type": "application/json", "Accept": "application/x-ndjson"}, timeout=read_timeout)
        ended = False
        try:
            for ev in t.lines(resp):
                kind = ev.get("event")
                if kind == "stdout":
                    if on_stdout is not None:
                        on_stdout(ev.get("data", ""))
                elif kind == "stderr":
                    if on_stderr is not None:
                        on_stderr(ev.get("data", ""))
                elif kind == "notice":
                    if on_notice is not None:
                        on_notice(ev.get("message", ""))
                elif kind == "end":
                    ended = True
                    _finish(resp)
                    return Execution.from_json(ev)
                elif kind == "fail":
                    ended = True
                    _finish(resp)
                    raise from_response(_FAIL_STATUS.get(str(ev.get("code")), 500), ev, "the execution failed in the runtime")
        except socket.timeout as e:
            t.close()
            raise TimeoutError(
                "no result from session %s within %ss; the code may still run there (interrupt it "
                "with Session.interrupt())" % (self.name, read_timeout)) from e
        finally:
            if not ended:
                # A callback raised, or the stream broke: the connection is mid-response.
                t.close()
        raise RuntimeUnavailable("the stream of the execution ended without its result; it goes on in the session and lands in its history: see Session.history()")

    def interrupt(self) -> bool:
        """Interrupts the code running in the session; False when nothing was running."""
        return bool(self._c._t.call("POST", self._p("/interrupt")).get("interrupted"))

    def vars(self) -> Dict[str, Any]:
        """The session's variables: {"vars": [{"name", "type", "shape", "len", "size",
        "preview"}], "modules": [...]}."""
        return self._c._t.call("GET", self._p("/vars"))

    def context(self, max_chars: int = 4000) -> str:
        """A compact summary of the session for a model's next prompt, at most max_chars."""
        return self.summary(max_chars)["text"]

    def summary(self, max_chars: int = 4000) -> Dict[str, Any]:
        """The fields of `session context --json`, with "text" (what context() returns)."""
        return self._c._t.call("GET", self._p("/context"), query={"max_chars": max_chars})

    def history(self, last: Optional[int] = None, format: str = "json") -> Any:
        """The executions, oldest first: a list of dicts (format json or executor-json), the
        text (text) or an nbformat 4 notebook as a dict (ipynb)."""
        r = self._c._t.call("GET", self._p("/history"), query={"format": format, "last": last})
        if format == "ipynb" and isinstance(r, str):
            return json.loads(r)
        return r

    def snapshots(self) -> List[Dict[str, Any]]:
        """The snapshots, oldest first: id, seq, created, size_bytes, kept, skipped."""
        return self._c._t.call("GET", self._p("/snapshots"))

    def snapshot(self) -> Dict[str, Any]:
        """Takes a snapshot now; returns it (id, seq, size_bytes, kept, skipped)."""
        return self._c._t.call("POST", self._p("/snapshots"))

    def restore(self, snapshot_id: str) -> Dict[str, Any]:
        """Puts the interpreter back in the state of a snapshot: later names are gone."""
        return self._c._t.call("POST", self._p("/restore"), {"snapshot": snapshot_id})

    def fork(self, name: str, at: Optional[str] = None) -> "Session":
        """A new session from this one's workspace and a snapshot (default the latest)."""
        payload: Dict[str, Any] = {"name": name}
        if at:
            payload["at"] = at
        info = self._c._t.call("POST", self._p("/fork"), payload)
        return Session(self._c, info["name"], info)

    def install(self, *packages: str, requirements: Optional[str] = None, index_url: Optional[str] = None,
                extra_index_urls: Optional[List[str]] = None, trusted_hosts: Optional[List[str]] = None,
                no_deps: bool = False) -> str:
        """Like `runtimectl session install`: pip installs the packages (or the content of a
        requirements file) into the session's virtual environment on its volume, in an
        installer container with network access; the session imports them at once. Returns the
        end of pip's output. `%pip install` lines in code do the same."""
        payload: Dict[str, Any] = {"packages": list(packages), "no_deps": no_deps}
        if requirements:
            payload["requirements"] = requirements
        if index_url:
            payload["index_url"] = index_url
        if extra_index_urls:
            payload["extra_index_urls"] = list(extra_index_urls)
        if trusted_hosts:
            payload["trusted_hosts"] = list(trusted_hosts)
        return str(self._c._t.call("POST", self._p("/install"), payload).get("output", ""))

    def write_file(self, path: str, data: Union[bytes, str]) -> None:
        """Writes data to the file path of the session (relative to /workspace)."""
        if isinstance(data, str):
            data = data.encode()
        self._c._t.raw("PUT", self._p("/files/" + quote_path(path)), data, {"Content-Type": "application/octet-stream"})

    def read_file(self, path: str) -> bytes:
        """Reads the file path of the session (relative to /workspace)."""
        data, ctype = self._c._t.raw("GET", self._p("/files/" + quote_path(path)))
        if ctype.startswith("application/x-tar"):
            raise RuntimectlError("%s is a folder in session %s; use read_dir" % (path, self.name))
        return data

    def write_dir(self, path: str, local_dir: str) -> None:
        """Copies the local folder's content into the folder path of the session."""
        self._c._t.raw("PUT", self._p("/files/" + quote_path(path)), _tar_of(local_dir), {"Content-Type": "application/x-tar"})

    def read_dir(self, path: str, dest: str) -> List[str]:
        """Copies the session's folder path into dest (as dest/NAME/...); returns the files."""
        data, ctype = self._c._t.raw("GET", self._p("/files/" + quote_path(path)))
        if not ctype.startswith("application/x-tar"):
            raise RuntimectlError("%s is a file in session %s; use read_file" % (path, self.name))
        return _extract(data, dest)

    def info(self) -> Dict[str, Any]:
        """The session's line of `session ls --json` (name, lang, state, image, created,
        executions, owner)."""
        return self._c._t.call("GET", self._p())

    def stop(self) -> None:
        """Snapshots the session and stops its container; its state stays on the volume and
        the next run (or Client.start) brings it back."""
        self._c._t.call("POST", self._p("/stop"))

    def remove(self, force: bool = True, keep: Optional[Iterable[str]] = None, keep_history: bool = False,
               export_to: Optional[str] = None) -> List[str]:
        """Removes the session (container, volume, state, history). With keep (globs of
        workspace files) or keep_history, those files are first exported to export_to;
        returns the exported paths."""
        keep = list(keep or [])
        query: Dict[str, Any] = {"force": force, "keep": keep or None, "keep_history": keep_history or None}
        data, ctype = self._c._t.raw("DELETE", self._p(), query=query)
        if (keep or keep_history) and ctype.startswith("application/x-tar"):
            if not export_to:
                raise InvalidExport("give export_to=DIR with keep or keep_history")
            return _extract(data, export_to)
        return []


class InvalidExport(RuntimectlError, ValueError):
    """remove(keep=...) without export_to."""


class Client:
    """A client of `runtimectl serve`.

    url defaults to $RUNTIMECTL_URL, else http://127.0.0.1:8700 (unix:///PATH for a unix
    socket, https:// for TLS with ssl_context or the system's CAs); token to
    $RUNTIMECTL_TOKEN. timeout bounds every request but an execution, which waits for its own
    timeout plus grace seconds (or without bound when it has none).
    """

    def __init__(self, url: Optional[str] = None, token: Optional[str] = None, timeout: Optional[float] = 120.0,
                 ssl_context: Optional[ssl.SSLContext] = None, grace: float = 30.0) -> None:
        self.url = _env_url(url)
        self.grace = grace
        self._t = Transport(self.url, _env_token(token), timeout, ssl_context)

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def close(self) -> None:
        """Closes this thread's connection to the server."""
        self._t.close()

    def start(self, name: Optional[str] = None, lang: Optional[str] = None, **settings: Any) -> Session:
        """Like `runtimectl session start`: creates the session (lang python unless given), or
        starts a stopped one again with its state restored; a running one is returned as it is.
        settings are the other fields of POST /v1/sessions: image, memory ("2g"), cpus, pids,
        network, env (["K=V"]), snapshot, keep_snapshots, max_output, disk, idle_stop. Settings
        given for an existing session must match its own (Conflict otherwise)."""
        payload: Dict[str, Any] = {}
        if lang:
            payload["lang"] = lang
        if name:
            payload["name"] = name
        payload.update({k: v for k, v in settings.items() if v is not None})
        info = self._t.call("POST", "/v1/sessions", payload)
        return Session(self, info["name"], info)

    def get(self, name: str) -> Session:
        """A handle on an existing session; SessionNotFound when there is none (or it is
        another token's)."""
        info = self._t.call("GET", "/v1/sessions/" + quote(name))
        return Session(self, name, info)

    def list(self) -> List[Dict[str, Any]]:
        """The sessions this token may see, as `runtimectl session ls --json` prints them."""
        return self._t.call("GET", "/v1/sessions")

    def health(self) -> bool:
        """True when the server answers /healthz."""
        return self._t.call("GET", "/healthz").get("status") == "ok"

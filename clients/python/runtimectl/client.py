"""The synchronous client: Client, Session, and the typed results (runtimectl.types)."""

import os
import socket
import ssl
from typing import Any, Callable, Dict, Iterable, List, Optional, Union

from . import _api
from ._api import InvalidExport
from ._transport import DEFAULT_URL, Transport
from .types import Display, ExecError, Execution, Output, RestoreInfo, SessionInfo, Snapshot, Summary, Vars

__all__ = ["Client", "ExecError", "Execution", "InvalidExport", "OutputCallback", "Session"]

#: What a streaming callback receives: the text of one chunk of output.
OutputCallback = Callable[[str], Any]
#: What on_output receives: a file output (a figure saved as PNG) at the end of the execution.
RichOutputCallback = Callable[[Output], Any]
#: What on_display receives: a display (a mime bundle) as the code makes it, in place among the output.
DisplayCallback = Callable[[Display], Any]


def _env_url(url: Optional[str]) -> str:
    return url or os.environ.get("RUNTIMECTL_URL") or DEFAULT_URL


def _env_token(token: Optional[str]) -> Optional[str]:
    return token if token is not None else os.environ.get("RUNTIMECTL_TOKEN")


def _finish(resp: Any) -> None:
    """Reads the rest of a streamed response, so that its connection serves the next request."""
    try:
        resp.read()
    except Exception:
        pass


def _info(info: Any) -> SessionInfo:
    if isinstance(info, SessionInfo):
        return info
    return SessionInfo.from_json(info if isinstance(info, dict) else {})


class Session:
    """A handle on one session of the server. Get one with Client.start or Client.get."""

    def __init__(self, client: "Client", name: str, info: Optional[Union[SessionInfo, Dict[str, Any]]] = None) -> None:
        self._c = client
        self.name = name
        #: the session as it was when the handle was made (a StartInfo after Client.start)
        self.info_at_open: SessionInfo = _info(info)

    def __repr__(self) -> str:
        return "Session(%r)" % self.name

    @property
    def lang(self) -> str:
        """The session's language (python, bash, node)."""
        return self.info_at_open.lang or self.info().lang

    def run(self, code: str, timeout: Optional[float] = None,
            on_stdout: Optional[OutputCallback] = None, on_stderr: Optional[OutputCallback] = None,
            on_notice: Optional[OutputCallback] = None, max_output: Optional[Union[int, str]] = None,
            env: Optional[Dict[str, str]] = None, workdir: Optional[str] = None,
            on_display: Optional[DisplayCallback] = None, on_output: Optional[RichOutputCallback] = None) -> Execution:
        """Runs code in the session, as a notebook cell, and returns its Execution.

        timeout (seconds) interrupts the code in the session (status "timeout", state kept);
        the client gives up waiting a little after it (TimeoutError). on_stdout and on_stderr
        receive the output as it is produced, in order, before run returns; on_display each
        Display (a mime bundle: display(), a figure shown) in its place among them; on_output
        each file Output. A stopped session is started first. If the
        stream is cut (the server stopped), RuntimeUnavailable is raised; the execution goes on
        in the session and lands in its history. env and workdir (relative to /workspace, or
        absolute) hold for this execution only.
        """
        body = _api.exec_payload(code, timeout, max_output, env, workdir)
        read_timeout = None if timeout is None else timeout + self._c.grace
        callbacks = {"stdout": on_stdout, "stderr": on_stderr, "notice": on_notice, "display": on_display,
                     "output": on_output}
        t = self._c._t
        resp = t.open("POST", _api.sessions_path(self.name, "/exec"), body, _api.EXEC_HEADERS, timeout=read_timeout)
        st = _api.ExecStream()
        try:
            for ev in t.lines(resp):
                kind, value = st.feed(ev)
                if kind == "end":
                    return value
                cb = callbacks.get(kind)
                if cb is not None:
                    cb(value)
        except socket.timeout as e:
            t.close()
            raise _api.exec_timeout(self.name, read_timeout) from e
        finally:
            if st.ended:
                _finish(resp)  # the rest of the response, so that the connection serves the next request
            else:
                # A callback raised, or the stream broke: the connection is mid-response.
                t.close()
        raise _api.cut_stream()

    def interrupt(self) -> bool:
        """Interrupts the code running in the session; False when nothing was running."""
        return self._c._do(_api.interrupt(self.name))

    def vars(self) -> Vars:
        """The session's variables (Vars: .vars, a list of Var with name, type, shape, len,
        size, preview; .modules; .names; .find(name))."""
        return self._c._do(_api.vars_(self.name))

    def context(self, max_chars: int = 4000) -> str:
        """A compact summary of the session for a model's next prompt, at most max_chars."""
        return self.summary(max_chars).text

    def summary(self, max_chars: int = 4000) -> Summary:
        """The fields of `session context --json` (Summary), with .text (what context() returns)."""
        return self._c._do(_api.summary(self.name, max_chars))

    def history(self, last: Optional[int] = None, format: str = "json") -> Any:
        """The executions, oldest first: a list of HistoryRecord (format json), the text
        (text), an nbformat 4 notebook as a dict (ipynb), or MetaGPT's executor file as a dict
        (executor-json)."""
        return self._c._do(_api.history(self.name, last, format))

    def snapshots(self) -> List[Snapshot]:
        """The snapshots, oldest first: id, seq, created, size_bytes, kept, skipped."""
        return self._c._do(_api.snapshots(self.name))

    def snapshot(self) -> Snapshot:
        """Takes a snapshot now; returns it (id, seq, size_bytes, kept, skipped)."""
        return self._c._do(_api.snapshot(self.name))

    def restore(self, snapshot_id: str) -> RestoreInfo:
        """Puts the interpreter back in the state of a snapshot: later names are gone."""
        return self._c._do(_api.restore(self.name, snapshot_id))

    def fork(self, name: str, at: Optional[str] = None) -> "Session":
        """A new session from this one's workspace and a snapshot (default the latest)."""
        info = self._c._do(_api.fork(self.name, name, at))
        return Session(self._c, info.name or name, info)

    def install(self, *packages: str, requirements: Optional[str] = None, index_url: Optional[str] = None,
                extra_index_urls: Optional[List[str]] = None, trusted_hosts: Optional[List[str]] = None,
                no_deps: bool = False) -> str:
        """Like `runtimectl session install`: pip installs the packages (or the content of a
        requirements file) into the session's virtual environment on its volume, in an
        installer container that reaches the index's hosts only (those of index_url and
        extra_index_urls, PyPI's without them); the session imports them at once. Returns the
        end of pip's output. `%pip install` lines in code do the same."""
        return self._c._do(_api.install(self.name, packages, requirements, index_url, extra_index_urls,
                                        trusted_hosts, no_deps))

    def write_file(self, path: str, data: Union[bytes, str]) -> None:
        """Writes data to the file path of the session (relative to /workspace)."""
        self._c._do(_api.write_file(self.name, path, data))

    def read_file(self, path: str) -> bytes:
        """Reads the file path of the session (relative to /workspace)."""
        return self._c._do(_api.read_file(self.name, path))

    def write_dir(self, path: str, local_dir: str) -> None:
        """Copies the local folder's content into the folder path of the session."""
        self._c._do(_api.write_dir(self.name, path, local_dir))

    def read_dir(self, path: str, dest: str) -> List[str]:
        """Copies the session's folder path into dest (as dest/NAME/...); returns the files."""
        return self._c._do(_api.read_dir(self.name, path, dest))

    def info(self) -> SessionInfo:
        """The session as `session ls --json` shows it (name, lang, state, image, created,
        executions, owner)."""
        return self._c._do(_api.info(self.name))

    def stop(self) -> None:
        """Snapshots the session and stops its container; its state stays on the volume and
        the next run (or Client.start) brings it back."""
        self._c._do(_api.stop(self.name))

    def remove(self, force: bool = True, keep: Optional[Iterable[str]] = None, keep_history: bool = False,
               export_to: Optional[str] = None) -> List[str]:
        """Removes the session (container, volume, state, history). With keep (globs of
        workspace files) or keep_history, those files are first exported to export_to (which
        they need); returns the exported paths."""
        return self._c._do(_api.remove(self.name, force, keep, keep_history, export_to))


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

    def _do(self, req: _api.Req) -> Any:
        if req.raw:
            data, headers = self._t.raw(req.method, req.path, req.body, req.headers, query=req.query)
            out = req.parse(data, headers)
        else:
            out = req.parse(self._t.call(req.method, req.path, req.payload, query=req.query))
        return self._do(out) if isinstance(out, _api.Req) else out

    def start(self, name: Optional[str] = None, lang: Optional[str] = None, **settings: Any) -> Session:
        """Like `runtimectl session start`: creates the session (lang python unless given), or
        starts a stopped one again with its state restored; a running one is returned as it is.
        settings are the other fields of POST /v1/sessions: image, memory ("2g"), cpus, pids,
        network, env (["K=V"]), snapshot, keep_snapshots, max_output, disk, idle_stop,
        allow_hosts (["pypi.org", "*.example.com:8443"] or "a,b": egress only to these names,
        through the session's egress proxy) and secret_headers (["HOST=HEADER:ENV"]: the proxy
        adds HEADER valued from the server's $ENV; admin tokens only). Settings given for an
        existing session must match its own (Conflict otherwise)."""
        for key in ("allow_hosts", "secret_headers"):
            if isinstance(settings.get(key), str):
                settings[key] = [settings[key]]
        info = self._do(_api.start(name, lang, settings))
        return Session(self, info.name, info)

    def get(self, name: str) -> Session:
        """A handle on an existing session; SessionNotFound when there is none (or it is
        another token's)."""
        return Session(self, name, self._do(_api.get(name)))

    def list(self) -> List[SessionInfo]:
        """The sessions this token may see, as `runtimectl session ls --json` shows them."""
        return self._do(_api.list_sessions())

    def health(self) -> bool:
        """True when the server answers /healthz."""
        return self._do(_api.health())

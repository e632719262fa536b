"""The requests of the API and what their replies become, shared by the sync and the asyncio
clients (which differ only in how they send them). Internal."""

import hashlib
import io
import json
import os
import tarfile
from typing import Any, Callable, Dict, Iterable, List, NamedTuple, Optional, Tuple, Union

from ._transport import quote, quote_path
from .errors import RuntimeUnavailable, RuntimectlError, from_response
from .types import Display, Execution, HistoryRecord, Output, RestoreInfo, SessionInfo, Snapshot, StartInfo, Summary, Vars


class Req(NamedTuple):
    """One request: a JSON one (parse gets the decoded reply) or, with raw, one whose body is
    bytes both ways (parse gets the reply's bytes and headers, names in lower case). A parse
    that returns a Req asks for that request next (its result is the call's)."""

    method: str
    path: str
    payload: Any = None
    query: Optional[Dict[str, Any]] = None
    parse: Callable[..., Any] = lambda r: r
    raw: bool = False
    body: Optional[bytes] = None
    headers: Optional[Dict[str, str]] = None


def sessions_path(name: str, suffix: str = "") -> str:
    return "/v1/sessions/" + quote(name) + suffix


def _list_of(cls: Any) -> Callable[[Any], List[Any]]:
    return lambda r: [cls.from_json(x) for x in (r or []) if isinstance(x, dict)]


def start(name: Optional[str], lang: Optional[str], settings: Dict[str, Any]) -> Req:
    payload: Dict[str, Any] = {}
    if lang:
        payload["lang"] = lang
    if name:
        payload["name"] = name
    payload.update({k: v for k, v in settings.items() if v is not None})
    return Req("POST", "/v1/sessions", payload, parse=StartInfo.from_json)


def get(name: str) -> Req:
    return Req("GET", sessions_path(name), parse=SessionInfo.from_json)


def list_sessions() -> Req:
    return Req("GET", "/v1/sessions", parse=_list_of(SessionInfo))


def health() -> Req:
    return Req("GET", "/healthz", parse=lambda r: isinstance(r, dict) and r.get("status") == "ok")


def exec_payload(code: str, timeout: Optional[float], max_output: Optional[Union[int, str]],
                 env: Optional[Dict[str, str]], workdir: Optional[str]) -> bytes:
    payload: Dict[str, Any] = {"code": code}
    if env:
        payload["env"] = ["%s=%s" % (k, v) for k, v in env.items()]
    if workdir:
        payload["workdir"] = workdir
    if timeout is not None:
        payload["timeout"] = timeout
    if max_output is not None:
        payload["max_output"] = max_output
    return json.dumps(payload).encode()


EXEC_HEADERS = {"Content-Type": "application/json", "Accept": "application/x-ndjson"}


def interrupt(name: str) -> Req:
    return Req("POST", sessions_path(name, "/interrupt"), parse=lambda r: bool((r or {}).get("interrupted")))


def vars_(name: str) -> Req:
    return Req("GET", sessions_path(name, "/vars"), parse=lambda r: Vars.from_json(r or {}))


def summary(name: str, max_chars: int) -> Req:
    return Req("GET", sessions_path(name, "/context"), query={"max_chars": max_chars},
               parse=lambda r: Summary.from_json(r or {}))


def _history(fmt: str) -> Callable[[Any], Any]:
    def parse(r: Any) -> Any:
        if fmt == "json":
            return _list_of(HistoryRecord)(r)
        if fmt in ("ipynb", "executor-json") and isinstance(r, str):
            return json.loads(r)
        return r
    return parse


def history(name: str, last: Optional[int], fmt: str) -> Req:
    return Req("GET", sessions_path(name, "/history"), query={"format": fmt, "last": last}, parse=_history(fmt))


def snapshots(name: str) -> Req:
    return Req("GET", sessions_path(name, "/snapshots"), parse=_list_of(Snapshot))


def snapshot(name: str) -> Req:
    return Req("POST", sessions_path(name, "/snapshots"), parse=lambda r: Snapshot.from_json(r or {}))


def restore(name: str, snapshot_id: str) -> Req:
    return Req("POST", sessions_path(name, "/restore"), {"snapshot": snapshot_id},
               parse=lambda r: RestoreInfo.from_json(r or {}))


def fork(name: str, new: str, at: Optional[str]) -> Req:
    payload: Dict[str, Any] = {"name": new}
    if at:
        payload["at"] = at
    return Req("POST", sessions_path(name, "/fork"), payload, parse=SessionInfo.from_json)


def install(name: str, packages: Iterable[str], requirements: Optional[str], index_url: Optional[str],
            extra_index_urls: Optional[List[str]], trusted_hosts: Optional[List[str]], no_deps: bool) -> Req:
    payload: Dict[str, Any] = {"packages": list(packages), "no_deps": no_deps}
    if requirements:
        payload["requirements"] = requirements
    if index_url:
        payload["index_url"] = index_url
    if extra_index_urls:
        payload["extra_index_urls"] = list(extra_index_urls)
    if trusted_hosts:
        payload["trusted_hosts"] = list(trusted_hosts)
    return Req("POST", sessions_path(name, "/install"), payload, parse=lambda r: str((r or {}).get("output", "")))


def info(name: str) -> Req:
    return Req("GET", sessions_path(name), parse=SessionInfo.from_json)


def stop(name: str) -> Req:
    return Req("POST", sessions_path(name, "/stop"), parse=lambda r: None)


_OCTETS = {"Content-Type": "application/octet-stream"}
_TAR = {"Content-Type": "application/x-tar"}


def write_file(name: str, path: str, data: Union[bytes, str]) -> Req:
    if isinstance(data, str):
        data = data.encode()
    return Req("PUT", sessions_path(name, "/files/" + quote_path(path)), raw=True, body=data, headers=_OCTETS,
               parse=lambda b, h: None)


def read_file(name: str, path: str) -> Req:
    def parse(data: bytes, h: Dict[str, str]) -> bytes:
        if _ctype(h).startswith("application/x-tar"):
            raise RuntimectlError("%s is a folder in session %s; use read_dir" % (path, name))
        return data
    return Req("GET", sessions_path(name, "/files/" + quote_path(path)), raw=True, parse=parse)


def write_dir(name: str, path: str, local_dir: str) -> Req:
    return Req("PUT", sessions_path(name, "/files/" + quote_path(path)), raw=True, body=tar_of(local_dir),
               headers=_TAR, parse=lambda b, c: None)


def read_dir(name: str, path: str, dest: str) -> Req:
    def parse(data: bytes, h: Dict[str, str]) -> List[str]:
        if not _ctype(h).startswith("application/x-tar"):
            raise RuntimectlError("%s is a file in session %s; use read_file" % (path, name))
        return extract(data, dest)
    return Req("GET", sessions_path(name, "/files/" + quote_path(path)), raw=True, parse=parse)


class InvalidExport(RuntimectlError, ValueError):
    """remove(keep=...) without export_to."""


def remove(name: str, force: bool, keep: Optional[Iterable[str]], keep_history: bool,
           export_to: Optional[str]) -> Req:
    """The removal of a session; with keep or keep_history, the export first. The server is
    asked to keep the session until the export is checked (remove=false): the tar must match
    its X-Runtimectl-Export-Sha256, is extracted, and only then is the session removed (a
    server that removes it with the export, X-Runtimectl-Export-Removes absent or true, needs
    no second request). A cut or corrupt export raises and leaves the session there."""
    kept = list(keep or [])
    if not kept and not keep_history:
        return Req("DELETE", sessions_path(name), query={"force": force}, raw=True, parse=lambda b, h: [])
    if not export_to:
        raise InvalidExport("give export_to=DIR with keep or keep_history")
    query: Dict[str, Any] = {"force": force, "keep": kept or None, "keep_history": keep_history or None,
                             "remove": False}

    def parse(data: bytes, h: Dict[str, str]) -> Any:
        want = h.get("x-runtimectl-export-sha256", "").strip().lower()
        removes = h.get("x-runtimectl-export-removes", "true").strip().lower() != "false"
        if want and hashlib.sha256(data).hexdigest() != want:
            raise RuntimeUnavailable(
                "the export of session %s came cut or corrupt (%d bytes, not matching its SHA-256)%s; ask again"
                % (name, len(data), "" if removes else "; the session is still there"))
        paths = extract(data, export_to or ".") if _ctype(h).startswith("application/x-tar") else []
        if removes:
            return paths
        return Req("DELETE", sessions_path(name), query={"force": True}, raw=True, parse=lambda b, h2: paths)
    return Req("DELETE", sessions_path(name), query=query, raw=True, parse=parse)


def _ctype(h: Dict[str, str]) -> str:
    return h.get("content-type", "")


def tar_of(local_dir: str) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tf:
        for entry in sorted(os.listdir(local_dir)):
            tf.add(os.path.join(local_dir, entry), arcname=entry)
    return buf.getvalue()


def extract(data: bytes, dest: str) -> List[str]:
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
_FAIL_STATUS = {"detached": 503, "unavailable": 503, "busy": 429, "not_found": 404, "invalid": 400, "timeout": 504,
                "forbidden": 403, "limit": 403, "too_large": 413}


class ExecStream:
    """Reads the events of an execution's NDJSON stream: feed gives, for each, what the
    caller hands to its callbacks, ("stdout", text), ("stderr", text), ("notice", message),
    ("display", Display), ("output", Output), or at the end ("end", Execution); a "fail" event
    raises. A server that keeps no copy of a streamed execution's output says "streamed" in its
    end event, whose stdout and stderr are then those of the events."""

    def __init__(self) -> None:
        self._stdout: List[str] = []
        self._stderr: List[str] = []
        self._outputs: List[Output] = []
        self._displays: List[Display] = []
        self.ended = False

    def feed(self, ev: Dict[str, Any]) -> Tuple[str, Any]:
        kind = str(ev.get("event") or "")
        if kind in ("stdout", "stderr"):
            text = str(ev.get("data") or "")
            (self._stdout if kind == "stdout" else self._stderr).append(text)
            return kind, text
        if kind == "notice":
            return kind, str(ev.get("message") or "")
        if kind == "display":
            inner = ev.get("display")
            disp = Display.from_json(inner if isinstance(inner, dict) else {k: v for k, v in ev.items() if k != "event"})
            self._displays.append(disp)
            return kind, disp
        if kind == "output":
            out = Output.from_json({k: v for k, v in ev.items() if k != "event"})
            self._outputs.append(out)
            return kind, out
        if kind == "end":
            self.ended = True
            d = {k: v for k, v in ev.items() if k != "event"}
            for key, got in (("stdout", self._stdout), ("stderr", self._stderr)):
                if d.get("streamed") or d.get(key) is None:
                    d[key] = "".join(got)
            res = Execution.from_json(d)
            if not res.outputs and self._outputs:
                res.outputs = list(self._outputs)
            if not res.displays and self._displays:
                res.displays = list(self._displays)
            return kind, res
        if kind == "fail":
            self.ended = True
            raise from_response(_FAIL_STATUS.get(str(ev.get("code")), 500), ev, "the execution failed in the runtime")
        return "", None


def cut_stream() -> RuntimeUnavailable:
    return RuntimeUnavailable(
        "the stream of the execution ended without its result; it goes on in the session and lands in "
        "its history: see Session.history()")


def exec_timeout(name: str, after: Optional[float]) -> TimeoutError:
    return TimeoutError(
        "no result from session %s within %ss; the code may still run there (interrupt it "
        "with Session.interrupt())" % (name, after))

"""The typed objects of the client: what the server's JSON replies become.

Every class is a dataclass built by its ``from_json`` from the server's reply, which it keeps in
``raw`` (not compared, not in the repr). Fields the server adds later stay reachable there.

Until 0.1 the client returned plain dicts. Dict-style access (``info["state"]``,
``vars()["vars"]``, ``x.get("kept")``, ``"name" in x``) still works on every object and gives the
value of the server's JSON, as before, but warns with DeprecationWarning: use the attributes.
"""

import base64
import dataclasses
import datetime as _dt
import json
import re
import warnings
from dataclasses import dataclass, field
from typing import Any, Dict, Iterator, List, Optional, Tuple

__all__ = [
    "Display", "ExecError", "Execution", "FileInfo", "HistoryRecord", "Output",
    "RecentExec", "RestoreInfo", "SessionInfo", "Skipped", "Snapshot", "StartInfo", "State", "Summary",
    "Var", "Vars",
]


class _DictAccess:
    """Deprecated dict-style reads of an object's JSON, for code written against 0.1."""

    raw: Dict[str, Any]

    def _legacy(self) -> Dict[str, Any]:
        return self.raw

    def _warn(self, what: str) -> None:
        warnings.warn(
            "dict-style access to runtimectl.%s (%s) is deprecated: use its attributes"
            % (type(self).__name__, what), DeprecationWarning, stacklevel=3)

    def __getitem__(self, key: str) -> Any:
        self._warn("[%r]" % (key,))
        return self._legacy()[key]

    def get(self, key: str, default: Any = None) -> Any:
        self._warn(".get(%r)" % (key,))
        return self._legacy().get(key, default)

    def keys(self) -> Any:
        self._warn(".keys()")
        return self._legacy().keys()

    def items(self) -> Any:
        self._warn(".items()")
        return self._legacy().items()

    def values(self) -> Any:
        self._warn(".values()")
        return self._legacy().values()

    def __contains__(self, key: object) -> bool:
        self._warn("in")
        return key in self._legacy()


_FRACTION = re.compile(r"\.(\d+)")


def parse_time(v: Any) -> Optional[_dt.datetime]:
    """An RFC 3339 time of the server (Go's, with nanoseconds and Z) as an aware datetime;
    None for none or Go's zero time."""
    if not v or not isinstance(v, str) or v.startswith("0001-01-01"):
        return None
    s = v.strip()
    if s.endswith(("Z", "z")):
        s = s[:-1] + "+00:00"
    s = _FRACTION.sub(lambda m: "." + (m.group(1) + "000000")[:6], s, count=1)
    try:
        return _dt.datetime.fromisoformat(s)
    except ValueError:
        return None


def _s(d: Dict[str, Any], k: str) -> str:
    v = d.get(k)
    return "" if v is None else str(v)


def _i(d: Dict[str, Any], k: str, default: int = 0) -> int:
    v = d.get(k)
    try:
        return default if v is None else int(v)
    except (TypeError, ValueError):
        return default


def _f(d: Dict[str, Any], k: str) -> float:
    v = d.get(k)
    try:
        return 0.0 if v is None else float(v)
    except (TypeError, ValueError):
        return 0.0


def _strs(d: Dict[str, Any], k: str) -> List[str]:
    return [str(x) for x in (d.get(k) or [])]


def _dicts(d: Dict[str, Any], k: str) -> List[Dict[str, Any]]:
    return [x for x in (d.get(k) or []) if isinstance(x, dict)]


@dataclass
class Skipped(_DictAccess):
    """A variable a snapshot could not keep (or a restore could not bring back), and why."""

    name: str = ""
    type: str = ""
    reason: str = ""
    raw: Dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def from_json(cls, d: Dict[str, Any]) -> "Skipped":
        return cls(name=_s(d, "name"), type=_s(d, "type"), reason=_s(d, "reason"), raw=d)


@dataclass
class RestoreInfo(_DictAccess):
    """What a restore brought back: the snapshot (its id, "" for an empty start) and the
    execution it follows, the names restored, those that failed or came back as copies."""

    snapshot: str = ""
    seq: int = 0
    restored: List[str] = field(default_factory=list)
    failed: List[Skipped] = field(default_factory=list)
    copies: List[Skipped] = field(default_factory=list)
    messages: List[str] = field(default_factory=list)
    raw: Dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def from_json(cls, d: Dict[str, Any]) -> "RestoreInfo":
        return cls(snapshot=_s(d, "snapshot"), seq=_i(d, "seq"), restored=_strs(d, "restored"),
                   failed=[Skipped.from_json(x) for x in _dicts(d, "failed")],
                   copies=[Skipped.from_json(x) for x in _dicts(d, "copies")],
                   messages=_strs(d, "messages"), raw=d)


def _restore(d: Dict[str, Any], k: str) -> Optional[RestoreInfo]:
    v = d.get(k)
    return RestoreInfo.from_json(v) if isinstance(v, dict) else None


@dataclass
class SessionInfo(_DictAccess):
    """A session as `runtimectl session ls --json` shows it.

    state is running, exited, created or removed (its volume only); executions is the latest
    execution's seq, -1 when unknown; owner is the token's name that made it through serve.
    """

    name: str = ""
    lang: str = ""
    state: str = ""
    image: str = ""
    created: Optional[_dt.datetime] = None
    executions: int = -1
    last_exec: str = ""
    owner: str = ""
    raw: Dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @property
    def running(self) -> bool:
        return self.state == "running"

    @classmethod
    def _fields(cls, d: Dict[str, Any]) -> Dict[str, Any]:
        return dict(name=_s(d, "name"), lang=_s(d, "lang"), state=_s(d, "state"), image=_s(d, "image"),
                    created=parse_time(d.get("created")), executions=_i(d, "executions", -1),
                    last_exec=_s(d, "last_exec"), owner=_s(d, "owner"), raw=d)

    @classmethod
    def from_json(cls, d: Dict[str, Any]) -> "SessionInfo":
        return cls(**cls._fields(d))


@dataclass
class StartInfo(SessionInfo):
    """The reply to a start: the session, and whether it was created (new), started again
    (started, with what the restore brought back), or found running."""

    new: bool = False
    started: bool = False
    restored: Optional[RestoreInfo] = None
    message: str = ""

    @classmethod
    def from_json(cls, d: Dict[str, Any]) -> "StartInfo":
        return cls(new=bool(d.get("new")), started=bool(d.get("started")), restored=_restore(d, "restored"),
                   message=_s(d, "message"), **cls._fields(d))


@dataclass
class Snapshot(_DictAccess):
    """A snapshot of a session's interpreter state: its id, the execution it follows (seq),
    its size, the names it kept and those it skipped (with why). The fields of a listed
    snapshot's manifest (created, lang, format, note, broken, info) are empty in the reply of
    Session.snapshot()."""

    id: str = ""
    seq: int = 0
    created: Optional[_dt.datetime] = None
    size_bytes: int = 0
    kept: List[str] = field(default_factory=list)
    skipped: List[Skipped] = field(default_factory=list)
    lang: str = ""
    format: str = ""
    note: str = ""
    broken: str = ""
    info: Dict[str, str] = field(default_factory=dict)
    raw: Dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def from_json(cls, d: Dict[str, Any]) -> "Snapshot":
        return cls(id=_s(d, "id"), seq=_i(d, "seq"), created=parse_time(d.get("created")),
                   size_bytes=_i(d, "size_bytes"), kept=_strs(d, "kept"),
                   skipped=[Skipped.from_json(x) for x in _dicts(d, "skipped")], lang=_s(d, "lang"),
                   format=_s(d, "format"), note=_s(d, "note"), broken=_s(d, "broken"),
                   info={str(k): str(v) for k, v in (d.get("info") or {}).items()}, raw=d)


@dataclass
class Var(_DictAccess):
    """One variable of a session: its type, shape (arrays, frames), len, size in bytes and a
    short preview."""

    name: str = ""
    type: str = ""
    shape: str = ""
    len: Optional[int] = None
    size: int = 0
    preview: str = ""
    raw: Dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def from_json(cls, d: Dict[str, Any]) -> "Var":
        return cls(name=_s(d, "name"), type=_s(d, "type"), shape=_s(d, "shape"),
                   len=None if d.get("len") is None else _i(d, "len"), size=_i(d, "size"),
                   preview=_s(d, "preview"), raw=d)


@dataclass
class Vars(_DictAccess):
    """A session's variables, its imported modules, and the names it keeps private."""

    vars: List[Var] = field(default_factory=list)
    modules: List[str] = field(default_factory=list)
    private: List[str] = field(default_factory=list)
    raw: Dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @property
    def names(self) -> List[str]:
        """The variables' names, in the server's order."""
        return [v.name for v in self.vars]

    def find(self, name: str) -> Optional[Var]:
        """The variable of that name, or None."""
        for v in self.vars:
            if v.name == name:
                return v
        return None

    def __iter__(self) -> Iterator[Var]:
        return iter(self.vars)

    def __contains__(self, name: object) -> bool:
        """Whether a variable of that name exists (the JSON's keys, deprecated, as before)."""
        if name in self.raw:
            self._warn("in")
            return True
        return any(v.name == name for v in self.vars)

    @classmethod
    def from_json(cls, d: Dict[str, Any]) -> "Vars":
        return cls(vars=[Var.from_json(x) for x in _dicts(d, "vars")], modules=_strs(d, "modules"),
                   private=_strs(d, "private"), raw=d)


@dataclass
class RecentExec(_DictAccess):
    """One of the latest executions in a session's context summary."""

    seq: int = 0
    status: str = ""
    code: str = ""
    error: str = ""
    raw: Dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def from_json(cls, d: Dict[str, Any]) -> "RecentExec":
        return cls(seq=_i(d, "seq"), status=_s(d, "status"), code=_s(d, "code"), error=_s(d, "error"), raw=d)


@dataclass
class FileInfo(_DictAccess):
    """A file of the workspace: its path relative to /workspace, size and modification time."""

    path: str = ""
    size: int = 0
    modified: Optional[_dt.datetime] = None
    raw: Dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def from_json(cls, d: Dict[str, Any]) -> "FileInfo":
        return cls(path=_s(d, "path"), size=_i(d, "size"), modified=parse_time(d.get("modified")), raw=d)


@dataclass
class Summary(_DictAccess):
    """`session context --json`: the latest executions, variables, modules, the newest files
    and the last output; text is the compact summary for a model's next prompt."""

    session: str = ""
    lang: str = ""
    executions: int = 0
    recent: List[RecentExec] = field(default_factory=list)
    vars: List[Var] = field(default_factory=list)
    modules: List[str] = field(default_factory=list)
    files: List[FileInfo] = field(default_factory=list)
    files_total: int = 0
    files_size: int = 0
    last_output: str = ""
    text: str = ""
    raw: Dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    def __str__(self) -> str:
        return self.text

    @classmethod
    def from_json(cls, d: Dict[str, Any]) -> "Summary":
        return cls(session=_s(d, "session"), lang=_s(d, "lang"), executions=_i(d, "executions"),
                   recent=[RecentExec.from_json(x) for x in _dicts(d, "recent")],
                   vars=[Var.from_json(x) for x in _dicts(d, "vars")], modules=_strs(d, "modules"),
                   files=[FileInfo.from_json(x) for x in _dicts(d, "files")], files_total=_i(d, "files_total"),
                   files_size=_i(d, "files_size"), last_output=_s(d, "last_output"), text=_s(d, "text"), raw=d)


@dataclass
class ExecError(_DictAccess):
    """A raised exception (or a crash) of an execution."""

    name: str = ""
    value: str = ""
    traceback: str = ""
    raw: Dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    def __str__(self) -> str:
        return "%s: %s" % (self.name, self.value)

    @classmethod
    def from_json(cls, d: Optional[Dict[str, Any]]) -> Optional["ExecError"]:
        if not isinstance(d, dict):
            return None
        return cls(name=_s(d, "name"), value=_s(d, "value"), traceback=_s(d, "traceback"), raw=d)


@dataclass
class State(_DictAccess):
    """What became of the interpreter state after an execution: status saved, pending,
    failed, unchanged, off or restored; the snapshot written (or restored); restored_to after
    a crash or a timeout kill (the seq whose state came back, 0 for the empty state)."""

    status: str = ""
    snapshot: str = ""
    error: str = ""
    restored_to: Optional[int] = None
    message: str = ""
    raw: Dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def from_json(cls, d: Any) -> Optional["State"]:
        if not isinstance(d, dict):
            return None
        return cls(status=_s(d, "status"), snapshot=_s(d, "snapshot"), error=_s(d, "error"),
                   restored_to=None if d.get("restored_to") is None else _i(d, "restored_to"),
                   message=_s(d, "message"), raw=d)


def _is_text_mime(mime: str) -> bool:
    """Whether a bundle's value of this media type is text (or JSON) rather than base64."""
    m = mime.split(";", 1)[0].strip().lower()
    return (m.startswith("text/") or m.endswith(("+json", "+xml", "/json", "/javascript", "/xml"))
            or m in ("image/svg+xml", "application/x-latex"))


def _bundle_value(mime: str, v: Any) -> Any:
    """A value of a mime bundle as Python has it: text as str, JSON as its object, binary
    (base64 on the wire, as in Jupyter's messages) as bytes."""
    if isinstance(v, list) and all(isinstance(x, str) for x in v) and _is_text_mime(mime):
        return "".join(v)  # nbformat's multiline strings
    if isinstance(v, str) and not _is_text_mime(mime):
        try:
            return base64.b64decode(v, validate=False)
        except (ValueError, TypeError):
            return v
    return v


# The order in which a representation is the main one of a bundle, as Jupyter prefers them.
_MIME_ORDER = ["application/vnd.jupyter.widget-view+json", "application/javascript", "text/html",
               "text/markdown", "text/latex", "image/svg+xml", "image/png", "image/jpeg", "image/gif",
               "application/pdf", "application/json", "text/plain"]


class _Rich:
    """Access by media type, for an Output (one type) and a Display (a bundle), and IPython's
    rich display protocol, so that either shows itself in a notebook."""

    metadata: Dict[str, Any]

    @property
    def mimes(self) -> List[str]:  # pragma: no cover - defined by each class
        raise NotImplementedError

    def get_data(self, mime: str) -> Any:  # pragma: no cover
        raise NotImplementedError

    @property
    def main_mime(self) -> str:
        """The richest media type it has (Jupyter's order), "" for none."""
        ms = self.mimes
        for m in _MIME_ORDER:
            if m in ms:
                return m
        return ms[0] if ms else ""

    def png(self) -> Optional[bytes]:
        """The PNG bytes, or None."""
        v = self.get_data("image/png")
        return bytes(v) if isinstance(v, (bytes, bytearray)) else None

    def jpeg(self) -> Optional[bytes]:
        """The JPEG bytes, or None."""
        v = self.get_data("image/jpeg")
        return bytes(v) if isinstance(v, (bytes, bytearray)) else None

    def svg(self) -> Optional[str]:
        return self._text("image/svg+xml")

    def html(self) -> Optional[str]:
        return self._text("text/html")

    def markdown(self) -> Optional[str]:
        return self._text("text/markdown")

    def latex(self) -> Optional[str]:
        return self._text("text/latex")

    def text(self) -> Optional[str]:
        """The text/plain representation, or None."""
        return self._text("text/plain")

    def json(self) -> Any:
        """The application/json representation (the object), or None."""
        v = self.get_data("application/json")
        if isinstance(v, (bytes, bytearray, str)):
            try:
                return json.loads(v)
            except ValueError:
                return None
        return v

    def _text(self, mime: str) -> Optional[str]:
        v = self.get_data(mime)
        if isinstance(v, (bytes, bytearray)):
            return bytes(v).decode("utf-8", "replace")
        return v if isinstance(v, str) else None

    def save(self, path: str, mime: Optional[str] = None) -> str:
        """Writes one representation (default the richest) to a local file; returns path."""
        m = mime or self.main_mime
        v = self.get_data(m)
        if v is None:
            raise ValueError("no %s representation" % (m or "main"))
        if isinstance(v, str):
            v = v.encode()
        elif not isinstance(v, (bytes, bytearray)):
            v = json.dumps(v).encode()
        with open(path, "wb") as f:
            f.write(v)
        return path

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> Tuple[Dict[str, Any], Dict[str, Any]]:
        data: Dict[str, Any] = {}
        for m in self.mimes:
            v = self.get_data(m)
            if v is None:
                continue
            if isinstance(v, (bytes, bytearray)) and _is_text_mime(m):
                v = bytes(v).decode("utf-8", "replace")
            data[m] = v
        if include:
            data = {k: v for k, v in data.items() if k in include}
        if exclude:
            data = {k: v for k, v in data.items() if k not in exclude}
        return data, dict(self.metadata)

    def _repr_html_(self) -> Optional[str]:
        return self.html()

    def _repr_png_(self) -> Optional[bytes]:
        return self.png()

    def _repr_jpeg_(self) -> Optional[bytes]:
        return self.jpeg()

    def _repr_svg_(self) -> Optional[str]:
        return self.svg()

    def _repr_markdown_(self) -> Optional[str]:
        return self.markdown()

    def _repr_latex_(self) -> Optional[str]:
        return self.latex()

    def _repr_json_(self) -> Any:
        return self.json()


@dataclass(repr=False)
class Output(_Rich, _DictAccess):
    """A file output of an execution: a file the session wrote under /workspace (a figure saved
    as PNG, an HTML report), its media type, path and bytes.

    problem says why data is missing (too large, unreadable); omitted is set when the reply's
    budget for outputs left the bytes out (read them with Session.read_file(path)). ``png()``,
    ``html()``, ``text()`` give the content by type; a notebook renders it
    (``_repr_mimebundle_``). Displays (mime bundles, Jupyter's display_data) are Display.
    """

    mime: str = ""
    path: str = ""
    data: bytes = b""
    problem: str = ""
    omitted: bool = False
    metadata: Dict[str, Any] = field(default_factory=dict)
    raw: Dict[str, Any] = field(default_factory=dict, compare=False)

    def __repr__(self) -> str:
        parts = ["mime=%r" % self.mime, "path=%r" % self.path]
        if self.data:
            parts.append("data=<%d bytes>" % len(self.data))
        if self.omitted:
            parts.append("omitted=True")
        if self.problem:
            parts.append("problem=%r" % self.problem)
        return "Output(%s)" % ", ".join(parts)

    def _legacy(self) -> Dict[str, Any]:
        d = dict(self.raw)
        if isinstance(d.get("data"), str):
            d["data"] = self.data  # 0.1 gave the bytes
        return d

    @property
    def mimes(self) -> List[str]:
        return [self.mime] if self.mime else []

    def get_data(self, mime: str) -> Any:
        """The content if it is of that media type (str for text, bytes otherwise), else None."""
        if mime != self.mime or (not self.data and self.omitted):
            return None
        return self.data.decode("utf-8", "replace") if _is_text_mime(mime) else self.data

    @classmethod
    def from_json(cls, d: Dict[str, Any]) -> "Output":
        data = b""
        raw_data = d.get("data")
        if isinstance(raw_data, str) and raw_data:
            try:
                data = base64.b64decode(raw_data)
            except (ValueError, TypeError):
                data = raw_data.encode()
        return cls(mime=_s(d, "mime"), path=_s(d, "path"), data=data, problem=_s(d, "problem"),
                   omitted=bool(d.get("omitted")), raw=d)


@dataclass(repr=False)
class Display(_Rich, _DictAccess):
    """A display of an execution, as Jupyter has them: IPython's display(), a figure shown, a
    DataFrame as the cell's value (kind "execute_result").

    kind is display_data, execute_result, update_display_data (it replaces the earlier display
    of its display_id) or clear_output (wait: at the next display). data is the mime bundle:
    text as str, JSON as its object, images as bytes. stdout_pos and stderr_pos are the bytes of
    stdout and stderr that came before it. ``d.png()``, ``d.html()``, ``d.text()``, ``d.json()``
    give one representation; a notebook renders it (``_repr_mimebundle_``).
    """

    kind: str = "display_data"
    data: Dict[str, Any] = field(default_factory=dict)
    metadata: Dict[str, Any] = field(default_factory=dict)
    display_id: Optional[str] = None
    wait: bool = False
    stdout_pos: int = 0
    stderr_pos: int = 0
    raw: Dict[str, Any] = field(default_factory=dict, compare=False)

    def __repr__(self) -> str:
        parts = ["kind=%r" % self.kind]
        if self.data:
            parts.append("mimes=%r" % self.mimes)
        if self.display_id:
            parts.append("display_id=%r" % self.display_id)
        t = self.text()
        if t is not None:
            parts.append("text=%r" % (t if len(t) <= 60 else t[:57] + "..."))
        return "Display(%s)" % ", ".join(parts)

    @property
    def mimes(self) -> List[str]:
        return list(self.data)

    @property
    def dropped(self) -> int:
        """The bytes of data the server's caps dropped (metadata.runtimectl.dropped), 0 for none."""
        rt = self.metadata.get("runtimectl")
        try:
            return int(rt.get("dropped") or 0) if isinstance(rt, dict) else 0
        except (TypeError, ValueError):
            return 0

    @property
    def truncated(self) -> bool:
        """Whether the server's caps left data out: dropped when it was made (see dropped) or
        from the history record it was read from."""
        rt = self.metadata.get("runtimectl")
        return isinstance(rt, dict) and bool(rt.get("dropped") or rt.get("dropped_from_history"))

    def get_data(self, mime: str) -> Any:
        """The representation of that media type, or None."""
        return self.data.get(mime)

    @classmethod
    def from_json(cls, d: Dict[str, Any]) -> "Display":
        data = d.get("data")
        meta = d.get("metadata")
        did = d.get("display_id")
        if did in (None, "") and isinstance(d.get("transient"), dict):
            did = d["transient"].get("display_id")
        return cls(kind=_s(d, "kind") or _s(d, "output_type") or "display_data",
                   data={str(k): _bundle_value(str(k), v) for k, v in data.items()} if isinstance(data, dict) else {},
                   metadata=dict(meta) if isinstance(meta, dict) else {},
                   display_id=None if did in (None, "") else str(did), wait=bool(d.get("wait")),
                   stdout_pos=_i(d, "stdout_pos"), stderr_pos=_i(d, "stderr_pos"), raw=d)


def _outputs(d: Dict[str, Any]) -> List[Output]:
    return [Output.from_json(x) for x in _dicts(d, "outputs")]


def _displays(d: Dict[str, Any]) -> List[Display]:
    return [Display.from_json(x) for x in _dicts(d, "displays")]


def shown(displays: List[Display]) -> List[Display]:
    """What a notebook shows at the end of a cell with these displays in order: an
    update_display_data replaces the display of its display_id in place (and is dropped when
    there is none), a clear_output removes what came before it."""
    out: List[Display] = []
    for d in displays:
        if d.kind == "clear_output":
            out = []
            continue
        if d.kind == "update_display_data":
            for i, prev in enumerate(out):
                if d.display_id and prev.display_id == d.display_id:
                    out[i] = dataclasses.replace(prev, data=d.data, metadata=d.metadata or prev.metadata)
            continue
        out.append(d)
    return out


class _ResultView:
    """What Execution and HistoryRecord share: their status, outputs and displays."""

    outputs: List[Output]
    displays: List[Display]
    status: str

    @property
    def ok(self) -> bool:
        """True when the code ran to its end without error."""
        return self.status == "ok"

    @property
    def shown(self) -> List[Display]:
        """The displays as a notebook shows them at the end (updates and clears applied)."""
        return shown(self.displays)

    @property
    def result_display(self) -> Optional[Display]:
        """The final expression's value as a bundle (kind execute_result), or None."""
        for d in self.displays:
            if d.kind == "execute_result":
                return d
        return None

    @property
    def images(self) -> List[bytes]:
        """The PNG bytes of the shown displays, in order; of the file outputs when there are no
        displays at all (a server or a language without them). A figure is both a display
        and a file: this counts it once."""
        if self.displays:
            return [p for p in (d.png() for d in self.shown) if p]
        return [p for p in (o.png() for o in self.outputs) if p]

    def png(self) -> Optional[bytes]:
        """The first of images, or None."""
        imgs = self.images
        return imgs[0] if imgs else None


@dataclass
class Execution(_ResultView, _DictAccess):
    """The end of an execution: the fields of `runtimectl session exec --json`.

    status is one of ok, error, timeout, interrupted, crashed. result is the repr of a final
    expression, else None. outputs are the files it wrote as rich outputs (Output: figures saved
    as PNG); displays its displays in order (Display: mime bundles, as Jupyter's display_data),
    shown what a notebook shows of them; state says what became of the interpreter state;
    restored what a restart brought back first.
    """

    session: str = ""
    seq: int = 0
    status: str = ""
    stdout: str = ""
    stderr: str = ""
    result: Optional[str] = None
    error: Optional[ExecError] = None
    duration_ms: float = 0.0
    outputs: List[Output] = field(default_factory=list)
    displays: List[Display] = field(default_factory=list)
    message: str = ""
    state: Optional[State] = None
    restored: Optional[RestoreInfo] = None
    stdout_truncated: int = 0
    stderr_truncated: int = 0
    streamed: bool = False
    raw: Dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @property
    def text(self) -> str:
        """stdout, stderr and the result as one text, as a person would read them."""
        parts = [self.stdout, self.stderr]
        if self.result is not None:
            parts.append(self.result + "\n")
        return "".join(parts)

    @classmethod
    def from_json(cls, d: Dict[str, Any]) -> "Execution":
        return cls(
            session=_s(d, "session"), seq=_i(d, "seq"), status=_s(d, "status"), stdout=_s(d, "stdout"),
            stderr=_s(d, "stderr"), result=d.get("result"), error=ExecError.from_json(d.get("error")),
            duration_ms=_f(d, "duration_ms"), outputs=_outputs(d), displays=_displays(d), message=_s(d, "message"),
            state=State.from_json(d.get("state")), restored=_restore(d, "restored"),
            stdout_truncated=_i(d, "stdout_truncated"), stderr_truncated=_i(d, "stderr_truncated"),
            streamed=bool(d.get("streamed")), raw=d,
        )


@dataclass
class HistoryRecord(_ResultView, _DictAccess):
    """One execution of a session's history (`session history --json`): its code, status
    ("running" while it has no end), output, result, error, outputs (without their bytes: the
    history keeps their paths), displays, when it started and how long it ran."""

    seq: int = 0
    code: str = ""
    status: str = ""
    stdout: str = ""
    stderr: str = ""
    result: Optional[str] = None
    error: Optional[ExecError] = None
    outputs: List[Output] = field(default_factory=list)
    displays: List[Display] = field(default_factory=list)
    started: Optional[_dt.datetime] = None
    duration_ms: float = 0.0
    state: Optional[State] = None
    notes: List[str] = field(default_factory=list)
    raw: Dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def from_json(cls, d: Dict[str, Any]) -> "HistoryRecord":
        return cls(seq=_i(d, "seq"), code=_s(d, "code"), status=_s(d, "status"), stdout=_s(d, "stdout"),
                   stderr=_s(d, "stderr"), result=d.get("result"), error=ExecError.from_json(d.get("error")),
                   outputs=_outputs(d), displays=_displays(d), started=parse_time(d.get("started")), duration_ms=_f(d, "duration_ms"),
                   state=State.from_json(d.get("state")), notes=_strs(d, "notes"), raw=d)

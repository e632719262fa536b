# runtimectl Python kernel driver: one persistent interpreter driven by `runtime-agent serve`.
#
# The contract is docs/kernel-protocol.md. In short: fd 0 is /dev/null, fds 1/2 are the output
# pipes, JSON-line requests arrive on fd 3, JSON-line events leave on fd 4 (one os.write each),
# snapshots are streamed on fd 5 by a forked child, and fd 6 (RUNTIMECTL_RESTORE_FD) carries a
# snapshot to load at start-up. Stdlib only (+ dill, imported lazily when user functions or
# classes must be pickled by value); numpy/pandas/matplotlib are only touched when the user code
# imported them.
#
# Namespace: the user's code runs in a fresh module object installed as sys.modules["__main__"]
# (so user functions and classes have __module__ == "__main__"). This file, which Python starts
# as "__main__", renames itself to "_runtimectl_kernel" before defining anything, so none of the
# driver's names, functions or state live in the user's namespace.
#
# Snapshot stream on fd 5 (what the Go agent reads), written by a forked child:
#
#   chunk   := DECIMAL_LENGTH "\n" BYTES          (ASCII length, then exactly that many bytes)
#   pass    := data-chunk* "0\n" manifest-chunk
#   stream  := pass                                 normal case (manifest "ok": true or false)
#            | pass(retry) pass                     the first pass failed part-way
#
#   A manifest is a JSON object: {"id","ok","error","format":"python-pickle5","kept","skipped",
#   "info":{"interpreter","pickler"},"bytes","seconds"} ("bytes" = data bytes of this pass without
#   framing). The data of a pass is two pickles one after the other: a small header
#   {"version":1,"names":[...],"types":{...},"modules":{alias: module name},"sources":{...}}
#   and then the {name: value} dict of the variables, pickled in ONE pass (shared references
#   stay shared). Fast path: that pass goes straight to fd 5. If it raises (a variable that only
#   turns out to be unpicklable deep inside), the child ends that pass with "0\n" and a manifest
#   {"ok": false, "retry": true, "error": "...", "skipped": [the culprits found]} -- the agent
#   must DISCARD the data of that pass -- and at once writes a second, complete pass (data
#   chunks, "0\n", final manifest) without the variables that fail when each is pickled alone
#   into a null sink. There is at most one retry: the manifest after a retry never has
#   "retry": true. A failure of the second pass gives a final manifest with "ok": false.
#   When the time budget (RUNTIMECTL_SNAPSHOT_BUDGET seconds, default 300) runs out, the child
#   ends the current pass with "0\n" and {"ok": false, "error": "...budget..."} (no retry); if
#   even that cannot be written in 30 more seconds the child dies and the agent sees the pid go.
#   Restore (fd 6) reads the data of the last pass only (the bytes of its data chunks).

if __name__ == "__main__":
    # Run as a script: take this module out of "__main__" before anything is defined in it.
    import sys as _sys
    __name__ = "_runtimectl_kernel"
    _sys.modules[__name__] = _sys.modules["__main__"]
    _RUN_AS_SCRIPT = True
    del _sys
else:
    _RUN_AS_SCRIPT = False

import ast
import builtins
import io
import json
import linecache
import os
import re
import select
import signal
import _signal  # getsignal without the enum conversion of signal.getsignal (~10 us a call)
import sys
import time
import traceback
import types

import runtimectl_views as _views  # beside this file (sys.path[0] until setup)
import runtimectl_ipython as _ipy   # idem; imports IPython only when the shell is built

REQ_FD, EVT_FD, SNAP_FD = 3, 4, 5
CO_COROUTINE = 0x0080          # inspect.CO_COROUTINE, without importing inspect
MAX_TEXT = 1_000_000           # cap for result / error text in one event
PREVIEW_LEN = 80
SYSTEM_NAMES = frozenset(("__name__", "__doc__", "__package__", "__loader__", "__spec__",
                          "__builtins__", "__annotations__", "__file__", "__cached__"))
FORMAT = "python-pickle5"
OUT_PREFIX = "\x00Out:"       # a snapshot's entries for the shell's Out (never a variable name)


def _visible(names):
    return [n for n in names if not n.startswith(OUT_PREFIX)]


def _python_version():
    return "Python %d.%d.%d" % sys.version_info[:3]


def _dill_version():
    """dill's version without importing dill (the import costs ~150 ms)."""
    mod = sys.modules.get("dill")
    if mod is not None:
        return getattr(mod, "__version__", "?")
    try:
        import importlib.util
        spec = importlib.util.find_spec("dill")
        if spec is None or not spec.origin:
            return None
        with open(os.path.join(os.path.dirname(spec.origin), "__info__.py"), encoding="utf-8") as f:
            for line in f:
                if line.startswith("__version__"):
                    return line.split("=", 1)[1].strip().strip("'\"")
    except Exception:
        pass
    return "?"


def _info():
    dv = _dill_version()
    return {"interpreter": _python_version(),
            "pickler": "pickle protocol 5" + (" + dill %s" % dv if dv else " (dill missing)")}


def _tname(v):
    """Type name: plain for builtins ("generator"), module-qualified otherwise."""
    t = type(v)
    mod = getattr(t, "__module__", None)
    qn = getattr(t, "__qualname__", None) or t.__name__
    return qn if mod in (None, "builtins") else "%s.%s" % (mod, qn)


_DRIVER_FILE = __file__


_MAGIC = re.compile(r"^([ \t]*)([!%])(.*)$")


def _shell_lines(code):
    """IPython's line syntax, which models write constantly: `!cmd` runs a shell command (its
    output streamed, its exit status in `_exit_code`); `%pip` is done by runtimectl before the
    code reaches here (an error if it still does); any other `%magic` is a clear error rather
    than a SyntaxError. Lines inside strings are left alone (only whole lines that do not
    compile as Python are rewritten)."""
    if "!" not in code and "%" not in code:
        return code
    lines = code.split("\n")
    changed = False
    for i, line in enumerate(lines):
        m = _MAGIC.match(line)
        if not m or (m.group(2) == "!" and m.group(3).startswith("=")):
            continue
        indent, kind, rest = m.groups()
        if kind == "!":
            lines[i] = "%s__runtimectl_shell__(%r)" % (indent, rest)
        else:
            name = rest.split(None, 1)[0] if rest.strip() else ""
            if name.startswith("%"):
                name = name[1:]
            if name in ("pip", "conda"):
                msg = ("%%%s is done by runtimectl before the code runs; this one reached the "
                       "interpreter: use `runtimectl session install NAME PKG...`" % name)
            else:
                msg = ("IPython magics are not supported: %%%s; write it in Python (for shell "
                       "commands, start the line with !)" % name)
            lines[i] = "%sraise RuntimeError(%r)" % (indent, msg)
        changed = True
    if not changed:
        return code
    new = "\n".join(lines)
    try:
        compile(code, "<check>", "exec", ast.PyCF_ONLY_AST | ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)
        return code                              # valid Python as written: leave it be
    except SyntaxError:
        return new


def _nothing():
    pass


_PROMPT = re.compile(r"^(>>>|In \[\d+\]:|\.\.\.)", re.M)


def _needs_transform(code):
    """Whether IPython's cell transformer could change the code: magics, !, ?, a prompt
    pasted in, indentation to remove. Plain code skips it (it tokenizes the whole cell)."""
    if "%" in code or "!" in code or "?" in code:
        return True
    if code[:1].isspace() or _PROMPT.search(code):
        return True
    return False


def _shell(cmd):
    """Run one `!cmd` line through the shell, its output going where the code's goes."""
    import subprocess
    for s in (sys.stdout, sys.stderr):
        try:
            s.flush()
        except Exception:
            pass
    rc = subprocess.call(cmd, shell=True)
    sys.modules["__main__"].__dict__["_exit_code"] = rc
    return None


def _cap(s, n=MAX_TEXT):
    if s is not None and len(s) > n:
        return s[:n] + "... [%d more characters]" % (len(s) - n)
    return s


def _write_all(fd, data):
    mv = memoryview(data)
    if mv.ndim != 1 or mv.format != "B":
        mv = mv.cast("B")
    while mv:
        n = os.write(fd, mv)
        mv = mv[n:]


# Output order across the two pipes: the agent reads fds 1 and 2 apart, so what was written to
# one just before the other could reach it second. When the code's writes go from one stream to
# the other, the writer first waits (ORDER_WAIT at most) until the agent has read what the
# other stream's pipe holds. Code that switches streams in a tight loop (a print and a log line
# per iteration) waits ORDER_BUDGET of every ORDER_WINDOW at most: order is kept for what a
# cell writes, and such a loop runs at 90% of its speed or more.
ORDER_WAIT = 0.005
ORDER_WINDOW, ORDER_BUDGET = 0.1, 0.01
_last_fd = [None]
_order_spent = [0.0, 0.0]   # the window's start, the time waited in it


def _drained(fd):
    """Waits until the pipe on fd holds nothing unread, ORDER_WAIT at most (and within the
    window's budget)."""
    try:
        import fcntl
        import termios
        n = bytearray(4)
        fcntl.ioctl(fd, termios.FIONREAD, n, True)
        if n == b"\0\0\0\0":
            return
        t0 = time.monotonic()
        if t0 - _order_spent[0] > ORDER_WINDOW:
            _order_spent[0], _order_spent[1] = t0, 0.0
        deadline = t0 + min(ORDER_WAIT, ORDER_BUDGET - _order_spent[1])
        try:
            while time.monotonic() < deadline:
                time.sleep(0.0001)
                fcntl.ioctl(fd, termios.FIONREAD, n, True)
                if n == b"\0\0\0\0":
                    return
        finally:
            _order_spent[1] += time.monotonic() - t0
    except (OSError, ValueError, ImportError):
        return


class _FdWriter(io.RawIOBase):
    """Raw unbuffered writer on a file descriptor that loops until every byte is out."""

    def __init__(self, fd, other=None):
        super().__init__()
        self._fd = fd
        self._other = other     # the other output stream's fd, whose pipe is read apart

    def writable(self):
        return True

    def fileno(self):
        return self._fd

    def isatty(self):
        return False

    def write(self, b):
        mv = memoryview(b)
        n = mv.nbytes
        if self._other is not None and _last_fd[0] != self._fd:
            if _last_fd[0] == self._other:
                _drained(self._other)
            _last_fd[0] = self._fd
        _write_all(self._fd, mv)
        return n

    def close(self):  # never close fds 1/2 under the agent's feet
        pass


def _text_stream(fd, other=None):
    return io.TextIOWrapper(_FdWriter(fd, other), encoding="utf-8", errors="backslashreplace",
                            write_through=True, line_buffering=False)


class _SnapshotTimeout(BaseException):
    pass


class _StreamBroken(BaseException):
    pass


class _ChunkWriter:
    """File-like target for the pickler: every write() becomes one fd-5 chunk."""

    SMALL = 1 << 18

    def __init__(self, fd, stop_at=None):
        self.fd = fd
        self.stop_at = stop_at  # time.monotonic() deadline, checked between partial writes
        self.in_write = False
        self.expired = False    # the deadline was met: the SIGALRM that follows must not raise
        self.bytes = 0
        self.head = None        # header of the chunk being written, while one is
        self.total = 0          # len(header) + payload of that chunk
        self.done = 0           # bytes of it already out

    def _put(self, data):
        mv = memoryview(data)
        if mv.ndim != 1 or mv.format != "B":
            mv = mv.cast("B")
        self.in_write = True
        try:
            while mv:
                if self.stop_at is not None and time.monotonic() >= self.stop_at:
                    self.expired = True
                    raise _SnapshotTimeout()
                try:
                    n = os.write(self.fd, mv)
                except BlockingIOError:
                    wait = 0.5
                    if self.stop_at is not None:
                        wait = max(0.0, min(wait, self.stop_at - time.monotonic()))
                    select.select([], [self.fd], [], wait)
                    continue
                except OSError as e:
                    raise _StreamBroken(str(e))
                self.done += n
                mv = mv[n:]
        finally:
            self.in_write = False

    def write(self, b):
        mv = memoryview(b)
        if mv.ndim != 1 or mv.format != "B":
            mv = mv.cast("B")
        n = mv.nbytes
        if n == 0:          # a zero-length chunk would read as the terminator
            return 0
        head = b"%d\n" % n
        self.head, self.total, self.done = head, len(head) + n, 0
        if n <= self.SMALL:
            self._put(head + mv.tobytes())
        else:               # large pickle-5 buffers: no copy, write the memoryview itself
            self._put(head)
            self._put(mv)
        self.head = None
        self.bytes += n
        return n

    def complete_chunk(self):
        """After an interruption mid-chunk: finish that chunk (zero padding) so the framing
        stays intact; the pass is then ended with an "ok": false manifest anyway."""
        if self.head is None:
            return
        head, total, done = self.head, self.total, self.done
        self.head = None
        if done < len(head):
            self._put(head[done:])
            done = len(head)
        left = total - done
        zeros = bytes(min(left, 1 << 20))
        while left > 0:
            k = min(left, len(zeros))
            self._put(zeros[:k])
            left -= k

    def end(self, manifest):
        self.complete_chunk()
        data = json.dumps(manifest, ensure_ascii=True).encode()
        self._put(b"0\n" + b"%d\n" % len(data) + data)


class _NullSink:
    def write(self, b):
        return 0


class _BadModule(Exception):
    pass


def _user_dumper():
    """A pickle.Pickler subclass whose reducer_override sends session-defined functions and
    classes (__module__ == "__main__") through dill; everything else uses the C pickler."""
    import pickle
    FunctionType = types.FunctionType

    np = sys.modules.get("numpy")
    ndarray = getattr(np, "ndarray", None)
    Series = getattr(sys.modules.get("pandas"), "Series", None)

    class P(pickle.Pickler):
        def reducer_override(self, obj):
            if ndarray is not None and isinstance(obj, ndarray):
                return _views.array_reduce(obj, ndarray)
            if Series is not None and type(obj) is Series:
                return _views.column_reduce(obj)
            if (type(obj) is FunctionType or isinstance(obj, type)) and \
                    getattr(obj, "__module__", None) == "__main__":
                enum = sys.modules.get("enum")
                if enum is not None and isinstance(obj, enum.EnumMeta):
                    r = _enum_reduce(obj)
                    if r is not None:
                        return r
                blob, refs = _dill_dumps(obj)
                ref = _main_reference(blob)
                if ref is not None:
                    # e.g. Enum classes with dill 0.3.6: by name, so a restore could not find it
                    raise pickle.PicklingError(
                        "cannot pickle %s %r by value: dill stores __main__.%s by name" % (
                            "class" if isinstance(obj, type) else "function",
                            getattr(obj, "__qualname__", "?"), ref))
                if refs:
                    return (_dill_load, (blob, refs))
                import dill
                return (dill.loads, (blob,))
            return NotImplemented
    return P


def _enum_reduce(cls):
    """A session Enum class without methods of its own, rebuilt through the functional API
    (dill 0.3.6 can only pickle Enum classes by name)."""
    bases = cls.__bases__
    if len(bases) != 1 or not isinstance(bases[0], type(cls)) or bases[0].__module__ == "__main__" \
            or type(cls).__module__ != "enum":
        return None
    prefix = cls.__qualname__ + "."
    for v in cls.__dict__.values():
        f = getattr(v, "__func__", v)
        if isinstance(v, property):
            f = v.fget
        if getattr(f, "__qualname__", "").startswith(prefix):
            return None         # methods: not supported here
    members = [(name, m._value_) for name, m in cls.__members__.items()]
    return (_make_enum, (bases[0], cls.__name__, cls.__qualname__, members, cls.__doc__))


def _make_enum(base, name, qualname, members, doc):
    cls = base(name, members, module="__main__", qualname=qualname)
    if doc is not None:
        cls.__doc__ = doc
    return cls


def _dill_dumps(obj):
    """dill-pickle a session function or class by value. Base classes and the metaclass of a
    class that are themselves session classes are not copied into the blob: they are handed
    back as `refs` (persistent ids), so the outer pickler stores them once and a restored
    subclass keeps the very same base class object as the namespace (isinstance works).
    Inheritance is acyclic, so this never recurses forever."""
    import dill
    _fix_dill_main()
    refs = []
    externals = {}
    if isinstance(obj, type):
        for c in list(obj.__mro__[1:]) + [type(obj)]:
            if getattr(c, "__module__", None) == "__main__" and c is not obj:
                externals[id(c)] = c

    def persistent_id(o):
        if externals and id(o) in externals and externals[id(o)] is o:
            for i, r in enumerate(refs):
                if r is o:
                    return i
            refs.append(o)
            return len(refs) - 1
        return None

    f = io.BytesIO()
    p = dill.Pickler(f, protocol=4, byref=False, recurse=False)
    if externals:       # an instance attribute: dill checks its pickler's class module
        p.persistent_id = persistent_id
    p.dump(obj)
    return f.getvalue(), tuple(refs)


def _dill_load(blob, refs):
    """Counterpart of _dill_dumps (referenced by name from snapshots)."""
    import dill
    _fix_dill_main()
    u = dill.Unpickler(io.BytesIO(blob))
    u.persistent_load = lambda pid: refs[pid]
    return u.load()


def _main_reference(blob):
    """The name of the first object that a pickle refers to as `__main__.<name>`, or None.
    (dill's own reference to the namespace itself is `__builtin__.__main__`, which is fine.)"""
    if b"__main__" not in blob:
        return None
    import pickletools
    pushed, memo = [], {}
    for op, arg, _ in pickletools.genops(blob):
        name = op.name
        if name == "GLOBAL":
            mod, _, attr = arg.partition(" ")
            if mod == "__main__":
                return attr
            pushed.append(None)
        elif name == "STACK_GLOBAL":
            if len(pushed) >= 2 and pushed[-2] == "__main__":
                return pushed[-1]
            pushed.append(None)
        elif name in ("SHORT_BINUNICODE", "BINUNICODE", "BINUNICODE8", "UNICODE"):
            pushed.append(arg)
        elif name == "MEMOIZE":
            memo[len(memo)] = pushed[-1] if pushed else None
        elif name in ("BINPUT", "LONG_BINPUT", "PUT"):
            memo[arg] = pushed[-1] if pushed else None
        elif name in ("BINGET", "LONG_BINGET", "GET"):
            pushed.append(memo.get(arg))
        elif name not in ("PROTO", "FRAME", "STOP", "MARK", "POP", "POP_MARK"):
            pushed.append(None)
        if len(pushed) > 64:
            del pushed[:32]
    return None


def _fix_dill_main():
    """dill binds `import __main__` at its import; make sure that is the user's namespace."""
    d = sys.modules.get("dill._dill")
    main = sys.modules.get("__main__")
    if d is not None and main is not None and getattr(d, "_main_module", None) is not main:
        d._main_module = main


def _prefilter_reason(v):
    """Types known to be unpicklable: skip them without trying."""
    t = type(v)
    if t in (types.GeneratorType, types.CoroutineType, types.AsyncGeneratorType,
             types.FrameType, types.TracebackType):
        return True
    mods = sys.modules
    th = mods.get("_thread")
    if th is not None and (t is th.LockType or t is getattr(th, "RLock", None)):
        return True
    threading = mods.get("threading")
    if threading is not None and isinstance(v, (threading.Thread,)):
        return True
    if isinstance(v, io.IOBase) and not isinstance(v, (io.BytesIO, io.StringIO)):
        return True
    sock = mods.get("socket")
    if sock is not None and isinstance(v, sock.socket):
        return True
    mm = mods.get("mmap")
    if mm is not None and isinstance(v, mm.mmap):
        return True
    sp = mods.get("subprocess")
    if sp is not None and isinstance(v, sp.Popen):
        return True
    import weakref
    if isinstance(v, (weakref.ReferenceType, weakref.ProxyType, weakref.CallableProxyType)):
        return True
    return False


def _skipped_visible(entries):
    return [e for e in entries if not e["name"].startswith(OUT_PREFIX)]


def _reason(e):
    s = str(e) or type(e).__name__
    if isinstance(e, RecursionError):
        s = "RecursionError: " + s
    return _cap(s, 500)


class Kernel:
    def __init__(self):
        self.pid = os.getpid()
        self.children = set()
        self.executing = False
        self.flags = 0
        self.loop = None
        self.counter = 0
        self.libc_fflush = False
        self.outputs_dir = os.environ.get("RUNTIMECTL_OUTPUTS") or "/workspace/outputs"
        try:
            self.budget = int(os.environ.get("RUNTIMECTL_SNAPSHOT_BUDGET") or 300)
        except ValueError:
            self.budget = 300
        self.inbuf = b""
        self.info = None
        self.shell = None       # IPython's InteractiveShell on the namespace (runtimectl_ipython)
        self.book = None
        self.ipython = False    # the session has IPython: its shell is built at the first use
        self.building = False
        self.pending_inputs = []    # (seq, raw, parsed) of the executions before the build
        self.pending_book = None    # (book, outs) restored before the build
        self.seq = 0            # the execution running, for displays
        self.rid = None
        self.hidden = {}
        self.result_data = None  # the execute_result bundle of the execution
        self.sync = b""         # its sync token (docs/kernel-protocol.md, display)
        self.displays = 0       # displays sent in it
        self.in_exec = False
        self.masked = False     # a display is being written: SIGINT waits (see _on_sigint)
        self.pending_sigint = False
        self.figures = []       # outputs saved from its displays

    # ----------------------------------------------------------------- setup
    def setup(self):
        self.sigint = self._on_sigint        # one bound-method object, compared by identity
        signal.signal(signal.SIGINT, self.sigint)
        for fd in (REQ_FD, EVT_FD, SNAP_FD):
            try:
                os.set_inheritable(fd, False)
            except OSError:
                pass
        # Output: unbuffered text streams straight on fds 1 and 2.
        for s in (sys.stdout, sys.stderr):
            try:
                s.flush()
            except Exception:
                pass
        self.out = _text_stream(1, 2)
        self.err = _text_stream(2, 1)
        sys.stdout = sys.__stdout__ = self.out
        sys.stderr = sys.__stderr__ = self.err
        self._reset_stdin()
        os.environ.setdefault("MPLBACKEND", "Agg")
        # Interactive-like interpreter: imports from the working directory, not from here.
        here = os.path.dirname(os.path.abspath(__file__))
        if sys.path and sys.path[0] and os.path.abspath(sys.path[0]) == here:
            sys.path[0] = ""
        elif "" not in sys.path:
            sys.path.insert(0, "")
        sys.argv = [""]
        # Packages installed into the session (`runtimectl session install`, `%pip install`)
        # live in a virtual environment on its volume; they are importable at once, without a
        # restart: the folder is looked at again whenever it changed (see _refresh_packages).
        self.packages = os.path.join(os.environ.get("RUNTIMECTL_PACKAGES", "/workspace/.venv"),
                                     "lib", "python%d.%d" % sys.version_info[:2], "site-packages")
        self.packages_mtime = None
        self._refresh_packages()
        # The user's namespace.
        self.main = types.ModuleType("__main__")
        self.main.__dict__["__builtins__"] = builtins
        builtins.__runtimectl_shell__ = _shell
        sys.modules["__main__"] = self.main
        self.ns = self.main.__dict__
        self.info = _info()
        self._want_shell()

    def _want_shell(self):
        """Whether the session has IPython's shell; it is built at its first use (ensure_shell,
        runtimectl_ipython's "built at its first use"). Without python3-ipython the driver runs
        plain Python (`!cmd` lines through _shell_lines, no magics, no displays)."""
        if os.environ.get("RUNTIMECTL_IPYTHON") == "0":      # the session asked for plain Python
            return
        # IPython's own files (profile, caches) outside the workspace, which HOME is.
        os.environ.setdefault("IPYTHONDIR", "/tmp/.ipython")
        try:
            import importlib.util
            if importlib.util.find_spec("IPython") is None:
                return
            _ipy.choose_backend()
        except (ImportError, ValueError):
            return
        self.ipython = True
        if os.environ.get("RUNTIMECTL_IPYTHON") == "eager":
            self.ensure_shell()
        else:
            _ipy.lazy(self.ensure_shell)

    def ensure_shell(self):
        """The shell, built now if it is not yet: In filled in with the executions before it
        and the In/Out a restore brought back. An interrupt waits for the build to end."""
        if self.shell is not None or not self.ipython or self.building:
            return self.shell
        self.building = True
        masked, self.masked = self.masked, True
        # What the code bound before the build stays its own, as it would be with the shell
        # built at start (the build sets _, __, ___, In, Out, ...; the restore _N, _iN, ...).
        mine = dict(self.ns)
        try:
            _ipy.unlazy()
            self.shell = _ipy.build(self, _shell)
            self.book = _ipy.Book(self.shell)
            for n in ("exit", "quit"):          # Python's own: SystemExit, which the kernel survives
                self.ns.pop(n, None)
                self.shell.user_ns_hidden.pop(n, None)
            self.hidden = self.shell.user_ns_hidden
            if self.pending_book is not None:
                book, outs = self.pending_book
                self.pending_book = None
                try:
                    self.book.restore(book, outs)
                except Exception as e:
                    self.note("could not restore In/Out: %s: %s" % (type(e).__name__, e))
            ns = self.ns
            for n, v in mine.items():
                if ns.get(n, mine) is not v:
                    ns[n] = v
            for seq, raw, parsed in self.pending_inputs:
                self.book.store_input(seq, raw, parsed)
            self.pending_inputs = []
            if self.in_exec:
                self.shell.execution_count = self.seq
        except Exception:
            self.note("IPython could not be set up; running plain Python: %s" % traceback.format_exc())
            self.shell = self.book = None
            self.ipython = False
            self.pending_inputs, self.pending_book = [], None
            _ipy.unlazy()
        finally:
            self.building = False
            self.masked = masked
        if not masked and self.pending_sigint:
            self.pending_sigint = False
            raise KeyboardInterrupt
        return self.shell

    def _hidden(self, name, value):
        """Whether a namespace entry is the shell's bookkeeping rather than a variable."""
        if not self.ipython:
            return False
        if name[:1] == "_":
            return _ipy.is_book_name(name)
        h = self.hidden.get(name, self)
        return h is value

    # ----------------------------------------------------------------- displays
    def display(self, ev):
        """Sends one display event (runtimectl_ipython) in its place among the output: the
        output written before it is flushed and the sync token follows it on fds 1 and 2."""
        if not self.in_exec:
            return                      # e.g. a display from a snapshot child or the preload
        if ev.get("kind") in ("display_data", "execute_result"):
            self._save_png(ev)
            if ev["kind"] == "execute_result":
                self.result_data = ev.get("data")
        self.displays += 1
        ev["op"], ev["id"], ev["n"] = "display", self.rid, self.displays
        body = (_ipy.cap_display(ev) + "\n").encode()
        self.masked = True
        try:
            self.flush_all()
            if self.sync:
                try:
                    _write_all(1, self.sync)
                    _write_all(2, self.sync)
                except OSError:
                    pass
            _write_all(EVT_FD, body)
        finally:
            self.masked = False
            if self.pending_sigint:
                self.pending_sigint = False
                raise KeyboardInterrupt

    def _save_png(self, ev):
        """A figure (any image/png display) is also a file in the outputs folder, as before
        displays existed (`outputs`)."""
        png = (ev.get("data") or {}).get("image/png")
        if not isinstance(png, str):
            return
        if ev["kind"] == "execute_result":
            path = os.path.join(self.outputs_dir, "exec-%s-result.png" % self.seq)
        else:
            path = os.path.join(self.outputs_dir, "exec-%s-%d.png" % (self.seq, len(self.figures) + 1))
        try:
            import base64
            self._mkdir()
            with open(path, "wb") as f:
                f.write(base64.b64decode(png))
            self.figures.append({"mime": "image/png", "path": path})
        except Exception as e:
            self.note("could not save the figure to %s: %s" % (path, e))

    def shown_error(self, etype, evalue, text):
        """A traceback that the shell shows and does not raise (a magic's: %time 1/0, %run of a
        failing script; a formatter's): on stderr, the execution's status unchanged, as
        ipykernel's execute_reply."""
        self.note_raw(text if text.endswith("\n") else text + "\n")

    def _reset_stdin(self):
        try:
            stdin = io.TextIOWrapper(io.FileIO(0, "r", closefd=False), encoding="utf-8",
                                     errors="backslashreplace")
        except OSError:
            stdin = io.TextIOWrapper(io.BytesIO(b""), encoding="utf-8")
        sys.stdin = sys.__stdin__ = stdin

    def _on_sigint(self, signum, frame):
        # Only user code gets a KeyboardInterrupt; between executions SIGINT is harmless.
        # While a display is being written it waits for the end of the write (a torn event
        # line would break the protocol).
        if self.masked:
            self.pending_sigint = self.executing
        elif self.executing:
            raise KeyboardInterrupt

    def call_user(self, fn, *args, **kwargs):
        """Run user code with SIGINT turned into KeyboardInterrupt."""
        if _signal.getsignal(signal.SIGINT) is not self.sigint:
            signal.signal(signal.SIGINT, self.sigint)
        self.executing = True
        try:
            return fn(*args, **kwargs)
        finally:
            self.executing = False

    # ----------------------------------------------------------------- I/O
    def event(self, obj):
        data = (json.dumps(obj, ensure_ascii=True, separators=(",", ":")) + "\n").encode()
        _write_all(EVT_FD, data)

    def note(self, text):
        try:
            _write_all(2, ("runtimectl: %s\n" % text).encode("utf-8", "backslashreplace"))
        except OSError:
            pass

    def read_request(self):
        while True:
            i = self.inbuf.find(b"\n")
            if i >= 0:
                line, self.inbuf = self.inbuf[:i], self.inbuf[i + 1:]
                if line.strip():
                    return line
                continue
            self.reap()
            if self.children:
                # A snapshot child is running: wake up now and then to reap it promptly.
                try:
                    r, _, _ = select.select([REQ_FD], [], [], 0.1)
                except InterruptedError:
                    continue
                if not r:
                    continue
            data = os.read(REQ_FD, 1 << 20)
            if not data:
                return None
            self.inbuf += data

    def reap(self):
        for pid in list(self.children):
            try:
                done, _ = os.waitpid(pid, os.WNOHANG)
            except ChildProcessError:
                done = pid
            except OSError:
                continue
            if done:
                self.children.discard(pid)

    def preload(self, code):
        """Runs the session's preload code (a warm pool's: imports, mostly) in a namespace of
        its own, before the restore: the modules it loads are in sys.modules, its names are not
        the session's. Its output is dropped, and an error in it only ends it."""
        if not code:
            return
        out, err = sys.stdout, sys.stderr
        env = dict(os.environ)
        try:
            tmp = set(os.listdir("/tmp"))
        except OSError:
            tmp = None
        try:
            with open(os.devnull, "w") as null:
                sys.stdout = sys.stderr = null
                exec(compile(code, "<preload>", "exec"), {"__name__": "__preload__"})
        except BaseException:  # noqa: BLE001 - a failed preload leaves a usable interpreter
            pass
        finally:
            sys.stdout, sys.stderr = out, err
        # What the preload changed besides its modules is not the session's: its environment
        # and the files it left in /tmp go (a claimed member starts as a new session would).
        if os.environ != env:
            os.environ.clear()
            os.environ.update(env)
        if tmp is not None:
            import shutil
            try:
                left = set(os.listdir("/tmp")) - tmp
            except OSError:
                left = ()
            for n in left:
                p = os.path.join("/tmp", n)
                try:
                    if os.path.isdir(p) and not os.path.islink(p):
                        shutil.rmtree(p, ignore_errors=True)
                    else:
                        os.unlink(p)
                except OSError:
                    pass

    @staticmethod
    def read_preload():
        """The preload code, handed over on a descriptor (RUNTIMECTL_PRELOAD_FD) that is read
        and closed here: never in the environment, where /proc/self/environ would keep it."""
        fd = os.environ.pop("RUNTIMECTL_PRELOAD_FD", None)
        if not fd:
            return ""
        try:
            fd = int(fd)
            chunks = []
            while True:
                b = os.read(fd, 1 << 16)
                if not b:
                    break
                chunks.append(b)
            os.close(fd)
            return b"".join(chunks).decode("utf-8", "replace")
        except (OSError, ValueError):
            return ""

    # ----------------------------------------------------------------- main loop
    def serve(self):
        restored, failed, copies = [], [], []
        code = self.read_preload()
        self.preload(code)
        if code and self.ipython:
            self.ensure_shell()     # a warm pool's member: its shell ready as its imports are
        rfd = os.environ.pop("RUNTIMECTL_RESTORE_FD", None)
        self.base_env = dict(os.environ)     # what a snapshot's environment is told apart from
        if rfd:
            restored, failed, copies = self.restore(rfd)
        self.event({"op": "ready", "pid": self.pid, "restored": restored, "failed": failed,
                    "copies": copies, "info": self.info})
        while True:
            try:
                line = self.read_request()
            except KeyboardInterrupt:
                continue
            if line is None:
                break
            try:
                req = json.loads(line)
                if not isinstance(req, dict):
                    raise ValueError("request is not a JSON object")
            except Exception as e:
                self.event({"op": "error", "id": None, "error": "bad request: %s" % e})
                continue
            op = req.get("op")
            try:
                if op == "exec":
                    self.handle_exec(req)
                elif op == "snapshot":
                    self.handle_snapshot(req)
                elif op == "vars":
                    self.handle_vars(req)
                elif op in ("complete", "inspect", "is_complete"):
                    self.handle_query(op, req)
                else:
                    self.event({"op": "error", "id": req.get("id"), "error": "unknown op %r" % (op,)})
            except KeyboardInterrupt:
                continue
            except OSError as e:
                if getattr(e, "errno", None) in (32, 9):     # EPIPE/EBADF on fd 4: agent gone
                    break
                self.note("internal error: %s" % traceback.format_exc())
            except Exception as e:
                self.note("internal error: %s" % traceback.format_exc())
                try:
                    self.event({"op": "error", "id": req.get("id"), "error": "%s: %s" % (
                        type(e).__name__, e)})
                except OSError:
                    break
        self.flush_all()
        os._exit(0)

    # ----------------------------------------------------------------- exec
    def fingerprint(self):
        if not self.ipython:
            return {k: id(v) for k, v in list(self.ns.items())}
        book = _ipy.is_book_name
        return {k: id(v) for k, v in list(self.ns.items()) if k[:1] != "_" or not book(k)}

    def handle_query(self, op, req):
        """complete / inspect / is_complete, answered as ipykernel answers them."""
        rid = req.get("id")
        self.ensure_shell()     # (no interrupt comes through outside an execution)
        if self.shell is None:
            self.event({"op": "error", "id": rid, "error": "%s needs IPython (python3-ipython)" % op})
            return
        code = req.get("code") or ""
        pos = req.get("cursor_pos")
        if not isinstance(pos, int) or pos < 0 or pos > len(code):
            pos = len(code)
        out = self.flush_all
        try:
            if op == "complete":
                rep = _ipy.complete(self.shell, code, pos)
            elif op == "inspect":
                rep = _ipy.inspect(self.shell, code, pos, req.get("detail_level") or 0)
            else:
                rep = _ipy.is_complete(self.shell, code)
        except Exception as e:
            if op == "is_complete":
                rep = {"status": "unknown"}
            elif op == "complete":
                rep = {"matches": [], "cursor_start": pos, "cursor_end": pos, "metadata": {}}
            else:
                rep = {"found": False, "data": {}, "metadata": {}}
            self.note("%s failed: %s: %s" % (op, type(e).__name__, e))
        out()
        rep["op"], rep["id"] = op, rid
        self.event(json.loads(json.dumps(rep, default=repr)))

    def handle_exec(self, req):
        self.reap()
        rid = req.get("id")
        code = req.get("code") or ""
        nonce = str(req.get("nonce") or "")
        seq = req.get("seq")
        if not isinstance(seq, int):
            self.counter += 1
            seq = self.counter
        filename = "<exec-%s>" % seq
        status, result, error, outputs, changed = "ok", None, None, [], True
        undo = _nothing
        self.seq, self.rid, self.displays, self.figures = seq, rid, 0, []
        self.sync = str(req.get("sync") or "").encode("ascii", "replace")
        self.in_exec, self.result_data = True, None
        try:
            undo = self._exec_env(req)
            status, result, error, value, changed = self.run_code(code, filename, seq)
            outputs = self.figures + self.save_outputs(seq, value)
            value = None
        except KeyboardInterrupt:            # a late SIGINT in driver code: harmless
            pass
        except BaseException as e:           # driver bug: report, never die
            if os.getpid() != self.pid:
                os._exit(1)
            self.note("internal error: %s" % traceback.format_exc())
            status, error = "error", {"name": type(e).__name__, "value": str(e), "traceback": ""}
        finally:
            undo()
            self.in_exec = False
            if self.book is not None:
                self.book.trim()
        self.flush_all()
        try:
            _write_all(1, nonce.encode("ascii", "replace"))
            _write_all(2, nonce.encode("ascii", "replace"))
        except OSError:
            pass
        self.event({"op": "done", "id": rid, "status": status, "result": result,
                    "error": error, "outputs": outputs, "changed": changed,
                    "bookkeeping": self.ipython})

    def _exec_env(self, req):
        """Sets an execution's own environment and working directory (`exec -e -w`) and
        returns what puts them back."""
        saved, cwd = [], None
        name = req.get("session")
        if name and os.environ.get("RUNTIMECTL_SESSION") != name:
            # A warm pool's member claimed by a session: its name from then on.
            os.environ["RUNTIMECTL_SESSION"] = name
        want = req.get("cwd")
        if want:                                 # first: the one step that can fail
            try:
                cwd = os.getcwd()
            except OSError:
                cwd = "/workspace"
            os.chdir(want)
        b64 = req.get("env_b64")
        if b64:
            import base64
            for kv in base64.b64decode(b64).decode("utf-8", "surrogateescape").split("\0"):
                k, sep, v = kv.partition("=")
                if not sep or not k:
                    continue
                saved.append((k, os.environ.get(k)))
                os.environ[k] = v

        def undo():
            for k, v in reversed(saved):
                if v is None:
                    os.environ.pop(k, None)
                else:
                    os.environ[k] = v
            if cwd is not None:
                try:
                    os.chdir(cwd)
                except OSError:
                    pass
        return undo

    def _refresh_packages(self):
        try:
            m = os.stat(self.packages).st_mtime_ns
        except OSError:
            m = None
        if m == self.packages_mtime:
            return
        self.packages_mtime = m
        if m is not None:
            import site
            site.addsitedir(self.packages)       # and its .pth files
        import importlib
        importlib.invalidate_caches()            # also forgets that the folder was missing

    def run_code(self, code, filename, seq=0):
        self._refresh_packages()
        raw = code
        sh = self.shell
        if sh is None and self.ipython and _needs_transform(code):
            sh, stopped = self._build_for()
            if stopped is not None:
                return stopped
        if sh is None:
            if self.ipython:
                self.pending_inputs.append((seq, raw, code))
            else:
                code = _shell_lines(code)
        else:
            sh.execution_count = seq
            if _needs_transform(code):
                try:
                    code = sh.transform_cell(code)
                except Exception as e:      # IPython's transformer failed: report as a SyntaxError
                    tb = "%s: %s\n" % (type(e).__name__, e)
                    self.note_raw(tb)
                    return "error", None, {"name": type(e).__name__, "value": _cap(str(e)),
                                           "traceback": tb}, None, False
            self.book.store_input(seq, raw, code)
        linecache.cache[filename] = (len(code), None, code.splitlines(True) or ["\n"], filename)
        base = self.flags | ast.PyCF_ALLOW_TOP_LEVEL_AWAIT
        try:
            tree = compile(code, filename, "exec", base | ast.PyCF_ONLY_AST, dont_inherit=True)
            body = list(tree.body)
            last = body.pop() if body and isinstance(body[-1], ast.Expr) else None
            mod_code = compile(ast.Module(body=body, type_ignores=[]), filename, "exec",
                               base, dont_inherit=True) if body else None
            expr_code = compile(ast.Expression(body=last.value), filename, "eval",
                                base, dont_inherit=True) if last is not None else None
        except (SyntaxError, ValueError, OverflowError, MemoryError, RecursionError) as e:
            tb = "".join(traceback.format_exception_only(type(e), e))
            self.note_raw(tb)
            return "error", None, {"name": type(e).__name__, "value": _cap(str(e)),
                                   "traceback": _cap(tb)}, None, False
        for c in (mod_code, expr_code):
            if c is not None:
                self._learn_future(c)
        if sh is None and self.ipython and _ipy.mentions_book(tree):
            sh, stopped = self._build_for()     # In of this execution included
            if stopped is not None:
                return stopped

        before = self.fingerprint()
        unbuilt = self.shell is None
        status, result, error, value, exc = "ok", None, None, None, None
        info = None
        try:
            if sh is not None:
                info = self.call_user(self._pre_cell, raw)
            elif self.ipython:
                # what the shell's pre_execute would do: its warning registry cleared, so that
                # cells with overlapping line numbers do not hide each other's warnings
                self.ns.pop("__warningregistry__", None)
            if mod_code is not None:
                self.call_user(self._run, mod_code)
            if expr_code is not None:
                value = self.call_user(self._run, expr_code)
                if value is not None:
                    result = _cap(self.call_user(repr, value))
                    if self.shell is None and self.ipython:
                        # The code is done; an interrupt (its timeout) during the build that
                        # shows its value is not the code's: the build is not interruptible here.
                        self.ensure_shell()
                    if self.shell is not None:
                        self.call_user(self.shell.displayhook, value)
        except KeyboardInterrupt as e:
            status, exc = "interrupted", e
        except BaseException as e:           # SystemExit included: the kernel survives it
            status, exc = "error", e
        if self.shell is not None:      # (built during the execution, if it was not before)
            try:
                self.call_user(self._post_cell, info, exc if exc is not None else None, value)
            except KeyboardInterrupt as e:
                if exc is None:
                    status, exc = "interrupted", e
            except BaseException as e:
                if exc is None:
                    status, exc = "error", e
        self._after_user_code()
        if exc is not None:
            value = None
            tb = self._user_tb(exc.__traceback__)
            exc.__traceback__ = tb
            try:
                text = "".join(traceback.format_exception(type(exc), exc, tb))
            except BaseException:
                text = "%s: <traceback could not be formatted>\n" % type(exc).__name__
            self.note_raw(text)
            try:
                val = str(exc)
            except BaseException:
                val = "<str() failed>"
            error = {"name": type(exc).__name__, "value": _cap(val), "traceback": _cap(text)}
            sys.last_type, sys.last_value, sys.last_traceback = type(exc), exc, tb
        # Every execution that ran user code may have changed the state (a subscript can insert
        # a key, an attribute can be a property, a call that raised may have mutated first), so
        # the snapshot is skipped only where that is provable: no statement at all (comments),
        # or only literals and plain names looked up, no name rebound.
        after = self.fingerprint()
        if unbuilt and self.shell is not None:      # the names the shell's build added are its own
            ns = self.ns
            after = {k: v for k, v in after.items() if k in before or not self._hidden(k, ns.get(k))}
        changed = not (after == before and self._inert(tree, value, exc))
        exc = None
        return status, result, error, value, changed

    def _build_for(self):
        """ensure_shell before an execution's code runs: (shell, None), or (None, the
        execution's result) when an interrupt came during the build."""
        try:
            return self.call_user(self.ensure_shell), None
        except KeyboardInterrupt:
            tb = "KeyboardInterrupt\n"
            self.note_raw(tb)
            return None, ("interrupted", None, {"name": "KeyboardInterrupt", "value": "",
                                                "traceback": tb}, None, False)

    def _pre_cell(self, raw):
        from IPython.core.interactiveshell import ExecutionInfo
        info = ExecutionInfo(raw, False, False, True, None)
        ev = self.shell.events
        ev.trigger("pre_execute")
        ev.trigger("pre_run_cell", info)
        return info

    def _post_cell(self, info, exc, value):
        """IPython's post_execute and post_run_cell callbacks: the inline backend shows the
        figures left open here, autoreload and extensions do their part."""
        from IPython.core.interactiveshell import ExecutionResult
        ev = self.shell.events
        ev.trigger("post_execute")
        if info is not None:
            res = ExecutionResult(info)
            res.execution_count = self.seq
            res.error_in_exec = exc
            res.result = value
            ev.trigger("post_run_cell", res)

    def _run(self, code):
        v = eval(code, self.ns)
        if code.co_flags & CO_COROUTINE:
            if self.loop is None or self.loop.is_closed():
                import asyncio
                self.loop = asyncio.new_event_loop()
            v = self.loop.run_until_complete(v)
        return v

    def _learn_future(self, code):
        import __future__
        for name in __future__.all_feature_names:
            feat = getattr(__future__, name)
            if code.co_flags & feat.compiler_flag:
                self.flags |= feat.compiler_flag

    def _after_user_code(self):
        if os.getpid() != self.pid:          # user code forked and the child came back here
            self.flush_all()
            os._exit(0)
        if _signal.getsignal(signal.SIGINT) is not self.sigint:
            try:
                signal.signal(signal.SIGINT, self.sigint)
            except Exception:
                pass
        try:
            if sys.stdin is None or sys.stdin.closed:
                self._reset_stdin()
        except Exception:
            self._reset_stdin()

    @staticmethod
    def _user_tb(tb):
        while tb is not None and not tb.tb_frame.f_code.co_filename.startswith("<exec-"):
            tb = tb.tb_next
        # The end too: an interrupt (a timeout, Ctrl-C) is raised in the driver's SIGINT
        # handler, whose frame would come last; the user's last frame is where the code was.
        last, t = None, tb
        while t is not None:
            if t.tb_frame.f_code.co_filename != _DRIVER_FILE:
                last = t
            t = t.tb_next
        if last is not None and last.tb_next is not None:
            last.tb_next = None
        return tb

    # Types whose repr runs no code of the session's: a value of another type shown as the
    # final expression is not inert (a session class's __repr__ is the user's code, and a
    # container's repr calls its items').
    _ATOMIC = (type(None), bool, int, float, complex, str, bytes, range, type(len),
               type(lambda: 0), type(sys))

    def _inert(self, tree, value, exc):
        """Whether the code provably changed nothing: only `pass`, literals and plain names."""
        for stmt in tree.body:
            if isinstance(stmt, ast.Pass):
                continue
            if not isinstance(stmt, ast.Expr) or not self._inert_expr(stmt.value):
                return False
        shown = exc is None and value is not None and isinstance(tree.body[-1], ast.Expr) \
            and isinstance(tree.body[-1].value, ast.Name)
        if shown and not isinstance(value, self._ATOMIC) and (
                type(value).__module__ == "__main__"
                or isinstance(value, (list, tuple, dict, set, frozenset))):
            return False        # its repr (shown as the result) may have run the session's code
        return True

    @classmethod
    def _inert_expr(cls, node):
        if isinstance(node, ast.Constant):
            return True
        if isinstance(node, ast.Name):
            return isinstance(node.ctx, ast.Load)
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
            return isinstance(node.operand, ast.Constant)
        if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
            return all(isinstance(e, ast.Constant) for e in node.elts)
        if isinstance(node, ast.Dict):
            return all(isinstance(e, ast.Constant) for e in node.keys + node.values)
        return False

    def note_raw(self, text):
        try:
            _write_all(2, text.encode("utf-8", "backslashreplace"))
        except OSError:
            pass

    def flush_all(self):
        for s in {id(x): x for x in (sys.stdout, sys.stderr, sys.__stdout__, sys.__stderr__,
                                     self.out, self.err) if x is not None}.values():
            try:
                s.flush()
            except BaseException:
                pass
        if self.libc_fflush is False:
            self.libc_fflush = None
            try:
                import ctypes
                self.libc_fflush = ctypes.CDLL(None).fflush
            except Exception:
                pass
        if self.libc_fflush is not None:
            try:
                self.libc_fflush(None)
            except Exception:
                pass

    # ----------------------------------------------------------------- outputs
    def save_outputs(self, seq, value):
        outputs = []
        plt = sys.modules.get("matplotlib.pyplot")
        if plt is not None:
            try:
                nums = list(plt.get_fignums())
            except BaseException as e:
                nums = []
                self.note("cannot list matplotlib figures: %s" % e)
            for i, num in enumerate(nums, 1):
                path = os.path.join(self.outputs_dir, "exec-%s-%d.png" % (seq, i))
                try:
                    self._mkdir()
                    fig = plt.figure(num)
                    self.call_user(fig.savefig, path, format="png")
                    outputs.append({"mime": "image/png", "path": path})
                except BaseException as e:
                    self.note("could not save figure %s: %s: %s" % (num, type(e).__name__, e))
            if nums:
                try:
                    plt.close("all")
                except BaseException as e:
                    self.note("could not close figures: %s" % e)
        if value is not None and self.shell is None:
            outputs.extend(self._rich(seq, value))
        elif self.result_data and isinstance(self.result_data.get("text/html"), str):
            path = os.path.join(self.outputs_dir, "exec-%s-result.html" % seq)
            try:
                self._mkdir()
                with open(path, "w", encoding="utf-8", errors="backslashreplace") as f:
                    f.write(self.result_data["text/html"])
                outputs.append({"mime": "text/html", "path": path})
            except BaseException as e:
                self.note("could not save the HTML of the result: %s: %s" % (type(e).__name__, e))
        return outputs

    def _mkdir(self):
        os.makedirs(self.outputs_dir, exist_ok=True)

    def _rich(self, seq, value):
        out = []
        t = type(value)
        if isinstance(value, type):
            return out
        meth = getattr(t, "_repr_png_", None)
        if callable(meth):
            path = os.path.join(self.outputs_dir, "exec-%s-result.png" % seq)
            try:
                data = self.call_user(meth, value)
                if isinstance(data, str):
                    import base64
                    data = base64.b64decode(data)
                if isinstance(data, tuple):      # IPython allows (data, metadata)
                    data = data[0]
                if data:
                    self._mkdir()
                    with open(path, "wb") as f:
                        f.write(data)
                    out.append({"mime": "image/png", "path": path})
            except BaseException as e:
                self.note("could not save the PNG of the result: %s: %s" % (type(e).__name__, e))
        meth = getattr(t, "_repr_html_", None)
        is_df = t.__name__ == "DataFrame" and (t.__module__ or "").startswith("pandas")
        if callable(meth) or is_df:
            path = os.path.join(self.outputs_dir, "exec-%s-result.html" % seq)
            try:
                html = self.call_user(meth, value) if callable(meth) else None
                if isinstance(html, tuple):
                    html = html[0]
                if html is None and is_df:
                    html = self.call_user(lambda: value.to_html(max_rows=60, max_cols=20))
                if html:
                    self._mkdir()
                    with open(path, "w", encoding="utf-8", errors="backslashreplace") as f:
                        f.write(html)
                    out.append({"mime": "text/html", "path": path})
            except BaseException as e:
                self.note("could not save the HTML of the result: %s: %s" % (type(e).__name__, e))
        return out

    # ----------------------------------------------------------------- vars
    def handle_vars(self, req):
        out, modules, private = [], [], []
        try:
            items = list(self.ns.items())
        except BaseException:
            items = []
        for name, v in items:
            try:
                if self._hidden(name, v):
                    continue
                if name.startswith("_"):
                    if name not in SYSTEM_NAMES:
                        private.append(name)
                    continue
                if isinstance(v, types.ModuleType):
                    modules.append(name)
                    continue
                out.append(self._describe(name, v))
            except BaseException:
                out.append({"name": name, "type": "?"})
        self.event({"op": "vars", "id": req.get("id"), "vars": out, "modules": modules,
                    "private": private})

    def _describe(self, name, v):
        t = type(v)
        d = {"name": name, "type": getattr(t, "__qualname__", t.__name__)}
        is_cls = isinstance(v, type)
        if not is_cls:
            try:
                shape = getattr(v, "shape", None)
                if isinstance(shape, tuple):
                    d["shape"] = str(shape)
            except BaseException:
                pass
            try:
                if hasattr(t, "__len__"):
                    n = len(v)
                    if isinstance(n, int):
                        d["len"] = n
            except BaseException:
                pass
        try:
            size = None
            mod = getattr(t, "__module__", "") or ""
            if not is_cls and mod.startswith("pandas") and hasattr(v, "memory_usage"):
                m = v.memory_usage(deep=False)
                size = int(m.sum()) if hasattr(m, "sum") else int(m)
            elif not is_cls and isinstance(getattr(v, "nbytes", None), int):
                size = v.nbytes
            if size is None:
                size = sys.getsizeof(v)
            d["size"] = int(size)
        except BaseException:
            pass
        try:
            import reprlib
            r = reprlib.Repr()
            r.maxstring = r.maxother = PREVIEW_LEN + 20
            r.maxlist = r.maxtuple = r.maxset = r.maxfrozenset = r.maxdeque = r.maxarray = 12
            r.maxdict = 8
            r.maxlong = 100
            p = r.repr(v).replace("\r", "\\r").replace("\n", "\\n")
            if len(p) > PREVIEW_LEN:
                p = p[:PREVIEW_LEN - 3] + "..."
            d["preview"] = p
        except BaseException:
            pass
        return d

    # ----------------------------------------------------------------- snapshot
    def handle_snapshot(self, req):
        rid = req.get("id")
        self.reap()
        self.flush_all()
        try:
            pid = os.fork()
        except OSError as e:
            # No child: answer on fd 5 ourselves so the agent is not left waiting.
            w = _ChunkWriter(SNAP_FD)
            try:
                w.end(self._manifest(rid, False, "fork failed: %s" % e, [], [], 0, 0.0))
            except _StreamBroken:
                pass
            self.event({"op": "snapshot_started", "id": rid, "pid": self.pid})
            return
        if pid == 0:
            code = 1
            try:
                self.snapshot_child(rid)
                code = 0
            finally:
                os._exit(code)
        self.children.add(pid)
        self.event({"op": "snapshot_started", "id": rid, "pid": pid})

    def _manifest(self, rid, ok, error, kept, skipped, nbytes, secs, retry=False):
        m = {"id": rid, "ok": ok, "error": error, "format": FORMAT, "kept": kept,
             "skipped": skipped, "info": self.info, "bytes": nbytes, "seconds": round(secs, 3)}
        if retry:
            m["retry"] = True
        return m

    def snapshot_child(self, rid):
        t0 = time.monotonic()
        try:
            os.setpgid(0, 0)
        except OSError:
            pass
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        for fd in (REQ_FD, EVT_FD):
            try:
                os.close(fd)
            except OSError:
                pass
        try:                                   # nothing the pickling prints may reach the pipes
            null = os.open(os.devnull, os.O_RDWR)
            os.dup2(null, 1)
            os.dup2(null, 2)
            os.close(null)
        except OSError:
            pass
        import gc
        gc.disable()

        # fd 5 non-blocking (only snapshot writers ever write to it, and they all handle EAGAIN):
        # writes never block past the deadline, and the deadline is checked where the count of
        # bytes already out is exact, so an interrupted chunk can be completed.
        budget = max(1, self.budget)
        try:
            os.set_blocking(SNAP_FD, False)
        except OSError:
            pass
        writer = _ChunkWriter(SNAP_FD, stop_at=t0 + budget)

        def on_alarm(signum, frame):
            # Inside a write the deadline check takes over; once it has raised, the alarm of
            # the same moment must not raise again inside the handler that ends the pass.
            if not writer.in_write and not writer.expired:
                writer.expired = True
                raise _SnapshotTimeout()
        signal.signal(signal.SIGALRM, on_alarm)
        signal.alarm(budget)

        kept, skipped, modules, sources = {}, [], {}, {}
        try:
            for name, v in list(self.ns.items()):
                if name.startswith("_") or self._hidden(name, v):
                    continue
                try:
                    if isinstance(v, types.ModuleType):
                        mname = getattr(v, "__name__", None)
                        if isinstance(mname, str) and sys.modules.get(mname) is not None:
                            modules[name] = mname
                        else:
                            skipped.append({"name": name, "type": "module", "reason":
                                            "module %r cannot be re-imported by name" % (mname,)})
                        continue
                    bad = _prefilter_reason(v)
                except (_SnapshotTimeout, _StreamBroken):
                    raise
                except BaseException:
                    bad = False
                if bad:
                    skipped.append({"name": name, "type": _tname(v),
                                    "reason": "cannot pickle '%s' object" % _tname(v)})
                    continue
                kept[name] = v
            for k, entry in list(linecache.cache.items()):
                if isinstance(k, str) and k.startswith("<exec-") and len(entry) >= 3:
                    sources[k] = "".join(entry[2])
            book = None
            if self.ipython:
                # In and Out, within bounds: Out's values in the one pass with the variables (what
                # they share stays shared), under names that no variable can have.
                try:
                    if self.book is not None:
                        book, outs = self.book.snapshot()
                    else:
                        book, outs = _ipy.pending_snapshot(self.pending_book, self.pending_inputs)
                    # whether the shell was built: a restore builds it again (code defined since
                    # may look up In, Out, _ or get_ipython when it is called)
                    book["built"] = self.shell is not None
                    for n, v in outs.items():
                        if v is not None and not _prefilter_reason(v):
                            kept[OUT_PREFIX + str(n)] = v
                except (_SnapshotTimeout, _StreamBroken):
                    raise
                except BaseException:
                    book = None
            self.snap_book = book

            err = self._write_pass(writer, kept, modules, sources)
            if err is None:
                writer.end(self._manifest(rid, True, None, list(modules) + _visible(kept), skipped,
                                          writer.bytes, time.monotonic() - t0))
                return
            # The single pass failed: find the culprits, each pickled alone into a null sink.
            first_error = "first pass failed (%s: %s)" % (type(err).__name__, _reason(err))
            P = _user_dumper()
            culprits = []
            for name, v in list(kept.items()):
                try:
                    P(_NullSink(), protocol=5).dump(v)
                except (_SnapshotTimeout, _StreamBroken):
                    raise
                except BaseException as e:
                    culprits.append({"name": name, "type": _tname(v), "reason": _reason(e)})
                    del kept[name]
            seen = _skipped_visible(culprits)
            skipped.extend(seen)
            names = [c["name"] for c in seen] + (["Out values"] if len(seen) < len(culprits) else [])
            writer.end(self._manifest(rid, False, first_error + "; retrying without "
                                      + (", ".join(names) or "nothing"),
                                      [], seen, writer.bytes, time.monotonic() - t0, retry=True))
            writer.bytes = 0
            err = self._write_pass(writer, kept, modules, sources)
            if err is None:
                writer.end(self._manifest(rid, True, None, list(modules) + _visible(kept), skipped,
                                          writer.bytes, time.monotonic() - t0))
            else:
                writer.end(self._manifest(rid, False, "%s; second pass failed (%s: %s)" % (
                    first_error, type(err).__name__, _reason(err)), [], skipped, writer.bytes,
                    time.monotonic() - t0))
        except _StreamBroken:
            os._exit(3)
        except _SnapshotTimeout:
            self._final_failure(writer, rid, "snapshot time budget exceeded (%d s)" % self.budget,
                                skipped, t0)
        except BaseException as e:
            self._final_failure(writer, rid, "%s: %s" % (type(e).__name__, _reason(e)), skipped, t0)
        finally:
            signal.alarm(0)

    def _final_failure(self, writer, rid, error, skipped, t0):
        signal.alarm(0)
        signal.signal(signal.SIGALRM, signal.SIG_DFL)
        writer.stop_at = time.monotonic() + 30   # padding + trailer: 30 s more at most
        signal.alarm(40)                         # and a hard stop behind that
        try:
            writer.end(self._manifest(rid, False, error, [], skipped, writer.bytes,
                                      time.monotonic() - t0))
        except BaseException:
            os._exit(3)

    def _write_pass(self, writer, kept, modules, sources):
        """One complete data pass; returns None or the exception that stopped it."""
        import pickle
        header = {"version": 1, "names": _visible(kept),
                  "types": {k: _tname(v) for k, v in kept.items() if not k.startswith(OUT_PREFIX)},
                  "modules": modules, "sources": sources}
        if getattr(self, "snap_book", None) is not None:
            header["ipython"] = self.snap_book
        header["process"] = self._process_state()
        try:
            pickle.dump(header, writer, protocol=5)
            P = _user_dumper()
            P(writer, protocol=5).dump(kept)
        except (_SnapshotTimeout, _StreamBroken):
            raise
        except BaseException as e:
            return e
        return None

    def _process_state(self):
        """The working directory and what the code did to os.environ (`%cd`, `%env`,
        os.environ[...] = ...): state a notebook keeps, and so does a snapshot."""
        base = getattr(self, "base_env", None)
        st = {}
        try:
            st["cwd"] = os.getcwd()
        except OSError:
            pass
        if base is not None:
            env = dict(os.environ)
            st["env_set"] = {k: v for k, v in env.items() if base.get(k) != v}
            st["env_unset"] = [k for k in base if k not in env]
        return st

    def _restore_process(self, st):
        if not isinstance(st, dict):
            return
        # The RUNTIMECTL_* variables that the agent gives the new process are its word (the
        # session's name, its folders), not the snapshot's.
        agents = lambda k: k.startswith("RUNTIMECTL_") and k in self.base_env  # noqa: E731
        for k, v in (st.get("env_set") or {}).items():
            if isinstance(k, str) and isinstance(v, str) and not agents(k):
                os.environ[k] = v
        for k in st.get("env_unset") or []:
            if isinstance(k, str) and not k.startswith("RUNTIMECTL_"):
                os.environ.pop(k, None)     # never one of the agent's
        cwd = st.get("cwd")
        if isinstance(cwd, str) and cwd:
            try:
                os.chdir(cwd)
            except OSError as e:
                self.note("the working directory %s is gone (%s); staying in %s" % (
                    cwd, e.strerror, os.getcwd()))

    # ----------------------------------------------------------------- restore
    def restore(self, rfd):
        """Loads the snapshot on fd rfd into the namespace: (restored names, failed entries,
        copies: entries naming what came back as a copy of what it shared)."""
        restored, failed, copies = [], [], []
        header = {}
        try:
            fd = int(rfd)
        except ValueError:
            return [], [{"name": "*", "type": "", "reason": "bad RUNTIMECTL_RESTORE_FD %r" % rfd}], []
        import pickle
        try:
            f = os.fdopen(fd, "rb", buffering=1 << 20)
        except OSError as e:
            return [], [{"name": "*", "type": "", "reason": "cannot open fd %d: %s" % (fd, e)}], []
        try:
            try:
                header = pickle.load(f)
                if not isinstance(header, dict):
                    raise ValueError("not a runtimectl snapshot header")
            except BaseException as e:
                return [], [{"name": "*", "type": "", "reason": "unreadable snapshot: %s: %s" % (
                    type(e).__name__, _reason(e))}], []
            try:
                self._restore_process(header.get("process"))
            except Exception as e:
                self.note("could not restore the working directory and environment: %s: %s" % (
                    type(e).__name__, e))
            for fname, src in (header.get("sources") or {}).items():
                linecache.cache[fname] = (len(src), None, src.splitlines(True) or ["\n"], fname)
            import importlib
            for alias, mname in (header.get("modules") or {}).items():
                try:
                    self.ns[alias] = importlib.import_module(mname)
                    restored.append(alias)
                except BaseException as e:
                    failed.append({"name": alias, "type": "module",
                                   "reason": "import %s failed: %s: %s" % (mname, type(e).__name__, _reason(e))})
            names = list(header.get("names") or [])
            types_ = header.get("types") or {}
            try:
                _fix_dill_main()
                values = pickle.load(f)
                if not isinstance(values, dict):
                    raise ValueError("snapshot variables are not a dict")
                outs = {}
                for k in [k for k in values if isinstance(k, str) and k.startswith(OUT_PREFIX)]:
                    v = values.pop(k)
                    try:
                        outs[int(k[len(OUT_PREFIX):])] = v
                    except ValueError:
                        pass
                if self.book is not None:
                    try:
                        self.book.restore(header.get("ipython"), outs)
                    except Exception as e:
                        self.note("could not restore In/Out: %s: %s" % (type(e).__name__, e))
                elif self.ipython:
                    self.pending_book = (header.get("ipython"), outs)   # at the build
                self.ns.update(values)
                book = header.get("ipython")
                if self.ipython and self.shell is None and isinstance(book, dict) and \
                        book.get("built", True):
                    self.ensure_shell()     # it was built before: built again, with the state in
                restored.extend(values)
                for n in names:
                    if n not in values:
                        failed.append({"name": n, "type": types_.get(n, ""), "reason": "missing"})
                if _views.COPIES:
                    where = _views.names_holding(values, [o for o, _ in _views.COPIES])
                    said = set()
                    for o, why in _views.COPIES:
                        n = where.get(id(o), "?")
                        if (n, why) not in said:
                            said.add((n, why))
                            copies.append({"name": n, "type": types_.get(n) or _tname(o), "reason": why})
            except BaseException as e:
                why = "%s: %s" % (type(e).__name__, _reason(e))
                failed.extend({"name": n, "type": types_.get(n, ""), "reason": why} for n in names)
        finally:
            del _views.COPIES[:]
            try:
                f.close()
            except OSError:
                pass
            _fix_dill_main()
        return restored, failed, copies


def main():
    k = Kernel()
    k.setup()
    k.serve()


if _RUN_AS_SCRIPT:
    main()

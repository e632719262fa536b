# IPython semantics for the runtimectl Python kernel driver (kernel.py): Debian's python3-ipython
# InteractiveShell on the session's own namespace, as ipykernel uses it, minus the ZeroMQ.
#
# What it brings (docs/kernel-protocol.md, "IPython"):
# - the cell transformer: %magics, %%cell magics, !cmd, x = !cmd, obj? / obj?? ;
# - the display publisher: display(), IPython.display objects, _repr_*_ and _ipython_display_
#   become "display" events on fd 4 with the full mime bundle (display_data,
#   update_display_data, clear_output), each put in its place among stdout/stderr by the sync
#   token that the driver writes to fds 1 and 2 just before it;
# - the display hook: the final expression's value as an execute_result event, Out[n], _, __,
#   ___, _n (n = the session's seq, the execution count);
# - the inline matplotlib backend (plt.show() and figures left open give image/png displays);
# - complete / inspect / is_complete, answered as ipykernel answers them.
#
# What kernel.py keeps doing itself: compiling and running the code (tracebacks on <exec-N>,
# interrupts, top-level await, the `changed` rule), snapshots, `result` (the repr), and `!cmd`
# (through the shell with the code's file descriptors, `_exit_code` set).
#
# Bookkeeping and snapshots: In (the code of each execution, by seq, as run and as written) and
# Out (the values shown) are kept in the snapshot within bounds (IN_KEEP_BYTES of code, OUT_KEEP
# values), and _, __, ___, _i, _ii, _iii, _iN, _N are rebuilt from them on restore; IPython's own
# history database is off (HistoryManager.enabled = False) and its caches are trimmed after every
# execution. A cell that changed nothing else (a bare name shown) says "bookkeeping" in its done
# event: no snapshot of its own, but the next drain (session stop) takes one.
#
# What it costs a session is kept small (bench/README.md, "What IPython costs a session"): the package is
# installed without its __init__ (the terminal application, prompt_toolkit), jedi is imported at the
# first completion, the modules IPython only uses inside functions are deferred (DEFERRED), and a
# value of a built-in type that only text/plain would format skips the other formatters.

import base64
import builtins
import json
import os
import sys
import threading
import types

IN_KEEP_BYTES = 2 << 20      # code kept in a snapshot's In (newest first), bytes
OUT_KEEP = 32                # values kept in a snapshot's Out (newest)
DISPLAY_MAX = 8 << 20        # a display event larger than this (JSON) has its data replaced
INLINE_BACKEND = "module://matplotlib_inline.backend_inline"
INSPECT_SCHEME = "Neutral"   # the colours of inspect_reply: IPython's default, ipykernel's
# Names the shell puts into the namespace, never a session's variables (vars, snapshots).
BOOK_NAMES = frozenset(("In", "Out", "get_ipython", "exit", "quit", "__builtin__", "_", "__", "___", "_i",
                        "_ii", "_iii", "_ih", "_oh", "_dh", "_sh", "_exit_code"))


def is_book_name(name):
    """Whether name is the shell's bookkeeping (In, Out, _, _i7, _7, ...)."""
    if name in BOOK_NAMES:
        return True
    if name.startswith("_i") and name[2:].isdigit():
        return True
    return name[:1] == "_" and name[1:].isdigit()


# The shell is built at its first use, not at start (bench/README.md, "IPython built at its first
# use"): a session whose code is plain statements never pays for it (0.4 s of start, 10 MiB). It is
# built, then the In of the executions before it filled in, when
# - a cell needs IPython's transformer (magics, !cmd, obj?), names the shell's bookkeeping (In,
#   Out, _, _i3, get_ipython, display...), or shows a value (an expression's result);
# - a complete / inspect / is_complete request comes;
# - anything imports IPython (matplotlib's inline backend, tqdm, `from IPython.display import
#   HTML`): _Trigger, on sys.meta_path until then, builds it inside that import;
# - display() is called (a function defined in an earlier cell, code run by exec): the builtin is a
#   stand-in (lazy()'s display) until the shell's own replaces it.
# Until then `get_ipython` and `__IPYTHON__` are not builtins: a library that looks for them sees
# plain Python (pandas' is_terminal answers the same as with the shell, which has no kernel).
LAZY_NAMES = frozenset(("display", "__IPYTHON__"))    # names that build the shell besides is_book_name's


class _BuiltLoader:
    """The loader of the spec _Trigger answers: the package the build imported, as it is."""

    def __init__(self, mod):
        self.mod = mod
        self.spec = getattr(mod, "__spec__", None)

    def create_module(self, spec):
        return self.mod

    def exec_module(self, mod):
        if self.spec is not None:
            mod.__spec__ = self.spec      # the import set ours; the package's own again


class _Trigger:
    """On sys.meta_path until the shell is built: an import of the IPython package builds the
    shell (which imports the package its own way) and answers that package."""

    def __init__(self, build):
        self.build = build

    def find_spec(self, name, path=None, target=None):
        if name != "IPython" or path is not None:
            return None
        self.build()
        mod = sys.modules.pop("IPython", None)
        if mod is None:                   # the build failed: the package as Python imports it
            return None
        import importlib.util
        return importlib.util.spec_from_loader("IPython", _BuiltLoader(mod), is_package=True)


def lazy(build):
    """Sets up the first-use build: build() builds the shell (and calls unlazy first)."""
    if not any(isinstance(f, _Trigger) for f in sys.meta_path):
        sys.meta_path.insert(0, _Trigger(build))

    def display(*objs, **kwargs):
        build()
        real = builtins.__dict__.get("display")
        if real is display or real is None:
            raise NameError("name 'display' is not defined (IPython could not be set up)")
        return real(*objs, **kwargs)
    display.__qualname__ = "display"
    display.runtimectl_lazy = True
    builtins.display = display


def unlazy():
    """Takes the first-use hooks off (before the build, and for good if it fails)."""
    sys.meta_path[:] = [f for f in sys.meta_path if not isinstance(f, _Trigger)]
    d = builtins.__dict__.get("display")
    if getattr(d, "runtimectl_lazy", False):
        del builtins.display


def mentions_book(tree):
    """Whether a cell's code names the shell's bookkeeping or display (so it needs the shell)."""
    import ast
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load):
            n = node.id
            if n in LAZY_NAMES or is_book_name(n):
                return True
    return False


def pending_snapshot(restored, inputs):
    """What Book.snapshot() keeps, for a shell not built yet: the In and Out of the snapshot it
    was restored from (restored: (book, outs) or None), then the inputs run since
    ((seq, raw, parsed) each)."""
    book, outs = restored if restored else (None, {})
    ins, parsed, n = {}, {}, 1
    if isinstance(book, dict):
        ins = {int(k): v for k, v in (book.get("in") or {}).items()}
        parsed = {int(k): v for k, v in (book.get("parsed") or {}).items()}
        n = max([int(book.get("n") or 1)] + [k + 1 for k in ins])
    for seq, raw, code in inputs:
        r, p = raw.rstrip("\n"), code.rstrip("\n")
        ins[seq] = r
        if p != r:
            parsed[seq] = p
        else:
            parsed.pop(seq, None)
        n = max(n, seq + 1)
    keep, keep_parsed = _within_bounds((i, ins[i], parsed.get(i, ins[i]))
                                       for i in sorted(ins, reverse=True) if i > 0)
    outs = {k: outs[k] for k in sorted(k for k in (outs or {}) if isinstance(k, int))[-OUT_KEEP:]}
    return {"in": keep, "parsed": keep_parsed, "n": n}, outs


def _within_bounds(entries):
    """The In a snapshot keeps: entries are (seq, code as written, code as run), newest first;
    the newest within IN_KEEP_BYTES, as ({seq: written}, {seq: run, where it differs})."""
    keep, keep_parsed, total = {}, {}, 0
    for i, s, p in entries:
        if not s:
            continue
        total += len(s) + (len(p) if p != s else 0)
        if total > IN_KEEP_BYTES:
            break
        keep[i] = s
        if p != s:
            keep_parsed[i] = p
    return keep, keep_parsed


def choose_backend():
    """The inline backend by default, as ipykernel does (an MPLBACKEND set to anything but the
    image's default Agg is the session's choice and kept)."""
    cur = os.environ.get("MPLBACKEND", "")
    if cur.lower() not in ("", "agg"):
        return
    import importlib.util
    try:
        if importlib.util.find_spec("matplotlib_inline") is None:
            return
    except (ImportError, ValueError):
        return
    os.environ["MPLBACKEND"] = INLINE_BACKEND


def _jsonable(data):
    """A mime bundle as Jupyter sends it: bytes base64, JSON types as they are."""
    out = {}
    for k, v in (data or {}).items():
        if isinstance(v, (bytes, bytearray, memoryview)):
            v = base64.b64encode(bytes(v)).decode("ascii")
        out[str(k)] = v
    return out


# What the shell costs (bench/README.md, "What IPython costs a session"): the package's __init__ imports the
# terminal application (prompt_toolkit, the crash handler, ipapp: a third of the modules), and the
# completer imports jedi and parso; neither is used by a session until asked for. So the package
# is installed without running its __init__ (which runs at the first use of a name only it
# defines: IPython.embed, IPython.start_ipython, ...), and jedi is imported at the first completion.

def _package_without_init():
    """sys.modules["IPython"]: the package, its __init__ not run yet. Submodules import as usual;
    get_ipython, __version__, version_info and release are there at once (IPython's own modules
    and matplotlib ask for them); any other name runs the real __init__ first."""
    import importlib
    import importlib.util
    if "IPython" in sys.modules:
        return
    spec = importlib.util.find_spec("IPython")
    if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
        return
    mod = importlib.util.module_from_spec(spec)

    def __getattr__(name):
        if not name.startswith("__"):
            try:
                sub = importlib.util.find_spec("IPython." + name)
            except (ImportError, ValueError):
                sub = None
            if sub is not None:       # from IPython import paths: the submodule, as ever
                return importlib.import_module("IPython." + name)
        if mod.__dict__.pop("__getattr__", None) is None:
            raise AttributeError("module 'IPython' has no attribute %r" % name)
        spec.loader.exec_module(mod)
        return getattr(mod, name)

    mod.__getattr__ = __getattr__
    sys.modules["IPython"] = mod
    try:
        from IPython.core.getipython import get_ipython
        from IPython.core import release
    except BaseException:
        del sys.modules["IPython"]
        raise
    mod.get_ipython, mod.release = get_ipython, release
    mod.__version__, mod.version_info = release.version, release.version_info


class _Jedi:
    """jedi in IPython's completer (its module global) until the first completion asks for it:
    then the real module, set up as the completer sets it up."""

    def __init__(self, completer):
        self._completer = completer

    def __getattr__(self, name):
        import jedi
        jedi.settings.case_insensitive_completion = False
        import jedi.api.helpers  # noqa: F401 (what the completer imports with it)
        import jedi.api.classes  # noqa: F401
        self._completer.jedi = jedi
        return getattr(jedi, name)


def _import_completer():
    """IPython.core.completer with jedi not imported (see _Jedi); use_jedi's default stays
    "jedi is installed"."""
    import importlib.util
    if "IPython.core.completer" in sys.modules or "jedi" in sys.modules:
        return
    try:
        have = importlib.util.find_spec("jedi") is not None
    except (ImportError, ValueError):
        have = False
    sys.modules["jedi"] = None          # the completer's `import jedi` fails: JEDI_INSTALLED False
    try:
        from IPython.core import completer
    finally:
        if sys.modules.get("jedi", 0) is None:
            del sys.modules["jedi"]
    if have and not completer.JEDI_INSTALLED:
        completer.JEDI_INSTALLED = True
        completer.IPCompleter.use_jedi.default_value = True
        completer.jedi = _Jedi(completer)


# Modules IPython imports as `import X` at the top of its own and uses only inside functions
# (the event loop for async cells and %%script, tracebacks' stack_data, pydoc's text repr, pexpect
# for getoutput, %load's mimetypes): imported during the build they are deferred,
# their code run at the first use of one of their names (by IPython or by the session).
# urllib.request (with http.client, email, ssl) is imported by %pastebin's `from urllib.request
# import Request, urlopen`: during the build those two names are stand-ins that call the real ones.
DEFERRED = frozenset(("asyncio", "stack_data", "pydoc", "pexpect", "mimetypes", "urllib.request"))
STAND_INS = {"urllib.request": ("Request", "urlopen")}
_building = False       # the build is importing IPython: stand-ins are answered


class _Deferred(types.ModuleType):
    """A module whose code has not run yet: the first name looked up in it runs it (in the same
    module object, which is then an ordinary module). __spec__ and __name__ answer without it:
    `import X` looks at them when X is in sys.modules already."""

    def __getattribute__(self, name):
        if name in ("__spec__", "__name__"):
            return types.ModuleType.__getattribute__(self, name)
        if _building:
            if name == "__path__":      # `from X import a`: whether X is a package
                return types.ModuleType.__getattribute__(self, name)
            if name in STAND_INS.get(types.ModuleType.__getattribute__(self, "__name__"), ()):
                return _stand_in(self, name)
        _run_deferred(self)
        return getattr(self, name)

    def __setattr__(self, name, value):
        _run_deferred(self)
        setattr(self, name, value)

    def __delattr__(self, name):
        _run_deferred(self)
        delattr(self, name)


def _stand_in(mod, name):
    def stand_in(*args, **kwargs):
        return getattr(mod, name)(*args, **kwargs)
    stand_in.__name__ = stand_in.__qualname__ = name
    return stand_in


_DEFER_LOCK = threading.RLock()


def _run_deferred(mod):
    with _DEFER_LOCK:
        if type(mod) is not _Deferred:
            return
        object.__setattr__(mod, "__class__", types.ModuleType)
        spec = mod.__spec__
        spec._initializing = True
        try:
            spec.loader.exec_module(mod)
        except BaseException:
            if sys.modules.get(spec.name) is mod:
                del sys.modules[spec.name]
            raise
        finally:
            spec._initializing = False


class _DeferLoader:
    def __init__(self, loader):
        self.loader = loader

    def create_module(self, spec):
        return self.loader.create_module(spec)

    def exec_module(self, mod):
        mod.__spec__.loader = mod.__loader__ = self.loader
        mod.__class__ = _Deferred


class _DeferFinder:
    """On sys.meta_path while the shell is built: the DEFERRED modules' specs, loaded deferred."""

    def find_spec(self, name, path=None, target=None):
        if name not in DEFERRED:
            return None
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(name, path, target)
            if spec is None:
                continue
            if spec.loader is not None and hasattr(spec.loader, "exec_module") and \
                    (spec.origin or "").endswith(".py"):
                spec.loader = _DeferLoader(spec.loader)
            return spec
        return None


# The values a fast path formats: the exact built-in types, whose instances cannot have a _repr_*_
# or _ipython_display_ method (no instance attributes, no class attributes added).
_PLAIN_TYPES = frozenset((int, float, complex, bool, str, bytes, list, tuple, dict, set, frozenset))
# Of those, the ones whose pretty text is their repr while IPython's printer for them is its own
# _repr_pprint (repr, cut at line breaks, which these reprs never have).
_REPR_TYPES = frozenset((int, bool, str, bytes))


def build(kernel, shell_fn):
    """Creates the shell on kernel.main and returns it. shell_fn(cmd) runs a !cmd line."""
    global _building
    finder = _DeferFinder()
    sys.meta_path.insert(0, finder)
    _building = True
    try:
        _package_without_init()
        _import_completer()
        import IPython.core.interactiveshell  # noqa: F401 (with the modules it imports)
        import IPython.core.magics  # noqa: F401 (init_magics imports them)
    finally:
        _building = False
        sys.meta_path.remove(finder)
    from traitlets.config import Config
    from IPython.core.interactiveshell import InteractiveShell
    from IPython.core.displaypub import DisplayPublisher
    from IPython.core.displayhook import DisplayHook
    from IPython.core import formatters as fmt
    from IPython.lib import pretty
    from IPython.core.magic import Magics, magics_class, line_magic
    from traitlets import Type

    # The formatters of IPython's own classes, which answer None for a value of a _PLAIN_TYPES
    # type when no printer is registered for it (every call: a signature bind in `decorator`).
    stock = {fmt.HTMLFormatter, fmt.MarkdownFormatter, fmt.SVGFormatter, fmt.PNGFormatter,
             fmt.PDFFormatter, fmt.JPEGFormatter, fmt.LatexFormatter, fmt.JSONFormatter,
             fmt.JavascriptFormatter, fmt.IPythonDisplayFormatter, fmt.MimeBundleFormatter}

    class Formatter(fmt.DisplayFormatter):
        """IPython's DisplayFormatter; a value of a _PLAIN_TYPES type that no formatter but
        text/plain would format goes straight to text/plain (the same bundle, no other call)."""

        def format(self, obj, include=None, exclude=None):
            t = type(obj)
            if include is None and exclude is None and t in _PLAIN_TYPES:
                plain = self.formatters.get("text/plain")
                if plain is not None and self._only_plain(obj, t, plain):
                    if t in _REPR_TYPES and self._repr_is_pretty(obj, t, plain):
                        try:
                            return {"text/plain": repr(obj)}, {}
                        except Exception:
                            pass        # (an int past the digits limit) as IPython reports it
                    data, md = plain(obj), None
                    if isinstance(data, tuple) and len(data) == 2:
                        data, md = data
                    format_dict, md_dict = {}, {}
                    if data is not None:
                        format_dict["text/plain"] = data
                    if md is not None:
                        md_dict["text/plain"] = md
                    return format_dict, md_dict
            return super().format(obj, include, exclude)

        @staticmethod
        def _repr_is_pretty(obj, t, plain):
            """Whether IPython's pretty printer would print obj with _repr_pprint (the order of
            RepresentationPrinter.pretty: the object's printer, then its type's)."""
            if type(plain) is not fmt.PlainTextFormatter or not plain.enabled:
                return False
            rp = pretty._repr_pprint
            sp = plain.singleton_printers.get(id(obj))
            if sp is not None:
                return sp is rp
            return t is not bool and plain.type_printers.get(t) is rp

        def _only_plain(self, obj, t, plain):
            mro = t.__mro__
            names = None
            for f in (self.ipython_display_formatter, self.mimebundle_formatter,
                      *self.formatters.values()):
                if f is plain or not f.enabled:
                    continue
                if type(f) not in stock or id(obj) in f.singleton_printers:
                    return False
                if f.type_printers and any(c in f.type_printers for c in mro):
                    return False
                if f.deferred_printers:
                    if names is None:
                        names = [(c.__module__, c.__name__) for c in mro]
                    if any(n in f.deferred_printers for n in names):
                        return False
            return True

    class Publisher(DisplayPublisher):
        def publish(self, data, metadata=None, source=None, *, transient=None, update=False, **kw):
            ev = {"kind": "update_display_data" if update else "display_data",
                  "data": _jsonable(data), "metadata": metadata or {}}
            did = (transient or {}).get("display_id")
            if did is not None:
                ev["display_id"] = str(did)
            kernel.display(ev)

        def clear_output(self, wait=False):
            kernel.display({"kind": "clear_output", "wait": bool(wait)})

    class Hook(DisplayHook):
        def write_output_prompt(self):
            pass

        def quiet(self):
            """IPython's: whether the cell's last token is `;`. A cell (one that ran: it
            compiles) with no comment whose last character is not `;` cannot end with one, and
            is not tokenized."""
            try:
                cell = self.shell.history_manager.input_hist_parsed[-1]
            except IndexError:
                return False
            if "#" not in cell and not cell.rstrip().endswith(";"):
                return False
            return super().quiet()

        def finish_displayhook(self):
            pass

        def write_format_data(self, format_dict, md_dict=None):
            kernel.display({"kind": "execute_result", "data": _jsonable(format_dict),
                            "metadata": md_dict or {}})

    @magics_class
    class Packages(Magics):
        """%pip and %conda: runtimectl installs packages before the code runs (the session has no
        network); a line that still reaches the interpreter says how."""

        def _refuse(self, name, line):
            raise RuntimeError(
                "%%%s %s: packages are installed by runtimectl before the code runs (`%%pip "
                "install PKG` as a line of its own, or `runtimectl session install NAME PKG...`)"
                % (name, line))

        @line_magic
        def pip(self, line):
            self._refuse("pip", line)

        @line_magic
        def conda(self, line):
            self._refuse("conda", line)

    class Shell(InteractiveShell):
        display_pub_class = Type(Publisher)
        displayhook_class = Type(Hook)

        def system(self, cmd):
            shell_fn(self.var_expand(cmd, depth=1))

        system_piped = system_raw = system

        def _showtraceback(self, etype, evalue, stb):
            text = self.InteractiveTB.stb2text(stb)
            kernel.shown_error(etype, evalue, text)

        def enable_gui(self, gui=None):
            if gui not in (None, "inline"):
                print("runtimectl: no GUI event loop in a session (%s); figures show inline"
                      % gui, file=sys.stderr)

        def ask_exit(self):
            pass

        def init_virtualenv(self):
            pass        # the session's packages are on sys.path already (kernel.py)

        def init_display_formatter(self):
            self.display_formatter = Formatter(parent=self)
            self.configurables.append(self.display_formatter)

    cfg = Config()
    cfg.HistoryManager.enabled = False
    cfg.HistoryManager.hist_file = ":memory:"
    cfg.InteractiveShell.colors = "NoColor"
    cfg.InteractiveShell.xmode = "Context"
    cfg.InteractiveShell.autocall = 0
    cfg.InteractiveShell.separate_in = ""
    cfg.InteractiveShell.separate_out = ""
    cfg.InteractiveShell.separate_out2 = ""
    cfg.InteractiveShell.banner1 = ""
    cfg.InteractiveShell.warn_venv = False
    cfg.InteractiveShell.enable_html_pager = False
    saved = {n: getattr(builtins, n, None) for n in ("exit", "quit")}
    shell = Shell.instance(config=cfg, user_module=kernel.main)
    shell.register_magics(Packages)
    shell.builtin_trap.__enter__()   # display, get_ipython: builtins for good, as in a notebook
    for n, v in saved.items():       # exit() / quit() stay Python's (SystemExit, survived)
        if v is not None:
            setattr(builtins, n, v)
    # obj? / obj?? / %pdoc / %psource...: the pager is the code's stdout (PAGER=cat at a
    # terminal), and a Jupyter client gets it as a "page" display.
    shell.set_hook("show_in_pager", lambda _self, data, start=0, screen_lines=0, pager_cmd=None:
                   kernel.display({"kind": "page", "data": _jsonable(
                       data if isinstance(data, dict) else {"text/plain": str(data)}),
                       "metadata": {}}))
    # sys.excepthook, the displayhook and the pdb hooks stay Python's outside the shell's traps.
    sys.displayhook = sys.__displayhook__
    sys.excepthook = sys.__excepthook__
    return shell


class Book:
    """The shell's In and Out for one kernel: what each execution adds, the bounds, and what a
    snapshot keeps of them."""

    def __init__(self, shell):
        self.shell = shell

    def store_input(self, seq, raw, parsed):
        """In[seq] = the code (In is a list indexed by seq; gaps are ""), and _i, _ii, _iii,
        _i<seq>, as IPython's HistoryManager.store_inputs does."""
        hm = self.shell.history_manager
        for lst, text in ((hm.input_hist_parsed, parsed), (hm.input_hist_raw, raw)):
            while len(lst) < seq:
                lst.append("")
            if len(lst) == seq:
                lst.append(text.rstrip("\n"))
            else:
                lst[seq] = text.rstrip("\n")
        hm._iii, hm._ii, hm._i, hm._i00 = hm._ii, hm._i, hm._i00, raw.rstrip("\n")
        ns = self.shell.user_ns
        ns.update({"_i": hm._i, "_ii": hm._ii, "_iii": hm._iii, "_i%d" % seq: hm._i00})

    def trim(self):
        """IPython's history caches, which nothing reads here, kept from growing."""
        hm = self.shell.history_manager
        del hm.db_input_cache[:]
        del hm.db_output_cache[:]
        reprs = hm.output_hist_reprs
        if len(reprs) > 2 * OUT_KEEP:
            for k in sorted(reprs)[:-OUT_KEEP]:
                reprs.pop(k, None)

    def snapshot(self):
        """(the In kept, {seq: value} of the Out kept): the newest within the bounds."""
        hm = self.shell.history_manager
        src, parsed = hm.input_hist_raw, hm.input_hist_parsed
        # In is the code as run (a magic's get_ipython() call), _iN as written
        keep, keep_parsed = _within_bounds((i, src[i], parsed[i] if i < len(parsed) else src[i])
                                           for i in range(len(src) - 1, 0, -1))
        out = self.shell.user_ns.get("Out")
        outs = {}
        if isinstance(out, dict):
            for k in sorted(k for k in out if isinstance(k, int))[-OUT_KEEP:]:
                outs[k] = out[k]
        return {"in": keep, "parsed": keep_parsed, "n": len(src)}, outs

    def restore(self, book, outs):
        """Puts back what snapshot() kept: In, Out, _i*, _N, _, __, ___."""
        if not isinstance(book, dict):
            return
        hm = self.shell.history_manager
        ins = {int(k): v for k, v in (book.get("in") or {}).items()}
        parsed = {int(k): v for k, v in (book.get("parsed") or {}).items()}
        n = max([int(book.get("n") or 1)] + [k + 1 for k in ins])
        for lst, first in ((hm.input_hist_parsed, parsed), (hm.input_hist_raw, {})):
            del lst[1:]
            lst.extend(first.get(i, ins.get(i, "")) for i in range(1, n))
        ns = self.shell.user_ns
        recent = [ins[k] for k in sorted(ins)[-3:]]
        while len(recent) < 3:
            recent.insert(0, "")
        hm._iii, hm._ii, hm._i = recent
        hm._i00 = hm._i
        ns.update({"_i": hm._i, "_ii": hm._ii, "_iii": hm._iii})
        for k, v in ins.items():
            ns["_i%d" % k] = v
        out = ns.get("Out")
        dh = self.shell.displayhook
        last = []
        for k in sorted(outs):
            if isinstance(out, dict):
                out[k] = outs[k]
            ns["_%d" % k] = outs[k]
            last.append(outs[k])
        last = ([None, None, None] + last)[-3:]
        dh.___, dh.__, dh._ = last
        ns.update({"_": dh._, "__": dh.__, "___": dh.___})


def complete(shell, code, cursor_pos):
    """ipykernel's complete_reply (the experimental completions API, jedi where it is)."""
    from IPython.core.completer import provisionalcompleter
    if cursor_pos is None:
        cursor_pos = len(code)
    with provisionalcompleter():
        comps = list(shell.Completer.completions(code, cursor_pos))
        if not comps and shell.Completer.use_jedi:
            # jedi answers nothing at all when it cannot write its cache (a HOME the session's
            # user cannot write): IPython's own completer then, as with use_jedi off
            shell.Completer.use_jedi = False
            try:
                comps = list(shell.Completer.completions(code, cursor_pos))
            finally:
                shell.Completer.use_jedi = True
    if comps:
        start = min(c.start for c in comps)
        end = max(c.end for c in comps)
    else:
        start = end = cursor_pos
    matches, types = [], []
    for c in comps:
        # completions may start before `start`: pad them as ipykernel does
        text = code[start:c.start] + c.text + code[c.end:end]
        matches.append(text)
        types.append({"start": start, "end": end, "text": text, "type": c.type,
                      "signature": getattr(c, "signature", "")})
    return {"matches": matches, "cursor_start": start, "cursor_end": end,
            "metadata": {"_jupyter_types_experimental": types}}


def inspect(shell, code, cursor_pos, detail_level):
    """ipykernel's inspect_reply."""
    from IPython.utils.tokenutil import token_at_cursor
    if cursor_pos is None:
        cursor_pos = len(code)
    name = token_at_cursor(code, cursor_pos)
    # In IPython's colours, as ipykernel's shell answers (its default scheme, Neutral): a front
    # end shows them; the session's own output (tracebacks, obj? pages) stays NoColor.
    insp = shell.inspector
    scheme, style = insp.color_table.active_scheme_name, getattr(insp.parser, "style", None)
    try:
        insp.set_active_scheme(INSPECT_SCHEME)
        if style is not None:
            insp.parser.style = INSPECT_SCHEME
        bundle = shell.object_inspect_mime(name, detail_level=detail_level or 0)
        if not shell.enable_html_pager:
            bundle.pop("text/html", None)
        return {"found": True, "data": _jsonable(bundle), "metadata": {}}
    except KeyError:
        return {"found": False, "data": {}, "metadata": {}}
    finally:
        insp.set_active_scheme(scheme)
        if style is not None:
            insp.parser.style = style


def is_complete(shell, code):
    """ipykernel's is_complete_reply."""
    status, indent = shell.input_transformer_manager.check_complete(code)
    r = {"status": status}
    if status == "incomplete":
        r["indent"] = " " * (indent or 0)
    return r


def cap_display(ev):
    """The event, or the same display with its data replaced when it is too large for one
    event line (DISPLAY_MAX)."""
    body = json.dumps(ev, ensure_ascii=True, separators=(",", ":"), default=repr)
    if len(body) <= DISPLAY_MAX:
        return body
    n = len(body)
    small = {k: v for k, v in ev.items() if k not in ("data", "metadata")}
    small["data"] = {"text/plain": "[runtimectl: display of %d bytes dropped: the limit is %d "
                                   "MiB; save it to a file instead]" % (n, DISPLAY_MAX >> 20)}
    small["metadata"] = {"runtimectl": {"dropped": n}}
    return json.dumps(small, ensure_ascii=True, separators=(",", ":"))

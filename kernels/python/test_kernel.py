"""Tests for kernels/python/kernel.py, driven over the real fd protocol (docs/kernel-protocol.md).

Run inside an image with the session image's packages (python3, dill, numpy, pandas, matplotlib):

    docker run --rm -v $PWD/kernels/python:/k -w /k --user 1000 -e RUNTIMECTL_OUTPUTS=/tmp/out \
        runtimectl-pytest python3 -m unittest -v test_kernel

RUNTIMECTL_BENCH=1 also runs the snapshot timing test (100 MiB ndarray + 1M x 10 DataFrame).
"""

import fcntl
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
import unittest
import uuid

HERE = os.path.dirname(os.path.abspath(__file__))
KERNEL = os.environ.get("RUNTIMECTL_KERNEL") or os.path.join(HERE, "kernel.py")

# Keep fds 3..6 of this process occupied so that pipes created below never land there (the
# child re-numbers its fds to 3..6 in preexec_fn; see Kernel.__init__).
_PLACEHOLDERS = []
while True:
    _fd = os.open(os.devnull, os.O_RDONLY | os.O_CLOEXEC)
    if _fd > 6:
        os.close(_fd)
        break
    _PLACEHOLDERS.append(_fd)


def _have(mod):
    try:
        __import__(mod)
        return True
    except ImportError:
        return False


HAVE_SCI = all(_have(m) for m in ("numpy", "pandas", "matplotlib", "dill"))
HAVE_IPYTHON = _have("IPython")


def _book(name):
    """IPython's bookkeeping in the namespace, as in a notebook: In, Out, _, _i3, _3, ..."""
    import re
    return name in ("In", "Out", "get_ipython", "__builtin__") or bool(
        re.fullmatch(r"_(|_|__|i|ii|iii|ih|oh|dh|i\d+|\d+)", name))


class _Stream(threading.Thread):
    """Collects everything read from an fd."""

    def __init__(self, fd):
        super().__init__(daemon=True)
        self.fd = fd
        self.buf = bytearray()
        self.pos = 0
        self.eof = False
        self.cond = threading.Condition()

    def run(self):
        while True:
            try:
                data = os.read(self.fd, 1 << 16)
            except OSError:
                data = b""
            with self.cond:
                if not data:
                    self.eof = True
                    self.cond.notify_all()
                    return
                self.buf += data
                self.cond.notify_all()

    def until(self, marker, timeout):
        """Return the bytes up to `marker` (consumed with it)."""
        deadline = time.monotonic() + timeout
        with self.cond:
            while True:
                i = self.buf.find(marker, self.pos)
                if i >= 0:
                    out = bytes(self.buf[self.pos:i])
                    self.pos = i + len(marker)
                    return out
                left = deadline - time.monotonic()
                if left <= 0 or self.eof:
                    raise AssertionError("marker %r not seen; got %r" % (
                        marker, bytes(self.buf[self.pos:])[-2000:]))
                self.cond.wait(left)


class _Events(threading.Thread):
    def __init__(self, fd):
        super().__init__(daemon=True)
        self.fd = fd
        self.events = []
        self.raw = []
        self.cond = threading.Condition()

    def run(self):
        buf = b""
        while True:
            try:
                data = os.read(self.fd, 1 << 16)
            except OSError:
                data = b""
            if not data:
                with self.cond:
                    self.events.append(None)
                    self.cond.notify_all()
                return
            buf += data
            while b"\n" in buf:
                line, buf = buf.split(b"\n", 1)
                ev = json.loads(line)
                with self.cond:
                    self.raw.append(line)
                    self.events.append((time.monotonic(), ev))
                    self.cond.notify_all()

    def wait(self, pred, timeout):
        deadline = time.monotonic() + timeout
        with self.cond:
            while True:
                for i, item in enumerate(self.events):
                    if item is None:
                        raise AssertionError("event stream closed; events: %r" % self.events)
                    if pred(item[1]):
                        del self.events[i]
                        return item
                left = deadline - time.monotonic()
                if left <= 0:
                    raise AssertionError("event not seen; pending: %r" % self.events)
                self.cond.wait(left)


class _Snapshots(threading.Thread):
    """Parses the fd-5 stream into passes: (data bytes, manifest, time of manifest)."""

    def __init__(self, fd):
        super().__init__(daemon=True)
        self.fd = fd
        self.passes = []
        self.go = threading.Event()     # cleared: the reader stalls (a slow agent)
        self.go.set()
        self.first_byte = None
        self.cond = threading.Condition()
        self.raw_bytes = 0

    def _read_exact(self, f, n):
        out = f.read(n)
        if out is None or len(out) != n:
            raise EOFError
        return out

    def run(self):
        self.go.wait()
        f = os.fdopen(self.fd, "rb", buffering=1 << 20, closefd=False)
        data = []
        try:
            while True:
                line = f.readline()
                if not line:
                    return
                if self.first_byte is None:
                    self.first_byte = time.monotonic()
                n = int(line)
                if n == 0:
                    mline = f.readline()
                    m = int(mline)
                    manifest = json.loads(self._read_exact(f, m))
                    with self.cond:
                        self.passes.append((b"".join(data), manifest, time.monotonic()))
                        self.cond.notify_all()
                    data = []
                    continue
                data.append(self._read_exact(f, n))
                self.raw_bytes += n
        except (EOFError, ValueError):
            return

    def wait_pass(self, timeout):
        deadline = time.monotonic() + timeout
        with self.cond:
            while not self.passes:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise AssertionError("no snapshot pass")
                self.cond.wait(left)
            return self.passes.pop(0)


class Kernel:
    def __init__(self, restore=None, env=None, cwd=None, seq=0, stall_snapshots=False, preload=None):
        self.tmp = tempfile.TemporaryDirectory(prefix="ktest-")
        req_r, self.req_w = os.pipe()
        self.evt_r, evt_w = os.pipe()
        self.snap_r, snap_w = os.pipe()
        child = {3: req_r, 4: evt_w, 5: snap_w}
        rfile = None
        if restore is not None:
            path = os.path.join(self.tmp.name, "restore.bin")
            with open(path, "wb") as f:
                f.write(restore)
            rfile = os.open(path, os.O_RDONLY)
            child[6] = rfile
        pfile = None
        if preload is not None:
            # As the agent does: on a pipe, at the next descriptor.
            pfile, pw = os.pipe()
            os.write(pw, preload.encode())
            os.close(pw)
            child[7 if restore is not None else 6] = pfile

        def pre():
            for n, fd in child.items():
                os.dup2(fd, n)          # dup2 makes n inheritable

        self.outdir = os.environ.get("RUNTIMECTL_OUTPUTS") or os.path.join(self.tmp.name, "outputs")
        e = dict(os.environ)
        e.update({"RUNTIMECTL_LANG": "python", "RUNTIMECTL_OUTPUTS": self.outdir,
                  "MPLBACKEND": "Agg", "PAGER": "cat",
                  "MPLCONFIGDIR": os.path.join(self.tmp.name, "mpl")})
        e.pop("RUNTIMECTL_RESTORE_FD", None)
        if restore is not None:
            e["RUNTIMECTL_RESTORE_FD"] = "6"
        if preload is not None:
            e["RUNTIMECTL_PRELOAD_FD"] = "7" if restore is not None else "6"
        e.update(env or {})
        self.t_start = time.monotonic()
        self.proc = subprocess.Popen([sys.executable, KERNEL], stdin=subprocess.DEVNULL,
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                     preexec_fn=pre, close_fds=False, start_new_session=True,
                                     env=e, cwd=cwd or self.tmp.name)
        for fd in (req_r, evt_w, snap_w) + ((rfile,) if rfile is not None else ()) + ((pfile,) if pfile is not None else ()):
            os.close(fd)
        self.out = _Stream(self.proc.stdout.fileno())
        self.err = _Stream(self.proc.stderr.fileno())
        self.events = _Events(self.evt_r)
        self.snaps = _Snapshots(self.snap_r)
        if stall_snapshots:
            self.snaps.go.clear()
        for t in (self.out, self.err, self.events, self.snaps):
            t.start()
        self.t_ready, self.ready = self.events.wait(lambda ev: ev["op"] == "ready", 60)
        self.seq = seq      # exec seq numbers (file names <exec-SEQ>) go on across a restore

    def send(self, obj):
        data = (json.dumps(obj) + "\n").encode()
        while data:
            n = os.write(self.req_w, data)
            data = data[n:]

    def start_exec(self, code):
        self.seq += 1
        rid = "r%d" % self.seq
        nonce = uuid.uuid4().hex
        self.sync = uuid.uuid4().hex
        self.send({"op": "exec", "id": rid, "seq": self.seq, "code": code, "nonce": nonce,
                   "sync": self.sync})
        return rid, nonce

    def finish_exec(self, rid, nonce, timeout=60):
        """(done event, stdout, stderr) of the execution; its display events are in
        self.displays, and self.out_parts / self.err_parts are the streams cut at the sync
        tokens (one more part than displays)."""
        _, done = self.events.wait(lambda ev: ev.get("op") == "done" and ev.get("id") == rid, timeout)
        out = self.out.until(nonce.encode(), 10).decode("utf-8", "replace")
        err = self.err.until(nonce.encode(), 10).decode("utf-8", "replace")
        self.displays = []
        while True:
            try:
                _, ev = self.events.wait(lambda ev: ev.get("op") == "display" and ev.get("id") == rid, 0)
            except AssertionError:
                break
            self.displays.append(ev)
        self.out_parts, self.err_parts = out.split(self.sync), err.split(self.sync)
        return done, out.replace(self.sync, ""), err.replace(self.sync, "")

    def exec(self, code, timeout=60):
        rid, nonce = self.start_exec(code)
        return self.finish_exec(rid, nonce, timeout)

    def value(self, code):
        """Exec and return the result (asserting success)."""
        done, out, err = self.exec(code)
        if done["status"] != "ok":
            raise AssertionError("exec failed: %r\n%s" % (done, err))
        return done["result"]

    def snapshot(self, timeout=300):
        self.seq += 1
        rid = "s%d" % self.seq
        t0 = time.monotonic()
        self.send({"op": "snapshot", "id": rid})
        t_started, started = self.events.wait(
            lambda ev: ev.get("op") == "snapshot_started" and ev.get("id") == rid, 30)
        passes = []
        while True:
            data, manifest, t_end = self.snaps.wait_pass(timeout)
            passes.append((data, manifest))
            if not manifest.get("retry"):
                break
        return {"started": started, "passes": passes, "data": data, "manifest": manifest,
                "t_started": t_started - t0, "t_done": t_end - t0}

    def vars(self):
        self.seq += 1
        rid = "v%d" % self.seq
        self.send({"op": "vars", "id": rid})
        return self.events.wait(lambda ev: ev.get("op") == "vars" and ev.get("id") == rid, 30)[1]

    def interrupt(self):
        os.killpg(self.proc.pid, signal.SIGINT)

    def close(self):
        try:
            os.close(self.req_w)
        except OSError:
            pass
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()
        for fd in (self.evt_r, self.snap_r):
            try:
                os.close(fd)
            except OSError:
                pass
        self.proc.stdout.close()
        self.proc.stderr.close()
        self.tmp.cleanup()


class KernelTestCase(unittest.TestCase):
    def setUp(self):
        self.k = Kernel()

    def tearDown(self):
        self.k.close()


class TestPreload(unittest.TestCase):
    def test_preload_loads_modules_not_names(self):
        k = Kernel(preload="import json, decimal as dec, os\nprint('hidden')\nwarm = 1\nos.environ['FROM_PRELOAD'] = '1'\nopen('/tmp/ktest-preload-file-%d' % os.getpid(), 'w').close()")
        try:
            done, out, err = k.exec("import sys\n('json' in sys.modules, 'decimal' in sys.modules, 'warm' in dir(), 'dec' in dir())")
            self.assertEqual(done["result"], "(True, True, False, False)")
            self.assertEqual(out, "", "the preload's output is dropped")
            done, out, _ = k.exec("import os; [k for k in os.environ if 'PRELOAD' in k]")
            self.assertEqual(done["result"], "[]", "neither the preload nor its environment changes are the code's")
            done, out, _ = k.exec("b'FROM_PRELOAD' in open('/proc/self/environ', 'rb').read()")
            self.assertEqual(done["result"], "False", "the preload is in no environment")
            done, out, _ = k.exec("import os; [n for n in os.listdir('/tmp') if n == 'ktest-preload-file-%d' % os.getpid()]")
            self.assertEqual(done["result"], "[]", "what the preload left in /tmp is gone")
        finally:
            k.close()

    def test_a_failing_preload_leaves_a_usable_interpreter(self):
        k = Kernel(preload="import no_such_module_here")
        try:
            done, _, _ = k.exec("1 + 1")
            self.assertEqual(done["result"], "2")
        finally:
            k.close()


class TestBasics(KernelTestCase):
    def test_ready(self):
        r = self.k.ready
        self.assertEqual(r["restored"], [])
        self.assertEqual(r["failed"], [])
        self.assertEqual(r["pid"], self.k.proc.pid)
        self.assertTrue(r["info"]["interpreter"].startswith("Python 3."))
        self.assertIn("pickle protocol 5", r["info"]["pickler"])

    def test_state_and_result(self):
        done, out, err = self.k.exec("x = 1")
        self.assertEqual(done["status"], "ok")
        self.assertIsNone(done["result"])
        self.assertIsNone(done["error"])
        self.assertEqual(done["outputs"], [])
        self.assertTrue(done["changed"])
        self.assertEqual(self.k.value("x + 1"), "2")
        self.assertEqual(self.k.value("y = x * 10\ny"), "10")
        self.assertEqual(self.k.value("'a\\nb'"), repr("a\nb"))
        self.assertIsNone(self.k.value("None"))
        self.assertIsNone(self.k.value("print('hi')"))
        done, out, err = self.k.exec("print('hello')\n[1, 2]")
        self.assertEqual(out, "hello\n")
        self.assertEqual(done["result"], "[1, 2]")

    def test_main_namespace(self):
        self.k.exec("def f():\n    pass\nclass C:\n    pass\nimport __main__")
        self.assertEqual(self.k.value("(f.__module__, C.__module__, __name__)"),
                         "('__main__', '__main__', '__main__')")
        self.assertEqual(self.k.value("__main__.__dict__ is globals()"), "True")
        names = [n for n in eval(self.k.value("sorted(globals())")) if not _book(n)]
        self.assertEqual(set(names) - {"f", "C", "__main__"},
                         {"__builtins__", "__doc__", "__loader__", "__name__", "__package__", "__spec__"})
        self.assertEqual(self.k.value("import pickle\ntype(pickle.loads(pickle.dumps(C()))).__name__"), "'C'")

    def test_error_keeps_state_and_traceback(self):
        done, out, err = self.k.exec("a = 1\nb = 2\nundefined_name\nc = 3")
        self.assertEqual(done["status"], "error")
        self.assertEqual(done["error"]["name"], "NameError")
        self.assertIn("undefined_name", done["error"]["value"])
        tb = done["error"]["traceback"]
        self.assertIn('File "<exec-1>", line 3, in <module>', tb)
        self.assertIn("    undefined_name\n", tb)
        self.assertTrue(tb.startswith("Traceback (most recent call last):\n"), tb)
        self.assertNotIn("kernel.py", tb)
        self.assertIn(tb, err)
        self.assertTrue(done["changed"])
        self.assertEqual(self.k.value("(a, b)"), "(1, 2)")
        done, _, _ = self.k.exec("c")
        self.assertEqual(done["error"]["name"], "NameError")

    def test_traceback_through_functions(self):
        self.k.exec("def inner(v):\n    return 1 / v\n")
        done, out, err = self.k.exec("x = 5\ninner(0)")
        tb = done["error"]["traceback"]
        self.assertEqual(done["error"]["name"], "ZeroDivisionError")
        self.assertIn('File "<exec-2>", line 2, in <module>', tb)
        self.assertIn('File "<exec-1>", line 2, in inner', tb)
        self.assertIn("    return 1 / v", tb)
        self.assertNotIn("kernel.py", tb)
        self.assertNotIn("kernel.py", err)

    def test_syntax_error(self):
        done, out, err = self.k.exec("x = (")
        self.assertEqual(done["status"], "error")
        self.assertEqual(done["error"]["name"], "SyntaxError")
        self.assertIn("<exec-1>", done["error"]["traceback"])
        self.assertFalse(done["changed"])
        self.assertIn("SyntaxError", err)

    def test_output_capture(self):
        code = ("import os, subprocess, sys, ctypes\n"
                "print('p1')\n"
                "os.write(1, b'raw1\\n')\n"
                "subprocess.run(['echo', 'sub'])\n"
                "os.system('echo system')\n"
                "ctypes.CDLL(None).printf(b'cprintf\\n')\n"
                "print('e1', file=sys.stderr)\n"
                "os.write(2, b'raw2\\n')\n"
                "sys.stdout.write('no newline')")
        done, out, err = self.k.exec(code)
        self.assertEqual(done["status"], "ok", err)
        # C stdio is block-buffered on a pipe: its text arrives when the driver flushes it
        # (fflush(NULL) after the code), still before the nonce.
        self.assertIn("cprintf\n", out)
        self.assertEqual(out.replace("cprintf\n", ""), "p1\nraw1\nsub\nsystem\nno newline")
        self.assertEqual(err, "e1\nraw2\n")
        done, out, err = self.k.exec("print('\\udcff bad surrogate')")
        self.assertEqual(done["status"], "ok")
        self.assertIn("bad surrogate", out)

    def test_unbuffered_streaming(self):
        rid, nonce = self.k.start_exec("import time\nprint('first')\ntime.sleep(1.5)\nprint('second')")
        t0 = time.monotonic()
        with self.k.out.cond:
            while b"first" not in self.k.out.buf[self.k.out.pos:]:
                self.k.out.cond.wait(5)
        self.assertLess(time.monotonic() - t0, 1.2)
        done, out, err = self.k.finish_exec(rid, nonce)
        self.assertEqual(out, "first\nsecond\n")

    def test_input_eof(self):
        done, out, err = self.k.exec("input()")
        self.assertEqual(done["status"], "error")
        self.assertEqual(done["error"]["name"], "EOFError")
        self.assertEqual(self.k.value("import sys\nsys.stdin.read()"), "''")

    def test_system_exit_survives(self):
        done, out, err = self.k.exec("import sys\nkeep = 1\nsys.exit(3)")
        self.assertEqual(done["status"], "error")
        self.assertEqual(done["error"]["name"], "SystemExit")
        self.assertEqual(done["error"]["value"], "3")
        done, out, err = self.k.exec("exit()")
        self.assertEqual(done["error"]["name"], "SystemExit")
        done, out, err = self.k.exec("quit(0)")
        self.assertEqual(done["error"]["name"], "SystemExit")
        self.assertEqual(self.k.value("keep + 1"), "2")
        done, out, err = self.k.exec("input()")      # exit() closed sys.stdin: still EOFError
        self.assertEqual(done["error"]["name"], "EOFError")

    def test_interrupt(self):
        rid, nonce = self.k.start_exec("n = 0\nwhile True:\n    n += 1")
        time.sleep(0.5)
        self.k.interrupt()
        done, out, err = self.k.finish_exec(rid, nonce, 10)
        self.assertEqual(done["status"], "interrupted")
        self.assertIn("KeyboardInterrupt", err)
        self.assertEqual(done["error"]["name"], "KeyboardInterrupt")
        self.assertIn("<exec-1>", done["error"]["traceback"])
        self.assertEqual(self.k.value("n > 0"), "True")
        # sleeping and a child process
        rid, nonce = self.k.start_exec("import time\ntime.sleep(60)")
        time.sleep(0.5)
        self.k.interrupt()
        done, _, _ = self.k.finish_exec(rid, nonce, 10)
        self.assertEqual(done["status"], "interrupted")
        rid, nonce = self.k.start_exec("import subprocess\nsubprocess.run(['sleep', '60'])")
        time.sleep(0.5)
        self.k.interrupt()
        done, _, _ = self.k.finish_exec(rid, nonce, 10)
        self.assertEqual(done["status"], "interrupted")
        # between executions, SIGINT is harmless
        for _ in range(5):
            self.k.interrupt()
            time.sleep(0.05)
        time.sleep(0.2)
        self.assertIsNone(self.k.proc.poll())
        self.assertEqual(self.k.value("1 + 1"), "2")
        # a handler installed by the code does not outlive it
        self.k.exec("import signal\nsignal.signal(signal.SIGINT, signal.default_int_handler)")
        self.k.interrupt()
        time.sleep(0.2)
        self.assertEqual(self.k.value("2 + 2"), "4")

    def test_interrupt_storm(self):
        # SIGINTs racing with the end of short executions never kill the driver.
        stop = time.monotonic() + 3
        statuses = set()
        while time.monotonic() < stop:
            rid, nonce = self.k.start_exec("sum(range(20000))")
            self.k.interrupt()
            done, _, _ = self.k.finish_exec(rid, nonce, 10)
            statuses.add(done["status"])
        self.assertLessEqual(statuses, {"ok", "interrupted"})
        self.assertEqual(self.k.value("3"), "3")

    def test_control_fds_hidden(self):
        r = self.k.value("import subprocess\n"
                         "subprocess.run(['sh', '-c', 'ls /proc/$$/fd'], close_fds=False, "
                         "capture_output=True, text=True).stdout.split()")
        fds = set(eval(r))
        self.assertFalse(fds & {"3", "4", "5", "6"}, fds)
        r = self.k.value("import os\nos.system('ls /proc/$$/fd > fds.txt')\nopen('fds.txt').read().split()")
        fds = set(eval(r))
        self.assertFalse(fds & {"3", "4", "5", "6"}, fds)
        ns = eval(self.k.value("[k for k in globals() if not k.startswith('__')]"))
        self.assertEqual([n for n in ns if not _book(n)], ["subprocess", "os"])

    def test_changed(self):
        # Only what provably changes nothing skips the snapshot: no statement, literals, plain
        # names. Anything that ran code (an operator, a subscript, an attribute, a call, a
        # statement that raised) may have changed the state.
        self.assertTrue(self.k.exec("x = 1")[0]["changed"])
        self.assertFalse(self.k.exec("x")[0]["changed"])
        self.assertFalse(self.k.exec("x\n42\n-1\n's'\n(1, 2)\n{'a': 1}\npass")[0]["changed"])
        self.assertFalse(self.k.exec("undefined_thing")[0]["changed"])
        self.assertFalse(self.k.exec("# just a comment")[0]["changed"])
        self.assertFalse(self.k.exec("")[0]["changed"])
        self.assertTrue(self.k.exec("x + 1\nx * 2")[0]["changed"])
        self.assertTrue(self.k.exec("x = 2")[0]["changed"])
        self.assertTrue(self.k.exec("print(x)")[0]["changed"])
        self.assertTrue(self.k.exec("1/0\ny = 1")[0]["changed"])
        self.assertTrue(self.k.exec("y = 1\n1/0")[0]["changed"])
        self.k.exec("from collections import defaultdict\nd = defaultdict(int)\nlst = []\n"
                    "def f():\n    lst.append(1)\n    raise ValueError('after')\n"
                    "class R:\n    def __repr__(self):\n        lst.append(2)\n        return 'R'\nr = R()")
        self.assertTrue(self.k.exec("d['k']")[0]["changed"])
        self.assertTrue(self.k.exec("f()")[0]["changed"])
        self.assertTrue(self.k.exec("d.items")[0]["changed"])
        self.assertTrue(self.k.exec("r")[0]["changed"], "a session class's repr is the user's code")
        self.assertTrue(self.k.exec("lst")[0]["changed"], "a container's repr calls its items'")
        self.assertTrue(self.k.exec("(z := 3)")[0]["changed"])

    def test_top_level_await(self):
        self.assertEqual(self.k.value("import asyncio\nawait asyncio.sleep(0.01)\nv = 41\nv + 1"), "42")
        self.assertEqual(self.k.value("async def g():\n    return 7\nawait g()"), "7")

    def test_user_fork(self):
        done, out, err = self.k.exec("import os\npid = os.fork()\nif pid == 0:\n    print('child')\n"
                                     "else:\n    os.waitpid(pid, 0)\n    print('parent')")
        self.assertEqual(done["status"], "ok", err)
        self.assertIn("parent", out)
        self.assertEqual(self.k.value("5"), "5")
        time.sleep(0.2)
        stray = [e for e in self.k.events.events if e is None or e[1].get("op") == "done"]
        self.assertEqual(stray, [])

    def test_future_flags_persist(self):
        self.k.exec("from __future__ import annotations")
        self.assertEqual(self.k.value("def f(a: undefined_type) -> int: pass\nf.__annotations__['a']"),
                         "'undefined_type'")

    def test_unknown_op(self):
        self.k.send({"op": "bogus", "id": "b1"})
        ev = self.k.events.wait(lambda ev: ev.get("id") == "b1", 10)[1]
        self.assertEqual(ev["op"], "error")
        self.assertEqual(self.k.value("1"), "1")

    def test_vars_plain(self):
        self.k.exec("import os\nimport os.path as osp\nd = {'a': 1, 'b': [1, 2]}\n_hidden = 3\n"
                    "s = 'x' * 500\nL = list(range(100000))\ndef f(): pass\nclass K:\n    shape = 'no'\n"
                    "g = (i for i in range(3))\nml = 'line1\\nline2'")
        v = self.k.vars()
        by = {e["name"]: e for e in v["vars"]}
        self.assertEqual(sorted(v["modules"]), ["os", "osp"])
        self.assertEqual(v["private"], ["_hidden"])
        self.assertEqual(set(by), {"d", "s", "L", "f", "K", "g", "ml"})
        self.assertEqual(by["d"]["type"], "dict")
        self.assertEqual(by["d"]["len"], 2)
        self.assertEqual(by["f"]["type"], "function")
        self.assertEqual(by["K"]["type"], "type")
        self.assertNotIn("shape", by["K"])
        self.assertEqual(by["g"]["type"], "generator")
        self.assertEqual(by["L"]["len"], 100000)
        for e in v["vars"]:
            self.assertLessEqual(len(e["preview"]), 80)
            self.assertNotIn("\n", e["preview"])
            self.assertGreater(e["size"], 0)
        self.assertEqual(by["ml"]["preview"], "'line1\\nline2'")


@unittest.skipUnless(HAVE_SCI, "numpy/pandas/matplotlib/dill not installed")
class TestScientific(KernelTestCase):
    def test_figures(self):
        done, out, err = self.k.exec(
            "import matplotlib.pyplot as plt\nplt.plot([1, 2, 3])\nplt.show()\n"
            "fig2 = plt.figure()\nplt.bar([1, 2], [3, 4])\nprint('drawn')")
        self.assertEqual(done["status"], "ok", err)
        self.assertEqual(out, "drawn\n")
        paths = [o["path"] for o in done["outputs"]]
        self.assertEqual(paths, [os.path.join(self.k.outdir, "exec-1-1.png"),
                                 os.path.join(self.k.outdir, "exec-1-2.png")])
        for o in done["outputs"]:
            self.assertEqual(o["mime"], "image/png")
            with open(o["path"], "rb") as f:
                self.assertEqual(f.read(8), b"\x89PNG\r\n\x1a\n")
        self.assertEqual(self.k.value("plt.get_fignums()"), "[]")
        self.assertEqual(self.k.exec("x = 1")[0]["outputs"], [])
        # an error after drawing still saves the figure
        done, out, err = self.k.exec("plt.plot([3, 2, 1])\n1/0")
        self.assertEqual(done["status"], "error")
        self.assertEqual(len(done["outputs"]), 1)
        # a figure that fails to render is a traceback on stderr, not a failed execution (as
        # with ipykernel's inline backend)
        done, out, err = self.k.exec("import os\nos.environ['X'] = '1'\nfig = plt.figure()\n"
                                     "fig.canvas.print_figure = None\nplt.plot([1])\n'ok'")
        self.assertEqual(done["status"], "ok", err)
        self.assertEqual(done["outputs"], [])
        self.assertIn("TypeError", err)

    def test_rich_results(self):
        done, out, err = self.k.exec("import pandas as pd\ndf = pd.DataFrame({'a': [1, 2]})\ndf")
        self.assertEqual(done["status"], "ok", err)
        self.assertIn("a", done["result"])
        self.assertEqual(done["outputs"], [{"mime": "text/html",
                                            "path": os.path.join(self.k.outdir, "exec-1-result.html")}])
        with open(done["outputs"][0]["path"]) as f:
            self.assertIn("<table", f.read())
        done, out, err = self.k.exec(
            "class P:\n    def _repr_png_(self):\n        return b'\\x89PNG fake'\n"
            "    def _repr_html_(self):\n        raise ValueError('boom')\nP()")
        self.assertEqual(done["status"], "ok", err)
        self.assertEqual(done["outputs"], [{"mime": "image/png",
                                            "path": os.path.join(self.k.outdir, "exec-2-result.png")}])
        self.assertIn("ValueError: boom", err)   # IPython's formatter shows it, as in a notebook

    def test_vars_scientific(self):
        self.k.exec("import numpy as np\nimport pandas as pd\narr = np.zeros((100, 3))\n"
                    "df = pd.DataFrame({'a': range(1000), 'b': 1.5})")
        v = self.k.vars()
        by = {e["name"]: e for e in v["vars"]}
        self.assertEqual(sorted(v["modules"]), ["np", "pd"])
        self.assertEqual(by["arr"]["type"], "ndarray")
        self.assertEqual(by["arr"]["shape"], "(100, 3)")
        self.assertEqual(by["arr"]["size"], 2400)
        self.assertEqual(by["arr"]["len"], 100)
        self.assertEqual(by["df"]["type"], "DataFrame")
        self.assertEqual(by["df"]["shape"], "(1000, 2)")
        self.assertEqual(by["df"]["len"], 1000)
        self.assertGreaterEqual(by["df"]["size"], 16000)
        self.assertLessEqual(len(by["df"]["preview"]), 80)

    SETUP = """
import numpy as np
import pandas as pd
import os.path
from collections import namedtuple
df = pd.DataFrame({'a': [1, 2, 3], 'b': ['x', 'y', 'z']})
arr = np.arange(12, dtype=np.float64).reshape(3, 4)
class Point:
    scale = 10
    def __init__(self, x, y):
        self.x, self.y = x, y
    def norm2(self):
        return (self.x ** 2 + self.y ** 2) * helper_factor()
def helper_factor():
    return FACTOR
FACTOR = 1
p = Point(3, 4)
points = [p, Point(1, 1)]
def twice(v):
    return v * 2
sq = lambda v: v * v
def make_adder(n):
    def add(v):
        return v + n
    return add
add5 = make_adder(5)
shared_a = [1, 2, 3]
shared_b = shared_a
NT = namedtuple('NT', 'u v')
nt = NT(1, 2)
gen = (i for i in range(3))
fh = open(os.devnull)
_private = 'not saved'
"""

    def _restore(self, data):
        k2 = Kernel(restore=data, seq=1000)
        self.addCleanup(k2.close)
        return k2

    def test_snapshot_restore(self):
        done, out, err = self.k.exec(self.SETUP)
        self.assertEqual(done["status"], "ok", err)
        snap = self.k.snapshot()
        m = snap["manifest"]
        self.assertEqual(len(snap["passes"]), 1)
        self.assertTrue(m["ok"], m)
        self.assertIsNone(m["error"])
        self.assertEqual(m["format"], "python-pickle5")
        self.assertEqual(m["id"], snap["started"]["id"])
        self.assertIsInstance(snap["started"]["pid"], int)
        self.assertNotEqual(snap["started"]["pid"], self.k.proc.pid)
        skipped = {s["name"]: s for s in m["skipped"]}
        self.assertEqual(set(skipped), {"gen", "fh"})
        self.assertEqual(skipped["gen"]["type"], "generator")
        self.assertEqual(skipped["fh"]["type"], "_io.TextIOWrapper")
        self.assertIn("cannot pickle", skipped["fh"]["reason"])
        self.assertEqual(m["bytes"], len(snap["data"]))
        kept = set(m["kept"])
        self.assertTrue({"np", "pd", "os", "df", "arr", "Point", "p", "points", "twice", "sq",
                         "make_adder", "add5", "shared_a", "shared_b", "nt", "NT",
                         "helper_factor", "FACTOR", "namedtuple"} <= kept, kept)
        self.assertNotIn("_private", kept)
        self.assertIn("pickle protocol 5 + dill", m["info"]["pickler"])
        # the parent is still serving while / after the child writes
        self.assertEqual(self.k.value("1 + 1"), "2")

        k2 = self._restore(snap["data"])
        r = k2.ready
        self.assertEqual(r["failed"], [])
        self.assertEqual(set(r["restored"]), kept)
        checks = {
            "df.equals(pd.DataFrame({'a': [1, 2, 3], 'b': ['x', 'y', 'z']}))": "True",
            "arr.sum(), arr.shape, arr.flags.writeable": "(66.0, (3, 4), True)",
            "p.norm2(), isinstance(p, Point), type(points[1]) is Point, p.__class__.__module__":
                "(25, True, True, '__main__')",
            "twice(21), sq(4), add5(1), make_adder(1)(1)": "(42, 16, 6, 2)",
            "shared_a is shared_b": "True",
            "nt.u + nt.v, type(nt) is NT": "(3, True)",
            "np.__name__, pd.__name__, os.path.join('a', 'b')": "('numpy', 'pandas', 'a/b')",
            "'gen' in globals(), 'fh' in globals(), '_private' in globals()": "(False, False, False)",
            "twice.__module__, sq.__module__, add5.__module__, Point.__module__":
                "('__main__', '__main__', '__main__', '__main__')",
            "helper_factor.__globals__ is globals(), twice.__globals__ is globals()": "(True, True)",
        }
        for expr, want in checks.items():
            self.assertEqual(k2.value(expr), want, expr)
        # functions see the live namespace, not a copy of it
        self.assertEqual(k2.value("FACTOR = 3\np.norm2()"), "75")
        self.assertEqual(k2.value("arr[0, 0] = 100\narr[0, 0]"), "100.0")
        # a user function's source is still known (tracebacks / inspect)
        done, _, err = k2.exec("import inspect\nprint(inspect.getsource(twice))\nsq(None)")
        self.assertEqual(done["error"]["name"], "TypeError")
        self.assertIn("sq = lambda v: v * v", done["error"]["traceback"])
        # and a restored kernel snapshots again
        snap2 = k2.snapshot()
        self.assertTrue(snap2["manifest"]["ok"], snap2["manifest"])
        k3 = self._restore(snap2["data"])
        self.assertEqual(k3.value("p.norm2(), add5(2), shared_a is shared_b"), "(75, 7, True)")

    def test_snapshot_classes(self):
        done, out, err = self.k.exec(
            "import enum, dataclasses, functools\n"
            "class Base:\n    def hi(self):\n        return 'base'\n"
            "class Child(Base):\n    __slots__ = ('v',)\n    def __init__(self):\n        self.v = 9\n"
            "    def hi(self):\n        return 'child+' + super().hi()\n"
            "    @classmethod\n    def cm(cls):\n        return cls.__name__\n"
            "    @property\n    def pv(self):\n        return self.v\n"
            "ch = Child()\n"
            "@dataclasses.dataclass\nclass DC:\n    a: int\n    b: str = 'x'\n"
            "dc = DC(1)\n"
            "class Color(enum.Enum):\n    RED = 1\n    BLUE = 2\n"
            "class Rich(enum.Enum):\n    A = 1\n    def describe(self):\n        return self.name\n"
            "c = Color.RED\n"
            "def fact(n):\n    return 1 if n <= 1 else n * fact(n - 1)\n"
            "part = functools.partial(fact, 5)\n"
            "class MyErr(Exception):\n    pass\n"
            "err = MyErr('boom')")
        self.assertEqual(done["status"], "ok", err)
        snap = self.k.snapshot()
        m = snap["manifest"]
        self.assertTrue(m["ok"], m)
        self.assertEqual([s["name"] for s in m["skipped"]], ["Rich"])
        self.assertIn("by name", m["skipped"][0]["reason"])
        k2 = self._restore(snap["data"])
        self.assertEqual(k2.ready["failed"], [])
        self.assertEqual(k2.value("ch.hi(), ch.cm(), ch.pv, isinstance(ch, Base), Child.__bases__[0] is Base"),
                         "('child+base', 'Child', 9, True, True)")
        self.assertEqual(k2.value("dc, DC(2, 'y') == DC(2, 'y')"), "(DC(a=1, b='x'), True)")
        self.assertEqual(k2.value("c is Color.RED, Color(2).name"), "(True, 'BLUE')")
        self.assertEqual(k2.value("part(), fact(4)"), "(120, 24)")
        self.assertEqual(k2.value("isinstance(err, MyErr), isinstance(err, Exception)"), "(True, True)")

    VIEWS = """
import numpy as np, pandas as pd
x = np.arange(12)
v = x[2:5]
rev = x[::-1]
m = x.reshape(3, 4)
t = m.T
col = m[:, 1]
flat = m.ravel()
fancy = x[[0, 2]]
bcast = np.broadcast_to(x[:4], (2, 4))
ro = x[6:9]
ro.flags.writeable = False
fort = np.asfortranarray(np.arange(12.0).reshape(3, 4))
fcol = fort[:, 2]
rec = np.zeros(3, dtype=[('a', 'i4'), ('b', 'f8')])
rb = rec['b']
when = np.array(['2020-01-01', '2021-06-01', '2022-12-31'], dtype='M8[D]')
later = when[1:]
objs = np.array(['p', 'q', 'r'], dtype=object)
tail = objs[1:]
buf = bytearray(8)
fb = np.frombuffer(buf, np.uint8)[2:]
nested = {'views': [x[:2], m[1]]}
df = pd.DataFrame({'a': [1, 2, 3], 'b': [4.0, 5.0, 6.0], 's': ['x', 'y', 'z']})
avals = df['a'].values
sb = df['b']
svals = df['s'].values
grid = np.zeros((3, 2))
gdf = pd.DataFrame(grid)
"""

    def test_snapshot_keeps_numpy_views(self):
        done, out, err = self.k.exec(self.VIEWS)
        self.assertEqual(done["status"], "ok", err)
        snap = self.k.snapshot()
        self.assertTrue(snap["manifest"]["ok"], snap["manifest"])
        k2 = self._restore(snap["data"])
        self.assertEqual(k2.ready["failed"], [])
        self.assertEqual(k2.ready["copies"], [])
        shared = ("v.base is x, rev.base is x, m.base is x, t.base is x, col.base is x, "
                  "flat.base is x, bcast.base is x, ro.base is x, fcol.base is fort, "
                  "rb.base is rec, later.base is when, tail.base is objs, "
                  "np.shares_memory(fb, np.frombuffer(buf, np.uint8)), "
                  "nested['views'][0].base is x, nested['views'][1].base is x")
        self.assertEqual(k2.value(shared), "(" + ", ".join(["True"] * 15) + ")")
        layout = ("[(a.shape, a.strides, a.flags.writeable, a.flags.c_contiguous, a.flags.f_contiguous, "
                  "a.dtype.str) for a in (v, rev, m, t, col, flat, fancy, bcast, ro, fcol, rb, later, tail, fb)]")
        self.assertEqual(k2.value(layout), self.k.value(layout))
        values = "[a.tolist() for a in (v, rev, m, t, col, flat, fancy, bcast, ro, fcol, rb, later, tail, fb)]"
        self.assertEqual(k2.value(values), self.k.value(values))
        self.assertEqual(k2.value("np.shares_memory(fancy, x), ro.flags.writeable, x.flags.writeable"),
                         "(False, False, True)")
        self.assertEqual(k2.value("df['b'] is sb, df['a'] is df['a']"), "(True, True)",
                         "a column taken from a frame is its cached column again")
        # writes go through, as before the snapshot
        for k in (self.k, k2):
            done, out, err = k.exec(
                "v[0] = 99; t[3, 0] = -1; col[0] = 7; fcol[1] = 0.5; rb[2] = 2.5; tail[0] = 'Q'\n"
                "fb[0] = 200; nested['views'][1][3] = 42; avals[0] = 10; sb.iloc[1] = 50.0\n"
                "svals[2] = 'Z'; grid[0, 0] = 5\n"
                "print(x.tolist(), fort.tolist(), rec['b'].tolist(), objs.tolist(), list(buf))\n"
                "print(df.to_dict('list'), gdf.iloc[0, 0])")
            self.assertEqual(done["status"], "ok", err)
            if k is self.k:
                want = out
        self.assertEqual(out, want)
        self.assertIn("'a': [10, 2, 3]", out)
        # shared again in the next snapshot of the restored kernel
        snap2 = k2.snapshot()
        k3 = self._restore(snap2["data"])
        self.assertEqual(k3.value(shared), "(" + ", ".join(["True"] * 15) + ")")

    def test_restore_names_views_that_came_back_as_copies(self):
        done, out, err = self.k.exec(
            "import numpy as np\nbase = np.arange(6.0)\nmasked = np.ma.array(base)\n"
            "box = {'deep': np.asarray(np.matrix(base))}\nplain = base[1:]")
        self.assertEqual(done["status"], "ok", err)
        snap = self.k.snapshot()
        self.assertTrue(snap["manifest"]["ok"], snap["manifest"])
        k2 = self._restore(snap["data"])
        copies = {c["name"]: c for c in k2.ready["copies"]}
        self.assertEqual(set(copies), {"masked", "box"}, k2.ready["copies"])
        self.assertIn("came back as a copy", copies["masked"]["reason"])
        self.assertIn("numpy.ma.core.MaskedArray", copies["masked"]["type"])
        self.assertIn("numpy.matrix", copies["box"]["reason"])
        self.assertEqual(k2.value("plain.base is base, masked.tolist(), box['deep'].tolist()"),
                         "(True, [0.0, 1.0, 2.0, 3.0, 4.0, 5.0], [[0.0, 1.0, 2.0, 3.0, 4.0, 5.0]])")

    def test_snapshot_retry(self):
        done, out, err = self.k.exec(
            "import threading\nkeep = {'n': 1}\nbad = [1, (i for i in range(2))]\n"
            "holder = {'lock': threading.Lock()}\nlate = [keep]\n"
            "def uses_gen(g=(i for i in range(2))):\n    return 1\nalso = 2")
        self.assertEqual(done["status"], "ok", err)
        snap = self.k.snapshot()
        self.assertEqual(len(snap["passes"]), 2)
        first = snap["passes"][0][1]
        self.assertFalse(first["ok"])
        self.assertTrue(first["retry"])
        self.assertIn("first pass failed", first["error"])
        m = snap["manifest"]
        self.assertTrue(m["ok"], m)
        self.assertNotIn("retry", m)
        self.assertEqual({s["name"] for s in m["skipped"]}, {"bad", "holder", "uses_gen"})
        self.assertEqual(set(m["kept"]), {"threading", "keep", "late", "also"})
        k2 = self._restore(snap["data"])
        self.assertEqual(k2.ready["failed"], [])
        self.assertEqual(k2.value("keep, late[0] is keep, also"), "({'n': 1}, True, 2)")

    def test_snapshot_nothing(self):
        snap = self.k.snapshot()
        self.assertTrue(snap["manifest"]["ok"])
        self.assertEqual(snap["manifest"]["kept"], [])
        k2 = self._restore(snap["data"])
        self.assertEqual(k2.ready["restored"], [])
        self.assertEqual(k2.ready["failed"], [])

    def test_restore_failures(self):
        # a module that cannot be re-imported, and a class whose module is gone
        with open(os.path.join(self.k.tmp.name, "mymod.py"), "w") as f:
            f.write("class Thing:\n    pass\n")
        self.k.exec("import mymod\nt = mymod.Thing()\nok = 5")
        snap = self.k.snapshot()
        self.assertTrue(snap["manifest"]["ok"], snap["manifest"])
        # the new kernel runs where mymod.py is gone (it goes back to the same working directory)
        os.remove(os.path.join(self.k.tmp.name, "mymod.py"))
        k2 = self._restore(snap["data"])
        failed = {f["name"]: f for f in k2.ready["failed"]}
        self.assertIn("mymod", failed)
        self.assertEqual(failed["mymod"]["type"], "module")
        self.assertIn("t", failed)               # the whole variable load failed
        self.assertEqual(failed["t"]["type"], "mymod.Thing")
        self.assertEqual(k2.value("1 + 1"), "2")
        # garbage is not fatal either
        k3 = self._restore(b"not a pickle")
        self.assertEqual(k3.ready["restored"], [])
        self.assertEqual(len(k3.ready["failed"]), 1)
        self.assertEqual(k3.value("2 + 2"), "4")

    def test_snapshot_budget(self):
        k = Kernel(env={"RUNTIMECTL_SNAPSHOT_BUDGET": "1"})
        self.addCleanup(k.close)
        k.exec("class Slow:\n    def __reduce__(self):\n        import time\n        time.sleep(30)\n"
               "        return (int, ())\ns = Slow()\nx = 1")
        t0 = time.monotonic()
        snap = k.snapshot()
        self.assertLess(time.monotonic() - t0, 10)
        self.assertFalse(snap["manifest"]["ok"])
        self.assertIn("budget", snap["manifest"]["error"])
        self.assertEqual(k.value("x"), "1")

    def test_snapshot_budget_mid_chunk(self):
        # The reader stalls, so the budget runs out in the middle of a 32 MiB chunk: the child
        # completes that chunk (padding), then ends the pass cleanly with "ok": false.
        k = Kernel(env={"RUNTIMECTL_SNAPSHOT_BUDGET": "1"}, stall_snapshots=True)
        self.addCleanup(k.close)
        k.exec("import numpy as np\nbig = np.ones(32 * 1024 * 1024 // 8)\nsmall = [1, 2]")
        k.seq += 1
        k.send({"op": "snapshot", "id": "slow"})
        k.events.wait(lambda ev: ev.get("id") == "slow", 30)
        time.sleep(2)
        k.snaps.go.set()
        data, manifest, _ = k.snaps.wait_pass(60)
        self.assertFalse(manifest["ok"], manifest)
        self.assertIn("budget", manifest["error"])
        self.assertNotIn("retry", manifest)
        # the stream is still in step: a second snapshot (budget still 1 s) works
        snap = k.snapshot()
        self.assertTrue(snap["manifest"]["ok"], snap["manifest"])
        k2 = self._restore(snap["data"])
        self.assertEqual(k2.value("big.sum(), small"), "(4194304.0, [1, 2])")

    @unittest.skipUnless(os.environ.get("RUNTIMECTL_BENCH"), "set RUNTIMECTL_BENCH=1")
    def test_bench_big_snapshot(self):
        done, out, err = self.k.exec(
            "import numpy as np, pandas as pd\n"
            "big = np.random.default_rng(0).random(100 * 1024 * 1024 // 8)\n"
            "frame = pd.DataFrame(np.random.default_rng(1).random((1_000_000, 10)), "
            "columns=[f'c{i}' for i in range(10)])", timeout=300)
        self.assertEqual(done["status"], "ok", err)
        rss = self.k.value("int(open('/proc/self/statm').read().split()[1]) * 4096 // 2**20")
        results = []
        for _ in range(3):
            t0 = time.monotonic()
            self.k.seq += 1
            rid = "bench%d" % self.k.seq
            self.k.send({"op": "snapshot", "id": rid})
            t_started, _ = self.k.events.wait(lambda ev: ev.get("id") == rid, 60)
            t1 = time.monotonic()
            self.assertEqual(self.k.value("7"), "7")      # the loop answers while the child writes
            t_loop = time.monotonic()
            data, manifest, t_end = self.k.snaps.wait_pass(300)
            self.assertTrue(manifest["ok"], manifest)
            results.append((t_started - t0, t_loop - t0, t_end - t0, manifest["seconds"], len(data)))
        t0 = time.monotonic()
        k2 = Kernel(restore=data)
        t_ready = k2.t_ready - t0
        self.addCleanup(k2.close)
        self.assertEqual(k2.value("big.shape, frame.shape"), "((13107200,), (1000000, 10))")
        sys.stderr.write("\nBENCH parent RSS %s MiB\n" % rss)
        for r in results:
            sys.stderr.write("BENCH snapshot_started after %.1f ms, exec answered after %.1f ms, "
                             "manifest after %.0f ms (child says %.3f s), %d data bytes (%.0f MB/s)\n"
                             % (r[0] * 1e3, r[1] * 1e3, r[2] * 1e3, r[3], r[4], r[4] / r[2] / 1e6))
        sys.stderr.write("BENCH restore: ready after %.0f ms\n" % (t_ready * 1e3))


if __name__ == "__main__":
    unittest.main()


class TestOutputOrder(unittest.TestCase):
    """A write that goes from one stream to the other waits until the other's pipe is read."""

    def setUp(self):
        sys.path.insert(0, HERE)
        import kernel
        self.k = kernel
        self.a_r, self.a_w = os.pipe()
        self.b_r, self.b_w = os.pipe()
        self.out = kernel._FdWriter(self.a_w, self.b_w)
        self.err = kernel._FdWriter(self.b_w, self.a_w)
        kernel._last_fd[0] = None
        self.wait = kernel.ORDER_WAIT, kernel.ORDER_BUDGET
        kernel.ORDER_WAIT = kernel.ORDER_BUDGET = 10.0    # a loaded machine's reader is late, never this late
        kernel._order_spent[:] = [0.0, 0.0]

    def tearDown(self):
        self.k.ORDER_WAIT, self.k.ORDER_BUDGET = self.wait
        for fd in (self.a_r, self.a_w, self.b_r, self.b_w):
            os.close(fd)

    def unread(self, fd):
        n = bytearray(4)
        fcntl.ioctl(fd, __import__("termios").FIONREAD, n, True)
        return int.from_bytes(n, sys.byteorder)

    def test_the_switch_waits_for_the_other_pipe_to_be_read(self):
        self.out.write(b"to stdout\n")
        read = []
        t = threading.Thread(target=lambda: (time.sleep(0.001), read.append(os.read(self.a_r, 100))))
        t.start()
        self.err.write(b"to stderr\n")
        # The stderr bytes went in only after the stdout pipe was empty.
        self.assertEqual(self.unread(self.a_w), 0)
        t.join()
        self.assertEqual(read, [b"to stdout\n"])
        self.assertEqual(os.read(self.b_r, 100), b"to stderr\n")

    def test_an_unread_pipe_holds_the_other_stream_only_a_moment(self):
        self.k.ORDER_WAIT = 0.05
        self.out.write(b"nobody reads this\n")
        self.err.write(b"still written\n")     # returns: the wait is bounded
        self.assertEqual(os.read(self.b_r, 100), b"still written\n")
        self.assertGreater(self.unread(self.a_w), 0)

    def test_writes_to_one_stream_do_not_wait(self):
        self.out.write(b"a")
        self.out.write(b"b")                   # the other pipe is not asked
        self.assertEqual(os.read(self.a_r, 100), b"ab")

    def test_a_tight_loop_of_switches_waits_only_its_budget(self):
        self.k.ORDER_WAIT, self.k.ORDER_BUDGET = 0.05, 0.02
        self.k.ORDER_WINDOW = 100.0     # one window for the whole test
        try:
            for i in range(20):         # nobody reads: each switch would wait ORDER_WAIT
                self.out.write(b"o")
                self.err.write(b"e")
            # 20 waits of 50 ms would be a second; the budget stops them after 20 ms.
            self.assertLess(self.k._order_spent[1], 0.5)
        finally:
            self.k.ORDER_WINDOW = 0.1

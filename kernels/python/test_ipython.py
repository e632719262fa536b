"""IPython semantics of kernels/python/kernel.py (runtimectl_ipython.py): displays with their
mime bundles and their place among the output, the display hook (Out, _, In), magics, the
inline matplotlib backend, complete / inspect / is_complete, and In/Out across a snapshot.

Run as test_kernel.py is (run_tests.sh runs both); skipped where python3-ipython is missing.
"""

import base64
import json
import os
import unittest

from test_kernel import HAVE_IPYTHON, HAVE_SCI, Kernel


def plain(d):
    return d["data"].get("text/plain")


@unittest.skipUnless(HAVE_IPYTHON, "python3-ipython not installed")
class TestDisplays(unittest.TestCase):
    def setUp(self):
        self.k = Kernel()

    def tearDown(self):
        self.k.close()

    def test_display_objects_and_order(self):
        done, out, err = self.k.exec(
            "from IPython.display import HTML, Markdown, JSON, SVG, Latex, display\n"
            "print('one')\n"
            "display(HTML('<b>hi</b>'))\n"
            "print('two')\n"
            "display(Markdown('# t'), JSON({'a': 1}))\n"
            "display(SVG('<svg xmlns=\"http://www.w3.org/2000/svg\"/>'), Latex('$x$'))\n"
            "print('three')\n"
            "3")
        self.assertEqual(done["status"], "ok", err)
        self.assertEqual(out, "one\ntwo\nthree\n")
        ds = self.k.displays
        kinds = [d["kind"] for d in ds]
        self.assertEqual(kinds, ["display_data"] * 5 + ["execute_result"])
        self.assertEqual([d["n"] for d in ds], [1, 2, 3, 4, 5, 6])
        self.assertEqual(ds[0]["data"]["text/html"], "<b>hi</b>")
        self.assertEqual(ds[1]["data"]["text/markdown"], "# t")
        self.assertEqual(ds[2]["data"]["application/json"], {"a": 1})
        self.assertIn("<svg", ds[3]["data"]["image/svg+xml"])
        self.assertEqual(ds[4]["data"]["text/latex"], "$x$")
        for d in ds:
            self.assertIn("text/plain", d["data"])
        self.assertEqual(plain(ds[5]), "3")
        self.assertEqual(done["result"], "3")
        # the sync tokens cut stdout where each display happened
        self.assertEqual(self.k.out_parts, ["one\n", "two\n", "", "", "", "three\n", ""])

    def test_repr_methods_and_ipython_display(self):
        done, out, err = self.k.exec(
            "class R:\n"
            "    def _repr_html_(self): return '<i>r</i>'\n"
            "    def _repr_markdown_(self): return '*r*'\n"
            "    def __repr__(self): return 'R()'\n"
            "class D:\n"
            "    def _ipython_display_(self):\n"
            "        from IPython.display import display\n"
            "        display({'text/plain': 'custom', 'text/html': '<p>c</p>'}, raw=True)\n"
            "display(R())\nD()")
        self.assertEqual(done["status"], "ok", err)
        ds = self.k.displays
        self.assertEqual(ds[0]["data"], {"text/plain": "R()", "text/html": "<i>r</i>",
                                         "text/markdown": "*r*"})
        self.assertEqual(ds[1]["data"], {"text/plain": "custom", "text/html": "<p>c</p>"})
        self.assertEqual(len(ds), 2)      # _ipython_display_ replaces the execute_result

    def test_update_and_clear(self):
        done, out, err = self.k.exec(
            "from IPython.display import display, clear_output\n"
            "h = display('a', display_id='p1')\nh.update('b')\nclear_output(wait=True)")
        self.assertEqual(done["status"], "ok", err)
        ds = self.k.displays
        self.assertEqual([d["kind"] for d in ds], ["display_data", "update_display_data", "clear_output"])
        self.assertEqual(ds[0]["display_id"], "p1")
        self.assertEqual(ds[1]["display_id"], "p1")
        self.assertEqual(plain(ds[1]), "'b'")
        self.assertTrue(ds[2]["wait"])

    def test_out_in_underscore(self):
        self.k.exec("10")
        self.k.exec("20")
        self.k.exec("x = 5")
        self.assertEqual(self.k.value("(_, __, Out[1], Out[2], _1)"), "(20, 10, 10, 20, 10)")
        self.assertEqual(self.k.value("In[3]"), "'x = 5'")
        self.assertEqual(self.k.value("_i3"), "'x = 5'")
        done, out, err = self.k.exec("30;")
        self.assertEqual(self.k.displays, [])           # ';' keeps the value from showing
        self.assertEqual(self.k.value("len(Out)"), "5")  # 10, 20, the tuple, In[3], _i3
        # none of it is a variable
        names = [v["name"] for v in self.k.vars()["vars"]]
        self.assertEqual(names, ["x"])

    def test_magics(self):
        k = self.k
        done, out, err = k.exec("%time y = sum(range(1000))")
        self.assertEqual(done["status"], "ok", err)
        self.assertIn("Wall time", out)
        done, out, err = k.exec("%timeit -n 3 -r 2 sum(range(100))")
        self.assertIn("loops each", out)
        done, out, err = k.exec("%%time\nz = 2\nz * 3")
        self.assertEqual(plain(k.displays[-1]), "6")
        self.assertEqual(k.value("z"), "2")
        done, out, err = k.exec("%%timeit -n 2 -r 1\nsum(range(10))")
        self.assertIn("loop", out)
        done, out, err = k.exec("%who")
        self.assertIn("y", out)
        self.assertNotIn("In", out.split())
        done, out, err = k.exec("%whos")
        self.assertIn("Variable", out)
        done, out, err = k.exec("%env RT_X=7\nimport os\nos.environ['RT_X']")
        self.assertEqual(done["result"], "'7'")
        os.makedirs(os.path.join(k.tmp.name, "sub"), exist_ok=True)
        done, out, err = k.exec("%cd sub")
        self.assertEqual(done["status"], "ok", err)
        self.assertEqual(plain(k.displays[-1]) if k.displays else None, None)
        self.assertTrue(k.value("%pwd").endswith("/sub'"))
        k.exec("%cd ..")
        done, out, err = k.exec("%%writefile w.py\nprint('from w')\nVALUE = 41\n")
        self.assertIn("Writing w.py", out)
        done, out, err = k.exec("%run w.py")
        self.assertEqual(out, "from w\n")
        self.assertEqual(k.value("VALUE + 1"), "42")
        done, out, err = k.exec("%%bash\necho from bash\necho to err >&2")
        self.assertEqual(done["status"], "ok", err)
        self.assertEqual(out, "from bash\n")
        self.assertIn("to err", err)
        done, out, err = k.exec("%%capture cap\nprint('hidden')\ndisplay('d')")
        self.assertEqual(out, "")
        self.assertEqual(k.displays, [])
        self.assertEqual(k.value("cap.stdout"), "'hidden\\n'")
        done, out, err = k.exec("%load_ext autoreload\n%autoreload 2")
        self.assertEqual(done["status"], "ok", err)
        done, out, err = k.exec("!echo shell $((1+2))\nfiles = !echo a b\nfiles")
        self.assertEqual(done["status"], "ok", err)
        self.assertEqual(out, "shell 3\n")
        self.assertEqual(k.value("_exit_code"), "0")
        done, out, err = k.exec("%pip list")
        self.assertEqual(done["status"], "error")
        self.assertIn("installed by runtimectl", done["error"]["value"])
        done, out, err = k.exec("%nosuchmagic")
        self.assertEqual(done["status"], "error")
        self.assertEqual(done["error"]["name"], "UsageError")
        # a magic's traceback is shown, as in a notebook, and the state goes on
        done, out, err = k.exec("%time 1/0")
        self.assertIn("ZeroDivisionError", err)
        self.assertEqual(k.value("1 + 1"), "2")

    def test_help(self):
        done, out, err = self.k.exec("def f(a):\n    'Doc of f.'\n    return a\n")
        done, out, err = self.k.exec("f?")
        self.assertEqual(done["status"], "ok", err)
        self.assertEqual([d["kind"] for d in self.k.displays], ["page"])
        self.assertIn("Doc of f.", plain(self.k.displays[0]))
        done, out, err = self.k.exec("f??")
        self.assertIn("return a", plain(self.k.displays[0]))

    def test_changed_ignores_bookkeeping(self):
        self.k.exec("x = 5")
        done, _, _ = self.k.exec("x")
        self.assertFalse(done["changed"])   # displayed: Out and _ grew, no variable changed
        self.assertTrue(done["bookkeeping"])  # ... which a drain (session stop) saves
        done, _, _ = self.k.exec("%who")
        self.assertTrue(done["changed"])    # a magic is a call

    def test_interrupt_while_displaying(self):
        import time
        k = self.k
        rid, nonce = k.start_exec("import numpy as np\nbig = 'x' * 300000\nwhile True:\n    display(big)")
        time.sleep(1.5)
        k.interrupt()
        done, out, err = k.finish_exec(rid, nonce)
        self.assertEqual(done["status"], "interrupted", err)
        self.assertGreater(len(k.displays), 0)
        for d in k.displays:
            self.assertEqual(len(plain(d)), 300002)     # every event whole
        self.assertEqual(k.value("1 + 1"), "2")

    def test_complete_inspect_is_complete(self):
        k = self.k
        k.exec("import os\nmy_variable = 1")

        def ask(req):
            k.seq += 1
            req["id"] = "q%d" % k.seq
            k.send(req)
            return k.events.wait(lambda ev: ev.get("op") == req["op"] and ev.get("id") == req["id"], 60)[1]

        r = ask({"op": "complete", "code": "my_va", "cursor_pos": 5})
        self.assertIn("my_variable", r["matches"])
        self.assertEqual((r["cursor_start"], r["cursor_end"]), (0, 5))
        r = ask({"op": "complete", "code": "os.pa", "cursor_pos": 5})
        self.assertIn("os.path", [("os." + m if not m.startswith("os.") else m) for m in r["matches"]]
                      + r["matches"])
        r = ask({"op": "inspect", "code": "os.path.join", "cursor_pos": 12, "detail_level": 0})
        self.assertTrue(r["found"])
        self.assertIn("Join", plain(r) if "text/plain" in r["data"] else "")
        r = ask({"op": "inspect", "code": "nope_nothing", "cursor_pos": 3})
        self.assertFalse(r["found"])
        self.assertEqual(ask({"op": "is_complete", "code": "x = 1"})["status"], "complete")
        r = ask({"op": "is_complete", "code": "def f():"})
        self.assertEqual(r["status"], "incomplete")
        self.assertEqual(r["indent"], "    ")
        self.assertEqual(ask({"op": "is_complete", "code": "1 +* 2"})["status"], "invalid")

    def test_costs_deferred_until_used(self):
        """The terminal application, jedi and the DEFERRED modules are not loaded by the shell;
        each works at its first use (runtimectl_ipython: what it costs)."""
        k = self.k
        loaded = ("sorted(m for m in ('prompt_toolkit', 'jedi', 'asyncio', 'stack_data', "
                  "'urllib.request') if type(__import__('sys').modules.get(m)) is type(__import__('sys')))")
        self.assertEqual(k.value(loaded), "[]")
        done, out, err = k.exec("import asyncio\nawait asyncio.sleep(0, 'slept')")
        self.assertEqual(done["result"], "'slept'", err)
        done, out, err = k.exec("import IPython\n(IPython.get_ipython() is get_ipython(), "
                                "callable(IPython.embed), IPython.__version__ == IPython.release.version)")
        self.assertEqual(done["result"], "(True, True, True)", err)
        k.seq += 1
        k.send({"op": "complete", "code": "import asyn", "cursor_pos": 11, "id": "c1"})
        r = k.events.wait(lambda ev: ev.get("op") == "complete" and ev.get("id") == "c1", 60)[1]
        self.assertIn("asyncio", r["matches"])
        self.assertEqual(k.value("'jedi' in __import__('sys').modules, get_ipython().Completer.use_jedi"),
                         "(True, True)")
        done, out, err = k.exec("%%script sh\necho from-script")
        self.assertEqual(out, "from-script\n", err)

    def test_formatters_registered_for_builtin_types(self):
        """A value of a built-in type takes the plain-text fast path only while no other
        formatter has a printer for it."""
        k = self.k
        done, out, err = k.exec("[1, 'a', {'b': 2.5}]")
        self.assertEqual(k.displays[-1]["data"], {"text/plain": "[1, 'a', {'b': 2.5}]"})
        done, out, err = k.exec(
            "f = get_ipython().display_formatter.formatters\n"
            "f['text/html'].for_type(int, lambda v: '<b>%d</b>' % v)\n"
            "f['text/latex'].for_type_by_name('builtins', 'float', lambda v: '$%s$' % v)\n"
            "7")
        self.assertEqual(done["status"], "ok", err)
        self.assertEqual(k.displays[-1]["data"], {"text/plain": "7", "text/html": "<b>7</b>"})
        k.exec("2.5")
        self.assertEqual(k.displays[-1]["data"], {"text/plain": "2.5", "text/latex": "$2.5$"})
        k.exec("f['text/html'].enabled = False\n8")
        self.assertEqual(k.displays[-1]["data"], {"text/plain": "8"})
        k.exec("'s;'")
        self.assertEqual(k.displays[-1]["data"], {"text/plain": "'s;'"})
        k.exec("f['text/plain'].for_type(int, lambda v, p, cycle: p.text('INT'))\n9")
        self.assertEqual(k.displays[-1]["data"], {"text/plain": "INT"})
        k.exec("True")
        self.assertEqual(k.displays[-1]["data"], {"text/plain": "True"})
        done, out, err = k.exec("9; # no value shown")
        self.assertEqual(k.displays, [], err)


@unittest.skipUnless(HAVE_IPYTHON and HAVE_SCI, "python3-ipython, numpy, pandas, matplotlib needed")
class TestScientificDisplays(unittest.TestCase):
    def setUp(self):
        self.k = Kernel()

    def tearDown(self):
        self.k.close()

    def test_inline_figures(self):
        done, out, err = self.k.exec(
            "%matplotlib inline\nimport matplotlib.pyplot as plt\n"
            "plt.plot([1, 2])\nprint('before')\nplt.show()\nprint('after')\nplt.figure()\nplt.bar([1], [2])")
        self.assertEqual(done["status"], "ok", err)
        ds = [d for d in self.k.displays if d["kind"] == "display_data"]
        self.assertEqual(len(ds), 2, self.k.displays)
        for d in ds:
            self.assertEqual(base64.b64decode(d["data"]["image/png"])[:8], b"\x89PNG\r\n\x1a\n")
            self.assertTrue(plain(d).startswith("<Figure size"))
        # plt.show() shows in place: between 'before' and 'after'
        self.assertEqual(self.k.out_parts[0], "before\n")
        self.assertTrue(self.k.out_parts[1].startswith("after\n"))
        self.assertEqual(len(done["outputs"]), 2)       # and still saved as files
        self.assertEqual(self.k.value("plt.get_fignums()"), "[]")

    def test_dataframe_bundle(self):
        done, out, err = self.k.exec("import pandas as pd\ndf = pd.DataFrame({'a': [1, 2]})\ndf")
        self.assertEqual(done["status"], "ok", err)
        d = self.k.displays[-1]
        self.assertEqual(d["kind"], "execute_result")
        self.assertIn("<table", d["data"]["text/html"])
        self.assertIn("a", d["data"]["text/plain"])

    def test_in_out_survive_a_snapshot(self):
        k = self.k
        k.exec("import pandas as pd\ndf = pd.DataFrame({'a': [1, 2]})")
        k.exec("df")
        k.exec("df.a.sum()")
        k.exec("unpicklable = (i for i in range(3))")
        k.exec("%%writefile /tmp/ktest-cell.txt\ncell")
        snap = k.snapshot()
        self.assertTrue(snap["manifest"]["ok"], snap["manifest"])
        self.assertNotIn("In", snap["manifest"]["kept"])
        self.assertFalse([n for n in snap["manifest"]["kept"] if "Out" in n])
        k2 = Kernel(restore=snap["data"], seq=k.seq)
        try:
            self.assertEqual(k2.value("Out[2] is df"), "True")    # shared, not a copy
            self.assertEqual(k2.value("int(Out[3])"), "3")
            self.assertEqual(k2.value("In[1]"), repr("import pandas as pd\ndf = pd.DataFrame({'a': [1, 2]})"))
            # _ was Out[3] before this cell's own result took its place
            self.assertEqual(k2.value("int(__)"), "3")
            self.assertEqual(k2.value("_i2"), "'df'")
            self.assertEqual(k2.value("%who_ls"), "['df', 'pd']")
            # In is the code as run, _iN the code as written (IPython's input_hist_parsed/raw)
            self.assertEqual(k2.value("In[5]"), repr("get_ipython().run_cell_magic('writefile', '/tmp/ktest-cell.txt', 'cell\\n')"))
            self.assertEqual(k2.value("_i5"), repr("%%writefile /tmp/ktest-cell.txt\ncell"))
        finally:
            k2.close()

    def test_cwd_and_environment_survive_a_snapshot(self):
        k = self.k
        os.environ["KTEST_GONE"] = "here"     # the next kernels' environment has it
        try:
            k2 = Kernel()
            try:
                done, out, err = k2.exec("%env KTEST_A=1\nimport os\nos.environ['KTEST_B'] = 'b'\n"
                                         "del os.environ['KTEST_GONE']\nos.makedirs('/tmp/ktest-sub', exist_ok=True)\n"
                                         "%cd /tmp/ktest-sub")
                self.assertEqual(done["status"], "ok", err)
                snap = k2.snapshot()
                self.assertTrue(snap["manifest"]["ok"], snap["manifest"])
            finally:
                k2.close()
            k3 = Kernel(restore=snap["data"], seq=k2.seq)
            try:
                self.assertEqual(k3.value("%env KTEST_A"), "'1'")
                self.assertEqual(k3.value("os.environ['KTEST_B']"), "'b'")
                self.assertEqual(k3.value("'KTEST_GONE' in os.environ"), "False")
                self.assertEqual(k3.value("%pwd"), "'/tmp/ktest-sub'")
            finally:
                k3.close()
        finally:
            del os.environ["KTEST_GONE"]

    def test_bookkeeping_is_bounded(self):
        import runtimectl_ipython as ipy
        k = self.k
        big = "x = 1  # " + "y" * 600_000
        for _ in range(5):
            k.exec(big)
        for i in range(ipy.OUT_KEEP + 5):
            k.exec(str(i))
        snap = k.snapshot()
        self.assertTrue(snap["manifest"]["ok"], snap["manifest"])
        self.assertLess(snap["manifest"]["bytes"], ipy.IN_KEEP_BYTES + (1 << 20))
        k2 = Kernel(restore=snap["data"], seq=k.seq)
        try:
            self.assertEqual(k2.value("len([v for v in Out.values()])"), str(ipy.OUT_KEEP))
        finally:
            k2.close()



@unittest.skipUnless(HAVE_IPYTHON, "python3-ipython not installed")
class TestShellBuiltAtFirstUse(unittest.TestCase):
    """The shell is built at its first use (runtimectl_ipython, "built at its first use"); what a
    session sees is the same as with the shell built at start (RUNTIMECTL_IPYTHON=eager)."""

    BUILT = "import sys\nprint('IPython.core.interactiveshell' in sys.modules)"

    def kernel(self, **kw):
        k = Kernel(**kw)
        self.addCleanup(k.close)
        return k

    def kernels(self):
        return self.kernel(), self.kernel(env={"RUNTIMECTL_IPYTHON": "eager"})

    def restored(self, k):
        """A new kernel restored from a snapshot of k (its next seq after k's)."""
        snap = k.snapshot()
        self.assertTrue(snap["manifest"]["ok"], snap["manifest"])
        return self.kernel(restore=snap["data"], seq=k.seq)

    def test_plain_code_does_not_build_it(self):
        lazy, eager = self.kernels()
        for k, want in ((lazy, "False\n"), (eager, "True\n")):
            k.exec("x = 1")
            done, out, err = k.exec("import json\ny = json.dumps([x])\n" + self.BUILT)
            self.assertEqual((done["status"], out), ("ok", want), err)
            self.assertTrue(done["bookkeeping"])

    def test_in_and_underscores_as_if_built_at_start(self):
        cells = ["a = 1", "b = a + 1\nfor _ in range(2):\n    pass", "c = 3",
                 "(In[1], In[2], _i, _ii, _iii, _i1, len(In))", "b * 10", "(_, _5, Out[5], _i5)"]
        got = []
        for k in self.kernels():
            results = []
            for c in cells:
                done, out, err = k.exec(c)
                self.assertEqual(done["status"], "ok", err)
                results.append((done["result"], [d["data"] for d in k.displays]))
                k.displays.clear()
            got.append(results)
        self.assertEqual(got[0], got[1])
        self.assertEqual(got[0][3][0], repr(("a = 1", "b = a + 1\nfor _ in range(2):\n    pass",
                                            "c = 3", "b = a + 1\nfor _ in range(2):\n    pass",
                                            "a = 1", "a = 1", 5)))

    def test_warnings_as_if_built_at_start(self):
        cells = ["import warnings\nwarnings.warn('hey', DeprecationWarning)",
                 "print('__warningregistry__' in globals())",
                 "warnings.warn('hey', DeprecationWarning)", "y = 1"]
        got = []
        for k in self.kernels():
            runs = []
            for c in cells:
                done, out, err = k.exec(c)
                runs.append((out, done["changed"]))
            got.append(runs)
        self.assertEqual(got[0], got[1])
        self.assertEqual(got[0][1][0], "False\n")

    def test_each_first_use_builds_it(self):
        for cell, check in (
                ("exec('disp' + 'lay(42)')", lambda k, out: plain(k.displays[-1]) == "42"),
                ("from IPython.display import HTML\nh = HTML('<b>x</b>')\ndisplay(h)",
                 lambda k, out: k.displays[-1]["data"].get("text/html") == "<b>x</b>"),
                ("import IPython\nprint(IPython.get_ipython() is not None, callable(IPython.embed))",
                 lambda k, out: out == "True True\n"),
                ("print(__IPYTHON__)", lambda k, out: out == "True\n"),
                ("%env KTEST_LAZY=1", lambda k, out: out == "env: KTEST_LAZY=1\n"),
                ("2 + 2", lambda k, out: plain(k.displays[-1]) == "4"),
                ("print(get_ipython().execution_count)", lambda k, out: out == "2\n")):
            k = self.kernel()
            k.exec("x = 1")
            done, out, err = k.exec(cell)
            self.assertEqual(done["status"], "ok", (cell, err))
            self.assertTrue(check(k, out), (cell, out, k.displays))
            done, out, err = k.exec(self.BUILT + "\nprint(In[1])")
            self.assertEqual(out, "True\nx = 1\n", cell)

    def test_a_query_builds_it(self):
        k = self.kernel()
        k.exec("value = 1")
        k.seq += 1
        k.send({"op": "is_complete", "code": "for i in x:", "id": "q1"})
        r = k.events.wait(lambda ev: ev.get("op") == "is_complete" and ev.get("id") == "q1", 60)[1]
        self.assertEqual((r["status"], r.get("indent")), ("incomplete", "    "))

    def test_in_through_snapshots_before_the_build(self):
        k = self.kernel()
        k.exec("a = 1")
        k.exec("a += 1")
        # restored without a build, more code, a snapshot, again, then the build
        k2 = self.restored(k)
        done, out, err = k2.exec("b = a * 10\n" + self.BUILT)
        self.assertEqual(out, "False\n", err)
        n = k2.seq
        k3 = self.restored(k2)
        done, out, err = k3.exec(self.BUILT)
        self.assertEqual(out, "False\n", err)
        self.assertEqual(k3.value("(In[1], In[2], In[%d].split(chr(10))[0], _i%d.split(chr(10))[0])"
                                  % (n, n)), repr(("a = 1", "a += 1", "b = a * 10", "b = a * 10")))
        self.assertEqual(k3.value("b"), "20")

    @unittest.skipUnless(HAVE_SCI, "dill (with numpy, pandas, matplotlib) not installed")
    def test_a_built_shell_is_built_again_by_a_restore(self):
        k = self.kernel()
        k.exec("42")
        k.exec("def last():\n    return _, len(Out), type(get_ipython()).__name__")
        done, out, err = self.restored(k).exec("print(last())")    # names nothing of the shell's
        self.assertEqual((done["status"], out), ("ok", "(42, 1, 'Shell')\n"), err)
        k = self.kernel()
        k.exec("x = 1")
        done, out, err = self.restored(k).exec(self.BUILT)
        self.assertEqual(out, "False\n", "a shell never built is not built by the restore")

    def test_an_interrupt_during_the_build_that_shows_a_value_is_not_the_codes(self):
        import time
        k = self.kernel()
        k.exec("x = 1")
        rid, nonce = k.start_exec("x + 41")
        time.sleep(0.03)            # the build takes longer than this: the interrupt falls in it
        k.interrupt()
        done, out, err = k.finish_exec(rid, nonce)
        self.assertEqual((done["status"], done["result"]), ("ok", "42"), err)
        self.assertEqual(plain(k.displays[-1]), "42")
        self.assertEqual(k.value("Out[%d]" % k.seq), "42")

    def test_a_restored_underscore_stays_the_codes(self):
        k = self.kernel(env={"RUNTIMECTL_IPYTHON": "eager"})
        k.exec("7")
        k2 = self.restored(k)
        k2.exec("_ = 'mine'")
        self.assertEqual(k2.value("(_, _1)"), repr(("mine", 7)))

if __name__ == "__main__":
    unittest.main()

"""Jupyter's own clients against `runtimectl kernel run` (driven by cli/kernel_test.go).

jupyter_client's KernelManager + BlockingKernelClient, and start_new_kernel the way the mission's
example uses it. The environment says which kernel and sessions to use:
  KERNEL         the kernel's name (installed in $JUPYTER_DATA_DIR by the Go test)
  SESSION_A/B/C  session names, one per test that needs its own (RUNTIMECTL_SESSION of the kernel)
  RUNTIMECTL_SESSION (for the mission's loop, which passes nothing to the kernel)
Run with /usr/bin/python3 (Debian's python3-jupyter-client). Prints unittest's summary.
"""
import os
import queue
import re
import sys
import time
import unittest

import jupyter_client
from jupyter_client import KernelManager
from jupyter_client.kernelspec import KernelSpecManager

KERNEL = os.environ.get("KERNEL", "runtimectl-python")
TIMEOUT = 120


def start(session):
    km = KernelManager(kernel_name=KERNEL)
    km.start_kernel(env={**os.environ, "RUNTIMECTL_SESSION": session})
    kc = km.client()
    kc.start_channels()
    kc.wait_for_ready(timeout=TIMEOUT)
    return km, kc


def run(kc, code, timeout=TIMEOUT, **kw):
    """Executes code; returns (reply content, [iopub messages of it, up to idle])."""
    msg_id = kc.execute(code, **kw)
    msgs = []
    deadline = time.time() + timeout
    while True:
        m = kc.get_iopub_msg(timeout=max(1, deadline - time.time()))
        if m["parent_header"].get("msg_id") != msg_id:
            continue
        msgs.append(m)
        if m["msg_type"] == "status" and m["content"]["execution_state"] == "idle":
            break
    while True:
        r = kc.get_shell_msg(timeout=max(1, deadline - time.time()))
        if r["parent_header"].get("msg_id") == msg_id:
            return r["content"], msgs


def shell_reply(kc, msg_id, timeout=TIMEOUT):
    """The shell reply to msg_id (wait_for_ready may leave replies to its extra kernel_info
    requests in the queue)."""
    deadline = time.time() + timeout
    while True:
        r = kc.get_shell_msg(timeout=max(1, deadline - time.time()))
        if r["parent_header"].get("msg_id") == msg_id:
            return r


def start_reference():
    """ipykernel (the python3 kernel), the reference the answers are compared with."""
    km = KernelManager(kernel_name=os.environ.get("REFERENCE", "python3"))
    km.start_kernel()
    kc = km.client()
    kc.start_channels()
    kc.wait_for_ready(timeout=TIMEOUT)
    return km, kc


def no_file(text):
    """An inspect reply's text without its File: line's path, the one inherent difference: a
    cell's code is <exec-N> in a session and a temporary file of ipykernel's (whose names are
    random), and other paths are shown relative to each kernel's own working directory."""
    return re.sub(r"(File:(?:\x1b\[0m)?\s*).*", r"\1<path>", text or "")


def ask(kc, op, code, cursor_pos=None, detail_level=0):
    """A complete, inspect or is_complete request and its reply."""
    if op == "complete":
        msg_id = kc.complete(code, cursor_pos)
    elif op == "inspect":
        msg_id = kc.inspect(code, cursor_pos, detail_level)
    else:
        msg_id = kc.is_complete(code)
    return shell_reply(kc, msg_id)


def streams(msgs, name=None):
    return "".join(m["content"]["text"] for m in msgs
                   if m["msg_type"] == "stream" and (name is None or m["content"]["name"] == name))


def of_type(msgs, t):
    return [m for m in msgs if m["msg_type"] == t]


class KernelSpec(unittest.TestCase):
    def test_jupyter_finds_the_kernelspec(self):
        specs = KernelSpecManager().find_kernel_specs()
        self.assertIn(KERNEL, specs)
        spec = KernelSpecManager().get_kernel_spec(KERNEL)
        self.assertEqual(spec.language, "python")
        self.assertEqual(spec.interrupt_mode, "signal")
        self.assertIn("{connection_file}", spec.argv)


class Clients(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.km, cls.kc = start(os.environ["SESSION_A"])

    @classmethod
    def tearDownClass(cls):
        cls.kc.stop_channels()
        cls.km.shutdown_kernel(now=False)  # a shutdown_request: the session is stopped, and kept

    def test_kernel_info(self):
        r = shell_reply(self.kc, self.kc.kernel_info())
        c = r["content"]
        self.assertEqual(c["status"], "ok")
        self.assertEqual(c["protocol_version"], "5.3")
        self.assertEqual(c["language_info"]["name"], "python")
        self.assertEqual(c["language_info"]["file_extension"], ".py")
        self.assertEqual(c["implementation"], "runtimectl")

    def test_streams_and_result(self):
        reply, msgs = run(self.kc, "import sys\nprint('to stdout')\nprint('to stderr', file=sys.stderr)\n6 * 7")
        self.assertEqual(reply["status"], "ok")
        types = [m["msg_type"] for m in msgs]
        self.assertEqual(types[0], "status")
        self.assertEqual(msgs[0]["content"]["execution_state"], "busy")
        self.assertIn("execute_input", types)
        self.assertEqual(streams(msgs, "stdout"), "to stdout\n")
        self.assertEqual(streams(msgs, "stderr"), "to stderr\n")
        self.assertEqual([(m["content"]["name"], m["content"]["text"]) for m in of_type(msgs, "stream")],
                         [("stdout", "to stdout\n"), ("stderr", "to stderr\n")],
                         "a print is one stream message, as ipykernel's buffered streams send it")
        res = of_type(msgs, "execute_result")
        self.assertEqual(len(res), 1)
        self.assertEqual(res[0]["content"]["data"]["text/plain"], "42")
        self.assertEqual(res[0]["content"]["execution_count"], reply["execution_count"])
        inp = of_type(msgs, "execute_input")[0]["content"]
        self.assertEqual(inp["execution_count"], reply["execution_count"])

    def test_execution_count_is_the_sessions_seq(self):
        a, _ = run(self.kc, "1")
        b, _ = run(self.kc, "2")
        self.assertEqual(b["execution_count"], a["execution_count"] + 1)

    def test_error_with_traceback(self):
        run(self.kc, "def f():\n    return 1 / 0")
        reply, msgs = run(self.kc, "before = 1\nf()")
        self.assertEqual(reply["status"], "error")
        self.assertEqual(reply["ename"], "ZeroDivisionError")
        errs = of_type(msgs, "error")
        self.assertEqual(len(errs), 1)
        self.assertEqual(errs[0]["content"]["ename"], "ZeroDivisionError")
        self.assertIn("division by zero", errs[0]["content"]["evalue"])
        tb = "\n".join(errs[0]["content"]["traceback"])
        self.assertIn("ZeroDivisionError", tb)
        self.assertNotIn("Traceback", streams(msgs), "the traceback is the error message's, not a stream's")
        reply, msgs = run(self.kc, "before")
        self.assertEqual(of_type(msgs, "execute_result")[0]["content"]["data"]["text/plain"], "1")

    def test_figure_is_display_data(self):
        reply, msgs = run(self.kc, "import matplotlib.pyplot as plt\nplt.plot([1, 2, 3])\nNone")
        self.assertEqual(reply["status"], "ok", reply)
        shown = of_type(msgs, "display_data")
        self.assertEqual(len(shown), 1, [m["msg_type"] for m in msgs])
        data = shown[0]["content"]["data"]
        self.assertIn("text/plain", data)
        self.assertTrue(data["image/png"].startswith("iVBOR"))

    def test_dataframe_result_has_html(self):
        reply, msgs = run(self.kc, "import pandas as pd\npd.DataFrame({'a': [1, 2]})")
        data = of_type(msgs, "execute_result")[0]["content"]["data"]
        self.assertIn("text/plain", data)
        self.assertIn("<table", data["text/html"])

    def test_interrupt_a_busy_loop(self):
        msg_id = self.kc.execute("n = 0\nwhile True:\n    n += 1")
        # wait until it runs
        while True:
            m = self.kc.get_iopub_msg(timeout=TIMEOUT)
            if m["parent_header"].get("msg_id") == msg_id and m["msg_type"] == "execute_input":
                break
        time.sleep(1)
        t = time.time()
        self.km.interrupt_kernel()
        r = shell_reply(self.kc, msg_id, timeout=30)
        self.assertLess(time.time() - t, 15)
        self.assertEqual(r["content"]["status"], "error")
        self.assertEqual(r["content"]["ename"], "KeyboardInterrupt")
        reply, msgs = run(self.kc, "n > 0")
        self.assertEqual(of_type(msgs, "execute_result")[0]["content"]["data"]["text/plain"], "True")

    def test_history_from_the_session(self):
        run(self.kc, "history_marker = 'hm'")
        r = shell_reply(self.kc, self.kc.history(hist_access_type="tail", n=50, output=False, raw=True))
        self.assertEqual(r["msg_type"], "history_reply")
        codes = [h[2] for h in r["content"]["history"]]
        self.assertIn("history_marker = 'hm'", codes)

    def test_comm_info_and_is_complete(self):
        r = shell_reply(self.kc, self.kc.comm_info())
        self.assertEqual(r["content"]["comms"], {})
        r = shell_reply(self.kc, self.kc.is_complete("x = 1"))
        self.assertEqual(r["msg_type"], "is_complete_reply")
        self.assertEqual(r["content"]["status"], "complete")

    def test_complete_inspect_and_is_complete_answer_as_ipykernel(self):
        """The interpreter answers: the same replies as ipykernel's for the same state."""
        setup = "import os\nmy_variable = 1\nmy_value = 2\ndef doubled(n):\n    'Doubles n.'\n    return 2 * n"
        ref_km, ref = start_reference()
        try:
            for kc in (self.kc, ref):
                reply, _ = run(kc, setup)
                self.assertEqual(reply["status"], "ok", reply)
            cases = [("complete", ("my_va",)), ("complete", ("os.pa",)), ("complete", ("doub",)),
                     ("complete", ("os.path.jo", 7)),
                     ("inspect", ("doubled",)), ("inspect", ("doubled(", 7)), ("inspect", ("no_such_name",)),
                     ("inspect", ("doubled", None, 1)),
                     ("is_complete", ("for i in range(3):",)), ("is_complete", ("x = (1,",)),
                     ("is_complete", ("x = 1",)), ("is_complete", ("x = )",)), ("is_complete", ("%%time\nx = 1\n",))]
            for op, args in cases:
                with self.subTest(op=op, args=args):
                    ours, theirs = ask(self.kc, op, *args), ask(ref, op, *args)
                    self.assertEqual(ours["msg_type"], op + "_reply")
                    a, b = ours["content"], theirs["content"]
                    self.assertEqual(a["status"], "ok", a) if op != "is_complete" else None
                    if op == "complete":
                        self.assertEqual((a["cursor_start"], a["cursor_end"]), (b["cursor_start"], b["cursor_end"]))
                        self.assertTrue(set(b["matches"]) <= set(a["matches"]) | {"%s" % m for m in a["matches"]},
                                        "ours %r, ipykernel's %r" % (a["matches"], b["matches"]))
                        self.assertTrue(a["matches"], "some matches")
                    elif op == "inspect":
                        self.assertEqual(a["found"], b["found"])
                        self.assertEqual(sorted(a["data"]), sorted(b["data"]))
                        self.assertEqual(no_file(a["data"].get("text/plain")), no_file(b["data"].get("text/plain")))
                    else:
                        self.assertEqual(a, b)
        finally:
            ref.stop_channels()
            ref_km.shutdown_kernel(now=True)


class Restart(unittest.TestCase):
    def test_restart_kernel_keeps_a_variable(self):
        km, kc = start(os.environ["SESSION_B"])
        try:
            reply, _ = run(kc, "kept = 41 + 1")
            self.assertEqual(reply["status"], "ok")
            km.restart_kernel()
            kc.wait_for_ready(timeout=TIMEOUT)
            reply, msgs = run(kc, "print(kept)")
            self.assertEqual(reply["status"], "ok", reply)
            self.assertEqual(streams(msgs, "stdout"), "42\n")
            self.assertIn("came back with its state", streams(msgs, "stderr"), "the restart says so")
            reply, msgs = run(kc, "print(kept)")
            self.assertEqual(streams(msgs), "42\n", "only once")
        finally:
            kc.stop_channels()
            km.shutdown_kernel(now=False)


@unittest.skipUnless(os.environ.get("KERNEL_CLEAN"), "no --clean-restart kernel installed")
class CleanRestart(unittest.TestCase):
    """A kernel installed with --clean-restart: a restart begins with an empty state."""

    def test_restart_gives_a_fresh_namespace(self):
        km = KernelManager(kernel_name=os.environ["KERNEL_CLEAN"])
        km.start_kernel(env={**os.environ, "RUNTIMECTL_SESSION": os.environ["SESSION_C"]})
        kc = km.client()
        kc.start_channels()
        try:
            kc.wait_for_ready(timeout=TIMEOUT)
            reply, _ = run(kc, "gone = 1\nwith open('kept.txt', 'w') as f:\n    f.write('file')")
            self.assertEqual(reply["status"], "ok", reply)
            km.restart_kernel()
            kc.wait_for_ready(timeout=TIMEOUT)
            reply, msgs = run(kc, "gone")
            self.assertEqual(reply["status"], "error", "the variable is gone")
            self.assertEqual(reply["ename"], "NameError")
            reply, msgs = run(kc, "print(open('kept.txt').read())")
            self.assertEqual(streams(msgs, "stdout"), "file\n", "the workspace's files are kept")
        finally:
            kc.stop_channels()
            km.shutdown_kernel(now=False)


class Mission(unittest.TestCase):
    """The mission's example, unchanged but for the kernel's name."""

    def test_start_new_kernel_loop(self):
        km, kc = jupyter_client.manager.start_new_kernel(kernel_name=KERNEL)
        kc.wait_for_ready(timeout=30)

        def execute(code):
            kc.execute(code)
            out = []
            while True:
                msg = kc.get_iopub_msg(timeout=TIMEOUT)
                if msg["msg_type"] == "stream":
                    out.append(msg["content"]["text"])
                if msg["msg_type"] == "status" and msg["content"]["execution_state"] == "idle":
                    break
            return "".join(out)

        try:
            execute("x = 42")
            self.assertEqual(execute("print(x)").strip(), "42")
            km.restart_kernel()
            out = execute("print(x)")
            self.assertIn("42\n", out)
            self.assertEqual(execute("print(x)").strip(), "42")
        finally:
            kc.stop_channels()
            km.shutdown_kernel(now=False)


if __name__ == "__main__":
    unittest.main(verbosity=2)

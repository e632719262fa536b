#!/usr/bin/env python3
"""Tests for the bash kernel driver (kernel.bash), speaking docs/kernel-protocol.md to it.

Standard library only. Runs on a host with bash 5.x:

    python3 kernels/bash/test_kernel.py            # or: python3 -m unittest -v test_kernel

Each test starts the driver the way the agent does: `bash --noprofile --norc kernel.bash` in its
own process group, stdin on /dev/null, stdout/stderr pipes, fd 3 (requests), fd 4 (events),
fd 5 (snapshot stream) and, when restoring, fd 6 (a snapshot data file, RUNTIMECTL_RESTORE_FD=6).
Requests are encoded as Go's encoding/json does (sorted keys, \\u escapes for <, > and &, and
ASCII-only output here so that every non-ASCII character arrives as \\uXXXX, surrogate pairs
included).

KERNEL_BASH=/path/to/kernel.bash and BASH_BIN=/path/to/bash choose another driver or bash.
KERNEL_FINGERPRINT=0 runs the driver without the agent's fingerprint file (RUNTIMECTL_STATE_FD),
so that it decides "changed" itself; by default the harness plays the agent's part (see
Kernel.fingerprint_changed).
"""

import json
import os
import re
import secrets
import signal
import subprocess
import tempfile
import threading
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
KERNEL = os.environ.get("KERNEL_BASH", os.path.join(HERE, "kernel.bash"))
BASH = os.environ.get("BASH_BIN", "bash")
TIMEOUT = float(os.environ.get("KERNEL_TEST_TIMEOUT", "20"))
FINGERPRINT = os.environ.get("KERNEL_FINGERPRINT", "1") != "0"
STATE_FD = 7


def go_json(obj, sort_keys=True):
    """json.Marshal: sorted keys (a map's), or in the order given (a struct's, as the agent's
    requests are: its driverRequest), HTML characters escaped; ensure_ascii for \\u coverage."""
    s = json.dumps(obj, sort_keys=sort_keys, separators=(",", ":"), ensure_ascii=True)
    return s.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


class Stream:
    """Collects what a pipe delivers, from a thread."""

    def __init__(self, fd):
        self.buf = bytearray()
        self.cond = threading.Condition()
        self.eof = False
        self.fd = fd
        self.t = threading.Thread(target=self._run, daemon=True)
        self.t.start()

    def _run(self):
        while True:
            try:
                b = os.read(self.fd, 65536)
            except OSError:
                b = b""
            with self.cond:
                if not b:
                    self.eof = True
                    self.cond.notify_all()
                    return
                self.buf += b
                self.cond.notify_all()

    def wait_for(self, pred, timeout=TIMEOUT):
        end = time.monotonic() + timeout
        with self.cond:
            while True:
                r = pred(self.buf)
                if r is not None:
                    return r
                if self.eof:
                    r = pred(self.buf)
                    if r is not None:
                        return r
                    raise EOFError("stream closed; have %r" % bytes(self.buf[-500:]))
                left = end - time.monotonic()
                if left <= 0:
                    raise TimeoutError("timed out; have %r" % bytes(self.buf[-500:]))
                self.cond.wait(left)

    def take_until(self, marker, timeout=TIMEOUT):
        """Everything before marker (which is consumed)."""

        def pred(buf):
            i = buf.find(marker)
            if i < 0:
                return None
            out = bytes(buf[:i])
            del buf[: i + len(marker)]
            return out

        return self.wait_for(pred, timeout)

    def take_line(self, timeout=TIMEOUT):
        return self.take_until(b"\n", timeout)

    def take_n(self, n, timeout=TIMEOUT):
        def pred(buf):
            if len(buf) < n:
                return None
            out = bytes(buf[:n])
            del buf[:n]
            return out

        return self.wait_for(pred, timeout)


class Kernel:
    def __init__(self, restore_data=None, env=None, cwd=None, home=None, fingerprint=None):
        self.fingerprint = FINGERPRINT if fingerprint is None else fingerprint
        self.tmp = tempfile.mkdtemp(prefix="rtk-test-")
        self.home = home or self.tmp
        ctrl_r, self.ctrl_w = os.pipe()
        ev_r, ev_w = os.pipe()
        snap_r, snap_w = os.pipe()
        out_r, out_w = os.pipe()
        err_r, err_w = os.pipe()
        targets = {3: ctrl_r, 4: ev_w, 5: snap_w}
        e = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "HOME": self.home,
            "LANG": "C.UTF-8",
            "PAGER": "cat",
            "RUNTIMECTL_LANG": "bash",
            "RUNTIMECTL_SESSION": "t1",
            "RUNTIMECTL_OUTPUTS": os.path.join(self.tmp, "outputs"),
        }
        if restore_data is not None:
            rpath = os.path.join(self.tmp, "restore.snap")
            with open(rpath, "wb") as f:
                f.write(restore_data)
            targets[6] = os.open(rpath, os.O_RDONLY)
            e["RUNTIMECTL_RESTORE_FD"] = "6"
        if self.fingerprint:
            # The agent's fingerprint file: a memfd whose offset the driver shares.
            self.state = os.memfd_create("runtimectl-state", os.MFD_CLOEXEC)
            targets[STATE_FD] = os.dup(self.state)
            e["RUNTIMECTL_STATE_FD"] = str(STATE_FD)
        if env:
            e.update(env)
        srcs = dict(targets)

        def preexec():
            import fcntl

            os.setpgid(0, 0)  # its own process group, as under the agent
            high = {t: fcntl.fcntl(fd, fcntl.F_DUPFD, 100) for t, fd in srcs.items()}
            for t, fd in high.items():
                os.dup2(fd, t, inheritable=True)
                os.close(fd)
            os.closerange(max(high) + 1, 1 << 16)  # nothing else leaks in from the test runner

        self.p = subprocess.Popen(
            [BASH, "--noprofile", "--norc", KERNEL],
            stdin=subprocess.DEVNULL,
            stdout=out_w,
            stderr=err_w,
            env=e,
            cwd=cwd or self.home,
            preexec_fn=preexec,
            close_fds=False,  # our pipes are non-inheritable; preexec() made 3-6 inheritable
        )
        for fd in list(targets.values()) + [out_w, err_w]:
            os.close(fd)
        self.out = Stream(out_r)
        self.err = Stream(err_r)
        self.ev = Stream(ev_r)
        self.snap = Stream(snap_r)
        self.ready = self.event()
        self.seq = 0
        self.fp_prev = None
        if self.fingerprint:
            assert "fingerprint_ignore" in self.ready, self.ready
            self.fp_ignore = {p.encode() for p in self.ready["fingerprint_ignore"]}
            self.fp_prev = self.fingerprint_take()

    # -- the agent's part: the fingerprint file --
    def fingerprint_take(self):
        """Reads and empties the fingerprint file; returns it less the lines to ignore (those of
        its first part, up to the first empty line, whose text before the first = is listed)."""
        size = os.fstat(self.state).st_size
        b = os.pread(self.state, size, 0)
        os.ftruncate(self.state, 0)
        os.lseek(self.state, 0, os.SEEK_SET)
        head, sep, rest = b.partition(b"\n\n")
        lines = [l for l in head.split(b"\n") if l.split(b"=", 1)[0] not in self.fp_ignore]
        return b"\n".join(lines) + sep + rest

    def fingerprint_changed(self, done):
        """Sets done["changed"] as the agent does for a done event with "fingerprint"."""
        if done.get("fingerprint"):
            assert "changed" not in done, done
            cur = self.fingerprint_take()
            done["changed"] = self.fp_prev is None or cur != self.fp_prev
            self.fp_prev = cur
        return done

    # -- protocol --
    def send(self, obj, sort_keys=True):
        os.write(self.ctrl_w, (go_json(obj, sort_keys) + "\n").encode())

    def send_raw(self, line):
        os.write(self.ctrl_w, line)

    def event(self, timeout=TIMEOUT):
        return json.loads(self.ev.take_line(timeout))

    def exec(self, code, timeout=TIMEOUT, interrupt_after=None):
        self.seq += 1
        nonce = secrets.token_hex(16)
        rid = "r%d" % self.seq
        # as the agent sends it (agent/driver.go: execRequest, its fields in order)
        req = {"op": "exec", "id": rid, "seq": self.seq, "code": code, "nonce": nonce, "sync": secrets.token_hex(16), "session": "t1"}
        self.send(req, sort_keys=False)
        if interrupt_after is not None:
            time.sleep(interrupt_after)
            os.killpg(self.p.pid, signal.SIGINT)
        out = self.out.take_until(nonce.encode(), timeout)
        err = self.err.take_until(nonce.encode(), timeout)
        done = self.event(timeout)
        assert done["op"] == "done" and done["id"] == rid, done
        assert bool(done.get("fingerprint")) == self.fingerprint, done
        self.fingerprint_changed(done)
        return out.decode("utf-8", "replace"), err.decode("utf-8", "replace"), done

    def snapshot(self, sid="s1"):
        self.send({"op": "snapshot", "id": sid})
        started = self.event()
        data = b""
        while True:
            n = int(self.snap.take_line())
            if n == 0:
                break
            data += self.snap.take_n(n)
        m = int(self.snap.take_line())
        manifest = json.loads(self.snap.take_n(m))
        return started, data, manifest

    def request(self, obj):
        self.send(obj)
        return self.event()

    def close(self):
        try:
            os.close(self.ctrl_w)
        except OSError:
            pass
        try:
            rc = self.p.wait(5)
        except subprocess.TimeoutExpired:
            os.killpg(self.p.pid, signal.SIGKILL)
            rc = self.p.wait(5)
        subprocess.run(["rm", "-rf", self.tmp])
        if self.fingerprint:
            os.close(self.state)
        return rc


class KernelTest(unittest.TestCase):
    def setUp(self):
        self.k = Kernel()

    def tearDown(self):
        self.k.close()

    def ok(self, code, **kw):
        out, err, done = self.k.exec(code, **kw)
        self.assertEqual(done["status"], "ok", (code[:300], out[-300:], err[-300:], done))
        return out, err, done

    # -- basics --
    def test_ready(self):
        r = self.k.ready
        self.assertEqual(r["op"], "ready")
        self.assertEqual(r["pid"], self.k.p.pid)
        self.assertEqual(r["restored"], [])
        self.assertEqual(r["failed"], [])
        self.assertRegex(r["info"]["interpreter"], r"^bash \d+\.\d+\.\d+$")

    def test_done_event_shape(self):
        out, err, done = self.k.exec("echo hi")
        self.assertEqual(out, "hi\n")
        self.assertEqual(err, "")
        # (with the fingerprint file, "changed" is the harness's, as it is the agent's)
        self.assertEqual(
            set(done) - {"fingerprint"}, {"op", "id", "status", "result", "error", "outputs", "changed"}
        )
        self.assertEqual(done.get("fingerprint"), True if self.k.fingerprint else None)
        self.assertIsNone(done["result"])
        self.assertIsNone(done["error"])
        self.assertEqual(done["outputs"], [])

    def test_state_persists(self):
        self.ok("cd /tmp; X=41; f() { echo $((X+1)); }")
        out, _, _ = self.ok("pwd; f")
        self.assertEqual(out, "/tmp\n42\n")

    def test_arrays_assoc_aliases_export_options(self):
        self.ok(
            "a=(one 'two words' three); declare -A m=([k1]=v1 ['k 2']='v 2');"
            "alias hello='echo hello-alias'; export EXPORTED=yes; set -o pipefail; shopt -s nullglob"
        )
        out, _, _ = self.ok(
            'echo "${#a[@]} ${a[1]}"; echo "${m[k 2]} ${!m[*]}" | tr " " "\\n" | sort | tr "\\n" " "; echo\n'
            "hello\n"
            "bash -c 'echo $EXPORTED'\n"
            "false | true; echo pipe=$?\n"
            "shopt -q nullglob && echo nullglob-on\n"
        )
        lines = out.splitlines()
        self.assertEqual(lines[0], "3 two words")
        self.assertEqual(sorted(lines[1].split()), sorted("2 k 2 k1 v".split()))
        self.assertEqual(lines[2:], ["hello-alias", "yes", "pipe=1", "nullglob-on"])

    def test_status(self):
        _, _, done = self.k.exec("false")
        self.assertEqual(done["status"], "error")
        self.assertEqual(done["error"], {"name": "ExitStatus", "value": "1", "traceback": ""})
        _, _, done = self.k.exec("true")
        self.assertEqual(done["status"], "ok")
        self.assertIsNone(done["error"])
        _, _, done = self.k.exec("false\necho after")
        self.assertEqual(done["status"], "ok")
        _, _, done = self.k.exec("(exit 7)")
        self.assertEqual(done["error"]["value"], "7")
        out, _, done = self.k.exec("echo $?")
        self.assertEqual(out, "7\n")  # $? of the previous execution, as at a prompt
        _, err, done = self.k.exec("no_such_command_xyz")
        self.assertEqual(done["error"]["value"], "127")
        self.assertIn("no_such_command_xyz", err)

    def test_stdout_stderr_apart(self):
        out, err, _ = self.ok("echo out1; echo err1 >&2; printf out2; printf err2 >&2")
        self.assertEqual(out, "out1\nout2")
        self.assertEqual(err, "err1\nerr2")

    def test_heredoc_and_loops(self):
        code = (
            "cat <<'EOF'\n$HOME `not run` \\ \"q\"\nEOF\n"
            "n=0\nfor i in 1 2 3; do\n  n=$((n + i))\ndone\necho n=$n\n"
            "while read -r line; do echo \"got $line\"; done <<EOF\nx\ny\nEOF\n"
            "if [[ $n -gt 5 ]]; then\n  echo big\nelse\n  echo small\nfi\n"
        )
        out, _, _ = self.ok(code)
        self.assertEqual(out, '$HOME `not run` \\ "q"\nn=6\ngot x\ngot y\nbig\n')

    def test_special_characters(self):
        s = "$ ` \\ \\\\ ' \" é ü 漢字 😀 \t tab \\n \\u0041 <tag> & && || %s %% \x01"
        code = "cat <<'EOF'\n" + s + "\nEOF\nprintf '%s|' 'a\rb' \"x\\\"y\" $'\\x41'; echo"
        out, _, _ = self.ok(code)
        self.assertEqual(out, s + "\n" + 'a\rb|x"y|A|\n')
        out, _, _ = self.ok("v='😀é'; echo ${#v}; printf '%s' \"$v\" | od -An -tx1 | tr -d ' \\n'; echo")
        self.assertEqual(out, "2\nf09f9880c3a9\n")

    def test_exec_request_in_another_form(self):
        # keys in another order, spaces: not the agent's usual form, parsed by __rt_parse
        nonce = secrets.token_hex(16)
        line = '{ "op": "exec", "nonce": "%s", "seq": 1, "id": "p1", "code": "printf \'%%s|\' \\"a\\\\b\\" \\u00e9; echo" }\n' % nonce
        self.k.send_raw(line.encode())
        out = self.k.out.take_until(nonce.encode())
        self.k.err.take_until(nonce.encode())
        done = self.k.event()
        self.assertEqual(done["status"], "ok", done)
        self.assertEqual(done["id"], "p1")
        self.assertEqual(out.decode(), "a\\b|\u00e9|\n")

    def test_unicode_escapes_decoded(self):
        # hand-written JSON: lower/upper-case hex, a pair, a lone surrogate, escaped slash
        nonce = secrets.token_hex(16)
        code = r'printf \"%s\\n\" \"\u00e9\u00C9 \ud83d\ude00 \/ \\u0041 \\\\ \u0041\\\"\"; echo \u0027\u005cu0041\u0027 \u0022\u005c\u005c\u0022'
        line = '{"code":"%s","id":"u1","nonce":"%s","op":"exec","seq":1}\n' % (code, nonce)
        self.k.send_raw(line.encode())
        out = self.k.out.take_until(nonce.encode())
        self.k.err.take_until(nonce.encode())
        done = self.k.event()
        self.assertEqual(done["status"], "ok", done)
        self.assertEqual(out.decode(), 'éÉ 😀 / \\u0041 \\ A"\n\\u0041 \\\n')

    def test_read_gets_eof(self):
        out, _, done = self.k.exec("read x; echo rc=$? x=[$x]; cat; echo cat-done")
        self.assertEqual(out, "rc=1 x=[]\ncat-done\n")

    def test_control_fds_hidden(self):
        out, _, _ = self.ok(
            "for fd in 3 4 5 6; do if { true >&$fd; } 2>/dev/null; then echo open $fd; fi; done; "
            "ls /proc/self/fd | sort -n | tr '\\n' ' '; echo"
        )
        self.assertNotIn("open", out)
        fds = out.split()
        self.assertEqual(fds, ["0", "1", "2", "3"])  # 3 is ls's own directory handle

    def test_interrupt_sleep(self):
        t = time.monotonic()
        out, err, done = self.k.exec("echo before; sleep 100; echo after", interrupt_after=0.5)
        self.assertLess(time.monotonic() - t, 10)
        self.assertEqual(done["status"], "interrupted", done)
        self.assertEqual(out, "before\n")
        out, _, done = self.ok("echo still-alive")
        self.assertEqual(out, "still-alive\n")

    def test_interrupt_busy_loop(self):
        out, _, done = self.k.exec("i=0; while true; do i=$((i+1)); done; echo after", interrupt_after=0.5)
        self.assertEqual(done["status"], "interrupted", done)
        self.assertNotIn("after", out)
        out, _, _ = self.ok('echo "alive $((i > 0))"')
        self.assertEqual(out, "alive 1\n")

    def test_interrupt_inside_function(self):
        self.ok("f() { sleep 100; echo in-f-after; }; g() { f; echo in-g-after; }")
        out, _, done = self.k.exec("g; echo top-after", interrupt_after=0.5)
        self.assertEqual(done["status"], "interrupted", done)
        self.assertEqual(out, "")
        out, _, _ = self.ok("echo fine; f() { echo new-f; }; f")
        self.assertEqual(out, "fine\nnew-f\n")

    def test_interrupt_variants(self):
        for code in (
            "x=$(sleep 100); echo after",
            "sleep 100 | cat; echo after",
            "( while :; do :; done ); echo after",
            "sleep 100 & wait; echo after",
            "for i in 1 2 3; do sleep 100; done; echo after",
            "source <(echo 'sleep 100; echo after-inner'); echo after",
        ):
            t = time.monotonic()
            out, err, done = self.k.exec(code, interrupt_after=0.4)
            self.assertEqual(done["status"], "interrupted", (code, out, err, done))
            self.assertNotIn("after", out, code)
            self.assertLess(time.monotonic() - t, 10, code)
            out, _, _ = self.ok("echo ok")
            self.assertEqual(out, "ok\n")

    def test_interrupt_with_errexit_and_nounset(self):
        self.ok("set -eu")
        out, _, done = self.k.exec("sleep 100; echo after", interrupt_after=0.4)
        self.assertEqual(done["status"], "interrupted")
        out, _, done = self.ok('echo "$-"')
        self.assertIn("e", out)
        self.assertIn("u", out)
        self.ok("set +eu")

    def test_errexit_ends_the_kernel(self):
        # as at a terminal prompt: with set -e a failing command ends the shell (the agent
        # reports a crash and starts a new kernel from the latest snapshot)
        self.ok("set -e")
        self.k.send({"op": "exec", "id": "e", "seq": 9, "code": "echo before; false; echo after", "nonce": "1" * 32})
        self.assertEqual(self.k.p.wait(TIMEOUT), 1)

    def test_eof_on_requests_ends_cleanly(self):
        self.ok("X=1")
        os.close(self.k.ctrl_w)
        self.assertEqual(self.k.p.wait(TIMEOUT), 0)

    def test_user_redirects_stdout_for_good(self):
        out, _, done = self.ok("exec >/dev/null; echo hidden")
        self.assertEqual(out, "")
        out, err, done = self.ok("echo still-hidden; echo shown >&2")
        self.assertEqual((out, err), ("", "shown\n"))

    def test_posix_mode_and_odd_options(self):
        self.ok("set -o posix; set -f; set -C; shopt -s failglob nullglob nocasematch extdebug; IFS=,")
        out, _, done = self.ok("echo *; x=1; echo \"$x\"")
        self.assertEqual(out, "*\n1\n")
        _, _, done = self.k.exec("Y=2")
        self.assertTrue(done["changed"])
        ev = self.k.request({"op": "vars", "id": "v"})
        self.assertIn("Y", [v["name"] for v in ev["vars"]])
        _, _, m = self.k.snapshot()
        self.assertTrue(m["ok"])

    def test_sigint_between_executions(self):
        self.ok("X=1")
        for _ in range(3):
            os.killpg(self.k.p.pid, signal.SIGINT)
            time.sleep(0.1)
        out, _, done = self.ok("echo $X")
        self.assertEqual(out, "1\n")

    def test_changed(self):
        _, _, done = self.k.exec("Y=1")
        self.assertTrue(done["changed"])
        _, _, done = self.k.exec("echo hi")
        self.assertFalse(done["changed"])
        _, _, done = self.k.exec("false")
        self.assertFalse(done["changed"])
        _, _, done = self.k.exec("Y=2")
        self.assertTrue(done["changed"])
        _, _, done = self.k.exec("Y=2")
        self.assertFalse(done["changed"])
        _, _, done = self.k.exec("cd /")
        self.assertTrue(done["changed"])
        _, _, done = self.k.exec("f() { :; }")
        self.assertTrue(done["changed"])
        _, _, done = self.k.exec("alias zz=ls")
        self.assertTrue(done["changed"])
        _, _, done = self.k.exec("set -o noglob")
        self.assertTrue(done["changed"])
        _, _, done = self.k.exec("echo $RANDOM $SECONDS $EPOCHREALTIME $LINENO")
        self.assertFalse(done["changed"])

    def test_changed_after_unchanged_executions(self):
        # Each change comes after executions that changed nothing, so the driver's quick test
        # (the same `declare -p`, `declare -F`, functions and aliases as last time) has passed
        # just before: it must still see every kind of change.
        self.ok("f() { echo one; }; alias a1='echo a'; declare -a arr=(1 2); v=1")
        changes = [
            "f() { echo two; }",  # a function's body, same name
            "alias a1='echo b'",  # an alias's value
            "declare -i n",  # a variable declared without a value
            "arr[5]=x",  # an element
            "declare -x v",  # an attribute only
            "unset v",
            "cd /tmp",
            "shopt -s nullglob",
            "set -o pipefail",
            "unset -f f",
            "unalias a1",
            "HOME=/elsewhere",  # a variable of the start-up baseline
        ]
        for code in changes:
            for _ in range(2):
                _, _, done = self.ok("echo same")
                self.assertFalse(done["changed"], code)
            _, _, done = self.ok(code)
            self.assertTrue(done["changed"], code)
        _, _, done = self.ok("false || :")
        self.assertFalse(done["changed"])
        _, data, _ = self.k.snapshot("s9")
        self.assertIn(b"declare -i n", data)
        self.assertIn(b"/tmp", data)
        self.assertNotIn(b"a1=", data)

    def test_exit(self):
        self.k.send({"op": "exec", "id": "x", "seq": 1, "code": "echo bye; exit 3", "nonce": "0" * 32})
        self.assertEqual(self.k.p.wait(TIMEOUT), 3)

    def test_unknown_op_and_vars(self):
        ev = self.k.request({"op": "frobnicate", "id": "q1"})
        self.assertEqual(ev, {"op": "error", "id": "q1", "error": "unknown op frobnicate"})
        self.ok(
            "s='hello world'; declare -i n=42; arr=(a b c); declare -A m=([x]=1 [y]=2); "
            "export E1=e; f() { echo f; }"
        )
        ev = self.k.request({"op": "vars", "id": "q2"})
        self.assertEqual(ev["op"], "vars")
        self.assertEqual(ev["id"], "q2")
        self.assertEqual(ev["modules"], [])
        v = {x["name"]: x for x in ev["vars"]}
        self.assertEqual(set(v), {"s", "n", "arr", "m", "E1", "f"})
        self.assertEqual(v["s"], {"name": "s", "type": "string", "len": 11, "size": 11, "preview": "hello world"})
        self.assertEqual(v["n"]["type"], "integer")
        self.assertEqual(v["arr"]["type"], "array")
        self.assertEqual(v["arr"]["len"], 3)
        self.assertEqual(v["m"]["type"], "assoc")
        self.assertEqual(v["m"]["len"], 2)
        self.assertEqual(v["f"]["type"], "function")
        self.assertIn("echo f", v["f"]["preview"])

    def test_errors_do_not_kill(self):
        # at a terminal these end the command line, not the shell
        _, err, done = self.k.exec("echo ${undefined_var:?it is unset}; echo not-here")
        self.assertEqual(done["status"], "error")
        self.assertIn("it is unset", err)
        _, err, done = self.k.exec("set -u; echo $undefined_var; echo not-here")
        self.assertEqual(done["status"], "error")
        self.assertIn("unbound variable", err)
        out, err, done = self.k.exec("echo still")
        self.assertEqual(out, "still\n")
        self.assertEqual(err, "")
        self.ok("set +u")
        _, err, done = self.k.exec("if then fi")
        self.assertEqual(done["status"], "error")
        self.assertIn("syntax error", err)
        self.ok("echo ok")

    def test_break_continue_return_at_top_level(self):
        out, _, done = self.k.exec("echo a; break; echo b")
        self.assertEqual(out, "a\n")
        out, _, done = self.k.exec("echo c; continue; echo d")
        self.assertEqual(out, "c\n")
        out, _, done = self.k.exec("echo e; break 5; echo f")
        self.assertEqual(out, "e\n")
        out, _, done = self.k.exec("echo g; return 4; echo h")
        self.assertEqual(out, "g\n")
        self.assertEqual(done["error"]["value"], "4")
        out, _, done = self.ok("for i in 1 2 3; do [[ $i == 2 ]] && break; echo $i; done; echo loop-done")
        self.assertEqual(out, "1\nloop-done\n")

    def test_options_do_not_leak_into_driver(self):
        out, err, done = self.k.exec("set -x; echo traced")
        self.assertEqual(out, "traced\n")
        # commands of a sourced file are traced one level deep, as `source` does at a prompt
        self.assertEqual(err, "++ echo traced\n")
        out, err, done = self.k.exec("echo again")
        self.assertEqual(err, "++ echo again\n")
        self.ok("set +x")
        _, err, _ = self.ok("echo quiet")
        self.assertEqual(err, "")
        # errexit: the failing command ends the shell, as at a terminal prompt
        self.ok("set -e; set -o noclobber; shopt -s nocasematch failglob; IFS=:")
        out, err, done = self.k.exec("[[ -f /nonexistent ]] && echo yes; echo after")
        self.assertEqual(out, "after\n")
        out, _, done = self.ok("[[ ABC == abc ]] && echo nocase; echo \"$-\"")
        self.assertIn("nocase", out)
        self.assertIn("e", out.splitlines()[1])
        _, _, done = self.k.exec("! true")
        self.assertEqual(done["status"], "error")
        self.ok("set +e")

    def test_err_trap_and_dollar_zero(self):
        self.ok("trap 'echo ERR-TRAP' ERR")
        out, _, done = self.k.exec("false")
        self.assertEqual(out, "ERR-TRAP\n")
        out, _, done = self.ok("echo next")
        self.assertEqual(out, "next\n")  # no spurious ERR trap for the previous status
        self.ok("trap - ERR")
        out, _, _ = self.ok("echo $0")
        self.assertEqual(out, "bash\n")

    def test_verbose_lasts_one_execution(self):
        out, err, _ = self.ok("set -v\necho v-on")
        self.assertEqual(out, "v-on\n")
        self.assertIn("echo v-on\n", err)
        out, err, _ = self.ok('echo "$-"')
        self.assertNotIn("v", out)
        self.assertEqual(err, "")

    def test_exec_redirection_and_background(self):
        out, _, done = self.ok("exec 7>/dev/null; echo x >&7; echo visible")
        self.assertEqual(out, "visible\n")
        out, _, done = self.ok("sleep 0.2 & wait; echo waited")
        self.assertEqual(out, "waited\n")

    def test_large_code(self):
        body = "".join("echo line%d '<&>' \\\\ \"é\"\n" % i for i in range(3000))
        out, _, done = self.ok(body)
        self.assertEqual(out.count("\n"), 3000)
        self.assertTrue(out.endswith('line2999 <&> \\ é\n'), out[-100:])

    def test_code_b64(self):
        import base64

        nonce = secrets.token_hex(16)
        code = "echo b64 'é'\n"
        self.k.send({"op": "exec", "id": "b", "seq": 1, "code": code,
                     "code_b64": base64.b64encode(code.encode()).decode(), "nonce": nonce})
        out = self.k.out.take_until(nonce.encode())
        self.k.err.take_until(nonce.encode())
        self.assertEqual(self.k.event()["status"], "ok")
        self.assertEqual(out.decode(), "b64 é\n")

    def test_malformed_request(self):
        self.k.send_raw(b"this is not json\n")
        ev = self.k.event()
        self.assertEqual(ev["op"], "error")
        self.ok("echo fine")


class SnapshotTest(unittest.TestCase):
    def setUp(self):
        self.home = tempfile.mkdtemp(prefix="rtk-home-")

    def tearDown(self):
        subprocess.run(["rm", "-rf", self.home])

    def kernel(self, **kw):
        return Kernel(home=self.home, **kw)

    SETUP = r"""
mkdir -p "$HOME/wd dir"; cd "$HOME/wd dir"
S='multi
line $x `y` \ "q" é 😀'
declare -i I=7
A=(1 "two words" $'tab\there')
declare -A M=([one]=1 ['two words']=2 [$'nl\nkey']=3)
export EXP=exported-value
declare -r RO=readonly-value
declare -l LOW=MiXeD
f() { echo "f:$S" | head -1; }
g() { local -a x=(1 2); [[ ${x[1]} == +(2) ]] && echo g-extglob; }
export -f f
alias ll='echo ll-alias'
shopt -s extglob nullglob
set -o pipefail
set -o noclobber
unset PAGER
"""

    CHECK = r"""
pwd
printf '%s\n' "$S"
echo "I=$I $((I*2))"
echo "${#A[@]} ${A[1]} ${A[2]}"
for k in one 'two words' $'nl\nkey'; do printf '[%s]=%s ' "$k" "${M[$k]}"; done; echo
bash -c 'echo "child sees $EXP"; f'
echo "RO=$RO"; (RO=x) 2>/dev/null || echo ro-still
echo "$LOW"
f; g
ll
shopt -q extglob && shopt -q nullglob && echo shopts-on
[[ -o pipefail && -o noclobber ]] && echo sets-on
echo "PAGER=${PAGER-unset}"
"""

    def test_snapshot_restore(self):
        k = self.kernel()
        try:
            out, err, done = k.exec(self.SETUP)
            self.assertEqual(done["status"], "ok", (out, err))
            expected, err, done = k.exec(self.CHECK)
            self.assertEqual(err, "")
            started, data, manifest = k.snapshot("snap-1")
            self.assertEqual(started, {"op": "snapshot_started", "id": "snap-1", "pid": k.p.pid})
            self.assertTrue(manifest["ok"])
            self.assertIsNone(manifest["error"])
            self.assertEqual(manifest["id"], "snap-1")
            self.assertEqual(manifest["format"], "bash-state-v1")
            self.assertEqual(manifest["skipped"], [])
            self.assertRegex(manifest["info"]["interpreter"], r"^bash \d")
            for name in ("S", "I", "A", "M", "EXP", "RO", "LOW", "f", "g"):
                self.assertIn(name, manifest["kept"])
            for name in manifest["kept"]:
                self.assertFalse(name.startswith("__rt_"), name)
                self.assertNotIn(name, ("BASH_VERSINFO", "RANDOM", "PPID", "_", "HOSTNAME"))
            self.assertNotIn(b"__rt_", data.replace(b"__rt_cwd_failed", b""))
            # snapshot twice in a row: same bytes, kernel still fine
            _, data2, _ = k.snapshot("snap-2")
            self.assertEqual(data, data2)
            k.exec("echo still")
        finally:
            k.close()
        k2 = self.kernel(restore_data=data)
        try:
            self.assertEqual(k2.ready["failed"], [])
            self.assertEqual(sorted(k2.ready["restored"]), sorted(manifest["kept"]))
            out, err, done = k2.exec(self.CHECK)
            self.assertEqual(err, "")
            self.assertEqual(out, expected)
            self.assertIn("wd dir", out.splitlines()[0])
            self.assertIn("child sees exported-value", out)
            self.assertIn("PAGER=unset", out)
            # the restored state is the same state: no change reported
            _, _, done = k2.exec("echo hi")
            self.assertFalse(done["changed"])
            _, data3, _ = k2.snapshot("snap-3")
            self.assertEqual(data3, data)
        finally:
            k2.close()

    def test_restore_aliases_functions_options(self):
        k = self.kernel()
        try:
            k.exec("alias echo='echo E'")
            k.exec("h() { echo hi; }; shopt -s extglob")
            k.exec("g() { [[ abc == +([a-c]) ]] && echo ext; }; shopt -u extglob")
            k.exec("my-func.x() { echo odd-name; }; declare -n REF=TARGET; TARGET=t1; set -o posix")
            expected, err, _ = k.exec("h; g; my-func.x; echo $REF; shopt -q extglob || echo extglob-off; set -o | grep -w posix")
            self.assertEqual(err, "")
            _, data, manifest = k.snapshot()
        finally:
            k.close()
        self.assertIn("REF", manifest["kept"])
        k2 = self.kernel(restore_data=data)
        try:
            self.assertEqual(k2.ready["failed"], [])
            out, err, _ = k2.exec("h; g; my-func.x; echo $REF; shopt -q extglob || echo extglob-off; set -o | grep -w posix")
            self.assertEqual((out, err), (expected, ""))
            self.assertEqual(out.splitlines()[0], "E hi")
        finally:
            k2.close()

    def test_restore_errexit_xtrace_state(self):
        k = self.kernel()
        try:
            k.exec("set -eux; Z=1")
            _, data, _ = k.snapshot()
        finally:
            k.close()
        k2 = self.kernel(restore_data=data)
        try:
            out, err, done = k2.exec("echo $Z")
            self.assertEqual(out, "1\n")
            self.assertEqual(err, "++ echo 1\n")
            self.assertEqual(k2.ready["failed"], [])
        finally:
            k2.close()

    def test_restore_missing_cwd(self):
        d = tempfile.mkdtemp(prefix="rtk-gone-")
        k = self.kernel()
        try:
            k.exec("cd %s; W=1" % d)
            _, data, _ = k.snapshot()
        finally:
            k.close()
        os.rmdir(d)
        k2 = self.kernel(restore_data=data)
        try:
            self.assertEqual([f["name"] for f in k2.ready["failed"]], ["cwd"])
            out, _, _ = k2.exec("echo $W")
            self.assertEqual(out, "1\n")
        finally:
            k2.close()

    def test_restore_garbage(self):
        k = self.kernel(restore_data=b"\x80\x01 not a snapshot")
        try:
            self.assertEqual(k.ready["restored"], [])
            self.assertEqual(len(k.ready["failed"]), 1)
            out, _, _ = k.exec("echo ok")
            self.assertEqual(out, "ok\n")
        finally:
            k.close()

    def test_snapshot_large(self):
        k = self.kernel()
        try:
            k.exec("big=(); for ((i=0;i<20000;i++)); do big+=(\"item $i\"); done; s=$(head -c 300000 /dev/zero | tr '\\0' x)")
            _, data, manifest = k.snapshot()
            self.assertGreater(len(data), 300000)
        finally:
            k.close()
        k2 = self.kernel(restore_data=data)
        try:
            out, _, _ = k2.exec("echo ${#big[@]} ${big[19999]} ${#s}")
            self.assertEqual(out, "20000 item 19999 300000\n")
        finally:
            k2.close()


if __name__ == "__main__":
    unittest.main(verbosity=2)

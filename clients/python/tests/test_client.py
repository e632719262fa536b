"""The client against a real `runtimectl serve` and real sessions."""

import asyncio
import os
import subprocess
import sys
import threading

import pytest

from runtimectl import (AsyncClient, Busy, Client, Conflict, HistoryRecord, InvalidRequest, RestoreInfo,
                        RuntimeUnavailable, SessionNotFound, Snapshot, Unauthorized, Vars)


def test_the_issue_snippet_runs_as_written(serve, name):
    client = serve.client()
    s = client.start(name, lang="python")
    printed = []
    ex = s.run("import pandas as pd\ndf = pd.DataFrame({'a': [1, 2, 3]})\nprint('built')\ndf.a.sum()",
               timeout=30, on_stdout=printed.append)
    assert (ex.result, ex.status, ex.stdout, ex.stderr, ex.seq) == ("6", "ok", "built\n", "", 1)
    assert "".join(printed) == "built\n"
    assert ex.error is None
    assert ex.outputs == []
    v = s.vars()
    assert isinstance(v, Vars) and "df" in v.names and v.find("df").type == "DataFrame"
    ctx = s.context(max_chars=2000)
    assert "df" in ctx and len(ctx) <= 2000
    hist = s.history(last=5)
    assert [h.seq for h in hist] == [1] and isinstance(hist[0], HistoryRecord) and hist[0].result == "6"
    snap = s.snapshot()
    assert isinstance(snap, Snapshot) and "df" in snap.kept
    s.run("later = 1")
    assert any(x.id == snap.id and x.created is not None for x in s.snapshots())
    r = s.restore(snap.id)
    assert isinstance(r, RestoreInfo) and "df" in r.restored
    assert s.run("'later' in globals()").result == "False"
    assert s.interrupt() is False
    s.write_file("data.csv", b"a,b\n1,2\n")
    assert s.run("open('data.csv').read()").result == repr("a,b\n1,2\n")
    s.run("import os\nos.makedirs('out', exist_ok=True)\nopen('out/report.md', 'w').write('# report\\n')")
    assert s.read_file("out/report.md") == b"# report\n"
    assert name in [x.name for x in client.list()]
    assert client.get(name).name == name
    s.stop()
    assert client.get(name).info().state == "exited"
    assert s.run("int(df.a.sum())").result == "6", "a stopped session comes back with its state"
    s.remove()
    with pytest.raises(SessionNotFound):
        client.get(name)


def test_errors_timeouts_and_rich_outputs(serve, name):
    s = serve.client().start(name)
    ex = s.run("x = 1\n1/0")
    assert ex.status == "error" and not ex.ok
    assert ex.error is not None and ex.error.name == "ZeroDivisionError"
    assert "1/0" in ex.error.traceback
    ex = s.run("while True: pass", timeout=1)
    assert ex.status == "timeout"
    assert s.run("x").result == "1", "the state survives the timeout"
    ex = s.run("import matplotlib.pyplot as plt\nplt.plot([1, 2, 3])")
    assert len(ex.outputs) == 1
    assert ex.outputs[0].mime == "image/png" and ex.outputs[0].path.endswith(".png")
    assert ex.outputs[0].data.startswith(b"\x89PNG") and ex.png() == ex.outputs[0].data


def test_streaming_callbacks_come_in_order_before_run_returns(serve, name):
    s = serve.client().start(name)
    seen = []
    code = ("import sys, time\nfor i in range(20):\n    print(i, flush=True)\n"
            "    sys.stderr.write('e%d\\n' % i); sys.stderr.flush()\n    time.sleep(0.01)\n")
    ex = s.run(code, on_stdout=lambda t: seen.append(("out", t)), on_stderr=lambda t: seen.append(("err", t)))
    out = "".join(t for k, t in seen if k == "out")
    err = "".join(t for k, t in seen if k == "err")
    assert out == "".join("%d\n" % i for i in range(20)) == ex.stdout
    assert err == "".join("e%d\n" % i for i in range(20)) == ex.stderr
    text = "€ und ü " * 5000
    got = []
    ex = s.run("print(%r)" % text, on_stdout=got.append)
    assert "".join(got) == text + "\n", "multi-byte characters split across chunks arrive whole"


def test_tokens_scope_what_a_client_sees(serve, name):
    alice, bob, admin = serve.client("alice"), serve.client("bob"), serve.client("ops")
    alice.start(name).run("secret = 42")
    assert name not in [x.name for x in bob.list()]
    with pytest.raises(SessionNotFound):
        bob.get(name)
    with pytest.raises(SessionNotFound) as e:
        bob.get("py-no-such-session")
    assert "POST /v1/sessions" in str(e.value), "the server's message reaches the exception"
    with pytest.raises(Conflict):
        bob.start(name)
    assert admin.get(name).run("secret").result == "42"
    with pytest.raises(Unauthorized):
        Client(serve.url, "not-a-token").list()
    with pytest.raises(Unauthorized):
        Client(serve.url, "").list()
    with pytest.raises(InvalidRequest):
        alice.start("Bad Name")


def test_the_token_cap_on_concurrent_executions_is_busy(tmp_path, names):
    from conftest import Serve
    srv = Serve(str(tmp_path), "--max-execs", "1")
    try:
        c = srv.client()
        n = "py-busy-" + os.urandom(3).hex()
        names.append(n)
        s = c.start(n)
        started = threading.Event()
        t = threading.Thread(target=lambda: s.run("import time\nprint('go', flush=True)\ntime.sleep(3)",
                                                  on_stdout=lambda _: started.set()))
        t.start()
        assert started.wait(60)
        with pytest.raises(Busy) as e:
            srv.client().get(n).run("1")
        assert "wait for one to end" in str(e.value)
        t.join()
        assert s.run("1 + 1").result == "2"
        srv.client("ops").get(n).remove()
    finally:
        srv.stop()


def test_an_unreachable_server_is_runtime_unavailable():
    with pytest.raises(RuntimeUnavailable) as e:
        Client("http://127.0.0.1:9", "x" * 20).list()
    assert "runtimectl serve" in str(e.value)


def test_client_side_timeout(serve, name):
    s = serve.client(grace=0.5).start(name)
    with pytest.raises(TimeoutError):
        # Code that blocks SIGINT in C: the session kills it 2 s after its timeout; the client
        # stops waiting 0.5 s after it.
        s.run("import ctypes, signal\nsignal.pthread_sigmask(signal.SIG_BLOCK, [signal.SIGINT])\nctypes.CDLL(None).sleep(100)",
              timeout=0.5)
    s2 = serve.client().get(name)
    assert s2.run("1 + 1").result == "2", "the session is usable after it"


def test_folders_in_and_out(serve, name, tmp_path):
    s = serve.client().start(name)
    src = tmp_path / "src"
    (src / "sub").mkdir(parents=True)
    (src / "a.txt").write_text("A")
    (src / "sub" / "b.txt").write_text("B")
    s.write_dir("data", str(src))
    assert s.run("open('data/sub/b.txt').read()").result == "'B'"
    got = s.read_dir("data", str(tmp_path / "back"))
    assert sorted(got) == ["data/a.txt", "data/sub/b.txt"]
    assert (tmp_path / "back" / "data" / "sub" / "b.txt").read_text() == "B"
    exported = s.remove(keep=["*.txt"], keep_history=True, export_to=str(tmp_path / "export"))
    assert "history.json" in exported and "data/a.txt" in exported


def test_async_client(serve, name):
    async def main():
        async with AsyncClient(serve.url, serve.tokens["alice"]) as client:
            s = await client.start(name, lang="python")
            chunks = []
            ex = await s.run("for i in range(3): print(i)\n40 + 2", on_stdout=chunks.append)
            assert (ex.result, ex.status) == ("42", "ok")
            assert "".join(chunks) == "0\n1\n2\n"
            seen = []

            async def slow(text):
                await asyncio.sleep(0.01)
                seen.append(text)

            await s.run("print('async callback')", on_stdout=slow)
            assert "".join(seen) == "async callback\n"
            assert "i" in (await s.vars()).names
            assert name in [x.name for x in await client.list()]
            got = await client.get(name)
            results = await asyncio.gather(*(got.run("%d * 2" % i) for i in range(5)))
            assert [r.result for r in results] == [str(i * 2) for i in range(5)]
            await s.stop()

    asyncio.run(main())


def test_the_executor_snippet_resumes_in_a_new_process(serve, name):
    env = dict(os.environ, RUNTIMECTL_URL=serve.url, RUNTIMECTL_TOKEN=serve.tokens["alice"],
               PYTHONPATH=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    first = """
import asyncio
from runtimectl.executors import PyExecutor
async def main():
    ex = PyExecutor(%r)
    out, ok = await ex.run("a=1\\nb=2\\nc=3\\nprint(f'a={a}')")
    print(repr(out), ok)
    await ex.terminate()
asyncio.run(main())
""" % name
    second = """
import asyncio
from runtimectl.executors import PyExecutor
async def main():
    ex = PyExecutor(%r)
    out, ok = await ex.run("d=a+b+c\\nprint(f'd={d}')")
    print(repr(out), ok)
asyncio.run(main())
""" % name
    out1 = subprocess.run([sys.executable, "-c", first], env=env, capture_output=True, text=True, timeout=300)
    assert out1.stdout.strip() == "'a=1\\n' True", out1.stderr
    assert serve.client().get(name).info().state == "exited", "terminate stops the session"
    out2 = subprocess.run([sys.executable, "-c", second], env=env, capture_output=True, text=True, timeout=300)
    assert out2.stdout.strip() == "'d=6\\n' True", out2.stderr
    hist = serve.client().get(name).history()
    assert len(hist) == 2, "nothing was re-run"


def test_bash_executor(serve, name):
    from runtimectl.executors import BashExecutor

    async def main():
        ex = BashExecutor(name, client=AsyncClient(serve.url, serve.tokens["alice"]))
        out, ok = await ex.run("cd /tmp; X=41; f() { echo $((X+1)); }")
        assert ok, out
        out, ok = await ex.run("pwd; f")
        assert (out, ok) == ("/tmp\n42\n", True)
        out, ok = await ex.run("false")
        assert not ok
        await ex.terminate()

    asyncio.run(main())


def _wheel(path, name, value):
    """A pure-Python wheel of one module whose VALUE is value."""
    import base64
    import hashlib
    import zipfile
    files = {
        "%s/__init__.py" % name: "VALUE = %d\n" % value,
        "%s-1.0.dist-info/METADATA" % name: "Metadata-Version: 2.1\nName: %s\nVersion: 1.0\n" % name,
        "%s-1.0.dist-info/WHEEL" % name: "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
    }
    record = []
    with zipfile.ZipFile(path, "w") as z:
        for p, c in files.items():
            z.writestr(p, c)
            digest = base64.urlsafe_b64encode(hashlib.sha256(c.encode()).digest()).rstrip(b"=").decode()
            record.append("%s,sha256=%s,%d" % (p, digest, len(c)))
        rec = "%s-1.0.dist-info/RECORD" % name
        record.append("%s,," % rec)
        z.writestr(rec, "\n".join(record) + "\n")


def test_install_from_a_local_index(serve, name, tmp_path):
    """Session.install from an index on this host (reached from the installer container
    through the engine's bridge): importable at once, and by %pip in code when the index is the
    server's (--install-index); a cell's %pip naming an index of its own is refused."""
    from conftest import Serve
    import http.server
    import json as _json
    out = subprocess.run(["docker", "network", "inspect", "bridge", "-f", "{{json .IPAM.Config}}"],
                         capture_output=True, text=True, check=True).stdout
    cfg = _json.loads(out)[0]
    gw = cfg.get("Gateway") or ".".join(cfg["Subnet"].split("/")[0].split(".")[:3] + ["1"])
    root = tmp_path / "index"
    for pkg, value in (("pyonepkg", 5), ("pytwopkg", 6)):
        (root / "simple" / pkg).mkdir(parents=True)
        _wheel(str(root / ("%s-1.0-py3-none-any.whl" % pkg)), pkg, value)
        (root / "simple" / pkg / "index.html").write_text(
            '<a href="/%s-1.0-py3-none-any.whl">%s-1.0-py3-none-any.whl</a>' % (pkg, pkg))
    handler = lambda *a, **k: http.server.SimpleHTTPRequestHandler(*a, directory=str(root), **k)  # noqa: E731
    httpd = http.server.ThreadingHTTPServer(("0.0.0.0", 0), handler)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    try:
        index = "http://%s:%d/simple" % (gw, httpd.server_address[1])
        s = serve.client().start(name)
        out = s.install("pyonepkg", index_url=index, trusted_hosts=[gw])
        assert "Successfully installed pyonepkg-1.0" in out
        assert s.run("import pyonepkg\npyonepkg.VALUE").result == "5"
        cell = "%%pip install pytwopkg --index-url %s --trusted-host %s\nimport pytwopkg\npytwopkg.VALUE" % (index, gw)
        with pytest.raises(InvalidRequest) as e:
            s.run(cell)
        assert "index host %s:%d in a %%pip line" % (gw, httpd.server_address[1]) in str(e.value)
        assert s.run("import importlib.util\nimportlib.util.find_spec('pytwopkg') is None").result == "True"
        with pytest.raises(InvalidRequest):
            s.install()
        srv = Serve(str(tmp_path), "--install-index", index, "--install-trusted-host", gw)
        try:
            ex = srv.client().get(name).run(cell)
            assert ex.result == "6", ex.stderr
        finally:
            srv.stop()
    finally:
        httpd.shutdown()


def test_run_with_env_and_workdir_for_one_execution(serve, name):
    s = serve.client().start(name)
    s.run("import os; os.makedirs('/workspace/sub', exist_ok=True)")
    ex = s.run("import os; print(os.environ.get('RT_X'), os.getcwd())", env={"RT_X": "1"}, workdir="sub")
    assert ex.stdout == "1 /workspace/sub\n", ex.stderr
    assert s.run("import os; print(os.environ.get('RT_X'), os.getcwd())").stdout == "None /workspace\n"

"""Typed replies and the native asyncio client against a real `runtimectl serve`."""

import asyncio
import concurrent.futures
import time

import pytest

from runtimectl import AsyncClient, SessionInfo, StartInfo


def test_start_info_and_the_old_dict_access(serve, name):
    c = serve.client()
    s = c.start(name)
    assert isinstance(s.info_at_open, StartInfo) and s.info_at_open.new and s.info_at_open.lang == "python"
    s.run("x = [1, 2, 3]\nimport matplotlib.pyplot as plt\nplt.plot(x)")
    s.stop()
    again = c.start(name)
    st = again.info_at_open
    assert st.started and not st.new and st.restored is not None and "x" in st.restored.restored
    info = again.info()
    assert isinstance(info, SessionInfo) and info.state == "running" and info.executions == 1
    assert info.created is not None and info.created.tzinfo is not None and info.owner == "alice"
    # 0.1's dict access, unchanged in what it gives, with a DeprecationWarning.
    with pytest.warns(DeprecationWarning):
        assert info["state"] == "running"
    with pytest.warns(DeprecationWarning):
        assert "x" in [v["name"] for v in again.vars()["vars"]]
    with pytest.warns(DeprecationWarning):
        assert [h["seq"] for h in again.history()] == [1]
    with pytest.warns(DeprecationWarning):
        assert "x" in again.snapshot()["kept"]
    with pytest.warns(DeprecationWarning):
        assert name in [x["name"] for x in c.list()]
    with pytest.warns(DeprecationWarning):
        out = again.history()[0].outputs[0]
        assert out["mime"] == "image/png" and out["path"].endswith(".png")


class NoThreads(concurrent.futures.ThreadPoolExecutor):
    def submit(self, *a, **k):
        raise AssertionError("the asyncio client used a thread")


def test_the_async_client_is_native(serve, name):
    """No thread (the loop's default executor fails when used), executions at once on one
    client, a cancelled run goes on in the session, interrupt stops code."""
    async def main():
        asyncio.get_running_loop().set_default_executor(NoThreads())
        async with AsyncClient(serve.url, serve.tokens["alice"]) as c:
            s = await c.start(name)
            assert s.info_at_open.new
            t0 = time.monotonic()
            res = await asyncio.gather(*(s.run("import time\ntime.sleep(0.5)\n%d" % i) for i in range(3)))
            assert [r.result for r in res] == ["0", "1", "2"]
            assert time.monotonic() - t0 >= 1.5, "a session runs one execution at a time, in order"
            started = asyncio.Event()
            task = asyncio.ensure_future(s.run("import time\nprint('go', flush=True)\ntime.sleep(2)\ndone = 1",
                                               on_stdout=lambda _: started.set()))
            await asyncio.wait_for(started.wait(), 60)
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
            ex = await s.run("done")
            assert ex.result == "1", "the cancelled run went on in the session"
            hist = await s.history()
            assert [h.status for h in hist][-2:] == ["ok", "ok"]
            started.clear()
            task = asyncio.ensure_future(s.run("import time\nprint('go', flush=True)\ntime.sleep(60)",
                                               on_stdout=lambda _: started.set()))
            await asyncio.wait_for(started.wait(), 60)
            assert await s.interrupt()
            ex = await asyncio.wait_for(task, 30)
            assert ex.status == "interrupted"
            assert (await c.get(name)).info_at_open.state == "running"
            await s.remove()

    asyncio.run(main())

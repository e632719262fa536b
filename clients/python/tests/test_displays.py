"""Displays (issue 23's mime bundles) through a real `runtimectl serve`: typed, in order among
the output, updates and clears applied, the same in the history, sync and async."""

import asyncio

import pytest

from runtimectl import AsyncClient, Display

CODE = """from IPython.display import display, HTML, Markdown
print('before', flush=True)
h = display(HTML('<b>x</b>'), display_id=True)
print('after', flush=True)
h.update(Markdown('# done'))
import matplotlib.pyplot as plt
plt.plot([1, 2, 3]); plt.show()
{'a': 1}"""


def needs_ipython(ex):
    """Skips where the session's kernel has no IPython (before issue 23's kernel): its displays
    are what this tests."""
    if ex.status == "error" and ex.error is not None and ex.error.name in ("ModuleNotFoundError", "ImportError"):
        pytest.skip("the session's Python has no IPython: no displays to test (%s)" % ex.error)


def check(ex, events):
    assert ex.status == "ok", ex.stderr
    kinds = [d.kind for d in ex.displays]
    assert kinds == ["display_data", "update_display_data", "display_data", "execute_result"], ex.displays
    html, upd, fig, value = ex.displays
    assert all(isinstance(d, Display) for d in ex.displays)
    assert html.html() == "<b>x</b>" and html.display_id and upd.display_id == html.display_id
    assert html.stdout_pos == len("before\n"), "where it came among stdout"
    assert upd.markdown() == "# done"
    assert fig.png().startswith(b"\x89PNG") and fig.text().startswith("<Figure")
    assert value.text() == "{'a': 1}" and ex.result_display is value and ex.result == "{'a': 1}"
    assert [d.main_mime for d in ex.shown] == ["text/markdown", "image/png", "text/plain"], "the update in place"
    assert ex.png() == fig.png() and ex.images == [fig.png()]
    bundle, meta = fig._repr_mimebundle_()
    assert bundle["image/png"] == fig.png() and isinstance(meta, dict)
    merged = []  # stdout may come in several chunks between two displays
    for e in events:
        if merged and e.startswith("out:") and merged[-1].startswith("out:"):
            merged[-1] += e[4:]
        else:
            merged.append(e)
    assert merged == ["out:before\n", "display:display_data", "out:after\n", "display:update_display_data",
                      "display:display_data", "display:execute_result"], events


def test_displays_in_a_result_and_its_history(serve, name):
    s = serve.client().start(name)
    needs_ipython(s.run("import IPython"))
    events = []
    ex = s.run(CODE, on_stdout=lambda t: events.append("out:" + t),
               on_display=lambda d: events.append("display:" + d.kind))
    check(ex, events)
    rec = s.history()[-1]
    assert [d.kind for d in rec.displays] == [d.kind for d in ex.displays], "the history keeps them"
    assert rec.displays[2].png() == ex.displays[2].png() and rec.png() == ex.png()


def test_displays_with_the_async_client(serve, name):
    async def main():
        async with AsyncClient(serve.url, serve.tokens["alice"]) as c:
            s = await c.start(name)
            needs_ipython(await s.run("import IPython"))
            events = []

            async def on_display(d):
                await asyncio.sleep(0)
                events.append("display:" + d.kind)

            ex = await s.run(CODE, on_stdout=lambda t: events.append("out:" + t), on_display=on_display)
            check(ex, events)

    asyncio.run(main())

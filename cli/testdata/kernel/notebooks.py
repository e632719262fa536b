"""Notebooks run by `jupyter nbconvert --execute` with the runtimectl kernel and with ipykernel,
their outputs compared cell by cell (driven by cli/kernel_test.go).

  python3 notebooks.py OUTDIR NAME...   writes and runs the notebooks NAME (see NOTEBOOKS)
Environment: KERNEL (the runtimectl kernel's name), SESSIONS (comma-separated session names, one
per notebook, in order), RUNTIMECTL (the binary, for STOP_EACH: a `session stop` before every
cell, run through nbclient), REFERENCE (default python3: ipykernel).

Every cell's outputs must match: the same output types in the same order, streams by name, the
same mime types in each display_data and execute_result; and the same text (streams, with
ipykernel's \r\n of !cmd as \n; text/plain, text/html...) unless the cell's metadata says "runtimectl": {"compare": "types"}
(addresses, timings, sizes of figures). Prints one line per notebook, then 'N passed, N failed'.
"""
import os
import subprocess
import sys

import nbformat
from nbformat.v4 import new_code_cell, new_notebook

TYPES = {"runtimectl": {"compare": "types"}}


def code(src, compare="text"):
    return new_code_cell(src, metadata=TYPES if compare == "types" else {})


NOTEBOOKS = {
    "basics": [
        code("print('hello')\nx = 40 + 2"),
        code("x"),
        code("import sys\nprint('to stderr', file=sys.stderr)\nprint('to stdout')"),
        code("def f(n):\n    return [i * i for i in range(n)]\nf(5)"),
        code("{'a': 1, 'b': [1, 2, 3]}"),
        code("None"),
        code("y = 3;"),
        code("print(y)"),
    ],
    "display": [
        code("from IPython.display import display, HTML, Markdown, JSON, Latex, SVG\ndisplay(HTML('<b>bold</b>'))"),
        code("display(Markdown('# Title'))\nprint('after')"),
        code("HTML('<i>value</i>')"),
        code("display({'a': 1}, 'text')"),
        code("class Rich:\n    def _repr_html_(self):\n        return '<p>rich</p>'\n    def __repr__(self):\n        return 'Rich()'\nRich()"),
        code("Latex(r'$x^2$')"),
        code("SVG('<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"10\" height=\"10\"></svg>')"),
    ],
    "magics": [
        code("%%writefile hello.txt\nhello from a cell"),
        code("print(open('hello.txt').read())"),
        code("%time z = sum(range(1000))", compare="types"),
        code("z"),
        code("!echo from the shell"),
        code("%%capture cap\nprint('captured')"),
        code("cap.stdout"),
        code("_"),
        code("%timeit -n 3 -r 2 sum(range(100))", compare="types"),
        code("%%time\nw = 2 * 3", compare="types"),
        code("%who"),
        code("%whos", compare="types"),
        code("%env RUNTIMECTL_NB=1"),
        code("%env RUNTIMECTL_NB"),
        code("%pwd", compare="types"),
        code("%%bash\necho from bash\necho to stderr >&2"),
        code("%%writefile script.py\nprint('ran', __name__)\nscript_var = 5"),
        code("%run script.py"),
        code("script_var"),
        code("%load_ext autoreload\n%autoreload 2"),
        code("In[2]"),
        code("In[1]"),
        code("Out[4]"),
        code("def double(n):\n    'Doubles n.'\n    return 2 * n\ndouble?"),
        code("double??"),
        code("__"),
        code("%%timeit -n 2 -r 1\nsum(range(10))", compare="types"),
        code("import os\nos.makedirs('sub', exist_ok=True)"),
        code("%cd sub", compare="types"),
        code("os.path.basename(os.getcwd()), os.environ['RUNTIMECTL_NB']"),
        code("%matplotlib inline\nimport matplotlib.pyplot as plt\nplt.plot([1, 2]);", compare="types"),
    ],
    "pandas": [
        code("import pandas as pd\ndf = pd.DataFrame({'a': [1, 2, 3], 'b': [4.5, 5.5, 6.5]})\ndf"),
        code("df.describe()"),
        code("df['a'].sum()"),
        code("print(df.to_string())"),
    ],
    "figure": [
        code("import matplotlib.pyplot as plt"),
        code("plt.plot([1, 2, 3], [4, 1, 2])\nplt.title('line')\nplt.show()", compare="types"),
        code("fig, ax = plt.subplots()\nax.bar(['a', 'b'], [1, 2]);", compare="types"),
    ],
}


def write(path, cells):
    nb = new_notebook(cells=cells)
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    with open(path, "w") as f:
        nbformat.write(nb, f)


def execute(src, dst, kernel, env):
    cmd = [sys.executable, "-m", "nbconvert", "--to", "notebook", "--execute",
           "--ExecutePreprocessor.kernel_name=" + kernel, "--ExecutePreprocessor.timeout=300",
           "--allow-errors", "--output", os.path.abspath(dst), src]
    r = subprocess.run(cmd, env=env, capture_output=True, text=True, cwd=os.path.dirname(src), timeout=600)
    if r.returncode != 0:
        raise RuntimeError("nbconvert with %s failed (%d): %s" % (kernel, r.returncode, r.stderr[-3000:]))
    with open(dst) as f:
        return nbformat.read(f, as_version=4)


def execute_stopping(src, dst, kernel, env, session, runtimectl):
    """Runs src with nbclient, stopping the session before every cell."""
    import nbclient

    class Stopping(nbclient.NotebookClient):
        async def async_execute_cell(self, cell, cell_index, **kw):
            if cell_index > 0:
                subprocess.run([runtimectl, "session", "stop", session], env=env, check=True,
                               capture_output=True)
            return await super().async_execute_cell(cell, cell_index, **kw)

    with open(src) as f:
        nb = nbformat.read(f, as_version=4)
    old = dict(os.environ)
    os.environ.clear()
    os.environ.update(env)
    try:
        Stopping(nb, kernel_name=kernel, timeout=300, allow_errors=True,
                 resources={"metadata": {"path": os.path.dirname(src)}}).execute()
    finally:
        os.environ.clear()
        os.environ.update(old)
    with open(dst, "w") as f:
        nbformat.write(nb, f)
    return nb


def stream_text(text):
    """ipykernel runs !cmd under a pseudo-terminal (pexpect), whose line discipline ends each
    line with \r\n; runtimectl runs it on the code's own pipes. Only that is normalized."""
    return text.replace("\r\n", "\n")


def shape(output):
    t = output["output_type"]
    if t == "stream":
        return (t, output["name"])
    if t in ("display_data", "execute_result"):
        return (t, tuple(sorted(output["data"])))
    if t == "error":
        return (t, output["ename"])
    return (t,)


def texts(output):
    t = output["output_type"]
    if t == "stream":
        return {"text": stream_text(output["text"])}
    if t in ("display_data", "execute_result"):
        return {k: v for k, v in output["data"].items() if k in ("text/plain", "text/html", "text/markdown", "text/latex", "image/svg+xml", "application/json")}
    return {}


def merged(outputs):
    """A run of stream outputs is one per name, stdout first: ipykernel buffers its streams and
    flushes stdout before stderr, so their order within a cell is its own, not the code's."""
    out, run = [], {}

    def end_run():
        for name in ("stdout", "stderr"):
            if name in run:
                out.append({"output_type": "stream", "name": name, "text": run[name]})
        run.clear()

    for o in outputs:
        if o["output_type"] == "stream":
            run[o["name"]] = run.get(o["name"], "") + o["text"]
        else:
            end_run()
            out.append(dict(o))
    end_run()
    return out


def compare(ours, ref):
    problems = []
    for i, (a, b) in enumerate(zip(ours.cells, ref.cells)):
        if a.cell_type != "code":
            continue
        oa, ob = merged(a.outputs), merged(b.outputs)
        sa, sb = [shape(o) for o in oa], [shape(o) for o in ob]
        if sa != sb:
            problems.append("cell %d %r: outputs %s, ipykernel's %s" % (i, a.source[:40], sa, sb))
            continue
        if (a.metadata.get("runtimectl") or {}).get("compare") == "types":
            continue
        for x, y in zip(oa, ob):
            if texts(x) != texts(y):
                problems.append("cell %d %r: %r, ipykernel's %r" % (i, a.source[:40], texts(x), texts(y)))
    return problems


def main():
    outdir, names = sys.argv[1], sys.argv[2:]
    kernel = os.environ.get("KERNEL", "runtimectl-python")
    reference = os.environ.get("REFERENCE", "python3")
    sessions = os.environ.get("SESSIONS", "").split(",")
    passed = failed = 0
    for i, name in enumerate(names):
        stop_each = name.endswith("+stop")
        base = name.removesuffix("+stop")
        d = os.path.join(outdir, name)
        os.makedirs(d, exist_ok=True)
        src = os.path.join(d, base + ".ipynb")
        write(src, NOTEBOOKS[base])
        env = dict(os.environ)
        env["RUNTIMECTL_SESSION"] = sessions[i]
        try:
            ref = execute(src, os.path.join(d, base + ".ipykernel.ipynb"), reference, dict(os.environ))
            if stop_each:
                ours = execute_stopping(src, os.path.join(d, base + ".runtimectl.ipynb"), kernel, env, sessions[i], os.environ["RUNTIMECTL"])
            else:
                ours = execute(src, os.path.join(d, base + ".runtimectl.ipynb"), kernel, env)
            problems = compare(ours, ref)
        except Exception as e:  # a notebook that did not run is a failure, said as such
            problems = ["did not run: %s" % e]
        if problems:
            failed += 1
            print("FAIL %s" % name)
            for p in problems:
                print("  " + p)
        else:
            passed += 1
            print("ok   %s (%d cells)" % (name, len(NOTEBOOKS[base])))
    print("%d passed, %d failed" % (passed, failed))
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()

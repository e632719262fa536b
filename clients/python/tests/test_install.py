"""The package installs with pip and no package index (its build backend is in the tree)."""

import os
import subprocess
import sys

PKG = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_pip_installs_the_package_without_an_index(tmp_path):
    target = tmp_path / "site"
    out = subprocess.run([sys.executable, "-m", "pip", "install", "--no-index", "--no-cache-dir", "--target", str(target), PKG],
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stdout + out.stderr
    assert (target / "runtimectl" / "py.typed").exists(), "typed"
    check = subprocess.run([sys.executable, "-c", "import runtimectl, runtimectl.executors; print(runtimectl.__file__)"],
                           env=dict(os.environ, PYTHONPATH=str(target)), capture_output=True, text=True, cwd=str(tmp_path))
    assert check.returncode == 0, check.stderr
    assert check.stdout.startswith(str(target))

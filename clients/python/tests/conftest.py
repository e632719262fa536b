"""Fixtures: a real `runtimectl serve` (the binary of this tree, bin/runtimectl or
$RUNTIMECTL_BIN) on loopback with three tokens, and sessions removed after each test."""

import os
import re
import secrets
import subprocess
import sys
import threading
from typing import Dict, Iterator, List

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
PKG = os.path.dirname(HERE)
REPO = os.path.dirname(os.path.dirname(PKG))
sys.path.insert(0, PKG)
sys.path.insert(0, os.path.join(REPO, "examples"))

from runtimectl import Client  # noqa: E402


class Serve:
    """`runtimectl serve` as a child process."""

    def __init__(self, tmp: str, *extra: str) -> None:
        self.tokens: Dict[str, str] = {n: secrets.token_hex(16) for n in ("alice", "bob", "ops")}
        self.token_file = os.path.join(tmp, "tokens-%s.txt" % secrets.token_hex(3))
        with open(self.token_file, "w") as f:
            f.write("# test tokens\n")
            f.write("%s alice\n%s bob\n%s ops admin\n" % (self.tokens["alice"], self.tokens["bob"], self.tokens["ops"]))
        os.chmod(self.token_file, 0o600)
        binary = os.environ.get("RUNTIMECTL_BIN") or os.path.join(REPO, "bin", "runtimectl")
        if not os.path.exists(binary):
            raise RuntimeError("no %s: run `make build` first (or set RUNTIMECTL_BIN)" % binary)
        self.proc = subprocess.Popen([binary, "serve", "--listen", "127.0.0.1:0", "--token-file", self.token_file, *extra],
                                     stderr=subprocess.PIPE, text=True)
        self.log: List[str] = []
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            self.log.append(line)
            m = re.search(r"serving on (http://\S+)", line)
            if m:
                self.url = m.group(1)
                break
        else:
            raise RuntimeError("runtimectl serve did not start: %s" % "".join(self.log))
        threading.Thread(target=self._drain, daemon=True).start()

    def _drain(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            self.log.append(line)

    def client(self, who: str = "alice", **kw) -> Client:
        return Client(self.url, self.tokens[who], **kw)

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(60)
        except subprocess.TimeoutExpired:
            self.proc.kill()


@pytest.fixture(scope="session")
def serve(tmp_path_factory) -> Iterator[Serve]:
    s = Serve(str(tmp_path_factory.mktemp("serve")))
    yield s
    s.stop()


@pytest.fixture
def names(serve: Serve) -> Iterator[List[str]]:
    """Session names for the test, removed after it (by the admin token)."""
    made: List[str] = []
    yield made
    admin = serve.client("ops")
    for n in made:
        try:
            admin.get(n).remove(force=True)
        except Exception:
            pass


@pytest.fixture
def name(names: List[str], request) -> str:
    base = re.sub(r"[^a-z0-9]+", "-", request.node.name.lower()).strip("-")[-30:]
    n = "py-%s-%s" % (base.strip("-"), secrets.token_hex(3))
    names.append(n)
    return n

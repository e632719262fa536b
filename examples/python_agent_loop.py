#!/usr/bin/env python3
"""The agent loop that agent builders write around runtimectl, in Python: ask a model for code,
run it in a session, feed back the result and the session's context, and stop when the model
says "TASK COMPLETE". Any OpenAI-compatible chat endpoint works:

    OPENAI_BASE_URL=http://localhost:8000/v1 OPENAI_API_KEY=... MODEL=... \\
      RUNTIMECTL_URL=http://127.0.0.1:8700 RUNTIMECTL_TOKEN=... \\
      python3 examples/python_agent_loop.py "Load data/sales.csv and report the best region"

The session keeps the objects between steps, so the model never re-runs earlier steps and the
agent keeps no copy of the state: the session's context is its memory. The standard library and
the runtimectl client only (pip install ./clients/python).
"""

import json
import os
import re
import sys
import urllib.request
from dataclasses import dataclass, field
from typing import Callable, Dict, List, Optional

from runtimectl import Client, Execution

SYSTEM_PROMPT = """You solve data tasks by writing Python that runs in a persistent session:
variables, imports and functions from earlier steps are still there. Reply with exactly one
```python code block per step. When the task is solved, reply with the answer and the words
TASK COMPLETE."""

CODE_BLOCK = re.compile(r"```(?:python|py)?\s*\n(.*?)```", re.S)


@dataclass
class Step:
    """One turn of the loop: the model's reply, the code in it and its execution."""

    reply: str
    code: Optional[str] = None
    result: Optional[Execution] = None


@dataclass
class Config:
    base_url: str
    model: str
    task: str
    session: str = "agent"
    api_key: str = ""
    max_steps: int = 10
    log: Callable[[str], None] = lambda s: None
    #: called before each model request (tests restart the session's container there)
    before_step: Optional[Callable[[int], None]] = None
    messages: List[Dict[str, str]] = field(default_factory=list)


def chat(cfg: Config, messages: List[Dict[str, str]]) -> str:
    """One request to an OpenAI-compatible /chat/completions endpoint."""
    body = json.dumps({"model": cfg.model, "messages": messages}).encode()
    req = urllib.request.Request(cfg.base_url.rstrip("/") + "/chat/completions", data=body,
                                 headers={"Content-Type": "application/json"})
    if cfg.api_key:
        req.add_header("Authorization", "Bearer " + cfg.api_key)
    with urllib.request.urlopen(req, timeout=300) as resp:
        out = json.load(resp)
    return out["choices"][0]["message"]["content"]


def clip(s: str, n: int = 2000) -> str:
    return s if len(s) <= n else s[:n] + "..."


def feedback(res: Execution, context: str) -> str:
    """What the model reads after a step: the execution and the session's state."""
    parts = ["Execution %d: %s" % (res.seq, res.status)]
    if res.stdout:
        parts.append("stdout:\n" + clip(res.stdout))
    if res.result is not None:
        parts.append("result: " + clip(res.result))
    if res.error is not None:
        parts.append("error: %s: %s\n%s" % (res.error.name, res.error.value, clip(res.error.traceback)))
    parts.append("\nSession state:\n" + context)
    return "\n".join(parts)


def run(client: Client, cfg: Config) -> List[Step]:
    """Drives the loop until the model says TASK COMPLETE; raises after max_steps."""
    s = client.start(cfg.session, lang="python")
    cfg.messages = [{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": cfg.task}]
    steps: List[Step] = []
    for i in range(1, cfg.max_steps + 1):
        if cfg.before_step is not None:
            cfg.before_step(i)
        reply = chat(cfg, cfg.messages)
        cfg.messages.append({"role": "assistant", "content": reply})
        step = Step(reply=reply)
        steps.append(step)
        if "TASK COMPLETE" in reply:
            return steps
        m = CODE_BLOCK.search(reply)
        if m is None:
            cfg.messages.append({"role": "user", "content": "Reply with one ```python code block, or TASK COMPLETE."})
            continue
        step.code = m.group(1)
        step.result = s.run(step.code, timeout=120, on_notice=lambda n: cfg.log("runtimectl: " + n))
        cfg.log("step %d: %s" % (i, step.result.status))
        cfg.messages.append({"role": "user", "content": feedback(step.result, s.context(max_chars=3000))})
    raise RuntimeError("the model did not finish within %d steps" % cfg.max_steps)


def main(argv: List[str]) -> int:
    if len(argv) != 2:
        print("usage: python_agent_loop.py TASK  (with OPENAI_BASE_URL, OPENAI_API_KEY, MODEL, "
              "RUNTIMECTL_URL, RUNTIMECTL_TOKEN)", file=sys.stderr)
        return 2
    cfg = Config(base_url=os.environ.get("OPENAI_BASE_URL", "https://api.openai.com/v1"),
                 api_key=os.environ.get("OPENAI_API_KEY", ""), model=os.environ.get("MODEL", "gpt-4o-mini"),
                 task=argv[1], session=os.environ.get("SESSION", "agent"), log=lambda s: print(s, file=sys.stderr))
    steps = run(Client(), cfg)
    print(steps[-1].reply)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))

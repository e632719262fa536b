"""examples/python_agent_loop.py against a scripted fake OpenAI-compatible endpoint and a real
session; the session's container is killed in the middle of the task."""

import json
import subprocess
import threading
from http.server import BaseHTTPRequestHandler, HTTPServer

import python_agent_loop as loop

REPLIES = [
    "Let me load the data.\n```python\nimport pandas as pd\nsales = pd.DataFrame({'region': ['n', 's', 'n'], 'amount': [5, 7, 4]})\nprint(len(sales))\n```",
    "Now the totals.\n```python\ntotals = sales.groupby('region').amount.sum()\nbest = totals.idxmax()\nbest\n```",
    "Oops.\n```python\nundefined_name\n```",
    "The best region is n (9). TASK COMPLETE",
]


class FakeModel(BaseHTTPRequestHandler):
    requests = []  # type: list

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        FakeModel.requests.append({"path": self.path, "auth": self.headers.get("Authorization"), "body": body})
        reply = REPLIES[min(len(FakeModel.requests) - 1, len(REPLIES) - 1)]
        out = json.dumps({"choices": [{"message": {"role": "assistant", "content": reply}}]}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(out)))
        self.end_headers()
        self.wfile.write(out)

    def log_message(self, *args):
        pass


def test_the_agent_loop_runs_a_task_to_the_end(serve, name):
    httpd = HTTPServer(("127.0.0.1", 0), FakeModel)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    FakeModel.requests = []

    def before(step):
        if step == 3:  # the container dies between two steps: the state comes back
            subprocess.run(["docker", "kill", "runtimectl-" + name], check=True, capture_output=True)

    cfg = loop.Config(base_url="http://127.0.0.1:%d/v1" % httpd.server_port, api_key="sk-test", model="fake",
                      task="Which region sells most?", session=name, before_step=before)
    try:
        steps = loop.run(serve.client(), cfg)
    finally:
        httpd.shutdown()
    assert len(steps) == 4
    assert steps[0].result.status == "ok" and steps[0].result.stdout == "3\n"
    assert steps[1].result.result == "'n'"
    assert steps[2].result.status == "error" and steps[2].result.error.name == "NameError"
    assert "TASK COMPLETE" in steps[-1].reply
    assert FakeModel.requests[0]["path"] == "/v1/chat/completions"
    assert FakeModel.requests[0]["auth"] == "Bearer sk-test"
    fed_back = FakeModel.requests[2]["body"]["messages"][-1]["content"]
    assert "result: 'n'" in fed_back and "sales" in fed_back, "the result and the session's context go back"
    fed_back = FakeModel.requests[3]["body"]["messages"][-1]["content"]
    assert "NameError" in fed_back
    assert serve.client().get(name).run("int(totals['n'])").result == "9", "the state survived the kill"

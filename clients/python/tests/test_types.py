"""The typed objects, from replies as the server writes them (no server needed)."""

import base64
import dataclasses
import datetime
import warnings

import pytest

from runtimectl import (Display, ExecError, Execution, HistoryRecord, Output, RestoreInfo, SessionInfo, Snapshot,
                        StartInfo, Summary, Var, Vars)
from runtimectl.types import parse_time

PNG = b"\x89PNG\r\n\x1a\nfake"


def test_every_reply_type_is_a_dataclass():
    for cls in (SessionInfo, StartInfo, Snapshot, Vars, Var, Summary, HistoryRecord, Execution, Output,
                RestoreInfo, ExecError):
        assert dataclasses.is_dataclass(cls), cls


def test_go_times_parse_to_aware_datetimes():
    t = parse_time("2026-12-03T09:33:56.123456789Z")
    assert t == datetime.datetime(2026, 12, 3, 9, 33, 56, 123456, tzinfo=datetime.timezone.utc)
    assert parse_time("2026-12-03T10:33:56+01:00") == datetime.datetime(2026, 12, 3, 9, 33, 56, tzinfo=datetime.timezone.utc)
    assert parse_time("0001-01-01T00:00:00Z") is None, "Go's zero time is none"
    assert parse_time(None) is None and parse_time("") is None and parse_time("garbage") is None


def test_session_and_start_info():
    d = {"name": "a", "lang": "python", "state": "running", "image": "runtimectl/python:x",
         "created": "2026-12-03T09:00:00Z", "executions": 4, "last_exec": "2m ago", "owner": "alice",
         "new": False, "started": True, "restored": {"snapshot": "s1", "seq": 3, "restored": ["df"],
                                                      "failed": [{"name": "f", "type": "file", "reason": "open file"}]},
         "future_field": 1}
    s = StartInfo.from_json(d)
    assert isinstance(s, SessionInfo)
    assert (s.name, s.state, s.executions, s.owner, s.started, s.new) == ("a", "running", 4, "alice", True, False)
    assert s.running and s.created.year == 2026
    assert s.restored.snapshot == "s1" and s.restored.restored == ["df"] and s.restored.failed[0].reason == "open file"
    assert s.raw["future_field"] == 1, "fields the client does not know stay reachable"
    assert SessionInfo.from_json({}).executions == -1, "unknown is -1, as in session ls"


def test_dict_style_access_still_works_and_warns():
    info = SessionInfo.from_json({"name": "a", "state": "exited"})
    with pytest.warns(DeprecationWarning, match="SessionInfo.*use its attributes"):
        assert info["state"] == "exited"
    with pytest.warns(DeprecationWarning):
        assert info.get("nope", 7) == 7
    with pytest.warns(DeprecationWarning):
        assert "name" in info
    v = Vars.from_json({"vars": [{"name": "df", "type": "DataFrame", "shape": "(3, 1)", "size": 100, "preview": "..."}],
                        "modules": ["pandas"]})
    with pytest.warns(DeprecationWarning):
        assert [x["name"] for x in v["vars"]] == ["df"], "0.1's dicts, exactly"
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert v.names == ["df"] and v.find("df").shape == "(3, 1)" and v.find("x") is None
        assert "df" in v and "x" not in v, "in asks for a variable"
        assert [x.name for x in v] == ["df"]
        assert v.vars[0].len is None


def test_execution_and_file_outputs():
    d = {"session": "a", "seq": 2, "status": "error", "stdout": "o", "stderr": "e", "result": None,
         "error": {"name": "ZeroDivisionError", "value": "division by zero", "traceback": "1/0"},
         "duration_ms": 12.5, "outputs": [{"mime": "image/png", "path": "/workspace/.runtimectl/f.png",
                                           "data": base64.b64encode(PNG).decode()},
                                          {"mime": "text/html", "path": "/workspace/r.html", "omitted": True,
                                           "problem": "over the reply's budget: GET .../files/r.html"}],
         "state": {"status": "saved", "snapshot": "s2"}, "stdout_truncated": 3}
    ex = Execution.from_json(d)
    assert not ex.ok and str(ex.error) == "ZeroDivisionError: division by zero"
    assert ex.state.status == "saved" and ex.stdout_truncated == 3
    out, big = ex.outputs
    assert (out.mime, out.data) == ("image/png", PNG)
    assert out.png() == PNG and ex.png() == PNG and ex.images == [PNG] and out.html() is None
    assert big.omitted and big.html() is None and "files/r.html" in big.problem
    assert ex.displays == [] and ex.shown == [] and ex.result_display is None
    with pytest.warns(DeprecationWarning):
        assert out["data"] == PNG, "0.1 gave the bytes"
    with pytest.warns(DeprecationWarning):
        assert out["mime"] == "image/png"
    assert "data=<12 bytes>" in repr(out)
    assert out._repr_mimebundle_() == ({"image/png": PNG}, {})


def test_displays_as_the_wire_format_has_them():
    fig = {"kind": "display_data", "data": {"text/plain": "<Figure>", "image/png": base64.b64encode(PNG).decode()},
           "metadata": {"image/png": {"width": 640}}, "display_id": "fig1", "stdout_pos": 2, "stderr_pos": 0}
    d = {"status": "ok", "stdout": "a\nb\n", "displays": [
        fig,
        {"kind": "execute_result", "data": {"text/html": "<table></table>", "text/plain": "df",
                                            "application/json": {"a": [1, 2]}}},
        {"kind": "update_display_data", "data": {"text/plain": "done"}, "display_id": "fig1"},
        {"kind": "display_data", "data": {"text/plain": "gone soon"}},
        {"kind": "clear_output", "wait": True},
        {"kind": "display_data", "data": {"text/markdown": "# last", "text/plain": "last"}},
    ], "outputs": [{"mime": "image/png", "path": "/workspace/outputs/1.png", "data": base64.b64encode(b"file").decode()}]}
    ex = Execution.from_json(d)
    f, table, upd, _, clear, last = ex.displays
    assert isinstance(f, Display)
    assert f.png() == PNG and f.text() == "<Figure>" and f.metadata["image/png"]["width"] == 640
    assert (f.stdout_pos, f.display_id) == (2, "fig1") and f.main_mime == "image/png"
    assert table.html() == "<table></table>" and table.json() == {"a": [1, 2]} and table._repr_html_() == "<table></table>"
    assert ex.result_display is table
    assert clear.wait and clear.kind == "clear_output"
    assert [x.text() for x in ex.shown] == ["last"], "clear_output drops what came before"
    assert last.markdown() == "# last" and last._repr_markdown_() == "# last"
    ex2 = Execution.from_json(dict(d, displays=d["displays"][:3]))
    assert [x.text() for x in ex2.shown] == ["done", "df"], "an update replaces its display in place"
    assert ex2.shown[0].png() is None and ex2.displays[0].png() == PNG
    assert ex.png() is None and ex.images == [], "the shown displays have no PNG left"
    assert ex2.images == [] and Execution.from_json(dict(d, displays=[fig])).png() == PNG
    assert Execution.from_json(dict(d, displays=[])).png() == b"file", "else the file outputs"
    bundle, meta = f._repr_mimebundle_()
    assert bundle == {"image/png": PNG, "text/plain": "<Figure>"} and meta == {"image/png": {"width": 640}}
    assert f._repr_mimebundle_(include=["text/plain"])[0] == {"text/plain": "<Figure>"}
    dropped = Display.from_json({"kind": "display_data", "data": {"text/plain": "[runtimectl: display of 9 bytes dropped]"},
                                 "metadata": {"runtimectl": {"dropped": 9}}})
    assert dropped.dropped == 9 and f.dropped == 0 and dropped.truncated and not f.truncated
    assert Display.from_json({"kind": "display_data", "metadata": {"runtimectl": {"dropped_from_history": True}}}).truncated
    with pytest.warns(DeprecationWarning):
        assert f["display_id"] == "fig1"
    assert "Display(kind='display_data'" in repr(f)
    h = HistoryRecord.from_json({"seq": 1, "status": "ok", "displays": [fig]})
    assert h.displays[0].png() == PNG and h.png() == PNG


def test_history_snapshot_summary():
    h = HistoryRecord.from_json({"seq": 1, "code": "x=1", "status": "ok", "stdout": "", "stderr": "", "result": None,
                                 "error": None, "outputs": [], "started": "2026-12-03T09:00:00.5Z",
                                 "duration_ms": 3, "notes": ["restored"]})
    assert h.ok and h.started.microsecond == 500000 and h.notes == ["restored"] and h.error is None
    s = Snapshot.from_json({"id": "s1", "seq": 1, "created": "2026-12-03T09:00:00Z", "size_bytes": 10, "kept": ["x"],
                            "skipped": [{"name": "f", "type": "TextIOWrapper", "reason": "open file"}],
                            "info": {"pickler": "dill"}})
    assert s.kept == ["x"] and s.skipped[0].type == "TextIOWrapper" and s.info == {"pickler": "dill"}
    sm = Summary.from_json({"session": "a", "executions": 2, "recent": [{"seq": 2, "status": "ok", "code": "y"}],
                            "vars": [{"name": "x", "type": "int", "size": 28, "preview": "1"}],
                            "files": [{"path": "a.csv", "size": 3, "modified": "2026-12-03T09:00:00Z"}],
                            "text": "summary"})
    assert str(sm) == "summary" and sm.recent[0].code == "y" and sm.vars[0].name == "x" and sm.files[0].size == 3

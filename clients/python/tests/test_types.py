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
                                           "data": base64.b64encode(PNG).decode()}],
         "state": {"status": "saved", "snapshot": "s2"}, "stdout_truncated": 3}
    ex = Execution.from_json(d)
    assert not ex.ok and str(ex.error) == "ZeroDivisionError: division by zero"
    assert ex.state.status == "saved" and ex.stdout_truncated == 3
    out = ex.outputs[0]
    assert (out.kind, out.mime, out.data) == ("file", "image/png", PNG)
    assert out.png() == PNG and ex.png() == PNG and ex.images == [PNG]
    assert ex.files == [out] and ex.displays == []
    with pytest.warns(DeprecationWarning):
        assert out["data"] == PNG, "0.1 gave the bytes"
    with pytest.warns(DeprecationWarning):
        assert out["mime"] == "image/png"
    assert "data=<12 bytes>" in repr(out)


def test_display_bundles():
    d = {"outputs": [
        {"kind": "display_data", "data": {"text/plain": "<Figure>", "image/png": base64.b64encode(PNG).decode()},
         "metadata": {"image/png": {"width": 640}}, "display_id": "fig1"},
        {"output_type": "execute_result", "data": {"text/html": ["<table>", "</table>"], "text/plain": "df",
                                                   "application/json": {"a": [1, 2]}}},
        {"kind": "update_display_data", "data": {"text/plain": "done"}, "transient": {"display_id": "fig1"}},
    ], "status": "ok"}
    ex = Execution.from_json(d)
    fig, table, upd = ex.outputs
    assert isinstance(fig, Display)
    assert fig.png() == PNG and fig.text() == "<Figure>" and fig.metadata["image/png"]["width"] == 640
    assert fig.mime == "image/png", "the richest representation is the main one"
    assert table.html() == "<table></table>", "nbformat's line lists are joined"
    assert table.json() == {"a": [1, 2]} and table._repr_html_() == "<table></table>"
    assert upd.display_id == "fig1", "transient.display_id as in Jupyter's messages"
    assert ex.displays == [upd, table], "an update replaces its display in place"
    bundle, meta = fig._repr_mimebundle_()
    assert bundle == {"image/png": PNG, "text/plain": "<Figure>"} and meta == {"image/png": {"width": 640}}
    assert fig._repr_mimebundle_(include=["text/plain"])[0] == {"text/plain": "<Figure>"}


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

"""The plug-in point: `package.module:Class` strategies, article A4's random assignor, and bad plug-ins."""

from __future__ import annotations

import json
import sys
import textwrap
from pathlib import Path

import pytest

from planner import assign
from planner.invariants import check_plan

RANDOM = "planner.examples.random_assignor:RandomAssignor"
GROUP = {
    "topics": {"T0": 3, "T1": 2, "T2": 4},
    "members": {"C0": {"topics": ["T0", "T1"]}, "C1": {"topics": ["T1", "T2"]}, "C2": {"topics": ["T2", "T0"]}},
}


def test_random_assignor_is_valid_and_repeatable():
    first = assign(RANDOM, GROUP)
    assert check_plan(GROUP, first.assignment) == []
    assert assign(RANDOM, GROUP).assignment == first.assignment
    assert first.target == first.assignment


def test_plugin_returning_an_owner_array(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    (tmp_path / "my_assignors.py").write_text(
        textwrap.dedent("""
        import numpy as np

        class FirstMember:
            name = "first"

            def assign(self, group):
                return np.zeros(group.num_partitions, dtype=np.int32)
    """)
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    try:
        result = assign(
            "my_assignors:FirstMember",
            {"topics": {"t": 2}, "members": {"a": {"topics": ["t"]}, "b": {"topics": ["t"]}}},
        )
    finally:
        sys.modules.pop("my_assignors", None)
    assert result.assignment == {"a": [("t", 0), ("t", 1)], "b": []}


@pytest.mark.parametrize(
    "strategy, message",
    [
        ("nope", "unknown strategy"),
        ("planner.nowhere:X", "cannot load"),
        ("planner.examples.random_assignor:Missing", "cannot load"),
        ("planner.group:GroupSpec", "cannot build"),
    ],
)
def test_bad_strategies_fail_clearly(strategy: str, message: str):
    with pytest.raises(ValueError, match=message):
        assign(strategy, GROUP)


def test_plugin_naming_unknown_members_or_partitions_is_rejected(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    (tmp_path / "bad_assignors.py").write_text(
        textwrap.dedent("""
        class Ghost:
            name = "ghost"

            def assign(self, group):
                return {"nobody": [("T0", 0)]}


        class Twice:
            name = "twice"

            def assign(self, group):
                return {"C0": [("T0", 0)], "C2": [("T0", 0)]}
    """)
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    try:
        with pytest.raises(ValueError, match="unknown member"):
            assign("bad_assignors:Ghost", GROUP)
        with pytest.raises(ValueError, match="twice"):
            assign("bad_assignors:Twice", GROUP)
    finally:
        sys.modules.pop("bad_assignors", None)


def test_cli_assign_loads_a_plugin_and_prints_the_issue_json(tmp_path: Path, capsys: pytest.CaptureFixture):
    from jobs.cli import main

    path = tmp_path / "group.json"
    path.write_text(json.dumps(GROUP))
    assert main(["assign", "--strategy", RANDOM, str(path)]) == 0
    out = json.loads(capsys.readouterr().out)
    assert set(out) == {"assignment", "target", "revoked", "elapsed_ms"}
    assert out["assignment"] == {m: [list(tp) for tp in ps] for m, ps in assign(RANDOM, GROUP).assignment.items()}


def test_cli_assign_rejects_bad_input_with_a_message(tmp_path: Path, capsys: pytest.CaptureFixture):
    from jobs.cli import main

    path = tmp_path / "bad.json"
    path.write_text(json.dumps({"topics": {"t": 1}, "members": {"m": {"topics": "t"}}}))
    assert main(["assign", "--strategy", "sticky", str(path)]) == 2
    assert "members.m.topics: 't' is not of type 'array'" in capsys.readouterr().err

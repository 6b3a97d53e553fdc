"""A step's result as an Airflow task stores it: JSON's own types, so the XCom holds lists, not strings of tuples."""

from __future__ import annotations

import json

import pytest

from jobs.context import StepResult

pytestmark = pytest.mark.unit


def test_the_xcom_form_is_json_lists_and_survives_a_round_trip() -> None:
    result = StepResult(({"group_id": "g", "generation_id": 2},), "done", (("a.json", "invalid JSON"),), ("alarm",))
    form = result.as_json()
    assert form == {
        "rows": [{"group_id": "g", "generation_id": 2}],
        "text": "done",
        "quarantined": [["a.json", "invalid JSON"]],
        "alarms": ["alarm"],
    }
    assert json.loads(json.dumps(form)) == form
    assert StepResult().as_json() == {"rows": [], "text": "", "quarantined": [], "alarms": []}

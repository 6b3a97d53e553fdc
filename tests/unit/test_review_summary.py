"""What a reviewer reads in the approval task (Markdown), the approval switch, and the stored status strings."""

from __future__ import annotations

import pytest

from jobs.io.flags import env_flag, env_hours
from jobs.steps.review import markdown
from planner.errors import InputError
from schemas.status import GenerationStatus


def test_the_summary_is_one_table_row_per_group_whatever_the_group_id_holds():
    rows = [
        {
            "group_id": "pay|ments`\nx",
            "generation_id": 7,
            "strategy": "sticky",
            "max_load": 12.0,
            "mean_load": 10.0,
            "max_mean_load": 1.2,
            "moves": 3,
            "report_path": "/lake/reports/pay%7Cments/generation-7.html",
        },
        {
            "group_id": "orders",
            "generation_id": 1,
            "strategy": None,
            "max_load": None,
            "mean_load": None,
            "max_mean_load": None,
            "moves": None,
            "report_path": "/lake/reports/orders/generation-1.html",
        },
    ]
    lines = markdown("run-1", rows).splitlines()
    assert lines[0].startswith("Run `run-1`: 2 generation(s) passed the gate and await review.")
    assert lines[4:] == [
        "| pay\\|ments' x | 7 | sticky | 12.0 | 10.0 | 1.200 | 3 | `/lake/reports/pay%7Cments/generation-7.html` |",
        "| orders | 1 | - | - | - | - | - | `/lake/reports/orders/generation-1.html` |",
    ]
    header_cells = lines[2].count(" | ") + 1
    assert all(line.replace("\\|", "").count(" | ") + 1 == header_cells for line in lines[4:])


@pytest.mark.parametrize(("text", "on"), [("", False), ("0", False), ("off", False), ("TRUE", True), (" yes ", True)])
def test_the_approval_switch_reads_the_usual_spellings(text, on):
    assert env_flag("REBALANCE_APPROVAL", {"REBALANCE_APPROVAL": text}) is on
    assert env_flag("REBALANCE_APPROVAL", {}) is False


def test_a_misspelt_approval_switch_is_named():
    with pytest.raises(InputError, match="REBALANCE_APPROVAL: expected true or false, got 'ture'"):
        env_flag("REBALANCE_APPROVAL", {"REBALANCE_APPROVAL": "ture"})


@pytest.mark.parametrize(("text", "hours"), [("", 23.0), (" 0.5 ", 0.5), ("48", 48.0)])
def test_the_approval_timeout_is_a_positive_number_of_hours(text, hours):
    assert env_hours("REBALANCE_APPROVAL_TIMEOUT_HOURS", 23.0, {"REBALANCE_APPROVAL_TIMEOUT_HOURS": text}) == hours


@pytest.mark.parametrize("text", ["0", "-1", "nan", "inf", "a day"])
def test_an_approval_timeout_that_is_not_a_positive_number_is_named(text):
    with pytest.raises(InputError, match="REBALANCE_APPROVAL_TIMEOUT_HOURS: expected a positive number of hours"):
        env_hours("REBALANCE_APPROVAL_TIMEOUT_HOURS", 23.0, {"REBALANCE_APPROVAL_TIMEOUT_HOURS": text})


def test_statuses_are_stored_as_the_plain_strings_tables_already_hold():
    assert [s.value for s in GenerationStatus] == [
        "candidate",
        "gated",
        "approved",
        "rejected",
        "superseded",
        "abandoned",
    ]
    assert f"{GenerationStatus.APPROVED}" == "approved" and GenerationStatus("rejected") == "rejected"

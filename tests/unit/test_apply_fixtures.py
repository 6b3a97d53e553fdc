"""The shared applier fixtures (schemas/fixtures/apply) through the Python rules, and the plan file's JSON Schema."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from jobs.apply.decision import REASONS, LiveSubscription, decide
from jobs.apply.matching import LiveMember, client_id_of
from jobs.apply.plan_file import Plan, PlanError, parse_plan
from jobs.tables.export import build_plan

REPO = Path(__file__).resolve().parents[2]
FIXTURES = sorted((REPO / "schemas" / "fixtures" / "apply").glob("*.json"))
SCHEMA = json.loads((REPO / "schemas" / "plan.schema.json").read_text(encoding="utf-8"))
VALIDATOR = jsonschema.Draft202012Validator(SCHEMA, format_checker=jsonschema.FormatChecker())


def load(path: Path) -> dict[str, Any]:
    doc: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    return doc


def read_plan(fixture: dict[str, Any]) -> Plan:
    """The fixture's plan as an applier reads its file: JSON first, then the format's rules."""
    if "plan_text" in fixture:
        try:
            doc = json.loads(fixture["plan_text"])
        except json.JSONDecodeError as e:
            raise PlanError(f"plan: invalid JSON: {e}") from None
        return parse_plan(doc)
    return parse_plan(copy.deepcopy(fixture["plan"]))


def decision_of(fixture: dict[str, Any]) -> dict[str, Any]:
    """What the Python rules decide for the fixture, in the fixtures' `expected` form."""
    try:
        plan = read_plan(fixture)
    except PlanError as e:
        return {"decision": "fallback", "reasons": [e.code]}
    live = fixture["live"]
    members = [
        LiveSubscription(
            # A classic group's leader reads a dynamic member's client id from its member id, as the assignor does.
            LiveMember(m["member_id"], m["group_instance_id"], client_id_of(m["member_id"])),
            tuple(m["topics"]),
            tuple((t, p) for t, ps in m.get("owned", {}).items() for p in ps),
        )
        for m in live["members"]
    ]
    decision = decide(plan, live["topics"].get, members)
    if not decision.serve:
        return {"decision": "fallback", "reasons": sorted({r.code for r in decision.reasons})}
    assignment: dict[str, dict[str, list[int]]] = {}
    for member_id, tps in decision.assignment.items():
        by_topic = assignment.setdefault(member_id, {})
        for topic, partition in sorted(tps):
            by_topic.setdefault(topic, []).append(partition)
    return {"decision": "serve", "assignment": assignment, "withheld": decision.withheld}


def test_the_fixtures_cover_every_rule() -> None:
    fixtures = [load(p) for p in FIXTURES]
    assert len(fixtures) >= 12
    decided = {r for f in fixtures for e in (f["expected"], f.get("expected_broker", {})) for r in e.get("reasons", [])}
    assert set(REASONS) - decided == {"plan_unreadable"}  # a missing file is no fixture: test_planned_assignor has it
    assert {f["live"]["protocol"] for f in fixtures} == {"eager", "cooperative"}
    assert any(f["expected"].get("withheld") for f in fixtures)
    assert sum(f["expected"]["decision"] == "serve" for f in fixtures) >= 4


@pytest.mark.parametrize("path", FIXTURES, ids=[p.stem for p in FIXTURES])
def test_a_fixture_gets_the_expected_decision(path: Path) -> None:
    fixture = load(path)
    assert set(fixture) <= {"description", "plan", "plan_text", "live", "expected", "expected_broker", "broker_note"}
    for m in fixture["live"]["members"]:
        # The fixture is what a leader sees: a dynamic member's id starts with its client id (Kafka's member ids).
        assert client_id_of(m["member_id"]) == m["client_id"], m
    assert decision_of(fixture) == fixture["expected"]


@pytest.mark.parametrize("path", FIXTURES, ids=[p.stem for p in FIXTURES])
def test_every_plan_the_parser_accepts_is_valid_under_the_schema(path: Path) -> None:
    fixture = load(path)
    if "plan" not in fixture:
        return
    errors = list(VALIDATOR.iter_errors(fixture["plan"]))
    try:
        parse_plan(copy.deepcopy(fixture["plan"]))
    except PlanError as e:
        # What the schema can state it refuses too; coverage and uniqueness only the readers check.
        assert bool(errors) == (e.code == "wrong_format"), (e, errors)
    else:
        assert errors == []


@pytest.mark.parametrize(
    ("edit", "path"),
    [
        (lambda d: d.update(generation_id="4"), ["generation_id"]),
        (lambda d: d["topics"].update(orders=0), ["topics", "orders"]),
        (lambda d: d["topic_ids"].update(orders="not-an-id"), ["topic_ids", "orders"]),
        (lambda d: d.update(members={}), ["members"]),
        (lambda d: next(iter(d["members"].values()))["assignment"].update(orders=[-1]), None),
        (lambda d: d.pop("strategy"), []),
    ],
)
def test_the_schema_and_the_parser_refuse_the_same_field_errors(edit: Any, path: list[str] | None) -> None:
    doc = copy.deepcopy(load(FIXTURES[0])["plan"])
    edit(doc)
    errors = list(VALIDATOR.iter_errors(doc))
    assert errors
    if path is not None:
        assert [list(e.absolute_path) for e in errors] == [path]
    with pytest.raises(PlanError) as refused:
        parse_plan(doc)
    assert refused.value.code == "malformed_plan"


def test_export_writes_a_schema_valid_plan_with_the_topic_ids_it_knows() -> None:
    """`rebalance export`'s document (build_plan) is valid under the schema, with or without topic ids."""
    from datetime import UTC, datetime

    generation = {
        "group_id": "payments",
        "generation_id": 2,
        "chosen_strategy": "range",
        "snapshot_id": "s1",
        "created_at": datetime(2026, 11, 21, 2, tzinfo=UTC),
    }
    members = [
        {"snapshot_id": "s1", "group_id": "payments", "member_id": f"c-{i}-x", "client_id": f"c-{i}"}
        | {"group_instance_id": None, "topics": ["orders"]}
        for i in range(2)
    ]
    ids = {"orders": "yPjDjFk0SN2Vz3E1u9m6kQ", "other": "3bA2qGxhQ8mXoWf-Lr7nTg"}
    partitions = [
        {"snapshot_id": "s1", "topic": t, "partition": p, "partition_count": 2, "topic_id": ids[t]}
        for t in ("orders", "other")
        for p in range(2)
    ]
    plans = [
        {"generation_id": 2, "group_id": "payments", "strategy": "range", "topic": "orders", "partition": p}
        | {"member": f"c-{p}-x"}
        for p in range(2)
    ]
    doc = build_plan(generation, members, partitions, plans).to_json()
    assert list(VALIDATOR.iter_errors(doc)) == []
    assert doc["topic_ids"] == {"orders": "yPjDjFk0SN2Vz3E1u9m6kQ"}  # the group's topics only
    assert parse_plan(doc).topic_ids == doc["topic_ids"]

    unknown = [r | {"topic_id": None} if r["topic"] == "orders" else r for r in partitions]
    doc = build_plan(generation, members, unknown, plans).to_json()
    assert "topic_ids" not in doc and list(VALIDATOR.iter_errors(doc)) == []

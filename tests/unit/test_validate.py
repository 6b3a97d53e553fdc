"""Snapshot documents: the JSON Schema and the cross-field rules, each message naming field and problem."""

from __future__ import annotations

import copy

import pytest

from jobs.validate import document_errors

GOOD = {
    "group_id": "payments",
    "captured_at": "2026-11-21T02:00:00Z",
    "state": "Stable",
    "generation": 4,
    "topics": {"orders": 4, "refunds": 2},
    "members": [
        {"member_id": "a", "topics": ["orders", "refunds"], "owned": [["orders", 0]], "assignment": [["orders", 0]]},
        {"member_id": "b", "group_instance_id": "b-static", "topics": ["orders"], "assignment": [["orders", 1]]},
    ],
    "offsets": [{"topic": "orders", "partition": 0, "committed": 10, "end": 12}],
}


def broken(change) -> dict:
    doc = copy.deepcopy(GOOD)
    change(doc)
    return doc


def test_a_valid_document_has_no_errors():
    assert document_errors(GOOD) == []


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda d: d["topics"].update(refunds=0), "topics.refunds: partition count must be positive, got 0"),
        (lambda d: d["topics"].update(refunds=-3), "topics.refunds: partition count must be positive, got -3"),
        (
            lambda d: d["members"][1]["topics"].append("audit"),
            "members[1].topics: subscribes to 'audit', which is missing from topics",
        ),
        (
            lambda d: d["members"][1]["assignment"].append(["orders", 4]),
            "members[1].assignment[1]: orders-4 is out of range (orders has 4 partitions)",
        ),
        (
            lambda d: d["members"][0]["owned"].append(["audit", 0]),
            "members[0].owned[1]: topic 'audit' is missing from topics",
        ),
        (
            lambda d: d["members"][1].update(member_id="a"),
            "members[1].member_id: duplicate member id 'a' (also members[0])",
        ),
        (
            lambda d: d["members"][0].update(group_instance_id="b-static"),
            "members[1].group_instance_id: duplicate static member 'b-static' (also members[0])",
        ),
        (
            lambda d: d["members"][1]["assignment"].append(["orders", 0]),
            "members[1].assignment[1]: orders-0 is claimed by both 'a' and 'b'",
        ),
        (
            lambda d: d["offsets"][0].update(committed=13),
            "offsets[0]: committed offset 13 is above end offset 12 for orders-0",
        ),
        (
            lambda d: d["offsets"].append({"topic": "orders", "partition": 9, "end": 1}),
            "offsets[1]: orders-9 is out of range (orders has 4 partitions)",
        ),
    ],
)
def test_semantic_errors_name_the_field_and_the_problem(change, message):
    assert message in document_errors(broken(change))


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda d: d.pop("group_id"), "(document): 'group_id' is a required property"),
        (lambda d: d["topics"].update(orders="4"), "topics.orders: '4' is not of type 'integer'"),
        (lambda d: d["members"][0].update(topics="orders"), "members[0].topics: 'orders' is not of type 'array'"),
        (
            lambda d: d["members"][0]["owned"].append(["orders", -1]),
            "members[0].owned[1][1]: -1 is less than the minimum of 0",
        ),
        (lambda d: d.update(state="Sleeping"), "state: 'Sleeping' is not one of"),
    ],
)
def test_schema_errors_name_the_field_and_the_problem(change, message):
    errors = document_errors(broken(change))
    assert any(e.startswith(message) for e in errors), errors


def test_a_non_object_document_is_rejected():
    assert document_errors([GOOD]) == ["(document): [{...}] is not of type 'object'".replace("[{...}]", repr([GOOD]))]

"""Both group protocols in the snapshot contract: classic and KIP-848 consumer groups, their epochs and targets."""

from __future__ import annotations

import copy

import pytest

from planner import assign
from planner.group import from_snapshot
from planner.group_protocol import group_type, todays_strategy
from schemas.rules import document_errors

CONSUMER = {
    "group_id": "orders-v2",
    "captured_at": "2026-11-21T02:00:00Z",
    "state": "Reconciling",
    "group_type": "consumer",
    "server_assignor": "uniform",
    "group_epoch": 7,
    "assignment_epoch": 7,
    "topics": {"orders": 4},
    "members": [
        {
            "member_id": "m0",
            "member_epoch": 6,
            "topics": ["orders"],
            "assignment": [["orders", 0], ["orders", 1], ["orders", 2]],
            "target_assignment": [["orders", 0], ["orders", 1]],
        },
        {"member_id": "m1", "member_epoch": 7, "topics": ["orders"], "assignment": [], "target_assignment": []},
    ],
}


@pytest.mark.parametrize(
    ("doc", "strategy"),
    [
        ({"group_type": "consumer", "server_assignor": "uniform"}, "uniform"),
        ({"group_type": "consumer", "server_assignor": "range"}, "server-range"),
        ({"group_type": "consumer"}, "uniform"),  # GroupCoordinatorConfig: uniform is the default assignor
        ({"group_type": "consumer", "server_assignor": "my-server-assignor"}, None),
        ({"protocol": "range"}, "range"),
        ({"group_type": "classic", "protocol": "roundrobin"}, "roundrobin"),
        ({"protocol": "stream"}, None),
        ({}, None),
    ],
)
def test_todays_strategy_is_the_server_assignor_for_consumer_groups_and_the_elected_one_for_classic(doc, strategy):
    assert todays_strategy(doc) == strategy


def test_a_group_without_group_type_is_classic():
    assert group_type({}) == "classic" and group_type(CONSUMER) == "consumer"


def test_a_consumer_group_document_is_valid():
    assert document_errors(CONSUMER) == []


def test_the_server_assignor_starts_from_the_coordinators_target_not_the_current_assignment():
    members = from_snapshot(CONSUMER)["members"]
    assert members["m0"]["owned"] == [["orders", 0], ["orders", 1]]
    # The same document as a classic group reads the members' assignment.
    classic = {**CONSUMER, "group_type": "classic"}
    assert from_snapshot(classic)["members"]["m0"]["owned"] == [["orders", 0], ["orders", 1], ["orders", 2]]
    # UniformHomogeneousAssignmentBuilder keeps m0's two target partitions and gives m1 the other two.
    result = assign(todays_strategy(CONSUMER), from_snapshot(CONSUMER))
    assert result.assignment == {"m0": [("orders", 0), ("orders", 1)], "m1": [("orders", 2), ("orders", 3)]}


def _with(change) -> dict:
    doc = copy.deepcopy(CONSUMER)
    change(doc)
    return doc


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (
            lambda d: d["members"][1]["target_assignment"].append(["orders", 1]),
            "members[1].target_assignment[0]: orders-1 is claimed by both 'm0' and 'm1'",
        ),
        (
            lambda d: d["members"][0]["target_assignment"].append(["orders", 9]),
            "members[0].target_assignment[2]: orders-9 is out of range (orders has 4 partitions)",
        ),
        (lambda d: d.update(group_epoch=2**31), "group_epoch: 2147483648 is above Kafka's int32 maximum"),
        (
            lambda d: d["members"][0].update(member_epoch=2**31),
            "members[0].member_epoch: 2147483648 is above Kafka's int32 maximum",
        ),
        (lambda d: d.update(group_type="share"), "group_type: 'share' is not one of ['classic', 'consumer']"),
        (lambda d: d.update(server_assignor="uni\x00form"), "server_assignor: control character U+0000"),
        (lambda d: d["members"][0].update(member_epoch=-3), "members[0].member_epoch: -3 is less than the minimum"),
    ],
)
def test_bad_protocol_fields_are_rejected_naming_the_field(change, message):
    errors = document_errors(_with(change))
    assert any(message in e for e in errors), errors

"""Migration readiness (classic -> consumer protocol, KIP-848): the coordinator's upgrade rules and what would move."""

from __future__ import annotations

import copy

import pytest
from hypothesis import given
from hypothesis import strategies as st

from planner import assign
from planner.errors import InputError
from planner.group import from_snapshot
from planner.migration import readiness


def group(protocol: str | None = "cooperative-sticky", **extra) -> dict:
    both = ["orders", "refunds"]
    return {
        "group_id": "payments",
        "state": "Stable",
        "protocol_type": "consumer",
        "protocol": protocol,
        "topics": {"orders": 4, "refunds": 2},
        "members": [
            {
                "member_id": "m0",
                "strategies": [protocol] if protocol else [],
                "topics": both,
                "assignment": [["orders", 0], ["orders", 1], ["refunds", 0]],
            },
            {
                "member_id": "m1",
                "strategies": [protocol] if protocol else [],
                "topics": both,
                "assignment": [["orders", 2], ["orders", 3], ["refunds", 1]],
            },
        ],
        **extra,
    }


@pytest.mark.parametrize(
    ("client", "server"),
    [("range", "range"), ("roundrobin", "uniform"), ("sticky", "uniform"), ("cooperative-sticky", "uniform")],
)
def test_each_kafka_client_assignor_maps_to_the_server_assignor_that_keeps_its_intent(client, server):
    r = readiness(group(client))
    assert (r.client_assignor, r.server_assignor, r.ready, r.blockers) == (client, server, True, ())


def test_a_balanced_sticky_group_moves_nothing_under_uniform():
    # UniformHomogeneousAssignmentBuilder keeps each member's target (today's assignment) up to its quota of 3.
    r = readiness(group("cooperative-sticky"))
    assert (r.partitions, r.moves) == (6, ())


def test_range_moves_what_the_server_range_assigns_differently():
    doc = group("range")
    # Today m0 has orders-0..2 and m1 the rest; the server RangeAssignor splits each topic 2 + 2 and 1 + 1.
    doc["members"][0]["assignment"] = [["orders", 0], ["orders", 1], ["orders", 2], ["refunds", 0]]
    doc["members"][1]["assignment"] = [["orders", 3], ["refunds", 1]]
    assert readiness(doc).moves == (("orders", 2, "m0", "m1"),)


def test_an_unbalanced_group_moves_toward_balance_and_unassigned_partitions_get_an_owner():
    doc = group("sticky")
    doc["members"][0]["assignment"] = [["orders", 0], ["orders", 1], ["orders", 2], ["orders", 3]]
    doc["members"][1]["assignment"] = [["refunds", 0]]  # refunds-1 has no owner today
    moves = readiness(doc).moves
    owners = {("orders", p): "m0" for p in range(4)} | {("refunds", 0): "m1"}
    for topic, partition, before, after in moves:
        assert owners.get((topic, partition), "") == before and before != after
        owners[(topic, partition)] = after
    counts = [sum(1 for o in owners.values() if o == m) for m in ("m0", "m1")]
    assert counts == [3, 3] and owners[("refunds", 1)] in ("m0", "m1")


def test_a_custom_client_assignor_is_upgraded_with_its_logic_and_subscription_user_data_lost():
    doc = group("my-assignor")
    doc["members"][0]["subscription_user_data"] = "AAEC"
    r = readiness(doc)
    assert (r.server_assignor, r.ready, r.moves) == (None, True, ())
    assert r.warnings == (
        "custom client assignor 'my-assignor': the consumer protocol runs server assignors only, so its logic is "
        "lost; the subscription user data of 1 members is dropped",
    )


def test_assignment_user_data_blocks_as_kafka_refuses_the_upgrade():
    doc = group("my-assignor")
    doc["members"][1]["assignment_user_data"] = "AAEC"
    r = readiness(doc)
    assert not r.ready
    assert r.blockers == (
        "the assignments of 1 members carry user data from the 'my-assignor' assignor, which the consumer protocol "
        "would lose: Kafka refuses the online upgrade (switch to a built-in assignor first)",
    )


@pytest.mark.parametrize(
    ("policy", "ready"), [("bidirectional", True), ("upgrade", True), ("downgrade", False), ("disabled", False)]
)
def test_the_migration_policy_must_allow_upgrades(policy, ready):
    r = readiness(group(), policy=policy)
    assert r.ready is ready
    assert ready or r.blockers == (
        f"group.consumer.migration.policy={policy} does not allow online upgrades (offline only)",
    )


def test_groups_not_on_the_consumer_embedded_protocol_or_too_large_or_unreadable_are_blocked():
    assert readiness(group(protocol_type="connect")).blockers[0] == (
        "protocol type 'connect' is not the consumer embedded protocol"
    )
    assert readiness(group(), max_size=1).blockers == ("2 members exceed group.consumer.max.size=1",)
    doc = group()
    doc["members"][1]["decode_error"] = "truncated subscription"
    assert readiness(doc).blockers == ("subscriptions that cannot be read (malformed embedded protocol): m1",)


def test_warnings_mixed_protocols_racks_lost_and_a_rebalance_in_progress():
    doc = group("range", state="CompletingRebalance")
    doc["members"][0]["strategies"] = ["cooperative-sticky", "range"]
    doc["members"][1]["rack"] = "az1"
    r = readiness(doc)
    assert r.ready and r.warnings == (
        "members prefer both eager and cooperative assignors: finish the KIP-429 rolling upgrade first",
        "rack awareness lost: 1 members set client.rack, which range uses (KIP-881) and the range server "
        "assignor ignores (KAFKA-16694)",
        "the group is CompletingRebalance: its last assignment becomes a stale target (KAFKA-21582)",
    )
    # RoundRobinAssignor never used racks: nothing is lost.
    assert readiness(group("roundrobin") | {"members": doc["members"]}).warnings[1:] == ()


def test_an_empty_group_is_ready_and_moves_nothing_and_a_consumer_group_is_refused():
    assert readiness(group(members=[])).moves == () and readiness(group(members=[])).ready
    with pytest.raises(InputError, match="already a consumer group"):
        readiness(group(group_type="consumer"))


_assignments = st.lists(st.sampled_from(["m0", "m1", "m2", None]), min_size=6, max_size=6)


@given(owners=_assignments, protocol=st.sampled_from(["range", "roundrobin", "sticky", "cooperative-sticky"]))
def test_applying_the_moves_to_today_gives_the_server_assignors_target(owners, protocol):
    doc = group(protocol)
    parts = [("orders", p) for p in range(4)] + [("refunds", p) for p in range(2)]
    doc["members"] = [
        {
            "member_id": m,
            "topics": ["orders", "refunds"],
            "assignment": [[t, p] for (t, p), o in zip(parts, owners, strict=True) if o == m],
        }
        for m in ("m0", "m1", "m2")
    ]
    r = readiness(doc)
    now = {(t, p): o for (t, p), o in zip(parts, owners, strict=True) if o}
    for topic, partition, before, after in r.moves:
        assert now.get((topic, partition), "") == before != after
        now[(topic, partition)] = after
    upgraded = copy.deepcopy(doc) | {"group_type": "consumer"}
    for m in upgraded["members"]:
        m["target_assignment"] = m["assignment"]
    strategy = {"range": "server-range"}.get(protocol, "uniform")
    target = assign(strategy, from_snapshot(upgraded)).assignment
    assert now == {tp: m for m, tps in target.items() for tp in tps}


def test_pairs_outside_the_groups_partitions_have_nobody_in_the_target():
    doc = group("range")
    doc["members"][0]["assignment"] += [["gone", 0], ["orders", 7]]
    moves = readiness(doc).moves
    assert ("gone", 0, "m0", "") in moves and ("orders", 7, "m0", "") in moves
    assert list(moves) == sorted(moves, key=lambda move: (move[0], move[1]))

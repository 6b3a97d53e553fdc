"""PlannedAssignor with kafka-python's own objects: cluster metadata, JoinGroup members, subscriptions, assignors."""

from __future__ import annotations

import copy
import json
import logging
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
from kafka.cluster import ClusterMetadata
from kafka.coordinator.assignors.abstract import RebalanceProtocol
from kafka.coordinator.assignors.cooperative_sticky import CooperativeStickyAssignor
from kafka.coordinator.assignors.range import RangePartitionAssignor
from kafka.coordinator.assignors.roundrobin import RoundRobinPartitionAssignor
from kafka.protocol.consumer.group import JoinGroupResponse
from kafka.protocol.consumer.metadata import ConsumerProtocolSubscription
from kafka.protocol.metadata import MetadataResponse

from jobs.apply import PlannedAssignor, parse_plan, write_plan
from jobs.apply.matching import LiveMember, client_id_of, match_members
from jobs.apply.plan_file import PlanError, load_plan

REPO = Path(__file__).resolve().parents[2]
LOGGER = "jobs.apply.planned_assignor"

# Three members, 6 + 2 partitions, planned in contiguous blocks (what neither range nor roundrobin would give).
PLAN = {
    "format": "rebalance-plan/1",
    "group_id": "payments",
    "generation_id": 4,
    "strategy": "range",
    "created_at": "2026-11-21T02:00:00Z",
    "snapshot_id": "scheduled__2026-11-21",
    "topics": {"orders": 6, "refunds": 2},
    "members": {
        "c-0-0b8f": {
            "client_id": "c-0",
            "group_instance_id": None,
            "topics": ["orders", "refunds"],
            "assignment": {"orders": [4, 5], "refunds": [1]},
        },
        "c-1-77aa": {
            "client_id": "c-1",
            "group_instance_id": None,
            "topics": ["orders", "refunds"],
            "assignment": {"orders": [0, 1, 2]},
        },
        "c-2-1e0d": {
            "client_id": "c-2",
            "group_instance_id": None,
            "topics": ["orders", "refunds"],
            "assignment": {"orders": [3], "refunds": [0]},
        },
    },
}


def cluster(topics: dict[str, int]) -> ClusterMetadata:
    """Real cluster metadata, updated from an encoded-and-decoded MetadataResponse as a client receives one."""
    response = MetadataResponse(
        version=9,
        throttle_time_ms=0,
        brokers=[MetadataResponse.MetadataResponseBroker(node_id=0, host="127.0.0.1", port=9092, rack=None)],
        cluster_id="test",
        controller_id=0,
        topics=[
            MetadataResponse.MetadataResponseTopic(
                error_code=0,
                name=topic,
                is_internal=False,
                partitions=[
                    MetadataResponse.MetadataResponseTopic.MetadataResponsePartition(
                        error_code=0,
                        partition_index=p,
                        leader_id=0,
                        leader_epoch=0,
                        replica_nodes=[0],
                        isr_nodes=[0],
                        offline_replicas=[],
                    )
                    for p in range(count)
                ],
            )
            for topic, count in topics.items()
        ],
    )
    metadata = ClusterMetadata()
    metadata.update_metadata(MetadataResponse.decode(response.encode(version=9), version=9))
    return metadata


def member(client_id: str, topics=("orders", "refunds"), *, instance=None, owned=None, member_id=None):
    """A JoinGroup member as the leader decodes it: a broker-made member id and its subscription.

    `owned` (a set of partitions) makes it a KIP-429 v1 subscription listing what the member owns.
    """
    subscription = RangePartitionAssignor.metadata(set(topics))
    if owned is not None:
        by_topic: dict[str, list[int]] = {}
        for t, p in sorted(owned):
            by_topic.setdefault(t, []).append(p)
        subscription = ConsumerProtocolSubscription(
            version=1,
            topics=sorted(topics),
            user_data=b"",
            owned_partitions=[
                ConsumerProtocolSubscription.TopicPartition(topic=t, partitions=ps) for t, ps in by_topic.items()
            ],
        )
    data = JoinGroupResponse.JoinGroupResponseMember(
        member_id=member_id or f"{instance or client_id}-{uuid.uuid4()}", group_instance_id=instance, metadata=b""
    )
    data.metadata = subscription
    return data


def planned_of(plan: dict) -> dict[str, set[tuple[str, int]]]:
    """client id -> planned partitions."""
    return {m["client_id"]: {(t, p) for t, ps in m["assignment"].items() for p in ps} for m in plan["members"].values()}


def by_client(result: dict, members: list) -> dict[str, set[tuple[str, int]]]:
    return {
        client_id_of(m.member_id): {(tp.topic, tp.partition) for tp in result[m.member_id].partitions()}
        for m in members
    }


def test_a_restarted_group_gets_the_plan(caplog: pytest.LogCaptureFixture) -> None:
    members = [member("c-0"), member("c-1"), member("c-2")]
    with caplog.at_level(logging.INFO, LOGGER):
        result = PlannedAssignor(PLAN).assign(cluster({"orders": 6, "refunds": 2}), members)
    assert by_client(result, members) == planned_of(PLAN)
    assert by_client(result, members) != by_client(
        RangePartitionAssignor.assign(cluster({"orders": 6, "refunds": 2}), members), members
    )
    [record] = caplog.records
    assert record.levelno == logging.INFO and "serving plan of group 'payments' generation 4" in record.getMessage()


def test_static_members_match_by_group_instance_id_whatever_their_client_id() -> None:
    plan = copy.deepcopy(PLAN)
    for i, m in enumerate(plan["members"].values()):
        m["group_instance_id"] = f"payments-instance-{i}"
    members = [member(f"other-{i}", instance=f"payments-instance-{i}") for i in (2, 0, 1)]
    result = PlannedAssignor(plan).assign(cluster({"orders": 6, "refunds": 2}), members)
    got = {m.group_instance_id: {(tp.topic, tp.partition) for tp in result[m.member_id].partitions()} for m in members}
    assert got == {m["group_instance_id"]: planned_of(plan)[m["client_id"]] for m in plan["members"].values()}


@pytest.mark.parametrize(
    ("members", "topics", "reason"),
    [
        (
            lambda: [member("c-0"), member("c-1"), member("c-2"), member("c-9")],
            {"orders": 6, "refunds": 2},
            "member 'c-9-",
        ),
        (
            lambda: [member("c-0"), member("c-1")],
            {"orders": 6, "refunds": 2},
            "planned member 'c-2-1e0d' (client id 'c-2') is missing",
        ),
        (
            lambda: [member("c-0"), member("c-1"), member("c-2", ("orders",))],
            {"orders": 6, "refunds": 2},
            "differs: planned ['orders', 'refunds'], now ['orders']",
        ),
        (
            lambda: [member("c-0"), member("c-1"), member("c-2")],
            {"orders": 8, "refunds": 2},
            "partition count of 'orders' changed: planned 6, now 8",
        ),
    ],
    ids=["unknown-member", "missing-member", "subscription", "partition-count"],
)
def test_a_group_that_differs_from_the_plan_gets_the_fallback_with_one_line_saying_why(
    members, topics, reason, caplog: pytest.LogCaptureFixture
) -> None:
    members = members()
    metadata = cluster(topics)
    with caplog.at_level(logging.INFO, LOGGER):
        result = PlannedAssignor(PLAN, fallback=RoundRobinPartitionAssignor).assign(metadata, members)
    assert result == RoundRobinPartitionAssignor.assign(metadata, members)
    [record] = caplog.records
    assert record.levelno == logging.WARNING and reason in record.getMessage()
    assert "plan of group 'payments' generation 4 not served" in record.getMessage()
    assert record.getMessage().endswith("assigning with roundrobin")


def test_the_plan_file_is_read_at_every_assignment(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    path = tmp_path / "payments.plan.json"
    assignor = PlannedAssignor(path)
    members = [member("c-0"), member("c-1"), member("c-2")]
    metadata = cluster({"orders": 6, "refunds": 2})
    with caplog.at_level(logging.WARNING, LOGGER):
        assert assignor.assign(metadata, members) == RangePartitionAssignor.assign(metadata, members)
    assert f"no plan served (plan file {path}: No such file or directory)" in caplog.records[0].getMessage()
    write_plan(parse_plan(PLAN), path)
    assert by_client(assignor.assign(metadata, members), members) == planned_of(PLAN)
    newer = copy.deepcopy(PLAN)
    newer["generation_id"] = 5
    newer["members"]["c-0-0b8f"]["assignment"] = {"orders": [4, 5, 3], "refunds": [1]}
    newer["members"]["c-2-1e0d"]["assignment"] = {"refunds": [0]}
    write_plan(parse_plan(newer), path)
    assert by_client(assignor.assign(metadata, members), members) == planned_of(newer)
    path.write_text("{not json")
    caplog.clear()
    with caplog.at_level(logging.WARNING, LOGGER):
        assert assignor.assign(metadata, members) == RangePartitionAssignor.assign(metadata, members)
    assert f"plan file {path}: invalid JSON" in caplog.records[0].getMessage()


def test_cooperative_plan_revokes_before_it_moves_then_completes() -> None:
    """KIP-429: round 1 withholds partitions another member still owns; round 2, after the revocation, completes."""
    planned = PlannedAssignor(PLAN, fallback=CooperativeStickyAssignor)
    assert planned.supported_protocols() == [RebalanceProtocol.COOPERATIVE]
    metadata = cluster({"orders": 6, "refunds": 2})
    ids = {c: f"{c}-{uuid.uuid4()}" for c in ("c-0", "c-1", "c-2")}

    def rejoin(owned: dict[str, set[tuple[str, int]]]) -> dict[str, set[tuple[str, int]]]:
        members = [member(c, owned=owned[c], member_id=ids[c]) for c in ids]
        return by_client(planned.assign(metadata, members), members)

    owned = {
        "c-0": {("orders", 0), ("orders", 1), ("orders", 2)},
        "c-1": {("orders", 3), ("orders", 4), ("orders", 5)},
        "c-2": {("refunds", 0), ("refunds", 1)},
    }
    first = rejoin(owned)
    assert first == {"c-0": set(), "c-1": set(), "c-2": {("refunds", 0)}}
    # Kafka: ConsumerCoordinator.validateCooperativeAssignment - no partition added while another member revokes it.
    added = set().union(*(first[c] - owned[c] for c in ids))
    revoked = set().union(*(owned[c] - first[c] for c in ids))
    assert not added & revoked
    assert rejoin(first) == planned_of(PLAN)  # the members revoked what they lost: the plan lands whole


def test_matching_needs_a_unique_client_id() -> None:
    plan = parse_plan(PLAN)
    shared = [LiveMember(f"c-0-{uuid.uuid4()}", None, "c-0"), LiveMember(f"c-0-{uuid.uuid4()}", None, "c-0")]
    match = match_members(plan.members, [*shared, LiveMember(f"c-1-{uuid.uuid4()}", None, "c-1")])
    assert sorted(match.planned.values()) == ["c-1-77aa"]
    assert {m.member_id for m in match.unknown} == {m.member_id for m in shared}
    assert [p.member_id for p in match.missing] == ["c-0-0b8f", "c-2-1e0d"]
    # A member that never left keeps its member id: matched even with no client id to go by.
    assert match_members(plan.members, [LiveMember("c-2-1e0d")]).planned == {"c-2-1e0d": "c-2-1e0d"}
    assert client_id_of(f"my-app-7-{uuid.uuid4()}") == "my-app-7"
    assert client_id_of("rdkafka-no-uuid") is None


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (lambda d: d["members"]["c-1-77aa"]["assignment"].update(refunds=[1]), "partition 1 is also planned for"),
        (lambda d: d["members"]["c-1-77aa"]["assignment"].update(orders=[0, 1, 2, 6]), "partition 6 out of range"),
        (lambda d: d["members"]["c-1-77aa"]["assignment"].update(orders=[0, 1]), "topics.orders: partitions [2]"),
        (lambda d: d["members"]["c-1-77aa"].update(topics=["refunds"]), "c-1-77aa.assignment.orders: the member"),
        (lambda d: d.update(format="other/2"), "format: expected 'rebalance-plan/1'"),
        (lambda d: d.update(generation_id="4"), "generation_id: expected an integer >= 1, got '4'"),
    ],
)
def test_a_bad_plan_is_refused_naming_the_json_path(edit, message: str, tmp_path: Path) -> None:
    doc = copy.deepcopy(PLAN)
    edit(doc)
    with pytest.raises(PlanError, match=message.replace("[", r"\[").replace("]", r"\]")):
        parse_plan(doc)
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(doc))
    with pytest.raises(PlanError, match=f"plan file {path}"):
        load_plan(path)


def test_a_plan_round_trips_through_its_file(tmp_path: Path) -> None:
    path = tmp_path / "plan.json"
    write_plan(parse_plan(PLAN), path)
    assert load_plan(path) == parse_plan(PLAN) and json.loads(path.read_text()) == PLAN
    assert [p.name for p in tmp_path.iterdir()] == ["plan.json"]


def test_the_assignor_imports_with_kafka_python_and_the_standard_library_only() -> None:
    # The product's errors (planner.errors, standard library only) are the one module of the planner it may import.
    forbidden = ("pyspark", "deltalake", "pyarrow", "numpy", "pandas", "planner", "schemas")
    allowed = ("planner", "planner.errors")
    code = (
        "import sys\n"
        "class Deny:\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        f"        if name.split('.')[0] in {forbidden!r} and name not in {allowed!r}:\n"
        "            raise ImportError('forbidden import ' + name)\n"
        "sys.meta_path.insert(0, Deny())\n"
        "from jobs.apply.planned_assignor import PlannedAssignor\n"
    )
    result = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr[-2000:]


def test_python_and_java_members_vote_for_one_protocol_name() -> None:
    """kafka-python and Java PlannedAssignor members can share a classic group only if their protocol names agree."""
    java = (REPO / "jvm/planned-assignor/src/main/java/io/rebalanceplanner/apply/PlannedAssignor.java").read_text()
    assert f'public static final String NAME = "{PlannedAssignor.name}";' in java
    assert PlannedAssignor.name == "rebalance-planned"

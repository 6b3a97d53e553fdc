"""Migration readiness proven on Apache Kafka: the planner's verdict before a real upgrade or downgrade, then the
broker's own decision.

- A classic range group (kafka-python) is ready; a consumer-protocol member (librdkafka, group.protocol=consumer)
  joins while the classic members still run, and the coordinator converts the group online.
- A classic group whose custom assignor puts user data in the members' assignments is not ready; the coordinator
  refuses the upgrade (GROUP_ID_NOT_FOUND, "an unsupported custom assignor is in use") and the group stays classic.
- A consumer group (librdkafka) is ready to go back; a classic member joins it and the consumer-protocol members
  leave, and the coordinator converts it to a classic group.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from kafka.coordinator.assignors.range import RangePartitionAssignor

from jobs.demo import cluster as demo_cluster
from jobs.demo.protocol_members import MemberError, ProtocolGroup
from jobs.io.kafka_broker import Broker
from jobs.io.kafka_settings import KafkaSettings
from jobs.io.kafka_source import UnknownGroupError, pull_snapshots
from planner.migration import downgrade_readiness, readiness

pytestmark = [pytest.mark.kafka, pytest.mark.slow]
TOPIC = "migration-orders"


@pytest.fixture(scope="module")
def bootstrap(kafka_broker: Broker) -> str:
    demo_cluster.create_topics(kafka_broker.bootstrap, {TOPIC: 6})
    return kafka_broker.bootstrap


def group_type(bootstrap: str, group_id: str) -> str | None:
    from kafka import KafkaAdminClient

    with KafkaAdminClient(bootstrap_servers=[bootstrap], client_id="migration-watch") as admin:
        return next((g.get("group_type") for g in admin.list_groups() if g["group_id"] == group_id), None)


def wait_for(what: str, check: Callable[[], bool], timeout_s: float = 60.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.3)


@contextlib.contextmanager
def polled(consumer: Any, poll: Callable[[], Any], close: Callable[[], Any]) -> Iterator[Any]:
    """Poll a client in its own thread (clients are not thread-safe) until the block ends, then close it."""
    stop = threading.Event()

    def loop() -> None:
        while not stop.is_set():
            poll()
        close()

    thread = threading.Thread(target=loop, daemon=True)
    thread.start()
    try:
        yield consumer
    finally:
        stop.set()
        thread.join(timeout=30)


def classic_member(bootstrap: str, group_id: str, client_id: str, assignor: Any = None) -> Any:
    from kafka import KafkaConsumer
    from kafka.coordinator.assignors.range import RangePartitionAssignor

    consumer = KafkaConsumer(
        TOPIC,
        bootstrap_servers=[bootstrap],
        group_id=group_id,
        client_id=client_id,
        partition_assignment_strategy=[assignor or RangePartitionAssignor],
        session_timeout_ms=10_000,
        heartbeat_interval_ms=500,
    )
    return polled(consumer, lambda: consumer.poll(timeout_ms=100), consumer.close)


def consumer_member(bootstrap: str, group_id: str, client_id: str) -> Any:
    from confluent_kafka import Consumer

    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": group_id, "client.id": client_id, "group.protocol": "consumer"}
    )
    consumer.subscribe([TOPIC])
    return polled(consumer, lambda: consumer.poll(0.1), consumer.close)


def stable_snapshot(bootstrap: str, group_id: str, members: int) -> dict[str, Any]:
    docs: list[dict[str, Any]] = []

    def pulled() -> bool:
        try:
            docs[:] = pull_snapshots(KafkaSettings(bootstrap), group_pattern=group_id)
        except UnknownGroupError:  # not formed yet
            return False
        return bool(docs) and docs[0]["state"] == "Stable" and len(docs[0]["members"]) == members

    wait_for(f"{group_id} stable with {members} members", pulled)
    return docs[0]


class UserDataAssignor(RangePartitionAssignor):  # type: ignore[misc]
    """A custom client assignor (range's layout) that keeps state in every member's assignment user data."""

    name = "stateful-range"

    @classmethod
    def assign(cls, cluster: Any, members: Any) -> dict[str, Any]:
        from kafka.coordinator.assignors.abstract import ConsumerProtocolAssignment

        ranged = super().assign(cluster, members)
        return {
            member_id: ConsumerProtocolAssignment(cls.version, a.assignment, b"state-v1")
            for member_id, a in ranged.items()
        }


def test_a_ready_classic_group_is_upgraded_online_when_a_consumer_protocol_member_joins(bootstrap: str) -> None:
    group_id = "migration-up"
    with classic_member(bootstrap, group_id, "up-c0"), classic_member(bootstrap, group_id, "up-c1"):
        doc = stable_snapshot(bootstrap, group_id, 2)
        verdict = readiness(doc)
        assert (verdict.ready, verdict.server_assignor, verdict.blockers) == (True, "range", ())
        with consumer_member(bootstrap, group_id, "up-k0"):
            wait_for("the online upgrade", lambda: group_type(bootstrap, group_id) == "consumer")
            upgraded = stable_snapshot(bootstrap, group_id, 3)
    assert upgraded["group_type"] == "consumer"
    assert {m["client_id"] for m in upgraded["members"]} == {"up-c0", "up-c1", "up-k0"}


def test_assignment_user_data_blocks_the_upgrade_and_the_broker_refuses_it(
    kafka_broker: Broker, bootstrap: str
) -> None:
    from kafka import KafkaAdminClient

    group_id = "migration-custom"
    with (
        classic_member(bootstrap, group_id, "custom-c0", UserDataAssignor),
        classic_member(bootstrap, group_id, "custom-c1", UserDataAssignor),
    ):
        doc = stable_snapshot(bootstrap, group_id, 2)
        assert all(m.get("assignment_user_data") for m in doc["members"])
        verdict = readiness(doc)
        assert not verdict.ready
        assert verdict.blockers == (
            "the assignments of 2 members carry user data from the 'stateful-range' assignor, which the consumer "
            "protocol would lose: Kafka refuses the online upgrade (switch to a built-in assignor first)",
        )
        with (
            KafkaAdminClient(bootstrap_servers=[bootstrap], client_id="migration-custom") as admin,
            pytest.raises(MemberError, match="GroupIdNotFoundError: .*unsupported custom assignor is in use"),
        ):
            ProtocolGroup(admin, group_id).join([TOPIC])
        assert group_type(bootstrap, group_id) == "classic"
        assert len(stable_snapshot(bootstrap, group_id, 2)["members"]) == 2


def test_a_consumer_group_goes_back_to_classic_when_its_consumer_protocol_members_leave(bootstrap: str) -> None:
    group_id = "migration-down"
    with classic_member(bootstrap, group_id, "down-c0"):
        with consumer_member(bootstrap, group_id, "down-k0"), consumer_member(bootstrap, group_id, "down-k1"):
            # Started in this order the group is first classic, then upgraded by the consumer-protocol members.
            wait_for("the upgrade", lambda: group_type(bootstrap, group_id) == "consumer")
            doc = stable_snapshot(bootstrap, group_id, 3)
            verdict = downgrade_readiness(doc)
            assert (verdict.ready, verdict.blockers) == (True, ())
            assert downgrade_readiness(doc, policy="upgrade").blockers == (
                "group.consumer.migration.policy=upgrade does not allow online downgrades (offline only)",
            )
        wait_for("the online downgrade", lambda: group_type(bootstrap, group_id) == "classic")
        after = stable_snapshot(bootstrap, group_id, 1)
    assert after["group_type"] == "classic"
    assert [m["client_id"] for m in after["members"]] == ["down-c0"]

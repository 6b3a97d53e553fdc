"""The Kafka source against Apache Kafka with real consumer groups running."""

from __future__ import annotations

import base64
import json
import threading
from collections.abc import Iterator
from pathlib import Path

import jsonschema
import mmh3
import pyarrow.parquet as pq
import pytest

from jobs.cli import main
from jobs.demo import cluster as demo_cluster
from jobs.io.kafka_settings import KafkaSettings
from jobs.io.kafka_source import (
    BrokerUnreachableError,
    UnknownGroupError,
    UnknownTopicError,
    pull_snapshots,
    sample_keys,
)
from schemas.snapshot import snapshot_schema
from schemas.tables import KEY_SAMPLES

pytestmark = pytest.mark.kafka
PREFIX = "src-"


@pytest.fixture(scope="module")
def cluster(kafka_broker: demo_cluster.Broker) -> Iterator[demo_cluster.Cluster]:
    classic = [g for g in demo_cluster.DEFAULT_GROUPS if g.group_protocol == "classic"]  # KIP-848: test_kip848_source
    with demo_cluster.running(
        bootstrap=kafka_broker.bootstrap, groups=classic, prefix=PREFIX, records_per_topic=1_500
    ) as c:
        yield c


@pytest.fixture(scope="module")
def settings(cluster: demo_cluster.Cluster) -> KafkaSettings:
    return KafkaSettings(cluster.bootstrap, connect_timeout_ms=5_000, request_timeout_ms=10_000)


@pytest.fixture(scope="module")
def snapshots(cluster: demo_cluster.Cluster, settings: KafkaSettings) -> dict[str, dict]:
    return {d["group_id"]: d for d in pull_snapshots(settings, group_pattern=PREFIX + "*")}


def pairs(tps: list[list]) -> set[tuple[str, int]]:
    return {(t, p) for t, p in tps}


def test_every_running_group_is_pulled_and_valid(cluster: demo_cluster.Cluster, snapshots: dict) -> None:
    assert set(snapshots) == set(cluster.groups)
    for doc in snapshots.values():
        jsonschema.validate(doc, snapshot_schema())
        assert (doc["state"], doc["source"], doc["protocol_type"]) == ("Stable", "kafka", "consumer")


def test_members_subscriptions_and_assignments_equal_the_clients(
    cluster: demo_cluster.Cluster, snapshots: dict
) -> None:
    for group_id, group in cluster.groups.items():
        doc = snapshots[group_id]
        assert doc["protocol"] == group.spec.strategy
        by_client = {m["client_id"]: m for m in doc["members"]}
        assert set(by_client) == set(group.members)
        for client_id, assigned in group.assignments().items():
            member = by_client[client_id]
            # Kafka's classic coordinator names a member `<group.instance.id or client.id>-<UUID>`
            # (GroupMetadataManager.classicGroupJoinNewMember); librdkafka sends its own client id too.
            assert member["member_id"].startswith(member["group_instance_id"] or client_id)
            assert sorted(member["topics"]) == sorted(group.spec.topics)
            assert pairs(member["assignment"]) == assigned
            assert member["strategies"] == [group.spec.strategy]
            assert (member["group_instance_id"] is not None) == group.spec.static
            if group.spec.strategy == "cooperative-sticky":
                assert pairs(member["owned"]) <= assigned  # KIP-429: owned partitions are sent on rejoin


def test_topics_offsets_and_lag_equal_what_was_produced_and_committed(
    cluster: demo_cluster.Cluster, snapshots: dict
) -> None:
    ends = cluster.produced.end_offsets()
    for group_id, group in cluster.groups.items():
        doc = snapshots[group_id]
        assert doc["topics"] == {t: cluster.topics[t] for t in group.spec.topics}
        offsets = {(o["topic"], o["partition"]): o for o in doc["offsets"]}
        assert set(offsets) == set(group.targets)
        for tp, o in offsets.items():
            assert o["end"] == ends[tp]
            assert o["committed"] == group.committed[tp]
            assert o["end"] - o["committed"] == ends[tp] - group.committed[tp] > 0 or ends[tp] == 0


def test_default_pattern_skips_groups_without_members_but_a_pattern_records_them(
    cluster: demo_cluster.Cluster, settings: KafkaSettings
) -> None:
    from kafka import KafkaConsumer
    from kafka.structs import OffsetAndMetadata, TopicPartition

    idle = PREFIX + "idle"
    consumer = KafkaConsumer(bootstrap_servers=[cluster.bootstrap], group_id=idle, enable_auto_commit=False)
    try:
        consumer.assign([TopicPartition(PREFIX + "orders", 0)])
        consumer.commit({TopicPartition(PREFIX + "orders", 0): OffsetAndMetadata(3, "", -1)})
    finally:
        consumer.close(autocommit=False)
    assert idle not in {d["group_id"] for d in pull_snapshots(settings)}
    [doc] = pull_snapshots(settings, group_pattern=idle)
    assert (doc["state"], doc["members"]) == ("Empty", [])
    assert {
        "topic": PREFIX + "orders",
        "partition": 0,
        "committed": 3,
        "end": cluster.produced.end_offsets()[(PREFIX + "orders", 0)],
    } in doc["offsets"]


def test_custom_assignor_metadata_is_kept_raw(cluster: demo_cluster.Cluster, settings: KafkaSettings) -> None:
    from kafka import KafkaConsumer
    from kafka.coordinator.assignors.range import RangePartitionAssignor
    from kafka.protocol.consumer.metadata import ConsumerProtocolSubscription

    class RandomAssignor(RangePartitionAssignor):  # a custom assignor, as article A4 writes one
        name = "random-custom"

        @classmethod
        def metadata(cls, topics: set[str]) -> ConsumerProtocolSubscription:
            return ConsumerProtocolSubscription(0, sorted(topics), b"\x00custom-state\xff")

    group_id = PREFIX + "custom"
    consumer = KafkaConsumer(
        PREFIX + "refunds",
        bootstrap_servers=[cluster.bootstrap],
        group_id=group_id,
        client_id="custom-m0",
        partition_assignment_strategy=[RandomAssignor],
        enable_auto_commit=False,
    )
    try:
        while not consumer.assignment():
            consumer.poll(timeout_ms=200)
        stop = threading.Event()
        heartbeat = threading.Thread(target=lambda: [consumer.poll(timeout_ms=100) for _ in iter(stop.is_set, True)])
        heartbeat.start()
        try:
            [doc] = pull_snapshots(settings, group_pattern=group_id)
        finally:
            stop.set()
            heartbeat.join()
    finally:
        consumer.close(autocommit=False)
    [member] = doc["members"]
    assert doc["protocol"] == "random-custom" and member["topics"] == [PREFIX + "refunds"]
    assert base64.b64decode(member["subscription_user_data"]) == b"\x00custom-state\xff"
    assert pairs(member["assignment"]) == {(PREFIX + "refunds", p) for p in range(4)}


def test_undecodable_member_metadata_is_kept_raw_and_does_not_fail() -> None:
    from kafka.protocol.admin import DescribeGroupsResponse

    from jobs.io.kafka_source import _member_document

    Group = DescribeGroupsResponse.DescribedGroup
    member = Group.DescribedGroupMember(
        member_id="m-1",
        group_instance_id=None,
        client_id="c",
        client_host="/h",
        member_metadata=b"\x00\x07garbage",
        member_assignment=b"\x01",
    )
    group = Group(
        error_code=0,
        group_id="g",
        group_state="Stable",
        protocol_type="consumer",
        protocol_data="exotic",
        members=[member],
    )
    doc = _member_document(member, group)
    assert base64.b64decode(doc["metadata_raw"]) == b"\x00\x07garbage"
    assert base64.b64decode(doc["assignment_raw"]) == b"\x01"
    assert doc["topics"] == [] and doc["assignment"] == [] and doc["decode_error"]


def test_unknown_group_is_a_clear_error_and_writes_nothing(settings: KafkaSettings, tmp_path: Path) -> None:
    with pytest.raises(UnknownGroupError, match="no consumer group matches 'no-such-group'"):
        pull_snapshots(settings, group_pattern="no-such-group")
    out = tmp_path / "snap.json"
    code = main(
        [
            "snapshot",
            "--bootstrap-servers",
            settings.bootstrap_servers,
            "--group",
            "no-such-group",
            "--output",
            str(out),
        ]
    )
    assert code != 0 and not out.exists() and list(tmp_path.iterdir()) == []


def test_stopped_broker_is_a_clear_error_and_writes_nothing(tmp_path: Path) -> None:
    with demo_cluster.broker() as stopped:
        address = stopped.bootstrap
    settings = KafkaSettings(address, connect_timeout_ms=1_500)
    with pytest.raises(BrokerUnreachableError, match=f"no broker answered at {address}"):
        pull_snapshots(settings)
    out = tmp_path / "snap.json"
    assert main(["snapshot", "--bootstrap-servers", address, "--output", str(out)]) != 0
    assert not out.exists()


def test_sampling_returns_the_produced_keys_with_their_true_partitions(
    cluster: demo_cluster.Cluster, settings: KafkaSettings
) -> None:
    topic = PREFIX + "orders"
    produced = {
        (p, o): k
        for t, p, o, k in zip(
            cluster.produced.topic,
            cluster.produced.partition,
            cluster.produced.offset,
            cluster.produced.keys,
            strict=True,
        )
        if t == topic
    }
    table = sample_keys(settings, [topic], records_per_partition=100_000, sample_id="s-all")
    assert table.schema == KEY_SAMPLES.schema
    rows = table.to_pydict()
    assert set(rows["sample_id"]) == {"s-all"}
    assert dict(zip(zip(rows["partition"], rows["offset"], strict=True), rows["key"], strict=True)) == produced
    assert all(size >= 32 for size in rows["value_size"]) and None not in rows["timestamp"]


def test_sampling_takes_the_last_records_and_joins_no_group(
    cluster: demo_cluster.Cluster, settings: KafkaSettings
) -> None:
    from kafka import KafkaAdminClient

    topic = PREFIX + "refunds"
    ends = cluster.produced.end_offsets()
    with KafkaAdminClient(bootstrap_servers=[cluster.bootstrap]) as admin:
        before = {g["group_id"] for g in admin.list_groups()}
        rows = sample_keys(settings, [topic], records_per_partition=25).to_pydict()
        after = {g["group_id"] for g in admin.list_groups()}
    assert before == after
    for p in range(cluster.topics[topic]):
        offsets = sorted(o for q, o in zip(rows["partition"], rows["offset"], strict=True) if q == p)
        assert offsets == list(range(max(0, ends[(topic, p)] - 25), ends[(topic, p)]))
        # Each sampled record stands for its share of the partition's messages: the weights add up to them all.
        weights = [w for q, w in zip(rows["partition"], rows["weight"], strict=True) if q == p]
        assert sum(weights) == pytest.approx(ends[(topic, p)])


def test_consistent_key_sampling_keeps_the_same_keys(settings: KafkaSettings, cluster: demo_cluster.Cluster) -> None:
    topic = PREFIX + "clicks"
    threshold = int(0.25 * 2**32)
    first = sample_keys(settings, [topic], 100_000, key_fraction=0.25, key_seed=11).to_pydict()
    second = sample_keys(settings, [topic], 100_000, key_fraction=0.25, key_seed=11).to_pydict()
    expected = {
        k
        for t, k in zip(cluster.produced.topic, cluster.produced.keys, strict=True)
        if t == topic and mmh3.hash(k, 11, signed=False) < threshold
    }
    assert set(first["key"]) == set(second["key"]) == expected
    assert 0 < len(expected) < len(set(cluster.produced.keys))


def test_sampling_an_unknown_topic_is_a_clear_error(settings: KafkaSettings) -> None:
    with pytest.raises(UnknownTopicError, match="no-such-topic"):
        sample_keys(settings, ["no-such-topic"], 10)


def test_cli_snapshot_writes_the_file_contract_and_samples(cluster: demo_cluster.Cluster, tmp_path: Path) -> None:
    out = tmp_path / "snap.json"
    code = main(
        [
            "snapshot",
            "--bootstrap-servers",
            cluster.bootstrap,
            "--group",
            PREFIX + "billing-*",
            "--sample-topics",
            f"{PREFIX}orders,{PREFIX}refunds",
            "--sample-records",
            "10",
            "--output",
            str(out),
        ]
    )
    assert code == 0
    [doc] = json.loads(out.read_text())
    assert doc["group_id"] == PREFIX + "billing-range"
    samples = pq.read_table(tmp_path / "snap.key_samples.parquet")
    assert samples.num_rows == 10 * (cluster.topics[PREFIX + "orders"] + cluster.topics[PREFIX + "refunds"])

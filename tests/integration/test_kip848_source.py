"""KIP-848 groups in the Kafka source, live against Apache Kafka: the demo's consumer groups (librdkafka with
group.protocol=consumer) pulled with ConsumerGroupDescribe, every field checked against Kafka's own
`kafka-consumer-groups`, and the request through kafka-python's own protocol parser."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import jsonschema
import pytest
from classic_join import join_when_known

from jobs.demo import cluster as demo_cluster
from jobs.io import kip848_source
from jobs.io.kafka_broker import kafka_tool
from jobs.io.kafka_settings import KafkaSettings
from jobs.io.kafka_source import _admin, pull_snapshots
from planner import kip848_protocol as cgd
from schemas.rules import document_errors
from schemas.snapshot import snapshot_schema

pytestmark = pytest.mark.kafka
TOPIC, GROUP = "kip848-orders", "kip848-classic"
PREFIX = "k848-"


@pytest.fixture(scope="module")
def settings(kafka_broker: demo_cluster.Broker) -> KafkaSettings:
    return KafkaSettings(kafka_broker.bootstrap, connect_timeout_ms=5_000, request_timeout_ms=10_000)


@pytest.fixture(scope="module")
def classic_group(kafka_broker: demo_cluster.Broker) -> Iterator[str]:
    """One real classic consumer group (kafka-python, range) holding a 3-partition topic."""
    from kafka import KafkaConsumer

    demo_cluster.create_topics(kafka_broker.bootstrap, {TOPIC: 3})
    consumer = KafkaConsumer(bootstrap_servers=kafka_broker.bootstrap, group_id=GROUP, client_id="k848-c0")
    join_when_known(consumer, TOPIC)
    try:
        yield GROUP
    finally:
        consumer.close()


@pytest.fixture(scope="module")
def consumer_groups(kafka_broker: demo_cluster.Broker) -> Iterator[demo_cluster.Cluster]:
    """The demo's KIP-848 groups (librdkafka, group.protocol=consumer), settled, on their own topics."""
    groups = [g for g in demo_cluster.DEFAULT_GROUPS if g.group_protocol == "consumer"]
    with demo_cluster.running(
        bootstrap=kafka_broker.bootstrap, groups=groups, prefix=PREFIX, records_per_topic=300
    ) as cluster:
        yield cluster


def test_the_broker_speaks_consumer_group_describe(settings):
    with _admin(settings) as admin:
        assert kip848_source.describe_version(admin) == cgd.HIGHEST_VERSION


def test_consumer_groups_are_pulled_with_every_kip848_field(settings, consumer_groups):
    docs = {d["group_id"]: d for d in pull_snapshots(settings, group_pattern=PREFIX + "*")}
    assert set(docs) == set(consumer_groups.groups)
    for group_id, running in consumer_groups.groups.items():
        doc, spec = docs[group_id], running.spec
        jsonschema.validate(doc, snapshot_schema())
        assert document_errors(doc) == []
        assert (doc["group_type"], doc["state"]) == ("consumer", "Stable")
        assert doc["server_assignor"] == (spec.remote_assignor or "uniform")  # group.consumer.assignors' first
        assert doc["group_epoch"] == doc["assignment_epoch"] > 0
        by_client = {m["client_id"]: m for m in doc["members"]}
        assert set(by_client) == set(running.members)
        for index in range(spec.members):
            member = by_client[f"{group_id}-m{index}"]
            # What the client was configured with (the CLI prints none of these: compared with the spec).
            expected_topics = spec.subscriptions[index] if spec.subscriptions else spec.topics
            assert member["topics"] == sorted(expected_topics)
            # librdkafka sends its regex subscriptions joined as "(r1)|(r2)": one here.
            assert member["topic_regex"] == (f"(^{spec.pattern}$)" if spec.pattern else None)
            assert member["rack"] == (spec.racks[index] if spec.racks else None)
            assert member["group_instance_id"] == (f"{group_id}-instance-{index}" if spec.static else None)
            assert member["assignment"] == member["target_assignment"] == member["owned"]
            assert {tuple(tp) for tp in member["assignment"]} == running.assignments()[member["client_id"]]
            assert member["member_epoch"] == doc["assignment_epoch"]


def test_every_field_equals_what_kafka_consumer_groups_prints(settings, consumer_groups):
    """Kafka's own CLI (kafka-tools' ConsumerGroupCommand) against the pulled snapshot, group by group."""
    docs = {d["group_id"]: d for d in pull_snapshots(settings, group_pattern=PREFIX + "*")}
    groups = [arg for g in sorted(docs) for arg in ("--group", g)]
    base = ("--bootstrap-server", settings.bootstrap_servers, "--describe", *groups)
    members = kafka_tool(CONSUMER_GROUPS, *base, "--members", "--verbose")
    states = kafka_tool(CONSUMER_GROUPS, *base, "--state", "--verbose")
    compared = 0
    for row in table_rows(members):
        doc = docs[row["GROUP"]]
        (member,) = [m for m in doc["members"] if m["member_id"] == row["CONSUMER-ID"]]
        assert row["HOST"] == member["host"]
        assert row["CLIENT-ID"] == member["client_id"]
        assert row.get("GROUP-INSTANCE-ID", "-") == (member["group_instance_id"] or "-")
        assert int(row["#PARTITIONS"]) == len(member["assignment"])
        assert int(row["CURRENT-EPOCH"]) == member["member_epoch"]
        assert row["CURRENT-ASSIGNMENT"] == assignment_string(member["assignment"])
        assert int(row["TARGET-EPOCH"]) == doc["assignment_epoch"]
        assert row["TARGET-ASSIGNMENT"] == assignment_string(member["target_assignment"])
        compared += 1
    assert compared == sum(len(d["members"]) for d in docs.values())
    state_rows = {r["GROUP"]: r for r in table_rows(states.replace("COORDINATOR (ID)", "COORDINATOR"))}
    assert set(state_rows) == set(docs)
    for group_id, row in state_rows.items():
        doc = docs[group_id]
        assert row["ASSIGNMENT-STRATEGY"] == doc["server_assignor"]
        assert row["STATE"] == doc["state"]
        assert int(row["GROUP-EPOCH"]) == doc["group_epoch"]
        assert int(row["TARGET-ASSIGNMENT-EPOCH"]) == doc["assignment_epoch"]
        assert int(row["#MEMBERS"]) == len(doc["members"])


CONSUMER_GROUPS = "org.apache.kafka.tools.consumer.group.ConsumerGroupCommand"


def table_rows(text: str) -> list[dict[str, str]]:
    """The rows of ConsumerGroupCommand's tables (a header line, then rows; a blank line between groups)."""
    rows: list[dict[str, str]] = []
    header: list[str] = []
    for line in text.splitlines():
        words = line.split()
        if not words:
            header = []
        elif words[0] == "GROUP":
            header = words
        elif header:
            # The coordinator column prints "host:port  (id)": one value in two words.
            if "COORDINATOR" in header and len(words) == len(header) + 1:
                words = [*words[:2], *words[3:]]
            assert len(words) == len(header), line
            rows.append(dict(zip(header, words, strict=True)))
    return rows


def assignment_string(pairs: list[list[Any]]) -> str:
    """ConsumerGroupCommand.getAssignmentString: "topic:p,p" per topic, partitions ascending, topics sorted, ";"."""
    by_topic: dict[str, list[int]] = {}
    for topic, partition in pairs:
        by_topic.setdefault(topic, []).append(partition)
    parts = sorted(f"{t}:" + ",".join(str(p) for p in sorted(ps)) for t, ps in by_topic.items())
    return ";".join(parts) or "-"


def test_classic_groups_are_pulled_as_classic_and_a_consumer_group_document_passes_the_rules(settings, classic_group):
    (doc,) = pull_snapshots(settings, group_pattern=classic_group)
    jsonschema.validate(doc, snapshot_schema())
    assert (doc["group_type"], doc["state"]) == ("classic", "Stable")
    assert "server_assignor" not in doc and "state_reason" not in doc
    unknown = {
        "group_id": "orders-v2",
        "state": "Unknown",
        "topics": {},
        "members": [],
        **kip848_source.group_fields(kip848_source.unsupported_group("orders-v2")),
    }
    assert document_errors(unknown) == []


def test_consumer_group_describe_travels_through_kafka_pythons_protocol_parser():
    from kafka.protocol.parser import KafkaProtocol

    protocol = KafkaProtocol(client_id="rebalance-planner")
    request = kip848_source.DescribeRequest(cgd.DescribeRequest(("orders-v2",)), 1)
    correlation_id = protocol.send_request(request)
    sent = protocol.send_bytes()
    header = cgd.encode_request_header(1, correlation_id, "rebalance-planner")
    body = cgd.encode_request(cgd.DescribeRequest(("orders-v2",)), 1)
    assert sent == (len(header) + len(body)).to_bytes(4, "big") + header + body

    member = cgd.Member("m0", 5, "c0", "/127.0.0.1", ("orders",), target_assignment=(), member_type=1)
    member = cgd.Member(
        **{**member.__dict__, "assignment": (cgd.AssignedTopic("qo0Pcp70TdGnAa7YKMKCqw", "orders", (0, 2)),)}
    )
    answer = cgd.DescribeResponse((cgd.DescribedGroup("orders-v2", 0, None, "Reconciling", 6, 5, "range", (member,)),))
    payload = correlation_id.to_bytes(4, "big") + b"\x00" + cgd.encode_response(answer, 1)
    ((got_id, response),) = protocol.receive_bytes(len(payload).to_bytes(4, "big") + payload)
    assert (got_id, response) == (correlation_id, answer)

    group = kip848_source.described_group(response.groups[0])
    assert group.fields == {
        "group_type": "consumer",
        "server_assignor": "range",
        "group_epoch": 6,
        "assignment_epoch": 5,
    }
    (doc,) = group.members
    assert doc["assignment"] == doc["owned"] == [["orders", 0], ["orders", 2]]
    assert (doc["target_assignment"], doc["member_epoch"]) == ([], 5)

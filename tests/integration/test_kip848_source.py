"""KIP-848 groups in the Kafka source: the unsupported path live against noida-db (which has no ConsumerGroupDescribe),
and the ConsumerGroupDescribe request through kafka-python's own protocol parser."""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator

import jsonschema
import pytest

from jobs.demo import cluster as demo_cluster
from jobs.io import kip848_source
from jobs.io.kafka_settings import KafkaSettings
from jobs.io.kafka_source import _admin, pull_snapshots
from planner import kip848_protocol as cgd
from schemas.rules import document_errors
from schemas.snapshot import snapshot_schema

pytestmark = pytest.mark.kafka
TOPIC, GROUP = "kip848-orders", "kip848-classic"


@pytest.fixture(scope="module")
def settings(kafka_broker: demo_cluster.Broker) -> KafkaSettings:
    return KafkaSettings(kafka_broker.bootstrap, connect_timeout_ms=5_000, request_timeout_ms=10_000)


@pytest.fixture(scope="module")
def classic_group(kafka_broker: demo_cluster.Broker) -> Iterator[str]:
    """One real classic consumer group (kafka-python, range) holding a 3-partition topic."""
    from kafka import KafkaConsumer

    demo_cluster.create_topics(kafka_broker.bootstrap, {TOPIC: 3})
    consumer = KafkaConsumer(TOPIC, bootstrap_servers=kafka_broker.bootstrap, group_id=GROUP, client_id="k848-c0")
    deadline = time.monotonic() + 30
    while not consumer.assignment() and time.monotonic() < deadline:
        consumer.poll(timeout_ms=200)
    assert consumer.assignment(), "the classic group did not settle"
    try:
        yield GROUP
    finally:
        consumer.close()


def test_noida_db_lacks_consumer_group_describe_and_the_source_says_so(settings, caplog):
    with _admin(settings) as admin:
        assert kip848_protocol_key_absent(admin)
        assert kip848_source.describe_version(admin) is None
        with caplog.at_level(logging.WARNING, logger="jobs.io.kip848_source"):
            groups = kip848_source.describe_consumer_groups(admin, ["orders-v2"])
    assert "unknown: broker lacks ConsumerGroupDescribe (API key 69): 1 consumer groups recorded" in caplog.text
    (group,) = groups.values()
    # Not empty, not dead: a consumer group whose state the broker cannot tell, and why.
    assert (group.group_id, group.group_state, group.members) == ("orders-v2", "Unknown", ())
    assert kip848_source.is_unknown(group)
    assert kip848_source.group_fields(group) == {"group_type": "consumer", "state_reason": kip848_source.UNSUPPORTED}


def kip848_protocol_key_absent(admin) -> bool:
    """The broker's own ApiVersions answer, as kafka-python keeps it, lists no API key 69."""
    versions = admin._manager.broker_version_data.api_versions
    return bool(versions) and cgd.API_KEY not in versions


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

"""Consumer protocol codec: round trips of every version, real clients' bytes, sticky user data, bad bytes."""

import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kafka.protocol.consumer.metadata import ConsumerProtocolAssignment as KpAssignment
from kafka.protocol.consumer.metadata import ConsumerProtocolSubscription as KpSubscription

from planner.protocol import (
    Assignment,
    ProtocolError,
    StickyUserData,
    Subscription,
    decode_assignment,
    decode_cooperative_user_data,
    decode_sticky_user_data,
    decode_subscription,
    encode_assignment,
    encode_cooperative_user_data,
    encode_sticky_user_data,
    encode_subscription,
)

OWNED = (("orders", (0, 2)), ("refunds", (1,)))


def _sub(version: int) -> Subscription:
    """A subscription using every field its version has."""
    return Subscription(
        topics=("orders", "refunds"),
        user_data=b"\x00\x01",
        owned_partitions=OWNED if version >= 1 else (),
        generation_id=41 if version >= 2 else -1,
        rack_id="az1" if version >= 3 else None,
        version=version,
    )


@pytest.mark.parametrize("version", [0, 1, 2, 3])
def test_subscription_round_trip_and_kafka_python_agree(version: int) -> None:
    sub = _sub(version)
    raw = encode_subscription(sub)
    assert decode_subscription(raw) == sub
    kp = KpSubscription.decode(raw)
    assert kp.version == version and list(kp.topics) == ["orders", "refunds"] and kp.user_data == b"\x00\x01"
    tp = KpSubscription.TopicPartition
    fields = (
        {"owned_partitions": [tp(topic=t, partitions=list(p)) for t, p in sub.owned_partitions]} if version >= 1 else {}
    )
    if version >= 2:
        fields["generation_id"] = 41
    if version >= 3:
        fields["rack_id"] = "az1"
    theirs = KpSubscription(version=version, topics=["orders", "refunds"], user_data=b"\x00\x01", **fields)
    assert bytes(theirs.encode()) == raw


@pytest.mark.parametrize("version", [0, 1, 2, 3])
def test_assignment_round_trip_and_kafka_python_agree(version: int) -> None:
    a = Assignment(partitions=OWNED, user_data=None, version=version)
    raw = encode_assignment(a)
    assert decode_assignment(raw) == a
    tp = KpAssignment.TopicPartition
    theirs = KpAssignment(
        version=version, assigned_partitions=[tp(topic=t, partitions=list(p)) for t, p in OWNED], user_data=None
    )
    assert bytes(theirs.encode()) == raw


def test_decodes_librdkafka_member_metadata() -> None:
    """rd_kafka_consumer_protocol_member_metadata_new: version 3, empty (not null) user data for Kafka 0.9."""
    raw = (
        struct.pack(">hi", 3, 1)
        + struct.pack(">h", 6)
        + b"orders"
        + struct.pack(">i", 0)
        + struct.pack(">i", 1)
        + struct.pack(">h", 6)
        + b"orders"
        + struct.pack(">iii", 2, 0, 5)
        + struct.pack(">i", -1)
        + struct.pack(">h", -1)
    )
    assert decode_subscription(raw) == Subscription(("orders",), b"", (("orders", (0, 5)),), -1, None, 3)


def test_newer_version_is_read_by_its_known_prefix() -> None:
    raw = encode_subscription(_sub(3))
    future = struct.pack(">h", 7) + raw[2:] + b"\x00\x00\x00\x2a-new-field"
    sub = decode_subscription(future)
    assert sub.version == 7 and sub.rack_id == "az1" and sub.owned_partitions == OWNED
    assert decode_assignment(struct.pack(">h", 9) + encode_assignment(Assignment(OWNED))[2:]).partitions == OWNED


def test_seed_003_version_0_layout() -> None:
    """Seed 003: version (2 bytes), topics, user_data; its "always 0" is only true of version 0."""
    raw = encode_subscription(Subscription(("t",), None, version=0))
    assert raw == b"\x00\x00" + b"\x00\x00\x00\x01" + b"\x00\x01t" + b"\xff\xff\xff\xff"


@settings(max_examples=60, deadline=None)
@given(
    st.integers(0, 3),
    st.lists(st.text(min_size=0, max_size=12), max_size=5),
    st.one_of(st.none(), st.binary(max_size=20)),
    st.lists(st.tuples(st.text(max_size=8), st.lists(st.integers(-(2**31), 2**31 - 1), max_size=4)), max_size=3),
    st.integers(-(2**31), 2**31 - 1),
    st.one_of(st.none(), st.text(max_size=6)),
)
def test_subscription_round_trips(version, topics, user_data, owned, generation, rack) -> None:
    sub = Subscription(
        tuple(topics),
        user_data,
        tuple((t, tuple(p)) for t, p in owned) if version >= 1 else (),
        generation if version >= 2 else -1,
        rack if version >= 3 else None,
        version,
    )
    assert decode_subscription(encode_subscription(sub)) == sub


def test_sticky_user_data_v0_v1_and_cooperative() -> None:
    v1 = StickyUserData(OWNED, generation=12)
    assert decode_sticky_user_data(encode_sticky_user_data(v1)) == v1
    v0 = StickyUserData(OWNED, generation=None)
    assert decode_sticky_user_data(encode_sticky_user_data(v0)) == v0
    assert encode_cooperative_user_data(41) == b"\x00\x00\x00\x29"
    assert decode_cooperative_user_data(b"\x00\x00\x00\x29") == 41


def test_kafka_python_sticky_user_data_is_version_prefixed() -> None:
    """kafka-python 3.x puts an int16 version before the v1 body; Java's StickyAssignor cannot parse that
    (its first int32 reads as an array count of 65536) and drops the member's previous assignment."""
    from kafka.coordinator.assignors.sticky.sticky_assignor import StickyPartitionAssignor
    from kafka.structs import TopicPartition

    owned = [TopicPartition("orders", 0), TopicPartition("orders", 2), TopicPartition("refunds", 1)]
    sub = decode_subscription(bytes(StickyPartitionAssignor._metadata(["orders"], owned, 12).encode()))
    decoded = decode_sticky_user_data(sub.user_data)
    assert decoded == StickyUserData(OWNED, 12, version_prefixed=True)
    assert encode_sticky_user_data(decoded) == sub.user_data
    assert struct.unpack(">i", sub.user_data[:4])[0] == 65536


@pytest.mark.parametrize(
    "raw,message",
    [
        (b"", "expected int16 version (2 bytes, 0 left) at byte offset 0"),
        (b"\xff\xfe", "expected a version of 0 or more, got -2 at byte offset 0"),
        (b"\x00\x00\x00\x00\x00\x01\x00\x05ab", "expected string topics[0] (5 bytes, 2 left) at byte offset 8"),
        (
            b"\x00\x00\x7f\xff\xff\xff",
            "count of array topics that fits the remaining 0 bytes, got 2147483647 at byte offset 2",
        ),
        (b"\x00\x00\x00\x00\x00\x01\xff\xfe", "non-negative length for string topics[0], got -2 at byte offset 6"),
        (b"\x00\x00\x00\x00\x00\x00\xff\xff\xff\xfe", "length -1 or more for bytes user_data, got -2 at byte offset 6"),
        (b"\x00\x00\x00\x00\x00\x01\x00\x02\xc3\x28\xff\xff\xff\xff", "UTF-8 in string topics[0]"),
    ],
)
def test_bad_subscription_bytes_name_the_offset(raw: bytes, message: str) -> None:
    with pytest.raises(ProtocolError) as e:
        decode_subscription(raw)
    assert message in str(e.value)
    assert isinstance(e.value, ValueError)


@pytest.mark.parametrize("cut", range(1, 40))
def test_every_truncation_is_rejected(cut: int) -> None:
    raw = encode_subscription(_sub(3))
    with pytest.raises(ProtocolError, match="at byte offset"):
        decode_subscription(raw[: len(raw) - cut])


def test_truncated_assignment_and_user_data() -> None:
    raw = encode_assignment(Assignment(OWNED))
    with pytest.raises(ProtocolError, match=r"assigned_partitions\[1\].partitions .* got 1 at byte offset 35"):
        decode_assignment(raw[:41])
    with pytest.raises(ProtocolError, match="StickyAssignor user data"):
        decode_sticky_user_data(b"\x00\x00\x00\x01\x00")
    with pytest.raises(ProtocolError, match="int32 generation"):
        decode_cooperative_user_data(b"\x00\x01")


def test_encoder_rejects_owned_partitions_in_v0() -> None:
    with pytest.raises(ValueError, match="version 0"):
        encode_subscription(Subscription(("t",), owned_partitions=OWNED, version=0))

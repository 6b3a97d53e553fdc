"""ConsumerGroupDescribe (API key 69) codec: byte layouts from Kafka's message spec, Kafka's own test cases, and a
cross-check against kafka-python's independent JSON-spec-driven codec (flexible versions, compact strings, uuids)."""

from __future__ import annotations

import base64
import json
import uuid

import pytest
from hypothesis import given
from hypothesis import strategies as st

from planner.kip848_protocol import (
    AUTHORIZED_OPERATIONS_OMITTED,
    AssignedTopic,
    DescribedGroup,
    DescribeRequest,
    DescribeResponse,
    Member,
    decode_request,
    decode_response,
    decode_response_header,
    encode_request,
    encode_request_header,
    encode_response,
)
from planner.protocol import ProtocolError

# Kafka: Uuid.fromString("qo0Pcp70TdGnAa7YKMKCqw") (RequestResponseTest) and its 16 bytes.
TOPIC_ID = "qo0Pcp70TdGnAa7YKMKCqw"
TOPIC_ID_BYTES = bytes.fromhex("aa8d0f729ef44dd1a701aed828c282ab")


def hx(text: str) -> bytes:
    return bytes.fromhex(text.replace(" ", ""))


def test_request_bytes_of_kafkas_request_response_test_case():
    # RequestResponseTest.createConsumerGroupDescribeRequest: GroupIds ["group"], IncludeAuthorizedOperations false.
    request = DescribeRequest(("group",), False)
    expected = hx("0206 67726f75700000")  # 1 group (varint 2), "group" (varint 6), false, no tags
    assert encode_request(request, 0) == expected == encode_request(request, 1)
    assert decode_request(expected, 0) == request
    # ConsumerGroupDescribeRequestTest.testGetErrorResponse: two groups, authorized operations asked for.
    both = DescribeRequest(("group0", "group1"), True)
    assert encode_request(both) == hx("0307 67726f75703007 67726f7570310100")


def test_response_bytes_of_kafkas_request_response_test_case():
    # RequestResponseTest.createConsumerGroupDescribeResponse: throttle 1000, group "group" in state Empty,
    # ErrorMessage Errors.NONE.message() ("NONE"), epochs 0, assignor "range", no members, operations omitted.
    response = DescribeResponse(
        (DescribedGroup("group", 0, "NONE", "Empty", 0, 0, "range", (), AUTHORIZED_OPERATIONS_OMITTED),), 1000
    )
    expected = hx(
        "000003e8"  # ThrottleTimeMs 1000
        "02"  # Groups: one
        "0000"  # ErrorCode
        "05 4e4f4e45"  # ErrorMessage "NONE" (compact: length + 1)
        "06 67726f7570"  # GroupId "group"
        "06 456d707479"  # GroupState "Empty"
        "00000000 00000000"  # GroupEpoch, AssignmentEpoch
        "06 72616e6765"  # AssignorName "range"
        "01"  # Members: none
        "80000000"  # AuthorizedOperations: Integer.MIN_VALUE, the default
        "00"  # DescribedGroup tagged fields
        "00"  # response tagged fields
    )
    assert encode_response(response, 0) == expected == encode_response(response, 1)
    assert decode_response(expected, 0) == response


ADMIN_CLIENT_MEMBER = Member(
    member_id="memberId",
    member_epoch=10,
    client_id="clientId",
    client_host="host",
    subscribed_topic_names=("foo",),
    instance_id="instanceId",
    rack_id="rackid",
    subscribed_topic_regex="regex",
    assignment=(AssignedTopic(TOPIC_ID, "foo", (0,)),),
    target_assignment=(AssignedTopic(TOPIC_ID, "foo", (1,)),),
)


def test_member_bytes_of_kafkas_admin_client_test_case():
    # KafkaAdminClientTest.testDescribeMultipleConsumerGroups' ConsumerGroupDescribe answer: grp1 Stable at epoch
    # 10 with assignor range and one member; grp2 GROUP_ID_NOT_FOUND (69). Its random topic ids are fixed here.
    response = DescribeResponse(
        (
            DescribedGroup("grp1", 0, None, "Stable", 10, 10, "range", (ADMIN_CLIENT_MEMBER,), 0),
            DescribedGroup("grp2", 69),
        )
    )
    topic = "{id} 04 666f6f 02 {p} 00"  # TopicId, TopicName "foo", Partitions [p], tagged fields
    member = (
        "09 6d656d6265724964"  # MemberId
        "0b 696e7374616e63654964"  # InstanceId
        "07 7261636b6964"  # RackId
        "0000000a"  # MemberEpoch 10
        "09 636c69656e744964"  # ClientId
        "05 686f7374"  # ClientHost
        "02 04 666f6f"  # SubscribedTopicNames ["foo"]
        "06 7265676578"  # SubscribedTopicRegex "regex"
        f"02 {topic.format(id=TOPIC_ID_BYTES.hex(), p='00000000')} 00"  # Assignment, then its tagged fields
        f"02 {topic.format(id=TOPIC_ID_BYTES.hex(), p='00000001')} 00"  # TargetAssignment
    )
    expected_v0 = hx(
        "00000000 03"
        "0000 00 05 67727031 07 537461626c65 0000000a 0000000a 06 72616e6765"
        f"02 {member} 00"  # one member, its tagged fields
        "00000000 00"
        "0045 00 05 67727032 01 00000000 00000000 01 01 80000000 00"  # grp2: error 69, defaults
        "00"
    )
    assert encode_response(response, 0) == expected_v0
    assert decode_response(expected_v0, 0) == response
    # v1 (KIP-1099) adds MemberType (int8) after TargetAssignment; -1 = unknown.
    expected_v1 = expected_v0.replace(hx(f"{member} 00"), hx(f"{member} ff 00"))
    assert encode_response(response, 1) == expected_v1
    assert decode_response(expected_v1, 1) == response


def test_headers_request_v2_and_response_v1():
    # RequestHeader v2: ApiKey 69, version 0, CorrelationId 7, ClientId as a classic int16 string, tagged fields.
    assert encode_request_header(0, 7, "rp") == hx("0045 0000 00000007 0002 7270 00")
    assert encode_request_header(1, 7, None) == hx("0045 0001 00000007 ffff 00")
    # ResponseHeader v1: CorrelationId then tagged fields (one unknown tag 3 of 2 bytes, skipped).
    assert decode_response_header(hx("00000007 01 03 02 abcd 99")) == (7, 9)


def test_unknown_tagged_fields_are_skipped_as_kafkas_readers_do():
    with_tag = hx("000003e8 0101 05 02 beef")  # no groups; one tagged field (tag 5, 2 bytes) in the response
    assert decode_response(with_tag, 0) == DescribeResponse((), 1000)


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (hx("000003"), "ThrottleTimeMs (4 bytes, 3 left) at byte offset 0"),
        (hx("00000000 7f"), "Groups: a length of 126 that the 0 bytes left can hold at byte offset 4"),
        (hx("00000000 ffffffff7f"), "Groups (a varint of at most 5 bytes) at byte offset 4"),
        (
            hx("00000000 02 0000 00 00" + "00" * 20),
            "DescribedGroup.GroupId (non-nullable string, got null) at byte offset 8",
        ),
        (hx("00000000 01 00 00"), "the end of the message (1 bytes left over) at byte offset 6"),
        (hx("00000000 00 00"), "Groups (non-nullable array, got null) at byte offset 4"),
    ],
)
def test_malformed_responses_name_the_field_and_byte_offset(data, message):
    with pytest.raises(ProtocolError, match="ConsumerGroupDescribeResponse v0: expected ") as error:
        decode_response(data, 0)
    assert message in str(error.value)


def test_versions_outside_0_to_1_are_refused():
    with pytest.raises(ValueError, match="version 2"):
        encode_request(DescribeRequest(("g",)), 2)


# --- cross-check with kafka-python's codec, driven by the message spec -----------------------------------------

# The fields of ConsumerGroupDescribeResponse.json (Kafka; v1 from KIP-1099), transcribed without their docs.
_ASSIGNMENT = [
    {
        "name": "TopicPartitions",
        "type": "[]TopicPartitions",
        "versions": "0+",
        "fields": [
            {"name": "TopicId", "type": "uuid", "versions": "0+"},
            {"name": "TopicName", "type": "string", "versions": "0+"},
            {"name": "Partitions", "type": "[]int32", "versions": "0+"},
        ],
    }
]
SPEC = {
    "apiKey": 69,
    "type": "response",
    "name": "ConsumerGroupDescribeResponse",
    "validVersions": "0-1",
    "flexibleVersions": "0+",
    "fields": [
        {"name": "ThrottleTimeMs", "type": "int32", "versions": "0+"},
        {
            "name": "Groups",
            "type": "[]DescribedGroup",
            "versions": "0+",
            "fields": [
                {"name": "ErrorCode", "type": "int16", "versions": "0+"},
                {"name": "ErrorMessage", "type": "string", "versions": "0+", "nullableVersions": "0+"},
                {"name": "GroupId", "type": "string", "versions": "0+"},
                {"name": "GroupState", "type": "string", "versions": "0+"},
                {"name": "GroupEpoch", "type": "int32", "versions": "0+"},
                {"name": "AssignmentEpoch", "type": "int32", "versions": "0+"},
                {"name": "AssignorName", "type": "string", "versions": "0+"},
                {
                    "name": "Members",
                    "type": "[]Member",
                    "versions": "0+",
                    "fields": [
                        {"name": "MemberId", "type": "string", "versions": "0+"},
                        {"name": "InstanceId", "type": "string", "versions": "0+", "nullableVersions": "0+"},
                        {"name": "RackId", "type": "string", "versions": "0+", "nullableVersions": "0+"},
                        {"name": "MemberEpoch", "type": "int32", "versions": "0+"},
                        {"name": "ClientId", "type": "string", "versions": "0+"},
                        {"name": "ClientHost", "type": "string", "versions": "0+"},
                        {"name": "SubscribedTopicNames", "type": "[]string", "versions": "0+"},
                        {"name": "SubscribedTopicRegex", "type": "string", "versions": "0+", "nullableVersions": "0+"},
                        {"name": "Assignment", "type": "Assignment", "versions": "0+", "fields": _ASSIGNMENT},
                        {"name": "TargetAssignment", "type": "Assignment", "versions": "0+", "fields": _ASSIGNMENT},
                        {"name": "MemberType", "type": "int8", "versions": "1+", "default": "-1"},
                    ],
                },
                {"name": "AuthorizedOperations", "type": "int32", "versions": "0+", "default": "-2147483648"},
            ],
        },
    ],
}


@pytest.fixture(scope="module")
def kafka_python_response(tmp_path_factory: pytest.TempPathFactory):
    """kafka-python's ApiMessage built from SPEC: its own compact-string, varint, uuid and tagged-field codecs."""
    import sys

    from kafka.protocol.api_message import ApiMessage

    root = tmp_path_factory.mktemp("spec")
    package = root / "cgd_spec"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "ConsumerGroupDescribeResponse.json").write_text(json.dumps(SPEC))
    sys.path.insert(0, str(root))
    try:

        class ConsumerGroupDescribeResponse(ApiMessage, load_json="cgd_spec"):
            pass

    finally:
        sys.path.remove(str(root))
    return ConsumerGroupDescribeResponse


def _kafka_python(cls, response: DescribeResponse, version: int):
    group_cls = cls.DescribedGroup
    member_cls = group_cls.Member
    assignment_cls = member_cls.Assignment

    def assignment(topics):
        return assignment_cls(
            topic_partitions=[
                assignment_cls.TopicPartitions(
                    topic_id=uuid.UUID(bytes=base64.urlsafe_b64decode(t.topic_id + "==")),
                    topic_name=t.topic,
                    partitions=list(t.partitions),
                )
                for t in topics
            ]
        )

    groups = [
        group_cls(
            error_code=g.error_code,
            error_message=g.error_message,
            group_id=g.group_id,
            group_state=g.group_state,
            group_epoch=g.group_epoch,
            assignment_epoch=g.assignment_epoch,
            assignor_name=g.assignor_name,
            members=[
                member_cls(
                    member_id=m.member_id,
                    instance_id=m.instance_id,
                    rack_id=m.rack_id,
                    member_epoch=m.member_epoch,
                    client_id=m.client_id,
                    client_host=m.client_host,
                    subscribed_topic_names=list(m.subscribed_topic_names),
                    subscribed_topic_regex=m.subscribed_topic_regex,
                    assignment=assignment(m.assignment),
                    target_assignment=assignment(m.target_assignment),
                    **({"member_type": m.member_type} if version >= 1 else {}),
                )
                for m in g.members
            ],
            authorized_operations=g.authorized_operations,
        )
        for g in response.groups
    ]
    return cls(throttle_time_ms=response.throttle_time_ms, groups=groups, version=version)


_text = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=12)
_int32 = st.integers(-(2**31), 2**31 - 1)
_topic_id = st.binary(min_size=16, max_size=16).map(lambda b: base64.urlsafe_b64encode(b).rstrip(b"=").decode())
_topics = st.lists(st.builds(AssignedTopic, _topic_id, _text, st.lists(_int32, max_size=4).map(tuple)), max_size=3).map(
    tuple
)
_member = st.builds(
    Member,
    member_id=_text,
    member_epoch=_int32,
    client_id=_text,
    client_host=_text,
    subscribed_topic_names=st.lists(_text, max_size=3).map(tuple),
    instance_id=st.none() | _text,
    rack_id=st.none() | _text,
    subscribed_topic_regex=st.none() | _text,
    assignment=_topics,
    target_assignment=_topics,
    member_type=st.sampled_from([-1, 0, 1]),
)
_group = st.builds(
    DescribedGroup,
    group_id=_text,
    error_code=st.integers(-(2**15), 2**15 - 1),
    error_message=st.none() | _text,
    group_state=_text,
    group_epoch=_int32,
    assignment_epoch=_int32,
    assignor_name=_text,
    members=st.lists(_member, max_size=3).map(tuple),
    authorized_operations=_int32,
)
_response = st.builds(DescribeResponse, st.lists(_group, max_size=3).map(tuple), _int32)


@given(response=_response, version=st.sampled_from([0, 1]))
def test_bytes_equal_kafka_pythons_spec_driven_codec_and_decode_back(kafka_python_response, response, version):
    if version == 0:  # v0 has no MemberType: it reads back as unknown
        response = DescribeResponse(
            tuple(
                DescribedGroup(
                    **{
                        **g.__dict__,
                        "members": tuple(Member(**{**m.__dict__, "member_type": -1}) for m in g.members),
                    }
                )
                for g in response.groups
            ),
            response.throttle_time_ms,
        )
    ours = encode_response(response, version)
    theirs = bytes(_kafka_python(kafka_python_response, response, version).encode())
    assert ours == theirs
    assert decode_response(theirs, version) == response


@given(st.lists(_text, max_size=5), st.booleans(), st.sampled_from([0, 1]))
def test_requests_round_trip(group_ids, include, version):
    request = DescribeRequest(tuple(group_ids), include)
    assert decode_request(encode_request(request, version), version) == request

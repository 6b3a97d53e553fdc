"""One rule set for both group forms: the JSON Schema, Kafka's integer types, ids, duplicates, timestamps, limits."""

from __future__ import annotations

import copy
import math
import re
from datetime import UTC, datetime

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from planner import assign
from planner.errors import InputError, LimitError
from schemas import rules
from schemas.conforms import compile_schema
from schemas.rules import (
    INT32_MAX,
    INT64_MAX,
    MAX_ERRORS,
    Limits,
    StrictValidator,
    check_group,
    compact_schema,
    document_errors,
    parse_timestamp,
)
from schemas.snapshot import snapshot_schema

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

COMPACT = {
    "topics": {"orders": 4, "refunds": 2},
    "members": {
        "a": {"topics": ["orders", "refunds"], "owned": [["orders", 0]], "generation": 4},
        "b": {"topics": ["orders"], "group_instance_id": "b-static", "rack": "az1", "weight": 2.0},
    },
    "loads": {"orders": [1.0, 2.5, 0, 3]},
}


def broken(change, doc=GOOD) -> dict:
    doc = copy.deepcopy(doc)
    change(doc)
    return doc


def test_valid_documents_of_both_forms_have_no_errors():
    assert document_errors(GOOD) == []
    assert document_errors(COMPACT) == []
    check_group(GOOD)
    check_group(COMPACT)


# --- the reasons ingest has always given, unchanged -------------------------------------------------------------


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
    assert document_errors([GOOD]) == [f"(document): {[GOOD]!r} is not of type 'object'"]
    assert document_errors(None) == ["(document): None is not of type 'object'"]


# --- integers within Kafka's types, never floats ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda d: d["topics"].update(orders=3.0), "topics.orders: 3.0 is not of type 'integer'"),
        (lambda d: d["topics"].update(orders=True), "topics.orders: True is not of type 'integer'"),
        (lambda d: d.update(generation=4.0), "generation: 4.0 is not of type 'integer'"),
        (lambda d: d["members"][0]["owned"][0].__setitem__(1, 0.0), "members[0].owned[0][1]: 0.0 is not of type"),
        (lambda d: d["offsets"][0].update(end=12.5), "offsets[0].end: 12.5 is not of type 'integer'"),
        (lambda d: d["offsets"][0].update(partition=1e3), "offsets[0].partition: 1000.0 is not of type 'integer'"),
    ],
)
def test_floats_are_refused_where_kafka_has_integers(change, message):
    assert any(e.startswith(message) for e in document_errors(broken(change))), document_errors(broken(change))


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda d: d.update(generation=2**70), f"generation: {2**70} is above Kafka's int32 maximum {INT32_MAX}"),
        (
            lambda d: d["members"][1].update(generation=2**31),
            f"members[1].generation: {2**31} is above Kafka's int32 maximum",
        ),
        (
            lambda d: d["offsets"][0].update(end=2**63),
            f"offsets[0].end: {2**63} is above Kafka's int64 maximum {INT64_MAX}",
        ),
        (lambda d: d["offsets"][0].update(committed=2**64), f"offsets[0].committed: {2**64} is above Kafka's int64"),
        (
            lambda d: d["offsets"][0].update(partition=2**31),
            f"offsets[0].partition: {2**31} is above Kafka's int32 maximum",
        ),
        (
            lambda d: d["members"][0]["owned"].append(["orders", 2**40]),
            f"members[0].owned[1][1]: partition {2**40} is above Kafka's int32 maximum",
        ),
        (lambda d: d.update(generation=-2), "generation: -2 is less than the minimum of -1"),
        (lambda d: d["offsets"][0].update(committed=-2), "offsets[0].committed: -2 is less than the minimum of -1"),
    ],
)
def test_integers_stay_within_kafkas_wire_types(change, message):
    errors = document_errors(broken(change), Limits(max_partitions_per_topic=2**40, max_partitions_per_group=2**40))
    assert any(e.startswith(message) for e in errors), errors


def test_the_largest_values_of_kafkas_types_are_accepted():
    limits = Limits(max_partitions_per_topic=INT32_MAX, max_partitions_per_group=2**40)
    doc = broken(lambda d: (d.update(generation=INT32_MAX), d["offsets"][0].update(committed=0, end=INT64_MAX)))
    doc["topics"]["orders"] = INT32_MAX
    doc["members"][0]["owned"].append(["orders", INT32_MAX - 1])
    assert document_errors(doc, limits) == []
    assert document_errors(broken(lambda d: d["topics"].update(orders=INT32_MAX + 1)), Limits(2**40, 2**40)) == [
        f"topics.orders: partition count {INT32_MAX + 1} is above Kafka's int32 maximum {INT32_MAX}"
    ]


# --- duplicates -------------------------------------------------------------------------------------------------


def test_duplicate_offsets_entries_for_one_partition_are_refused():
    doc = broken(lambda d: d["offsets"].append({"topic": "orders", "partition": 0, "committed": 1, "end": 2}))
    assert document_errors(doc) == ["offsets[1]: duplicate entry for orders-0 (also offsets[0])"]


@pytest.mark.parametrize("field", ["owned", "assignment"])
def test_a_partition_listed_twice_by_one_member_is_refused(field):
    doc = broken(lambda d: d["members"][0][field].extend([["orders", 3], ["orders", 0]]))
    assert document_errors(doc) == [f"members[0].{field}[2]: orders-0 is listed twice (also {field}[0])"]


def test_owners_in_different_generations_are_kafkas_to_resolve_but_one_generation_cannot_own_twice():
    def two_owners(generation_a, generation_b):
        def change(d):
            d["members"][0]["generation"] = generation_a
            d["members"][1].update(generation=generation_b, owned=[["orders", 0]])

        return document_errors(broken(change))

    assert two_owners(3, 4) == []
    assert two_owners(4, 4) == ["members[1].owned[0]: orders-0 is claimed by both 'a' and 'b'"]
    assert two_owners(None, 4) == ["members[1].owned[0]: orders-0 is claimed by both 'a' and 'b'"]  # group's 4


# Groups that pass the schema and break the partition rules now and then: unknown topics, partitions out of range
# or beyond int32, a partition listed twice by one member or by two (in one generation or two), offsets entries
# repeated, out of range, beyond int64, committed above end; a topic name with a control character.
topic_names = st.sampled_from(["orders"] * 8 + ["refunds", "gone", "bell\x07"])
partitions = st.sampled_from([0, 1, 2] * 4 + [3, 2**31])
tps = st.lists(st.tuples(topic_names, partitions).map(list), max_size=4)
offset_entries = st.fixed_dictionaries(
    {"topic": topic_names, "partition": partitions},
    optional={"committed": st.sampled_from([None, -1, 0, 5, 9] * 2 + [2**63]), "end": st.sampled_from([None, 0, 9])},
)
partition_groups = st.builds(
    lambda form, topics, members, offsets: (
        {"group_id": "g", "topics": topics, "members": members, "offsets": offsets}
        if form == "snapshot"
        else {"topics": topics, "members": {m["member_id"]: m for m in members}}
    ),
    st.sampled_from(["snapshot", "compact"]),
    st.fixed_dictionaries(
        {"orders": st.integers(3, 4), "refunds": st.integers(3, 4)}, optional={"bell\x07": st.just(3)}
    ),
    st.lists(
        st.fixed_dictionaries(
            {"member_id": st.sampled_from(["a", "b", "c"]), "topics": st.just([])},
            optional={"owned": tps, "assignment": tps, "target_assignment": tps, "generation": st.integers(1, 2)},
        ),
        unique_by=lambda m: m["member_id"],
        max_size=3,
    ),
    st.lists(offset_entries, max_size=4),
)


@given(partition_groups)
@example(
    {
        "group_id": "g",
        "topics": {"t": 2},
        "members": [
            {"member_id": "a", "topics": [], "assignment": [["t", 0]]},
            {"member_id": "b", "topics": [], "assignment": [["t", 0]]},
        ],
    }
)
@example(
    {
        "group_id": "g",
        "topics": {"t": 2},
        "members": [],
        "offsets": [{"topic": "t", "partition": 1, "committed": 3, "end": 2}],
    }
)
@example(
    {
        "group_id": "g",
        "topics": {"t": 2},
        "members": [],
        "offsets": [{"topic": "t", "partition": 0, "committed": 2**63}],
    }
)
@example({"topics": {"orders": 3}, "members": {"a": {"topics": [], "owned": [["bell\x07", 0]]}}})
@example(
    {
        "group_id": "g",
        "topics": {"bell\x07": 3},
        "members": [{"member_id": "a", "topics": [], "assignment": [["bell\x07", 0]]}],
        "offsets": [{"topic": "bell\x07", "partition": 1}],
    }
)
@settings(max_examples=400, deadline=None)
def test_the_vectorized_partition_checks_agree_with_the_pair_by_pair_ones(doc):
    """A group the vectorized checks pass has nothing the pair-by-pair checks would name (they run otherwise)."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(rules, "_claims_plainly_valid", lambda *_: False)
        patch.setattr(rules, "_offsets_plainly_valid", lambda *_: False)
        one_by_one = document_errors(doc)
    assert document_errors(doc) == one_by_one


# --- ids and stored text ----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda d: d.update(group_id="pay\x00ments"), "group_id: control character U+0000 in 'pay\\x00ments'"),
        (lambda d: d["members"][0].update(member_id="a\n"), "members[0].member_id: control character U+000A in"),
        (lambda d: d["members"][1].update(group_instance_id="\x85"), "members[1].group_instance_id: control character"),
        (lambda d: d["members"][0].update(client_id="c\x7f"), "members[0].client_id: control character U+007F"),
        (lambda d: d["members"][0].update(rack="az\t1"), "members[0].rack: control character U+0009"),
        (lambda d: d["members"][0].update(strategies=["range\x1b"]), "members[0].strategies[0]: control character"),
        (lambda d: d["topics"].update({"t\x01": 1}), "topics['t\\x01']: control character U+0001 in 't\\x01'"),
        (lambda d: d["topics"].update({"\ud800": 1}), "topics['\\ud800']: lone UTF-16 surrogate U+D800"),
        (lambda d: d["members"][0].update(host="\udc00"), "members[0].host: lone UTF-16 surrogate U+DC00"),
        (lambda d: d["topics"].update({"": 1}), "topics: empty topic name (Kafka: Topic.validate)"),
    ],
)
def test_ids_hold_no_control_characters_nor_lone_surrogates(change, message):
    errors = document_errors(broken(change))
    assert any(e.startswith(message) for e in errors), errors
    assert all(e.encode("utf-8") and e.isprintable() for e in errors)


# --- timestamps -------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("2026-11-21T02:00:00Z", datetime(2026, 11, 21, 2, tzinfo=UTC)),
        ("2026-11-21t02:00:00.123456789z", datetime(2026, 11, 21, 2, 0, 0, 123456, tzinfo=UTC)),
        ("2026-11-21 03:30:00+01:30", datetime(2026, 11, 21, 2, tzinfo=UTC)),
        ("2026-11-20T23:00:00-03:00", datetime(2026, 11, 21, 2, tzinfo=UTC)),
        ("2024-02-29T00:00:00Z", datetime(2024, 2, 29, tzinfo=UTC)),
    ],
)
def test_rfc3339_timestamps_are_read_as_utc(text, expected):
    assert parse_timestamp(text) == expected


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("2026-13-45T99:99:99Z", "is not a valid RFC 3339 timestamp: month must be in 1..12"),
        ("2026-02-29T00:00:00Z", "is not a valid RFC 3339 timestamp: day is out of range for month"),
        ("2026-11-21T24:00:00Z", "is not a valid RFC 3339 timestamp: hour must be in 0..23"),
        ("2026-12-31T23:59:60Z", "is not a valid RFC 3339 timestamp: second must be in 0..59"),
        ("2026-11-21T02:00:00+24:00", "is not a valid RFC 3339 timestamp: offset +24:00 is out of range"),
        ("0001-01-01T00:00:00+01:00", "is not a valid RFC 3339 timestamp: date value out of range"),
        ("2026-11-21T02:00:00", "is not an RFC 3339 timestamp"),
        ("2026-11-21T02:00:00+0100", "is not an RFC 3339 timestamp"),
        ("2026-11-21", "is not an RFC 3339 timestamp"),
        ("２０２６-11-21T02:00:00Z", "is not an RFC 3339 timestamp"),
    ],
)
def test_timestamps_are_parsed_strictly(text, reason):
    with pytest.raises(InputError, match="^" + re.escape(f"captured_at: {text!r} {reason}")):
        parse_timestamp(text)
    errors = document_errors(broken(lambda d: d.update(captured_at=text)))
    assert len(errors) == 1 and errors[0].startswith(f"captured_at: {text!r}"), errors


# --- the compact form: the same rules -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("snapshot_change", "compact_change", "reason"),
    [
        (
            lambda d: d["topics"].update(orders=0),
            lambda d: d["topics"].update(orders=0),
            "topics.orders: partition count must be positive, got 0",
        ),
        (
            lambda d: d["topics"].update(orders=3.0),
            lambda d: d["topics"].update(orders=3.0),
            "topics.orders: 3.0 is not of type 'integer'",
        ),
        (
            lambda d: d["members"][0].update(generation=2**31),
            lambda d: d["members"]["a"].update(generation=2**31),
            "generation: 2147483648 is above Kafka's int32 maximum 2147483647",
        ),
        (
            lambda d: d["members"][0]["owned"].append(["orders", 0]),
            lambda d: d["members"]["a"]["owned"].append(["orders", 0]),
            "owned[1]: orders-0 is listed twice (also owned[0])",
        ),
        (
            lambda d: d["members"][0].update(group_instance_id="b-static"),
            lambda d: d["members"]["a"].update(group_instance_id="b-static"),
            "group_instance_id: duplicate static member 'b-static'",
        ),
        (
            lambda d: d["members"][0]["topics"].append("or\x00ders"),
            lambda d: d["members"]["a"]["topics"].append("or\x00ders"),
            "topics[2]: control character U+0000 in 'or\\x00ders'",
        ),
        (
            lambda d: d["members"][0].update(rack=7),
            lambda d: d["members"]["a"].update(rack=7),
            "rack: 7 is not of type 'string', 'null'",
        ),
    ],
)
def test_both_forms_break_the_same_rule_with_the_same_reason(snapshot_change, compact_change, reason):
    snapshot_errors = document_errors(broken(snapshot_change))
    compact_errors = document_errors(broken(compact_change, COMPACT))
    assert any(reason in e for e in snapshot_errors), snapshot_errors
    assert any(reason in e for e in compact_errors), compact_errors


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda d: d["members"]["a"].update(generation=2**31), "members.a.generation: 2147483648 is above"),
        (lambda d: d["members"].update({"c\x07": {"topics": []}}), "members['c\\x07']: control character U+0007"),
        (lambda d: d["members"]["b"].update(weight=0), "members.b.weight: 0 is less than or equal to the minimum of 0"),
        (lambda d: d["members"]["b"].update(weight=float("inf")), "members.b.weight: must be finite, got inf"),
        (lambda d: d["members"]["b"].pop("topics"), "members.b: 'topics' is a required property"),
        (lambda d: d.update(members=[]), "(document): 'group_id' is a required property"),
        (lambda d: d.update(members="a,b"), "members: 'a,b' is not of type 'object'"),
        (lambda d: d.pop("topics"), "(document): 'topics' is a required property"),
        (lambda d: d["loads"].update(orders=[1] * 5), "loads.orders: 5 loads for 4 partitions"),
        (lambda d: d["loads"].update(audit=[1]), "loads.audit: topic 'audit' is missing from topics"),
        (lambda d: d["loads"].update(orders=[-1]), "loads.orders[0]: -1 is less than the minimum of 0"),
        (lambda d: d["loads"].update(orders=["1"]), "loads.orders[0]: '1' is not of type 'number'"),
        (lambda d: d["loads"].update(orders=[float("nan")]), "loads.orders[0]: load must be finite, got nan"),
    ],
)
def test_compact_form_errors_name_the_member_by_its_key(change, message):
    errors = document_errors(broken(change, COMPACT))
    assert any(e.startswith(message) for e in errors), errors


def test_the_compact_form_takes_stale_input_as_kafkas_assignors_do():
    # AbstractPartitionAssignor skips topics without metadata; AbstractStickyAssignor filters owned partitions of
    # vanished topics and resolves double claims by generation (even two in one generation: nobody keeps it).
    doc = broken(
        lambda d: d["members"].update(
            c={"topics": ["orders", "gone"], "owned": [["orders", 0], ["orders", 9], ["gone", 0]], "generation": 4}
        ),
        COMPACT,
    )
    assert document_errors(doc) == []
    assert assign("sticky", doc).assignment


def test_the_compact_schema_is_the_snapshot_schemas_member_keyed_by_id():
    compact, snapshot = compact_schema(), snapshot_schema()
    assert compact["properties"]["topics"] == snapshot["properties"]["topics"]
    assert compact["$defs"]["topic_partition"] == snapshot["$defs"]["topic_partition"]
    member, snapshot_member = compact["$defs"]["member"], snapshot["$defs"]["member"]
    assert member["required"] == ["topics"] and "member_id" not in member["properties"]
    assert {k: v for k, v in member["properties"].items() if k != "weight"} == {
        k: v for k, v in snapshot_member["properties"].items() if k != "member_id"
    }


# --- limits ------------------------------------------------------------------------------------------------------


def test_limits_default_to_a_million_partitions_per_topic_two_per_group_and_100k_members():
    assert Limits.from_env({}) == Limits(1_000_000, 2_000_000, 100_000)


def test_limits_are_read_from_the_environment():
    env = {
        "REBALANCE_MAX_PARTITIONS_PER_TOPIC": "10",
        "REBALANCE_MAX_PARTITIONS_PER_GROUP": " 12 ",
        "REBALANCE_MAX_MEMBERS": "",
    }
    assert Limits.from_env(env) == Limits(10, 12, 100_000)


@pytest.mark.parametrize("value", ["0", "-5", "ten", "1e6", "1" * 5000, "٣"])
def test_a_limit_that_is_not_a_positive_integer_is_an_input_error_naming_the_variable(value):
    with pytest.raises(InputError, match="^REBALANCE_MAX_MEMBERS: must be a positive integer, got "):
        Limits.from_env({"REBALANCE_MAX_MEMBERS": value})


@pytest.mark.parametrize(
    ("doc", "message"),
    [
        (
            {"topics": {"t": 2**31}, "members": {}},
            "topics.t: 2147483648 partitions is over the limit of 1000000 per topic "
            "(REBALANCE_MAX_PARTITIONS_PER_TOPIC)",
        ),
        (
            {"topics": {"t": 2**31 - 1}},
            "topics.t: 2147483647 partitions is over the limit of 1000000 per topic",
        ),
        (
            {"topics": {f"t{i}": 1_000_000 for i in range(3)}},
            "topics: 3000000 partitions in the group is over the limit of 2000000 per group "
            "(REBALANCE_MAX_PARTITIONS_PER_GROUP)",
        ),
        (
            {**GOOD, "members": [{"member_id": f"m{i}", "topics": []} for i in range(100_001)]},
            "members: 100001 members is over the limit of 100000 (REBALANCE_MAX_MEMBERS)",
        ),
    ],
)
def test_limits_are_checked_before_anything_is_allocated(doc, message):
    with pytest.raises(LimitError) as caught:
        check_group(doc, Limits())
    assert message in str(caught.value)
    assert any(message in e for e in document_errors(doc, Limits()))


def test_limits_come_from_the_environment_when_not_given(monkeypatch):
    monkeypatch.setenv("REBALANCE_MAX_MEMBERS", "1")
    with pytest.raises(LimitError, match="^members: 2 members is over the limit of 1 "):
        check_group(GOOD)
    monkeypatch.setenv("REBALANCE_MAX_MEMBERS", "2")
    check_group(GOOD)


# --- check_group ---------------------------------------------------------------------------------------------------


def test_check_group_raises_every_reason_in_one_input_error():
    doc = broken(lambda d: (d["topics"].update(refunds=0), d["offsets"][0].update(committed=13)))
    with pytest.raises(InputError) as caught:
        check_group(doc)
    assert not isinstance(caught.value, LimitError)
    assert str(caught.value) == (
        "topics.refunds: partition count must be positive, got 0; "
        "offsets[0]: committed offset 13 is above end offset 12 for orders-0"
    )


def test_reasons_are_capped_so_a_list_wrong_throughout_stays_readable():
    doc = broken(lambda d: d["members"][0].update(owned=[["orders", 9]] * 50))
    errors = document_errors(doc)
    assert len(errors) == MAX_ERRORS + 1 and errors[-1] == f"(and {50 - MAX_ERRORS} more)"


@pytest.mark.parametrize("strategy", ["range", "roundrobin", "sticky", "cooperative-sticky"])
def test_a_group_that_passes_the_rules_is_planned(strategy):
    check_group(GOOD)
    check_group(COMPACT)
    assert set(assign(strategy, GOOD).assignment) == {"a", "b"}
    assert set(assign(strategy, COMPACT).assignment) == {"a", "b"}


# --- the compiled schema check agrees with jsonschema ---------------------------------------------------------------

FIELDS = sorted(
    {
        k
        for s in (snapshot_schema(), compact_schema())
        for d in [s, *s["$defs"].values()]
        for k in d.get("properties", {})
    }
)
# One value on the edge of every keyword the schemas use (type, minimum, minLength, enum, pattern, item counts).
EDGES = [None, True, -2, -1, 0, 1, 2**31, 1.5, 3.0, math.nan, math.inf, -0.0, "", "orders", "Sleeping", "Stable"]
EDGES += ["kafka", "2026-11-21T02:00:00Z", "2026-11-21", [], {}, ["orders", 0, 1], ["orders"], [0, "orders"]]
leaves = st.sampled_from(EDGES)
values = st.recursive(
    leaves,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.sampled_from(FIELDS), inner, max_size=4),
    max_leaves=25,
)


def _paths(value, prefix=()):
    yield prefix
    children = value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, list) else ()
    for key, child in children:
        yield from _paths(child, (*prefix, key))


def _agree(doc) -> None:
    for schema in (snapshot_schema(), compact_schema()):
        expected = not any(StrictValidator(schema).iter_errors(doc))
        assert compile_schema(schema)(doc) is expected, (schema["$id"], doc)


def _edited(doc, path, value, append: bool):
    doc = copy.deepcopy(doc)
    target = doc
    for key in path[:-1]:
        target = target[key]
    if append:
        target[path[-1]].append(copy.deepcopy(value))
    else:
        target[path[-1]] = copy.deepcopy(value)
    return doc


@pytest.mark.parametrize("form", [GOOD, COMPACT], ids=["snapshot", "compact"])
def test_the_compiled_schema_agrees_with_jsonschema_on_every_edge_value_at_every_place(form):
    _agree(form)
    for path in list(_paths(form))[1:]:
        for value in EDGES:
            _agree(_edited(form, path, value, append=False))
            if isinstance(_at(form, path), list):
                _agree(_edited(form, path, value, append=True))


def _at(doc, path):
    for key in path:
        doc = doc[key]
    return doc


@pytest.mark.slow
@given(st.data())
@settings(max_examples=500, deadline=None)
def test_the_compiled_schema_agrees_with_jsonschema_after_random_edits(data):
    doc = data.draw(st.sampled_from([GOOD, COMPACT]))
    for _ in range(data.draw(st.integers(1, 3))):
        path = data.draw(st.sampled_from(list(_paths(doc))[1:]))
        append = isinstance(_at(doc, path), list) and data.draw(st.booleans())
        doc = _edited(doc, path, data.draw(leaves | values), append)
    _agree(doc)
    _agree(data.draw(values))


def test_a_keyword_the_compiler_does_not_know_falls_back_to_jsonschema():
    assert compile_schema({"type": "object", "patternProperties": {"^x": {"type": "string"}}}) is None
    assert compile_schema({"$ref": "other.json#/x"}) is None
    assert compile_schema({"enum": [1, 2]}) is None
    assert compile_schema({"type": "array", "uniqueItems": True}) is None


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda d: d["topics"].update({"a" * 250: 1}), ": topic name of 250 characters, above Kafka's 249"),
        (lambda d: d["topics"].update({"or ders": 1}), ": 'or ders' holds ' ', outside Kafka's [a-zA-Z0-9._-]"),
        (lambda d: d["topics"].update({"orders/eu": 1}), ": 'orders/eu' holds '/'"),
        (lambda d: d["topics"].update({"заказы": 1}), ": 'заказы' holds 'з'"),
        (lambda d: d["topics"].update({".": 1}), ": '.' is not a topic name"),
        (lambda d: d["topics"].update({"..": 1}), ": '..' is not a topic name"),
        (lambda d: d["members"][0]["topics"].append("a*b"), "members[0].topics[2]: 'a*b' holds '*'"),
    ],
)
def test_topic_names_kafka_forbids_are_refused(change, message):
    errors = document_errors(broken(change))
    assert any(e.startswith("topics") and message in e or e.startswith(message) for e in errors), errors


def test_a_topic_name_of_249_allowed_characters_is_a_topic():
    assert document_errors(broken(lambda d: d["topics"].update({"a.b_c-D9" * 31 + "x": 1}))) == []


@pytest.mark.parametrize("state", ["Empty", "Dead"])
def test_a_group_in_a_memberless_state_that_lists_members_is_refused(state):
    errors = document_errors(broken(lambda d: d.update(state=state)))
    assert any(e.startswith(f"state: a group in state {state} has no members in Kafka") for e in errors), errors
    assert document_errors(broken(lambda d: d.update(state=state, members=[]))) == []

"""Coordinator lookup: Java String.hashCode, Kafka's Utils.abs, offsets.topic.num.partitions (article A3)."""

import pytest
from hypothesis import given
from hypothesis import strategies as st

from planner.assignors._topic_order import string_hash_codes
from planner.coordinator import (
    DEFAULT_OFFSETS_TOPIC_PARTITIONS,
    coordinator_partition,
    java_string_hash,
    kafka_abs,
)


@pytest.mark.parametrize(
    "s,expected",
    [
        ("", 0),
        ("hello", 99162322),  # the JDK's documented example value
        ("Aa", 2112),
        ("BB", 2112),  # the classic collision
        ("polygenelubricants", -(2**31)),  # hashCode is exactly Integer.MIN_VALUE
        ("😀", 0xD83D * 31 + 0xDE00),  # one code point, two UTF-16 code units
        ("payments", 1382682413),
    ],
)
def test_java_string_hash(s: str, expected: int) -> None:
    assert java_string_hash(s) == expected


def test_kafka_abs_is_utils_abs() -> None:
    """UtilsTest.testAbs."""
    assert kafka_abs(-(2**31)) == 0
    assert kafka_abs(-10) == 10 and kafka_abs(10) == 10 and kafka_abs(0) == 0 and kafka_abs(-1) == 1


def test_default_is_50_partitions() -> None:
    assert DEFAULT_OFFSETS_TOPIC_PARTITIONS == 50
    assert coordinator_partition("payments") == 1382682413 % 50 == 13


def test_min_value_group_goes_to_partition_zero() -> None:
    """Math.abs(Integer.MIN_VALUE) is negative; Kafka's Utils.abs makes this group land on partition 0."""
    assert coordinator_partition("polygenelubricants") == 0
    assert coordinator_partition("polygenelubricants", 7) == 0


def test_negative_hash_uses_abs_not_mask() -> None:
    h = java_string_hash("my-group")
    assert h < 0
    assert coordinator_partition("my-group", 50) == (-h) % 50 == 12
    assert coordinator_partition("my-group", 50) != (h & 0x7FFFFFFF) % 50


def test_rejects_non_positive_partition_count() -> None:
    with pytest.raises(ValueError, match="offsets_topic_partitions"):
        coordinator_partition("g", 0)


@given(st.lists(st.text(alphabet=st.characters(codec=None, exclude_categories=())), max_size=8))
def test_the_assignors_hash_codes_of_many_strings_are_each_ones_string_hash(strings: list[str]) -> None:
    # planner.assignors._topic_order orders members as the coordinator's hash tables do, from all ids at once.
    assert string_hash_codes(strings).tolist() == [java_string_hash(s) & 0xFFFFFFFF for s in strings]

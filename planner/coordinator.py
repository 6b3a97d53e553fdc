"""Which __consumer_offsets partition (and so which broker) coordinates a consumer group.

Kafka: `Utils.abs(groupId.hashCode()) % offsets.topic.num.partitions` (GroupCoordinatorService.partitionFor;
GroupMetadataManager.partitionFor before KIP-848), with Java's String.hashCode over UTF-16 code units and
Kafka's Utils.abs, which maps Integer.MIN_VALUE to 0 where Math.abs would stay negative. The group's
coordinator is the leader of that partition.

>>> coordinator_partition("payments")
13
"""

from __future__ import annotations

__all__ = ["DEFAULT_OFFSETS_TOPIC_PARTITIONS", "coordinator_partition", "java_string_hash", "kafka_abs"]

DEFAULT_OFFSETS_TOPIC_PARTITIONS = 50  # offsets.topic.num.partitions default (article A3)


def java_string_hash(s: str) -> int:
    """java.lang.String.hashCode: s[0]*31^(n-1) + ... + s[n-1] over UTF-16 code units, as a signed int."""
    raw = s.encode("utf-16-be", "surrogatepass")  # a non-BMP character is two code units in Java
    h = 0
    for i in range(0, len(raw), 2):
        h = (31 * h + ((raw[i] << 8) | raw[i + 1])) & 0xFFFFFFFF
    return h - (1 << 32) if h & 0x80000000 else h


def kafka_abs(n: int) -> int:
    """Kafka's Utils.abs: `(n == Integer.MIN_VALUE) ? 0 : Math.abs(n)`."""
    return 0 if n == -(1 << 31) else abs(n)


def coordinator_partition(group_id: str, offsets_topic_partitions: int = DEFAULT_OFFSETS_TOPIC_PARTITIONS) -> int:
    """The __consumer_offsets partition whose leader coordinates `group_id`."""
    if offsets_topic_partitions <= 0:
        raise ValueError(f"offsets_topic_partitions must be positive, got {offsets_topic_partitions}")
    return kafka_abs(java_string_hash(group_id)) % offsets_topic_partitions

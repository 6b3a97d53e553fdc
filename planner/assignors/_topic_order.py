"""The orders in which Kafka's group coordinator walks topics, reproduced from Kafka topic ids when they are given.

The server-side assignors key topics by Uuid: UniformHomogeneousAssignmentBuilder walks a HashSet<Uuid> (bucket
order of Uuid.hashCode) and UniformHeterogeneousAssignmentBuilder breaks ties with Uuid.compareTo. Without topic
ids (`GroupSpec.topic_uuids` is None) both fall back to topic-name order, which is deterministic but cannot be
Kafka's, since Kafka's order follows ids that the group does not carry.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

from planner.group import GroupSpec

_DEFAULT_CAPACITY = 16  # HashMap.DEFAULT_INITIAL_CAPACITY


def hash_set_order(group: GroupSpec, topics: np.ndarray, source_size: int) -> np.ndarray:
    """`topics` (ids) in the iteration order of `new HashSet<>(c)` holding their Uuids, c.size() == source_size.

    HashSet(Collection) sizes its table to tableSizeFor(max((int) (size / .75f) + 1, 16)) and never resizes
    while filling it; iteration walks the buckets in index order, where a key's bucket is HashMap.hash
    (h ^ (h >>> 16)) masked by the table size, h being Uuid.hashCode. Keys sharing a bucket iterate in
    insertion order, which follows the caller's set; we order those (rare) ties by topic name.
    """
    topics = np.asarray(topics, dtype=np.int64)
    if group.topic_uuids is None:
        return np.sort(topics)
    wanted = int(np.float32(source_size) / np.float32(0.75)) + 1  # (int) (c.size() / .75f) + 1, in float
    capacity = 1 << max(int(max(wanted, _DEFAULT_CAPACITY) - 1).bit_length(), 0)  # HashMap.tableSizeFor
    h = uuid_hash_codes(group.topic_uuids[topics])
    bucket = (h ^ (h >> 16)) & (capacity - 1)
    return topics[np.lexsort((topics, bucket))]


def uuid_hash_codes(bits: np.ndarray) -> NDArray[np.int64]:
    """Uuid.hashCode of (most, least) significant bits rows, as unsigned 32-bit values in int64."""
    xor: NDArray[np.uint64] = (bits[:, 0] ^ bits[:, 1]).view(np.uint64)
    return ((xor >> np.uint64(32)) ^ (xor & np.uint64(0xFFFFFFFF))).astype(np.int64)


def uuid_rank(group: GroupSpec) -> np.ndarray:
    """Rank of each topic id by Uuid.compareTo (signed most, then least significant bits); name order without ids."""
    count = len(group.topics)
    if group.topic_uuids is None:
        return np.arange(count, dtype=np.int64)
    order = np.lexsort((np.arange(count), group.topic_uuids[:, 1], group.topic_uuids[:, 0]))
    rank = np.empty(count, dtype=np.int64)
    rank[order] = np.arange(count)
    return rank

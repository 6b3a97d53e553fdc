"""The orders in which Kafka's group coordinator walks members, topics and partitions, reproduced from Java's hashing.

The server-side builders (UniformHomogeneousAssignmentBuilder, UniformHeterogeneousAssignmentBuilder) iterate
hash-based collections, so their answers depend on Java's iteration orders. In Kafka 4.4 those collections are:

* members: `GroupSpecImpl.memberIds()` is the key set of the `HashMap<String, MemberSubscriptionAndAssignmentImpl>`
  that `TargetAssignmentBuilder.build` fills (`new HashMap<>()`, default capacity) by iterating
  `UpdatedMembersAndTargetAssignmentView.members()`: an `OverlayMap` over the group's members (a
  `TimelineHashMap`, `ModernGroup.members`), the member whose heartbeat triggered the computation being
  appended after them when it is new (OverlayMap.additions). `coordinator_member_order`.
* a member's current target: `Assignment.fromRecord` (replaying ConsumerGroupTargetAssignmentMemberValue)
  collects it with `Collectors.toMap` into a `HashMap<Uuid, Set<Integer>>` (default capacity), each value a
  `new HashSet<>(partitions)`, both in the record's order, which is the order the builder's output map iterated
  (GroupCoordinatorRecordHelpers.newConsumerGroupTargetAssignmentRecord). `member_topic_keys`, `partition_keys`.
* subscribed topics: `ConsumerGroupMember.subscribedTopicNames` is `new HashSet<>(names)`; `TopicIds` walks it,
  resolving names to ids, and the homogeneous builder copies that into `new HashSet<>(topicIds)`
  (`hash_set_order`). The heterogeneous builder sorts topics with a total order (TopicComparator), ending in
  `Uuid.compareTo` (`uuid_rank`).

java.util.HashMap (and HashSet, a HashMap of keys) iterates bucket by bucket, a key's bucket being
`HashMap.hash(key) & (capacity - 1)` with `hash = h ^ (h >>> 16)`, and keys sharing a bucket in insertion order
(resizes split buckets keeping that order; the treeified bins of 8+ colliding keys are not reproduced), except
that `computeIfAbsent`, which both builders use to add a topic to a member's map, links a new key at the head of
its bucket, so those keys iterate newest first. The
capacity follows the constructor and 0.75 resize threshold: `filled_capacity` for `new HashMap<>()` and
`hash_set_capacity` for `new HashSet<>(collection)` (JDK 17, the broker's runtime). The hash codes are
`String.hashCode` over UTF-16 code units, `Uuid.hashCode` (the xor of its four ints) and `Integer.hashCode` (the
value). org.apache.kafka.timeline.TimelineHashMap (BaseHashTable) is another table: a slot is the top
log2(capacity) bits of `hashCode * -7046029254386353131L` (Fibonacci hashing), colliding keys share a slot array
in insertion order, and `SnapshottableHashTable.CurrentIterator` walks slots in order, each slot's array from its
end; its capacity starts at 2 and doubles when `(size + 1) * 0.75 > capacity`, never shrinking.

Insertion orders within a bucket follow a group's history (who joined first, which topic a member got first),
which a group document does not carry: the documented choices below stand in for it (the order the document
lists its members in, `GroupSpec.member_listing`, is the one trace of it that ConsumerGroupDescribe keeps).
`InputOrder` "sorted"
replaces all of this with the orders of Kafka's unit tests (members in a TreeMap, a member's topics in name
order as mkOrderedAssignment lists them, partitions ascending). Without topic ids (`GroupSpec.topic_uuids` is
None) topics fall back to name order, which is deterministic but cannot be Kafka's.
"""

from __future__ import annotations

from typing import Literal

import numpy as np
from numpy.typing import NDArray

from planner.group import GroupSpec

InputOrder = Literal["coordinator", "sorted"]
INPUT_ORDERS: tuple[InputOrder, ...] = ("coordinator", "sorted")

_DEFAULT_CAPACITY = 16  # HashMap.DEFAULT_INITIAL_CAPACITY
_LOAD_FACTOR = 0.75  # HashMap.DEFAULT_LOAD_FACTOR, BaseHashTable.MAX_LOAD_FACTOR
_FIBONACCI = np.uint64(-7046029254386353131 % (1 << 64))  # BaseHashTable.findSlot's multiplier
_MASK32 = np.int64(0xFFFFFFFF)
_MASK32_U = np.uint64(0xFFFFFFFF)


def table_size_for(cap: int) -> int:
    """HashMap.tableSizeFor: the smallest power of two >= cap (1 for cap <= 1)."""
    return 1 << max(int(cap - 1).bit_length(), 0)


def hash_set_capacity(size: int) -> int:
    """Table size of `new HashSet<>(c)` with c.size() == size (JDK 17): tableSizeFor(max((int) (size / .75f) + 1,
    16)), never resized while it is filled. (JDK 19+ sizes it with HashMap.newHashMap(max(size, 12)) instead, which
    differs only for sizes 12, 24, 48, ...)"""
    return int(hash_set_capacities(np.asarray([size], dtype=np.int64))[0])


def hash_set_capacities(sizes: NDArray[np.int64]) -> NDArray[np.int64]:
    """`hash_set_capacity` of each size (the division in float, as Java's `size / .75f`)."""
    wanted = (np.asarray(sizes, dtype=np.int64).astype(np.float32) / np.float32(0.75)).astype(np.int64) + 1
    return _table_sizes(np.maximum(wanted, _DEFAULT_CAPACITY))


def filled_capacity(size: int) -> int:
    """Table size of `new HashMap<>()` after `size` puts: 16, doubled whenever ++size > 0.75 * capacity."""
    return int(filled_capacities(np.asarray([size], dtype=np.int64))[0])


def filled_capacities(sizes: NDArray[np.int64]) -> NDArray[np.int64]:
    """`filled_capacity` of each size: the smallest power of two >= 16 whose 0.75 threshold holds `size`."""
    return _table_sizes(np.maximum((4 * np.asarray(sizes, dtype=np.int64) + 2) // 3, _DEFAULT_CAPACITY))


def _table_sizes(caps: NDArray[np.int64]) -> NDArray[np.int64]:
    """HashMap.tableSizeFor of each cap >= 1 (exact below 2^53)."""
    bits = np.frexp((caps - 1).astype(np.float64))[1].astype(np.int64)  # bit length of cap - 1
    sizes: NDArray[np.int64] = np.left_shift(np.int64(1), bits)
    return sizes


def timeline_capacity(size: int) -> int:
    """Table size of `new TimelineHashMap<>(registry, 0)` once it has held `size` keys (BaseHashTable: 2, doubled
    by baseAddOrReplace when (size + 1) * 0.75 > capacity)."""
    capacity = 2
    for held in range(size):
        if (held + 1) * _LOAD_FACTOR > capacity:
            capacity *= 2
    return capacity


def string_hash_codes(strings: tuple[str, ...] | list[str]) -> NDArray[np.int64]:
    """String.hashCode (s[0]*31^(n-1) + ... over UTF-16 code units, in int arithmetic) as unsigned 32-bit values.

    All strings at once: each code unit times 31 to the power of the units after it in its string, summed per string,
    all modulo 2^32 (27 member ids of Kafka's shape, client id and UUID: 0.04 ms against 0.37 ms a unit at a time)."""
    codes = np.zeros(len(strings), dtype=np.int64)
    encoded = [s.encode("utf-16-be", "surrogatepass") for s in strings]
    lengths = np.fromiter(map(len, encoded), dtype=np.int64, count=len(encoded)) // 2
    if not lengths.any():
        return codes
    units = np.frombuffer(b"".join(encoded), dtype=">u2").astype(np.uint64)
    ends = np.cumsum(lengths)
    after = np.repeat(ends, lengths) - 1 - np.arange(len(units))  # units after each one in its string
    # 31^k modulo 2^32: a uint64 product wraps modulo 2^64, which 2^32 divides.
    powers = np.ones(int(lengths.max()), dtype=np.uint64)
    powers[1:] = np.cumprod(np.full(len(powers) - 1, 31, dtype=np.uint64)) & _MASK32_U
    terms = units * powers[after] & _MASK32_U
    some = lengths > 0
    codes[some] = (np.add.reduceat(terms, (ends - lengths)[some]) & _MASK32_U).astype(np.int64)
    return codes


def uuid_hash_codes(bits: np.ndarray) -> NDArray[np.int64]:
    """Uuid.hashCode of (most, least) significant bits rows, as unsigned 32-bit values in int64."""
    xor: NDArray[np.uint64] = (bits[:, 0] ^ bits[:, 1]).view(np.uint64)
    return ((xor >> np.uint64(32)) ^ (xor & np.uint64(0xFFFFFFFF))).astype(np.int64)


def spread(h: NDArray[np.int64]) -> NDArray[np.int64]:
    """HashMap.hash: h ^ (h >>> 16) of unsigned 32-bit hash codes (Integer.hashCode of a partition is itself)."""
    spread_h: NDArray[np.int64] = (h & _MASK32) ^ ((h & _MASK32) >> 16)
    return spread_h


def fibonacci_hash(h: NDArray[np.int64]) -> NDArray[np.uint64]:
    """BaseHashTable.findSlot before its shift: (long) hashCode * -7046029254386353131L, as unsigned 64 bits. The
    slot in a table of 2^k is its top k bits, so sorting by it sorts by slot at any capacity."""
    signed = (h & _MASK32).astype(np.int64)
    signed = np.where(signed >= 1 << 31, signed - (1 << 32), signed)  # the int, sign-extended to long
    with np.errstate(over="ignore"):
        product: NDArray[np.uint64] = signed.view(np.uint64) * _FIBONACCI
    return product


def hash_set_order(group: GroupSpec, topics: np.ndarray, source_size: int) -> np.ndarray:
    """`topics` (ids) in the iteration order of `new HashSet<>(c)` holding their Uuids, c.size() == source_size.

    UniformHomogeneousAssignmentBuilder copies the first member's `TopicIds` (its subscribed names, resolved to
    ids, size() counting every name) into this set. HashSet(Collection) sizes its table once
    (`hash_set_capacity`); iteration walks the buckets in index order, a key's bucket being HashMap.hash of
    Uuid.hashCode masked by the table size. Keys sharing a bucket iterate in insertion order, the order TopicIds
    walks the names: `name_set_rank`.
    """
    topics = np.asarray(topics, dtype=np.int64)
    if group.topic_uuids is None:
        return np.sort(topics)
    capacity = hash_set_capacity(source_size)
    bucket = spread(uuid_hash_codes(group.topic_uuids[topics])) & (capacity - 1)
    return topics[np.lexsort((name_set_rank(group, capacity)[topics], bucket))]


def name_set_rank(group: GroupSpec, capacity: int) -> NDArray[np.int64]:
    """Rank of each topic in the walk of a member's `subscribedTopicNames`, a `new HashSet<>(names)` of `capacity`.

    ConsumerGroupMember.Builder.maybeUpdateSubscribedTopicNames builds it from the heartbeat's list, so names
    sharing a bucket keep the client's order: taken here as name order (what Kafka's clients and this planner's
    protocol members send is sorted).
    """
    bucket = spread(string_hash_codes(group.topics)) & (capacity - 1)
    order = np.lexsort((np.arange(len(group.topics)), bucket))  # topic ids are in name order
    rank = np.empty(len(group.topics), dtype=np.int64)
    rank[order] = np.arange(len(group.topics))
    return rank


def uuid_rank(group: GroupSpec) -> np.ndarray:
    """Rank of each topic id by Uuid.compareTo (signed most, then least significant bits); name order without ids."""
    count = len(group.topics)
    if group.topic_uuids is None:
        return np.arange(count, dtype=np.int64)
    order = np.lexsort((np.arange(count), group.topic_uuids[:, 1], group.topic_uuids[:, 0]))
    rank = np.empty(count, dtype=np.int64)
    rank[order] = np.arange(count)
    return rank


def member_order(group: GroupSpec, order: InputOrder) -> NDArray[np.int64]:
    """Member ids (indices into group.members) in the order the builders walk `GroupSpec.memberIds()`."""
    if order == "sorted":  # Kafka's tests: a TreeMap, i.e. member-id order, which is the planner's index order
        return np.arange(len(group.members), dtype=np.int64)
    if order != "coordinator":
        raise ValueError(f"unknown input order {order!r}: use one of {INPUT_ORDERS}")
    return coordinator_member_order(group)


def coordinator_member_order(group: GroupSpec) -> NDArray[np.int64]:
    """The iteration order of TargetAssignmentBuilder.build's `memberSpecs` (`new HashMap<>()`, one put per member).

    Buckets of String.hashCode(memberId) at `filled_capacity(members)`; members sharing a bucket keep the order
    they were put in, which is the order `UpdatedMembersAndTargetAssignmentView.members()` iterates: the group's
    members in TimelineHashMap order, then the member whose heartbeat triggered the assignment if it is joining
    (OverlayMap.additions). The TimelineHashMap walks the slots of the Fibonacci hash (`timeline_capacity` of
    the members already in the group), and members sharing a slot newest first: a group document does not say
    who joined when, but ConsumerGroupDescribe lists the members in that very order, so members sharing a slot
    keep the order the document lists them in (`GroupSpec.member_listing`; member-id order for the others). Nor does
    it say who triggered the assignment: a member with no current target is taken for the joining one.
    Not reproduced: a table left larger by members that have since left (it never shrinks; the slots are then
    finer), and a static member replacing another under a new member id (an addition holding a target).
    """
    count = len(group.members)
    if count == 0:
        return np.zeros(0, dtype=np.int64)
    h = string_hash_codes(group.members)
    bucket = spread(h) & (filled_capacity(count) - 1)
    joining = np.ones(count, dtype=bool)
    joining[group.claim_member] = False
    base = count - int(joining.any())  # one member joins per heartbeat
    slot = fibonacci_hash(h) >> np.uint64(64 - (timeline_capacity(base).bit_length() - 1))
    position = {m: i for i, m in enumerate(group.member_listing or ())}
    listed = np.asarray([position.get(m, count + i) for i, m in enumerate(group.members)], dtype=np.int64)
    order: NDArray[np.int64] = np.lexsort((np.arange(count), listed, slot, joining, bucket)).astype(np.int64)
    return order


def member_topic_keys(
    group: GroupSpec, order: InputOrder, members: np.ndarray, topics: np.ndarray, names_size: int
) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
    """Sort keys (major, minor) walking each member's current target topic by topic, as its Map iterates.

    `members` / `topics` are (member, topic) pairs of the targets. Coordinator order: the map is
    Assignment.fromRecord's HashMap (default capacity, grown by the member's topic count, counting the topics it
    no longer subscribes to): Uuid buckets, then the record's order, which is the builder's output map order
    (deepCopyAssignment keeps it): the topic the member got last first, computeIfAbsent linking it at the head of
    its bucket. Which it got last is history; taken as the reverse of the walk of the subscribed names
    (`name_set_rank` of a set of `names_size` names), the order in which the homogeneous builder hands out
    never-assigned partitions, so a member that got its topics in one assignment is exact. Sorted order
    (mkOrderedAssignment in Kafka's tests): topic names.
    """
    members = np.asarray(members, dtype=np.int64)
    topics = np.asarray(topics, dtype=np.int64)
    if order == "sorted" or group.topic_uuids is None:
        return np.zeros(len(topics), dtype=np.int64), topics
    capacity = filled_capacities(_claimed_topic_counts(group))[members]
    bucket = spread(uuid_hash_codes(group.topic_uuids))[topics] & (capacity - 1)
    return bucket, -name_set_rank(group, hash_set_capacity(names_size))[topics]


def partition_keys(order: InputOrder, partitions: np.ndarray, set_sizes: np.ndarray) -> NDArray[np.int64]:
    """Sort key walking a member's partitions of one topic as its `Set<Integer>` iterates; sort stably on it, the
    partitions of each set ascending.

    Coordinator order: `new HashSet<>(partitions)` (Assignment.fromRecord) of `set_sizes` elements: buckets of
    Integer.hashCode at `hash_set_capacity`, then insertion order, which is the order the member got them
    (HashSet.add appends), taken as ascending: exact while the partition numbers stay below the capacity (at least
    4/3 of the set's size). Sorted order: ascending. `partitions` are partition numbers within their topic.
    """
    partitions = np.asarray(partitions, dtype=np.int64)
    if order == "sorted":
        return partitions
    sizes = np.asarray(set_sizes, dtype=np.int64)
    capacity = hash_set_capacities(np.arange(int(sizes.max(initial=0)) + 1, dtype=np.int64))[sizes]
    bucket: NDArray[np.int64] = spread(partitions) & (capacity - 1)
    return bucket


def _claimed_topic_counts(group: GroupSpec) -> NDArray[np.int64]:
    """Per member, how many distinct existing topics its current target (its `owned` claims) holds."""
    if len(group.claim_partition) == 0:
        return np.zeros(len(group.members), dtype=np.int64)
    # Claims are sorted by (member, partition id), so each member's topics come in runs.
    member = group.claim_member
    topic = np.repeat(np.arange(len(group.topics), dtype=np.int64), group.partition_counts)[group.claim_partition]
    first = np.ones(len(member), dtype=bool)
    first[1:] = (member[1:] != member[:-1]) | (topic[1:] != topic[:-1])
    counts: NDArray[np.int64] = np.bincount(member[first], minlength=len(group.members)).astype(np.int64)
    return counts

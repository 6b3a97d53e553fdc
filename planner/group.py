"""A consumer group as the assignors see it: names mapped to dense integer ids, per-partition data in arrays.

Parses the compact assignor form (docs/architecture.md, README) (and, via `from_snapshot`, one snapshot-file document)
into a read-only `GroupSpec`, with two optional per-topic inputs: `topic_ids` (Kafka's topic Uuids, base64, which
order topics in the server-side assignors as Kafka's HashSet<Uuid> / Uuid.compareTo do) and `partition_racks`
(the racks of each partition's replicas, KIP-881). Ids are dense and ordered so every assignor is deterministic
whatever the order of keys in the input: topics and members are sorted by Java's `String.compareTo` (UTF-16 code
units, as Kafka sorts them), and a partition's id is `topic_start[topic] + partition`, so ids order partitions by
(topic, partition) exactly as Kafka's `TopicPartition` lists are laid out.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Any

import numpy as np
from numpy.typing import NDArray

from planner.errors import InputError

DEFAULT_GENERATION = -1  # AbstractStickyAssignor.DEFAULT_GENERATION: a member that sent no generation
NO_RACK = -1  # PartitionRacks.member_racks: the member sent no rack
UNKNOWN_RACK = -2  # PartitionRacks.member_racks: no partition has a replica on the member's rack


def java_key(s: str) -> bytes:
    """Sort key ordering strings as Java's String.compareTo does (UTF-16 code units), so ties match Kafka."""
    return s.encode("utf-16-be", "surrogatepass")


@dataclass(frozen=True, eq=False)
class PartitionRacks:
    """The racks holding a replica of each partition (SubscribedTopicDescriber.racksForPartition), CSR layout."""

    names: tuple[str, ...]  # rack names, sorted as Java sorts strings; a rack id indexes this tuple
    offsets: np.ndarray  # int64[P + 1]: the rack ids of partition p are ids[offsets[p]:offsets[p + 1]]
    ids: np.ndarray  # int32, ascending within each partition

    def of(self, partition: int) -> tuple[str, ...]:
        """The rack names of one partition id (empty when none is known)."""
        return tuple(self.names[r] for r in self.ids[self.offsets[partition] : self.offsets[partition + 1]])

    def member_racks(self, racks: Sequence[str | None]) -> np.ndarray:
        """Rack id per member rack name: NO_RACK for none or "" (Kafka keeps `!r.isEmpty()` racks only),
        UNKNOWN_RACK for a rack that holds no replica of any partition (it can match none)."""
        index = {r: i for i, r in enumerate(self.names)}
        return np.asarray([index.get(r, UNKNOWN_RACK) if r else NO_RACK for r in racks], dtype=np.int64)

    def contains(self, partitions: np.ndarray, rack_ids: np.ndarray) -> NDArray[np.bool_]:
        """bool per pair: partition partitions[i] has a replica on rack rack_ids[i] (-1 never matches)."""
        rack_ids = np.asarray(rack_ids, dtype=np.int64)
        if len(self.ids) == 0:
            return np.zeros(len(rack_ids), dtype=bool)
        # Keys partition * R + rack are sorted (partitions ascending, racks ascending within each), so one
        # searchsorted answers every pair.
        width = len(self.names)
        keys = np.repeat(np.arange(len(self.offsets) - 1, dtype=np.int64), np.diff(self.offsets)) * width + self.ids
        want = np.asarray(partitions, dtype=np.int64) * width + rack_ids
        at = np.minimum(np.searchsorted(keys, want), len(keys) - 1)
        found: NDArray[np.bool_] = (rack_ids >= 0) & (keys[at] == want)
        return found


@dataclass(frozen=True, eq=False)
class GroupSpec:
    """One group's assignor input with dense ids; read-only arrays indexed by topic, member or partition."""

    topics: tuple[str, ...]
    topic_start: np.ndarray  # int64[T + 1]: partition ids of topic t are topic_start[t] .. topic_start[t+1]-1
    members: tuple[str, ...]
    subscriptions: tuple[np.ndarray, ...]  # per member: sorted int32 ids of existing topics it subscribes to
    unknown_topics: tuple[tuple[str, ...], ...]  # per member: subscribed topics missing from `topics`, sorted
    group_instance_ids: tuple[str | None, ...]
    racks: tuple[str | None, ...]
    generations: np.ndarray  # int64[M] Kafka's member generations, DEFAULT_GENERATION when the member sent none
    claim_member: np.ndarray  # int32[C]: member of each ownership claim; claims sorted by (member, partition)
    claim_partition: np.ndarray  # int64[C]: the partition id each claim names
    partition_loads: np.ndarray | None  # float64[P] when given (`loads` of the compact form)
    member_weights: np.ndarray | None  # float64[M] when given
    topic_uuids: np.ndarray | None = None  # int64[T, 2]: Kafka topic id (most, least significant bits) when given
    partition_racks: PartitionRacks | None = None  # replica racks per partition when given (KIP-881)
    # The member ids in the order the input lists them (ConsumerGroupDescribe lists them in the coordinator's order,
    # which the server-side assignors' tie-breaks follow); None when not parsed from a document
    member_listing: tuple[str, ...] | None = None

    @property
    def num_partitions(self) -> int:
        """Partitions in the universe (all existing topics someone subscribes to or that are listed)."""
        return int(self.topic_start[-1])

    @property
    def partition_counts(self) -> np.ndarray:
        """Partitions per topic id."""
        return np.diff(self.topic_start)

    def topic_of(self, partition_ids: np.ndarray) -> np.ndarray:
        """Topic id of each partition id (vectorized)."""
        return np.searchsorted(self.topic_start, partition_ids, side="right") - 1

    def subscribed_matrix(self) -> np.ndarray:
        """bool[M, T]: member m subscribes to topic t."""
        sub = np.zeros((len(self.members), len(self.topics)), dtype=bool)
        member, topic = self.subscription_pairs()
        sub[member, topic] = True
        return sub

    def subscription_pairs(self) -> tuple[np.ndarray, np.ndarray]:
        """Every (member id, topic id) subscription as two flat arrays, member-major."""
        member = np.repeat(np.arange(len(self.members), dtype=np.int64), [len(s) for s in self.subscriptions])
        topic = np.concatenate([np.empty(0, np.int32), *self.subscriptions]).astype(np.int64)
        return member, topic

    @cached_property
    def _subscribed(self) -> np.ndarray:
        """`subscribed_topics`, made once per group (read-only, one flag per topic): assignors ask for it often."""
        mask = np.zeros(len(self.topics), dtype=bool)
        mask[self.subscription_pairs()[1]] = True
        return frozen(mask)


def _int(value: Any, what: str) -> int:
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    raise ValueError(f"{what} must be an integer, got {value!r}")


def _str_or_none(value: Any, what: str) -> str | None:
    if value is not None and not isinstance(value, str):
        raise ValueError(f"{what} must be a string or null, got {value!r}")
    return value


def parse_group(doc: Mapping[str, Any]) -> GroupSpec:
    """Parse the compact assignor form into a GroupSpec; raises ValueError naming the bad field."""
    if not isinstance(doc, Mapping):
        raise ValueError("group must be a JSON object")
    raw_topics = doc.get("topics")
    raw_members = doc.get("members", {})
    if not isinstance(raw_topics, Mapping):
        raise ValueError("group.topics must be an object {topic: partition_count}")
    if not isinstance(raw_members, Mapping):
        raise ValueError("group.members must be an object {member_id: {...}}")

    topics = tuple(sorted(raw_topics, key=java_key))
    counts = [_int(raw_topics[t], f"topics[{t!r}]") for t in topics]
    if any(n < 0 for n in counts):
        raise ValueError("topics: partition counts must be >= 0")
    topic_start = np.zeros(len(topics) + 1, dtype=np.int64)
    np.cumsum(counts, out=topic_start[1:])
    topic_id = {t: i for i, t in enumerate(topics)}

    members = tuple(sorted(raw_members, key=java_key))
    subscriptions, unknown, instance_ids, racks, generations, weights = [], [], [], [], [], []
    claim_member: list[np.ndarray] = []
    claim_partition: list[np.ndarray] = []
    for m_id, m in enumerate(members):
        spec = raw_members[m]
        if not isinstance(spec, Mapping):
            raise ValueError(f"members[{m!r}] must be an object")
        subscribed = spec.get("topics")
        if not isinstance(subscribed, Sequence) or isinstance(subscribed, str):
            raise ValueError(f"members[{m!r}].topics must be a list of topic names")
        if not all(isinstance(t, str) for t in subscribed):
            raise ValueError(f"members[{m!r}].topics must hold strings")
        # Subscribed topics missing from metadata are skipped, as AbstractPartitionAssignor.assign does.
        ids = sorted({topic_id[t] for t in subscribed if t in topic_id})
        subscriptions.append(np.asarray(ids, dtype=np.int32))
        unknown.append(tuple(sorted({t for t in subscribed if t not in topic_id}, key=java_key)))
        instance_ids.append(_str_or_none(spec.get("group_instance_id"), f"members[{m!r}].group_instance_id"))
        racks.append(_str_or_none(spec.get("rack"), f"members[{m!r}].rack"))
        gen = spec.get("generation")
        generations.append(DEFAULT_GENERATION if gen is None else _int(gen, f"members[{m!r}].generation"))
        w = spec.get("weight")
        weights.append(None if w is None else float(w))
        parts = _owned(spec.get("owned") or [], f"members[{m!r}].owned", topic_id, topic_start)
        claim_partition.append(parts)
        claim_member.append(np.full(len(parts), m_id, dtype=np.int32))

    return GroupSpec(
        topics=topics,
        topic_start=frozen(topic_start),
        members=members,
        subscriptions=tuple(frozen(s) for s in subscriptions),
        unknown_topics=tuple(unknown),
        group_instance_ids=tuple(instance_ids),
        racks=tuple(racks),
        generations=frozen(np.asarray(generations, dtype=np.int64)),
        claim_member=frozen(np.concatenate([np.empty(0, np.int32), *claim_member])),
        claim_partition=frozen(np.concatenate([np.empty(0, np.int64), *claim_partition])),
        partition_loads=_partition_loads(doc.get("loads"), topics, topic_start),
        member_weights=(
            None if all(w is None for w in weights) else frozen(np.asarray([1.0 if w is None else w for w in weights]))
        ),
        topic_uuids=topic_uuids(doc.get("topic_ids"), topics),
        partition_racks=_partition_racks(doc.get("partition_racks"), topics, topic_start),
        member_listing=tuple(raw_members),
    )


def _owned(owned: Any, what: str, topic_id: Mapping[str, int], topic_start: np.ndarray) -> np.ndarray:
    """Sorted partition ids of the claims naming an existing partition (duplicates kept, as in Kafka)."""
    if not isinstance(owned, Sequence) or isinstance(owned, str):
        raise ValueError(f"{what} must be a list of [topic, partition] pairs")
    ids = []
    for pair in owned:
        if not (isinstance(pair, Sequence) and not isinstance(pair, str) and len(pair) == 2):
            raise ValueError(f"{what} must hold [topic, partition] pairs, got {pair!r}")
        t, p = pair[0], _int(pair[1], f"{what} partition")
        # AbstractStickyAssignor: "filter out any topics that no longer exist"; unknown partitions likewise.
        if t in topic_id and 0 <= p < topic_start[topic_id[t] + 1] - topic_start[topic_id[t]]:
            ids.append(int(topic_start[topic_id[t]]) + p)
    return np.sort(np.asarray(ids, dtype=np.int64))


def _partition_loads(raw: Any, topics: tuple[str, ...], topic_start: np.ndarray) -> np.ndarray | None:
    """Per-partition loads (default 1.0 for partitions a topic's list does not cover)."""
    if raw is None:
        return None
    if not isinstance(raw, Mapping):
        raise ValueError("loads must be an object {topic: [load of partition 0, 1, ...]}")
    weights = np.ones(int(topic_start[-1]), dtype=np.float64)
    for t_id, t in enumerate(topics):
        ws = raw.get(t)
        if ws is None:
            continue
        n = int(topic_start[t_id + 1] - topic_start[t_id])
        vals = np.asarray(ws, dtype=np.float64)[:n]
        weights[topic_start[t_id] : topic_start[t_id] + len(vals)] = vals
    return frozen(weights)


def topic_uuids(raw: Any, topics: tuple[str, ...]) -> np.ndarray | None:
    """Kafka topic ids (Uuid.toString: 22 base64url characters) as signed (most, least) significant bits."""
    if raw is None:
        return None
    if not isinstance(raw, Mapping):
        raise InputError("topic_ids must be an object {topic: base64 topic id}")
    unknown = sorted(set(raw) - set(topics), key=java_key)
    if unknown:
        raise InputError(f"topic_ids[{unknown[0]!r}]: not a topic of the group")
    missing = [t for t in topics if t not in raw]
    if missing:
        raise InputError(f"topic_ids: no id for topic {missing[0]!r} (give every topic an id, or none)")
    bits = np.empty((len(topics), 2), dtype=np.int64)
    for i, t in enumerate(topics):
        bits[i] = uuid_bits(raw[t], f"topic_ids[{t!r}]")
    return frozen(bits)


def uuid_bits(text: Any, what: str) -> tuple[int, int]:
    """Uuid.fromString: base64url (padding optional) of exactly 16 bytes, read as two big-endian signed longs."""
    if not isinstance(text, str) or len(text) > 24:
        raise InputError(f"{what} must be a base64 topic id of at most 24 characters, got {text!r}")
    try:
        raw = base64.b64decode(text + "=" * (-len(text) % 4), altchars=b"-_", validate=True)
    except (binascii.Error, ValueError):
        raise InputError(f"{what}: {text!r} is not base64url") from None
    if len(raw) != 16:
        raise InputError(f"{what}: {text!r} decodes to {len(raw)} bytes, not the 16 of a Uuid")
    return int.from_bytes(raw[:8], "big", signed=True), int.from_bytes(raw[8:], "big", signed=True)


def _partition_racks(raw: Any, topics: tuple[str, ...], topic_start: np.ndarray) -> PartitionRacks | None:
    """Replica racks per partition from {topic: [[rack, ...] per partition]}; partitions not listed have none."""
    if raw is None:
        return None
    if not isinstance(raw, Mapping):
        raise InputError("partition_racks must be an object {topic: [[rack, ...] for each partition]}")
    topic_id = {t: i for i, t in enumerate(topics)}
    partition: list[np.ndarray] = []  # one entry per (partition, rack) pair, flattened
    rack: list[str] = []
    for t, lists in raw.items():
        if t not in topic_id:
            raise InputError(f"partition_racks[{t!r}]: not a topic of the group")
        n = int(topic_start[topic_id[t] + 1] - topic_start[topic_id[t]])
        if not isinstance(lists, Sequence) or isinstance(lists, str) or len(lists) > n:
            raise InputError(f"partition_racks[{t!r}] must be a list of at most {n} rack lists, one per partition")
        for p, racks in enumerate(lists):
            if not isinstance(racks, Sequence) or isinstance(racks, str) or not all(isinstance(r, str) for r in racks):
                raise InputError(f"partition_racks[{t!r}][{p}] must be a list of rack names")
        sizes = [len(racks) for racks in lists]
        partition.append(np.repeat(np.arange(len(lists), dtype=np.int64) + topic_start[topic_id[t]], sizes))
        rack.extend(r for racks in lists for r in racks)
    names = tuple(sorted(set(rack), key=java_key))
    rack_of = {r: i for i, r in enumerate(names)}
    # Sort the (partition, rack id) pairs and drop repeats: a partition's racks form a set (Node::rack, toSet).
    pairs = np.unique(
        np.stack(
            [np.concatenate([np.empty(0, np.int64), *partition]), np.asarray([rack_of[r] for r in rack], np.int64)]
        ),
        axis=1,
    )
    offsets = np.zeros(int(topic_start[-1]) + 1, dtype=np.int64)
    np.cumsum(np.bincount(pairs[0], minlength=int(topic_start[-1])), out=offsets[1:])
    return PartitionRacks(names, frozen(offsets), frozen(pairs[1].astype(np.int32)))


def frozen(a: np.ndarray) -> np.ndarray:
    """`a`, made read-only: a GroupSpec's arrays are shared by every assignor that reads it."""
    a.flags.writeable = False
    return a


def subscribed_topics(group: GroupSpec) -> np.ndarray:
    """bool[T], read-only: some member subscribes to topic t (Kafka's partitionsPerTopic holds exactly these
    topics)."""
    return group._subscribed


def previous_owners(group: GroupSpec) -> tuple[np.ndarray, np.ndarray]:
    """Previous owner per partition (-1 if none) and the mask of partitions claimed twice, read as Kafka does.

    Mirrors AbstractStickyAssignor.allSubscriptionsEqual (Kafka 3.5+, KAFKA-14639): claims on topics nobody
    subscribes to are dropped ("allTopics.contains"); when members claim the same partition the one with the
    higher generation wins; two claims in the same (highest) generation invalidate the partition, which is
    then owned by nobody (partitionsWithMultiplePreviousOwners). Java resolves claims in HashMap order; the
    outcome below (the unique highest-generation claimant) is the same in every order.
    """
    n = group.num_partitions
    live = subscribed_topics(group)[group.topic_of(group.claim_partition)]
    parts, members = group.claim_partition[live], group.claim_member[live]
    generation = group.generations[members]
    if len(generation) == 0 or generation.min() == generation.max():
        top = np.ones(len(parts), dtype=bool)  # one generation for all: skip the (slow) unbuffered maximum.at
    else:
        best = np.full(n, np.iinfo(np.int64).min, dtype=np.int64)
        np.maximum.at(best, parts, generation)
        top = generation == best[parts]  # claims made in their partition's highest claimed generation
    multiple = np.bincount(parts[top], minlength=n) > 1
    owner = np.full(n, -1, dtype=np.int32)
    owner[parts[top]] = members[top]
    owner[multiple] = -1
    return owner, multiple


def claimed_by_others(group: GroupSpec, owner: np.ndarray) -> np.ndarray:
    """bool[P]: some member claims the partition in its subscription but is not `owner` of it (raw claims).

    CooperativeStickyAssignor.computePartitionsTransferringOwnership: a partition newly given to a member
    while another member still lists it as owned must be revoked by that member first (KIP-429).
    """
    live = subscribed_topics(group)[group.topic_of(group.claim_partition)]
    parts, members = group.claim_partition[live], group.claim_member[live]
    mine = owner[parts] == members
    claimed = np.zeros(group.num_partitions, dtype=bool)
    claimed[parts] = True
    claimed_by_new_owner = np.zeros(group.num_partitions, dtype=bool)
    claimed_by_new_owner[parts[mine]] = True
    return claimed & ~claimed_by_new_owner & (owner >= 0)


def from_snapshot(doc: Mapping[str, Any]) -> dict[str, Any]:
    """Convert one snapshot-file document (schemas/snapshot.schema.json) to the compact assignor form.

    owned = the member's `owned` when non-empty, else its `assignment`; generation = the group's generation.
    A KIP-848 consumer group (`group_type` consumer) starts from the coordinator's `target_assignment` instead:
    the server assignors take the current target as their input (GroupMetadataManager.updateTargetAssignment).
    """
    if not isinstance(doc, Mapping) or not isinstance(doc.get("members"), Sequence):
        raise ValueError("snapshot document must be an object with a members list")
    generation = doc.get("generation")
    members: dict[str, Any] = {}
    for i, m in enumerate(doc["members"]):
        if not isinstance(m, Mapping) or not isinstance(m.get("member_id"), str):
            raise ValueError(f"snapshot members[{i}] must be an object with a string member_id")
        claims = m.get("owned") or m.get("assignment") or []
        if doc.get("group_type") == "consumer" and m.get("target_assignment") is not None:
            claims = m["target_assignment"]
        members[m["member_id"]] = {
            "topics": list(m.get("topics") or []),
            "owned": [list(tp) for tp in claims],
            "generation": generation,
            "group_instance_id": m.get("group_instance_id"),
            "rack": m.get("rack"),
        }
    out: dict[str, Any] = {"topics": dict(doc.get("topics") or {}), "members": members}
    if isinstance(doc.get("topic_ids"), Mapping):  # Kafka's topic ids order the server assignors' topics
        ids = doc["topic_ids"]
        if all(t in ids for t in out["topics"]):
            out["topic_ids"] = {t: ids[t] for t in out["topics"]}
    return out


def is_snapshot(doc: Mapping[str, Any]) -> bool:
    """True when `doc` is a snapshot-file document (members as a list) rather than the compact form."""
    return isinstance(doc, Mapping) and isinstance(doc.get("members"), list)

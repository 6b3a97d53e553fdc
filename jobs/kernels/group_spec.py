"""Groups' snapshot rows straight from Arrow into the planner's dense-id form (`GroupSpec`).

The plan kernel plans each group from its rows this way, and the migration step reads every group's assignment
today the same way: no Python object per partition, so a group of 1,000,000 partitions stays a few arrays. A
`GroupBatch` resolves the topics and partition ids of any number of groups in a few passes over all their rows;
what is left per group is slicing arrays (why: a few dozen Arrow calls per group take 2 ms, longer than planning
a group of a few hundred partitions).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from functools import cached_property

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from planner.group import DEFAULT_GENERATION, GroupSpec, frozen, java_key, topic_uuids

PAIR_COLUMNS = ("owned", "assignment", "target_assignment")  # the (topic, partition) list columns of `snapshots`
BATCH_COLUMNS = (  # the columns of `snapshots` a batch reads
    *("group_id", "member_id", "group_type", "kafka_generation", "group_instance_id", "rack", "topics"),
    *PAIR_COLUMNS,
)


def group_spec(
    members: pa.Table,
    counts: Mapping[str, int],
    topic_ids: Mapping[str, str] | None = None,
    *,
    held_in: Sequence[str] = (),
) -> tuple[GroupSpec, np.ndarray]:
    """Member rows of one snapshot group in the planner's form, and today's owner of each partition id (a
    `GroupBatch` of one group)."""
    batch = GroupBatch(members, counts, held_in=held_in)
    return batch.spec(0, topic_ids), batch.current(0)


class GroupBatch:
    """Member rows of groups of one snapshot (none with an empty member id) as each group's `GroupSpec`.

    Reads the rows as `planner.group.from_snapshot` reads a snapshot document: members and topics in Java String
    order, the subscribed topics the snapshot knows, claims = `owned` when non-empty, else `assignment` (a
    KIP-848 consumer group: the coordinator's `target_assignment`), the group's Kafka generation for every member.
    `held_in` names (topic, partition) list columns whose topics the snapshot knows belong to the group too, as a
    snapshot document's `topics` hold those its members hold (`jobs.tables.snapshot_docs`).

    Groups are numbered in group id order; `rows` are the members sorted by group, then member id in Java order.
    The groups' topics are the entries of one sorted array of (group, topic rank) keys, so the partition id of
    every (group, topic, partition) of the batch is one vectorized binary search.
    """

    def __init__(self, members: pa.Table, counts: Mapping[str, int], *, held_in: Sequence[str] = ()) -> None:
        order = _member_order(members)
        in_order = pc.all(pc.equal(order, pa.array(np.arange(len(order))))).as_py() is not False
        self.rows = (members if in_order else members.take(order)).combine_chunks()  # sorted already: no copy
        self.names: list[str] = self.rows.column("member_id").to_pylist()
        self.starts, self.ends = bounds(self.rows.column("group_id"))
        self.group_of = np.repeat(np.arange(len(self.starts), dtype=np.int64), self.ends - self.starts)
        self.flat = {name: flatten(_array(self.rows, name)) for name in ("topics", *PAIR_COLUMNS)}
        strings = [self.flat["topics"][0], *(self.flat[name][0].field("topic") for name in PAIR_COLUMNS)]
        self.dictionary = pc.drop_null(pc.unique(pa.chunked_array(strings, pa.string())))
        names = self.dictionary.to_pylist()
        by_name = sorted(range(len(names)), key=lambda i: java_key(names[i]))
        self.width = len(names) + 1  # ranks 0..len-1 in Java order, then one for a null name
        self.rank = np.full(self.width, len(names), dtype=np.int64)  # dictionary index (null: the last) -> rank
        self.rank[by_name] = np.arange(len(names))
        self.topic_names = [names[i] for i in by_name]  # by rank
        self.known = np.asarray([names[i] in counts for i in by_name] + [False], dtype=bool)  # by rank
        count = np.asarray([counts.get(names[i], 0) for i in by_name] + [0], dtype=np.int64)  # by rank
        # The groups' topics: the distinct (group, rank) keys of the topics the snapshot knows that their members
        # subscribe to (or hold, in `held_in`).
        keys = [self._keys(*self._row_ranks("topics"))]
        keys += [self._keys(*self._row_ranks(name)) for name in held_in]
        self.topic_keys = np.unique(np.concatenate([np.zeros(0, np.int64), *keys]))
        self.topic_count = count[self.topic_keys % self.width]
        self.topic_bounds = np.searchsorted(self.topic_keys // self.width, np.arange(len(self.starts) + 1))
        ends = np.concatenate([[0], np.cumsum(self.topic_count)]).astype(np.int64)
        self.partition_base = ends[self.topic_bounds]  # each group's first partition in the batch's numbering
        self.topic_start = ends[:-1] - self.partition_base[self.topic_keys // self.width]  # within its group

    @property
    def groups(self) -> int:
        """Groups in the batch."""
        return len(self.starts)

    def group_id(self, group: int) -> str:
        """The id of group number `group`."""
        return str(self.rows.column("group_id")[int(self.starts[group])].as_py())

    def pairs(self, column: str) -> tuple[np.ndarray, np.ndarray, pa.Array]:
        """Each (topic, partition) of a list column: its row, its partition id in its group (-1 where the group
        has no such topic or partition: "filter out any topics that no longer exist", AbstractStickyAssignor) and
        the pairs themselves (a struct array)."""
        row, rank = self._row_ranks(column)
        values = self.flat[column][0]
        if not len(self.topic_keys):
            return row, np.full(len(row), -1, dtype=np.int64), values
        key = self.group_of[row] * self.width + rank
        at = np.minimum(np.searchsorted(self.topic_keys, key), len(self.topic_keys) - 1)
        partition = pc.fill_null(values.field("partition"), -1).to_numpy(zero_copy_only=False).astype(np.int64)
        valid = (self.topic_keys[at] == key) & (partition >= 0) & (partition < self.topic_count[at])
        return row, np.where(valid, self.topic_start[at] + partition, -1), values

    def spec(self, group: int, topic_ids: Mapping[str, str] | None = None) -> GroupSpec:
        """The `GroupSpec` of group number `group` (Kafka topic ids from `topic_ids` when it holds every topic)."""
        first, last = int(self.starts[group]), int(self.ends[group])
        t0, t1 = int(self.topic_bounds[group]), int(self.topic_bounds[group + 1])
        topics = tuple(self.topic_names[r] for r in (self.topic_keys[t0:t1] % self.width).tolist())
        topic_start = np.zeros(len(topics) + 1, dtype=np.int64)
        np.cumsum(self.topic_count[t0:t1], out=topic_start[1:])
        claim_row, claim_partition = self._claims
        c0, c1 = np.searchsorted(claim_row, [first, last])
        subscribed_row, subscribed_topic = self._subscriptions
        s = np.searchsorted(subscribed_row, np.arange(first, last + 1))
        return GroupSpec(
            topics=topics,
            topic_start=frozen(topic_start),
            members=tuple(self.names[first:last]),
            subscriptions=tuple(frozen(subscribed_topic[s[m] : s[m + 1]]) for m in range(last - first)),
            unknown_topics=tuple(tuple(sorted(self._unknown.get(m, ()), key=java_key)) for m in range(first, last)),
            group_instance_ids=tuple(self._texts["group_instance_id"][first:last]),
            racks=tuple(self._texts["rack"][first:last]),
            generations=frozen(self._generations[first:last]),
            claim_member=frozen((claim_row[c0:c1] - first).astype(np.int32)),
            claim_partition=frozen(claim_partition[c0:c1]),
            partition_loads=None,
            member_weights=None,
            topic_uuids=topic_uuids({t: topic_ids[t] for t in topics}, topics)
            if topic_ids and set(topics) <= set(topic_ids)
            else None,
        )

    def current(self, group: int) -> np.ndarray:
        """int32 member id holding each partition of group number `group` per the members' `assignment` (-1:
        none); a partition two members list (input the rules reject) is the first one's."""
        return self._current[self.partition_base[group] : self.partition_base[group + 1]].copy()

    def _row_ranks(self, column: str) -> tuple[np.ndarray, np.ndarray]:
        """Each topic name of a list column (of names, or of pairs): its row and its rank."""
        values, row = self.flat[column]
        names = values if column == "topics" else values.field("topic")
        index = pc.fill_null(pc.index_in(names, value_set=self.dictionary), len(self.dictionary))
        return row, self.rank[index.to_numpy(zero_copy_only=False).astype(np.int64)]

    def _keys(self, row: np.ndarray, rank: np.ndarray) -> np.ndarray:
        """(group, rank) keys of the topics the snapshot knows among `rank`, named in rows `row`."""
        known = self.known[rank]
        keys: np.ndarray = self.group_of[row[known]] * self.width + rank[known]
        return keys

    @cached_property
    def _claims(self) -> tuple[np.ndarray, np.ndarray]:
        """(row, partition id) of every ownership claim, as `planner.group.from_snapshot` picks the claims, sorted
        by row, then partition."""
        owned = pc.fill_null(pc.list_value_length(self.rows.column("owned")), 0).to_numpy(zero_copy_only=False)
        target = self.rows.column("target_assignment")
        consumer = pc.fill_null(pc.equal(self.rows.column("group_type"), "consumer"), False)
        use_target = pc.and_(consumer, pc.is_valid(target)).to_numpy(zero_copy_only=False)
        choice = np.where(use_target, 2, np.where(owned > 0, 0, 1))
        rows, parts = [np.zeros(0, np.int64)], [np.zeros(0, np.int64)]
        for k, column in enumerate(PAIR_COLUMNS):
            row, part, _ = self.pairs(column)
            keep = (part >= 0) & (choice[row] == k)
            rows.append(row[keep])
            parts.append(part[keep])
        row, part = np.concatenate(rows), np.concatenate(parts)
        order = np.lexsort((part, row))
        return row[order], part[order]

    @cached_property
    def _subscriptions(self) -> tuple[np.ndarray, np.ndarray]:
        """(row, topic id in its group) of each member's distinct known subscribed topics, sorted."""
        row, rank = self._row_ranks("topics")
        known = self.known[rank]
        row = row[known]
        key = self.group_of[row] * self.width + rank[known]
        topic = np.searchsorted(self.topic_keys, key) - self.topic_bounds[self.group_of[row]]
        distinct = np.unique(row * self.width + topic)
        return distinct // self.width, (distinct % self.width).astype(np.int32)

    @cached_property
    def _unknown(self) -> dict[int, set[str]]:
        """row -> the topics it subscribes to that the snapshot does not know."""
        values, row = self.flat["topics"]
        _, rank = self._row_ranks("topics")
        unknown = ~self.known[rank]
        out: dict[int, set[str]] = {}
        for r, name in zip(row[unknown].tolist(), values.filter(pa.array(unknown)).to_pylist(), strict=True):
            out.setdefault(r, set()).add(name)
        return out

    @cached_property
    def _texts(self) -> dict[str, list[str | None]]:
        """The members' static instance ids and racks."""
        return {name: self.rows.column(name).to_pylist() for name in ("group_instance_id", "rack")}

    @cached_property
    def _generations(self) -> np.ndarray:
        """int64 Kafka generation of each row (DEFAULT_GENERATION when none)."""
        member_generation = pc.fill_null(self.rows.column("kafka_generation"), DEFAULT_GENERATION)
        generations: np.ndarray = member_generation.to_numpy(zero_copy_only=False).astype(np.int64)
        return generations

    @cached_property
    def _current(self) -> np.ndarray:
        """int32 member id (within its group) holding each partition of the batch per `assignment` (-1: none)."""
        row, part, _ = self.pairs("assignment")
        held = part >= 0
        row, key = row[held], self.partition_base[self.group_of[row[held]]] + part[held]
        key, first = np.unique(key, return_index=True)  # listed twice: the first member's
        current = np.full(int(self.partition_base[-1]), -1, dtype=np.int32)
        current[key] = (row[first] - self.starts[self.group_of[row[first]]]).astype(np.int32)
        return current


def _member_order(members: pa.Table) -> pa.Array:
    """Row order by group id, then member id in Java String order (UTF-16 code units): Arrow's sort (UTF-8 bytes,
    the same order) unless some id holds a character from U+E000 on, where the two orders can part."""
    ids = members.column("member_id").to_pylist()
    if max("".join(ids), default="") < "\ue000":
        return pc.sort_indices(members, [("group_id", "ascending"), ("member_id", "ascending")])
    groups = members.column("group_id").to_pylist()
    return pa.array(sorted(range(len(ids)), key=lambda i: (groups[i], java_key(ids[i]))), pa.int64())


def bounds(group_ids: pa.ChunkedArray | pa.Array) -> tuple[np.ndarray, np.ndarray]:
    """Start and end row of each group of rows sorted by group."""
    if len(group_ids) == 0:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    edges = np.flatnonzero(pc.not_equal(group_ids[1:], group_ids[:-1]).to_numpy(zero_copy_only=False)) + 1
    return np.concatenate([[0], edges]).astype(np.int64), np.append(edges, len(group_ids)).astype(np.int64)


def partition_ids(
    topic: pa.Array | pa.ChunkedArray,
    partition: pa.Array | pa.ChunkedArray,
    topics: Sequence[str],
    topic_start: np.ndarray,
) -> np.ndarray:
    """int64 partition id of each (topic, partition) pair; -1 where the topic or the partition does not exist."""
    t = pc.fill_null(pc.index_in(topic, value_set=pa.array(topics, pa.string())), -1)
    t = t.to_numpy(zero_copy_only=False).astype(np.int64)
    p = pc.fill_null(partition, -1).to_numpy(zero_copy_only=False).astype(np.int64)
    count = np.diff(topic_start)[np.maximum(t, 0)] if len(topics) else np.zeros(len(t), dtype=np.int64)
    valid = (t >= 0) & (p >= 0) & (p < count)
    return np.where(valid, topic_start[np.maximum(t, 0)] + p, -1)


def _array(table: pa.Table, column: str) -> pa.Array:
    """A column as one contiguous array (list offsets and parent indices then count from its first row)."""
    return table.column(column).combine_chunks()


def flatten(column: pa.Array) -> tuple[pa.Array, np.ndarray]:
    """A list column's values and, for each, the row it belongs to (null lists hold nothing)."""
    return pc.list_flatten(column), pc.list_parent_indices(column).to_numpy(zero_copy_only=False).astype(np.int64)

"""A snapshot's `snapshots` and `partition_offsets` rows, built group by group from valid documents: by ingest in
its own process, and by its worker processes (`jobs.io.ingest_worker`), which import this module and nothing of the
lake."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping
from datetime import datetime
from itertools import chain, count, repeat
from operator import itemgetter
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from schemas.rules import parse_timestamp
from schemas.spec import TOPIC_PARTITION
from schemas.tables import PARTITION_OFFSETS, SNAPSHOTS


def capture_time(text: str | None, default: datetime) -> datetime:
    """The document's capture time (validated by the rules, strict RFC 3339), or when it was received."""
    return parse_timestamp(text) if text else default


_NO_MEMBER = {"member_id": "", "topics": []}  # the one row of a group without members
_MEMBER_FIELDS = (
    "member_id",
    "client_id",
    "host",
    "group_instance_id",
    "rack",
    "member_epoch",
    "subscription_user_data",
    "topic_regex",
    "assignment_user_data",
)


class SnapshotColumns:
    """A snapshot's `snapshots` rows, gathered group by group: one per member, or one with member_id '' for a group
    without members. Member fields are kept as lists (a few per member); the [topic, partition] lists, a million
    pairs in a large group, as arrays of topic ids and partitions, each list sorted as Python sorts the pairs."""

    def __init__(self, snapshot_id: str, received_at: datetime, source: str) -> None:
        self.snapshot_id, self.received_at, self.source = snapshot_id, received_at, source
        self.topic_ids: dict[str, int] = defaultdict(count().__next__)  # a new topic takes the next id
        self.lists = {name: PartitionLists(self.topic_ids) for name in ("owned", "assignment", "target_assignment")}
        self.columns: dict[str, list[Any]] = {name: [] for name in SNAPSHOTS.schema.names if name not in self.lists}

    def add(self, doc: Mapping[str, Any]) -> None:
        """Append a valid group document's rows."""
        members = doc["members"] or [_NO_MEMBER]
        for name, value in self._group(doc).items():
            self.columns[name] += [value] * len(members)
        for name in _MEMBER_FIELDS:
            self.columns[name] += [m.get(name) for m in members]
        self.columns["strategies"] += [m.get("strategies") or [] for m in members]
        self.columns["topics"] += [sorted(set(m["topics"])) for m in members]
        self.lists["owned"].add([m.get("owned") or [] for m in members])
        self.lists["assignment"].add([m.get("assignment") or [] for m in members])
        self.lists["target_assignment"].add([m.get("target_assignment") for m in members])  # absent: null

    def _group(self, doc: Mapping[str, Any]) -> dict[str, Any]:
        """The fields every row of the group repeats."""
        return {
            "snapshot_id": self.snapshot_id,
            "group_id": doc["group_id"],
            "captured_at": capture_time(doc.get("captured_at"), self.received_at),
            "source": doc.get("source", self.source),
            "state": doc.get("state", "Stable"),
            "protocol_type": doc.get("protocol_type", "consumer"),
            "protocol": doc.get("protocol"),
            "kafka_generation": doc.get("generation"),
            "group_type": doc.get("group_type", "classic"),  # classic unless the document says consumer (KIP-848)
            "state_reason": doc.get("state_reason"),
            "server_assignor": doc.get("server_assignor"),
            "group_epoch": doc.get("group_epoch"),
            "assignment_epoch": doc.get("assignment_epoch"),
        }

    def table(self) -> pa.Table:
        """The rows gathered so far."""
        names = pa.array(list(self.topic_ids), pa.string())  # by id: ids are given in insertion order
        lists = {name: partition_lists.array(names) for name, partition_lists in self.lists.items()}
        return pa.table({**self.columns, **lists}, schema=SNAPSHOTS.schema)


class PartitionLists:
    """Lists of [topic, partition] pairs, one per row (None: a null list), gathered group by group as flat arrays
    of topic ids (`topic_ids`, shared) and partitions, each list sorted by (topic name, partition)."""

    def __init__(self, topic_ids: dict[str, int]) -> None:
        self.topic_ids = topic_ids
        self.lengths: list[np.ndarray] = [np.zeros(0, np.int64)]
        self.topics: list[np.ndarray] = [np.zeros(0, np.int32)]
        self.partitions: list[np.ndarray] = [np.zeros(0, np.int32)]
        self.nulls: list[bool] = []

    def add(self, lists: list[list[list[Any]] | None]) -> None:
        """Append one group's lists: flattened, ranked by topic name, sorted by one lexsort."""
        lengths = np.fromiter(map(len, (pairs or () for pairs in lists)), np.int64, len(lists))
        flat = list(chain.from_iterable(pairs for pairs in lists if pairs))
        topics, partitions = zip(*flat, strict=True) if flat else ((), ())
        names = sorted(set(topics))
        rank = np.fromiter(map({name: i for i, name in enumerate(names)}.__getitem__, topics), np.int32, len(flat))
        partition = np.fromiter(partitions, np.int32, len(flat))
        order = np.lexsort((partition, rank, np.repeat(np.arange(len(lists)), lengths)))
        ids = np.fromiter(map(self.topic_ids.__getitem__, names), np.int32, len(names))
        self.lengths.append(lengths)
        self.topics.append(ids[rank[order]])
        self.partitions.append(partition[order])
        self.nulls += [pairs is None for pairs in lists]

    def array(self, names: pa.Array) -> pa.Array:
        """The lists as list<struct<topic, partition>>; `names` holds each topic id's name."""
        values = pa.StructArray.from_arrays(
            [names.take(np.concatenate(self.topics)), pa.array(np.concatenate(self.partitions))],
            fields=list(TOPIC_PARTITION),
        )
        offsets = pa.array(np.concatenate([[0], np.cumsum(np.concatenate(self.lengths))]), pa.int32())
        return pa.ListArray.from_arrays(
            offsets, values, mask=pa.array(self.nulls, pa.bool_()) if any(self.nulls) else None
        )


class OffsetColumns:
    """The snapshot's `partition_offsets` rows, gathered group by group (a group may have a million): groups and
    topics as ids, partitions as arrays, offsets as Arrow arrays (they may be null)."""

    def __init__(self) -> None:
        self.group_ids: list[str] = []
        self.sizes: list[int] = []
        self.topic_ids: dict[str, int] = defaultdict(count().__next__)  # a new topic takes the next id
        self.topics: list[np.ndarray] = [np.zeros(0, np.int32)]
        self.partitions: list[np.ndarray] = [np.zeros(0, np.int32)]
        self.committed: list[pa.Array] = []
        self.ends: list[pa.Array] = []

    def add(self, doc: Mapping[str, Any]) -> None:
        """Append a valid group document's offsets."""
        offsets = doc.get("offsets") or []
        self.group_ids.append(doc["group_id"])
        self.sizes.append(len(offsets))
        topics = map(self.topic_ids.__getitem__, map(itemgetter("topic"), offsets))
        self.topics.append(np.fromiter(topics, np.int32, len(offsets)))
        self.partitions.append(np.fromiter(map(itemgetter("partition"), offsets), np.int32, len(offsets)))
        self.committed.append(pa.array(list(map(dict.get, offsets, repeat("committed"))), pa.int64()))
        self.ends.append(pa.array(list(map(dict.get, offsets, repeat("end"))), pa.int64()))

    def table(self, snapshot_id: str) -> pa.Table:
        """The rows, lag = end - committed where both are known and committed is not negative (none committed)."""
        committed, end = pa.chunked_array(self.committed, pa.int64()), pa.chunked_array(self.ends, pa.int64())
        lag = pc.if_else(pc.greater_equal(committed, 0), pc.subtract(end, committed), pa.scalar(None, pa.int64()))
        group = np.repeat(np.arange(len(self.sizes)), self.sizes)
        columns = {
            "snapshot_id": pa.repeat(pa.scalar(snapshot_id, pa.string()), len(group)),
            "group_id": pa.array(self.group_ids, pa.string()).take(group),
            "topic": pa.array(list(self.topic_ids), pa.string()).take(np.concatenate(self.topics)),
            "partition": pa.array(np.concatenate(self.partitions)),
            "committed": committed,
            "end_offset": end,
            "lag": lag,
        }
        return pa.table(columns, schema=PARTITION_OFFSETS.schema)

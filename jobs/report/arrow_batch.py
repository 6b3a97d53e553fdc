"""How the report reads the lake for a batch of generations, in Arrow.

Only the columns a page uses (`READ_COLUMNS`, `projected`), with fixed types whatever columns a lake's tables
have (`typed`); a missing table reads as empty (`table`). A batch's tables are read by lookups naming every key
of the batch at once (`lookup_terms`: its groups, snapshots or runs). Each row is then tagged with its
generation's position in the batch (`pair`: `with_pairs`, `of_generations`), each (pair, topic, partition) is
numbered as one int64 (`Slots`) so lookups are NumPy searches in sorted arrays, and a result sorted by pair is
sliced back into one table per generation (`split_by_pair`). The batch's per-partition inputs are read that way:
today's owners (`today_owners`), the pairs' topics (`pair_topics`) and lags (`partition_lags`); partitions and
load per member are tallied a bounded number of rows at a time (`tally_loads`). Joins and group-bys run on the
calling thread: on a batch's tables Acero's thread pool cost a quarter more CPU than it saved.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any, cast

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from deltalake.exceptions import TableNotFoundError

from jobs.report.reader import Filters, Read, Scan

Rows = list[dict[str, Any]]

PAIR = "pair"
ROW = "row"
SLOT = "slot"
TALLY_ROWS = 1 << 20  # plan rows whose partitions' loads are looked up at once
GROUP_KEYS = ("group_id", "generation_id")
SNAPSHOT_KEYS = ("group_id", "snapshot_id")
SKEW_KEYS = ("run_id", "topic")
PLAN_COLUMNS = (*GROUP_KEYS, "strategy", "topic", "partition", "member", "previous_member", "phase", "weight")
SKEW_COLUMNS = (*SKEW_KEYS, "partitioner", "partition_count", "current", "partition", "load", "messages")
HOT_KEY_COLUMNS = (*SKEW_KEYS, "partition_count", "rank", "key", "messages", "share", "partition")
FINGERPRINT_COLUMNS = ("topic", "partitioner", "share", "observed_messages", "explained_messages")
KEY = ["topic", "partition"]
PAIR_KEY = [PAIR, *KEY]
TOPIC_PARTITION_FIELDS = [pa.field("topic", pa.string()), pa.field("partition", pa.int64())]
GROUP_FIELD = pa.field("group_id", pa.string())
_TEXT = pa.dictionary(pa.int32(), pa.string())
PLAN_SCHEMA = pa.schema(
    [GROUP_FIELD, pa.field("generation_id", pa.int64()), pa.field("strategy", _TEXT)]
    + [pa.field("topic", _TEXT), pa.field("partition", pa.int64())]
    + [pa.field(c, _TEXT) for c in ("member", "previous_member", "phase")]
    + [pa.field("weight", pa.float64())]
)
"""Plan rows as the report holds them: texts as dictionaries (a batch has many rows and few distinct members,
topics and strategies); only the chosen candidate's rows are decoded."""
SKEW_SCHEMA = pa.schema(
    [pa.field(c, pa.string()) for c in (*SKEW_KEYS, "partitioner")]
    + [pa.field("partition_count", pa.int64()), pa.field("current", pa.bool_()), pa.field("partition", pa.int64())]
    + [pa.field("load", pa.float64()), pa.field("messages", pa.float64())]
)
OFFSET_SCHEMA = pa.schema(
    [GROUP_FIELD, pa.field("snapshot_id", pa.string()), *TOPIC_PARTITION_FIELDS]
    + [pa.field(c, pa.float64()) for c in ("committed", "end_offset", "lag")]
)
SNAPSHOT_SCHEMA = pa.schema(
    [GROUP_FIELD]
    + [pa.field(c, pa.string()) for c in ("snapshot_id", "member_id")]
    + [pa.field("assignment", pa.list_(pa.struct(TOPIC_PARTITION_FIELDS)))]
)
SNAPSHOT_COLUMNS = tuple(SNAPSHOT_SCHEMA.names)
BATCHED = frozenset(
    {"plans", "snapshots", "partition_offsets", "gate_results"}
    | {"key_skew", "key_skew_summary", "key_skew_hot_keys", "key_skew_fingerprint"}
)
"""The tables `collect_many` reads by the batch's generations, snapshots or runs: a lake with history has many
more rows than one run, and those with a row per partition are large even for one run."""
READ_COLUMNS = {
    "plans": PLAN_COLUMNS,
    "snapshots": SNAPSHOT_COLUMNS,
    "key_skew": SKEW_COLUMNS,
    "key_skew_hot_keys": HOT_KEY_COLUMNS,
    "key_skew_fingerprint": (*SKEW_KEYS, *FINGERPRINT_COLUMNS),
}
"""The columns a report uses of the tables it does not show whole (snapshots have 25, the report needs 4)."""


def projected(read_arrow: Callable[..., pa.Table]) -> Read:
    """A `read` from `Lake.read_arrow` that reads only READ_COLUMNS, and plans with their texts as dictionaries."""

    def read(name: str, filters: Filters = None) -> pa.Table:
        return read_arrow(name, filters, READ_COLUMNS.get(name), decode=name != "plans")

    return read


def streamed(read_batches: Callable[..., pa.RecordBatchReader]) -> Scan:
    """A `scan` from `Lake.read_batches` with `projected`'s columns and types."""

    def scan(name: str, filters: Filters = None, share: tuple[int, int] = (0, 1)) -> pa.RecordBatchReader:
        return read_batches(name, filters, READ_COLUMNS.get(name), decode=name != "plans", share=share)

    return scan


def table(read: Read, name: str, filters: Filters = None, columns: tuple[str, ...] | None = None) -> pa.Table:
    """A table's rows (only `columns`, those the table has, when given); a missing table reads as no columns."""
    if filters and any(value is None if op == "=" else not value for _, op, value in filters):
        return pa.table({})  # a lookup on a missing id (e.g. no run id) or on no ids matches nothing
    try:
        found = read(name, list(filters) if filters else None)
    except TableNotFoundError:
        return pa.table({})
    # Selecting first spares converting columns nobody shows (timestamps cost most) into Python objects.
    return found.select([c for c in columns if c in found.column_names]) if columns else found


def rows(read: Read, name: str, filters: Filters = None, columns: tuple[str, ...] | None = None) -> Rows:
    """A table's rows as dicts (only `columns`, those the table has, when given); a missing table reads as empty."""
    return cast("list[dict[str, Any]]", table(read, name, filters, columns).to_pylist())


def typed(data: pa.Table, schema: pa.Schema) -> pa.Table:
    """`data` with exactly `schema`'s columns and types, so later steps need not ask which columns a lake has."""
    n = data.num_rows
    columns = [data.column(f.name).cast(f.type) if f.name in data.column_names else pa.nulls(n, f.type) for f in schema]
    return pa.Table.from_arrays(columns, schema=schema)


def lookup_terms(found: Iterable[dict[str, Any]], columns: Sequence[str]) -> list[tuple[str, str, list[Any]]]:
    """Filter terms naming every value `found` rows hold in `columns` (nulls left out: they match nothing)."""
    values: dict[str, set[Any]] = {c: set() for c in columns}
    for r in found:
        for c in columns:
            values[c].add(r.get(c))
    return [(c, "in", sorted(values[c] - {None})) for c in columns]


def grouped_by(found: Rows, keys: Sequence[str]) -> dict[tuple[Any, ...], Rows]:
    """Rows grouped by their values of `keys`, in table order."""
    out: dict[tuple[Any, ...], Rows] = defaultdict(list)
    for r in found:
        out[tuple(r.get(k) for k in keys)].append(r)
    return out


def distinct(data: pa.Table, column: str) -> list[Any]:
    """The distinct values of a column (none when the table lacks it)."""
    return pc.unique(data.column(column)).to_pylist() if column in data.column_names else []


def of_generations(data: pa.Table, pairs: pa.Table) -> pa.Table:
    """The rows of the batch's generations, each with its pair instead of the group and generation (a lookup of
    "group NUL generation" texts: a join would copy every column)."""
    pair = pc.index_in(_generation_key(data), value_set=_generation_key(pairs))
    data = data.drop_columns(list(GROUP_KEYS)).append_column(PAIR, pc.cast(pair, pa.int64()))
    return data if not pair.null_count else data.filter(pc.is_valid(pair))


def _generation_key(data: pa.Table) -> pa.Array:
    """One text per row naming its group and generation."""
    generation = pc.cast(data.column("generation_id"), pa.string())
    return pc.binary_join_element_wise(data.column("group_id"), generation, "\x00")


def with_pairs(data: pa.Table, pairs: pa.Table, keys: Sequence[str], *, ordered: bool = True) -> pa.Table:
    """`data`'s rows with the pair they belong to by `keys` (a row two pairs share, twice; one of no pair, never);
    when `ordered`, by pair and then in `data`'s order (Acero's joins keep no order)."""
    right = pairs.select([PAIR, *keys])
    if not ordered:
        return data.join(right, list(keys), join_type="inner", use_threads=False)
    numbered = data.append_column(ROW, pa.array(np.arange(data.num_rows)))
    joined = numbered.join(right, list(keys), join_type="inner", use_threads=False)
    return joined.sort_by([(PAIR, "ascending"), (ROW, "ascending")]).drop_columns(ROW)


def left_joined(left: pa.Table, right: pa.Table, keys: Sequence[str]) -> pa.Table:
    """`left` with the columns of `right`'s row of the same `keys` (nulls where none), in `left`'s order."""
    numbered = left.append_column(ROW, pa.array(np.arange(left.num_rows)))
    return numbered.join(right, list(keys), use_threads=False).sort_by(ROW).drop_columns(ROW)


def split_by_pair(data: pa.Table, n: int) -> list[pa.Table]:
    """`data` (sorted by pair) as one zero-copy slice per pair 0..n-1, without the pair (and slot) column."""
    bounds = np.searchsorted(data.column(PAIR).to_numpy(), np.arange(n + 1)).tolist()
    body = data.drop_columns([c for c in (PAIR, SLOT) if c in data.column_names])
    return [body.slice(start, end - start) for start, end in zip(bounds[:-1], bounds[1:], strict=True)]


def distinct_rows(data: pa.Table, columns: list[str]) -> pa.Table:
    """The distinct rows of `columns`."""
    return data.select(columns).group_by(columns, use_threads=False).aggregate([])


def by_topic(data: pa.Table) -> dict[str, pa.Table]:
    """A table sorted by topic as one zero-copy slice per topic (one pass, where a filter per topic is one each)."""
    if not data.num_rows:
        return {}
    codes = pc.dictionary_encode(data.column("topic")).combine_chunks()
    index = codes.indices.to_numpy(zero_copy_only=False)
    starts = np.flatnonzero(np.r_[True, index[1:] != index[:-1]])
    ends = np.r_[starts[1:], len(index)]
    names = codes.dictionary.to_pylist()
    return {names[index[s]]: data.slice(s, e - s) for s, e in zip(starts.tolist(), ends.tolist(), strict=True)}


def today_owners(read: Read, pairs: pa.Table) -> tuple[dict[int, set[str]], pa.Table]:
    """Each pair's snapshot members and today's owner of each partition (pair, topic, partition, member: the
    coordinator's), in the snapshot's order."""
    lookup = lookup_terms(pairs.select(list(SNAPSHOT_KEYS)).to_pylist(), SNAPSHOT_KEYS)
    snapshot = typed(table(read, "snapshots", lookup, SNAPSHOT_COLUMNS), SNAPSHOT_SCHEMA).combine_chunks()
    # A group without members has one row with member_id ''.
    snapshot = snapshot.filter(pc.fill_null(pc.not_equal(snapshot.column("member_id"), ""), False))
    members = with_pairs(snapshot.drop_columns("assignment"), pairs, SNAPSHOT_KEYS, ordered=False)
    roster: dict[int, set[str]] = defaultdict(set)
    for pair, member in zip(members.column(PAIR).to_pylist(), members.column("member_id").to_pylist(), strict=True):
        roster[pair].add(member)
    assignment = snapshot.column("assignment").combine_chunks()
    held = pc.list_flatten(assignment)
    owned = snapshot.select([*SNAPSHOT_KEYS, "member_id"]).take(pc.list_parent_indices(assignment))
    flat = owned.append_column("topic", held.field("topic")).append_column("partition", held.field("partition"))
    owners = with_pairs(flat.rename_columns([*SNAPSHOT_KEYS, "member", *KEY]), pairs, SNAPSHOT_KEYS)
    return roster, owners.select([*PAIR_KEY, "member"])


def pair_topics(plans: pa.Table, owners: pa.Table, pairs: pa.Table) -> pa.Table:
    """Every topic of each pair (in its candidates or today's assignment) with the pair's run: pair, run_id, topic."""
    each = [decoded(distinct_rows(t, [PAIR, "topic"])) for t in (plans, owners)]
    named = distinct_rows(pa.concat_tables(each), [PAIR, "topic"])
    named = named.filter(pc.is_valid(named.column("topic")))
    return named.append_column("run_id", pairs.column("run_id").take(named.column(PAIR)))


def partition_lags(read: Read, pairs: pa.Table) -> pa.Table:
    """Lag per partition of every pair (pair, topic, partition, lag): end offset - committed when both are known,
    else the lag column."""
    lookup = lookup_terms(pairs.select(list(SNAPSHOT_KEYS)).to_pylist(), SNAPSHOT_KEYS)
    offsets = typed(table(read, "partition_offsets", lookup), OFFSET_SCHEMA)
    behind = pc.subtract(offsets.column("end_offset"), offsets.column("committed"))
    lag = pc.coalesce(pc.max_element_wise(behind, 0.0, skip_nulls=False), offsets.column("lag"))
    out = offsets.select([*SNAPSHOT_KEYS, *KEY]).append_column("lag", lag)
    out = with_pairs(out.filter(pc.is_valid(out.column("lag"))), pairs, SNAPSHOT_KEYS, ordered=False)
    return out.select([*PAIR_KEY, "lag"])


class Slots:
    """Every (pair, topic, partition) of a batch as one int64, its slot, in (pair, topic, partition) order: the pair
    and topic numbered together (in sorted order), times the batch's span of partitions, plus the partition.

    Lookups by slot are NumPy searches in sorted arrays, where Acero joins on the three columns cost several times
    more and copy their string columns.
    """

    def __init__(self, topics: pa.Table, tables: Sequence[pa.Table]) -> None:
        names = pc.unique(topics.column("topic"))
        self.names = names.take(pc.sort_indices(names))
        self.known = np.unique(self.codes(topics))
        partitions = [pc.min_max(t.column("partition")).as_py() for t in tables]
        low = min((p["min"] for p in partitions if p["min"] is not None), default=0)
        high = max((p["max"] for p in partitions if p["max"] is not None), default=0)
        self.low, self.span = low, high - low + 1

    def codes(self, data: pa.Table) -> np.ndarray:
        """The (pair, topic) number of each row: pair x topics + the topic's position; -1 for another topic."""
        at = pc.fill_null(pc.index_in(data.column("topic"), value_set=self.names), -1).to_numpy()
        pair = data.column(PAIR).to_numpy()
        return np.where(at >= 0, pair * len(self.names) + at, -1)

    def of(self, data: pa.Table) -> np.ndarray:
        """The slot of each row of `data` (pair, topic, partition); -1 for a (pair, topic) the batch lacks."""
        codes = self.codes(data)
        at = np.searchsorted(self.known, codes).clip(max=max(len(self.known) - 1, 0))
        known = (codes >= 0) & (self.known[at] == codes) if len(self.known) else np.zeros(len(codes), bool)
        partition = data.column("partition")
        known &= pc.is_valid(partition).to_numpy(zero_copy_only=False)
        offset = pc.fill_null(partition, self.low).to_numpy() - self.low
        return np.where(known, at * self.span + offset, -1)

    def codes_of(self, slots: np.ndarray) -> np.ndarray:
        """The (pair, topic) number of each slot."""
        return cast("np.ndarray", self.known[slots // self.span])

    def table(self, slots: np.ndarray) -> pa.Table:
        """The pair, topic and partition of each slot."""
        pair, topic = np.divmod(self.codes_of(slots), len(self.names))
        partition = slots % self.span + self.low
        return pa.table({PAIR: pair, "topic": self.names.take(topic), "partition": partition})


def first_at(slots: np.ndarray, held: np.ndarray) -> np.ndarray:
    """For each slot (sorted, distinct), the first row whose slot in `held` it is; -1 where no row holds it."""
    found, first = np.unique(held, return_index=True)
    if not len(found):
        return np.full(len(slots), -1)
    at = np.searchsorted(found, slots).clip(max=len(found) - 1)
    return np.where(found[at] == slots, first[at], -1)


def load_of(partitions: pa.Table, slots: np.ndarray) -> pa.Array:
    """The load of each slot's partition (null for a slot the batch has no partition of)."""
    every = partitions.column(SLOT).to_numpy()
    if not len(every):
        return pa.nulls(len(slots), pa.float64())
    at = np.searchsorted(every, slots).clip(max=len(every) - 1)
    return take_rows(partitions, "load", np.where(every[at] == slots, at, -1))


def take_rows(data: pa.Table, column: str, rows: np.ndarray) -> pa.Array:
    """`column`'s value at each row number (null at -1)."""
    return data.column(column).take(pa.array(rows, mask=rows < 0))


def tally_loads(slots: Slots, held: pa.Table, by: list[str], partitions: pa.Table) -> Iterator[tuple[Any, ...]]:
    """(*by, partitions, load) of the rows of `held` per distinct `by` (a partition without a load weighs 1.0).

    Counted TALLY_ROWS rows at a time, then the partial counts and sums added up: the slot lookup of five
    candidates of a million partitions would otherwise hold a dozen arrays of five million entries at once.
    """
    parts = []
    for start in range(0, held.num_rows, TALLY_ROWS):
        chunk = held.slice(start, TALLY_ROWS)
        loads = pa.table({c: chunk.column(c) for c in by}).append_column(
            "load", pc.fill_null(load_of(partitions, slots.of(chunk)), 1.0)
        )
        parts.append(decoded(loads.group_by(by, use_threads=False).aggregate([("load", "count"), ("load", "sum")])))
    if not parts:
        return iter(())
    summed = {c: parts[0].column(c) for c in [*by, "load_count", "load_sum"]}
    if len(parts) > 1:
        added = (
            pa.concat_tables(parts)
            .group_by(by, use_threads=False)
            .aggregate([("load_count", "sum"), ("load_sum", "sum")])
        )
        summed = {c: added.column(c) for c in by} | {t: added.column(f"{t}_sum") for t in ("load_count", "load_sum")}
    return zip(*(column.to_pylist() for column in summed.values()), strict=True)


def decoded(data: pa.Table) -> pa.Table:
    """`data` with its dictionary columns as plain values."""
    types = [f.type.value_type if pa.types.is_dictionary(f.type) else f.type for f in data.schema]
    return data.cast(pa.schema([f.with_type(t) for f, t in zip(data.schema, types, strict=True)]))

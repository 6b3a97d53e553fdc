"""The plan kernel: each group's snapshot rows and load measurements in, every strategy's candidate out.

Runs inside Spark's mapInArrow over rows hash-partitioned by group (`jobs.steps.plan`). A task's groups go
together straight from Arrow arrays into the planner's dense-id form (`jobs.kernels.group_spec.GroupBatch`): no
Python object per partition, so a group of 1,000,000 partitions stays a few arrays. The task writes the plan
rows and partition loads of all its groups to one Parquet file per table in the tables' directories (`plans`,
`plan_diffs`, `partition_loads`), gathering many candidates' rows as NumPy columns before each Arrow table
(`jobs.kernels.columns`), and returns only small rows: each candidate's `plan_metrics` and the path of each file
written, which the step commits to Delta.
"""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.fs as pa_fs
import pyarrow.parquet as pq

from jobs.kernels.columns import Columns
from jobs.kernels.group_spec import GroupBatch, bounds, partition_ids
from jobs.kernels.loads import Loads, choose
from jobs.kernels.memory import release_memory
from planner.assignment import assign_arrays
from planner.group import GroupSpec, frozen
from planner.load import load_bound
from schemas.rows import PlanMetrics
from schemas.tables import PARTITION_LOADS, PLAN_DIFFS, PLAN_METRICS, PLANS

# What the kernel returns: one row per candidate (its plan_metrics and the group's load source), then one row per
# file it wrote (`table`, `path` relative to the lake root's table directory); the other kind's columns are null.
OUTCOME = pa.schema(
    [
        *(f.with_nullable(True) for f in PLAN_METRICS.schema),
        pa.field("load_source", pa.string()),
        pa.field("table", pa.string()),
        pa.field("path", pa.string()),
    ]
)

ROW_GROUP_ROWS = 1 << 20  # plan rows per Parquet row group: small groups share one, a large one splits
FLUSH_ROWS = ROW_GROUP_ROWS // 2  # rows buffered before writing: a large candidate is written before the next is built
FLUSH_BYTES = 1 << 26  # or bytes: a large group's diffs are a few thousand rows holding a million pairs


@dataclass(frozen=True)
class PlanSettings:
    """One run's settings, shipped to the executors with the kernel."""

    strategies: tuple[str, ...]
    counts: Mapping[str, int]  # partition count per topic of the snapshot
    load_source: str  # jobs.kernels.loads.MODES
    lake: pa_fs.FileSystem  # the lake's file system (local or S3), rooted at the lake
    tables: tuple[str, ...]  # the tables whose directories (`<lake>/<table>`) the tasks write Parquet files into
    topic_ids: Mapping[str, str] = dataclasses.field(default_factory=dict)  # topic -> Kafka topic id, when known
    # group -> (its generation id in this run, its previous snapshot id or None): shipped with the kernel rather
    # than joined to every row, a join whose planning a cold driver JVM pays in seconds
    generations: Mapping[str, tuple[int, str | None]] = dataclasses.field(default_factory=dict)


@dataclass(frozen=True)
class Group:
    """A group ready to plan: the planner's input, today's owner per partition id, and its loads."""

    group_id: str
    generation_id: int  # the planning run's generation (the `generations` table), not Kafka's member generation
    spec: GroupSpec
    current: np.ndarray  # int32[P]: member id holding each partition per the members' `assignment` (-1: none)
    loads: Loads


def plan_kernel(settings: PlanSettings) -> Callable[[Iterable[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
    """The mapInArrow function of one run: plan each group of the task's rows, write files, return outcomes."""

    def kernel(batches: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        sinks = {name: ParquetSink(settings.lake, name, _SCHEMAS[name]) for name in settings.tables}
        yield from plan_groups(build_groups(task_rows(batches), settings), settings, sinks)
        files = [(name, path) for name, sink in sinks.items() if (path := sink.close())]
        release_memory()  # after plan_groups returned: its frame held the last group and the task's rows
        yield pa.RecordBatch.from_pydict(
            {"table": [n for n, _ in files], "path": [p for _, p in files]} | _nulls(OUTCOME, len(files)),
            schema=OUTCOME,
        )

    return kernel


def plan_groups(
    groups: Iterable[Group], settings: PlanSettings, sinks: Mapping[str, ParquetSink]
) -> Iterator[pa.RecordBatch]:
    """Plan each group with every strategy: plan rows, diffs and loads into the sinks, outcomes out."""
    gathered = {table.name: Columns(table.schema) for table in (PLANS, PLAN_DIFFS)}
    plans, diffs = gathered[PLANS.name], gathered[PLAN_DIFFS.name]
    for group in groups:
        sinks[PARTITION_LOADS.name].write(load_rows(group))
        bound = load_bound(group.spec)
        candidates = []
        for strategy in settings.strategies:
            chosen = candidate(group, strategy, bound)
            add_plan_rows(plans, group, chosen)
            add_diff_rows(diffs, group, chosen)
            flush(sinks, gathered, FLUSH_ROWS)  # a large candidate is written before the next is built
            candidates += [chosen.metrics] if chosen.metrics else []
        yield outcome_batch(choose_candidate(candidates), group.loads.label)
    flush(sinks, gathered, 1)


def flush(sinks: Mapping[str, ParquetSink], gathered: Mapping[str, Columns], held: int) -> None:
    """Hand each table's gathered rows to its sink once they and their lists' values number at least `held` (a
    large group's diffs are a few thousand rows holding a million pairs)."""
    for name, columns in gathered.items():
        if columns.held >= held:
            sinks[name].write(columns.table())


MEASURED = ("group_id", "topic", "partition", "source", "value")  # a load measurement's columns in the kernel's rows
_SCHEMAS = {t.name: t.schema for t in (PLANS, PLAN_DIFFS, PARTITION_LOADS)}


def task_rows(batches: Iterable[pa.RecordBatch]) -> pa.Table | None:
    """A task's rows as one table (None without rows): every row of each of its groups, in any order."""
    received = [b for b in batches if b.num_rows]
    return pa.Table.from_batches(received) if received else None


def build_groups(rows: pa.Table | None, settings: PlanSettings) -> Iterator[Group]:
    """Each group of a task's rows (members, and load measurements with `source` set) with members, as a Group,
    in group id order. The members of all the task's groups are read as one `GroupBatch`: a few passes over
    every row instead of a few dozen Arrow calls per group."""
    if rows is None:
        return
    is_load = pc.is_valid(rows.column("source"))
    members = rows.filter(pc.and_(pc.invert(is_load), pc.not_equal(rows.column("member_id"), "")))
    measured = rows.filter(is_load).select(list(MEASURED))
    del rows  # the kernel's frame drops its reference too: the members and measurements are what is held
    if pc.count_distinct(measured.column("group_id")).as_py() > 1:  # one group's (a large one's): no copy
        measured = measured.take(pc.sort_indices(measured.column("group_id")))
    starts, ends = bounds(measured.column("group_id"))
    measured_ids = measured.column("group_id").take(pa.array(starts)).to_pylist()
    measured_at = dict(zip(measured_ids, zip(starts.tolist(), ends.tolist(), strict=True), strict=True))
    batch = GroupBatch(members, settings.counts)
    del members
    for g in range(batch.groups):
        group_id = batch.group_id(g)
        generation_id, previous = settings.generations[group_id]
        spec = batch.spec(g, settings.topic_ids)
        start, end = measured_at.get(group_id, (0, 0))
        loads = choose(
            settings.load_source,
            measured_loads(measured.slice(start, end - start), spec),
            spec.num_partitions,
            has_previous=previous is not None,
        )
        spec = dataclasses.replace(spec, partition_loads=frozen(loads.values))
        yield Group(group_id, generation_id, spec, batch.current(g), loads)


def measured_loads(rows: pa.Table, spec: GroupSpec) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """Load measurements by source: (partition ids, values), -1 for a partition the group does not have."""
    part = partition_ids(rows.column("topic"), rows.column("partition"), spec.topics, spec.topic_start)
    value = pc.fill_null(rows.column("value"), np.nan).to_numpy(zero_copy_only=False)
    out = {}
    for source in pc.unique(rows.column("source")).to_pylist():
        mine = pc.equal(rows.column("source"), source).to_numpy(zero_copy_only=False)
        out[source] = (part[mine], value[mine])
    return out


def load_rows(group: Group) -> pa.Table:
    """`partition_loads` rows: every partition of the group's topics, its load and where it came from."""
    spec, n = group.spec, group.spec.num_partitions
    topic = spec.topic_of(np.arange(n))
    return pa.table(
        {
            "generation_id": pa.array(np.full(n, group.generation_id, dtype=np.int64)),
            "group_id": _repeat(group.group_id, n),
            "topic": _names(spec.topics, topic),
            "partition": pa.array((np.arange(n) - spec.topic_start[topic]).astype(np.int32)),
            "load": pa.array(group.loads.values),
            "source": pa.array(group.loads.sources.tolist(), pa.string()),
        },
        schema=PARTITION_LOADS.schema,
    )


@dataclass(frozen=True)
class Candidate:
    """One strategy's candidate in the group's dense ids: each assigned partition's target owner, previous owner
    (-1: none) and phase, and its `plan_metrics` (None when it assigns nothing)."""

    strategy: str
    parts: np.ndarray  # partition ids the candidate assigns, ascending
    member: np.ndarray  # target owner of each
    previous: np.ndarray  # today's owner of each (-1: none)
    assigned_now: np.ndarray  # bool: the target owner gets it in this round (phase `assign`), else `revoke`
    weight: np.ndarray
    metrics: PlanMetrics | None


def candidate(group: Group, strategy: str, bound: float) -> Candidate:
    """One strategy's candidate and its metrics.

    Cooperative rebalancing (KIP-429): a partition changing owner is revoked in this round and assigned in the
    follow-up one, so its target owner does not get it now (phase `revoke`).
    """
    spec = group.spec
    arrays = assign_arrays(strategy, spec)
    parts = np.flatnonzero(arrays.target >= 0)
    member = arrays.target[parts]
    previous = group.current[parts]
    moved = (previous >= 0) & (previous != member)
    weight = spec.partition_loads[parts] if spec.partition_loads is not None else np.ones(len(parts))
    chosen = Candidate(strategy, parts, member, previous, arrays.assignment[parts] == member, weight, None)
    n = len(parts)
    if n == 0:
        return chosen
    members = len(spec.members)
    held = np.bincount(member, minlength=members)
    load = np.bincount(member, weights=weight, minlength=members)
    mean = float(weight.sum()) / members
    owned_before = int(np.count_nonzero(previous >= 0))
    metrics: PlanMetrics = {
        "generation_id": group.generation_id,
        "group_id": group.group_id,
        "strategy": strategy,
        "members": members,
        "partitions": n,
        # A member with no partition has count 0, so the spread runs down to zero when anyone is idle.
        "count_spread": int(held.max() - held.min()),
        "max_load": float(load.max()),
        "mean_load": mean,
        "max_mean_load": float(load.max()) / mean if mean > 0 else 1.0,
        "load_bound": bound,
        "partitions_moved": int(moved.sum()),
        "stickiness": 1 - int(moved.sum()) / owned_before if owned_before else None,
    }
    return dataclasses.replace(chosen, metrics=metrics)


class Names:
    """Where a group's names start in a `Columns`' name list: its id, the candidate's strategy, the two phases,
    then its topics and members in their dense-id order."""

    def __init__(self, rows: Columns, group: Group, strategy: str) -> None:
        spec = group.spec
        self.group = rows.name_ids([group.group_id, strategy, "revoke", "assign", *spec.topics, *spec.members])
        self.strategy, self.revoke = self.group + 1, self.group + 2
        self.topics = self.group + 4
        self.members = self.topics + len(spec.topics)


def add_plan_rows(plans: Columns, group: Group, chosen: Candidate) -> None:
    """A candidate's `plans` rows: each assigned partition's target owner, previous owner, move and phase."""
    spec, names = group.spec, Names(plans, group, chosen.strategy)
    topic = spec.topic_of(chosen.parts)
    plans.add(
        len(chosen.parts),
        generation_id=group.generation_id,
        group_id=names.group,
        strategy=names.strategy,
        topic=names.topics + topic,
        partition=(chosen.parts - spec.topic_start[topic]).astype(np.int32),
        member=names.members + chosen.member,
        previous_member=np.where(chosen.previous >= 0, names.members + chosen.previous, -1),
        moved=(chosen.previous >= 0) & (chosen.previous != chosen.member),
        phase=names.revoke + chosen.assigned_now,
        weight=chosen.weight,
    )


def add_diff_rows(diffs: Columns, group: Group, chosen: Candidate) -> None:
    """`plan_diffs` rows of one candidate, a row per member of the group: the rule of `planner.plan_diff` (a
    member gains the planned partitions it holds after but not today, loses those it holds today but not after),
    counted over the candidate's plan rows."""
    spec, names, n = group.spec, Names(diffs, group, chosen.strategy), len(group.spec.members)
    parts, member, previous = chosen.parts, chosen.member, chosen.previous
    held = previous >= 0
    changed = previous != member
    lost = changed & held
    diffs.add(
        n,
        generation_id=group.generation_id,
        group_id=names.group,
        strategy=names.strategy,
        member=names.members + np.arange(n),
        partitions_before=np.bincount(previous[held], minlength=n).astype(np.int32),
        partitions_after=np.bincount(member, minlength=n).astype(np.int32),
    )
    diffs.add_pairs("gained", *_partition_lists(spec, member[changed], parts[changed], names.topics))
    diffs.add_pairs("lost", *_partition_lists(spec, previous[lost], parts[lost], names.topics))


def _partition_lists(
    spec: GroupSpec, owner: np.ndarray, parts: np.ndarray, topic_ids: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per member id, the (topic, partition) pairs of `parts` it is the `owner` of, sorted by topic name (code
    point order, as Spark's sort_array orders strings: by UTF-8 bytes) then partition: each member's count, then
    the pairs' topic name ids (from `topic_ids`) and partitions."""
    topic = spec.topic_of(parts)
    by_name = np.empty(len(spec.topics), dtype=np.int64)
    by_name[sorted(range(len(spec.topics)), key=spec.topics.__getitem__)] = np.arange(len(spec.topics))
    partition = parts - spec.topic_start[topic]
    order = np.lexsort((partition, by_name[topic], owner))
    lengths = np.bincount(owner, minlength=len(spec.members))
    return lengths, topic_ids + topic[order], partition[order]


def choose_candidate(candidates: Sequence[PlanMetrics]) -> list[PlanMetrics]:
    """The candidates with `chosen` set on one: best balance (lowest max/mean load), then fewest moves, then
    strategy name."""
    best = min(candidates, key=lambda c: (c["max_mean_load"], c["partitions_moved"], c["strategy"]), default=None)
    return [{**c, "chosen": c is best} for c in candidates]


def outcome_batch(candidates: Sequence[PlanMetrics], load_source: str) -> pa.RecordBatch:
    """Candidate rows of the kernel's outcome."""
    rows = [{**c, "load_source": load_source} for c in candidates]
    return pa.RecordBatch.from_pylist(rows, schema=OUTCOME)


class ParquetSink:
    """One Parquet file per task and table, opened on first write; small tables are buffered into row groups."""

    def __init__(self, lake: pa_fs.FileSystem, directory: str, schema: pa.Schema) -> None:
        self.lake, self.directory, self.schema = lake, directory, schema
        self.name = f"part-{uuid.uuid4().hex}.snappy.parquet"
        self.pending: list[pa.Table] = []
        self.rows = self.bytes = 0
        self.writer: pq.ParquetWriter | None = None

    def write(self, table: pa.Table) -> None:
        self.pending.append(table)
        self.rows += table.num_rows
        self.bytes += table.nbytes
        if self.rows >= FLUSH_ROWS or self.bytes >= FLUSH_BYTES:
            self._flush()

    def close(self) -> str | None:
        """Flush and close; the file's name inside the directory, or None when nothing was written."""
        self._flush()
        if self.writer is None:
            return None
        self.writer.close()
        return self.name

    def _flush(self) -> None:
        if not self.rows:
            return
        if self.writer is None:
            self.writer = pq.ParquetWriter(f"{self.directory}/{self.name}", self.schema, filesystem=self.lake)
        self.writer.write_table(pa.concat_tables(self.pending), row_group_size=ROW_GROUP_ROWS)
        self.pending, self.rows, self.bytes = [], 0, 0


def _names(names: Sequence[str], ids: np.ndarray) -> pa.Array:
    """Names by id (-1: null), taken in Arrow rather than one Python str per row (a take: half a dictionary cast's
    time on a group's few hundred rows)."""
    ids = np.asarray(ids, dtype=np.int32)
    return pa.array(names, pa.string()).take(pa.array(ids, mask=ids < 0))


def _repeat(value: str, n: int) -> pa.Array:
    """A string column holding one value n times."""
    return _names((value,), np.zeros(n, dtype=np.int32))


def _nulls(schema: pa.Schema, n: int) -> dict[str, pa.Array]:
    """Null columns for every field of `schema` but `table` and `path`."""
    return {f.name: pa.nulls(n, f.type) for f in schema if f.name not in ("table", "path")}

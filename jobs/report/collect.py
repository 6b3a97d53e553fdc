"""Everything one generation's report shows, gathered from the lake: per-partition data as Arrow tables, the rest
as plain data (lists of row dicts).

`collect` needs only `read(name, filters)` with the shape of `Lake.read_arrow`, so it runs without Spark. Columns
that the tables gain later (migration readiness, approval, verification status, load source ...) are carried
along when a table has them and skipped when it does not. Per-partition data stays Arrow (joins, group-bys) since a
group may have a million partitions; only what a page shows (capped at PARTITIONS_SHOWN bars, MOVES_SHOWN moves)
becomes Python rows. Small tables are plain rows rather than pandas frames: pandas' per-call overhead (about
0.1 ms an operation) would be most of the time of a thousand reports.
"""

from __future__ import annotations

import json
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from deltalake.exceptions import TableNotFoundError

from jobs.report.reader import Filters, Read
from planner.errors import InputError

Rows = list[dict[str, Any]]

GENERATION_COLUMNS = (
    "group_id",
    "generation_id",
    "created_at",
    "trigger",
    "run_id",
    "parameters",
    "snapshot_id",
    "chosen_strategy",
    "status",
    "gate_summary",
    "changes",
)
"""The generation columns the page lays out itself; any other column is shown as it is, in the header."""

HOT_KEYS_SHOWN = 10
PLAN_COLUMNS = ("strategy", "topic", "partition", "member", "previous_member", "moved", "phase", "weight")
SKEW_COLUMNS = ("topic", "partitioner", "partition_count", "current", "partition", "load", "messages")
HOT_KEY_COLUMNS = ("topic", "partition_count", "rank", "key", "messages", "share", "partition")
FINGERPRINT_COLUMNS = ("topic", "partitioner", "share", "observed_messages", "explained_messages")
TODAY = "today"
KEY = ["topic", "partition"]
SORTED = [("topic", "ascending"), ("partition", "ascending")]
PARTITIONS_SHOWN = 2000
"""Per-partition bars a chart draws (of one topic's count in a what-if chart): beyond it, the heaviest ones."""

_TOPIC_PARTITION = [pa.field("topic", pa.string()), pa.field("partition", pa.int64())]
PLAN_SCHEMA = pa.schema(
    [pa.field("strategy", pa.string()), *_TOPIC_PARTITION]
    + [pa.field(c, pa.string()) for c in ("member", "previous_member")]
    + [pa.field("moved", pa.bool_()), pa.field("phase", pa.string()), pa.field("weight", pa.float64())]
)
SKEW_SCHEMA = pa.schema(
    [pa.field("topic", pa.string()), pa.field("partitioner", pa.string()), pa.field("partition_count", pa.int64())]
    + [pa.field("current", pa.bool_()), pa.field("partition", pa.int64())]
    + [pa.field("load", pa.float64()), pa.field("messages", pa.float64())]
)
OFFSET_SCHEMA = pa.schema(_TOPIC_PARTITION + [pa.field(c, pa.float64()) for c in ("committed", "end_offset", "lag")])
SNAPSHOT_SCHEMA = pa.schema(
    [pa.field("member_id", pa.string()), pa.field("assignment", pa.list_(pa.struct(_TOPIC_PARTITION)))]
)
MOVE_SCHEMA = pa.schema(
    [pa.field("round", pa.int64()), pa.field("action", pa.string()), *_TOPIC_PARTITION]
    + [pa.field("previous_member", pa.string()), pa.field("member", pa.string()), pa.field("load", pa.float64())]
)


@dataclass(frozen=True)
class GenerationReport:
    """One generation of one group, ready to render; every list may be empty (nothing measured or planned)."""

    group_id: str
    generation_id: int
    generation: dict[str, Any]  # the `generations` row, every column the table has
    extras: dict[str, Any]  # non-empty columns beyond GENERATION_COLUMNS (JSON text parsed)
    changes: Any  # what changed since the last generation, when the lake records it
    parameters: dict[str, Any]
    partitions: pa.Table  # topic, partition, load, source, owner (today), member (chosen plan), lag
    what_if: dict[str, pa.Table]  # topic -> partitioner, partition_count, current, partition, load
    skew_summary: Rows  # key_skew_summary rows of the group's topics
    hot_keys: Rows  # topic, rank, key (printable), messages, share, partition (today)
    fingerprint: Rows  # topic, partitioner, share, observed_messages, explained_messages
    candidates: Rows  # plan_metrics rows (every column the table has), chosen first
    members: Rows  # member, assignment (TODAY or a candidate's strategy), chosen, partitions, load
    moves: pa.Table  # round, action, topic, partition, previous_member, member, load (MOVE_SCHEMA)
    lag: Rows  # member, today, after (the chosen plan)
    gate: Rows  # expectation, success, observed_value, details, ...; failed first
    notes: list[str] = field(default_factory=list)

    @property
    def status(self) -> str:
        return str(self.generation.get("status") or "unknown")

    @property
    def trigger(self) -> str:
        return str(self.generation.get("trigger") or "unknown")

    @property
    def chosen_strategy(self) -> str | None:
        return self.generation.get("chosen_strategy")


def collect(read: Read, group_id: str, generation_id: int) -> GenerationReport:
    """Gather one generation's report from the lake; InputError when the lake has no such generation."""
    keys = [("group_id", "=", group_id), ("generation_id", "=", int(generation_id))]
    found = rows(read, "generations", keys)
    if not found:
        raise InputError(f"generations: group {group_id!r} has no generation {generation_id}")
    generation = found[0]
    parameters = _json(generation.get("parameters"))
    parameters = parameters if isinstance(parameters, dict) else {"parameters": parameters}
    changes = _json(generation.get("changes", parameters.get("changes")))
    run_id, snapshot_id = generation.get("run_id"), generation.get("snapshot_id")

    # Per-partition data stays Arrow end to end (a million-partition group has millions of plan rows).
    plans = typed(table(read, "plans", keys, PLAN_COLUMNS), PLAN_SCHEMA)
    metrics = rows(read, "plan_metrics", keys)
    chosen = generation.get("chosen_strategy") or next((m["strategy"] for m in metrics if m.get("chosen")), None)
    target = candidate(plans, chosen)
    roster, today = _today(read, group_id, snapshot_id)
    topics = sorted(set(distinct(plans, "topic")) | set(distinct(today, "topic")))
    run = [("topic", "in", topics), ("run_id", "=", run_id)]

    skew = typed(table(read, "key_skew", run, SKEW_COLUMNS), SKEW_SCHEMA)
    offsets = [("group_id", "=", group_id), ("snapshot_id", "=", snapshot_id)]
    lags = _lags(typed(table(read, "partition_offsets", offsets), OFFSET_SCHEMA))
    partitions = partition_loads(skew, target, today, lags, set(parameters.get("weighted_topics") or []))
    members = sorted(set(roster) | (set(distinct(plans, "member")) - {None}))
    summary = sorted(rows(read, "key_skew_summary", run), key=lambda r: (r["topic"], r["partition_count"]))
    current = {r["topic"]: r["partition_count"] for r in summary if r.get("current")}
    return GenerationReport(
        group_id=group_id,
        generation_id=int(generation_id),
        generation=generation,
        extras={k: _json(v) for k, v in generation.items() if k not in GENERATION_COLUMNS and v not in (None, "")},
        changes=changes,
        parameters=parameters,
        partitions=partitions,
        what_if=_what_if(skew),
        skew_summary=summary,
        hot_keys=_hot_keys(rows(read, "key_skew_hot_keys", run, HOT_KEY_COLUMNS), current),
        fingerprint=_fingerprint(rows(read, "key_skew_fingerprint", run, FINGERPRINT_COLUMNS)),
        candidates=_without_keys(sorted(metrics, key=lambda m: (not m.get("chosen"), m["strategy"]))),
        members=member_loads(members, today, plans, chosen, partitions),
        moves=moves(target, partitions),
        lag=member_lag(members, partitions),
        gate=_without_keys(
            sorted(rows(read, "gate_results", keys), key=lambda r: (bool(r["success"]), r["expectation"]))
        ),
        notes=_notes(partitions, today),
    )


def history(read: Read, group_id: str) -> Rows:
    """One row per generation of the group (newest first), with the chosen candidate's balance and moves."""
    chosen = {m["generation_id"]: m for m in rows(read, "plan_metrics", [("group_id", "=", group_id)]) if m["chosen"]}
    out = []
    for g in rows(read, "generations", [("group_id", "=", group_id)]):
        best = chosen.get(g["generation_id"], {})
        out.append(g | {k: best.get(k) for k in ("max_mean_load", "partitions_moved", "members", "partitions")})
    return sorted(out, key=lambda g: -g["generation_id"])


def groups(read: Read) -> Rows:
    """One row per group, sorted by id: the latest generation's row plus how many generations the group has."""
    latest: dict[str, dict[str, Any]] = {}
    count: dict[str, int] = defaultdict(int)
    for g in rows(read, "generations"):
        count[g["group_id"]] += 1
        if g["group_id"] not in latest or g["generation_id"] > latest[g["group_id"]]["generation_id"]:
            latest[g["group_id"]] = g
    return [latest[g] | {"generations": count[g]} for g in sorted(latest)]


def rows(read: Read, name: str, filters: Filters = None, columns: tuple[str, ...] | None = None) -> Rows:
    """A table's rows as dicts (only `columns`, those the table has, when given); a missing table reads as empty."""
    return table(read, name, filters, columns).to_pylist()


def table(read: Read, name: str, filters: Filters = None, columns: tuple[str, ...] | None = None) -> pa.Table:
    """A table's rows (only `columns`, those the table has, when given); a missing table reads as no columns."""
    if filters and any(op == "=" and value is None for _, op, value in filters):
        return pa.table({})  # a lookup on a missing id (e.g. no run id) matches nothing
    try:
        found = read(name, list(filters) if filters else None)
    except TableNotFoundError:
        return pa.table({})
    # Selecting first spares converting columns nobody shows (timestamps cost most) into Python objects.
    return found.select([c for c in columns if c in found.column_names]) if columns else found


def typed(data: pa.Table, schema: pa.Schema) -> pa.Table:
    """`data` with exactly `schema`'s columns and types, so later steps need not ask which columns a lake has."""
    n = data.num_rows
    columns = [data.column(f.name).cast(f.type) if f.name in data.column_names else pa.nulls(n, f.type) for f in schema]
    return pa.Table.from_arrays(columns, schema=schema)


def candidate(plans: pa.Table, strategy: str | None) -> pa.Table:
    """The plan rows of one candidate (none for no strategy)."""
    return plans.filter(pc.equal(plans.column("strategy"), pa.scalar(strategy, pa.string()))).drop_columns("strategy")


def distinct(data: pa.Table, column: str) -> list[Any]:
    """The distinct values of a column (none when the table lacks it)."""
    return pc.unique(data.column(column)).to_pylist() if column in data.column_names else []


def partition_loads(skew: pa.Table, target: pa.Table, today: pa.Table, lags: pa.Table, weighted: set[str]) -> pa.Table:
    """Today's load of every partition: the run's key-skew messages, else the plan's weight, else 1.0.

    Columns topic, partition, load, source, owner (today), member (the chosen plan), lag; sorted by partition.
    """
    planned, owners, measured = target.select([*KEY, "member", "weight"]), today, _measured(skew)
    every = pa.concat_tables([t.select(KEY) for t in (planned, owners, measured)])
    seen = key(every)
    keys = pc.unique(seen)
    out = every.take(pc.index_in(keys, value_set=seen))
    plan = _lookup(keys, planned)
    weight = plan.column("weight")
    measured_load = _lookup(keys, measured).column("measured")
    listed = pc.is_in(out.column("topic"), pa.array(sorted(weighted), pa.string()))
    by_weight = pc.and_kleene(pc.is_valid(weight), pc.or_kleene(listed, pc.not_equal(weight, 1.0)))
    load = pc.if_else(pc.is_valid(measured_load), measured_load, pc.if_else(by_weight, weight, 1.0))
    source = pc.if_else(pc.is_valid(measured_load), "key skew", pc.if_else(by_weight, "plan weight", "uniform"))
    columns = {"load": load, "source": source, "owner": _lookup(keys, owners).column("member")}
    columns |= {"member": plan.column("member"), "lag": _lookup(keys, lags).column("lag")}
    for name, values in columns.items():
        out = out.append_column(name, values)
    return out.sort_by(SORTED)


def key(data: pa.Table) -> pa.Array:
    """One text per row naming its (topic, partition): rows are looked up by it with `index_in`, far cheaper than
    a join (a thousand small reports would spend most of their time setting joins up)."""
    text = pc.binary_join_element_wise(data.column("topic"), data.column("partition").cast(pa.string()), "\x00")
    return text.combine_chunks() if isinstance(text, pa.ChunkedArray) else text


def _lookup(keys: pa.Array, data: pa.Table) -> pa.Table:
    """The row of `data` for each key (nulls where it has none), in the order of `keys`."""
    return data.take(pc.index_in(keys, value_set=key(data)))


def _measured(skew: pa.Table) -> pa.Table:
    """Measured load per partition at today's count; one partitioner per topic, the first by name."""
    first = skew.group_by("topic").aggregate([("partitioner", "min")])
    current = skew.filter(pc.fill_null(skew.column("current"), False))
    at = pc.index_in(current.column("topic"), value_set=first.column("topic").combine_chunks())
    mine = current.filter(pc.equal(current.column("partitioner"), first.column("partitioner_min").take(at)))
    load = pc.coalesce(mine.column("load"), mine.column("messages"))
    return mine.select(KEY).append_column("measured", load)


def member_loads(
    members: list[str], today: pa.Table, plans: pa.Table, chosen: str | None, partitions: pa.Table
) -> Rows:
    """Load and partition count per member today and under every candidate, all with the same partition loads."""
    per = _per_member(today, plans, partitions)
    assigned = {strategy for strategy, _ in per}
    out = []
    for assignment in [TODAY, *sorted(distinct(plans, "strategy"))]:
        if assignment not in assigned and assignment != TODAY:
            continue  # a candidate that assigns nothing has no column, as today always has
        out += [
            {"member": m, "assignment": assignment, "chosen": assignment == chosen}
            | {"partitions": per.get((assignment, m), (0, 0.0))[0], "load": per.get((assignment, m), (0, 0.0))[1]}
            for m in members
        ]
    return out


def _per_member(today: pa.Table, plans: pa.Table, partitions: pa.Table) -> dict[tuple[str, str], tuple[int, float]]:
    """(assignment, member) -> (partitions, load), today's and every candidate's at once (unknown load: 1.0)."""
    owned = today.add_column(0, "strategy", pa.repeat(pa.scalar(TODAY, pa.string()), today.num_rows))
    planned = plans.filter(pc.is_valid(plans.column("member"))).select(owned.column_names)
    held = pa.concat_tables([owned, planned])
    held = held.append_column("load", pc.fill_null(_lookup(key(held), partitions).column("load"), 1.0))
    summed = held.group_by(["strategy", "member"]).aggregate([("load", "count"), ("load", "sum")]).to_pylist()
    return {(r["strategy"], r["member"]): (r["load_count"], r["load_sum"]) for r in summed}


def moves(target: pa.Table, partitions: pa.Table) -> pa.Table:
    """The chosen plan's partition movements in rebalance order (columns MOVE_SCHEMA).

    Cooperative rebalancing (KIP-429): a partition changing owner is revoked in round 1 and assigned in round 2
    (the follow-up rebalance); eager protocols move it within one rebalance. Unowned partitions are assigned in
    round 1 either way.
    """
    rows = target.append_column("load", _lookup(key(target), partitions).column("load"))
    previous = rows.column("previous_member")
    revoke = pc.fill_null(pc.equal(rows.column("phase"), "revoke"), False)
    unowned = pc.and_(pc.invert(revoke), pc.is_null(previous))
    changed = pc.fill_null(pc.not_equal(previous, rows.column("member")), True)
    moved = pc.and_(pc.and_(pc.invert(revoke), pc.is_valid(previous)), changed)
    revoked = rows.filter(revoke)
    parts = [
        _moved(revoked, 1, "revoke", keep_member=False),
        _moved(revoked, 2, "assign"),
        _moved(rows.filter(unowned), 1, "assign (was unowned)"),
        _moved(rows.filter(moved), 1, "move"),
    ]
    order = [("round", "ascending"), *SORTED, ("action", "ascending")]
    return pa.concat_tables(parts).sort_by(order)


def _moved(rows: pa.Table, round_: int, action: str, *, keep_member: bool = True) -> pa.Table:
    """Plan rows as moves of one round and action (the member left out while a partition is revoked)."""
    n = rows.num_rows
    member = rows.column("member") if keep_member else pa.nulls(n, pa.string())
    columns = [pa.repeat(pa.scalar(round_, pa.int64()), n), pa.repeat(pa.scalar(action, pa.string()), n)]
    columns += [rows.column("topic"), rows.column("partition"), rows.column("previous_member"), member]
    return pa.Table.from_arrays([*columns, rows.column("load")], schema=MOVE_SCHEMA)


def member_lag(members: list[str], partitions: pa.Table) -> Rows:
    """Lag (end offset - committed) summed over each member's partitions, today and under the chosen plan."""
    known = partitions.filter(pc.is_valid(partitions.column("lag")))
    today, after = (
        {r[by]: r["lag_sum"] for r in known.group_by(by).aggregate([("lag", "sum")]).to_pylist()}
        for by in ("owner", "member")
    )
    return [{"member": m, "today": today.get(m, 0.0), "after": after.get(m, 0.0)} for m in members]


def heaviest(data: pa.Table, limit: int) -> pa.Table:
    """At most `limit` rows, the heaviest by load (ties by partition), in partition order: what a chart can show."""
    if data.num_rows <= limit:
        return data
    top = data.sort_by([("load", "descending"), *SORTED]).slice(0, limit)
    return top.sort_by(SORTED)


def key_text(key: Any) -> str:
    """A message key as text: UTF-8 when printable, hex otherwise ("(null)" for the null key)."""
    if key is None:
        return "(null)"
    if isinstance(key, str):
        return key
    try:
        text = bytes(key).decode("utf-8")
    except UnicodeDecodeError:
        text = None
    return text if text is not None and text.isprintable() else "0x" + bytes(key).hex()


def _today(read: Read, group_id: str, snapshot_id: str | None) -> tuple[list[str], pa.Table]:
    """The snapshot's members and today's owner of each partition (topic, partition, member: the coordinator's)."""
    members = [("group_id", "=", group_id), ("snapshot_id", "=", snapshot_id)]
    snapshot = typed(table(read, "snapshots", members, ("member_id", "assignment")), SNAPSHOT_SCHEMA)
    # A group without members has one row with member_id ''.
    snapshot = snapshot.filter(pc.fill_null(pc.not_equal(snapshot.column("member_id"), ""), False))
    assignment = snapshot.column("assignment").combine_chunks()
    held = pc.list_flatten(assignment)
    owner = snapshot.column("member_id").combine_chunks().take(pc.list_parent_indices(assignment))
    owners = pa.Table.from_arrays([held.field("topic"), held.field("partition"), owner], names=[*KEY, "member"])
    return sorted(distinct(snapshot, "member_id")), owners


def _lags(offsets: pa.Table) -> pa.Table:
    """Lag per partition (topic, partition, lag): end offset - committed when both are known, else the lag column."""
    behind = pc.subtract(offsets.column("end_offset"), offsets.column("committed"))
    lag = pc.coalesce(pc.max_element_wise(behind, 0.0, skip_nulls=False), offsets.column("lag"))
    out = offsets.select(KEY).append_column("lag", lag)
    return out.filter(pc.is_valid(out.column("lag")))


def _what_if(skew: pa.Table) -> dict[str, pa.Table]:
    """Per-partition load of every measured partition count (today's and each what-if), per topic."""
    load = pc.coalesce(skew.column("load"), skew.column("messages"))
    out = skew.select(["topic", "partitioner", "partition_count", "current", "partition"]).append_column("load", load)
    order = ["topic", "partitioner", "partition_count", "partition"]
    return by_topic(out.sort_by([(c, "ascending") for c in order]))


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


def _hot_keys(hot: Rows, current: dict[str, int]) -> Rows:
    """The hottest keys of each topic at today's partition count, printable."""
    out = [
        {"topic": r["topic"], "rank": r["rank"], "key": key_text(r["key"]), "messages": r["messages"]}
        | {"share": r["share"], "partition": r["partition"]}
        for r in hot
        if current.get(r["topic"]) == r["partition_count"] and r["rank"] <= HOT_KEYS_SHOWN
    ]
    return sorted(out, key=lambda r: (r["topic"], r["rank"]))


def _fingerprint(prints: Rows) -> Rows:
    """Share of observed records each known partitioner explains, best first per topic."""
    out = [{c: r.get(c) for c in FINGERPRINT_COLUMNS} for r in prints]
    return sorted(out, key=lambda r: (r["topic"], -(r["share"] or 0.0), r["partitioner"]))


def _without_keys(table: Rows) -> Rows:
    """Rows without the group and generation ids the page already shows."""
    return [{k: v for k, v in r.items() if k not in ("generation_id", "group_id")} for r in table]


def _notes(partitions: pa.Table, today: pa.Table) -> list[str]:
    """Facts the charts cannot show: partitions nobody owns today and the lag sitting on them."""
    if partitions.num_rows and not today.num_rows:
        return ["No member owns a partition today: every partition is assigned for the first time."]
    unowned = partitions.filter(pc.is_null(partitions.column("owner")))
    if not unowned.num_rows:
        return []
    lag = pc.sum(unowned.column("lag")).as_py() or 0.0
    return [f"{unowned.num_rows} partition(s) have no owner today (lag {lag:,.0f}); the plan assigns them."]


def _json(value: Any) -> Any:
    """A JSON text as data; any other value (or text that is not JSON) as it is."""
    if isinstance(value, str):
        try:
            return json.loads(value)
        except ValueError:
            return value
    return value

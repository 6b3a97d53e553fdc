"""What a generation's page shows, gathered from the lake: per-partition data as Arrow tables, the rest
as plain data (lists of row dicts).

`collect_many` gathers many generations at once: each table is read once for all of them (a lookup names every
group of the batch), every per-partition step is one Arrow call over all their rows, each row tagged with its
generation's position in the batch (`pair`), and the results are sliced per generation at the end. One Arrow call
per generation and step costs 10-300 us whatever the size, which was most of the time of a thousand small reports.
`collect` is the same for one generation. Both need only `read(name, filters)` with the shape of `Lake.read_arrow`,
so they run without Spark. Columns that the tables gain later (migration readiness, approval, verification status,
load source ...) are carried along when a table has them and skipped when it does not. Per-partition data stays
Arrow (joins, group-bys) since a group may have a million partitions; only what a page shows (capped at
PARTITIONS_SHOWN bars, MOVES_SHOWN moves) becomes Python rows. How a batch is read and aligned in Arrow (columns,
lookups, pairs, slots) is `jobs.report.arrow_batch`.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from jobs.report.arrow_batch import (
    FINGERPRINT_COLUMNS,
    GROUP_FIELD,
    GROUP_KEYS,
    HOT_KEY_COLUMNS,
    PAIR,
    PLAN_COLUMNS,
    PLAN_SCHEMA,
    READ_COLUMNS,
    SKEW_COLUMNS,
    SKEW_KEYS,
    SKEW_SCHEMA,
    SLOT,
    TOPIC_PARTITION_FIELDS,
    Rows,
    Slots,
    by_topic,
    decoded,
    distinct,
    first_at,
    grouped_by,
    left_joined,
    load_of,
    lookup_terms,
    of_generations,
    pair_topics,
    partition_lags,
    rows,
    split_by_pair,
    table,
    take_rows,
    tally_loads,
    today_owners,
    typed,
    with_pairs,
)
from jobs.report.reader import Filters, Read
from planner.errors import InputError

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
HISTORY_COLUMNS = ("max_mean_load", "partitions_moved", "members", "partitions")
TODAY = "today"
SORTED = [("topic", "ascending"), ("partition", "ascending")]
PARTITIONS_SHOWN = 2000
"""Per-partition bars a chart draws (of one topic's count in a what-if chart): beyond it, the heaviest ones."""

MOVE_SCHEMA = pa.schema(
    [pa.field("round", pa.int64()), pa.field("action", pa.string()), *TOPIC_PARTITION_FIELDS]
    + [pa.field("previous_member", pa.string()), pa.field("member", pa.string()), pa.field("load", pa.float64())]
)
_PAIRED_MOVES = pa.schema([pa.field(PAIR, pa.int64()), *MOVE_SCHEMA])


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


@dataclass(frozen=True)
class _Batch:
    """What `collect_many` gathered: per pair (its position in the batch), per generation or per run and topic."""

    found: Rows  # the `generations` rows
    parameters: list[dict[str, Any]]
    metrics: dict[tuple[Any, ...], Rows]  # (group, generation) -> plan_metrics rows
    topics: dict[int, list[str]]
    members: dict[int, list[str]]
    partitions: list[pa.Table]
    moves: list[pa.Table]
    per_member: dict[int, dict[tuple[str, str], Any]]  # (assignment, member) -> partitions, load
    lag: tuple[dict[tuple[int, str], float], dict[tuple[int, str], float]]  # (pair, member) -> today, after
    notes: list[list[str]]
    what_if: dict[str | None, dict[str, pa.Table]]  # run -> topic -> loads at each measured count
    skew: dict[str, dict[tuple[Any, ...], Rows]]  # summary / hot_keys / fingerprint -> (run, topic) -> rows
    gate: dict[tuple[Any, ...], Rows]


def collect(read: Read, group_id: str, generation_id: int) -> GenerationReport:
    """Gather one generation's report from the lake; InputError when the lake has no such generation."""
    return collect_many(read, [(group_id, int(generation_id))])[0]


def collect_many(read: Read, wanted: Sequence[tuple[str, int]]) -> list[GenerationReport]:
    """Gather the reports of many (group, generation) pairs together, in `wanted`'s order; InputError naming the
    first pair the lake lacks."""
    if not wanted:
        return []
    batch = _gather(read, _generations(read, wanted))
    return [_report(batch, pair) for pair in range(len(batch.found))]


def _gather(read: Read, found: Rows) -> _Batch:
    """What the pages of `found` generations show: each table read once, each per-partition step one Arrow call."""
    by_generation = lookup_terms(found, GROUP_KEYS)
    metrics = grouped_by(rows(read, "plan_metrics", by_generation), GROUP_KEYS)
    pairs, parameters = _pairs(found, metrics), [_parameters(g) for g in found]
    # Per-partition data stays Arrow end to end (a million-partition group has millions of plan rows).
    plans = of_generations(typed(table(read, "plans", by_generation, PLAN_COLUMNS), PLAN_SCHEMA), pairs)
    chosen = pc.equal(plans.column("strategy"), pairs.column("chosen").take(plans.column(PAIR)))
    target = decoded(plans.filter(chosen))
    plans = plans.select([PAIR, "strategy", "topic", "partition", "member"]).unify_dictionaries()  # for group-bys
    roster, owners = today_owners(read, pairs)
    topics = pair_topics(plans, owners, pairs)
    by_topic = lookup_terms(topics.select(list(SKEW_KEYS)).to_pylist(), SKEW_KEYS)
    skew = typed(table(read, "key_skew", by_topic, SKEW_COLUMNS), SKEW_SCHEMA)
    measured = with_pairs(_measured(skew), topics, SKEW_KEYS)
    slots = Slots(topics, [target, owners, measured])
    partitions = partition_loads(slots, target, owners, measured, partition_lags(read, pairs), _weighted(parameters))
    per_member = _per_member(slots, owners, plans, partitions)
    return _Batch(
        found=found,
        parameters=parameters,
        metrics=metrics,
        topics=_topic_lists(topics),
        members=_members(roster, per_member),
        partitions=split_by_pair(partitions, len(found)),
        moves=split_by_pair(moves(slots, target, partitions), len(found)),
        per_member=per_member,
        lag=(_lag_sums(partitions, "owner"), _lag_sums(partitions, "member")),
        notes=_notes(partitions, owners, len(found)),
        what_if={run: _what_if(skew.filter(pc.equal(skew.column("run_id"), run))) for run in distinct(skew, "run_id")},
        skew=_skew_rows(read, by_topic),
        gate=grouped_by(rows(read, "gate_results", by_generation), GROUP_KEYS),
    )


def _skew_rows(read: Read, by_topic: Filters) -> dict[str, dict[tuple[Any, ...], Rows]]:
    """The key-skew summary, hot keys and fingerprints of the batch's runs and topics, by (run, topic)."""
    return {
        "summary": grouped_by(rows(read, "key_skew_summary", by_topic), SKEW_KEYS),
        "hot_keys": grouped_by(rows(read, "key_skew_hot_keys", by_topic, HOT_KEY_COLUMNS), SKEW_KEYS),
        "fingerprint": grouped_by(
            rows(read, "key_skew_fingerprint", by_topic, READ_COLUMNS["key_skew_fingerprint"]), SKEW_KEYS
        ),
    }


def _report(batch: _Batch, pair: int) -> GenerationReport:
    """The report of the batch's pair number `pair`."""
    generation, parameters = batch.found[pair], batch.parameters[pair]
    key = (generation["group_id"], generation["generation_id"])
    run, topics, members = generation.get("run_id"), batch.topics.get(pair, []), batch.members.get(pair, [])
    metrics = batch.metrics.get(key, [])
    summary = sorted(_of(batch.skew["summary"], run, topics), key=lambda r: (r["topic"], r["partition_count"]))
    current = {r["topic"]: r["partition_count"] for r in summary if r.get("current")}
    what_if = batch.what_if.get(run, {})
    per = batch.per_member.get(pair, {})
    strategies = sorted({assignment for assignment, _ in per} - {TODAY})
    today, after = batch.lag
    return GenerationReport(
        group_id=generation["group_id"],
        generation_id=int(generation["generation_id"]),
        generation=generation,
        extras={
            k: parsed_json(v) for k, v in generation.items() if k not in GENERATION_COLUMNS and v not in (None, "")
        },
        changes=parsed_json(generation.get("changes", parameters.get("changes"))),
        parameters=parameters,
        partitions=batch.partitions[pair],
        what_if={t: what_if[t] for t in topics if t in what_if},
        skew_summary=summary,
        hot_keys=_hot_keys(_of(batch.skew["hot_keys"], run, topics), current),
        fingerprint=_fingerprint(_of(batch.skew["fingerprint"], run, topics)),
        candidates=_without_keys(sorted(metrics, key=lambda m: (not m.get("chosen"), m["strategy"]))),
        members=member_loads(members, strategies, per, _chosen(generation, metrics)),
        moves=batch.moves[pair],
        lag=[{"member": m, "today": today.get((pair, m), 0.0), "after": after.get((pair, m), 0.0)} for m in members],
        gate=_without_keys(sorted(batch.gate.get(key, []), key=lambda r: (bool(r["success"]), r["expectation"]))),
        notes=batch.notes[pair],
    )


def history(read: Read, group_id: str) -> Rows:
    """One row per generation of the group (newest first), with the chosen candidate's balance and moves."""
    return histories(read, [group_id])[group_id]


def histories(read: Read, group_ids: Sequence[str]) -> dict[str, Rows]:
    """`history` of every group named, from one lookup per table."""
    lookup = [("group_id", "in", sorted(set(group_ids)))]
    chosen = {(m["group_id"], m["generation_id"]): m for m in rows(read, "plan_metrics", lookup) if m["chosen"]}
    out: dict[str, Rows] = defaultdict(list)
    for g in rows(read, "generations", lookup):
        best = chosen.get((g["group_id"], g["generation_id"]), {})
        out[g["group_id"]].append(g | {k: best.get(k) for k in HISTORY_COLUMNS})
    return {g: sorted(out[g], key=lambda r: -r["generation_id"]) for g in group_ids}


def groups(read: Read) -> Rows:
    """One row per group, sorted by id: the latest generation's row plus how many generations the group has."""
    latest: dict[str, dict[str, Any]] = {}
    count: dict[str, int] = defaultdict(int)
    for g in rows(read, "generations"):
        count[g["group_id"]] += 1
        if g["group_id"] not in latest or g["generation_id"] > latest[g["group_id"]]["generation_id"]:
            latest[g["group_id"]] = g
    return [latest[g] | {"generations": count[g]} for g in sorted(latest)]


def partition_loads(
    slots: Slots, target: pa.Table, owners: pa.Table, measured: pa.Table, lags: pa.Table, weighted: pa.Table
) -> pa.Table:
    """Today's load of every partition of every pair: the run's key-skew messages, else the plan's weight, else 1.0.

    Columns pair, topic, partition, load, source, owner (today), member (the chosen plan), lag, slot; sorted by
    pair and partition. The weight of a topic in `weighted` (pair, topic) counts even where it is 1.
    """
    held = [slots.of(t) for t in (target, owners, measured)]
    every = np.unique(np.concatenate(held))
    every = every[every >= 0]
    planned = first_at(every, held[0])
    weight = take_rows(target, "weight", planned)
    measured_load = take_rows(measured, "measured", first_at(every, held[2]))
    listed = pa.array(np.isin(slots.codes_of(every), slots.codes(weighted)))
    by_weight = pc.and_kleene(pc.is_valid(weight), pc.or_kleene(listed, pc.not_equal(weight, 1.0)))
    load = pc.if_else(pc.is_valid(measured_load), measured_load, pc.if_else(by_weight, weight, 1.0))
    source = pc.if_else(pc.is_valid(measured_load), "key skew", pc.if_else(by_weight, "plan weight", "uniform"))
    out = slots.table(every).append_column("load", load).append_column("source", source)
    out = out.append_column("owner", take_rows(owners, "member", first_at(every, held[1])))
    out = out.append_column("member", take_rows(target, "member", planned))
    out = out.append_column("lag", take_rows(lags, "lag", first_at(every, slots.of(lags))))
    return out.append_column(SLOT, pa.array(every))


def member_loads(
    members: list[str], strategies: list[str], per: dict[tuple[str, str], tuple[int, float]], chosen: str | None
) -> Rows:
    """Load and partition count per member today and under every candidate, all with the same partition loads."""
    assigned = {strategy for strategy, _ in per}
    out = []
    for assignment in [TODAY, *strategies]:
        if assignment not in assigned and assignment != TODAY:
            continue  # a candidate that assigns nothing has no column, as today always has
        for m in members:
            partitions, load = per.get((assignment, m), (0, 0.0))
            row = {"member": m, "assignment": assignment, "chosen": assignment == chosen}
            out.append(row | {"partitions": partitions, "load": load})
    return out


def _per_member(
    slots: Slots, owners: pa.Table, plans: pa.Table, partitions: pa.Table
) -> dict[int, dict[tuple[str, str], Any]]:
    """Per pair, (assignment, member) -> (partitions, load), today's and every candidate's (unknown load: 1.0)."""
    out: dict[int, dict[tuple[str, str], Any]] = defaultdict(dict)
    for pair, member, count, load in tally_loads(slots, owners, [PAIR, "member"], partitions):
        out[pair][(TODAY, member)] = (count, load)
    planned = plans
    if planned.column("member").null_count:  # filtering copies every column: only when a partition is unassigned
        planned = planned.filter(pc.is_valid(planned.column("member")))
    for pair, strategy, member, count, load in tally_loads(slots, planned, [PAIR, "strategy", "member"], partitions):
        out[pair][(strategy, member)] = (count, load)
    return out


def moves(slots: Slots, target: pa.Table, partitions: pa.Table) -> pa.Table:
    """The chosen plans' partition movements in rebalance order, per pair (columns pair and MOVE_SCHEMA's).

    Cooperative rebalancing (KIP-429): a partition changing owner is revoked in round 1 and assigned in round 2
    (the follow-up rebalance); eager protocols move it within one rebalance. Unowned partitions are assigned in
    round 1 either way.
    """
    rows = target.append_column("load", load_of(partitions, slots.of(target)))
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
    order = [(PAIR, "ascending"), ("round", "ascending"), *SORTED, ("action", "ascending")]
    return pa.concat_tables(parts).sort_by(order)


def _moved(rows: pa.Table, round_: int, action: str, *, keep_member: bool = True) -> pa.Table:
    """Plan rows as moves of one round and action (the member left out while a partition is revoked)."""
    n = rows.num_rows
    member = rows.column("member") if keep_member else pa.nulls(n, pa.string())
    columns = [rows.column(PAIR), pa.repeat(pa.scalar(round_, pa.int64()), n)]
    columns += [pa.repeat(pa.scalar(action, pa.string()), n), rows.column("topic"), rows.column("partition")]
    columns += [rows.column("previous_member"), member, rows.column("load")]
    return pa.Table.from_arrays(columns, schema=_PAIRED_MOVES)


def _lag_sums(partitions: pa.Table, by: str) -> dict[tuple[int, str], float]:
    """Lag summed per pair and `by` (owner: today, member: after the chosen plan) over partitions with a known lag."""
    known = partitions.filter(pc.is_valid(partitions.column("lag")))
    summed = known.group_by([PAIR, by], use_threads=False).aggregate([("lag", "sum")])
    keys = zip(summed.column(PAIR).to_pylist(), summed.column(by).to_pylist(), strict=True)
    return dict(zip(keys, summed.column("lag_sum").to_pylist(), strict=True))


def _notes(partitions: pa.Table, owners: pa.Table, n: int) -> list[list[str]]:
    """Per pair, facts the charts cannot show: partitions nobody owns today and the lag sitting on them."""
    planned = np.bincount(partitions.column(PAIR).to_numpy(), minlength=n)
    owned = np.bincount(owners.column(PAIR).to_numpy(), minlength=n)
    unowned = partitions.filter(pc.is_null(partitions.column("owner")))
    summed = unowned.group_by(PAIR, use_threads=False).aggregate([([], "count_all"), ("lag", "sum")])
    names = (PAIR, "count_all", "lag_sum")
    gaps = {p: (count, lag) for p, count, lag in zip(*(summed.column(c).to_pylist() for c in names), strict=True)}
    return [_note(int(planned[p]), int(owned[p]), *gaps.get(p, (0, None))) for p in range(n)]


def _note(partitions: int, owned: int, unowned: int, lag: float | None) -> list[str]:
    """One pair's notes (see `_notes`)."""
    if partitions and not owned:
        return ["No member owns a partition today: every partition is assigned for the first time."]
    if not unowned:
        return []
    return [f"{unowned} partition(s) have no owner today (lag {lag or 0.0:,.0f}); the plan assigns them."]


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


def _generations(read: Read, wanted: Sequence[tuple[str, int]]) -> Rows:
    """The `generations` row of each wanted pair, in order; InputError naming the first the lake lacks."""
    asked = [{"group_id": group_id, "generation_id": int(generation_id)} for group_id, generation_id in wanted]
    found = grouped_by(rows(read, "generations", lookup_terms(asked, GROUP_KEYS)), GROUP_KEYS)
    for group_id, generation_id in (tuple(g.values()) for g in asked):
        if (group_id, generation_id) not in found:
            raise InputError(f"generations: group {group_id!r} has no generation {generation_id}")
    return [found[(g["group_id"], g["generation_id"])][0] for g in asked]


_PAIRS = pa.schema(
    [pa.field(PAIR, pa.int64()), GROUP_FIELD, pa.field("generation_id", pa.int64())]
    + [pa.field(c, pa.string()) for c in ("run_id", "snapshot_id", "chosen")]
)


def _pairs(found: Rows, metrics: dict[tuple[Any, ...], Rows]) -> pa.Table:
    """One row per wanted generation, numbered (`pair`): its group, generation, run, snapshot and chosen strategy."""
    columns = {c: [g.get(c) for g in found] for c in (*GROUP_KEYS, "run_id", "snapshot_id")}
    chosen = [_chosen(g, metrics.get((g["group_id"], g["generation_id"]), [])) for g in found]
    return pa.table({PAIR: np.arange(len(found)), **columns, "chosen": chosen}, schema=_PAIRS)


def _chosen(generation: dict[str, Any], metrics: Rows) -> str | None:
    """The generation's chosen strategy: as published, else the candidate marked chosen."""
    return generation.get("chosen_strategy") or next((m["strategy"] for m in metrics if m.get("chosen")), None)


def _topic_lists(topics: pa.Table) -> dict[int, list[str]]:
    """Each pair's topics, sorted."""
    out: dict[int, list[str]] = defaultdict(list)
    for pair, topic in zip(topics.column(PAIR).to_pylist(), topics.column("topic").to_pylist(), strict=True):
        out[pair].append(topic)
    return {pair: sorted(names) for pair, names in out.items()}


def _members(roster: dict[int, set[str]], per_member: dict[int, dict[tuple[str, str], Any]]) -> dict[int, list[str]]:
    """Per pair, the snapshot's members and every member a candidate assigns to, sorted."""
    pairs = roster.keys() | per_member.keys()
    return {p: sorted(roster.get(p, set()) | {m for _, m in per_member.get(p, {})}) for p in pairs}


def _measured(skew: pa.Table) -> pa.Table:
    """Measured load per partition at today's count, per run and topic (run_id, topic, partition, measured); one
    partitioner per topic, the first by name."""
    first = skew.group_by(list(SKEW_KEYS), use_threads=False).aggregate([("partitioner", "min")])
    current = left_joined(skew.filter(pc.fill_null(skew.column("current"), False)), first, SKEW_KEYS)
    mine = current.filter(pc.equal(current.column("partitioner"), current.column("partitioner_min")))
    load = pc.coalesce(mine.column("load"), mine.column("messages"))
    return mine.select([*SKEW_KEYS, "partition"]).append_column("measured", load)


def _weighted(parameters: list[dict[str, Any]]) -> pa.Table:
    """(pair, topic, listed) for every topic whose plan weights a pair's run asked for (`weighted_topics`)."""
    listed = [(p, t) for p, given in enumerate(parameters) for t in sorted(set(given.get("weighted_topics") or []))]
    return pa.table(
        {
            PAIR: pa.array([p for p, _ in listed], pa.int64()),
            "topic": pa.array([t for _, t in listed], pa.string()),
            "listed": pa.array([True] * len(listed), pa.bool_()),
        }
    )


def _what_if(skew: pa.Table) -> dict[str, pa.Table]:
    """Per-partition load of every measured partition count (today's and each what-if), per topic."""
    load = pc.coalesce(skew.column("load"), skew.column("messages"))
    out = skew.select(["topic", "partitioner", "partition_count", "current", "partition"]).append_column("load", load)
    order = ["topic", "partitioner", "partition_count", "partition"]
    return by_topic(out.sort_by([(c, "ascending") for c in order]))


def _of(grouped: dict[tuple[Any, ...], Rows], run: str | None, topics: list[str]) -> Rows:
    """The rows of a run's topics, topic by topic in table order."""
    return [r for topic in topics for r in grouped.get((run, topic), [])]


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


def _parameters(generation: dict[str, Any]) -> dict[str, Any]:
    """The generation's parameters (JSON text) as a dict."""
    parameters = parsed_json(generation.get("parameters"))
    return parameters if isinstance(parameters, dict) else {"parameters": parameters}


def parsed_json(value: Any) -> Any:
    """A JSON text (parameters, the gate's failing rows) as data; any other value, or text not JSON, as it is."""
    if isinstance(value, str):
        try:
            return json.loads(value)
        except ValueError:
            return value
    return value

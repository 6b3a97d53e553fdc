"""Everything one generation's report shows, gathered from the lake as plain data (lists of row dicts).

`collect` needs only `read(name, filters)` with the shape of `Lake.read_arrow`, so it runs without Spark. Columns
that the tables gain later (migration readiness, approval, verification status, load source ...) are carried
along when a table has them and skipped when it does not. Plain rows rather than pandas frames: a group's tables
are a few dozen rows, where pandas' per-call overhead (about 0.1 ms an operation) would be most of the time of a
thousand reports.
"""

from __future__ import annotations

import json
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

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


@dataclass(frozen=True)
class GenerationReport:
    """One generation of one group, ready to render; every list may be empty (nothing measured or planned)."""

    group_id: str
    generation_id: int
    generation: dict[str, Any]  # the `generations` row, every column the table has
    extras: dict[str, Any]  # non-empty columns beyond GENERATION_COLUMNS (JSON text parsed)
    changes: Any  # what changed since the last generation, when the lake records it
    parameters: dict[str, Any]
    partitions: Rows  # topic, partition, load, source, owner (today), member (chosen plan), lag
    what_if: Rows  # topic, partitioner, partition_count, current, partition, load
    skew_summary: Rows  # key_skew_summary rows of the group's topics
    hot_keys: Rows  # topic, rank, key (printable), messages, share, partition (today)
    fingerprint: Rows  # topic, partitioner, share, observed_messages, explained_messages
    candidates: Rows  # plan_metrics rows (every column the table has), chosen first
    members: Rows  # member, assignment (TODAY or a candidate's strategy), chosen, partitions, load
    moves: Rows  # round, action, topic, partition, previous_member, member, load
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

    # Every candidate's plan rows stay Arrow (a million-partition group has millions); the chosen one's become rows.
    plans = table(read, "plans", keys, PLAN_COLUMNS)
    metrics = rows(read, "plan_metrics", keys)
    chosen = generation.get("chosen_strategy") or next((m["strategy"] for m in metrics if m.get("chosen")), None)
    target = candidate_rows(plans, chosen)
    roster, today = _today(read, group_id, snapshot_id)
    topics = sorted(set(_distinct(plans, "topic")) | {t for t, _ in today})
    run = [("topic", "in", topics), ("run_id", "=", run_id)]

    skew = rows(read, "key_skew", run, SKEW_COLUMNS)
    offsets = [("group_id", "=", group_id), ("snapshot_id", "=", snapshot_id)]
    lags = _lags(rows(read, "partition_offsets", offsets, ("topic", "partition", "committed", "end_offset", "lag")))
    partitions = partition_loads(skew, target, today, lags, set(parameters.get("weighted_topics") or []))
    members = sorted(set(roster) | (set(_distinct(plans, "member")) - {None}))
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
    # Selecting first spares converting columns nobody shows (timestamps cost most) into Python objects.
    return table(read, name, filters, columns).to_pylist()


def table(read: Read, name: str, filters: Filters = None, columns: tuple[str, ...] | None = None) -> pa.Table:
    """A table's rows (only `columns`, those the table has, when given); a missing table reads as no columns."""
    if filters and any(op == "=" and value is None for _, op, value in filters):
        return pa.table({})  # a lookup on a missing id (e.g. no run id) matches nothing
    try:
        found = read(name, list(filters) if filters else None)
    except TableNotFoundError:
        return pa.table({})
    return found.select([c for c in columns if c in found.column_names]) if columns else found


def candidate_rows(plans: pa.Table, strategy: str | None) -> Rows:
    """The plan rows of one candidate as dicts (none for no strategy)."""
    if strategy is None or "strategy" not in plans.column_names:
        return []
    return plans.filter(pc.equal(plans.column("strategy"), strategy)).to_pylist()


def _distinct(data: pa.Table, column: str) -> list[Any]:
    """The distinct values of a column (none when the table lacks it)."""
    return pc.unique(data.column(column)).to_pylist() if column in data.column_names else []


def partition_loads(
    skew: Rows,
    target: Rows,
    today: dict[tuple[str, int], str],
    lags: dict[tuple[str, int], float],
    weighted: set[str],
) -> Rows:
    """Today's load of every partition: the run's key-skew messages, else the plan's weight, else 1.0."""
    # One partitioner per topic: the first by name when a run measured several.
    partitioner: dict[str, str] = {}
    for r in skew:
        partitioner[r["topic"]] = min(partitioner.get(r["topic"], r["partitioner"]), r["partitioner"])
    measured = {
        (r["topic"], r["partition"]): float(r["load"] if r.get("load") is not None else r["messages"])
        for r in skew
        if r["current"] and r["partitioner"] == partitioner[r["topic"]]
    }
    planned = {(r["topic"], r["partition"]): (r["member"], r.get("weight")) for r in target}
    out = []
    for key in sorted(set(planned) | set(today) | set(measured)):
        member, weight = planned.get(key, (None, None))
        if key in measured:
            load, source = measured[key], "key skew"
        elif weight is not None and (key[0] in weighted or weight != 1.0):
            load, source = float(weight), "plan weight"
        else:
            load, source = 1.0, "uniform"
        out.append(
            {"topic": key[0], "partition": key[1], "load": load, "source": source}
            | {"owner": today.get(key), "member": member, "lag": lags.get(key)}
        )
    return out


def member_loads(
    members: list[str], today: dict[tuple[str, int], str], plans: pa.Table, chosen: str | None, partitions: Rows
) -> Rows:
    """Load and partition count per member today and under every candidate, all with the same partition loads."""
    load = {(p["topic"], p["partition"]): p["load"] for p in partitions}
    out = []
    for assignment in [TODAY, *sorted(_distinct(plans, "strategy"))]:
        owner = today if assignment == TODAY else _owners(plans, assignment)
        if not owner and assignment != TODAY:
            continue  # a candidate that assigns nothing has no column, as today always has
        count: dict[str, int] = defaultdict(int)
        total: dict[str, float] = defaultdict(float)
        for key, member in owner.items():
            count[member] += 1
            total[member] += load.get(key, 1.0)
        out += [
            {
                "member": m,
                "assignment": assignment,
                "chosen": assignment == chosen,
                "partitions": count[m],
                "load": total[m],
            }
            for m in members
        ]
    return out


def _owners(plans: pa.Table, strategy: str) -> dict[tuple[str, int], str]:
    """(topic, partition) -> member under one candidate (rows without a member left out), one candidate at a time."""
    mine = plans.filter(pc.and_(pc.equal(plans.column("strategy"), strategy), pc.is_valid(plans.column("member"))))
    keys = zip(mine.column("topic").to_pylist(), mine.column("partition").to_pylist(), strict=True)
    return dict(zip(keys, mine.column("member").to_pylist(), strict=True))


def moves(target: Rows, partitions: Rows) -> Rows:
    """The chosen plan's partition movements in rebalance order.

    Cooperative rebalancing (KIP-429): a partition changing owner is revoked in round 1 and assigned in round 2
    (the follow-up rebalance); eager protocols move it within one rebalance. Unowned partitions are assigned in
    round 1 either way.
    """
    load = {(p["topic"], p["partition"]): p["load"] for p in partitions}
    out = []
    for r in target:
        t, p, member, previous = r["topic"], r["partition"], r["member"], r.get("previous_member")
        row = {"topic": t, "partition": p, "previous_member": previous, "member": member, "load": load.get((t, p))}
        if r.get("phase") == "revoke":
            out.append({"round": 1, "action": "revoke"} | row | {"member": None})
            out.append({"round": 2, "action": "assign"} | row)
        elif previous is None:
            out.append({"round": 1, "action": "assign (was unowned)"} | row)
        elif previous != member:
            out.append({"round": 1, "action": "move"} | row)
    return sorted(out, key=lambda m: (m["round"], m["topic"], m["partition"], m["action"]))


def member_lag(members: list[str], partitions: Rows) -> Rows:
    """Lag (end offset - committed) summed over each member's partitions, today and under the chosen plan."""
    today: dict[str, float] = defaultdict(float)
    after: dict[str, float] = defaultdict(float)
    for p in partitions:
        if p["lag"] is not None:
            today[p["owner"]] += p["lag"]
            after[p["member"]] += p["lag"]
    return [{"member": m, "today": today[m], "after": after[m]} for m in members]


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


def _today(read: Read, group_id: str, snapshot_id: str | None) -> tuple[list[str], dict[tuple[str, int], str]]:
    """The snapshot's members and today's owner of each partition (the coordinator's assignment)."""
    roster, owner = [], {}
    members = [("group_id", "=", group_id), ("snapshot_id", "=", snapshot_id)]
    for row in rows(read, "snapshots", members, ("member_id", "assignment")):
        if not row.get("member_id"):
            continue  # a group without members has one row with member_id ''
        roster.append(row["member_id"])
        for tp in row.get("assignment") or []:
            owner[(tp["topic"], tp["partition"])] = row["member_id"]
    return sorted(roster), owner


def _lags(offsets: Rows) -> dict[tuple[str, int], float]:
    """Lag per partition: end offset - committed when both are known, else the table's lag column."""
    out = {}
    for r in offsets:
        end, committed = r.get("end_offset"), r.get("committed")
        if end is not None and committed is not None:
            out[(r["topic"], r["partition"])] = max(float(end - committed), 0.0)
        elif r.get("lag") is not None:
            out[(r["topic"], r["partition"])] = float(r["lag"])
    return out


def _what_if(skew: Rows) -> Rows:
    """Per-partition load of every measured partition count (today's and each what-if)."""
    out = [
        {"topic": r["topic"], "partitioner": r["partitioner"], "partition_count": r["partition_count"]}
        | {"current": r["current"], "partition": r["partition"]}
        | {"load": r["load"] if r.get("load") is not None else r["messages"]}
        for r in skew
    ]
    return sorted(out, key=lambda r: (r["topic"], r["partitioner"], r["partition_count"], r["partition"]))


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


def _notes(partitions: Rows, today: dict[tuple[str, int], str]) -> list[str]:
    """Facts the charts cannot show: partitions nobody owns today and the lag sitting on them."""
    if partitions and not today:
        return ["No member owns a partition today: every partition is assigned for the first time."]
    unowned = [p for p in partitions if p["owner"] is None]
    if not unowned:
        return []
    lag = sum(p["lag"] or 0.0 for p in unowned)
    return [f"{len(unowned)} partition(s) have no owner today (lag {lag:,.0f}); the plan assigns them."]


def _json(value: Any) -> Any:
    """A JSON text as data; any other value (or text that is not JSON) as it is."""
    if isinstance(value, str):
        try:
            return json.loads(value)
        except ValueError:
            return value
    return value

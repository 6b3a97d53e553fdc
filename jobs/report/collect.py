"""Everything one generation's report shows, gathered from the lake as plain data and pandas frames.

`collect` needs only `read(name, filters)` with the shape of `Lake.read_arrow`, so it runs without Spark. Columns
that the tables gain later (migration readiness, approval, verification status, load source ...) are carried
along when a table has them and skipped when it does not.
"""

from __future__ import annotations

import json
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd
from deltalake.exceptions import TableNotFoundError

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
"""The generation columns the page lays out itself; any other column is shown as it is, under "details"."""

HOT_KEYS_SHOWN = 10
TODAY = "today"


@dataclass(frozen=True)
class GenerationReport:
    """One generation of one group, ready to render; every frame may be empty (nothing measured or planned)."""

    group_id: str
    generation_id: int
    generation: dict[str, Any]  # the `generations` row, every column the table has
    extras: dict[str, Any]  # non-empty columns beyond GENERATION_COLUMNS
    changes: Any  # what changed since the last generation, when the lake records it
    parameters: dict[str, Any]
    partitions: pd.DataFrame  # topic, partition, load, source, owner (today), member (chosen plan), lag
    what_if: pd.DataFrame  # topic, partitioner, partition_count, current, partition, load
    skew_summary: pd.DataFrame  # key_skew_summary rows of the run's topics
    hot_keys: pd.DataFrame  # topic, rank, key (printable), messages, share, partition (today)
    fingerprint: pd.DataFrame  # topic, partitioner, share, observed_messages, explained_messages
    candidates: pd.DataFrame  # plan_metrics rows, chosen first
    members: pd.DataFrame  # member, plan (TODAY or a strategy), chosen, partitions, load
    moves: pd.DataFrame  # round, action, topic, partition, previous_member, member, load
    lag: pd.DataFrame  # member, today, after (the chosen plan)
    gate: pd.DataFrame  # expectation, success, observed_value, details, ...; failed first
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
    rows = frame(read, "generations", keys)
    if rows.empty:
        raise InputError(f"generations: group {group_id!r} has no generation {generation_id}")
    generation = _plain(rows.iloc[0].to_dict())
    parameters = _json(generation.get("parameters"))
    parameters = parameters if isinstance(parameters, dict) else {"parameters": parameters}
    changes = _json(generation.get("changes", parameters.get("changes")))
    run_id, snapshot_id = generation.get("run_id"), generation.get("snapshot_id")

    plans = frame(read, "plans", keys)
    metrics = frame(read, "plan_metrics", keys)
    chosen = generation.get("chosen_strategy") or _chosen(metrics)
    target = plans[plans["strategy"] == chosen] if not plans.empty else plans
    roster, today = _today(read, group_id, snapshot_id)
    topics = sorted(set(plans.get("topic", [])) | {t for t, _ in today})

    skew = frame(read, "key_skew", [("topic", "in", topics), ("run_id", "=", run_id)])
    lags = _lags(frame(read, "partition_offsets", [("group_id", "=", group_id), ("snapshot_id", "=", snapshot_id)]))
    weighted = set(parameters.get("weighted_topics", []))
    partitions = partition_loads(skew, target, today, lags, weighted)
    members = sorted(set(roster) | set(plans.get("member", pd.Series(dtype=object)).dropna()))
    summary = frame(read, "key_skew_summary", [("topic", "in", topics), ("run_id", "=", run_id)])
    current = {} if summary.empty else dict(summary.loc[summary["current"], ["topic", "partition_count"]].values)
    return GenerationReport(
        group_id=group_id,
        generation_id=int(generation_id),
        generation=generation,
        extras={k: _json(v) for k, v in generation.items() if k not in GENERATION_COLUMNS and v not in (None, "")},
        changes=changes,
        parameters=parameters,
        partitions=partitions,
        what_if=_what_if(skew),
        skew_summary=summary if summary.empty else summary.sort_values(["topic", "partition_count"], ignore_index=True),
        hot_keys=_hot_keys(
            frame(read, "key_skew_hot_keys", [("topic", "in", topics), ("run_id", "=", run_id)]), current
        ),
        fingerprint=_fingerprint(
            frame(read, "key_skew_fingerprint", [("topic", "in", topics), ("run_id", "=", run_id)])
        ),
        candidates=_candidates(metrics),
        members=member_loads(members, today, plans, chosen, partitions),
        moves=moves(target, partitions),
        lag=member_lag(members, partitions),
        gate=_gate(frame(read, "gate_results", keys)),
        notes=_notes(partitions, today),
    )


def history(read: Read, group_id: str) -> pd.DataFrame:
    """One row per generation of the group (newest first), with the chosen candidate's balance and moves."""
    gens = frame(read, "generations", [("group_id", "=", group_id)])
    metrics = frame(read, "plan_metrics", [("group_id", "=", group_id)])
    if not metrics.empty:
        best = metrics[metrics["chosen"].fillna(False).astype(bool)]
        keep = [c for c in ("generation_id", "max_mean_load", "partitions_moved", "members", "partitions") if c in best]
        gens = gens.merge(best[keep], on="generation_id", how="left")
    return gens.sort_values("generation_id", ascending=False).reset_index(drop=True)


def groups(read: Read) -> pd.DataFrame:
    """One row per group: how many generations, and the latest one's id, time, status and chosen strategy."""
    gens = frame(read, "generations")
    if gens.empty:
        return pd.DataFrame(columns=["group_id", "generations", "generation_id", "created_at", "status"])
    latest = gens.sort_values("generation_id").groupby("group_id", sort=True).tail(1).set_index("group_id")
    latest["generations"] = gens.groupby("group_id").size()
    return latest.reset_index().sort_values("group_id").reset_index(drop=True)


def frame(read: Read, name: str, filters: Filters = None) -> pd.DataFrame:
    """A table's rows as pandas; a table the lake does not have yet reads as empty."""
    if filters and any(op == "=" and value is None for _, op, value in filters):
        return pd.DataFrame()  # a lookup on a missing id (e.g. no run id) matches nothing
    try:
        return read(name, list(filters) if filters else None).to_pandas()
    except TableNotFoundError:
        return pd.DataFrame()


def partition_loads(
    skew: pd.DataFrame,
    target: pd.DataFrame,
    today: dict[tuple[str, int], str],
    lags: dict[tuple[str, int], float],
    weighted: set[str],
) -> pd.DataFrame:
    """Today's load of every partition: the run's key-skew messages, else the plan's weight, else 1.0."""
    measured: dict[tuple[str, int], float] = {}
    if not skew.empty:
        now = skew[skew["current"].astype(bool)]
        # One partitioner per topic: the first by name when a run measured several.
        now = now[now["partitioner"] == now.groupby("topic")["partitioner"].transform("min")]
        column = "load" if "load" in now else "messages"
        measured = {(t, int(p)): float(v) for t, p, v in zip(now["topic"], now["partition"], now[column], strict=True)}
    planned = {}
    if not target.empty:
        weights = target["weight"] if "weight" in target else pd.Series(1.0, index=target.index)
        planned = {
            (t, int(p)): (m, None if pd.isna(w) else float(w))
            for t, p, m, w in zip(target["topic"], target["partition"], target["member"], weights, strict=True)
        }
    rows = []
    for key in sorted(set(planned) | set(today) | set(measured)):
        member, weight = planned.get(key, (None, None))
        if key in measured:
            load, source = measured[key], "key skew"
        elif weight is not None and (key[0] in weighted or weight != 1.0):
            load, source = weight, "plan weight"
        else:
            load, source = 1.0, "uniform"
        rows.append((*key, load, source, today.get(key), member, lags.get(key)))
    columns = ["topic", "partition", "load", "source", "owner", "member", "lag"]
    return pd.DataFrame(rows, columns=columns).astype({"partition": "int64", "load": "float64", "lag": "float64"})


def member_loads(
    members: list[str],
    today: dict[tuple[str, int], str],
    plans: pd.DataFrame,
    chosen: str | None,
    partitions: pd.DataFrame,
) -> pd.DataFrame:
    """Load and partition count per member today and under every candidate, all with the same partition loads."""
    load = {(t, p): v for t, p, v in zip(partitions["topic"], partitions["partition"], partitions["load"], strict=True)}
    plan_owner = {TODAY: today}
    for strategy, rows in plans.groupby("strategy", sort=True) if not plans.empty else []:
        owners = zip(rows["topic"], rows["partition"].astype(int), rows["member"], strict=True)
        plan_owner[strategy] = {(t, p): m for t, p, m in owners if m is not None and not pd.isna(m)}
    out = []
    for plan, owner in plan_owner.items():
        totals: dict[str, list[float]] = defaultdict(lambda: [0, 0.0])
        for key, member in owner.items():
            totals[member][0] += 1
            totals[member][1] += load.get(key, 1.0)
        out += [(m, plan, plan == chosen, totals[m][0], totals[m][1]) for m in members]
    return pd.DataFrame(out, columns=["member", "plan", "chosen", "partitions", "load"])


def moves(target: pd.DataFrame, partitions: pd.DataFrame) -> pd.DataFrame:
    """The chosen plan's partition movements in rebalance order.

    Cooperative rebalancing (KIP-429): a partition changing owner is revoked in round 1 and assigned in round 2
    (the follow-up rebalance); eager protocols move it within one rebalance. Unowned partitions are assigned in
    round 1 either way.
    """
    columns = ["round", "action", "topic", "partition", "previous_member", "member", "load"]
    if target.empty:
        return pd.DataFrame(columns=columns)
    load = {(t, p): v for t, p, v in zip(partitions["topic"], partitions["partition"], partitions["load"], strict=True)}
    phase = target["phase"] if "phase" in target else pd.Series("assign", index=target.index)
    rows = []
    for t, p, member, previous, step in zip(
        target["topic"], target["partition"], target["member"], target["previous_member"], phase, strict=True
    ):
        previous = None if pd.isna(previous) else previous
        weight = load.get((t, int(p)), 1.0)
        if step == "revoke":
            rows.append((1, "revoke", t, int(p), previous, None, weight))
            rows.append((2, "assign", t, int(p), previous, member, weight))
        elif previous is None:
            rows.append((1, "assign (was unowned)", t, int(p), None, member, weight))
        elif previous != member:
            rows.append((1, "move", t, int(p), previous, member, weight))
    out = pd.DataFrame(rows, columns=columns)
    return out.sort_values(["round", "topic", "partition", "action"]).reset_index(drop=True)


def member_lag(members: list[str], partitions: pd.DataFrame) -> pd.DataFrame:
    """Lag (end offset - committed) summed over each member's partitions, today and under the chosen plan."""
    known = partitions.dropna(subset=["lag"])
    today = known.groupby("owner")["lag"].sum()
    after = known.groupby("member")["lag"].sum()
    return pd.DataFrame(
        {
            "member": members,
            "today": [float(today.get(m, 0.0)) for m in members],
            "after": [float(after.get(m, 0.0)) for m in members],
        }
    )


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
    snapshot = frame(read, "snapshots", [("group_id", "=", group_id), ("snapshot_id", "=", snapshot_id)])
    roster, owner = [], {}
    for row in snapshot.to_dict("records"):
        if not row.get("member_id"):
            continue  # a group without members has one row with member_id ''
        roster.append(row["member_id"])
        for tp in row.get("assignment") if row.get("assignment") is not None else []:
            owner[(tp["topic"], int(tp["partition"]))] = row["member_id"]
    return sorted(roster), owner


def _lags(offsets: pd.DataFrame) -> dict[tuple[str, int], float]:
    """Lag per partition: end offset - committed when both are known, else the table's lag column."""
    out = {}
    for row in offsets.to_dict("records"):
        end, committed = row.get("end_offset"), row.get("committed")
        if not pd.isna(end) and not pd.isna(committed):
            out[(row["topic"], int(row["partition"]))] = max(float(end) - float(committed), 0.0)
        elif not pd.isna(row.get("lag")):
            out[(row["topic"], int(row["partition"]))] = float(row["lag"])
    return out


def _what_if(skew: pd.DataFrame) -> pd.DataFrame:
    """Per-partition load of every measured partition count (today's and each what-if)."""
    columns = ["topic", "partitioner", "partition_count", "current", "partition", "load"]
    if skew.empty:
        return pd.DataFrame(columns=columns)
    out = skew.assign(load=skew["load"] if "load" in skew else skew["messages"])[columns]
    return out.sort_values(["topic", "partitioner", "partition_count", "partition"]).reset_index(drop=True)


def _hot_keys(hot: pd.DataFrame, current: dict[str, int]) -> pd.DataFrame:
    """The hottest keys of each topic at today's partition count, printable."""
    columns = ["topic", "rank", "key", "messages", "share", "partition"]
    if hot.empty:
        return pd.DataFrame(columns=columns)
    hot = hot[[current.get(t) == c for t, c in zip(hot["topic"], hot["partition_count"], strict=True)]]
    hot = hot[hot["rank"] <= HOT_KEYS_SHOWN].assign(key=[key_text(k) for k in hot["key"]])
    return hot[columns].sort_values(["topic", "rank"]).reset_index(drop=True)


def _fingerprint(prints: pd.DataFrame) -> pd.DataFrame:
    """Share of observed records each known partitioner explains, best first per topic."""
    columns = ["topic", "partitioner", "share", "observed_messages", "explained_messages"]
    if prints.empty:
        return pd.DataFrame(columns=columns)
    return (
        prints[columns]
        .sort_values(["topic", "share", "partitioner"], ascending=[True, False, True])
        .reset_index(drop=True)
    )


def _candidates(metrics: pd.DataFrame) -> pd.DataFrame:
    """plan_metrics rows, chosen first then by strategy, without the keys the page already shows."""
    if metrics.empty:
        return metrics
    out = metrics.drop(columns=[c for c in ("generation_id", "group_id") if c in metrics])
    return out.sort_values(["chosen", "strategy"], ascending=[False, True]).reset_index(drop=True)


def _gate(results: pd.DataFrame) -> pd.DataFrame:
    """Gate results, failed expectations first; the page's key columns dropped."""
    if results.empty:
        return results
    out = results.drop(columns=[c for c in ("generation_id", "group_id") if c in results])
    return out.sort_values(["success", "expectation"]).reset_index(drop=True)


def _chosen(metrics: pd.DataFrame) -> str | None:
    """The chosen strategy from plan_metrics, for generations whose row does not name it yet."""
    if metrics.empty:
        return None
    best = metrics[metrics["chosen"].fillna(False).astype(bool)]
    return None if best.empty else str(best["strategy"].iloc[0])


def _notes(partitions: pd.DataFrame, today: dict[tuple[str, int], str]) -> list[str]:
    """Facts the charts cannot show: partitions nobody owns today and the lag sitting on them."""
    notes = []
    unowned = partitions[partitions["owner"].isna()]
    if today and not unowned.empty:
        lag = unowned["lag"].fillna(0).sum()
        notes.append(f"{len(unowned)} partition(s) have no owner today (lag {lag:,.0f}); the plan assigns them.")
    if not today and not partitions.empty:
        notes.append("No member owns a partition today: every partition is assigned for the first time.")
    return notes


def _json(value: Any) -> Any:
    """A JSON text as data; any other value (or text that is not JSON) as it is."""
    if isinstance(value, str):
        try:
            return json.loads(value)
        except ValueError:
            return value
    return value


def _plain(row: dict[str, Any]) -> dict[str, Any]:
    """A pandas row with its missing markers as None and NumPy scalars as Python values."""
    out = {}
    for key, value in row.items():
        if not isinstance(value, list | tuple | dict) and pd.api.types.is_scalar(value) and pd.isna(value):
            out[key] = None
        else:
            out[key] = value.item() if isinstance(value, np.generic) else value
    return out

"""Signals: the lake's state as Prometheus metrics per group, and the alarms that fail a run loudly.

Each run writes the metrics to `<lake>/metrics/rebalance.prom` (atomically, for node_exporter's textfile collector);
`rebalance metrics` serves the same metrics over HTTP, read from the lake on each scrape. Per group, of its newest
generation: the status (one series per status, 1 for the current one), max and mean member load and their ratio,
the Gini coefficient of member loads, partitions moved, the lag of the snapshot it planned; the newest approved
generation; and the latest verification verdict of its plan in force (applied or drifted), when there is one.
Alarms of a run: its rejected generations and the plans its snapshot found drifted.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Iterator, Mapping
from typing import Any

import numpy as np
import pyarrow.compute as pc
from prometheus_client import CollectorRegistry, generate_latest, write_to_textfile
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from jobs.context import RunContext, StepResult
from jobs.io.lake import Lake
from jobs.tables.chosen_plans import chosen_plans
from planner.load import gini
from schemas.status import GenerationStatus

METRICS_FILE = "metrics/rebalance.prom"
VERDICTS = ("applied", "drifted")  # jobs.steps.verify's verdicts


def run(ctx: RunContext) -> StepResult:
    """Write the lake's metrics file (its path the one row) and raise the run's alarms (none when all is well)."""
    path = write(ctx.lake)
    found = tuple(alarms(ctx.lake, ctx.run_id))
    return StepResult(({"metrics": path},), "\n".join(f"alarm: {a}" for a in found), alarms=found)


def write(lake: Lake) -> str:
    """Write the metrics of the lake's current state to `<lake>/metrics/rebalance.prom`, replacing it atomically
    (a new object in one PUT on S3); returns its location."""
    if lake.local is None:
        with lake.fs.open_output_stream(METRICS_FILE) as out:
            out.write(generate_latest(registry(lake)))
        return lake.store.uri(METRICS_FILE)
    path = lake.local / METRICS_FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    write_to_textfile(str(path), registry(lake))
    return str(path)


def registry(lake: Lake) -> CollectorRegistry:
    """A registry whose every collection reads the lake afresh (what `rebalance metrics` serves)."""
    reg = CollectorRegistry(auto_describe=False)
    reg.register(LakeCollector(lake))
    return reg


class LakeCollector(Collector):
    """The metrics of a lake, computed from its tables at each collection."""

    def __init__(self, lake: Lake) -> None:
        self.lake = lake

    def collect(self) -> Iterator[GaugeMetricFamily]:
        return iter(families(self.lake))


def alarms(lake: Lake, run_id: str) -> list[str]:
    """What must fail run `run_id` loudly: its rejected generations, and plans its snapshot found drifted."""
    found = []
    for g in sorted(lake.read_arrow("generations").to_pylist(), key=lambda g: (g["group_id"], g["generation_id"])):
        if g["run_id"] == run_id and g["status"] == GenerationStatus.REJECTED:
            found.append(
                f"group {g['group_id']}: generation {g['generation_id']} rejected ({g['status_reason'] or 'no reason'})"
            )
        if g.get("verification") == "drifted" and _detail(g).get("snapshot_id") == run_id:
            found.append(
                f"group {g['group_id']}: the approved plan of generation {g['generation_id']} has drifted "
                f"(snapshot {run_id})"
            )
    return found


def families(lake: Lake) -> list[GaugeMetricFamily]:
    """Every metric of the lake's current state, one series per group (labels: group, and status or verdict)."""
    newest, approved, verdict = _latest(lake.read_arrow("generations").to_pylist())
    chosen = _chosen_metrics(lake, newest)
    gini_of = _member_gini(lake, newest)
    lag = _lag(lake, newest)

    def gauge(name: str, doc: str, labels: tuple[str, ...] = ("group",)) -> GaugeMetricFamily:
        return GaugeMetricFamily(name, doc, labels=list(labels))

    generation = gauge("rebalance_generation", "Newest generation of the group (any status).")
    status = gauge(
        "rebalance_generation_status", "Status of the group's newest generation: 1 for its status.", ("group", "status")
    )
    approved_g = gauge("rebalance_approved_generation", "The group's approved generation (the plan to run).")
    max_load = gauge("rebalance_plan_max_load", "Largest member load of the newest generation's chosen plan.")
    mean_load = gauge("rebalance_plan_mean_load", "Mean member load of the newest generation's chosen plan.")
    ratio = gauge("rebalance_plan_max_mean_load_ratio", "Max over mean member load of the chosen plan (1 = even).")
    gini_g = gauge("rebalance_plan_load_gini", "Gini coefficient of member loads of the chosen plan (0 = even).")
    moves = gauge("rebalance_plan_moves", "Partitions the newest generation's chosen plan moves to another member.")
    lag_g = gauge("rebalance_lag_messages", "Consumer lag (end minus committed offsets) of the snapshot planned.")
    verification = gauge(
        "rebalance_plan_verification",
        "Latest verdict on the plan in force: 1 for applied or drifted.",
        ("group", "verification"),
    )
    differing = gauge("rebalance_plan_drifted_partitions", "Partitions owned otherwise than the plan in force says.")
    for group in sorted(newest):
        g = newest[group]
        generation.add_metric([group], g["generation_id"])
        for s in GenerationStatus:
            status.add_metric([group, s.value], float(g["status"] == s))
        if group in approved:
            approved_g.add_metric([group], approved[group])
        if m := chosen.get(group):
            for family, column in ((max_load, "max_load"), (mean_load, "mean_load"), (ratio, "max_mean_load")):
                if m[column] is not None:
                    family.add_metric([group], m[column])
            moves.add_metric([group], m["partitions_moved"] or 0)
        if group in gini_of:
            gini_g.add_metric([group], gini_of[group])
        if group in lag:
            lag_g.add_metric([group], lag[group])
        if v := verdict.get(group):
            for name in VERDICTS:
                verification.add_metric([group, name], float(v["verification"] == name))
            differing.add_metric([group], len(_detail(v).get("differing") or []))
    return [generation, status, approved_g, max_load, mean_load, ratio, gini_g, moves, lag_g, verification, differing]


def _latest(
    generations: list[dict[str, Any]],
) -> tuple[dict[str, dict[str, Any]], dict[str, int], dict[str, dict[str, Any]]]:
    """Per group: the newest generation, the newest approved generation id, the generation with the latest verdict."""
    newest: dict[str, dict[str, Any]] = {}
    approved: dict[str, int] = {}
    verdict: dict[str, dict[str, Any]] = {}
    for g in generations:
        group = g["group_id"]
        if group not in newest or g["generation_id"] > newest[group]["generation_id"]:
            newest[group] = g
        if g["status"] == GenerationStatus.APPROVED:
            approved[group] = max(approved.get(group, 0), g["generation_id"])
        if g.get("verification") in VERDICTS and (
            group not in verdict or _verdict_key(g) > _verdict_key(verdict[group])
        ):
            verdict[group] = g
    return newest, approved, verdict


def _verdict_key(g: dict[str, Any]) -> tuple[Any, int]:
    return (g.get("verified_at"), g["generation_id"])


def _detail(g: dict[str, Any]) -> dict[str, Any]:
    """The generation's verification detail (JSON written by jobs.steps.verify), or {}."""
    try:
        detail = json.loads(g.get("verification_detail") or "{}")
    except json.JSONDecodeError:
        return {}
    return detail if isinstance(detail, dict) else {}


def _chosen_metrics(lake: Lake, newest: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """The chosen candidate's plan_metrics row of each group's newest generation."""
    ids = sorted({g["generation_id"] for g in newest.values()})
    if not ids:
        return {}
    return {
        m["group_id"]: m
        for m in lake.read_arrow("plan_metrics", [("generation_id", "in", ids)]).to_pylist()
        if m["chosen"] and m["group_id"] in newest and newest[m["group_id"]]["generation_id"] == m["generation_id"]
    }


def _member_gini(lake: Lake, newest: dict[str, dict[str, Any]]) -> dict[str, float]:
    """Gini of member loads under each newest generation's chosen plan; members given nothing count as load 0."""
    chosen = {group: row for group, row in newest.items() if row["chosen_strategy"]}
    loads: dict[str, dict[str, float]] = defaultdict(dict)
    for row in _member_loads(lake, {g: (row["generation_id"], row["chosen_strategy"]) for g, row in chosen.items()}):
        if row["member"] is not None:
            loads[row["group_id"]][row["member"]] = row["weight_sum"]
    if not loads:
        return {}
    snapshots = sorted({newest[g]["snapshot_id"] for g in loads} - {None})
    rows = (
        lake.read_arrow(
            "snapshots", [("snapshot_id", "in", snapshots)], ("group_id", "snapshot_id", "member_id")
        ).to_pylist()
        if snapshots
        else []
    )
    for m in rows:
        group = m["group_id"]
        if group in loads and m["member_id"] and m["snapshot_id"] == newest[group]["snapshot_id"]:
            loads[group].setdefault(m["member_id"], 0.0)
    return {group: gini(np.fromiter(members.values(), dtype=np.float64)) for group, members in loads.items()}


def _member_loads(lake: Lake, chosen: Mapping[str, tuple[int, str]]) -> list[dict[str, Any]]:
    """Per (group, member), the summed weight (1 when not weighted) of the plan rows of each group's generation and
    chosen strategy (`chosen`), in read order; read with strings as dictionaries, kept as such (decoding every
    group's candidates of every night to strings took most of the step's time)."""
    plans = chosen_plans(lake, chosen, ("group_id", "member", "weight"))
    plans = plans.set_column(plans.schema.get_field_index("weight"), "weight", pc.fill_null(plans["weight"], 1.0))
    summed: list[dict[str, Any]] = (
        plans.group_by(["group_id", "member"], use_threads=False).aggregate([("weight", "sum")]).to_pylist()
    )
    return summed


def _lag(lake: Lake, newest: dict[str, dict[str, Any]]) -> dict[str, float]:
    """Total lag of each group in the snapshot its newest generation planned."""
    snapshots = sorted({g["snapshot_id"] for g in newest.values() if g["snapshot_id"]})
    if not snapshots:
        return {}
    offsets = lake.read_arrow(
        "partition_offsets", [("snapshot_id", "in", snapshots)], ("snapshot_id", "group_id", "lag")
    )
    totals = offsets.group_by(["snapshot_id", "group_id"]).aggregate([("lag", "sum")]).to_pylist()
    return {
        t["group_id"]: float(t["lag_sum"] or 0)
        for t in totals
        if t["group_id"] in newest and newest[t["group_id"]]["snapshot_id"] == t["snapshot_id"]
    }

"""The plan kernel: one group's snapshot rows in, every strategy's candidate out (runs inside applyInPandas).

The planner is pure, so each group plans independently and in parallel, one Spark task per group.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import pandas as pd

from planner import assign
from schemas.tables import PLANS


def compact_group(
    members: pd.DataFrame, counts: Mapping[str, int], weights: Mapping[str, Sequence[float]]
) -> dict[str, Any]:
    """A group's snapshot rows in the planner's compact form; previous ownership is what members own now."""
    subscribed = sorted({t for topics in members["topics"] for t in topics})
    doc: dict[str, Any] = {"topics": {t: counts[t] for t in subscribed if t in counts}, "members": {}}
    for row in members.itertuples(index=False):
        owned = row.owned if len(row.owned) else row.assignment
        generation = _value(row.kafka_generation)
        doc["members"][row.member_id] = {
            "topics": list(row.topics),
            "owned": [[tp["topic"], int(tp["partition"])] for tp in owned],
            "generation": None if generation is None else int(generation),
            "group_instance_id": _value(row.group_instance_id),
            "rack": _value(row.rack),
        }
    doc["loads"] = {t: list(weights[t]) for t in doc["topics"] if t in weights}
    return doc


_PLAN_DTYPES = {
    "generation_id": "int64",
    "group_id": object,
    "strategy": object,
    "topic": object,
    "partition": "int32",
    "member": object,
    "previous_member": object,
    "moved": bool,
    "phase": object,
    "weight": "float64",
}


def _value(cell: Any) -> Any:
    """A pandas cell with its missing markers (None, NaN, NA) turned into None."""
    return None if cell is None or pd.isna(cell) else cell


def plan_group(
    members: pd.DataFrame,
    strategies: Sequence[str],
    counts: Mapping[str, int],
    weights: Mapping[str, Sequence[float]],
) -> pd.DataFrame:
    """Every strategy's candidate for one group as `plans` rows; `members` carries the group's generation_id."""
    generation_id = int(members["generation_id"].iloc[0])
    group_id = members["group_id"].iloc[0]
    members = members[members["member_id"] != ""].sort_values("member_id")
    doc = compact_group(members, counts, weights)
    current = {
        (tp["topic"], int(tp["partition"])): row.member_id
        for row in members.itertuples(index=False)
        for tp in row.assignment
    }
    frames = []
    for strategy in strategies:
        result = assign(strategy, doc)
        # Cooperative rebalancing (KIP-429): a partition changing owner is revoked in this round and assigned in
        # the follow-up one, so its target owner does not get it now.
        now = {(t, p, m) for m, tps in result.assignment.items() for t, p in tps}
        rows = [(topic, partition, member) for member, tps in result.target.items() for topic, partition in tps]
        frame = pd.DataFrame(rows, columns=["topic", "partition", "member"])
        frame["previous_member"] = [current.get((t, p)) for t, p, _ in rows]
        frame["moved"] = frame["previous_member"].notna() & (frame["previous_member"] != frame["member"])
        frame["phase"] = ["assign" if row in now else "revoke" for row in rows]
        frame["weight"] = [float(weights[t][p]) if t in weights and p < len(weights[t]) else 1.0 for t, p, _ in rows]
        frame["strategy"] = strategy
        frames.append(frame)
    out = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=PLANS.schema.names)
    out["generation_id"] = generation_id
    out["group_id"] = group_id
    # Plain numpy/object dtypes: pandas 3's Arrow-backed strings reach Spark's serializer as chunked arrays.
    return out[PLANS.schema.names].astype(_PLAN_DTYPES)


def plan_kernel(
    strategies: Sequence[str], counts: Mapping[str, int], weights: Mapping[str, Sequence[float]]
) -> Callable[[pd.DataFrame], pd.DataFrame]:
    """`plan_group` bound to one run's settings, as the function applyInPandas calls per group."""

    def kernel(members: pd.DataFrame) -> pd.DataFrame:
        return plan_group(members, strategies, counts, weights)

    return kernel

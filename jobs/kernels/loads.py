"""Partition loads: which measured load a group's plan balances, partition by partition, and why.

Four measures can weigh a partition (`jobs.tables.plan_loads` gathers them per group): the key-skew job's
`messages` or `bytes` landing on it, the group's `lag` (end offset - committed), and its `throughput` (end-offset
growth per second since the group's previous snapshot). `auto` takes the first that is measured and carries load,
in the order messages, throughput, lag; with none, every partition weighs 1 and the label says what was missing,
e.g. `uniform (no key samples, no previous snapshot, no lag)`. Runs inside the plan kernel (NumPy only).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from planner.errors import InputError

SOURCES = ("messages", "bytes", "throughput", "lag")
MODES = ("auto", *SOURCES, "uniform")
AUTO_ORDER = ("messages", "throughput", "lag")
FILLED = "mean"  # the per-partition source of a partition the chosen measure does not cover
UNIFORM = "uniform"


@dataclass(frozen=True)
class Loads:
    """One group's partition loads (float64[P], by partition id), where each came from, and the group's label."""

    values: np.ndarray
    sources: np.ndarray  # object[P]: the measure, FILLED or UNIFORM
    label: str  # generations.load_source, e.g. "lag" or "uniform (no lag)"


def check_mode(mode: str) -> str:
    """The configured load source, or InputError naming REBALANCE_LOAD_SOURCE and the choices."""
    if mode not in MODES:
        raise InputError(f"REBALANCE_LOAD_SOURCE: unknown load source {mode!r}; use one of {', '.join(MODES)}")
    return mode


def choose(
    mode: str,
    measured: Mapping[str, tuple[np.ndarray, np.ndarray]],
    num_partitions: int,
    *,
    has_previous: bool,
) -> Loads:
    """The loads of one group under `mode`, from `measured[source] = (partition ids, values)`.

    A measure is usable when it gives some partition a finite load >= 0 and the group's total is above zero
    (a measure that is zero everywhere says nothing about balance). Partitions a usable measure does not cover
    get the mean of those it does, and the label counts them.
    """
    usable = {s: _clean(*measured[s], num_partitions) for s in SOURCES if s in measured}
    usable = {s: v for s, v in usable.items() if len(v[0]) and float(v[1].sum()) > 0}
    order = AUTO_ORDER if mode == "auto" else () if mode == UNIFORM else (mode,)
    for source in order:
        if source in usable:
            return _filled(source, *usable[source], num_partitions)
    missing = ", ".join(_missing(s, has_previous) for s in order)
    return Loads(
        np.ones(num_partitions, dtype=np.float64),
        np.full(num_partitions, UNIFORM, dtype=object),
        f"{UNIFORM} ({missing})" if missing else UNIFORM,
    )


def _clean(parts: np.ndarray, values: np.ndarray, num_partitions: int) -> tuple[np.ndarray, np.ndarray]:
    """The measurements naming an existing partition with a finite value >= 0, one per partition (the first).

    A negative end-offset growth means the topic was recreated or its offsets reset: no rate can be read from it.
    """
    parts = np.asarray(parts, dtype=np.int64)
    values = np.asarray(values, dtype=np.float64)
    keep = (parts >= 0) & (parts < num_partitions) & np.isfinite(values) & (values >= 0)
    parts, first = np.unique(parts[keep], return_index=True)
    return parts, values[keep][first]


def _filled(source: str, parts: np.ndarray, values: np.ndarray, num_partitions: int) -> Loads:
    """`source`'s values, and the mean of them where it has none."""
    out = np.full(num_partitions, float(values.mean()), dtype=np.float64)
    out[parts] = values
    sources = np.full(num_partitions, FILLED, dtype=object)
    sources[parts] = source
    gaps = num_partitions - len(parts)
    label = f"{source} ({gaps} of {num_partitions} partitions unmeasured: the group's mean)" if gaps else source
    return Loads(out, sources, label)


def _missing(source: str, has_previous: bool) -> str:
    """Why a measure could not weigh the group."""
    if source in ("messages", "bytes"):
        return "no key samples"
    if source == "throughput":
        return "no end-offset growth since the previous snapshot" if has_previous else "no previous snapshot"
    return "no lag"

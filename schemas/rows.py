"""Typed rows of the tables whose rows cross module boundaries as Python dicts: a generation and a candidate's
plan metrics. Each TypedDict names the table's columns (a unit test holds them to `schemas.tables`)."""

from __future__ import annotations

from datetime import datetime
from typing import NotRequired, TypedDict


class Generation(TypedDict):
    """A `generations` row: one planning run of one group and what became of it."""

    group_id: str
    generation_id: int
    created_at: datetime
    trigger: str
    run_id: str
    parameters: str  # JSON: the strategies, the load source and the weighted topics
    snapshot_id: str
    chosen_strategy: str | None
    status: str  # schemas.status.GenerationStatus
    gate_summary: str | None
    changes: str | None
    status_reason: str | None
    status_at: datetime | None
    reviewed_by: str | None
    reviewed_at: datetime | None
    review_comment: str | None
    report_path: str | None
    verification: str | None
    verified_at: datetime | None
    verification_detail: str | None
    load_source: str | None


class PlanMetrics(TypedDict):
    """A `plan_metrics` row: one candidate's balance and movement; `chosen` once the candidates are compared."""

    generation_id: int
    group_id: str
    strategy: str
    members: int
    partitions: int
    count_spread: int
    max_load: float
    mean_load: float
    max_mean_load: float
    load_bound: float
    partitions_moved: int
    stickiness: float | None
    chosen: NotRequired[bool]

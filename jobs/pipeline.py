"""The pipeline as a table of steps: the nightly run, the what-if run and the lake's maintenance.

`STEPS` is the only way a step runs, in `rebalance run` (`run`) and in an Airflow task (`run_step`) alike: each
entry passes a run's params (a DAG run's typed params; none for `rebalance run`) to its step as arguments, and
every step returns a `StepResult`, whose text is printed when it ends. Steps share nothing but the lake, keyed by
the run id, so each can run in its own process (an Airflow task) or all in one. This module stays light to import
(DAG files import it at parse time): the steps and Spark load only when a step runs.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from jobs.config import Config

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from jobs.context import RunContext, StepResult

AFTER_PLAN = ("changes", "migration")  # steps that write onto the generations `plan` allocates
# The last step that needs Spark is the gate: the Python-only steps after it run once the driver JVM is stopped.
NIGHTLY = ("ingest", "verify", "skew", "plan", "gate", *AFTER_PLAN, "publish", "report", "review", "signals")
WHAT_IF = ("scenario", "plan", "gate", "publish", "report", "review", "signals")
MAINTENANCE = ("maintain",)


def ingest(ctx: RunContext, params: Mapping[str, Any]) -> StepResult:
    """Ingest the run's snapshots (Kafka or files); bad input goes to quarantine, named."""
    from jobs.steps import ingest

    return ingest.run(ctx)


def verify(ctx: RunContext, params: Mapping[str, Any]) -> StepResult:
    """Compare the snapshot just ingested with each group's approved plan: applied, or drifted (and where)."""
    from jobs.steps import verify

    return verify.run(ctx)


def scenario(ctx: RunContext, params: Mapping[str, Any]) -> StepResult:
    """Write a what-if scenario of one group (`params`: group, partitions, add_members, ...) as the run's snapshot."""
    from jobs.steps import what_if

    return what_if.run(
        ctx,
        params["group"],
        partitions=params.get("partitions") or {},
        add_members=params.get("add_members") or 0,
        remove_members=params.get("remove_members") or (),
        snapshot_id=params.get("snapshot_id") or None,
    )


def skew(ctx: RunContext, params: Mapping[str, Any]) -> StepResult:
    """Key skew of the run's key samples, if any; its per-partition loads weight the plans."""
    from jobs.steps import skew

    what_if = skew.parse_what_if(ctx.config.what_if) if ctx.config.what_if else ()
    return skew.run(ctx, skew.SkewOptions(sample_id=ctx.run_id, what_if=what_if))


def plan(ctx: RunContext, params: Mapping[str, Any]) -> StepResult:
    """Plan every group of the run with each strategy, weighting partitions by the run's measured loads."""
    from jobs.steps import plan

    return plan.run(ctx)


def changes(ctx: RunContext, params: Mapping[str, Any]) -> StepResult:
    """What changed in each planned group since its previous snapshot (joins, leaves, subscriptions, partitions).

    Runs once the plan step has allocated the run's generations: the changes are stored on them.
    """
    from jobs.steps import changes

    return changes.run(ctx)


def migration(ctx: RunContext, params: Mapping[str, Any]) -> StepResult:
    """Readiness of every planned classic group for group.protocol=consumer (KIP-848), per generation."""
    from jobs.steps import migration

    return migration.run(ctx)


def gate(ctx: RunContext, params: Mapping[str, Any]) -> StepResult:
    """Validate the run's chosen candidates with Great Expectations."""
    from jobs.steps import gate

    return gate.run(ctx)


def publish(ctx: RunContext, params: Mapping[str, Any]) -> StepResult:
    """Approve or reject the run's generations; `params` approval (default REBALANCE_APPROVAL) gates them instead."""
    from jobs.io.flags import APPROVAL, env_flag
    from jobs.steps import publish

    approval = params.get("approval")
    return publish.run(ctx, approval=env_flag(APPROVAL) if approval is None else bool(approval))


def report(ctx: RunContext, params: Mapping[str, Any]) -> StepResult:
    """Write the HTML report of every generation of the run."""
    from jobs.steps import report

    return report.run(ctx)


def review(ctx: RunContext, params: Mapping[str, Any]) -> StepResult:
    """With approval on: what the run's gated generations show their reviewer (nothing when none awaits review)."""
    from jobs.steps import review

    return review.run(ctx)


def record_review(ctx: RunContext, params: Mapping[str, Any]) -> StepResult:
    """Record a reviewer's answer (`params`: decision, reviewer, comment, reviewed_at) on the gated generations."""
    from datetime import datetime

    from jobs.steps import review

    reviewed_at = params.get("reviewed_at")
    return review.record(
        ctx,
        params["decision"],
        params["reviewer"],
        params.get("comment") or "",
        reviewed_at=datetime.fromisoformat(reviewed_at) if reviewed_at else None,
    )


def signals(ctx: RunContext, params: Mapping[str, Any]) -> StepResult:
    """Write the lake's metrics file and raise the run's alarms (rejected generations, drifted plans)."""
    from jobs.steps import signals

    return signals.run(ctx)


def maintain(ctx: RunContext, params: Mapping[str, Any]) -> StepResult:
    """Compact, checkpoint and VACUUM every table (`params`: retention_days, bulky_retention_days, dry_run)."""
    from jobs.config import BULKY_RETENTION_DAYS, RETENTION_DAYS
    from jobs.steps import maintain

    return maintain.run(
        ctx,
        retention_days=params.get("retention_days", RETENTION_DAYS),
        bulky_retention_days=params.get("bulky_retention_days", BULKY_RETENTION_DAYS),
        dry_run=bool(params.get("dry_run")),
    )


STEPS: dict[str, Callable[[RunContext, Mapping[str, Any]], StepResult]] = {
    "ingest": ingest,
    "verify": verify,
    "scenario": scenario,
    "skew": skew,
    "plan": plan,
    "changes": changes,
    "migration": migration,
    "gate": gate,
    "publish": publish,
    "report": report,
    "review": review,
    "record_review": record_review,
    "signals": signals,
    "maintain": maintain,
}


def step(ctx: RunContext, name: str, params: Mapping[str, Any]) -> StepResult:
    """Run step `name` of the table with a run's params, then print what it tells a person."""
    result = STEPS[name](ctx, params)
    if result.text:
        print(result.text)
    return result


def warm_up(config: Config, *, one_group: bool = False) -> RunContext:
    """A context for a run that needs Spark and Great Expectations soon (a what-if), with both warming up in the
    background while the first steps run: a what-if's scenario takes a fraction of a second, so its plan step would
    otherwise wait for both in turn (2.5 s of JVM, then 2.7 s of GX's import inside the gate). GX's import, over
    Spark Connect the longest wait of all, starts first, in a process of its own (`jobs.io.gx_worker`): on a
    thread here it took turns with the session and the steps on this process's GIL. Close the context's
    `gx_worker` when done."""
    from jobs.io.gx_worker import GxWorker

    worker = GxWorker()  # before this process's own imports (jobs.context: the lake's, 0.3 s)
    from jobs.context import RunContext

    try:
        ctx = RunContext.create(config, one_group=one_group)
    except BaseException:
        worker.close()
        raise
    ctx.gx_worker = worker
    ctx.start_spark()
    return ctx


def run_step(name: str, params: Mapping[str, Any], run_id: str, trigger: str) -> StepResult:
    """One step as an Airflow task runs it: settings from the environment, overridden by the run's params.

    A what-if run's params name its one group: its tasks get a one-group context, as `rebalance what-if` does (a
    session without the Delta connector, its few rows' queries interpreted: the plan task 0.5-1 s sooner). The plan
    step's first work is a Spark query, so its session starts while the step's modules load.
    """
    from jobs.context import RunContext

    ctx = RunContext.create(config_from_params(params), run_id, trigger=trigger, one_group=bool(params.get("group")))
    if name == "plan":
        ctx.start_spark()
    return step(ctx, name, params)


def config_from_params(params: Mapping[str, Any]) -> Config:
    """The environment's configuration with a run's non-empty params (snapshots, strategies, lake, what_if)."""
    return Config.from_env(**{k: params.get(k) for k in ("snapshots", "strategies", "lake", "what_if")})


@dataclass(frozen=True)
class PipelineResult:
    """What `run` did: its run id and each step's result, by step name."""

    run_id: str
    steps: Mapping[str, StepResult]
    seconds: Mapping[str, float]  # wall seconds of each step, in the order they ran

    @property
    def report(self) -> tuple[dict[str, Any], ...]:
        """The publish step's rows: each generation of the run with its status."""
        return self.steps["publish"].rows


def run(
    config: Config, run_id: str | None = None, *, trigger: str = "manual", spark: SparkSession | None = None
) -> PipelineResult:
    """Run every nightly step in one context; re-running the same run id rewrites the same rows."""
    from jobs.context import RunContext
    from jobs.kernels.memory import release_memory

    ctx = RunContext.create(config, run_id, trigger=trigger, spark=spark)
    ctx.spark_until_plan = True
    ctx.start_spark()  # the JVM starts while ingest runs
    if not ctx.embedded:
        _ = ctx.spark  # a cluster's or a Connect server's executors are checked before anything is written
    results: dict[str, StepResult] = {}
    seconds: dict[str, float] = {}
    try:
        for name in NIGHTLY:
            started = time.perf_counter()
            if name == "plan":
                # The gate's import of Great Expectations (seconds of module loading) starts with the plan step, whose
                # Spark jobs leave this process's main thread waiting; the gate finds it done instead of starting it.
                from jobs.steps.gate import import_in_background

                import_in_background()
            results[name] = step(ctx, name, {})
            seconds[name] = time.perf_counter() - started
            if name == "plan":
                ctx.stop_spark()  # the steps from here on run in Python alone: the driver JVM's memory goes back
            release_memory()  # each step starts from what it needs, not from the peak of the one before
    except BaseException:
        ctx.settle()  # the JVM's start-up lines first: the error is the last line
        raise
    return PipelineResult(ctx.run_id, results, seconds)

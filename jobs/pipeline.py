"""The pipeline as a table of steps: the nightly run and the what-if run, each step one call for a task or the CLI.

Steps share nothing but the lake, keyed by the run id, so each can run in its own process (an Airflow task) or all
in one (`run`, used by `rebalance run` and the tests). Their return values are small, for XCom. This module stays
light to import (DAG files import it at parse time): the steps and Spark load only when a step runs.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from jobs.config import Config

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from jobs.context import RunContext
    from jobs.steps.ingest import IngestResult

AFTER_PLAN = ("changes", "migration")  # steps that write onto the generations `plan` allocates
# The last step that needs Spark is the gate: the Python-only steps after it run once the driver JVM is stopped.
NIGHTLY = ("ingest", "verify", "skew", "plan", "gate", *AFTER_PLAN, "publish", "report", "review", "signals")
WHAT_IF = ("scenario", "plan", "gate", "publish", "report", "review", "signals")


def ingest(ctx: RunContext, params: Mapping[str, Any]) -> dict[str, Any]:
    """Ingest the run's snapshots (Kafka or files); returns the groups and the quarantined sources."""
    from jobs.steps import ingest

    result = ingest.run(ctx)
    return {"groups": result.groups, "quarantined": [source for source, _ in result.quarantined]}


def verify(ctx: RunContext, params: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Compare the snapshot just ingested with each group's approved plan: applied, or drifted (and where)."""
    from jobs.steps import verify

    results = verify.run(ctx)
    for result in results:
        print(verify.format_verdict(result))
    return [
        {k: r[k] for k in ("group_id", "generation_id", "verification")} | {"differing": len(r["differing"])}
        for r in results
    ]


def scenario(ctx: RunContext, params: Mapping[str, Any]) -> dict[str, Any]:
    """Write a what-if scenario of one group (`params`: group, partitions, add_members, ...) as the run's snapshot."""
    from jobs.steps import what_if

    result = what_if.run(
        ctx,
        params["group"],
        partitions=params.get("partitions") or {},
        add_members=params.get("add_members") or 0,
        remove_members=params.get("remove_members") or (),
        snapshot_id=params.get("snapshot_id") or None,
    )
    return {"groups": result.groups, "quarantined": []}


def skew(ctx: RunContext, params: Mapping[str, Any]) -> dict[str, Any]:
    """Key skew of the run's key samples, if any; its per-partition loads weight the plans."""
    from jobs.steps import skew
    from jobs.steps.skew import SkewOptions, parse_what_if

    what_if = parse_what_if(ctx.config.what_if) if ctx.config.what_if else ()
    summary = skew.run(ctx, SkewOptions(sample_id=ctx.run_id, what_if=what_if))
    return {"topics": sorted(set(summary.column("topic").to_pylist()))}


def plan(ctx: RunContext, params: Mapping[str, Any]) -> dict[str, int]:
    """Plan every group of the run with each strategy, weighting partitions by the run's measured loads."""
    from jobs.steps import plan

    return plan.run(ctx)


def changes(ctx: RunContext, params: Mapping[str, Any]) -> dict[str, Any]:
    """What changed in each planned group since its previous snapshot (joins, leaves, subscriptions, partitions).

    Runs once the plan step has allocated the run's generations: the changes are stored on them.
    """
    from jobs.steps import changes

    return changes.run(ctx)


def migration(ctx: RunContext, params: Mapping[str, Any]) -> dict[str, bool]:
    """Readiness of every planned classic group for group.protocol=consumer (KIP-848), per generation."""
    from jobs.steps import migration

    return migration.run(ctx)


def gate(ctx: RunContext, params: Mapping[str, Any]) -> dict[str, bool]:
    """Validate the run's chosen candidates with Great Expectations."""
    from jobs.steps import gate

    return gate.run(ctx)


def publish(ctx: RunContext, params: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Approve or reject the run's generations and print the report."""
    from jobs.steps import publish

    report = publish.run(ctx)
    print(publish.format_report(report))
    return [{k: r[k] for k in ("group_id", "generation_id", "status")} for r in report]


def report(ctx: RunContext, params: Mapping[str, Any]) -> dict[str, str]:
    """Write the HTML report of every generation of the run; returns group -> page path."""
    from jobs.steps import report
    from jobs.terminal import short

    pages = report.run(ctx)
    for group, page in pages.items():
        print(f"report {short(group)}: {page}")
    return pages


def review(ctx: RunContext, params: Mapping[str, Any]) -> dict[str, Any] | None:
    """With approval on: what the run's gated generations show their reviewer (None when nothing awaits review)."""
    from jobs.steps import review

    request = review.request(ctx)
    if request:
        print(request["markdown"])
    return request


def signals(ctx: RunContext, params: Mapping[str, Any]) -> dict[str, Any]:
    """Write the lake's metrics file; returns its path and the run's alarms (rejected generations, drifted plans)."""
    from jobs.steps import signals

    result = signals.run(ctx)
    for alarm in result["alarms"]:
        print(f"alarm: {alarm}")
    return result


STEPS: dict[str, Callable[[RunContext, Mapping[str, Any]], Any]] = {
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
    "signals": signals,
}


def warm_up(ctx: RunContext) -> None:
    """Start the JVM and import Great Expectations in the background, each on its own core, while the first steps
    run: a what-if's scenario takes a fraction of a second, so its plan step would otherwise wait for both in turn
    (2.5 s of JVM, then 2.7 s of GX's import inside the gate)."""
    from jobs.steps.gate import import_in_background

    ctx.start_spark()
    import_in_background()


def run_step(name: str, params: Mapping[str, Any], run_id: str, trigger: str) -> Any:
    """One step as an Airflow task runs it: settings from the environment, overridden by the run's params."""
    from jobs.context import RunContext

    ctx = RunContext.create(config_from_params(params), run_id, trigger=trigger)
    return STEPS[name](ctx, params)


def config_from_params(params: Mapping[str, Any]) -> Config:
    """The environment's configuration with a run's non-empty params (snapshots, strategies, lake, what_if)."""
    return Config.from_env(**{k: params.get(k) for k in ("snapshots", "strategies", "lake", "what_if")})


@dataclass(frozen=True)
class PipelineResult:
    run_id: str
    ingest: IngestResult
    report: list[dict[str, Any]]
    pages: dict[str, str]  # group -> its generation's HTML report


def run(
    config: Config, run_id: str | None = None, *, trigger: str = "manual", spark: SparkSession | None = None
) -> PipelineResult:
    """Run every nightly step in one context; re-running the same run id rewrites the same rows."""
    from jobs.context import RunContext
    from jobs.kernels.memory import release_memory
    from jobs.steps import ingest, publish
    from jobs.steps import report as report_step

    ctx = RunContext.create(config, run_id, trigger=trigger, spark=spark)
    ctx.start_spark()  # the JVM starts while ingest runs
    if not ctx.embedded:
        _ = ctx.spark  # a cluster's or a Connect server's executors are checked before anything is written
    ingested, published, pages = None, [], {}
    for name in NIGHTLY:
        if name == "ingest":
            try:
                ingested = ingest.run(ctx)
            except BaseException:
                ctx.settle()
                raise
        elif name == "publish":
            published = publish.run(ctx)
        elif name == "report":
            pages = report_step.run(ctx)
        else:
            STEPS[name](ctx, {})
        if name == "gate":
            ctx.stop_spark()  # the steps from here on run in Python alone: the driver JVM's memory goes back first
        release_memory()  # each step starts from what it needs, not from the peak of the one before
    assert ingested is not None
    return PipelineResult(ctx.run_id, ingested, published, pages)

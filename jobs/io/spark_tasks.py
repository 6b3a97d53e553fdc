"""Which executors ran a Spark job's tasks, read from the driver's own status store: the plan step names its task
split, so a run on a cluster shows whether every executor took a share of the groups."""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from pyspark.sql import SparkSession

from jobs.io.spark import is_connect

LISTENER_WAIT_MS = 10_000  # the status store learns of a task's end from the listener bus, asynchronously
_jobs = itertools.count(1)


@dataclass(frozen=True)
class ExecutorShare:
    """One executor's part of a stage: its tasks and the seconds they ran."""

    executor: str  # Spark's executor id: "driver" in local mode, "0", "1", ... on a cluster
    host: str
    tasks: int
    seconds: float


@contextmanager
def job_group(spark: SparkSession, description: str) -> Iterator[str | None]:
    """Tag the Spark jobs started in the block with a new job group (None over Spark Connect: no SparkContext)."""
    if is_connect(spark):
        yield None
        return
    group = f"rebalance-{next(_jobs)}-{description}"
    context = spark.sparkContext
    context.setJobGroup(group, description)
    try:
        yield group
    finally:
        context.setLocalProperty("spark.jobGroup.id", None)  # type: ignore[arg-type]
        context.setLocalProperty("spark.job.description", None)  # type: ignore[arg-type]


def task_split(spark: SparkSession, group: str) -> list[ExecutorShare]:
    """Per executor, the tasks of the last stage the group's jobs ran (a mapInArrow's stage: its result stage), in
    executor order; the status store keeps them for `spark.ui.retainedTasks` tasks (100,000 by default)."""
    context = spark.sparkContext
    tracker = context.statusTracker()
    stages = [
        stage
        for job in tracker.getJobIdsForGroup(group)
        if (info := tracker.getJobInfo(job)) is not None
        for stage in info.stageIds
    ]
    if not stages:
        return []
    stage = tracker.getStageInfo(max(stages))
    if stage is None:
        return []
    jvm_context = context._jsc.sc()
    jvm_context.listenerBus().waitUntilEmpty(LISTENER_WAIT_MS)
    tasks = jvm_context.statusStore().taskList(stage.stageId, stage.currentAttemptId, 2**31 - 1).iterator()
    shares: dict[tuple[str, str], tuple[int, float]] = {}
    while tasks.hasNext():
        task = tasks.next()
        if task.status() != "SUCCESS":
            continue
        key = (task.executorId(), task.host())
        count, seconds = shares.get(key, (0, 0.0))
        duration = task.duration()
        shares[key] = (count + 1, seconds + (duration.get() / 1000 if duration.isDefined() else 0.0))
    return [ExecutorShare(e, h, n, s) for (e, h), (n, s) in sorted(shares.items(), key=lambda i: _order(i[0][0]))]


def _order(executor: str) -> tuple[int, str]:
    return (0, executor.zfill(12)) if executor.isdigit() else (1, executor)


def describe(shares: list[ExecutorShare]) -> str:
    """`4 tasks on 2 executors (0 on 127.0.0.1: 2 tasks, 3.1 s; 1 on 127.0.0.1: 2 tasks, 2.9 s)`."""
    tasks = sum(s.tasks for s in shares)
    parts = "; ".join(f"{s.executor} on {s.host}: {_count(s.tasks, 'task')}, {s.seconds:.1f} s" for s in shares)
    return f"{_count(tasks, 'task')} on {_count(len(shares), 'executor')} ({parts})"


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"

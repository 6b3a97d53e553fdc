"""Airflow tasks generated from the pipeline's step table: a DAG file names its steps, this makes them tasks.

Two steps are more than one call. `review` becomes three tasks: `review` (what awaits a person's review; when
nothing does, it skips `approval`), `approval` (Airflow's ApprovalOperator: the reviewer approves or rejects in the
UI, seeing each group's plan and report page) and `record_review` (writes the answer on the generations). `signals`
runs whatever became of the tasks before it, and fails after writing when the run raised alarms (a rejected
generation, a drifted plan), naming them; the DAGs' failure callback (`jobs.airflow.notify`) then posts to a webhook.

The maintenance DAG is no planning run: its one task (`maintenance_task`) calls `jobs.steps.maintain` with the
run's retentions (`retention_params`), outside the step table.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

from airflow.sdk import Param, TriggerRule, chain, task
from airflow.sdk.exceptions import AirflowFailException, AirflowSkipException

from jobs.io.flags import APPROVAL, APPROVAL_TIMEOUT, DEFAULT_APPROVAL_TIMEOUT_HOURS, env_flag, env_hours

REVIEW, APPROVAL_TASK, RECORD = "review", "approval", "record_review"
RUNS_ALWAYS = frozenset({"signals"})
"""Steps that run whatever became of the steps before them (the metrics show a failed run too)."""


def lake_param() -> Param:
    """The DAGs' `lake` param: empty means REBALANCE_LAKE (else ./lake) where the task runs."""
    return Param("", type="string", description="a directory or s3://bucket/prefix (default $REBALANCE_LAKE, ./lake)")


def approval_param() -> Param:
    """The DAGs' `approval` param: its default is REBALANCE_APPROVAL where the DAG is parsed."""
    return Param(
        env_flag(APPROVAL),
        type="boolean",
        description="a person approves or rejects the plans that pass the gate, in the Airflow UI",
    )


def approval_timeout_param() -> Param:
    """The DAGs' `approval_timeout_hours` param: its default is REBALANCE_APPROVAL_TIMEOUT_HOURS (23) at parse time."""
    return Param(
        env_hours(APPROVAL_TIMEOUT, DEFAULT_APPROVAL_TIMEOUT_HOURS),
        type="number",
        exclusiveMinimum=0,
        description="hours the plans wait for a reviewer; with no answer by then they are rejected",
    )


def trigger_of(run_type: Any) -> str:
    """`scheduled` for a run the scheduler created, `manual` otherwise (DagRunType is a str enum)."""
    return "scheduled" if str(getattr(run_type, "value", run_type)) == "scheduled" else "manual"


def refuse_unknown(params: Mapping[str, Any], declared: Mapping[str, Any]) -> None:
    """Airflow 3 accepts conf keys no Param declares (it adds them unvalidated): refuse them before any work."""
    from planner.errors import InputError

    if unknown := sorted(set(params) - set(declared)):
        raise InputError(f"unknown parameter(s) {', '.join(unknown)}: this DAG takes {', '.join(declared)}")


@contextmanager
def approval_setting(params: Mapping[str, Any]) -> Iterator[None]:
    """The run's `approval` param as REBALANCE_APPROVAL while a step runs (publish reads it); restored after."""
    if "approval" not in params:
        yield
        return
    before = os.environ.get(APPROVAL)
    os.environ[APPROVAL] = "true" if params["approval"] else "false"
    try:
        yield
    finally:
        if before is None:
            os.environ.pop(APPROVAL, None)
        else:
            os.environ[APPROVAL] = before


def _run_step(name: str, params: Mapping[str, Any], run_id: str | None, dag_run: Any) -> Any:
    from jobs.pipeline import run_step

    with approval_setting(params):
        return run_step(name, params, str(run_id), trigger_of(dag_run.run_type))


def step_task(name: str, declared: Mapping[str, Any], first: bool) -> Any:
    """A task running pipeline step `name` with the run's params, run id and trigger (the first checks the params).

    A step that returns `alarms` fails its task once it has written everything, with the alarms as the message.
    """
    rule = TriggerRule.ALL_DONE if name in RUNS_ALWAYS else TriggerRule.ALL_SUCCESS

    @task(task_id=name, trigger_rule=rule)
    def step(
        params: dict[str, Any] | None = None, run_id: str | None = None, dag_run: Any = None, ti: Any = None
    ) -> Any:
        if first:
            refuse_unknown(params or {}, declared)
        result = _run_step(name, params or {}, run_id, dag_run)
        if isinstance(result, dict) and result.get("alarms"):
            raise AirflowFailException(f"{len(result['alarms'])} alarm(s): " + "; ".join(result["alarms"]))
        if name in RUNS_ALWAYS and (failed := failed_tasks(ti, str(run_id))):
            # This task runs whatever happened before it; as the DAG's last task it must not turn a failed
            # run into a successful one (Airflow sets the run's state from its leaf tasks).
            raise AirflowFailException(f"earlier tasks failed: {', '.join(failed)}")
        return result

    return step


def failed_tasks(ti: Any, run_id: str) -> list[str]:
    """The tasks of this run that failed or could not run because an upstream task failed."""
    states = ti.get_task_states(dag_id=ti.dag_id, run_ids=[run_id])
    per_task = states.get(run_id, states)
    return sorted(t for t, state in per_task.items() if str(state) in ("failed", "upstream_failed"))


def review_tasks() -> list[Any]:
    """`review` -> `approval` -> `record_review`: a person's decision on the run's gated generations."""
    from jobs.airflow.approval import ANSWER, PlanApproval

    @task.short_circuit(task_id=REVIEW, ignore_downstream_trigger_rules=False)
    def review(params: dict[str, Any] | None = None, run_id: str | None = None, dag_run: Any = None) -> str | None:
        """The reviewer's summary (Markdown) for the approval task, or None (skip it) when nothing awaits review."""
        request = _run_step(REVIEW, params or {}, run_id, dag_run)
        return request["markdown"] if request else None

    approval = PlanApproval(
        task_id=APPROVAL_TASK,
        subject="Rebalance plans of run {{ run_id }} await review",
        body="{{ ti.xcom_pull(task_ids='" + REVIEW + "') }}",
        params={"comment": Param("", type="string", description="why (recorded with the decision)")},
    )

    @task(task_id=RECORD, trigger_rule=TriggerRule.ALL_DONE)
    def record_review(
        params: dict[str, Any] | None = None, run_id: str | None = None, dag_run: Any = None, ti: Any = None
    ) -> list[dict[str, Any]]:
        """Write the reviewer's answer on the run's gated generations (skipped when nobody was asked)."""
        from datetime import datetime

        from jobs.context import RunContext
        from jobs.pipeline import config_from_params
        from jobs.steps import review as review_step

        answer = ti.xcom_pull(task_ids=APPROVAL_TASK, key=ANSWER)
        if not answer:
            raise AirflowSkipException("no answer to record: nothing awaited review")
        ctx = RunContext.create(config_from_params(params or {}), str(run_id), trigger=trigger_of(dag_run.run_type))
        rows = review_step.run(
            ctx,
            answer["decision"],
            answer["reviewer"],
            answer["comment"],
            reviewed_at=datetime.fromisoformat(answer["reviewed_at"]),
        )
        return [{k: r[k] for k in ("group_id", "generation_id", "status")} for r in rows]

    return [review(), approval, record_review()]


def chain_steps(names: Sequence[str], declared: Mapping[str, Any]) -> None:
    """The steps as tasks, each running after the one before; `declared` are the DAG's params."""
    tasks: list[Any] = []
    for i, name in enumerate(names):
        if name == REVIEW:
            tasks += review_tasks()
        else:
            tasks.append(step_task(name, declared, i == 0)())
    chain(*tasks)


def retention_params() -> dict[str, Param]:
    """The maintenance DAG's typed retentions (whole days, 0 or more), defaulting as `rebalance maintain` does."""
    from jobs.config import BULKY_RETENTION_DAYS, RETENTION_DAYS

    return {
        "retention_days": Param(
            RETENTION_DAYS,
            type="integer",
            minimum=0,
            description="days VACUUM keeps the files older versions need: time travel reaches this far back",
        ),
        "bulky_retention_days": Param(
            BULKY_RETENTION_DAYS,
            type="integer",
            minimum=0,
            description="days plans, loads, key samples and the like are kept (each group's newest and newest "
            "approved generation always are)",
        ),
    }


def maintenance_task(declared: Mapping[str, Any]) -> Any:
    """The task running `jobs.steps.maintain` with the run's params (unknown keys refused, named)."""

    @task(task_id="maintain")
    def maintain(
        params: dict[str, Any] | None = None, run_id: str | None = None, dag_run: Any = None
    ) -> list[dict[str, Any]]:
        from jobs.context import RunContext
        from jobs.pipeline import config_from_params
        from jobs.steps import maintain as step

        params = params or {}
        refuse_unknown(params, declared)
        ctx = RunContext.create(config_from_params(params), str(run_id), trigger=trigger_of(dag_run.run_type))
        dry_run = bool(params.get("dry_run"))
        rows = step.run(
            ctx,
            retention_days=params["retention_days"],
            bulky_retention_days=params["bulky_retention_days"],
            dry_run=dry_run,
        )
        print(step.format_report(rows, dry_run=dry_run))
        return rows

    return maintain()

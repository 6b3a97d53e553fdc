"""Airflow tasks generated from the pipeline's step table: a DAG file names its steps, this makes them tasks.

Each task runs its step through `jobs.pipeline.run_step` with the DAG run's params as the step's arguments (the
`approval` param, the maintenance DAG's retentions), pushes the step's result to XCom and fails on its alarms.
`review` becomes three tasks: `review` (what awaits a person's review; when nothing does, it skips `approval`),
`approval` (Airflow's ApprovalOperator: the reviewer approves or rejects in the UI, seeing each group's plan and
report page) and `record_review` (the step that writes the answer on the generations). `signals` runs whatever became
of the tasks before it, and fails after writing when the run raised alarms (a rejected generation, a drifted plan),
naming them; the DAGs' failure callback (`jobs.airflow.notify`) then posts to a webhook.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from airflow.sdk import Param, TriggerRule, chain, task
from airflow.sdk.exceptions import AirflowFailException, AirflowSkipException

from jobs.io.flags import APPROVAL, APPROVAL_TIMEOUT, DEFAULT_APPROVAL_TIMEOUT_HOURS, env_flag, env_hours

if TYPE_CHECKING:
    from jobs.context import StepResult

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


def _run_step(name: str, params: Mapping[str, Any], run_id: str | None, dag_run: Any) -> StepResult:
    from jobs.pipeline import run_step

    return run_step(name, params, str(run_id), trigger_of(dag_run.run_type))


def step_task(name: str, declared: Mapping[str, Any], first: bool) -> Any:
    """A task running pipeline step `name` with the run's params, run id and trigger (the first checks the params).

    A step that returns alarms fails its task once it has written everything, with the alarms as the message.
    """
    rule = TriggerRule.ALL_DONE if name in RUNS_ALWAYS else TriggerRule.ALL_SUCCESS

    @task(task_id=name, trigger_rule=rule, multiple_outputs=False)  # one XCom: the step result as a dict
    def step(
        params: dict[str, Any] | None = None, run_id: str | None = None, dag_run: Any = None, ti: Any = None
    ) -> dict[str, Any]:
        if first:
            refuse_unknown(params or {}, declared)
        result = _run_step(name, params or {}, run_id, dag_run)
        if result.alarms:
            raise AirflowFailException(f"{len(result.alarms)} alarm(s): " + "; ".join(result.alarms))
        if name in RUNS_ALWAYS and (failed := failed_tasks(ti, str(run_id))):
            # This task runs whatever happened before it; as the DAG's last task it must not turn a failed
            # run into a successful one (Airflow sets the run's state from its leaf tasks).
            raise AirflowFailException(f"earlier tasks failed: {', '.join(failed)}")
        return result.as_json()

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
        return _run_step(REVIEW, params or {}, run_id, dag_run).text or None

    approval = PlanApproval(
        task_id=APPROVAL_TASK,
        subject="Rebalance plans of run {{ run_id }} await review",
        body="{{ ti.xcom_pull(task_ids='" + REVIEW + "') }}",
        params={"comment": Param("", type="string", description="why (recorded with the decision)")},
    )

    @task(task_id=RECORD, trigger_rule=TriggerRule.ALL_DONE, multiple_outputs=False)
    def record_review(
        params: dict[str, Any] | None = None, run_id: str | None = None, dag_run: Any = None, ti: Any = None
    ) -> dict[str, Any]:
        """Write the reviewer's answer on the run's gated generations (skipped when nobody was asked)."""
        answer = ti.xcom_pull(task_ids=APPROVAL_TASK, key=ANSWER)
        if not answer:
            raise AirflowSkipException("no answer to record: nothing awaited review")
        return _run_step(RECORD, {**(params or {}), **answer}, run_id, dag_run).as_json()

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

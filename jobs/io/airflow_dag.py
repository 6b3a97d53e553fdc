"""Airflow tasks generated from the pipeline's step table: a DAG file names its steps, this makes them tasks."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from airflow.sdk import chain, task


def trigger_of(run_type: Any) -> str:
    """`scheduled` for a run the scheduler created, `manual` otherwise (DagRunType is a str enum)."""
    return "scheduled" if str(getattr(run_type, "value", run_type)) == "scheduled" else "manual"


def refuse_unknown(params: Mapping[str, Any], declared: Mapping[str, Any]) -> None:
    """Airflow 3 accepts conf keys no Param declares (it adds them unvalidated): refuse them before any work."""
    from planner.errors import InputError

    if unknown := sorted(set(params) - set(declared)):
        raise InputError(f"unknown parameter(s) {', '.join(unknown)}: this DAG takes {', '.join(declared)}")


def step_task(name: str, declared: Mapping[str, Any], first: bool) -> Any:
    """A task running pipeline step `name` with the run's params, run id and trigger (the first checks the params)."""

    @task(task_id=name)
    def step(params: dict[str, Any] | None = None, run_id: str | None = None, dag_run: Any = None) -> Any:
        from jobs.pipeline import run_step

        if first:
            refuse_unknown(params or {}, declared)
        return run_step(name, params or {}, str(run_id), trigger_of(dag_run.run_type))

    return step


def chain_steps(names: Sequence[str], declared: Mapping[str, Any]) -> None:
    """The steps as tasks, each running after the one before; `declared` are the DAG's params."""
    chain(*[step_task(name, declared, i == 0)() for i, name in enumerate(names)])

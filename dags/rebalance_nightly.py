"""Nightly rebalance plan: ingest consumer-group snapshots, measure key skew, plan every group, gate, publish.

Snapshots come from Kafka when `REBALANCE_KAFKA_BOOTSTRAP_SERVERS` (or `REBALANCE_KAFKA_CONN_ID`) is set, with key
samples of `REBALANCE_SAMPLE_TOPICS`; from snapshot files otherwise. Each task is one call into `jobs.pipeline`;
tasks share nothing but the lake (`REBALANCE_LAKE`, default `./lake`), keyed by the Airflow run id. The schedule
comes from `REBALANCE_NIGHTLY_SCHEDULE` (default 02:00 UTC daily). Parameters override the environment for one run:
`snapshots` (file, directory or glob of snapshot JSON), `strategies` (comma-separated assignors to evaluate),
`lake`, `what_if` (partition counts the key-skew job compares with today's), and `approval` (default
`REBALANCE_APPROVAL`): plans that pass the gate wait for a person to approve or reject them in the Airflow UI,
and are rejected when nobody answers within `approval_timeout_hours` (default `REBALANCE_APPROVAL_TIMEOUT_HOURS`, 23).
A rejected generation or a drifted plan fails the run after everything is written; the failure is posted to the
webhook of the connection `REBALANCE_WEBHOOK_CONN_ID` names, if any.
"""

from __future__ import annotations

import os

import pendulum
from airflow.sdk import Param, dag

from jobs.airflow.notify import WebhookNotifier
from jobs.airflow.tasks import approval_param, approval_timeout_param, chain_steps, lake_param
from jobs.pipeline import NIGHTLY

PARAMS = {
    "snapshots": Param("", type="string", description="snapshot files: a path, directory or glob"),
    "strategies": Param("", type="string", description="assignors to evaluate, comma-separated"),
    "lake": lake_param(),
    "approval": approval_param(),
    "approval_timeout_hours": approval_timeout_param(),
    "what_if": Param(
        "",
        type="string",
        pattern=r"^(\d+(-\d+(:\d+)?)?(,\d+(-\d+(:\d+)?)?)*)?$",
        description="what-if partition counts for the key-skew job, e.g. 24,36 or 12-48:12",
    ),
}


@dag(
    dag_id=os.path.splitext(os.path.basename(__file__))[0],
    schedule=os.environ.get("REBALANCE_NIGHTLY_SCHEDULE", "0 2 * * *"),
    start_date=pendulum.datetime(2026, 1, 1, tz="UTC"),
    catchup=False,
    max_active_runs=1,
    params=PARAMS,
    doc_md=__doc__,
    on_failure_callback=WebhookNotifier(),
    tags=["rebalance"],
)
def rebalance_nightly() -> None:
    chain_steps(NIGHTLY, PARAMS)


rebalance_nightly()

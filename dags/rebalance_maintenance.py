"""Weekly lake maintenance: compact, checkpoint and VACUUM every table, and delete the bulky rows of old runs.

One task, the `maintain` step of `jobs.pipeline`, under the lake lock (a planning run's next commit waits for it).
The schedule comes from `REBALANCE_MAINTENANCE_SCHEDULE` (default 04:00 UTC on Sundays). Parameters:
`retention_days` (default 7: VACUUM keeps the files of the last 7 days' versions, so time travel reaches that far),
`bulky_retention_days` (default 30: plans, plan diffs, partition loads, key samples, key skew and per-snapshot
partition rows of older generations and runs are deleted; every group's newest and newest approved generation, and
the generations table itself, are kept), `lake`, and `dry_run` (report what would be deleted, change nothing).
A failed run is posted to the webhook of `REBALANCE_WEBHOOK_CONN_ID`, as the nightly DAG's are.
"""

from __future__ import annotations

import os

import pendulum
from airflow.sdk import Param, dag

from jobs.airflow.notify import WebhookNotifier
from jobs.airflow.tasks import chain_steps, lake_param, retention_params
from jobs.pipeline import MAINTENANCE

PARAMS = {
    **retention_params(),
    "lake": lake_param(),
    "dry_run": Param(False, type="boolean", description="report what would be deleted; change nothing"),
}


@dag(
    dag_id=os.path.splitext(os.path.basename(__file__))[0],
    schedule=os.environ.get("REBALANCE_MAINTENANCE_SCHEDULE", "0 4 * * 0"),
    start_date=pendulum.datetime(2026, 1, 1, tz="UTC"),
    catchup=False,
    max_active_runs=1,
    params=PARAMS,
    doc_md=__doc__,
    on_failure_callback=WebhookNotifier(),
    tags=["rebalance"],
)
def rebalance_maintenance() -> None:
    chain_steps(MAINTENANCE, PARAMS)


rebalance_maintenance()

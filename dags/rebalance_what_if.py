"""What-if rebalance, triggered by hand: what would a group's assignment be with more partitions or other members?

Takes the group's latest observed snapshot from the lake, applies the validated parameters (new partition counts for its
topics, members removed, new members subscribed to all its topics), stores the scenario as a snapshot of its own,
then plans, gates and publishes it like a nightly run (trigger `manual`), so it lands in the assignment history.
Kafka can only add partitions: a count below today's is rejected, as are unknown topics and unknown members.
With `approval` (default `REBALANCE_APPROVAL`) a person approves or rejects the scenario's plan in the Airflow UI;
with no answer within `approval_timeout_hours` (default `REBALANCE_APPROVAL_TIMEOUT_HOURS`, 23) it is rejected.
"""

from __future__ import annotations

import os

import pendulum
from airflow.sdk import Param, dag

from jobs.airflow.notify import WebhookNotifier
from jobs.airflow.tasks import approval_param, approval_timeout_param, chain_steps, lake_param
from jobs.pipeline import WHAT_IF

PARAMS = {
    "group": Param("", type="string", minLength=1, description="consumer group id to rebalance"),
    "partitions": Param(
        {},
        type="object",
        additionalProperties={"type": "integer", "minimum": 1},
        description='new partition counts, e.g. {"orders": 24}',
    ),
    "add_members": Param(0, type="integer", minimum=0, maximum=10000, description="members joining"),
    "remove_members": Param(
        [], type="array", items={"type": "string", "minLength": 1}, uniqueItems=True, description="member ids leaving"
    ),
    "strategies": Param("", type="string", description="assignors to evaluate, comma-separated"),
    "snapshot_id": Param("", type="string", description="snapshot to start from (default: the group's latest)"),
    "lake": lake_param(),
    "approval": approval_param(),
    "approval_timeout_hours": approval_timeout_param(),
}


@dag(
    dag_id=os.path.splitext(os.path.basename(__file__))[0],
    schedule=None,
    start_date=pendulum.datetime(2026, 1, 1, tz="UTC"),
    catchup=False,
    params=PARAMS,
    doc_md=__doc__,
    on_failure_callback=WebhookNotifier(),
    tags=["rebalance", "what-if"],
)
def rebalance_what_if() -> None:
    chain_steps(WHAT_IF, PARAMS)


rebalance_what_if()

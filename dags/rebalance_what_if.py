"""What-if rebalance, triggered by hand: what would a group's assignment be with more partitions or other members?

Takes the group's latest snapshot from the lake, applies the validated parameters (new partition counts for its
topics, members removed, new members subscribed to all its topics), stores the scenario as a snapshot of its own,
then plans, gates and publishes it like a nightly run (trigger `manual`), so it lands in the assignment history.
Kafka can only add partitions: a count below today's is rejected, as are unknown topics and unknown members.
"""

from __future__ import annotations

import os

import pendulum
from airflow.sdk import Param, dag, task

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
    "lake": Param("", type="string", description="lake root (default $REBALANCE_LAKE or ./lake)"),
}


def _config(params: dict):
    from jobs.config import Config

    return Config.from_env(strategies=params.get("strategies"), lake=params.get("lake"))


@dag(
    dag_id=os.path.splitext(os.path.basename(__file__))[0],
    schedule=None,
    start_date=pendulum.datetime(2026, 1, 1, tz="UTC"),
    catchup=False,
    params=PARAMS,
    doc_md=__doc__,
    tags=["rebalance", "what-if"],
)
def rebalance_what_if():
    @task
    def scenario(params=None, run_id=None) -> dict:
        from jobs.pipeline import what_if_step

        return what_if_step(
            _config(params),
            run_id,
            params["group"],
            partitions=params["partitions"],
            add_members=params["add_members"],
            remove_members=params["remove_members"],
            snapshot_id=params["snapshot_id"] or None,
        )

    @task
    def plan(scenario: dict, params=None, run_id=None) -> dict:
        from jobs.pipeline import plan_step

        return plan_step(_config(params), run_id, "manual")

    @task
    def gate(planned: dict, params=None, run_id=None) -> dict:
        from jobs.pipeline import gate_step

        return gate_step(_config(params), run_id)

    @task
    def publish(gated: dict, params=None, run_id=None) -> list:
        from jobs.pipeline import publish_step

        return publish_step(_config(params), run_id)

    publish(gate(plan(scenario())))


rebalance_what_if()

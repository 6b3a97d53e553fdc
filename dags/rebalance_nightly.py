"""Nightly rebalance plan: ingest consumer-group snapshots, measure key skew, plan every group, gate, publish.

Snapshots come from Kafka when `REBALANCE_KAFKA_BOOTSTRAP_SERVERS` (or `REBALANCE_KAFKA_CONN_ID`) is set, with key
samples of `REBALANCE_SAMPLE_TOPICS`; from snapshot files otherwise. Each task is one call into `jobs/`; tasks
share nothing but the lake (`REBALANCE_LAKE`, default `./lake`), keyed by the Airflow run id. The schedule comes
from `REBALANCE_NIGHTLY_SCHEDULE` (default 02:00 UTC daily). Parameters override the environment for one run:
`snapshots` (file, directory or glob of snapshot JSON), `strategies` (comma-separated assignors to evaluate),
`lake`, and `what_if` (partition counts the key-skew job compares with today's).
"""

from __future__ import annotations

import os

import pendulum
from airflow.sdk import Param, dag, task

PARAMS = {
    "snapshots": Param("", type="string", description="snapshot files: a path, directory or glob"),
    "strategies": Param("", type="string", description="assignors to evaluate, comma-separated"),
    "lake": Param("", type="string", description="lake root (default $REBALANCE_LAKE or ./lake)"),
    "what_if": Param("", type="string", pattern=r"^(\d+(-\d+(:\d+)?)?(,\d+(-\d+(:\d+)?)?)*)?$",
                     description="what-if partition counts for the key-skew job, e.g. 24,36 or 12-48:12"),
}


def _config(params: dict):
    from jobs.config import Config

    return Config.from_env(snapshots=params.get("snapshots"), strategies=params.get("strategies"),
                           lake=params.get("lake"), what_if=params.get("what_if"))


def _trigger(dag_run) -> str:
    return "scheduled" if str(dag_run.run_type).endswith("scheduled") else "manual"


@dag(
    dag_id=os.path.splitext(os.path.basename(__file__))[0],
    schedule=os.environ.get("REBALANCE_NIGHTLY_SCHEDULE", "0 2 * * *"),
    start_date=pendulum.datetime(2026, 1, 1, tz="UTC"),
    catchup=False,
    max_active_runs=1,
    params=PARAMS,
    doc_md=__doc__,
    tags=["rebalance"],
)
def rebalance_nightly():
    @task
    def ingest(params=None, run_id=None) -> dict:
        from jobs import ingest

        result = ingest.run(_config(params), run_id)
        return {"groups": result.groups, "quarantined": [source for source, _ in result.quarantined]}

    @task
    def skew(ingested: dict, params=None, run_id=None) -> dict:
        from jobs.pipeline import measure_skew
        from jobs.spark import get_spark

        config = _config(params)
        weights = measure_skew(get_spark(config.spark_master), config, run_id)
        return {"weighted_topics": sorted(weights)}

    @task
    def plan(skewed: dict, params=None, run_id=None, dag_run=None) -> dict:
        from jobs import plan
        from jobs.key_skew import partition_weights
        from jobs.lake import Lake
        from jobs.spark import get_spark

        config = _config(params)
        return plan.run(get_spark(config.spark_master), config, run_id, trigger=_trigger(dag_run),
                        weights=partition_weights(Lake(config.lake), run_id))

    @task
    def gate(planned: dict, params=None, run_id=None) -> dict:
        from jobs import gate
        from jobs.spark import get_spark

        config = _config(params)
        return gate.run(get_spark(config.spark_master), config, run_id)

    @task
    def publish(gated: dict, params=None, run_id=None) -> list:
        from jobs import publish

        report = publish.run(_config(params), run_id)
        print(publish.format_report(report))
        return [{k: r[k] for k in ("group_id", "generation_id", "status")} for r in report]

    publish(gate(plan(skew(ingest()))))


rebalance_nightly()

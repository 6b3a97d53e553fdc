"""`rebalance demo`: the nightly DAG run once by Airflow (`airflow dags test`), live or on bundled files.

Live (the default): Apache Kafka (KRaft, one node) on 127.0.0.1 with keyed, skewed traffic and real
consumer groups (kafka-python with every assignor, static members, a librdkafka member); the DAG pulls their
snapshots from it. With `--files`: the bundled snapshot files of jobs/demo/data, one of them malformed.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path
from urllib.parse import unquote

from jobs.config import Config
from jobs.io.airflow_env import configure, migrate_once
from jobs.io.lake import Lake
from jobs.io.spark import get_spark
from jobs.steps.history import register, text_table
from schemas.status import GenerationStatus

DEMO_SNAPSHOTS = Path(__file__).with_name("data")

HISTORY_SQL = f"""
SELECT group_id, count(*) AS generations, max(generation_id) AS latest,
       sum(CAST(status = '{GenerationStatus.APPROVED}' AS INT)) AS approved
FROM generations GROUP BY group_id ORDER BY group_id
"""


def run_demo(config: Config, live: bool = True) -> int:
    """Run the DAG, then print the approved generations and a history query; the exit code is the DAG's."""
    home = configure()
    migrate_once(home)
    lake = str(Path(config.lake).resolve())
    env = {**os.environ, "REBALANCE_LAKE": lake}
    if not live:
        env.pop("REBALANCE_KAFKA_BOOTSTRAP_SERVERS", None)
        env.setdefault("REBALANCE_SNAPSHOTS", str(DEMO_SNAPSHOTS))
        code = _dag_test(env, home, f"snapshots {env['REBALANCE_SNAPSHOTS']}")
    else:
        from jobs.demo import cluster as demo_cluster

        started = time.monotonic()
        print("starting an embedded Kafka broker with keyed traffic and live consumer groups ...")
        with demo_cluster.broker() as broker:
            with demo_cluster.running(bootstrap=broker.bootstrap) as cluster:
                print(
                    f"broker on {cluster.bootstrap} (pid {broker.pid}): topics {cluster.topics}, groups "
                    f"{sorted(cluster.groups)}; ready in {time.monotonic() - started:.1f} s"
                )
                env |= {
                    "REBALANCE_KAFKA_BOOTSTRAP_SERVERS": cluster.bootstrap,
                    "REBALANCE_SAMPLE_TOPICS": ",".join(cluster.topics),
                }
                code = _dag_test(env, home, f"Kafka at {cluster.bootstrap}")
            if not code:
                from jobs.demo.apply import apply_demo

                print("\nApplying one approved plan to its live group (PlannedAssignor), then verifying it:")
                print(apply_demo(broker.bootstrap, lake))
        print("broker and consumer groups stopped")
    if code:
        return code
    spark = get_spark(config.spark_master)
    register(spark, Lake(lake))  # the views read the lake's files as they are now
    latest = "(SELECT run_id FROM generations ORDER BY created_at DESC LIMIT 1)"
    print("\nApproved generations of this run:")
    print(
        text_table(
            spark,
            f"SELECT group_id, generation_id, chosen_strategy, gate_summary FROM generations "
            f"WHERE status = '{GenerationStatus.APPROVED}' AND run_id = {latest} ORDER BY group_id",
        )
    )
    print("\nCandidates of this run (the chosen one: best max/mean load, then fewest moves):")
    print(
        text_table(
            spark,
            f"SELECT group_id, strategy, members, partitions, count_spread, "
            f"round(max_mean_load, 3) AS max_mean_load, partitions_moved, round(stickiness, 3) AS "
            f"stickiness, chosen FROM plan_metrics m JOIN (SELECT DISTINCT group_id, generation_id "
            f"FROM generations WHERE run_id = {latest}) USING (group_id, generation_id) "
            f"ORDER BY group_id, strategy",
        )
    )
    print("\nLag per group:")
    print(
        text_table(
            spark,
            f"SELECT group_id, count(*) AS partitions, sum(lag) AS lag FROM partition_offsets "
            f"WHERE snapshot_id = {latest} GROUP BY group_id ORDER BY group_id",
        )
    )
    print("\nQuarantined input of this run:")
    print(text_table(spark, f"SELECT source, error FROM quarantine WHERE run_id = {latest} ORDER BY source"))
    print(f"\nHistory (Spark SQL):{HISTORY_SQL}")
    print(text_table(spark, HISTORY_SQL))
    print("\nReports (open in a browser; they work offline):")
    reports = Path(lake) / "reports"
    for group in sorted(p for p in reports.iterdir() if p.is_dir()) if reports.is_dir() else []:
        pages = sorted(group.glob("generation-*.html"), key=lambda p: int(p.stem.split("-")[1]))
        if pages:
            print(f"report {unquote(group.name)}: {pages[-1]}")
    return 0


def _dag_test(env: dict[str, str], home: Path, source: str) -> int:
    """`airflow dags test rebalance_nightly` in a child process, its log kept in Airflow's home."""
    log = home / "demo-dag-test.log"
    print(f"airflow dags test rebalance_nightly ({source}, lake {env['REBALANCE_LAKE']}; log {log})")
    started = time.monotonic()
    with open(log, "w") as out:
        dag = subprocess.run(
            [sys.executable, "-m", "airflow", "dags", "test", "rebalance_nightly"],
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    print(f"DAG run {'succeeded' if dag.returncode == 0 else 'FAILED'} in {time.monotonic() - started:.1f} s")
    if dag.returncode:
        print(log.read_text()[-4000:])
    return dag.returncode

"""`rebalance demo`: the nightly DAG run once by Airflow (`airflow dags test`), live or on bundled files.

Live (the default): Apache Kafka (KRaft, one node) on 127.0.0.1 with keyed, skewed traffic and real
consumer groups (kafka-python with every assignor, static members, a librdkafka member); the DAG pulls their
snapshots from it. Then one approved plan goes through each applier, each verified on a fresh snapshot: kafka-python
members (PlannedAssignor), Java consumer processes (the consumer jar's PlannedAssignor) and a KIP-848 group assigned by
the broker (the broker jar's PlannedGroupAssignor, on the demo broker's classpath). With `--files`: the bundled
snapshot files of jobs/demo/data, one of them malformed.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import unquote

from jobs.airflow.environment import configure, migrate_once
from jobs.cli.history import queries
from jobs.config import Config
from jobs.io import kafka_broker
from jobs.io.kafka_broker import Broker
from jobs.io.lake import Lake
from jobs.io.spark import get_spark
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
        plan_dir = Path(lake) / "plans" / "broker"  # the broker plugin's rebalance.plan.dir
        with _broker(plan_dir) as (broker, java):
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
                _apply(broker, lake, plan_dir, java)
        print("broker and consumer groups stopped")
    if code:
        return code
    latest = "(SELECT run_id FROM generations ORDER BY created_at DESC LIMIT 1)"
    questions = {
        "Approved generations of this run:": (
            f"SELECT group_id, generation_id, chosen_strategy, gate_summary FROM generations "
            f"WHERE status = '{GenerationStatus.APPROVED}' AND run_id = {latest} ORDER BY group_id"
        ),
        "Candidates of this run (the chosen one: best max/mean load, then fewest moves):": (
            f"SELECT group_id, strategy, members, partitions, count_spread, "
            f"round(max_mean_load, 3) AS max_mean_load, partitions_moved, round(stickiness, 3) AS "
            f"stickiness, chosen FROM plan_metrics m JOIN (SELECT DISTINCT group_id, generation_id "
            f"FROM generations WHERE run_id = {latest}) USING (group_id, generation_id) "
            f"ORDER BY group_id, strategy"
        ),
        "Lag per group:": (
            f"SELECT group_id, count(*) AS partitions, sum(lag) AS lag FROM partition_offsets "
            f"WHERE snapshot_id = {latest} GROUP BY group_id ORDER BY group_id"
        ),
        "Quarantined input of this run:": (
            f"SELECT source, error FROM quarantine WHERE run_id = {latest} ORDER BY source"
        ),
        f"History (Spark SQL):{HISTORY_SQL}": HISTORY_SQL,
    }
    # One session; the tables these queries read registered once, as they are now (`queries`).
    answers = queries(get_spark(config.spark_master), Lake(lake), list(questions.values()))
    for title, text in zip(questions, answers, strict=True):
        print(f"\n{title}")
        print(text)
    print("\nReports (open in a browser; they work offline):")
    reports = Path(lake) / "reports"
    for group in sorted(p for p in reports.iterdir() if p.is_dir()) if reports.is_dir() else []:
        pages = sorted(group.glob("generation-*.html"), key=lambda p: int(p.stem.split("-")[1]))
        if pages:
            print(f"report {unquote(group.name)}: {pages[-1]}")
    return 0


@contextlib.contextmanager
def _broker(plan_dir: Path) -> Iterator[tuple[Broker, bool]]:
    """The demo's broker, with the plan appliers' broker plugin when their jars are there or can be built (then
    True); without them only the kafka-python applier runs."""
    from jobs.demo import cluster as demo_cluster
    from jobs.demo import java_members

    try:
        java_members.applier_jars()
    except demo_cluster.DemoClusterError as e:
        print(f"the Java plan appliers are skipped: {e}")
        with kafka_broker.broker() as plain:
            yield plain, False
        return
    plan_dir.mkdir(parents=True, exist_ok=True)
    with java_members.planned_broker(plan_dir) as broker:
        yield broker, True


def _apply(broker: Broker, lake: str, plan_dir: Path, java: bool) -> None:
    """One approved plan through each applier, each verified on a snapshot pulled afterwards."""
    from jobs.demo.apply import apply_demo, apply_demo_broker, apply_demo_java
    from jobs.demo.java_members import broker_log

    print("\nApplying approved plans to their live groups, one through each applier, then verifying each:")
    print("\n1. kafka-python members, jobs.apply.PlannedAssignor:")
    print(apply_demo(broker.bootstrap, lake))
    if not java:
        return
    print("\n2. Java consumers, the PlannedAssignor of jvm/planned-assignor's consumer jar:")
    print(apply_demo_java(broker.bootstrap, lake))
    print("\n3. A KIP-848 group, assigned by the broker: PlannedGroupAssignor of the broker jar:")
    print(apply_demo_broker(broker.bootstrap, lake, plan_dir, broker_log(broker)))


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

"""`rebalance demo`: the nightly DAG run once by Airflow (`airflow dags test`) on the bundled snapshots."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

from jobs.airflow_env import configure, migrate_once
from jobs.config import Config
from jobs.history import query

DEMO_SNAPSHOTS = Path(__file__).with_name("demo_data")

HISTORY_SQL = """
SELECT group_id, count(*) AS generations, max(generation_id) AS latest,
       sum(CAST(status = 'approved' AS INT)) AS approved
FROM generations GROUP BY group_id ORDER BY group_id
"""


def run_demo(config: Config) -> int:
    """Run the DAG, then print the approved generations and a history query; the exit code is the DAG's."""
    home = configure()
    migrate_once(home)
    lake = str(Path(config.lake).resolve())
    env = {**os.environ, "REBALANCE_LAKE": lake, "REBALANCE_SNAPSHOTS": os.environ.get(
        "REBALANCE_SNAPSHOTS", str(DEMO_SNAPSHOTS))}
    log = home / "demo-dag-test.log"
    print(f"airflow dags test rebalance_nightly (snapshots {env['REBALANCE_SNAPSHOTS']}, lake {lake}; log {log})")
    started = time.monotonic()
    with open(log, "w") as out:
        dag = subprocess.run([sys.executable, "-m", "airflow", "dags", "test", "rebalance_nightly"],
                             env=env, stdout=out, stderr=subprocess.STDOUT)
    print(f"DAG run {'succeeded' if dag.returncode == 0 else 'FAILED'} in {time.monotonic() - started:.1f} s")
    if dag.returncode:
        print(log.read_text()[-4000:])
        return dag.returncode
    config = config.with_overrides(lake=lake)
    latest = "(SELECT run_id FROM generations ORDER BY created_at DESC LIMIT 1)"
    print("\nApproved generations of this run:")
    print(query(config, f"SELECT group_id, generation_id, chosen_strategy, gate_summary FROM generations "
                        f"WHERE status = 'approved' AND run_id = {latest} ORDER BY group_id"))
    print("\nQuarantined input of this run:")
    print(query(config, f"SELECT source, error FROM quarantine WHERE run_id = {latest} ORDER BY source"))
    print(f"\nHistory (Spark SQL):{HISTORY_SQL}")
    print(query(config, HISTORY_SQL))
    return 0

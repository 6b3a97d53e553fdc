"""Airflow settings for running this project's DAGs locally: set before `airflow` is first imported."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
DAGS_FOLDER = REPO / "dags"
# [scheduler] scheduler_idle_sleep_time: a scheduler loop that found nothing to do sleeps this long, and a task whose
# upstream just ended waits for the next loop. Airflow's 1 s cost each DAG run about 2 s over its tasks; at 0.2 s the
# demo fleet's nightly took 21.1-22.8 s instead of 23.6-24.3 and the what-if reached its approval in 15.4-16.9 s
# instead of 18.0-18.5, for 0.11 of a core while idle instead of 0.03 (bench/scheduler.py --idle-sleep).
SCHEDULER_IDLE_SLEEP = "0.2"


def configure(home: Path | None = None) -> Path:
    """Point Airflow at a home inside the repo (git-ignored) and this project's dags folder; returns the home."""
    home = Path(os.environ.get("AIRFLOW_HOME") or home or REPO / ".airflow")
    home.mkdir(parents=True, exist_ok=True)
    defaults = {
        "AIRFLOW_HOME": str(home),
        "AIRFLOW__CORE__DAGS_FOLDER": str(DAGS_FOLDER),
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
        "AIRFLOW__CORE__DAGS_ARE_PAUSED_AT_CREATION": "False",
        "AIRFLOW__CORE__PARALLELISM": "2",
        "AIRFLOW__CORE__MAX_ACTIVE_TASKS_PER_DAG": "2",
        "AIRFLOW__SCHEDULER__SCHEDULER_IDLE_SLEEP_TIME": SCHEDULER_IDLE_SLEEP,
        "AIRFLOW__API__HOST": "127.0.0.1",
        "AIRFLOW__LOGGING__LOGGING_LEVEL": "WARNING",
        "GX_ANALYTICS_ENABLED": "false",
    }
    for key, value in defaults.items():
        os.environ.setdefault(key, value)
    return home


def migrate_once(home: Path) -> None:
    """Create or upgrade Airflow's metadata database the first time (a marker file remembers it)."""
    marker = home / ".migrated"
    if not marker.exists():
        subprocess.run(
            [sys.executable, "-m", "airflow", "db", "migrate"],
            check=True,
            env=os.environ.copy(),
            stdout=subprocess.DEVNULL,
        )
        marker.touch()

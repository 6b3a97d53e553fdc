"""The step contract: the run context every step receives (configuration, run id, trigger, the lake, and a lazily
started Spark session) and the `StepResult` every step returns.

One context serves a whole `rebalance run` (or one Airflow task): the lake's tables are created once when it is
built, and Spark starts when a step first asks for it (ingest and publish never do), or in the background from
`start_spark`. Building it checks what would otherwise fail half-way: Java, when this process will start a Spark
driver (not for Spark Connect, not when a session is given). It holds its run id's lock for its life, so a second
run given the same id waits for this one.
"""

from __future__ import annotations

import os
import shutil
import weakref
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any
from uuid import uuid4

from jobs.config import Config
from jobs.io.lake import Lake, failures_named
from planner.errors import SourceError

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from jobs.io.gx_worker import GxWorker


def new_run_id(trigger: str = "manual") -> str:
    """A run id in Airflow's style plus a random suffix, unique even for runs started in the same millisecond."""
    return f"{trigger}__{datetime.now(UTC).isoformat(timespec='milliseconds')}_{uuid4().hex[:8]}"


@dataclass(frozen=True)
class StepResult:
    """What a step did, small and in JSON's types for XCom: a row per group it touched (per topic for skew, per table
    for maintain), what it tells a person, the inputs it set aside, and the alarms that fail its run."""

    rows: tuple[dict[str, Any], ...] = ()
    text: str = ""  # printed when the step ends: in `rebalance run`'s output, in the Airflow task's log
    quarantined: tuple[tuple[str, str], ...] = ()  # (source, reason) of each input kept whole in `quarantine`
    alarms: tuple[str, ...] = ()  # fail the run once everything is written (a rejected generation, a drifted plan)

    @property
    def groups(self) -> list[str]:
        """The group of each row, in order (the ingest step's: the groups ingested)."""
        return [r["group_id"] for r in self.rows]

    def as_json(self) -> dict[str, Any]:
        """The result in JSON's own types (lists, not tuples), as an XCom stores it without stringifying."""
        return {
            "rows": list(self.rows),
            "text": self.text,
            "quarantined": [list(q) for q in self.quarantined],
            "alarms": list(self.alarms),
        }

    def by_group(self, column: str) -> dict[str, Any]:
        """group id -> `column` of its row: the plan step's generation ids, the gate's verdicts, the report's pages."""
        return {r["group_id"]: r[column] for r in self.rows}


@dataclass
class RunContext:
    """What a step needs; `spark` starts the session on first use (Spark Connect when configured)."""

    config: Config
    run_id: str
    trigger: str = "manual"
    # A run of one group (a what-if): its steps plan and gate it in this process, so its new session runs its few
    # hundred rows' queries interpreted (`jobs.io.spark.ONE_GROUP_CONF`), a new driver has no Delta connector (its
    # steps read Parquet files: `get_spark`'s `delta`) and, on a cluster or a Connect server, checks only that the
    # executors see the lake: a first Python task there starts a Python worker for the session, seconds of a
    # what-if meant to answer in a few.
    one_group: bool = False
    # Spark serves the plan step alone (`rebalance run`: the steps after it run in Python): a plan run in this process
    # stops the driver JVM it started once the rows are read, so the JVM's memory is back before the kernel's peak.
    spark_until_plan: bool = False
    lake: Lake = field(init=False)
    _spark: SparkSession | None = field(default=None, repr=False)
    _starting: Future[SparkSession] | None = field(default=None, init=False, repr=False)
    _owns_jvm: bool = field(default=False, init=False, repr=False)  # the driver JVM is this context's to stop
    # A what-if's Great Expectations process, started by `jobs.pipeline.warm_up`: the gate validates there.
    gx_worker: GxWorker | None = field(default=None, init=False, repr=False)

    def __post_init__(self) -> None:
        if self._spark is None:
            check_java()
        self.lake = Lake(self.config.lake)
        # Released when the context is collected or the process ends (the kernel drops the flock of a dead one).
        weakref.finalize(self, self.lake.run_lock(self.run_id).release)
        with self.lake.lock(), failures_named(f"lake {self.lake.root}: creating its tables"):
            self.lake.create_all()

    @property
    def spark(self) -> SparkSession:
        if self._spark is None:
            self.start_spark()
            assert self._starting is not None
            self._spark = self._starting.result()
        return self._spark

    def start_spark(self) -> None:
        """Start the session in a background thread: the JVM takes seconds to start, and `rebalance run` ingests
        (pure Python) meanwhile; the first step that needs Spark waits for it (and gets any error it raised)."""
        if self._spark is None and self._starting is None:
            from pyspark import SparkContext

            from jobs.io.spark import SparkSettings, get_spark, prepare_logs

            # A session already in this process (a test's, the demo's) is returned by getOrCreate: not ours.
            self._owns_jvm = SparkContext._active_spark_context is None and not SparkSettings.from_env().remote
            prepare_logs()  # on this thread: pyspark's loggers are made before a second thread runs
            pool = ThreadPoolExecutor(1, thread_name_prefix="spark-start")
            self._starting = pool.submit(self._session, get_spark)
            pool.shutdown(wait=False)

    def _session(self, get_spark: Callable[..., SparkSession]) -> SparkSession:
        """A new session; on a cluster or a Connect server, checked first: its executors run the kernels' Python
        (unless no step here runs Python on them) and see the lake (`jobs.io.spark_preflight`)."""
        from jobs.io.spark import ONE_GROUP_CONF, SparkSettings
        from jobs.io.spark_preflight import check_executors, check_lake

        settings = SparkSettings.from_env(master=self.config.spark_master)
        if self.one_group:  # the environment's settings still come last
            settings = replace(settings, conf=(*ONE_GROUP_CONF.items(), *settings.conf))
        spark = get_spark(settings, delta=not self.one_group)
        if not settings.is_local:
            local = str(self.lake.local) if self.lake.local is not None else None
            check = check_lake if self.one_group else check_executors
            check(spark, settings.remote or settings.master, local)
        return spark

    @property
    def reports_dir(self) -> Path:
        """Where report pages go: `REBALANCE_REPORTS`, else `<lake>/reports` for a local lake and `./reports` (in the
        working directory) for a lake on S3: pages are opened from a local disk."""
        if self.config.reports:
            return Path(self.config.reports)
        return self.lake.local / "reports" if self.lake.local else Path("reports").resolve()

    @property
    def embedded(self) -> bool:
        """True when Spark runs in this process (`local`) or was given: no executors elsewhere to check."""
        from jobs.io.spark import SparkSettings

        return self._spark is not None or SparkSettings.from_env(master=self.config.spark_master).is_local

    def stop_spark(self) -> None:
        """Stop the driver JVM this context started, to free its memory; a session it was given or found running in
        the process, and a Spark Connect one (its JVM is elsewhere), are left as they are."""
        if self._starting is None or not self._owns_jvm:
            return
        self.settle()
        if self._starting.exception() is None:
            from jobs.io.spark import stop_spark

            stop_spark(self._starting.result())
        self._spark, self._starting, self._owns_jvm = None, None, False

    def stop_gx_worker(self) -> None:
        """End the Great Expectations process `warm_up` started, if any (again: nothing)."""
        if self.gx_worker is not None:
            self.gx_worker.close()
            self.gx_worker = None

    def settle(self) -> None:
        """Wait for a background start to finish, ignoring its outcome: a run that fails before it needs Spark
        prints its error after the JVM's start-up lines, as the last line."""
        if self._starting is not None:
            wait([self._starting])

    @classmethod
    def create(
        cls,
        config: Config,
        run_id: str | None = None,
        *,
        trigger: str = "manual",
        spark: SparkSession | None = None,
        one_group: bool = False,
    ) -> RunContext:
        """A context for `run_id` (a new unique id when None), optionally on an existing Spark session; `one_group`:
        the run plans one group (see the field)."""
        return cls(config, run_id or new_run_id(trigger), trigger, one_group, _spark=spark)


def check_java() -> None:
    """Fail before anything is written when this process would start a Spark driver without a Java to run it.

    pyspark launches `$JAVA_HOME/bin/java` when JAVA_HOME is set, else `java` from PATH (Spark's spark-class script);
    a Spark Connect session (REBALANCE_SPARK_REMOTE) runs its JVM elsewhere and needs none here.
    """
    from jobs.io.spark import SparkSettings

    if SparkSettings.from_env().remote:
        return
    home = os.environ.get("JAVA_HOME")
    if home:
        java = os.path.join(home, "bin", "java")
        if not os.access(java, os.X_OK):
            raise SourceError(f"Java not found: JAVA_HOME is {home!r} but {java} is not an executable (Spark needs it)")
    elif shutil.which("java") is None:
        raise SourceError("Java not found: no `java` on PATH and JAVA_HOME is not set (Spark needs Java 17 or later)")

"""The run context every step receives: configuration, run id, trigger, the lake, and a lazily started Spark session.

One context serves a whole `rebalance run` (or one Airflow task): the lake's tables are created once when it is
built, and Spark starts only when a step first asks for it (ingest and publish never do).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING
from uuid import uuid4

from jobs.config import Config
from jobs.io.lake import Lake

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


def new_run_id(trigger: str = "manual") -> str:
    """A run id in Airflow's style plus a random suffix, unique even for runs started in the same millisecond."""
    return f"{trigger}__{datetime.now(UTC).isoformat(timespec='milliseconds')}_{uuid4().hex[:8]}"


@dataclass
class RunContext:
    """What a step needs; `spark` starts the session on first use (Spark Connect when configured)."""

    config: Config
    run_id: str
    trigger: str = "manual"
    lake: Lake = field(init=False)
    _spark: SparkSession | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        self.lake = Lake(self.config.lake)
        self.lake.create_all()

    @property
    def spark(self) -> SparkSession:
        if self._spark is None:
            from jobs.io.spark import get_spark

            self._spark = get_spark(self.config.spark_master)
        return self._spark

    @classmethod
    def create(
        cls, config: Config, run_id: str | None = None, *, trigger: str = "manual", spark: SparkSession | None = None
    ) -> RunContext:
        """A context for `run_id` (a new unique id when None), optionally on an existing Spark session."""
        return cls(config, run_id or new_run_id(trigger), trigger, _spark=spark)

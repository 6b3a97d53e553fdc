"""Pipeline configuration: environment variables with embedded defaults, so a fresh clone runs as it is."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, fields, replace
from typing import Any

ENV_PREFIX = "REBALANCE_"

RETENTION_DAYS = 7
"""Default of `rebalance maintain --retention-days` (and the maintenance DAG): VACUUM keeps the files older
versions need this long, so time travel reaches this far back; Delta's own default (`interval 1 week`)."""
BULKY_RETENTION_DAYS = 30
"""Default of `--bulky-retention-days`: plans, loads, key samples and the like of older generations and runs are
deleted (`jobs.tables.expiry`); the generations themselves stay."""


@dataclass(frozen=True)
class Config:
    """Settings shared by every step; each field is read from REBALANCE_<FIELD> (upper case).

    Kafka connection settings live apart, in `jobs.io.kafka_settings` (they carry secrets).
    """

    lake: str = "./lake"
    spark_master: str = "local[*]"
    snapshots: str = ""
    strategies: tuple[str, ...] = ("range", "roundrobin", "sticky", "cooperative-sticky", "balanced-load")
    group_pattern: str = "*"
    sample_topics: tuple[str, ...] = ()
    sample_records: int = 1000
    what_if: str = ""
    reports: str = ""  # report directory (default <lake>/reports)
    load_source: str = "auto"  # what weighs a partition when planning (jobs.kernels.loads.MODES)

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None, **overrides: Any) -> Config:
        """Read REBALANCE_* variables, then apply explicit overrides (DAG params, CLI flags)."""
        env = os.environ if env is None else env
        values = {
            f.name: env[ENV_PREFIX + f.name.upper()]
            for f in fields(cls)
            if env.get(ENV_PREFIX + f.name.upper(), "") != ""
        }
        return cls().with_overrides(**values).with_overrides(**overrides)

    def with_overrides(self, **overrides: Any) -> Config:
        """A copy with the given non-empty overrides, parsed to each field's type (lists from "a,b,c")."""
        clean: dict[str, Any] = {}
        for name, value in overrides.items():
            if value in (None, "", [], ()):
                continue
            default = getattr(self, name)
            if isinstance(default, tuple):
                clean[name] = (
                    tuple(s.strip() for s in value.split(",") if s.strip()) if isinstance(value, str) else tuple(value)
                )
            elif isinstance(default, int):
                clean[name] = int(value)
            else:
                clean[name] = value
        return replace(self, **clean)

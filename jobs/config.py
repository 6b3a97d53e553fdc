"""Pipeline configuration: environment variables with embedded defaults, so a fresh clone runs as it is."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

ENV_PREFIX = "REBALANCE_"


@dataclass(frozen=True)
class Config:
    """Settings shared by every step; each field is read from REBALANCE_<FIELD> (upper case)."""

    lake: str = "./lake"
    spark_master: str = "local[*]"
    snapshots: str = ""
    strategies: tuple[str, ...] = ("range", "roundrobin", "sticky", "cooperative-sticky")
    group_pattern: str = "*"

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None, **overrides: Any) -> Config:
        """Read REBALANCE_* variables, then apply explicit overrides (DAG params, CLI flags)."""
        env = os.environ if env is None else env
        values: dict[str, Any] = {}
        for name in ("lake", "spark_master", "snapshots", "group_pattern"):
            if (v := env.get(ENV_PREFIX + name.upper())) not in (None, ""):
                values[name] = v
        if strategies := env.get(ENV_PREFIX + "STRATEGIES"):
            values["strategies"] = _split(strategies)
        config = cls(**values)
        return config.with_overrides(**overrides)

    def with_overrides(self, **overrides: Any) -> Config:
        """A copy with the given non-empty overrides; a comma-separated string is accepted for strategies."""
        clean = {k: v for k, v in overrides.items() if v not in (None, "", [], ())}
        if isinstance(clean.get("strategies"), str):
            clean["strategies"] = _split(clean["strategies"])
        elif "strategies" in clean:
            clean["strategies"] = tuple(clean["strategies"])
        return replace(self, **clean)


def _split(text: str) -> tuple[str, ...]:
    return tuple(s.strip() for s in text.split(",") if s.strip())

"""Yes/no settings from the environment, read alike by the DAG files (at parse time) and by the steps."""

from __future__ import annotations

import os
from collections.abc import Mapping

from planner.errors import InputError

APPROVAL = "REBALANCE_APPROVAL"
"""When true, a generation that passes the gate waits for a person's review (status gated) instead of approval."""

APPROVAL_TIMEOUT = "REBALANCE_APPROVAL_TIMEOUT_HOURS"
"""Hours a plan waits for its reviewer before the approval step rejects it (default 23: before the next night)."""
DEFAULT_APPROVAL_TIMEOUT_HOURS = 23.0

_TRUE = frozenset({"1", "true", "yes", "on"})
_FALSE = frozenset({"", "0", "false", "no", "off"})


def env_flag(name: str, env: Mapping[str, str] | None = None) -> bool:
    """The variable `name` as a boolean (unset: false); anything but true/false, yes/no, on/off, 1/0 is an error."""
    value = (os.environ if env is None else env).get(name, "").strip().lower()
    if value in _TRUE:
        return True
    if value in _FALSE:
        return False
    raise InputError(f"{name}: expected true or false, got {value!r}")


def env_hours(name: str, default: float, env: Mapping[str, str] | None = None) -> float:
    """The variable `name` as a positive number of hours (unset or empty: `default`)."""
    value = (os.environ if env is None else env).get(name, "").strip()
    if not value:
        return default
    try:
        hours = float(value)
    except ValueError:
        hours = float("nan")
    if not 0 < hours < float("inf"):
        raise InputError(f"{name}: expected a positive number of hours, got {value!r}")
    return hours

"""Yes/no settings from the environment, read alike by the DAG files (at parse time) and by the steps."""

from __future__ import annotations

import os
from collections.abc import Mapping

from planner.errors import InputError

APPROVAL = "REBALANCE_APPROVAL"
"""When true, a generation that passes the gate waits for a person's review (status gated) instead of approval."""

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

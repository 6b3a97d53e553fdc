"""The JSON Schema of snapshot files (the snapshot-file contract, README "Snapshot files")."""

from __future__ import annotations

import json
from functools import cache
from importlib import resources
from typing import Any


@cache
def snapshot_schema() -> dict[str, Any]:
    """The snapshot-file JSON Schema (draft 2020-12), loaded once from schemas/snapshot.schema.json."""
    schema: dict[str, Any] = json.loads(
        resources.files("schemas").joinpath("snapshot.schema.json").read_text(encoding="utf-8")
    )
    return schema

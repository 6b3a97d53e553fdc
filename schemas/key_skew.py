"""Tables of the key-skew job (`jobs.key_skew`); declare them with `schemas.spec.table`.

`schemas.tables` imports SKEW_TABLES from here, so import only from `schemas.spec` (not `schemas.tables`).
"""

from __future__ import annotations

from schemas.spec import TableSpec

SKEW_TABLES: list[TableSpec] = []

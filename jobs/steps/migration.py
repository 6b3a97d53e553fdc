"""Migration readiness: for every classic group planned in a run, what moving it to `group.protocol=consumer`
(KIP-848) would change (`planner.migration`), stored per generation in `migration_readiness`."""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from jobs.context import RunContext, StepResult
from jobs.io.lake import rows_table
from jobs.tables.snapshot_docs import run_generations, snapshot_documents
from planner.errors import InputError
from planner.group_protocol import group_type
from planner.migration import DEFAULT_MAX_SIZE, DEFAULT_POLICY, Policy, Readiness, readiness

POLICY_VARIABLE = "REBALANCE_MIGRATION_POLICY"  # the brokers' group.consumer.migration.policy
MAX_SIZE_VARIABLE = "REBALANCE_CONSUMER_GROUP_MAX_SIZE"  # the brokers' group.consumer.max.size
POLICIES: tuple[Policy, ...] = ("bidirectional", "upgrade", "downgrade", "disabled")


def broker_settings(environ: Mapping[str, str] | None = None) -> tuple[Policy, int]:
    """The brokers' migration policy and consumer group size limit, from the environment (Kafka's defaults)."""
    environ = os.environ if environ is None else environ
    given = (environ.get(POLICY_VARIABLE) or DEFAULT_POLICY).strip().lower()
    policy = next((p for p in POLICIES if p == given), None)
    if policy is None:
        raise InputError(f"{POLICY_VARIABLE}: {given!r} is not one of {', '.join(POLICIES)}")
    size = (environ.get(MAX_SIZE_VARIABLE) or str(DEFAULT_MAX_SIZE)).strip()
    if not (size.isascii() and size.isdigit() and 0 < int(size) <= DEFAULT_MAX_SIZE):
        raise InputError(f"{MAX_SIZE_VARIABLE}: must be an integer from 1 to {DEFAULT_MAX_SIZE}, got {size!r}")
    return policy, int(size)


def run(ctx: RunContext) -> StepResult:
    """Readiness of each classic group of snapshot `ctx.run_id` with a generation; a row per group: ready."""
    policy, max_size = broker_settings()
    generations = run_generations(ctx.lake, ctx.run_id)
    rows, out = [], []
    for group_id, doc in snapshot_documents(ctx.lake, ctx.run_id, set(generations)).items():
        if group_type(doc) != "classic":
            continue
        r = readiness(doc, policy=policy, max_size=max_size)
        rows.append(_row(r, generations[group_id], ctx.run_id))
        out.append({"group_id": group_id, "ready": r.ready})
    ctx.lake.merge("migration_readiness", rows_table("migration_readiness", rows))
    return StepResult(tuple(out))


def _row(r: Readiness, generation_id: int, snapshot_id: str) -> dict[str, Any]:
    return {
        "generation_id": generation_id,
        "group_id": r.group_id,
        "snapshot_id": snapshot_id,
        "client_assignor": r.client_assignor,
        "server_assignor": r.server_assignor,
        "ready": r.ready,
        "blockers": list(r.blockers),
        "warnings": list(r.warnings),
        "partitions": r.partitions,
        "partitions_moved": len(r.moves),
        "moves": [{"topic": t, "partition": p, "from_member": a, "to_member": b} for t, p, a, b in r.moves],
    }

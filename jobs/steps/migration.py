"""Migration readiness: for every classic group planned in a run, what moving it to `group.protocol=consumer`
(KIP-848) would change (`planner.migration`), stored per generation in `migration_readiness`."""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Iterator, Mapping
from functools import partial
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from jobs.context import RunContext, StepResult
from jobs.io.lake import rows_table
from jobs.kernels.group_spec import BATCH_COLUMNS, GroupBatch, bounds
from jobs.tables.snapshot_docs import documents, run_generations, snapshot_rows
from planner.errors import InputError
from planner.group_protocol import group_type
from planner.migration import DEFAULT_MAX_SIZE, DEFAULT_POLICY, Policy, Readiness, Upgrade, assess

POLICY_VARIABLE = "REBALANCE_MIGRATION_POLICY"  # the brokers' group.consumer.migration.policy
MAX_SIZE_VARIABLE = "REBALANCE_CONSUMER_GROUP_MAX_SIZE"  # the brokers' group.consumer.max.size
POLICIES: tuple[Policy, ...] = ("bidirectional", "upgrade", "downgrade", "disabled")
PART_ROWS = 25_000  # member rows assessed at once (`group_parts`): 10,000 groups hold 275,000


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
    snapshot, counts = snapshot_rows(ctx.lake, ctx.run_id, set(generations))
    rows, out = [], []
    for part in group_parts(snapshot, PART_ROWS):
        for r in readiness_by_group(documents(part, counts), part, counts, policy=policy, max_size=max_size):
            rows.append(_row(r, generations[r.group_id], ctx.run_id))
            out.append({"group_id": r.group_id, "ready": r.ready})
    ctx.lake.merge("migration_readiness", rows_table("migration_readiness", rows))
    return StepResult(tuple(out))


def group_parts(rows: pa.Table, limit: int) -> Iterator[pa.Table]:
    """`rows` (sorted by group) in slices of whole groups of about `limit` rows at most (a larger group alone), in
    order: each part's documents and arrays are built and assessed alone, so the step's memory is a part's and the
    rows' (10,000 groups at once: 1.94 GB, the run's peak)."""
    starts, ends = bounds(rows.column("group_id"))
    first = 0
    for g in range(len(starts)):
        if ends[g] - starts[first] > limit and g > first:
            yield rows.slice(starts[first], starts[g] - starts[first])
            first = g
    if len(starts):
        yield rows.slice(starts[first], ends[-1] - starts[first])


def readiness_by_group(
    docs: Mapping[str, Mapping[str, Any]],
    rows: pa.Table,
    counts: Mapping[str, int],
    *,
    policy: Policy = DEFAULT_POLICY,
    max_size: int = DEFAULT_MAX_SIZE,
) -> list[Readiness]:
    """`planner.migration.readiness` of each classic group of `docs` (documents without partition lists,
    `jobs.tables.snapshot_docs`), by group id: the partition lists are read from the groups' snapshot `rows` as
    arrays, for all the groups at once."""
    classic = sorted(g for g, doc in docs.items() if group_type(doc) == "classic")
    rows = rows.select(list(BATCH_COLUMNS))  # what the batch reads, not the rows' other texts, in its copies
    wanted = pc.and_(
        pc.is_in(rows.column("group_id"), value_set=pa.array(classic, pa.string())),
        pc.not_equal(rows.column("member_id"), ""),
    )
    members = rows if pc.all(wanted).as_py() is not False else rows.filter(wanted)
    batch = GroupBatch(_upgraded(members), counts, held_in=("owned", "assignment"))
    today = _Today(batch)
    number = {batch.group_id(g): g for g in range(batch.groups)}
    out = []
    for group_id in classic:
        g = number.get(group_id)  # None: a group without members, which has nothing to convert
        partitions = 0 if g is None else today.partitions(g)
        upgrade = partial(today.upgrade, -1 if g is None else g)
        out.append(assess(docs[group_id], partitions, upgrade, policy=policy, max_size=max_size))
    return out


def _upgraded(members: pa.Table) -> pa.Table:
    """Member rows of classic groups as the coordinator converts them (ConsumerGroup.fromClassicGroup): a
    consumer group whose every member's target is its assignment."""
    assignment = members.column("assignment")
    consumer = pa.repeat(pa.scalar("consumer"), members.num_rows)
    target = pc.fill_null(assignment, pa.scalar([], assignment.type))
    converted = members.set_column(members.schema.get_field_index("group_type"), "group_type", consumer)
    return converted.set_column(members.schema.get_field_index("target_assignment"), "target_assignment", target)


class _Today:
    """Each group's assignment today, as `planner.migration.readiness` reads it from a document whose members are
    sorted by id: a partition two members list (input the rules reject) is the later one's, as a dict keeps it."""

    def __init__(self, batch: GroupBatch) -> None:
        self.batch = batch
        row, part, pairs = batch.pairs("assignment")
        document = pc.sort_indices(batch.rows, [("group_id", "ascending"), ("member_id", "ascending")])
        position = np.empty(batch.rows.num_rows, dtype=np.int64)  # each row's place in document order
        position[document.to_numpy()] = np.arange(batch.rows.num_rows)
        inside = part >= 0
        key = batch.partition_base[batch.group_of[row[inside]]] + part[inside]
        order = np.lexsort((position[row[inside]], key))
        key, holder = key[order], row[inside][order]
        last = np.flatnonzero(np.append(key[1:] != key[:-1], key.size > 0))  # each key's last holder (none: none)
        key, holder = key[last], holder[last]
        self.owner = np.full(int(batch.partition_base[-1]), -1, dtype=np.int64)
        self.owner[key] = holder - batch.starts[batch.group_of[holder]]
        self.inside = np.bincount(batch.group_of[holder], minlength=batch.groups)
        self.outside: dict[int, dict[tuple[str, int], str]] = {}
        away = np.flatnonzero(~inside)
        away = away[np.argsort(position[row[away]], kind="stable")]
        topics = pairs.field("topic").take(pa.array(away, pa.int64())).to_pylist()
        numbers = pairs.field("partition").take(pa.array(away, pa.int64())).to_pylist()
        for r, t, p in zip(row[away].tolist(), topics, numbers, strict=True):
            self.outside.setdefault(int(batch.group_of[r]), {})[(t, p)] = batch.names[r]

    def partitions(self, group: int) -> int:
        """Distinct partitions group number `group` is assigned today (those outside its topics too)."""
        return int(self.inside[group]) + len(self.outside.get(group, {}))

    def upgrade(self, group: int) -> Upgrade:
        """Group number `group` converted, members listed in id order (the document's order), with its owners."""
        spec = self.batch.spec(group)
        spec = dataclasses.replace(spec, member_listing=tuple(sorted(spec.members)))
        owner = self.owner[self.batch.partition_base[group] : self.batch.partition_base[group + 1]]
        outside = tuple((t, p, m, "") for (t, p), m in self.outside.get(group, {}).items())
        return Upgrade(spec, owner, spec.members, outside)


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

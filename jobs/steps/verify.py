"""Verify: does the group run its approved plan? A snapshot compared with the plan in force when it was captured.

The plan in force is the group's latest generation that was approved (it may since be superseded), planned from an
earlier live snapshot (not a what-if scenario) and created no later than this snapshot was captured. The verdict is
`applied` when every planned partition is owned by the live member matched to its planned member (the rules of
`jobs.apply.matching`) and nothing else is owned, `drifted` otherwise. It is recorded on the generation
(`verification`, `verified_at`, `verification_detail`: the snapshot, unknown and missing members, and every differing
partition with its planned member and its owner); a later snapshot's verdict replaces it. The nightly run verifies
right after ingest, so the snapshot just pulled judges the plan approved by an earlier run.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Iterator, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from jobs.apply.matching import LiveMember, Match, describe, match_members
from jobs.apply.plan_file import Plan
from jobs.context import RunContext, StepResult
from jobs.io.lake import Lake, rows_table
from jobs.kernels.group_spec import bounds, flatten
from jobs.tables.export import WAS_APPROVED, build_plan, checked_plan, plan_inputs
from jobs.terminal import short
from planner.errors import InputError
from schemas.tables import WHAT_IF_SOURCE


def run(
    ctx: RunContext, group: str | None = None, snapshot_id: str | None = None, verified_at: datetime | None = None
) -> StepResult:
    """Verify the groups of snapshot `snapshot_id` (default: the run's; with `group`, that group's latest snapshot).

    A row per group verified (its generation, the verdict and how many partitions differ) and each verdict as text.
    Groups with no plan in force are skipped, unless `group` names one: then that is an InputError. Each table is
    read once for all the groups, and only the rows and columns the verdicts read become Python objects.
    """
    lake = ctx.lake
    verified_at = verified_at or datetime.now(UTC)
    if group is None:
        snapshot_id = snapshot_id or ctx.run_id
        ids = lake.read_arrow("snapshots", [("snapshot_id", "=", snapshot_id)], ["group_id"])["group_id"]
        history = lake.read_arrow("snapshots", [("group_id", "in", sorted(set(ids.to_pylist())))], _HISTORY)
    else:
        history = lake.read_arrow("snapshots", [("group_id", "in", [group])], _HISTORY)
        if not history.num_rows:
            raise InputError(f"group: no snapshot of group {group!r} in the lake")
        taken = zip(history["captured_at"].to_pylist(), history["snapshot_id"].to_pylist(), strict=True)
        snapshot_id = snapshot_id or max(taken)[1]
    current = history.filter(pc.equal(history["snapshot_id"], snapshot_id))
    captured_at: dict[str, datetime] = {}  # group -> its snapshot's capture time
    for group_id, at in zip(current["group_id"].to_pylist(), current["captured_at"].to_pylist(), strict=True):
        captured_at.setdefault(group_id, at)
    if group is not None and not captured_at:
        raise InputError(f"snapshot: group {group!r} is not in snapshot {snapshot_id!r}")
    scenarios = set(history.filter(pc.equal(history["source"], WHAT_IF_SOURCE))["snapshot_id"].to_pylist())
    generations: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for g in lake.read_arrow("generations", [("group_id", "in", list(captured_at))]).to_pylist():
        generations[g["group_id"]].append(g)
    in_force = {}
    for group_id, at in captured_at.items():
        generation = plan_in_force(generations[group_id], scenarios, snapshot_id, at)
        if generation is not None:
            in_force[group_id] = generation
        elif group is not None:
            raise InputError(
                f"group: no approved plan of group {group!r} older than snapshot {snapshot_id!r} to verify"
            )
    if not in_force:
        return StepResult()
    groups = [("group_id", "in", sorted(in_force))]
    now = lake.read_arrow("snapshots", [("snapshot_id", "=", snapshot_id), *groups], _LIVE_MEMBER)
    planned_from = sorted({g["snapshot_id"] for g in in_force.values()})
    members = _by_group(lake.read_arrow("snapshots", [("snapshot_id", "in", planned_from), *groups], _PLANNED_MEMBER))
    counts = _topic_counts(lake, planned_from)
    rows = _chosen_plan_rows(lake, list(in_force.values()))
    now = now.take(pc.sort_indices(now, [("group_id", "ascending")]))  # stable: a group's rows in the order read
    verdicts: dict[str, dict[str, Any]] = {}
    for chunk, planned, live in _chunks(sorted(in_force), rows, now):  # a chunk's plans held at a time, not all
        runs = _runs(planned)
        plans = {g: _plan(in_force[g], members[g], counts[in_force[g]["snapshot_id"]], runs[g], planned) for g in chunk}
        verdicts |= compare(plans, live, planned)
    state: dict[str, str] = {}  # group -> its state in the snapshot (its first row's)
    for group_id, group_state in zip(now["group_id"].to_pylist(), now["state"].to_pylist(), strict=True):
        state.setdefault(group_id, group_state)
    results = [
        {
            "group_id": group_id,
            "generation_id": generation["generation_id"],
            "strategy": generation["chosen_strategy"],
            **verdicts[group_id],
            "snapshot_id": snapshot_id,
            "state": state[group_id],
        }
        for group_id, generation in sorted(in_force.items())
    ]
    detail_keys = ("snapshot_id", "state", "partitions", "unknown_members", "missing_members", "differing")
    with lake.lock():
        lake.update(
            "generations",
            rows_table(
                "generations",
                [
                    {
                        "group_id": r["group_id"],
                        "generation_id": r["generation_id"],
                        "verification": r["verification"],
                        "verified_at": verified_at,
                        "verification_detail": json.dumps({k: r[k] for k in detail_keys}),
                    }
                    for r in results
                ],
            ),
            ["verification", "verified_at", "verification_detail"],
        )
    return StepResult(
        tuple(
            {k: r[k] for k in ("group_id", "generation_id", "verification")} | {"differing": len(r["differing"])}
            for r in results
        ),
        "\n".join(format_verdict(r) for r in results),
    )


_HISTORY = ["snapshot_id", "group_id", "captured_at", "source"]  # finds a group's snapshot and its plan in force
_LIVE_MEMBER = ["group_id", "member_id", "group_instance_id", "client_id", "assignment", "state"]  # what is judged
_PLANNED_MEMBER = ["snapshot_id", "group_id", "member_id", "client_id", "group_instance_id", "topics"]  # a plan's
_PAIR = ["group_id", "topic", "partition"]


def _by_group(rows: pa.Table) -> dict[str, list[dict[str, Any]]]:
    """Rows as dicts by group id, in the order read."""
    out: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for r in rows.to_pylist():
        out[r["group_id"]].append(r)
    return out


def _topic_counts(lake: Lake, snapshot_ids: Sequence[str]) -> dict[str, list[dict[str, Any]]]:
    """Per snapshot, the `topic_partitions` columns a plan reads, a row per topic (its last row read) rather than
    per partition: every row of a topic holds the topic's count and id."""
    columns = ["snapshot_id", "topic", "partition_count", "topic_id"]
    rows = lake.read_arrow("topic_partitions", [("snapshot_id", "in", list(snapshot_ids))], columns)
    snapshot, topic = _codes(rows["snapshot_id"])[0], _codes(rows["topic"])[0]
    order = np.lexsort((np.arange(rows.num_rows), topic, snapshot))
    last = np.ones(rows.num_rows, dtype=bool)  # the last row read of each (snapshot, topic)
    last[:-1] = (snapshot[order][1:] != snapshot[order][:-1]) | (topic[order][1:] != topic[order][:-1])
    out: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for r in rows.take(pa.array(order[last], pa.int64())).to_pylist():
        out[r["snapshot_id"]].append(r)
    return out


def _codes(column: pa.ChunkedArray) -> tuple[np.ndarray, list[Any]]:
    """A column's values as int64 codes into its distinct values, and those values."""
    encoded = pc.dictionary_encode(column.combine_chunks())
    return encoded.indices.to_numpy(zero_copy_only=False).astype(np.int64), encoded.dictionary.to_pylist()


def _chosen_plan_rows(lake: Lake, generations: Sequence[dict[str, Any]]) -> pa.Table:
    """The `plans` rows of each generation's chosen candidate, sorted by group, member, topic and partition.

    Read with strings as dictionaries and each batch's rows matched to their group's generation and strategy by
    code, then sorted by code: a filter, join or sort on the strings of every candidate of 10,000 groups (20M
    rows) took 14 s and 3 GB.
    """
    chosen = {g["group_id"]: g for g in generations}
    terms = [
        ("generation_id", "in", sorted({g["generation_id"] for g in generations})),
        ("strategy", "in", sorted({g["chosen_strategy"] for g in generations if g["chosen_strategy"]})),
    ]
    columns = ["generation_id", "group_id", "strategy", "topic", "partition", "member"]
    read = lake.read_arrow("plans", terms, columns, decode=False)
    rows = pa.Table.from_batches([_decoded(_mine(batch, chosen)) for batch in read.to_batches()], _plain(read.schema))
    del read
    group, groups = _codes(rows["group_id"])
    member = _codes(rows["member"])[0]
    topic, topics = _codes(rows["topic"])
    order = np.lexsort((rows["partition"].to_numpy(), _rank(topics)[topic], member, _rank(groups)[group]))
    return rows.take(pa.array(order, pa.int64())).combine_chunks()


def _mine(batch: pa.RecordBatch, chosen: Mapping[str, dict[str, Any]]) -> pa.RecordBatch:
    """The rows of a batch (strings as dictionaries) of their group's chosen generation and strategy."""
    group, strategy = batch.column("group_id"), batch.column("strategy")
    wanted = [chosen.get(name) for name in group.dictionary.to_pylist()]
    generation = np.asarray([-1 if w is None else w["generation_id"] for w in wanted], dtype=np.int64)
    index = {s: i for i, s in enumerate(strategy.dictionary.to_pylist())}
    code = np.asarray([-1 if w is None else index.get(w["chosen_strategy"], -1) for w in wanted], dtype=np.int64)
    g = group.indices.to_numpy(zero_copy_only=False).astype(np.int64)
    s = strategy.indices.to_numpy(zero_copy_only=False).astype(np.int64)
    return batch.filter(pa.array((batch.column("generation_id").to_numpy() == generation[g]) & (s == code[g])))


def _rank(values: list[str]) -> np.ndarray:
    """The rank of each value in name order (as Python and Arrow order strings)."""
    rank = np.empty(len(values), dtype=np.int64)
    rank[sorted(range(len(values)), key=values.__getitem__)] = np.arange(len(values))
    return rank


def _plain(schema: pa.Schema) -> pa.Schema:
    """The schema with dictionary columns as plain strings."""
    return pa.schema([f.with_type(pa.string()) if pa.types.is_dictionary(f.type) else f for f in schema])


def _decoded(batch: pa.RecordBatch) -> pa.RecordBatch:
    """A batch with its dictionary columns as plain strings."""
    return batch.cast(_plain(batch.schema))


CHUNK_ROWS = 1 << 20  # plan rows compared at a time: a fleet of 5M partitions is judged in a few hundred MB


def _chunks(groups: Sequence[str], planned: pa.Table, now: pa.Table) -> Iterator[tuple[list[str], pa.Table, pa.Table]]:
    """The groups (sorted) in runs of about CHUNK_ROWS plan rows, each run with its plan rows and snapshot rows
    (slices of rows sorted by group, which hold these groups only)."""
    plan_at, live_at = _group_rows(planned), _group_rows(now)
    chunk: list[str] = []
    size = 0
    for g in groups:
        chunk.append(g)
        size += plan_at.get(g, (0, 0))[1] - plan_at.get(g, (0, 0))[0]
        if size >= CHUNK_ROWS or g == groups[-1]:
            yield chunk, _rows_of(planned, plan_at, chunk), _rows_of(now, live_at, chunk)
            chunk, size = [], 0


def _group_rows(rows: pa.Table) -> dict[str, tuple[int, int]]:
    """group id -> (start, end) of its rows, in rows sorted by group."""
    starts, ends = bounds(rows["group_id"])
    ids = rows["group_id"].take(pa.array(starts, pa.int64())).to_pylist()
    return dict(zip(ids, zip(starts.tolist(), ends.tolist(), strict=True), strict=True))


def _rows_of(rows: pa.Table, at: Mapping[str, tuple[int, int]], groups: Sequence[str]) -> pa.Table:
    """The rows of `groups` (consecutive ones of the sorted groups the rows hold)."""
    spans = [at[g] for g in groups if g in at]
    return rows.slice(spans[0][0], spans[-1][1] - spans[0][0]) if spans else rows.slice(0, 0)


Run = tuple[str, str, list[int]]  # a planned member, a topic, its partitions of the topic (ascending)


def _runs(rows: pa.Table) -> dict[str, list[Run]]:
    """group -> the runs of its sorted plan rows: each member's partitions topic by topic, in name order."""
    change = np.zeros(max(rows.num_rows - 1, 0), dtype=bool)
    for column in ("group_id", "member", "topic"):
        code = pc.dictionary_encode(rows[column]).combine_chunks().indices.to_numpy()
        change |= code[1:] != code[:-1]
    starts = np.flatnonzero(np.concatenate([[rows.num_rows > 0], change]))
    ends = np.append(starts[1:], rows.num_rows)
    partitions = rows["partition"].to_numpy()
    heads = rows.select(["group_id", "member", "topic"]).take(pa.array(starts, pa.int64())).to_pylist()
    out: dict[str, list[Run]] = defaultdict(list)
    for r, start, end in zip(heads, starts.tolist(), ends.tolist(), strict=True):
        out[r["group_id"]].append((r["member"], r["topic"], partitions[start:end].tolist()))
    return out


def _plan(
    generation: dict[str, Any],
    member_rows: Sequence[dict[str, Any]],
    count_rows: Sequence[dict[str, Any]],
    runs: Sequence[Run],
    rows: pa.Table,
) -> Plan:
    """`build_plan` of one generation, its members' assignments taken from the runs of its plan rows."""
    members, counts, topic_ids = plan_inputs(generation, member_rows, count_rows)
    assignment: dict[str, dict[str, list[int]]] = {m["member_id"]: {} for m in members}
    if any(member not in assignment for member, _, _ in runs):  # build_plan names the first partition given away
        mine = rows.filter(pc.equal(rows["group_id"], generation["group_id"])).to_pylist()
        return build_plan(generation, member_rows, count_rows, mine)
    for member, topic, partitions in runs:
        assignment[member][topic] = partitions
    return checked_plan(generation, members, counts, topic_ids, assignment)


def plan_in_force(
    generations: Sequence[dict[str, Any]], scenarios: set[str], snapshot_id: str, captured_at: datetime
) -> dict[str, Any] | None:
    """The latest generation approved at some time, planned from another live snapshot before `captured_at`."""
    candidates = [
        g
        for g in generations
        if g["status"] in WAS_APPROVED
        and g["snapshot_id"] != snapshot_id
        and g["snapshot_id"] not in scenarios
        and g["created_at"] <= captured_at
    ]
    return max(candidates, key=lambda g: g["generation_id"]) if candidates else None


def compare(plans: Mapping[str, Plan], now: pa.Table, planned: pa.Table) -> dict[str, dict[str, Any]]:
    """The verdict of each group's snapshot rows (`now`) against its plan (`plans`; its partitions, the `planned`
    rows), with the differing partitions: every group's partitions compared at once, as arrays of codes."""
    now = now.filter(pc.not_equal(now["member_id"], ""))
    live: dict[str, list[LiveMember]] = defaultdict(list)
    for g, m, instance, client in zip(*(now[c].to_pylist() for c in _LIVE_MEMBER[:4]), strict=True):
        live[g].append(LiveMember(m, instance, client))
    matches = {g: match_members(plan.members, live[g]) for g, plan in plans.items()}
    groups = sorted(plans)
    values, parent = flatten(now["assignment"].combine_chunks())
    owned = pa.table(
        {
            "group_id": now["group_id"].take(pa.array(parent)),
            "topic": values.field("topic"),
            "partition": values.field("partition"),
            "member": now["member_id"].take(pa.array(parent)),
        }
    )
    both = pa.concat_tables([planned.select(owned.column_names).cast(owned.schema), owned]).combine_chunks()
    side = np.repeat([0, 1], [planned.num_rows, owned.num_rows])  # planned rows first, then owned ones
    group = pc.index_in(both["group_id"], value_set=pa.array(groups, pa.string())).to_numpy().astype(np.int64)
    topic, names = _codes(both["topic"])
    rank = np.empty(len(names), dtype=np.int64)  # topics in name order
    rank[sorted(range(len(names)), key=names.__getitem__)] = np.arange(len(names))
    topic, partition = rank[topic], both["partition"].to_numpy().astype(np.int64)
    # Sorted by partition, then planned before owned, each side in the order read: a partition's last owned row
    # is its owner (a later member listing it wins, as a dict of them keeps it).
    order = np.lexsort((np.arange(len(side)), side, partition, topic, group))
    key = [group[order], topic[order], partition[order]]
    first = np.ones(len(order), dtype=bool)
    first[1:] = (key[0][1:] != key[0][:-1]) | (key[1][1:] != key[1][:-1]) | (key[2][1:] != key[2][:-1])
    last = np.ones(len(order), dtype=bool)
    last[:-1] = first[1:]
    run = np.cumsum(first) - 1
    planned_at = np.full(int(first.sum()), -1, dtype=np.int64)
    owned_at = np.full(int(first.sum()), -1, dtype=np.int64)
    is_planned = first & (side[order] == 0)  # a partition's one planned row comes first
    planned_at[run[is_planned]] = order[is_planned]
    is_owned = last & (side[order] == 1)  # and its last owned row last
    owned_at[run[is_owned]] = order[is_owned]
    expected = _expected(both.slice(0, planned.num_rows), group[: planned.num_rows], groups, matches)
    planned_member = both["member"].take(pa.array(planned_at, mask=planned_at < 0))
    owner = both["member"].take(pa.array(owned_at, mask=owned_at < 0))
    wanted = expected.take(pa.array(planned_at, mask=planned_at < 0))
    differ = pc.fill_null(pc.not_equal(owner, wanted), True).to_numpy(zero_copy_only=False)
    rows = np.flatnonzero(differ)
    at = order[first][rows]  # a row of each differing partition, for its group, topic and partition
    by_group: dict[str, list[dict[str, Any]]] = defaultdict(list)
    columns = [
        [groups[g] for g in group[at].tolist()],
        both["topic"].take(pa.array(at)).to_pylist(),
        partition[at].tolist(),
        planned_member.take(pa.array(rows)).to_pylist(),
        owner.take(pa.array(rows)).to_pylist(),
    ]
    for g, t, p, planned_id, owner_id in zip(*columns, strict=True):
        by_group[g].append({"topic": t, "partition": p, "planned": planned_id, "owner": owner_id})
    partitions = np.bincount(group[: planned.num_rows], minlength=len(groups))
    return {
        g: {
            "verification": "drifted" if by_group[g] else "applied",
            "partitions": int(partitions[i]),
            "unknown_members": [describe(m) for m in matches[g].unknown],
            "missing_members": [describe(p) for p in matches[g].missing],
            "differing": by_group[g],
        }
        for i, g in enumerate(groups)
    }


def _expected(planned: pa.Table, group: np.ndarray, groups: Sequence[str], matches: Mapping[str, Match]) -> pa.Array:
    """Per planned row, the live member matched to its planned member (null: none)."""
    member, names = _codes(planned["member"])
    pairs, index = np.unique(group * max(len(names), 1) + member, return_inverse=True)
    live_of = [{p: m for m, p in matches[g].planned.items()} for g in groups]
    width = max(len(names), 1)
    live = [live_of[pair // width].get(names[pair % width]) for pair in pairs.tolist()]
    return pa.array(live, pa.string()).take(pa.array(index.reshape(-1)))


def format_verdict(result: dict[str, Any]) -> str:
    """One group's verdict as text: a headline, then the unknown and missing members and differing partitions."""
    head = (
        f"group {short(result['group_id'])}: generation {result['generation_id']} ({result['strategy']}) vs snapshot "
        f"{result['snapshot_id']} ({result['state']}): {result['verification']}"
    )
    if result["verification"] == "applied":
        return f"{head}, all {result['partitions']} partitions owned as planned"
    lines = [f"{head}, {len(result['differing'])} of {result['partitions']} partitions differ"]
    lines += [f"  member {short(m)} is not in the plan" for m in result["unknown_members"]]
    lines += [f"  planned member {short(m)} is missing" for m in result["missing_members"]]
    lines += [
        f"  {d['topic']}-{d['partition']}: planned for {short(d['planned'] or 'nobody')}, "
        f"owned by {short(d['owner'] or 'nobody')}"
        for d in result["differing"]
    ]
    return "\n".join(lines)

"""Verify reads a fleet in Arrow and judges it as the row-by-row path did: seeded random fleets of classic and
KIP-848 groups, static and restarted members, unknown and missing members, plans applied and drifted, what-if
scenarios and superseded generations; and the same errors for plans that cannot be built."""

from __future__ import annotations

import json
import random
from collections import defaultdict
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from jobs.apply.matching import LiveMember, describe, match_members
from jobs.apply.plan_file import Plan
from jobs.config import Config
from jobs.context import RunContext
from jobs.io.lake import Lake, rows_table
from jobs.steps import ingest, verify
from jobs.tables.export import build_plan
from planner.errors import InputError
from schemas.tables import WHAT_IF_SOURCE

DAY1 = datetime(2026, 11, 20, 2, 0, tzinfo=UTC)
DAY2 = DAY1 + timedelta(days=1)
TOPICS = {"orders": 6, "refunds": 3, "audit": 2, "clicks": 8}
STRATEGIES = ("range", "sticky", "balanced-load")


def uuid(rng: random.Random) -> str:
    h = f"{rng.getrandbits(128):032x}"
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


def day1_group(rng: random.Random, g: int) -> dict[str, Any]:
    """A valid group: members subscribed to some of its topics, each partition assigned once."""
    if g % 9 == 8:
        return {"group_id": f"g{g:02d}", "captured_at": DAY1.isoformat(), "state": "Empty", "topics": {}, "members": []}
    topics = dict(rng.sample(sorted(TOPICS.items()), rng.randint(1, 3)))
    members = []
    for i in range(rng.randint(1, 5)):
        static = g % 3 == 0 and i % 2 == 0
        members.append(
            {
                "member_id": f"c{g}-{i}-{uuid(rng)}",
                "client_id": f"c{g}-{i}",
                "group_instance_id": f"g{g}-static-{i}" if static else None,
                "topics": sorted(topics) if i else sorted(topics)[:1],
                "assignment": [],
            }
        )
    for topic, count in topics.items():
        holders = [m for m in members if topic in m["topics"]]
        for p in range(count if holders else 0):
            rng.choice(holders)["assignment"].append([topic, p])
    for m in members:
        m["owned"] = list(m["assignment"])
    doc: dict[str, Any] = {
        "group_id": f"g{g:02d}",
        "captured_at": DAY1.isoformat(),
        "state": "Stable",
        "generation": 5,
        "protocol": "range",
        "topics": topics,
        "members": members,
    }
    if g % 4 == 1:  # a KIP-848 consumer group
        doc |= {"group_type": "consumer", "server_assignor": "uniform", "protocol": None}
        for m in members:
            m["target_assignment"] = list(m["assignment"])
    return doc


def plan_rows(rng: random.Random, doc: dict[str, Any], generation_id: int, strategy: str) -> list[dict[str, Any]]:
    """A valid candidate: every partition of the subscribed topics to a member subscribed to it."""
    rows = []
    for topic in sorted({t for m in doc["members"] for t in m["topics"]}):
        holders = [m["member_id"] for m in doc["members"] if topic in m["topics"]]
        for p in range(doc["topics"][topic]):
            member = rng.choice(holders)
            rows.append(
                {
                    "generation_id": generation_id,
                    "group_id": doc["group_id"],
                    "strategy": strategy,
                    "topic": topic,
                    "partition": p,
                    "member": member,
                    "previous_member": None,
                    "moved": False,
                    "phase": "assign",
                    "weight": 1.0,
                }
            )
    return rows


def day2_group(rng: random.Random, doc: dict[str, Any], chosen: list[dict[str, Any]]) -> dict[str, Any]:
    """The group a day later: running its plan, or not quite; members restarted, gone or new."""
    day2 = json.loads(json.dumps(doc)) | {"captured_at": DAY2.isoformat()}
    members = day2["members"]
    if not members:
        return day2
    applied = rng.random() < 0.5
    plan = defaultdict(list)
    for r in chosen:
        plan[r["member"]].append([r["topic"], r["partition"]])
    for m in members:
        m["assignment"] = sorted(plan[m["member_id"]]) if applied else m["assignment"]
        if rng.random() < 0.3:  # restarted: a new member id, the same client id (or instance id)
            m["member_id"] = f"{m['client_id']}-{uuid(rng)}"
    if not applied and len(members) > 1 and rng.random() < 0.5:
        members.pop()  # gone, its partitions with nobody
    if rng.random() < 0.3:
        members.append(
            {"member_id": f"new-{uuid(rng)}", "client_id": "new", "topics": members[0]["topics"], "assignment": []}
        )
    for m in members:
        m["owned"] = list(m["assignment"])
        if "target_assignment" in m:
            m["target_assignment"] = list(m["assignment"])
    return day2


def ingested(lake: Lake, docs: list[dict[str, Any]], snapshot_id: str, source: str = "file") -> None:
    raws = [ingest.RawDocument(f"{snapshot_id}:{d['group_id']}", json.dumps(d), doc=d) for d in docs]
    result = ingest.ingest_documents(lake, raws, snapshot_id, snapshot_id, DAY2 + timedelta(hours=1), source)
    assert not result.quarantined


def generation(doc: dict[str, Any], generation_id: int, snapshot_id: str, status: str, strategy: str | None) -> dict:
    return {
        "group_id": doc["group_id"],
        "generation_id": generation_id,
        "created_at": DAY1 + timedelta(hours=generation_id),
        "run_id": snapshot_id,
        "snapshot_id": snapshot_id,
        "chosen_strategy": strategy,
        "status": status,
    }


def fleet(lake: Lake, seed: int, groups: int = 27) -> None:
    """Day 1 planned (generation 1 superseded by 2; a what-if generation 3 approved for some groups), day 2 live."""
    rng = random.Random(seed)
    day1 = [day1_group(rng, g) for g in range(groups)]
    ingested(lake, day1, "day1")
    generations, plans, day2 = [], [], []
    for doc in day1:
        if not doc["members"]:  # nothing planned: no generation in force
            day2.append(doc | {"captured_at": DAY2.isoformat()})
            continue
        candidates = {s: plan_rows(rng, doc, 2, s) for s in STRATEGIES}
        chosen = rng.choice(STRATEGIES)
        generations += [
            generation(doc, 1, "day1", "superseded", "range"),
            generation(doc, 2, "day1", "approved", chosen),
        ]
        plans += plan_rows(rng, doc, 1, "range") + [r for rows in candidates.values() for r in rows]
        day2.append(day2_group(rng, doc, candidates[chosen]))
    scenarios = [d for d in day1[::5] if d["members"]]
    ingested(lake, scenarios, "what-if-1", WHAT_IF_SOURCE)
    for doc in scenarios:
        generations.append(generation(doc, 3, "what-if-1", "approved", "range"))
        plans += plan_rows(rng, doc, 3, "range")
    lake.merge("generations", rows_table("generations", generations))
    lake.merge("plans", rows_table("plans", plans))
    ingested(lake, day2, "day2")
    # Input the rules reject, written past them: a partition two live members list (the later one is its owner).
    rows = lake.read_arrow("snapshots", [("snapshot_id", "=", "day2")]).to_pylist()
    first, second = next(
        (a, b) for a, b in zip(rows, rows[1:], strict=False) if a["group_id"] == b["group_id"] and a["assignment"]
    )
    lake.merge(
        "snapshots", rows_table("snapshots", [second | {"assignment": [*second["assignment"], first["assignment"][0]]}])
    )


# --- the row-by-row path verify took before ----------------------------------------------------------------------


def old_verdicts(lake: Lake, snapshot_id: str) -> list[dict[str, Any]]:
    """What verify's run returned before it read in Arrow (every row as a dict, each group's plan built from all)."""
    groups = sorted(set(lake.read_arrow("snapshots", [("snapshot_id", "=", snapshot_id)])["group_id"].to_pylist()))
    history = lake.read_arrow("snapshots", [("group_id", "in", groups)]).to_pylist()
    now: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for r in history:
        if r["snapshot_id"] == snapshot_id:
            now[r["group_id"]].append(r)
    scenarios = {r["snapshot_id"] for r in history if r["source"] == WHAT_IF_SOURCE}
    generations = lake.read_arrow("generations", [("group_id", "in", list(now))]).to_pylist()
    in_force = {}
    for group_id, rows in now.items():
        found = verify.plan_in_force(
            [g for g in generations if g["group_id"] == group_id], scenarios, snapshot_id, rows[0]["captured_at"]
        )
        if found is not None:
            in_force[group_id] = found
    ids = sorted({g["generation_id"] for g in in_force.values()})
    plan_rows = lake.read_arrow("plans", [("generation_id", "in", ids)]).to_pylist()
    snapshots = sorted({g["snapshot_id"] for g in in_force.values()})
    count_rows = lake.read_arrow("topic_partitions", [("snapshot_id", "in", snapshots)]).to_pylist()
    return [
        {
            "group_id": group_id,
            "generation_id": g["generation_id"],
            "strategy": g["chosen_strategy"],
            **old_compare(build_plan(g, history, count_rows, plan_rows), [r for r in now[group_id] if r["member_id"]]),
            "snapshot_id": snapshot_id,
            "state": now[group_id][0]["state"],
        }
        for group_id, g in sorted(in_force.items())
    ]


def old_compare(plan: Plan, members: Sequence[dict[str, Any]]) -> dict[str, Any]:
    live = [LiveMember(m["member_id"], m["group_instance_id"], m["client_id"]) for m in members]
    match = match_members(plan.members, live)
    live_of = {planned: live_id for live_id, planned in match.planned.items()}
    owner = {(tp["topic"], tp["partition"]): m["member_id"] for m in members for tp in m["assignment"]}
    planned = plan.owners()
    differing = [
        {"topic": t, "partition": p, "planned": planned.get((t, p)), "owner": owner.get((t, p))}
        for t, p in sorted(set(planned) | set(owner))
        if (t, p) not in planned or owner.get((t, p)) is None or owner[(t, p)] != live_of.get(planned[(t, p)])
    ]
    return {
        "verification": "drifted" if differing else "applied",
        "partitions": len(planned),
        "unknown_members": [describe(m) for m in match.unknown],
        "missing_members": [describe(p) for p in match.missing],
        "differing": differing,
    }


# --- the tests ---------------------------------------------------------------------------------------------------


def summary(result: dict[str, Any]) -> dict[str, Any]:
    """A verdict as the step's result row carries it."""
    kept = {k: result[k] for k in ("group_id", "generation_id", "verification")}
    return kept | {"differing": len(result["differing"])}


def context(lake: Lake, run_id: str) -> RunContext:
    return RunContext.create(Config(lake=str(lake.root)), run_id)


@pytest.mark.parametrize(("seed", "chunk_rows"), [(0, verify.CHUNK_ROWS), (1, verify.CHUNK_ROWS), (2, 10), (3, 1)])
def test_verdicts_and_the_stored_detail_are_the_row_by_row_ones(
    lake: Lake, seed: int, chunk_rows: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(verify, "CHUNK_ROWS", chunk_rows)  # a few groups' plans at a time, or one
    fleet(lake, seed)
    expected = old_verdicts(lake, "day2")
    at = datetime(2026, 11, 22, tzinfo=UTC)
    got = verify.run(context(lake, "day2"), verified_at=at)
    assert got.rows == tuple(summary(r) for r in expected)
    assert got.text == "\n".join(verify.format_verdict(r) for r in expected)
    assert {r["verification"] for r in expected} == {"applied", "drifted"}
    assert any(r["unknown_members"] for r in expected) and any(r["missing_members"] for r in expected)
    stored = {r["group_id"]: r for r in lake.read_arrow("generations").to_pylist() if r["verified_at"] is not None}
    keys = ("snapshot_id", "state", "partitions", "unknown_members", "missing_members", "differing")
    assert {g: json.loads(r["verification_detail"]) for g, r in stored.items()} == {
        r["group_id"]: {k: r[k] for k in keys} for r in expected
    }
    by_name = context(lake, "check")
    for r in expected:  # one group by name, its latest snapshot
        one = verify.run(by_name, group=r["group_id"], verified_at=at)
        assert one.rows == (summary(r),) and one.text == verify.format_verdict(r)


@pytest.mark.parametrize(
    "damage",
    ["member the snapshot does not have", "partition planned for nobody", "no chosen candidate"],
)
def test_a_plan_that_cannot_be_built_fails_with_the_row_by_row_message(lake: Lake, damage: str) -> None:
    fleet(lake, 7, groups=9)
    plans = lake.read_arrow("plans", [("generation_id", "=", 2), ("group_id", "=", "g04")]).to_pylist()
    chosen = next(
        g for g in lake.read_arrow("generations").to_pylist() if g["group_id"] == "g04" and g["generation_id"] == 2
    )
    mine = [r for r in plans if r["strategy"] == chosen["chosen_strategy"]]
    if damage == "member the snapshot does not have":
        lake.merge("plans", rows_table("plans", [mine[-1] | {"member": "stranger"}]))
    elif damage == "partition planned for nobody":
        lake.table("plans").delete(f"group_id = 'g04' AND generation_id = 2 AND partition = {mine[0]['partition']}")
    else:
        lake.merge("generations", rows_table("generations", [chosen | {"chosen_strategy": None}]))
    with pytest.raises(InputError) as expected:
        old_verdicts(lake, "day2")
    with pytest.raises(InputError) as got:
        verify.run(context(lake, "day2"))
    assert str(got.value) == str(expected.value)

"""Recorded outputs of balanced-load on seeded random groups, and the script that records them.

`python tests/unit/balanced_load_reference.py` runs the assignor on every case and writes
`balanced_load_reference.json` beside this file: per case, the first 16 hex digits of the SHA-256 of the owner
array (int32, little-endian). `test_balanced_load.py` checks that the assignor still reproduces each one, so a
change made for speed cannot change a decision, a tie-break or a rounding. Re-record only for a change of behaviour.

The cases (seed = case number) vary what the assignor branches on: 1-4 topics of 1-40 partitions (one case in
eight: 10-500, the nightly plan's groups), 1-12 members (then 5-50), equal or differing subscriptions (some to
nothing, some to a topic the group lacks), static members, loads (none, lognormal, a few hot, Zipf, small integers
with zeros, lag-like, one to three heavy partitions, an idle topic, rarely every topic idle), ownership (fresh, a
joiner, random conflicting claims, members that left or dropped topics leaving orphans, the assignor's own settled
output, the same after the loads drifted) and the options (move budget by load or partitions, count spread,
tolerance).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from pathlib import Path
from typing import Any

import numpy as np

from planner.assignment import next_round
from planner.assignors.balanced_load import balanced_load_assign
from planner.group import GroupSpec, parse_group

CASES = 3000
REFERENCE = Path(__file__).with_name("balanced_load_reference.json")
OWNERSHIP = ("fresh", "joiner", "random", "left", "settled", "drifted")
_SHAPES = ("unit", "lognormal", "hot", "zipf", "integers", "lag", "heavy", "idle", "zero")
_SHAPE_SHARES = (*[(1 - 0.005) / 8] * 8, 0.005)


def owner_digest(owner: np.ndarray) -> str:
    """The first 16 hex digits of SHA-256 over the owner array as little-endian int32."""
    return hashlib.sha256(np.ascontiguousarray(owner, dtype="<i4").tobytes()).hexdigest()[:16]


def case(seed: int) -> tuple[GroupSpec, dict[str, Any]]:
    """The group and assignor options of one case."""
    rng = np.random.default_rng(seed)
    nightly = rng.random() < 1 / 8
    n_topics = int(rng.integers(1, 5))
    topics = {f"t{i}": int(rng.integers(10, 501) if nightly else rng.integers(1, 41)) for i in range(n_topics)}
    n_members = int(rng.integers(5, 51) if nightly else rng.integers(1, 13))
    ownership = OWNERSHIP[int(rng.integers(len(OWNERSHIP)))]
    options = _options(rng)
    # "left": the group as it was, with members that leave below and some that change their subscriptions.
    leaving = int(rng.integers(1, 4)) if ownership == "left" else 0
    members = _members(rng, sorted(topics), n_members + leaving)
    doc: dict[str, Any] = {"topics": topics, "members": members}
    loads = _loads(rng, topics)
    if loads is not None:
        doc["loads"] = loads
    if ownership in ("joiner", "left"):
        _round_robin(doc, skip_last=ownership == "joiner")
    elif ownership == "random":
        for m in members.values():
            if rng.random() < 0.7:
                m["owned"] = [[t, p] for t, n in topics.items() for p in range(n) if rng.random() < 0.3]
                m["generation"] = int(rng.integers(1, 4))
    if ownership == "left":
        for name in rng.choice(sorted(members), size=leaving, replace=False).tolist():
            del members[name]
        for m in members.values():
            if rng.random() < 0.3:
                m["topics"] = _subscription(rng, sorted(topics))
    spec = parse_group(doc)
    if ownership in ("settled", "drifted"):
        spec = next_round(spec, balanced_load_assign(spec, **options))
    if ownership == "drifted" and spec.partition_loads is not None:
        drift = np.round(spec.partition_loads * rng.lognormal(0.0, 0.3, spec.num_partitions), 3)
        spec = dataclasses.replace(spec, partition_loads=drift)
    return spec, options


def _options(rng: np.random.Generator) -> dict[str, Any]:
    """Default options in half the cases; else a move budget, a count spread, a tolerance, or several."""
    options: dict[str, Any] = {}
    if rng.random() < 0.5:
        return options
    if rng.random() < 0.5:
        options["max_move_share"] = float(rng.choice([0.0, 0.02, 0.1, 0.3, 1.0]))
        options["move_budget"] = str(rng.choice(["load", "partitions"]))
    if rng.random() < 0.5:
        options["max_count_spread"] = int(rng.choice([1, 2, 3, 5]))
    if rng.random() < 0.3:
        options["tolerance"] = float(rng.choice([0.005, 0.05, 0.2]))
    return options


def _subscription(rng: np.random.Generator, names: list[str]) -> list[str]:
    """A random subset of the topics (rarely empty), now and then with a topic the group does not have."""
    chosen = [t for t in names if rng.random() < 0.6]
    if not chosen and rng.random() < 0.8:
        chosen = [names[int(rng.integers(len(names)))]]
    return [*chosen, "gone"] if rng.random() < 0.05 else chosen


def _members(rng: np.random.Generator, names: list[str], n: int) -> dict[str, dict[str, Any]]:
    """Members M00, M01, ...: every topic, or each its own subset; static ones (unique instance ids, in an order
    unrelated to the member ids) in some groups."""
    equal = rng.random() < 0.4
    static_share = float(rng.choice([0.0, 0.5, 1.0]))
    instance = rng.permutation(n)
    members = {}
    for i in range(n):
        m: dict[str, Any] = {"topics": list(names) if equal else _subscription(rng, names)}
        if rng.random() < static_share:
            m["group_instance_id"] = f"app-{instance[i]}"
        members[f"M{i:02d}"] = m
    return members


def _loads(rng: np.random.Generator, topics: dict[str, int]) -> dict[str, list[float]] | None:
    """Per-topic loads of one shape, or None (every partition weighs 1). Rarely all 0 (the tolerance is then 0, and
    the local search runs to its iteration cap: slow)."""
    shape = str(rng.choice(_SHAPES, p=_SHAPE_SHARES))
    if shape == "unit":
        return None
    loads = {}
    for i, (t, n) in enumerate(topics.items()):
        if shape == "lognormal" or (shape == "idle" and (i > 0 or len(topics) == 1)):
            w = np.round(rng.lognormal(0.0, 1.2, n), 4)
        elif shape == "hot":
            w = np.where(rng.random(n) < 0.1, 30.0, 1.0)
        elif shape == "zipf":
            w = 10.0 / (1 + rng.permutation(n))
        elif shape == "integers":
            w = rng.integers(0, 10, n).astype(float)
        elif shape == "lag":
            w = rng.integers(0, 900, n).astype(float)
        elif shape == "heavy":
            w = np.ones(n)
            w[rng.choice(n, size=min(n, int(rng.integers(1, 4))), replace=False)] = np.round(
                rng.uniform(0.2, 1.0) * n, 2
            )
        else:  # an idle topic, or every topic idle: nothing to consume
            w = np.zeros(n)
        loads[t] = w.tolist()
    return loads


def _round_robin(doc: dict[str, Any], skip_last: bool) -> None:
    """Today's owners: each topic's partitions round robin over its subscribers (the last member excepted: it
    just joined), as bench/pipeline.py's groups own them."""
    names = list(doc["members"])
    holders_of = names[:-1] if skip_last and len(names) > 1 else names
    for t, n in doc["topics"].items():
        holders = [m for m in holders_of if t in doc["members"][m]["topics"]]
        for p in range(n if holders else 0):
            member = doc["members"][holders[p % len(holders)]]
            member.setdefault("owned", []).append([t, p])
            member["generation"] = 5


def main() -> None:
    digests = [owner_digest(balanced_load_assign(spec, **options)) for spec, options in map(case, range(CASES))]
    REFERENCE.write_text(json.dumps({"cases": CASES, "owner_sha256_16": digests}, indent=0) + "\n")
    print(f"{REFERENCE}: {CASES} cases")


if __name__ == "__main__":
    main()

"""Assignor benchmark: time and peak memory on Kafka's largest sticky tests, and balance by LOAD on skewed groups.

Timing table. Cases (AbstractStickyAssignorTest.testLargeAssignmentAndGroupWithUniformSubscription and
...WithNonEqualSubscription: 500 topics x 2,000 partitions, 2,000 members, the last one subscribed to a single
topic in the non-equal case), each (i) fresh and (ii) the next round: every member keeps what it was given,
except that member 0 lost its data (as in Kafka's test), 5% of members leave and as many new ones join.
Plus 10,000 members over 100 topics x 1,000 partitions. Prints one row per (case, round, strategy):
milliseconds of the assignment itself (median of --repeat runs), peak traced memory of one assignment, the
follow-up rounds of cooperative strategies, and partitions moved.

Load table. Topics of 2,000 partitions, 10,000 / 100,000 / 1,000,000 partitions over 100 / 1,000 / 2,000 members,
partition loads lognormal (sigma 1), a few hot (1% at 50x), Zipf (s 1.1, shuffled) or equal; rounds (i) fresh,
(ii) "from sticky": the same members owning what sticky gave them (a group switching strategy), (iii) "join": one
member joins the strategy's own assignment, (iv) the next round of it with 5% churn as above. Per strategy:
max/mean member load after the (follow-up) rounds, the bound the weights allow (planner.load.load_bound), load
moved (share of the total) and partitions moved against today's owners, what a fresh balanced-load assignment
would move instead, the wall milliseconds of the first round and the CPU milliseconds of all rounds (the figure
to trust on a shared machine).

Run: `python bench/assignors.py [--quick] [--skip-timing] [--max-partitions N]`.
"""

from __future__ import annotations

import argparse
import dataclasses
import resource
import statistics
import time
import tracemalloc

import numpy as np

from planner.assignment import assign_arrays, by_member
from planner.assignment import next_round as rejoin
from planner.assignors import load, protocol_of
from planner.group import GroupSpec, parse_group
from planner.invariants import check_plan
from planner.load import load_bound, load_moved, max_mean_load

STRATEGIES = ("range", "roundrobin", "sticky", "cooperative-sticky", "balanced-load", "cooperative-balanced-load")
LOAD_STRATEGIES = ("sticky", "cooperative-sticky", "uniform", "balanced-load", "cooperative-balanced-load")
LOAD_SIZES = ((10_000, 100), (100_000, 1_000), (1_000_000, 2_000))  # partitions, members
LOAD_SHAPES = ("lognormal", "hot", "zipf", "equal")


def fresh_group(topics: int, partitions: int, members: int, single_topic_member: bool) -> GroupSpec:
    """Kafka's test input: topic{i}, consumer{i}; optionally the last member subscribes to the first topic only."""
    names = [f"topic{i:03d}" for i in range(topics)]
    subs = {f"consumer{i:05d}": {"topics": names} for i in range(members)}
    if single_topic_member:
        subs[f"consumer{members - 1:05d}"] = {"topics": names[:1]}
    return parse_group({"topics": dict.fromkeys(names, partitions), "members": subs})


def next_round(group: GroupSpec, owner: np.ndarray, churn: float, generation: int = 1) -> GroupSpec:
    """Members rejoin owning what `owner` gave them; member 0 lost its data; `churn` of them leave, as many join."""
    n = len(group.members)
    leaving = set(range(1, n, max(1, round(1 / churn)))) if churn else set()
    stay = [m for m in range(n) if m not in leaving]
    new_index = np.full(n, -1, dtype=np.int64)
    new_index[stay] = np.arange(len(stay))
    parts = np.flatnonzero(owner >= 0)
    holders = owner[parts]
    keep = (holders != 0) & (new_index[holders] >= 0)
    joiners = [f"joiner{i:05d}" for i in range(len(leaving))]
    members = tuple(group.members[m] for m in stay) + tuple(joiners)
    order = np.argsort(np.asarray(members, dtype=object), kind="stable")  # members are kept name-sorted
    rename = np.empty(len(members), dtype=np.int64)
    rename[order] = np.arange(len(members))
    pick = lambda values, fill: tuple(  # noqa: E731 - reorder per-member tuples the same way
        ([values[m] for m in stay] + [fill(i) for i in range(len(joiners))])[i] for i in order
    )
    claim_member = rename[new_index[holders[keep]]].astype(np.int32)
    claim_partition = parts[keep]
    sort = np.lexsort((claim_partition, claim_member))
    return dataclasses.replace(
        group,
        members=tuple(members[i] for i in order),
        subscriptions=pick(group.subscriptions, lambda i: group.subscriptions[0]),
        unknown_topics=pick(group.unknown_topics, lambda i: ()),
        group_instance_ids=pick(group.group_instance_ids, lambda i: None),
        racks=pick(group.racks, lambda i: None),
        generations=np.where(np.arange(len(members)) == rename[new_index[0]], -1, generation).astype(np.int64)
        if new_index[0] >= 0
        else np.full(len(members), generation, dtype=np.int64),
        claim_member=claim_member[sort],
        claim_partition=claim_partition[sort],
    )


def measure(strategy: str, group: GroupSpec, repeat: int) -> dict:
    """Median assignment time, traced peak of one more run, follow-up time and rounds, partitions moved."""
    times, result = [], None
    for _ in range(repeat):
        start = time.perf_counter()
        result = assign_arrays(strategy, group)
        times.append((result.elapsed_ms, (time.perf_counter() - start) * 1000.0))
    tracemalloc.start()
    assign_arrays(strategy, group)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    problems = check_plan(
        group,
        result.assignment,
        balance=strategy in ("sticky", "cooperative-sticky"),
        target=result.target if protocol_of(load(strategy)) == "cooperative" else None,
    )
    start = time.perf_counter()
    by_member(group, np.flatnonzero(result.assignment >= 0), result.assignment[result.assignment >= 0])
    naming_ms = (time.perf_counter() - start) * 1000.0
    claims_kept = result.target[group.claim_partition] == group.claim_member
    return {
        "ms": statistics.median(t[0] for t in times),
        "total_ms": statistics.median(t[1] for t in times),
        "peak_mb": peak / 2**20,
        "rounds": result.rounds,
        "naming_ms": naming_ms,
        "moved": int(np.count_nonzero(~claims_kept)),
        "ok": not problems,
        "owner": result.target,
    }


def with_loads(group: GroupSpec, shape: str, seed: int = 7) -> GroupSpec:
    """The group with per-partition loads of the given shape (seeded, so every strategy sees the same loads)."""
    rng = np.random.default_rng(seed)
    n = group.num_partitions
    if shape == "lognormal":
        w = rng.lognormal(0.0, 1.0, n)
    elif shape == "hot":
        w = np.where(rng.random(n) < 0.01, 50.0, 1.0)
    elif shape == "zipf":
        w = (1.0 / np.arange(1, n + 1) ** 1.1)[rng.permutation(n)] * n
    else:
        w = np.ones(n)
    w.flags.writeable = False
    return dataclasses.replace(group, partition_loads=w)


def round_group(round_name: str, fresh: GroupSpec, sticky: np.ndarray, own: np.ndarray) -> GroupSpec:
    """The load table's rounds: fresh; the same members owning sticky's assignment; one member joining the
    strategy's own assignment; the strategy's own next round with churn."""
    if round_name == "fresh":
        return fresh
    if round_name == "from sticky":
        return rejoin(fresh, sticky)
    if round_name == "join":
        group = rejoin(fresh, own)
        return dataclasses.replace(  # "joiner" sorts after every "consumer..." id, so ids stay name-ordered
            group,
            members=(*group.members, "joiner"),
            subscriptions=(*group.subscriptions, group.subscriptions[0]),
            unknown_topics=(*group.unknown_topics, ()),
            group_instance_ids=(*group.group_instance_ids, None),
            racks=(*group.racks, None),
            generations=np.append(group.generations, -1),
        )
    return next_round(fresh, own, churn=0.05)


def fresh_would_move(group: GroupSpec) -> float:
    """Load a from-scratch balanced-load assignment of the same members would move against today's owners."""
    unowned = dataclasses.replace(group, claim_member=group.claim_member[:0], claim_partition=group.claim_partition[:0])
    return load_moved(group, assign_arrays("balanced-load", unowned).target)


def load_rows(strategies: list[str], max_partitions: int) -> None:
    """The load table: one row per (shape, size, round, strategy)."""
    print(
        "| loads | partitions | members | round | strategy | max/mean | bound | load moved | partitions moved "
        "| fresh would move | ms | cpu ms |"
    )
    print("|---|---:|---:|---|---|---:|---:|---:|---:|---:|---:|---:|")
    for partitions, members in LOAD_SIZES:
        if partitions > max_partitions:
            continue
        base = fresh_group(partitions // 2000, 2000, members, False)
        for shape in LOAD_SHAPES:
            fresh = with_loads(base, shape)
            own = {s: assign_arrays(s, fresh).target for s in strategies}
            for round_name in ("fresh", "from sticky", "join", "next"):
                for strategy in strategies:
                    group = round_group(round_name, fresh, own["sticky"], own[strategy])
                    cpu = time.process_time()
                    result = assign_arrays(strategy, group)
                    cpu_ms = (time.process_time() - cpu) * 1000.0
                    reference = "" if round_name == "fresh" else f"{fresh_would_move(group):.3f}"
                    kept = result.target[group.claim_partition] == group.claim_member
                    print(
                        f"| {shape} | {group.num_partitions:,} | {len(group.members):,} | {round_name} | {strategy} "
                        f"| {max_mean_load(group, result.target):.3f} | {load_bound(group):.3f} "
                        f"| {load_moved(group, result.target):.3f} | {int(np.count_nonzero(~kept)):,} "
                        f"| {reference} | {result.elapsed_ms:.0f} | {cpu_ms:.0f} |",
                        flush=True,
                    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="one run per row instead of three")
    parser.add_argument("--skip-timing", action="store_true", help="only the load table")
    parser.add_argument("--max-partitions", type=int, default=1_000_000, help="largest load-table size")
    args = parser.parse_args()
    repeat = 1 if args.quick else 3
    strategies = []
    for strategy in LOAD_STRATEGIES:
        try:
            load(strategy)
            strategies.append(strategy)
        except ValueError as e:
            print(f"note: {strategy!r} skipped in the load table ({e})")
    load_rows(strategies, args.max_partitions)
    if args.skip_timing:
        return
    print()
    cases = [
        ("kafka-large uniform", 500, 2000, 2000, False),
        ("kafka-large non-equal", 500, 2000, 2000, True),
        ("10k members uniform", 100, 1000, 10000, False),
        ("10k members non-equal", 100, 1000, 10000, True),
    ]
    print(
        "| case | round | strategy | partitions | members | assign ms | incl. follow-up ms | rounds "
        "| peak MB | naming ms | moved | invariants |"
    )
    print("|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---|")
    for name, topics, partitions, members, single in cases:
        fresh = fresh_group(topics, partitions, members, single)
        for strategy in STRATEGIES:
            for round_name in ("fresh", "next"):
                group = fresh
                if round_name == "next":
                    group = next_round(fresh, assign_arrays(strategy, fresh).target, churn=0.05)
                r = measure(strategy, group, repeat)
                print(
                    f"| {name} | {round_name} | {strategy} | {group.num_partitions:,} | {len(group.members):,} "
                    f"| {r['ms']:.0f} | {r['total_ms']:.0f} | {r['rounds']} | {r['peak_mb']:.0f} "
                    f"| {r['naming_ms']:.0f} | {r['moved']:,} | {'ok' if r['ok'] else 'VIOLATED'} |",
                    flush=True,
                )
    print(f"\nprocess peak RSS: {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MB")


if __name__ == "__main__":
    main()

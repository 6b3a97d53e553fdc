"""What serving a plan costs: the group leader's `assign` time, and live convergence on the embedded broker.

(1) In process, kafka-python's own objects (ClusterMetadata from a MetadataResponse, JoinGroup members): the leader's
`PlannedAssignor.assign` with a plan document, with a plan file read and checked (a changed file), with a plan file
unchanged since the last assignment (not read again), and the fallback assignors on the same group, over a grid of
members x partitions (one topic per 100 partitions).
(2) With `--live`: Apache Kafka on 127.0.0.1, 3 kafka-python members on a 12-partition topic that ran under the
fallback (range, or cooperative-sticky): seconds from a whole-group restart with the plan in place until every
member runs it, with the rounds the leader logged.
Run: `python bench/apply.py [--live] [--repeat 3]`.
"""

from __future__ import annotations

import argparse
import logging
import tempfile
import time
import uuid
from pathlib import Path

from kafka.cluster import ClusterMetadata
from kafka.coordinator.assignors.cooperative_sticky import CooperativeStickyAssignor
from kafka.coordinator.assignors.range import RangePartitionAssignor
from kafka.coordinator.assignors.roundrobin import RoundRobinPartitionAssignor
from kafka.protocol.consumer.group import JoinGroupResponse
from kafka.protocol.metadata import MetadataResponse

from jobs.apply import PlannedAssignor, parse_plan, write_plan

GRID = ((10, 100), (100, 1_000), (1_000, 10_000), (1_000, 100_000))


def plan_doc(group: str, clients: list[str], member_ids: list[str], topics: dict[str, int]) -> dict:
    """A plan in contiguous blocks per topic (range-like), members named as a snapshot saw them."""
    assignment: dict[str, dict[str, list[int]]] = {m: {} for m in member_ids}
    for topic, count in topics.items():
        for p in range(count):
            assignment[member_ids[p * len(member_ids) // count]].setdefault(topic, []).append(p)
    return {
        "format": "rebalance-plan/1",
        "group_id": group,
        "generation_id": 1,
        "strategy": "range",
        "created_at": "2026-11-21T02:00:00Z",
        "snapshot_id": "bench",
        "topics": topics,
        "members": {
            m: {"client_id": c, "group_instance_id": None, "topics": sorted(topics), "assignment": assignment[m]}
            for c, m in zip(clients, member_ids, strict=True)
        },
    }


def cluster(topics: dict[str, int]) -> ClusterMetadata:
    Topic = MetadataResponse.MetadataResponseTopic
    response = MetadataResponse(
        version=9,
        throttle_time_ms=0,
        brokers=[MetadataResponse.MetadataResponseBroker(node_id=0, host="127.0.0.1", port=9092, rack=None)],
        cluster_id="bench",
        controller_id=0,
        topics=[
            Topic(
                error_code=0,
                name=t,
                is_internal=False,
                partitions=[
                    Topic.MetadataResponsePartition(
                        error_code=0,
                        partition_index=p,
                        leader_id=0,
                        leader_epoch=0,
                        replica_nodes=[0],
                        isr_nodes=[0],
                        offline_replicas=[],
                    )
                    for p in range(n)
                ],
            )
            for t, n in topics.items()
        ],
    )
    metadata = ClusterMetadata()
    metadata.update_metadata(MetadataResponse.decode(response.encode(version=9), version=9))
    return metadata


def best(assign, metadata: ClusterMetadata, members: list, repeat: int) -> float:
    """Best wall time of `assign(metadata, members)` over `repeat` runs, in seconds."""
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        assign(metadata, members)
        times.append(time.perf_counter() - start)
    return min(times)


def reading_each_time(path: Path):
    """`assign` of a new assignor per call: the plan file is read and checked at every assignment."""
    return lambda metadata, members: PlannedAssignor(path).assign(metadata, members)


def in_process(repeat: int) -> None:
    print(
        f"{'members':>8} {'partitions':>10} {'plan doc':>10} {'file read':>10} {'file same':>10} {'range':>10} "
        f"{'roundrobin':>10} {'coop-sticky':>11}   (leader assign, best of {repeat}, ms)"
    )
    logging.getLogger("jobs.apply.planned_assignor").setLevel(logging.ERROR)
    for members, partitions in GRID:
        topics = {f"t{i:04d}": 100 for i in range(partitions // 100)}
        clients = [f"c-{i}" for i in range(members)]
        doc = plan_doc("bench", clients, [f"{c}-{uuid.uuid4()}" for c in clients], topics)
        metadata = cluster(topics)
        subscription = RangePartitionAssignor.metadata(set(topics))
        joined = []
        for c in clients:  # restarted members: new member ids, the same client ids
            m = JoinGroupResponse.JoinGroupResponseMember(
                member_id=f"{c}-{uuid.uuid4()}", group_instance_id=None, metadata=b""
            )
            m.metadata = subscription
            joined.append(m)
        with tempfile.TemporaryDirectory() as d:
            path = Path(d) / "plan.json"
            write_plan(parse_plan(doc), path)
            row = [
                best(PlannedAssignor(doc).assign, metadata, joined, repeat),
                best(reading_each_time(path), metadata, joined, repeat),
                best(PlannedAssignor(path).assign, metadata, joined, repeat),
                best(RangePartitionAssignor.assign, metadata, joined, repeat),
                best(RoundRobinPartitionAssignor.assign, metadata, joined, repeat),
            ]
        sticky = (
            f"{best(CooperativeStickyAssignor().assign, metadata, joined, 1) * 1e3:>11.1f}"
            if partitions <= 10_000
            else f"{'-':>11}"
        )
        print(f"{members:>8} {partitions:>10,} " + " ".join(f"{t * 1e3:>10.1f}" for t in row) + f" {sticky}")


def live(repeat: int) -> None:
    from jobs.demo import cluster as demo_cluster
    from jobs.demo.apply import planned_by_client, planned_group, wait_converged

    rounds: list[str] = []

    class Count(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            rounds.append(record.getMessage())

    logger = logging.getLogger("jobs.apply.planned_assignor")
    logger.setLevel(logging.INFO)
    logger.addHandler(Count())
    print("live, 3 members on 12 partitions: seconds from the (re)start until every member runs the plan")
    with demo_cluster.broker() as kafka, tempfile.TemporaryDirectory() as d:
        demo_cluster.create_topics(kafka.bootstrap, {"bench-orders": 12})
        partitions = {("bench-orders", p) for p in range(12)}
        for mode, fallback in (("eager", RangePartitionAssignor), ("cooperative", CooperativeStickyAssignor)):
            for trial in range(repeat):
                group_id = f"bench-{mode}-{trial}"
                clients = [f"{group_id}-m{i}" for i in range(3)]
                # Blocks in reverse client order (m2 gets 0-3): neither range nor cooperative-sticky gives that.
                backwards = clients[::-1]
                doc = plan_doc(group_id, backwards, [f"{c}-planned" for c in backwards], {"bench-orders": 12})
                expected = planned_by_client(parse_plan(doc))
                path = Path(d) / f"{group_id}.json"
                with planned_group(kafka.bootstrap, group_id, path, fallback) as group:
                    for c in clients:  # first under the fallback (no plan file yet), as the group ran before
                        group.start(c, ["bench-orders"])
                    wait_converged(group, partitions)
                    write_plan(parse_plan(doc), path)
                    rounds.clear()
                    start = time.monotonic()
                    group.stop(*clients)
                    for c in clients:
                        group.start(c, ["bench-orders"])
                    wait_converged(group, partitions, expected)
                    served = sum("serving plan" in r for r in rounds)
                    print(
                        f"  {mode:<12} whole-group restart: {time.monotonic() - start:5.2f} s; leader rounds "
                        f"{len(rounds) - served} fallback, {served} plan"
                    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--live", action="store_true", help="also measure convergence on an embedded broker")
    args = parser.parse_args()
    in_process(args.repeat)
    if args.live:
        live(args.repeat)


if __name__ == "__main__":
    main()

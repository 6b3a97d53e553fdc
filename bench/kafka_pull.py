"""Benchmark the Kafka source against the embedded broker: pull 50 consumer groups, sample 100,000 records.

The 50 groups are mostly committed-offset-only groups (a consumer commits offsets for every partition, then
closes: the group is Empty with offsets and lag, as most groups of a real cluster are between runs) plus a
handful of live groups with real members, one per assignor (range, roundrobin, sticky, cooperative-sticky), so
member metadata and assignment decoding is measured too. Live groups get a bounded settle wait; if they do not
settle in time the pull is still measured and the table says how many members it saw.

Run: .venv/bin/python bench/kafka_pull.py [--groups 50] [--live 4] [--records 100000] [--repeat 3]
Prints wall-clock figures and peak RSS; not a test (no timed assertions). Starts one noida-db broker on a free
127.0.0.1 port and stops it by PID on every exit path (including SIGTERM).
"""

from __future__ import annotations

import argparse
import contextlib
import resource
import signal
import statistics
import time
from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar

from jobs.demo import cluster as demo_cluster
from jobs.io.kafka_settings import KafkaSettings
from jobs.io.kafka_source import pull_snapshots, sample_keys

TOPIC = "events"
PREFIX = "bench-"
STRATEGIES: tuple[demo_cluster.Strategy, ...] = ("range", "roundrobin", "sticky", "cooperative-sticky")
T = TypeVar("T")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--groups", type=int, default=50, help="consumer groups in all")
    parser.add_argument("--live", type=int, default=4, help="of which live groups with real members")
    parser.add_argument("--members", type=int, default=2, help="members per live group")
    parser.add_argument("--records", type=int, default=100_000, help="records produced, then sampled")
    parser.add_argument("--partitions", type=int, default=24)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--settle-timeout", type=float, default=60.0, help="seconds the live groups may take")
    args = parser.parse_args()
    if not 0 <= args.live <= args.groups:
        parser.error("--live must be between 0 and --groups")
    signal.signal(signal.SIGTERM, _exit_on_sigterm)  # so the broker is still stopped by PID when killed

    started = time.perf_counter()
    with demo_cluster.broker() as broker:
        topics = {TOPIC: args.partitions}
        demo_cluster.create_topics(broker.bootstrap, topics)
        ends = demo_cluster.produce(broker.bootstrap, topics, args.records).end_offsets()
        produced_s = time.perf_counter() - started
        commit_only_groups(broker.bootstrap, [f"{PREFIX}offsets-{i:03d}" for i in range(args.groups - args.live)], ends)
        settings = KafkaSettings(broker.bootstrap)
        live_specs = [
            demo_cluster.DemoGroup(f"{PREFIX}live-{s}", (TOPIC,), args.members, s, commit_fraction=0.05)
            for s in (STRATEGIES * args.groups)[: args.live]
        ]
        t0 = time.perf_counter()
        with contextlib.ExitStack() as live:
            settled = start_live_groups(live, broker.bootstrap, live_specs, ends, args.settle_timeout)
            settle_s = time.perf_counter() - t0
            pulls, docs = timed(args.repeat, lambda: pull_snapshots(settings, group_pattern=f"{PREFIX}*"))
        samples, table = timed(
            args.repeat,
            lambda: sample_keys(
                settings, [TOPIC], records_per_partition=args.records, max_records=args.records, timeout_s=45.0
            ),
        )
        broker_hwm_mb = _vm_hwm_mb(broker.pid)

    print(
        f"setup: broker + {args.records:,} records produced in {produced_s:.1f} s; "
        f"{args.live} live groups {'settled' if settled else 'DID NOT settle'} in {settle_s:.1f} s"
    )
    members = sum(len(d["members"]) for d in docs)
    partitions = sum(len(d["offsets"]) for d in docs)
    states = ", ".join(f"{n} {s}" for s, n in sorted(Counter(d["state"] for d in docs).items()))
    print()
    print(f"{'pull_snapshots':<16}{'groups':>8}{'members':>9}{'partitions':>12}{'median ms':>11}{'best ms':>9}")
    print(
        f"{'':<16}{len(docs):>8}{members:>9}{partitions:>12}{statistics.median(pulls) * 1e3:>11.0f}"
        f"{min(pulls) * 1e3:>9.0f}   ({states}; {args.repeat} pulls)"
    )
    print()
    median_s = statistics.median(samples)
    print(f"{'sample_keys':<16}{'records':>8}{'partitions':>11}{'median s':>10}{'best s':>8}{'records/s':>11}")
    print(
        f"{'':<16}{table.num_rows:>8}{len(table.column('partition').unique()):>11}{median_s:>10.2f}"
        f"{min(samples):>8.2f}{table.num_rows / median_s:>11,.0f}   ({args.repeat} samples)"
    )
    print()
    print(
        f"peak RSS: bench process {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MB, "
        f"broker {broker_hwm_mb:.0f} MB; total wall {time.perf_counter() - started:.1f} s"
    )


def commit_only_groups(bootstrap: str, group_ids: Sequence[str], ends: dict[demo_cluster.TopicPartition, int]) -> None:
    """Create groups that only have committed offsets: a consumer commits for every partition, then closes.

    Each group commits a different fraction of the log so lag varies across groups. No subscription, so no
    join/sync round: a commit with generation -1 is what `kafka-consumer-groups --reset-offsets` does too.
    """
    from kafka import KafkaConsumer
    from kafka.structs import OffsetAndMetadata
    from kafka.structs import TopicPartition as KTP

    for i, group_id in enumerate(group_ids):
        fraction = (i + 1) / (len(group_ids) + 1)
        consumer = KafkaConsumer(
            bootstrap_servers=[bootstrap], group_id=group_id, client_id=f"{group_id}-setup", enable_auto_commit=False
        )
        try:
            consumer.commit({KTP(t, p): OffsetAndMetadata(int(end * fraction), "", -1) for (t, p), end in ends.items()})
        finally:
            consumer.close(autocommit=False)


def start_live_groups(
    stack: contextlib.ExitStack,
    bootstrap: str,
    specs: Sequence[demo_cluster.DemoGroup],
    ends: dict[demo_cluster.TopicPartition, int],
    settle_timeout_s: float,
) -> bool:
    """Run the live groups (demo_cluster.consumer_groups) until `stack` closes; return whether they settled.

    Not settling in time is not fatal: consumer_groups has then stopped the members, and the pull is measured
    on what the broker holds (the groups' committed offsets), which the printed member count shows.
    """
    try:
        stack.enter_context(demo_cluster.consumer_groups(bootstrap, specs, ends, settle_timeout_s=settle_timeout_s))
    except demo_cluster.DemoClusterError as exc:
        print(f"warning: {exc}")
        return False
    return True


def timed(repeat: int, fn: Callable[[], T]) -> tuple[list[float], T]:
    """Wall-clock seconds of `repeat` calls, and the last call's result."""
    seconds = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        result = fn()
        seconds.append(time.perf_counter() - t0)
    return seconds, result


def _vm_hwm_mb(pid: int) -> float:
    """Peak resident set of a live process (Linux VmHWM), in MB; NaN where /proc is not available."""
    with contextlib.suppress(OSError):
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def _exit_on_sigterm(signum: int, frame: Any) -> None:
    raise SystemExit(128 + signum)


if __name__ == "__main__":
    main()

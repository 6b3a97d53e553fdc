"""Benchmark the Kafka source against the embedded broker: pull 50 live groups, sample 100,000 records.

Run: .venv/bin/python bench/kafka_pull.py [--groups 50] [--records 100000] [--repeat 3]
Prints wall-clock figures; not a test (no timed assertions).
"""

from __future__ import annotations

import argparse
import statistics
import time

from jobs import demo_cluster
from jobs.kafka_settings import KafkaSettings
from jobs.kafka_source import pull_snapshots, sample_keys


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--groups", type=int, default=50)
    parser.add_argument("--records", type=int, default=100_000)
    parser.add_argument("--partitions", type=int, default=24)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()

    groups = [demo_cluster.DemoGroup(f"bench-{i:03d}", ("events",), members=1,
                                     strategy=("range", "roundrobin", "sticky", "cooperative-sticky")[i % 4],
                                     client="librdkafka" if i % 2 else "kafka-python",
                                     commit_fraction=0.01)  # consume little: the figure is the pull
              for i in range(args.groups)]
    started = time.perf_counter()
    with demo_cluster.running(topics={"events": args.partitions}, records_per_topic=args.records,
                              groups=groups, settle_timeout_s=600) as cluster:
        setup_s = time.perf_counter() - started
        settings = KafkaSettings(cluster.bootstrap)
        pulls = []
        for _ in range(args.repeat):
            t0 = time.perf_counter()
            docs = pull_snapshots(settings, group_pattern="bench-*")
            pulls.append(time.perf_counter() - t0)
        samples = []
        for _ in range(args.repeat):
            t0 = time.perf_counter()
            table = sample_keys(settings, ["events"], records_per_partition=args.records, timeout_s=600)
            samples.append(time.perf_counter() - t0)
        print(f"setup (broker, {args.records} records produced, {args.groups} groups settled): {setup_s:.1f} s")
        print(f"pull_snapshots: {len(docs)} groups, {sum(len(d['offsets']) for d in docs)} partition offsets: "
              f"median {statistics.median(pulls):.3f} s, min {min(pulls):.3f} s over {args.repeat} runs")
        print(f"sample_keys: {table.num_rows} records from {args.partitions} partitions: "
              f"median {statistics.median(samples):.3f} s, min {min(samples):.3f} s "
              f"({table.num_rows / statistics.median(samples):,.0f} records/s)")


if __name__ == "__main__":
    main()

"""Options of the key-skew job and their command-line form, kept free of Spark so `rebalance` starts fast."""

from __future__ import annotations

import argparse
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from planner.errors import InputError
from planner.partitioners import PARTITIONERS

JAVA_PARTITIONER = "murmur2"


@dataclass(frozen=True)
class SkewOptions:
    """What to measure; every field has a default so the nightly run needs none."""

    partitions: Mapping[str, int] | None = None  # topic -> current count; None: the run's topic_partitions
    partitioner: str = JAVA_PARTITIONER  # default for every topic
    partitioners: Mapping[str, str] = field(default_factory=dict)  # per-topic overrides
    what_if: tuple[int, ...] = ()
    top_keys: int = 10
    input: str | None = None  # Parquet or Delta path; None: the lake's key_samples
    columns: Mapping[str, str] = field(default_factory=dict)  # standard column -> input column
    sample_id: str | None = None  # with input None: this sample set instead of the latest one
    java_threshold: float = 0.99  # murmur2 must explain this share of observed records to be Java-compatible


def parse_counts(text: str, what: str = "--partitions") -> dict[str, int]:
    """'orders=12,refunds=4' -> {'orders': 12, 'refunds': 4}; `what` names the option in errors."""
    counts = {}
    for item in filter(None, (s.strip() for s in text.split(","))):
        topic, sep, n = item.rpartition("=")
        if not sep or not topic or not n.strip().isdigit():
            raise InputError(f"{what}: expected TOPIC=N with N a whole number, got {item!r}")
        counts[topic.strip()] = int(n)
    return counts


def parse_what_if(text: str) -> tuple[int, ...]:
    """'24,36,48' or a range 'A-B' / 'A-B:STEP' (inclusive), mixed freely: the sorted distinct counts."""
    counts: set[int] = set()
    for item in filter(None, (s.strip() for s in text.split(","))):
        span, _, step = item.partition(":")
        low, sep, high = span.partition("-")
        try:
            if sep:
                counts.update(range(int(low), int(high) + 1, int(step or 1)))
            else:
                counts.add(int(span))
        except ValueError:
            raise InputError(f"--what-if: expected N, A-B or A-B:STEP, got {item!r}") from None
    return tuple(sorted(counts))


def parse_partitioners(text: str) -> tuple[str, dict[str, str]]:
    """'NAME' and/or 'TOPIC=NAME' items -> (default partitioner, per-topic partitioners)."""
    default, per_topic = JAVA_PARTITIONER, {}
    for item in filter(None, (s.strip() for s in text.split(","))):
        topic, sep, name = item.rpartition("=")
        if sep:
            per_topic[topic.strip()] = name.strip()
        else:
            default = name
    return default, per_topic


def format_summary(table: Any) -> str:
    """The summary as an aligned text table, one line per topic and candidate count."""
    header = [
        "topic",
        "partitioner",
        "count",
        "now",
        "max/mean",
        "cv",
        "gini",
        "keys moved",
        "traffic moved",
        "best",
        "fingerprint",
        "error",
    ]
    lines = [header]
    for r in table.to_pylist():
        lines.append(
            [
                r["topic"],
                r["partitioner"],
                str(r["partition_count"]),
                "*" if r["current"] else "",
                _fmt(r["max_mean"]),
                _fmt(r["cv"]),
                _fmt(r["gini"]),
                _pct(r["keys_remapped_share"]),
                _pct(r["traffic_remapped_share"]),
                "*" if r["recommended"] else "",
                "" if r["fingerprint"] is None else f"{r['fingerprint']} {_pct(r['fingerprint_share'])}",
                r["error"] or "",
            ]
        )
    widths = [max(len(line[i]) for line in lines) for i in range(len(header))]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(line, widths, strict=True)).rstrip() for line in lines)


def _fmt(x: float | None) -> str:
    return "" if x is None else f"{x:.3f}"


def _pct(x: float | None) -> str:
    return "" if x is None else f"{100 * x:.1f}%"


def options_from_args(args: argparse.Namespace) -> SkewOptions:
    """SkewOptions from the `rebalance skew` arguments (also used by `main`)."""
    default, per_topic = parse_partitioners(args.partitioner or "")
    columns = dict(parse_pair(c) for c in args.column or [])
    return SkewOptions(
        partitions=parse_counts(args.partitions) if args.partitions else None,
        partitioner=default,
        partitioners=per_topic,
        what_if=parse_what_if(args.what_if) if args.what_if else (),
        top_keys=args.top_keys,
        input=args.input,
        columns=columns,
        sample_id=args.sample_id,
    )


def parse_pair(text: str) -> tuple[str, str]:
    """'NAME=SOURCE' -> (NAME, SOURCE)."""
    name, sep, source = text.partition("=")
    if not sep or not name or not source:
        raise InputError(f"--column: expected NAME=SOURCE, got {text!r}")
    return name.strip(), source.strip()


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The job's options, shared by `rebalance skew` and `spark-submit jobs/steps/skew.py`."""
    parser.add_argument(
        "--input", help="Parquet file/directory or Delta table of samples (default: the lake's latest key_samples set)"
    )
    parser.add_argument(
        "--partitions",
        help="current partition counts, TOPIC=N[,TOPIC=N...] (default: the run's snapshot in topic_partitions)",
    )
    parser.add_argument(
        "--partitioner",
        help=f"NAME for every topic and/or TOPIC=NAME items, comma-separated "
        f"(default murmur2); known: {', '.join(PARTITIONERS)}",
    )
    parser.add_argument("--what-if", help="candidate partition counts: 24,36,48 or 12-48:12")
    parser.add_argument(
        "--column",
        action="append",
        metavar="NAME=SOURCE",
        help="read standard column NAME (topic, key, weight, bytes, partition) from SOURCE",
    )
    parser.add_argument("--top-keys", type=int, default=10, help="hot keys kept per topic and count")
    parser.add_argument("--sample-id", help="with no --input: the key_samples set to use")
    parser.add_argument("--run-id", help="run id the rows are stored under (default: skew-<UTC time>)")

"""`rebalance skew`: the command-line form of the key-skew step's options (`jobs.steps.skew.SkewOptions`) and its
summary as text. Spark loads only when a command runs: every command's parser is built at start, this one's too."""

from __future__ import annotations

import argparse
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from planner.errors import InputError
from planner.partitioners import PARTITIONERS

if TYPE_CHECKING:
    from jobs.steps.skew import SkewOptions


def parse_counts(text: str, what: str = "--partitions") -> dict[str, int]:
    """'orders=12,refunds=4' -> {'orders': 12, 'refunds': 4}; `what` names the option in errors."""
    counts = {}
    for item in filter(None, (s.strip() for s in text.split(","))):
        topic, sep, n = item.rpartition("=")
        if not sep or not topic or not n.strip().isdigit():
            raise InputError(f"{what}: expected TOPIC=N with N a whole number, got {item!r}")
        counts[topic.strip()] = int(n)
    return counts


def parse_partitioners(text: str) -> tuple[str, dict[str, str]]:
    """'NAME' and/or 'TOPIC=NAME' items -> (default partitioner, per-topic partitioners)."""
    from jobs.steps.skew import JAVA_PARTITIONER

    default, per_topic = JAVA_PARTITIONER, {}
    for item in filter(None, (s.strip() for s in text.split(","))):
        topic, sep, name = item.rpartition("=")
        if sep:
            per_topic[topic.strip()] = name.strip()
        else:
            default = name
    return default, per_topic


def format_summary(rows: Iterable[Mapping[str, Any]]) -> str:
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
    for r in rows:
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
    """SkewOptions from the `rebalance skew` arguments."""
    from jobs.steps.skew import SkewOptions, parse_what_if

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
    """The options of `rebalance skew`."""
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

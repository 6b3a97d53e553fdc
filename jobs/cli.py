"""The `rebalance` command line: every pipeline step runs here without Airflow.

Each sub-command is a pair: `_add_<name>(sub)` declares its arguments, `_<name>(args)` runs it and returns
an exit code. Heavy imports (Spark, Airflow, Kafka) stay inside the commands so `rebalance hash` starts fast.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence


def _add_assign(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("assign", help="assign a group's partitions with a Kafka assignor; prints JSON")
    p.add_argument("--strategy", default="range",
                   help="range, roundrobin, sticky, cooperative-sticky, or package.module:Class")
    p.add_argument("snapshot", help="group in the compact assignor form or the snapshot-file form (JSON)")
    p.set_defaults(func=_assign)


def _assign(args: argparse.Namespace) -> int:
    from planner import assign

    with open(args.snapshot, encoding="utf-8") as f:
        group = json.load(f)
    result = assign(args.strategy, group)
    json.dump(result.to_json(), sys.stdout)
    sys.stdout.write("\n")
    return 0


def _add_hash(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("hash", help="print each key's hash and partition as a producer's partitioner computes them")
    p.add_argument("--partitions", type=int, required=True, help="partition count of the topic")
    p.add_argument("--partitioner", default="murmur2",
                   help="murmur2 (Java default), murmur2_random, consistent, consistent_random (librdkafka "
                        "default), fnv1a, fnv1a_random, sarama, sarama_reference, random")
    p.add_argument("--hex", action="store_true", help="keys are hex-encoded bytes, not UTF-8 text")
    p.add_argument("keys", nargs="+", metavar="KEY")
    p.set_defaults(func=_hash)


def _hash(args: argparse.Namespace) -> int:
    from planner.hashing import MURMUR2, murmur2
    from planner.partitioners import get_partitioner

    try:
        partitioner = get_partitioner(args.partitioner)
        keys = [bytes.fromhex(k) if args.hex else k.encode("utf-8") for k in args.keys]
        for text, key in zip(args.keys, keys, strict=True):
            # murmur2 prints as the signed Java int Utils.murmur2 returns; the others as unsigned 32-bit
            h = murmur2(key) if partitioner.word_hash is MURMUR2 else partitioner.hash(key)
            print(f"{text}\t{h}\t{partitioner.partition(key, args.partitions)}")
    except ValueError as exc:
        print(f"rebalance hash: error: {exc}", file=sys.stderr)
        return 2
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="rebalance", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    for add in (_add_assign, _add_hash):
        add(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return int(args.func(args) or 0)


if __name__ == "__main__":
    sys.exit(main())

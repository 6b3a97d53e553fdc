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


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="rebalance", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    for add in (_add_assign,):
        add(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return int(args.func(args) or 0)


if __name__ == "__main__":
    sys.exit(main())

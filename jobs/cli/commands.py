"""The `rebalance` command line: every pipeline step runs here without Airflow.

Each sub-command is a pair: `_add_<name>(sub)` declares its arguments, `_<name>(args)` runs it and returns
an exit code. Heavy imports (Spark, Airflow, Kafka) stay inside the commands so `rebalance hash` starts fast.
Errors: every command raises `planner.errors.RebalanceError` for bad input or a failing outside system; `main`
catches it once and exits 2 with its message (a traceback reaching a user is a bug).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING

from planner.errors import InputError, RebalanceError
from schemas.status import GenerationStatus

if TYPE_CHECKING:
    from jobs.io.lake import Lake


def _add_assign(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("assign", help="assign a group's partitions with a Kafka assignor; prints JSON")
    p.add_argument(
        "--strategy",
        default="range",
        help="range, roundrobin, sticky, cooperative-sticky, uniform, server-range, balanced-load, "
        "cooperative-balanced-load, or package.module:Class",
    )
    p.add_argument(
        "--compact", action="store_true", help="per member and topic, partition lists: {member: {topic: [p, ...]}}"
    )
    p.add_argument("snapshot", help="group in the compact assignor form or the snapshot-file form (JSON)")
    p.set_defaults(func=_assign)


def _assign(args: argparse.Namespace) -> int:
    """Print the assignment, target, revocations and timing; a file of several groups prints one line each.

    Every group is read and checked by the one rule set (`schemas.rules`, limits first) before anything is
    assigned or printed: a bad file prints nothing but the error.
    """
    from planner import assign
    from planner.assignment import assign_arrays, result_of, write_json
    from schemas.plain_groups import read_plain_groups
    from schemas.reader import read_json_documents
    from schemas.rules import Limits, check_group

    data = _read_bytes(args.snapshot)
    # A plain file (one group or an array of them, lists in the reader's shape, nothing the rules refuse) is read
    # and parsed in bulk; anything else, and every error, takes the general path below.
    try:
        plain = read_plain_groups(data, args.snapshot, Limits.from_env())
    except InputError:  # a bad REBALANCE_MAX_* variable: named below, where the general path reads it
        plain = None
    if plain is not None:
        for spec, group_id in plain:
            result = result_of(assign_arrays(args.strategy, spec))
            write_json(result, sys.stdout, compact=args.compact, group_id=group_id if len(plain) > 1 else None)
        return 0
    documents = read_json_documents(data, args.snapshot)
    limits = Limits.from_env()
    groups = []
    for document in documents:
        try:
            group = document.value()
            check_group(group, limits)
        except InputError as e:  # named as `run` names it: the file, and the line or element when there are several
            raise InputError(str(e) if str(e).startswith(document.where) else f"{document.where}: {e}") from None
        groups.append(group)
    for group in groups:
        result = assign(args.strategy, group)
        group_id = group.get("group_id") if len(groups) > 1 else None
        write_json(result, sys.stdout, compact=args.compact, group_id=group_id)
    return 0


def _read_bytes(path: str) -> bytes:
    """A file's bytes, or an InputError naming the file and what is wrong with it (never waiting on a FIFO)."""
    from pathlib import Path

    from jobs.io.input_files import read_input

    return read_input(Path(path))


def _add_lake(p: argparse.ArgumentParser) -> None:
    """The `--lake` option every command that reads or writes the lake takes."""
    p.add_argument("--lake", help="lake root: a directory or s3://bucket/prefix (default $REBALANCE_LAKE or ./lake)")


def _add_snapshot(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("snapshot", help="pull consumer-group snapshots (and key samples) from a live Kafka cluster")
    p.add_argument("--bootstrap-servers", help="HOST:PORT[,...]; default REBALANCE_KAFKA_BOOTSTRAP_SERVERS")
    p.add_argument("--group", default="*", help="glob of group ids; '*' (default) = every group with members")
    p.add_argument("--sample-topics", default="", help="comma-separated topics to sample keys from")
    p.add_argument("--sample-records", type=int, default=1000, help="last N records per partition to sample")
    p.add_argument(
        "--output",
        required=True,
        help="snapshot file (JSON array; JSON lines if it ends in .jsonl); "
        "samples go next to it as <stem>.key_samples.parquet",
    )
    p.set_defaults(func=_snapshot)


def _snapshot(args: argparse.Namespace) -> int:
    """Pull the groups (and key samples) and write both files, or nothing: any failure exits 2 naming its cause.

    Keys are sampled before the groups are pulled, and a sample that ends short of a partition's end offset (a
    broker lost while sampling) fails; the samples file is removed again if the snapshot file cannot be written.
    """
    from pathlib import Path

    from jobs.io.kafka_settings import KafkaSettingsError, from_env
    from jobs.io.kafka_source import pull_snapshots, sample_keys, write_key_samples, write_snapshots
    from planner.errors import SourceError

    settings = from_env(bootstrap_servers=args.bootstrap_servers)
    if settings is None:
        raise KafkaSettingsError(
            "no Kafka configured: pass --bootstrap-servers or set "
            "REBALANCE_KAFKA_BOOTSTRAP_SERVERS / REBALANCE_KAFKA_CONN_ID"
        )
    topics = [t.strip() for t in args.sample_topics.split(",") if t.strip()]
    samples = sample_keys(settings, topics, args.sample_records) if topics else None
    documents = pull_snapshots(settings, group_pattern=args.group)
    output = Path(args.output)
    samples_file = output.with_name(f"{output.stem}.key_samples.parquet")
    try:
        if samples is not None:
            write_key_samples(samples, samples_file)
        write_snapshots(documents, output)
    except OSError as e:
        if samples is not None:
            samples_file.unlink(missing_ok=True)
        raise SourceError(f"writing {output} failed, nothing written: {e.strerror or e}") from None
    print(
        f"{len(documents)} group snapshots -> {output}"
        + (f"; {samples.num_rows} key samples" if samples is not None else "")
    )
    return 0


def _add_run(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("run", help="run the whole pipeline once without Airflow: ingest, skew, plan, gate, publish")
    p.add_argument("--snapshots", help="snapshot files: a path, directory or glob (default $REBALANCE_SNAPSHOTS)")
    p.add_argument("--strategies", help="assignors to evaluate, comma-separated (default $REBALANCE_STRATEGIES)")
    _add_lake(p)
    p.add_argument("--run-id", help="run id (default manual__<now>); re-using one rewrites the same rows")
    p.set_defaults(func=_run)


def _run(args: argparse.Namespace) -> int:
    """Each step prints what it did as it ends (the publish table, the report pages, ...); then a one-line summary
    and the time each step took."""
    from jobs import pipeline
    from jobs.config import Config

    config = Config.from_env(snapshots=args.snapshots, strategies=args.strategies, lake=args.lake)
    result = pipeline.run(config, args.run_id)
    groups, quarantined = len(result.steps["ingest"].groups), len(result.steps["ingest"].quarantined)
    print(f"run {result.run_id}: {groups} groups ingested, {quarantined} inputs quarantined")
    print("steps: " + ", ".join(f"{name} {seconds:.1f} s" for name, seconds in result.seconds.items()))
    return 1 if any(r["status"] == GenerationStatus.REJECTED for r in result.report) else 0


def _add_sql(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("sql", help="run Spark SQL over the lake's tables (views named after the tables)")
    p.add_argument(
        "query",
        nargs="+",
        help='e.g. "SELECT group_id, generation_id, status FROM generations"; several run in turn in one Spark '
        "session (one start-up), each result printed when it has run, a blank line between them",
    )
    _add_lake(p)
    p.add_argument("--limit", type=int, default=100, help="rows to print of each (default 100)")
    p.set_defaults(func=_sql)


def _sql(args: argparse.Namespace) -> int:
    from jobs.cli.history import queries
    from jobs.config import Config
    from jobs.context import RunContext

    ctx = RunContext.create(Config.from_env(lake=args.lake), trigger="sql")
    for number, text in enumerate(queries(ctx.spark, ctx.lake, args.query, args.limit)):
        print(f"\n{text}" if number else text, flush=True)
    return 0


def _add_maintain(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    from jobs.config import BULKY_RETENTION_DAYS, RETENTION_DAYS

    p = sub.add_parser(
        "maintain", help="compact, checkpoint and VACUUM every lake table; delete bulky rows of old runs"
    )
    _add_lake(p)
    p.add_argument(
        "--retention-days",
        default=str(RETENTION_DAYS),
        metavar="N",
        help=f"files older versions need are kept this long: time travel reaches this far back (default "
        f"{RETENTION_DAYS}); below the tables' own retention (7 days) only files a commit removed are deleted",
    )
    p.add_argument(
        "--bulky-retention-days",
        default=str(BULKY_RETENTION_DAYS),
        metavar="M",
        help=f"rows of plans, loads, key samples and the like older than this go, except each group's newest and "
        f"newest approved generation (default {BULKY_RETENTION_DAYS})",
    )
    p.add_argument("--dry-run", action="store_true", help="change nothing; print what would be deleted")
    p.set_defaults(func=_maintain)


def _maintain(args: argparse.Namespace) -> int:
    """Print one line per table and a total; runs under the lake lock, so no run commits while it works."""
    from jobs.config import Config
    from jobs.context import RunContext
    from jobs.io.lake import Lake
    from jobs.steps import maintain

    retention = _days(args.retention_days, "--retention-days")
    bulky = _days(args.bulky_retention_days, "--bulky-retention-days")
    config = Config.from_env(lake=args.lake)
    lake = Lake(config.lake)
    if not lake.exists("generations"):
        raise InputError(f"--lake: no lake at {lake.root} (nothing to maintain)")
    ctx = RunContext.create(config, trigger="maintain")
    result = maintain.run(ctx, retention_days=retention, bulky_retention_days=bulky, dry_run=args.dry_run)
    print(f"lake {ctx.lake.root}: retention {retention} days, bulky rows {bulky} days")
    print(result.text)
    return 0


def _days(text: str, option: str) -> int:
    """A whole number of days (0 or more) given on the command line, or an InputError naming the option."""
    from jobs.steps.maintain import MAX_DAYS

    value = text.strip()
    if not (value.isascii() and value.isdigit()) or int(value) > MAX_DAYS:
        raise InputError(f"{option}: expected a whole number of days from 0 to {MAX_DAYS}, got {text!r}")
    return int(value)


def _add_demo(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("demo", help="run the nightly DAG once (`airflow dags test`) against an embedded Kafka cluster")
    _add_lake(p)
    p.add_argument(
        "--files", action="store_true", help="plan the bundled snapshot files instead of a live embedded Kafka cluster"
    )
    p.set_defaults(func=_demo)


def _demo(args: argparse.Namespace) -> int:
    from jobs.config import Config
    from jobs.demo.run import run_demo

    return run_demo(Config.from_env(lake=args.lake), live=not args.files)


def _add_hash(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("hash", help="print each key's hash and partition as a producer's partitioner computes them")
    p.add_argument("--partitions", type=int, required=True, help="partition count of the topic")
    p.add_argument(
        "--partitioner",
        default="murmur2",
        help="murmur2 (Java default), murmur2_random, consistent, consistent_random (librdkafka "
        "default), fnv1a, fnv1a_random, sarama, sarama_reference, random",
    )
    p.add_argument("--hex", action="store_true", help="keys are hex-encoded bytes, not UTF-8 text")
    p.add_argument("keys", nargs="+", metavar="KEY")
    p.set_defaults(func=_hash)


def _hash(args: argparse.Namespace) -> int:
    from planner.hashing import MURMUR2, murmur2
    from planner.partitioners import get_partitioner

    try:
        partitioner = get_partitioner(args.partitioner)
        keys = [bytes.fromhex(k) if args.hex else k.encode("utf-8") for k in args.keys]
        rows = []
        for text, key in zip(args.keys, keys, strict=True):
            # murmur2 prints as the signed Java int Utils.murmur2 returns; the others as unsigned 32-bit
            h = murmur2(key) if partitioner.word_hash is MURMUR2 else partitioner.hash(key)
            rows.append(f"{text}\t{h}\t{partitioner.partition(key, args.partitions)}")
    except ValueError as exc:
        raise InputError(str(exc)) from None
    print("\n".join(rows))
    return 0


def _add_skew(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    from jobs.cli.skew_options import add_arguments

    p = sub.add_parser("skew", help="measure key skew per partition, today and at what-if partition counts")
    add_arguments(p)
    _add_lake(p)
    p.set_defaults(func=_skew)


def _skew(args: argparse.Namespace) -> int:
    from jobs.cli.skew_options import format_summary, options_from_args
    from jobs.config import Config
    from jobs.context import RunContext
    from jobs.steps.skew import run

    options = options_from_args(args)
    ctx = RunContext.create(Config.from_env(lake=args.lake), args.run_id, trigger="skew")
    summary = run(ctx, options)
    print(f"run {ctx.run_id}")
    print(format_summary(summary.rows))
    return 0


def _add_what_if(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("what-if", help="plan a group's latest snapshot with more partitions or other members")
    p.add_argument("--group", required=True, help="consumer group id")
    p.add_argument("--partitions", default="", help="new partition counts: TOPIC=N[,TOPIC=N...]")
    p.add_argument("--add-members", type=int, default=0, help="members joining (subscribed to all its topics)")
    p.add_argument("--remove-members", default="", help="member ids leaving, comma-separated")
    p.add_argument("--strategies", help="assignors to evaluate, comma-separated (default $REBALANCE_STRATEGIES)")
    p.add_argument("--json", action="store_true", help="print the answer as one JSON object, for scripts")
    _add_lake(p)
    p.set_defaults(func=_what_if)


def _what_if(args: argparse.Namespace) -> int:
    from jobs import pipeline
    from jobs.cli.skew_options import parse_counts

    params = {
        "group": args.group,
        "partitions": parse_counts(args.partitions, "--partitions"),
        "add_members": args.add_members,
        "remove_members": [m for m in args.remove_members.split(",") if m],
    }
    ctx = pipeline.warm_up(
        pipeline.config_from_params({"strategies": args.strategies, "lake": args.lake}), one_group=True
    )
    results = {}
    try:
        if not ctx.embedded:
            _ = ctx.spark  # a cluster's or a Connect server's executors are checked before the scenario is written
        with contextlib.redirect_stdout(sys.stderr):  # the steps' progress lines: stdout carries the answer alone
            for name in pipeline.WHAT_IF:
                results[name] = pipeline.step(ctx, name, params)
                if name == "gate":
                    ctx.stop_gx_worker()  # its exit overlaps the steps after
    except BaseException:
        ctx.settle()  # the JVM's start-up lines first: the error is the last line
        raise
    finally:
        ctx.stop_gx_worker()
    from jobs.what_if_answer import answer, as_json, format_answer  # after warm_up: the worker starts sooner

    report, pages = results["publish"].rows, results["report"].by_group("page")
    for published in report:
        found = answer(ctx.lake, published, pages.get(published["group_id"]))
        print(as_json(found) if args.json else format_answer(found))
    return 1 if any(r["status"] == GenerationStatus.REJECTED for r in report) else 0


def _add_report(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("report", help="write the HTML report pages of the lake's generations (offline, plotly)")
    p.add_argument("--group", help="only this group's pages")
    p.add_argument("--generation", type=int, help="only this generation of --group")
    p.add_argument("--output", required=True, help="directory to write index.html and <group>/generation-<N>.html")
    _add_lake(p)
    p.set_defaults(func=_report)


def _report(args: argparse.Namespace) -> int:
    from jobs.config import Config
    from jobs.io.lake import Lake
    from jobs.report import write_reports
    from jobs.report.arrow_batch import projected, streamed

    if args.generation is not None and args.group is None:
        raise InputError("--generation needs --group")
    lake = Lake(Config.from_env(lake=args.lake).lake)
    read, scan = projected(lake.read_arrow), streamed(lake.read_batches)
    written = write_reports(read, args.output, scan=scan, group=args.group, generation=args.generation)
    print(f"{len(written)} pages written; open {written[-1]}")
    return 0


def _add_review(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("review", help="approve or reject a gated generation (one that awaits a person's review)")
    p.add_argument("--group", required=True, help="consumer group id")
    p.add_argument("--generation", type=int, required=True, help="generation of the group")
    decision = p.add_mutually_exclusive_group(required=True)
    decision.add_argument("--approve", action="store_const", const="approve", dest="decision")
    decision.add_argument("--reject", action="store_const", const="reject", dest="decision")
    p.add_argument("--comment", default="", help="why; recorded with the decision")
    p.add_argument("--reviewer", help="who decides (default: the login name)")
    _add_lake(p)
    p.set_defaults(func=_review)


def _review(args: argparse.Namespace) -> int:
    import getpass

    from jobs.config import Config
    from jobs.context import RunContext
    from jobs.steps import review

    ctx = RunContext.create(Config.from_env(lake=args.lake), trigger="review")
    result = review.record(
        ctx,
        args.decision,
        args.reviewer or getpass.getuser(),
        args.comment,
        group=args.group,
        generation=args.generation,
    )
    print(result.text)
    return 0


def _add_export(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("export", help="write a group's approved plan as a plan file for PlannedAssignor and others")
    p.add_argument("--group", required=True, help="consumer group id")
    p.add_argument("--generation", type=int, help="generation to export (default: the group's latest approved)")
    p.add_argument("--output", help="plan file, replaced atomically (default: print the plan JSON)")
    _add_lake(p)
    p.set_defaults(func=_export)


def _export(args: argparse.Namespace) -> int:
    import json

    from jobs.apply.plan_file import write_plan
    from jobs.config import Config
    from jobs.context import RunContext
    from jobs.tables import export

    lake = RunContext.create(Config.from_env(lake=args.lake), trigger="export").lake
    plan = export.plan_of(lake, export.select_generation(lake, args.group, args.generation))
    if not args.output:
        print(json.dumps(plan.to_json(), indent=2))
        return 0
    try:
        write_plan(plan, args.output)
    except OSError as e:
        raise InputError(f"--output {args.output}: {e.strerror or e}") from None
    print(
        f"group {plan.group_id} generation {plan.generation_id} ({plan.strategy}, {len(plan.members)} members, "
        f"{len(plan.owners())} partitions) -> {args.output}"
    )
    return 0


def _add_verify(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("verify", help="compare a group's latest snapshot with its approved plan: applied or drifted")
    p.add_argument("--group", required=True, help="consumer group id")
    p.add_argument("--snapshot", help="snapshot id (default: the group's latest snapshot in the lake)")
    _add_lake(p)
    p.set_defaults(func=_verify)


def _verify(args: argparse.Namespace) -> int:
    """Print the verdict; exit 0 when applied, 1 when drifted."""
    from jobs.config import Config
    from jobs.context import RunContext
    from jobs.steps import verify

    ctx = RunContext.create(Config.from_env(lake=args.lake), trigger="verify")
    result = verify.run(ctx, group=args.group, snapshot_id=args.snapshot)
    print(result.text)
    (row,) = result.rows
    return 0 if row["verification"] == "applied" else 1


def _add_migration(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("migration", help="what moving a classic group to group.protocol=consumer would change")
    p.add_argument("--group", required=True, help="consumer group id")
    p.add_argument("--generation", type=int, help="generation id (default: the group's latest)")
    _add_lake(p)
    p.set_defaults(func=_migration)


def _migration(args: argparse.Namespace) -> int:
    from jobs.cli.migration import format_readiness, latest

    lake = _planned_lake(args.lake, "migration_readiness")
    print(format_readiness(latest(lake, args.group, args.generation)))
    return 0


def _add_diff(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("diff", help="a candidate against today's assignment, member by member")
    p.add_argument("--group", required=True, help="consumer group id")
    p.add_argument("--generation", type=int, help="generation id (default: the group's latest)")
    p.add_argument("--strategy", help="candidate strategy (default: the generation's chosen one)")
    _add_lake(p)
    p.set_defaults(func=_diff)


def _diff(args: argparse.Namespace) -> int:
    from jobs.cli.diff import format_diff, stored

    lake = _planned_lake(args.lake, "plan_diffs")
    print(format_diff(stored(lake, args.group, args.generation, args.strategy)))
    return 0


def _planned_lake(root: str | None, table: str) -> Lake:
    """The lake a command reads a planning run's `table` from; one line naming the lake when no run wrote it."""
    from jobs.config import Config
    from jobs.io.lake import Lake

    lake = Lake(Config.from_env(lake=root).lake)
    if not lake.exists(table):
        raise InputError(f"--lake: no lake at {lake.root} (run the nightly pipeline, e.g. `rebalance run`, first)")
    return lake


def _add_metrics(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("metrics", help="serve the lake's Prometheus metrics over HTTP (read afresh at each scrape)")
    p.add_argument("--port", type=int, required=True, help="TCP port (0: any free one, printed)")
    p.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1: this machine only)")
    _add_lake(p)
    p.set_defaults(func=_metrics)


def _metrics(args: argparse.Namespace) -> int:
    from jobs.cli.metrics import serve
    from jobs.config import Config
    from jobs.io.lake import Lake

    return serve(Lake(Config.from_env(lake=args.lake).lake), args.host, args.port)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="rebalance", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    for add in (
        _add_assign,
        _add_snapshot,
        _add_run,
        _add_what_if,
        _add_migration,
        _add_diff,
        _add_sql,
        _add_maintain,
        _add_report,
        _add_review,
        _add_metrics,
        _add_demo,
        _add_hash,
        _add_skew,
        _add_export,
        _add_verify,
    ):
        add(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run one command; bad input or a failing outside system exits 2 with one line naming the cause.

    As the `rebalance` command (no `argv`), the process ends right after the exit handlers (see `_end_promptly`).
    """
    from jobs.terminal import SafeWriter

    if argv is None:
        _end_promptly()
    streams = sys.stdout, sys.stderr
    sys.stdout, sys.stderr = SafeWriter(sys.stdout), SafeWriter(sys.stderr)  # untrusted text prints as escapes
    try:
        args = build_parser().parse_args(argv)
        try:
            code = int(args.func(args) or 0)
        except RebalanceError as e:
            print(f"rebalance {args.command}: error: {e}", file=sys.stderr)
            code = 2
    except SystemExit as e:  # argparse's: `--help` (0) and a usage error (2, its line printed); the process's code
        _exit_code[0] = e.code if isinstance(e.code, int) else 0 if e.code is None else 1
        raise
    finally:
        sys.stdout.flush()
        sys.stdout, sys.stderr = streams
    _exit_code[0] = code
    return code


_exit_code = [1]  # what `main` returned; 1 while it has not (an uncaught exception)


def _end_promptly() -> None:
    """End the process once the exit handlers have run (logs closed, locks released, output flushed), skipping the
    interpreter's own tear-down: freeing the modules of Spark, Arrow, delta-rs and Great Expectations takes about a
    second after the command's last line, with nothing left to write. Registered first, the handler runs last."""
    import atexit

    def end() -> None:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(_exit_code[0])

    atexit.register(end)

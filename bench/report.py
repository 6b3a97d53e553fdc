"""Report benchmark: the HTML report step for 1,000 groups over a real Delta lake of synthetic rows.

Each group has --members members and two topics of --partitions partitions each, four candidate strategies
(plans, plan_metrics, gate results), committed offsets, and key-skew rows at today's count and two what-if
counts. Rows are written once with delta-rs (not timed), then `write_reports` is timed end to end, as the report
step calls it, followed by the same work split into collecting (batch by batch, reading included) and rendering.
Prints wall and CPU seconds (on a shared machine the wall time includes waiting for a core) and pages per second.
Run: `python bench/report.py [--groups N] [--generations G]`.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

from jobs.io.lake import Lake, rows_table
from jobs.report import render_generation, render_index, write_reports
from jobs.report.arrow_batch import BATCHED, projected, streamed
from jobs.report.page_content import collect_many, histories
from jobs.report.reader import indexed
from jobs.report.write import batches

STRATEGIES = ("range", "roundrobin", "sticky", "cooperative-sticky")
EXPECTATIONS = ("unique", "not_null(member)", "in_set(subscribed)", "in_set(expected)")
T0 = datetime(2026, 11, 21, 2, 0, tzinfo=UTC)


def synthetic_rows(groups: int, generations: int, members: int, partitions: int) -> dict[str, list[dict]]:
    """Rows of every table the report reads, shaped as the pipeline writes them."""
    out: dict[str, list[dict]] = {name: [] for name in ("snapshots", "partition_offsets", "generations")}
    out |= {name: [] for name in ("plans", "plan_metrics", "gate_results", "key_skew")}
    out |= {name: [] for name in ("key_skew_summary", "key_skew_hot_keys", "key_skew_fingerprint")}
    for gen in range(1, generations + 1):
        run = f"run-{gen}"
        for g in range(groups):
            group = f"group-{g:05d}"
            topics = [f"{group}.orders", f"{group}.refunds"]
            names = [f"{group}-m{i}" for i in range(members)]
            tps = [(t, p) for t in topics for p in range(partitions)]
            today = {tp: names[i % (members - 1)] for i, tp in enumerate(tps)}  # the last member owns nothing
            for m in names:
                owned = [{"topic": t, "partition": p} for (t, p), o in today.items() if o == m]
                out["snapshots"].append(
                    {"snapshot_id": run, "group_id": group, "member_id": m, "captured_at": T0, "topics": topics}
                    | {"owned": owned, "assignment": owned, "protocol": "cooperative-sticky", "state": "Stable"}
                )
            out["partition_offsets"] += [
                {"snapshot_id": run, "group_id": group, "topic": t, "partition": p, "committed": 100}
                | {"end_offset": 100 + 37 * p, "lag": 37 * p}
                for t, p in tps
            ]
            out["generations"].append(
                {"group_id": group, "generation_id": gen, "created_at": T0, "trigger": "scheduled", "run_id": run}
                | {"parameters": '{"strategies": ["range"]}', "snapshot_id": run, "chosen_strategy": STRATEGIES[3]}
                | {"status": "approved", "gate_summary": "4/4 expectations passed"}
            )
            for s, strategy in enumerate(STRATEGIES):
                for i, (t, p) in enumerate(tps):
                    member = names[(i + s) % members]
                    moved = member != today[(t, p)]
                    phase = "revoke" if moved and strategy == "cooperative-sticky" else "assign"
                    out["plans"].append(
                        {"generation_id": gen, "group_id": group, "strategy": strategy, "topic": t, "partition": p}
                        | {"member": member, "previous_member": today[(t, p)], "moved": moved, "phase": phase}
                        | {"weight": float(1 + p % 5)}
                    )
                out["plan_metrics"].append(
                    {"generation_id": gen, "group_id": group, "strategy": strategy, "members": members}
                    | {"partitions": len(tps), "count_spread": 1, "max_load": 9.0, "mean_load": 7.5}
                    | {"max_mean_load": 1.2, "partitions_moved": s + 1, "stickiness": 0.5, "chosen": s == 3}
                )
            out["gate_results"] += [
                {"generation_id": gen, "group_id": group, "suite": "plan_invariants", "expectation": e}
                | {"success": True, "observed_value": "0 unexpected rows", "details": "[]"}
                for e in EXPECTATIONS
            ]
            for t in topics:
                stamp = {"run_id": run, "computed_at": T0, "topic": t, "partitioner": "murmur2"}
                for count in (partitions, partitions * 2, partitions * 3):
                    now = count == partitions
                    out["key_skew"] += [
                        stamp
                        | {"partition_count": count, "partition": p, "current": now}
                        | {"messages": 10.0 + p % 7, "load": 10.0 + p % 7, "share": 1 / count}
                        for p in range(count)
                    ]
                    out["key_skew_summary"].append(
                        stamp
                        | {"partition_count": count, "current": now, "max_mean": 1.4, "cv": 0.2, "gini": 0.1}
                        | {"recommended": now, "fingerprint": "murmur2", "java_compatible": True}
                    )
                    out["key_skew_hot_keys"] += [
                        stamp
                        | {"partition_count": count, "rank": r, "key": f"key-{r}".encode(), "messages": 50.0}
                        | {"partition": r % count, "share": 0.01}
                        for r in range(1, 11)
                    ]
                out["key_skew_fingerprint"] += [
                    stamp
                    | {"partitioner": name, "partition_count": partitions, "observed_messages": 100.0}
                    | {"explained_messages": 100.0 if name == "murmur2" else 7.0, "share": 1.0 if k == 0 else 0.07}
                    for k, name in enumerate(("murmur2", "consistent", "fnv1a"))
                ]
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--groups", type=int, default=1000)
    parser.add_argument("--generations", type=int, default=1)
    parser.add_argument("--members", type=int, default=4)
    parser.add_argument("--partitions", type=int, default=12)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="report-bench-") as tmp:
        lake = Lake(Path(tmp) / "lake")
        lake.create_all()
        start = time.perf_counter()
        rows = synthetic_rows(args.groups, args.generations, args.members, args.partitions)
        for name, table_rows in rows.items():
            lake.append(name, rows_table(name, table_rows))
        built = time.perf_counter() - start
        sizes = ", ".join(f"{name} {len(r):,}" for name, r in rows.items())
        print(f"lake: {args.groups:,} groups x {args.generations} generation(s) built in {built:.1f} s ({sizes})")

        start, cpu = time.perf_counter(), time.process_time()
        written = write_reports(projected(lake.read_arrow), Path(tmp) / "out", scan=streamed(lake.read_batches))
        total, cpu = time.perf_counter() - start, time.process_time() - cpu
        pages = sum(p.name.startswith("generation-") for p in written)
        size = sum(p.stat().st_size for p in written) / len(written) / 1024
        print(
            f"write_reports: {total:.1f} s wall, {cpu:.1f} s CPU for {len(written):,} files "
            f"({pages:,} generation pages, {pages / total:.0f} pages/s, {size:.0f} KiB per page on average, "
            "plotly.min.js once)"
        )

        read = indexed(projected(lake.read_arrow), read_through=BATCHED)
        groups = [f"group-{g:05d}" for g in range(args.groups)]
        wanted = [(g, n) for g in groups for n in range(1, args.generations + 1)]
        start = time.perf_counter()
        parts = list(batches(read, wanted))
        reports = [r for part in parts for r in collect_many(read, part)]
        past = histories(read, groups)
        collected = time.perf_counter() - start
        start = time.perf_counter()
        html = [render_generation(r) for r in reports] + [render_index(g, past[g]) for g in groups]
        rendered = time.perf_counter() - start
        print(
            f"split: collect {collected:.1f} s ({len(parts)} batches, reading included), render {rendered:.1f} s "
            f"({1000 * collected / len(reports):.1f} / {1000 * rendered / len(html):.1f} ms per page)"
        )


if __name__ == "__main__":
    main()

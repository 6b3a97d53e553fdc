"""Key-skew job: Arrow batch functions, the Spark job against an independent count, input mapping and the CLI."""

from __future__ import annotations

import random
import statistics
from collections import Counter, defaultdict
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from jobs.cli.skew_options import parse_counts, parse_partitioners
from jobs.config import Config
from jobs.context import RunContext
from jobs.kernels.key_skew import TopicCounts, key_metrics, partial_keys, placements
from jobs.kernels.samples import SAMPLE_SCHEMA
from jobs.steps.skew import SkewOptions, counts_to_measure, parse_what_if, partition_weights, run
from planner.partitioners import PARTITIONERS, partition_key

COUNTS = {"orders": 6, "events": 4, "quiet": 3}
PARTITIONER = {"orders": "murmur2", "events": "consistent_random"}
WHAT_IF = (4, 8, 12)


def _records(seed: int = 7) -> list[dict]:
    """Skewed keys (a few hot ones), null and empty keys, weights, sizes, and the partition each was read from."""
    rng = random.Random(seed)
    rows = []
    for topic, n_records in (("orders", 3000), ("events", 2000), ("ghost", 40)):
        for _ in range(n_records):
            r = rng.random()
            key: bytes | None = f"user-{int(400 * r**3)}".encode()
            if r < 0.02:
                key = None
            elif r < 0.03:
                key = b""
            # Fractional weights, as Kafka tail samples carry; dyadic so float sums are exact in any order.
            weight = 2.625 if rng.random() < 0.1 else (0.5 if rng.random() < 0.1 else 1.0)
            observed = partition_key(PARTITIONER.get(topic, "murmur2"), key, COUNTS.get(topic, 5))
            rows.append(
                {
                    "topic": topic,
                    "key": key,
                    "weight": weight,
                    "bytes": rng.randrange(10, 500),
                    "partition": observed if observed >= 0 else rng.randrange(COUNTS.get(topic, 5)),
                }
            )
    return rows


def _expected_loads(rows: list[dict], topic: str, name: str, counts: tuple[int, ...]) -> dict[tuple[int, int], dict]:
    """Plain-Python count with planner.partitioners.partition_key: (count, partition) -> figures."""
    totals: dict[bytes | None, list[float]] = defaultdict(lambda: [0.0, 0])
    for r in rows:
        if r["topic"] == topic:
            totals[r["key"]][0] += r["weight"]
            totals[r["key"]][1] += r["bytes"]
    out = {}
    for n in counts:
        figures = {p: Counter() for p in range(n)}
        unkeyed = [0, 0]
        for key, (m, b) in totals.items():
            p = partition_key(name, key, n)
            if p < 0:
                unkeyed[0] += m
                unkeyed[1] += b
                continue
            moved = p != partition_key(name, key, counts[0])
            figures[p].update(
                messages=m, bytes=b, distinct_keys=1, remapped_keys=int(moved), remapped_messages=m * moved
            )
        for p, f in figures.items():
            out[(n, p)] = {
                k: f[k] for k in ("messages", "bytes", "distinct_keys", "remapped_keys", "remapped_messages")
            }
            out[(n, p)]["null_key_messages"] = unkeyed[0] / n
            out[(n, p)]["load"] = f["messages"] + unkeyed[0] / n
    return out


def _gini(loads: list[float]) -> float:
    """Gini as the mean absolute difference over twice the mean (independent of the job's sorted formula)."""
    n, mean = len(loads), statistics.fmean(loads)
    return sum(abs(a - b) for a in loads for b in loads) / (2 * n * n * mean)


# --- Arrow batch functions (no Spark) ---------------------------------------------------------------


@settings(max_examples=60, deadline=None)
@given(
    keys=st.lists(st.one_of(st.none(), st.binary(max_size=12)), max_size=40),
    counts=st.lists(st.integers(1, 50), min_size=1, max_size=4),
    name=st.sampled_from(sorted(PARTITIONERS)),
)
def test_placements_match_partition_key(keys, counts, name):
    got = placements(PARTITIONERS[name], pa.array(keys, pa.binary()), counts)
    expected = [[partition_key(name, k, n) for k in keys] for n in counts]
    assert got.tolist() == expected


def test_batch_functions_equal_independent_count():
    rows = [r for r in _records() if r["topic"] in PARTITIONER]
    measured = counts_to_measure(COUNTS, SkewOptions(partitioners=PARTITIONER, what_if=WHAT_IF))
    table = pa.Table.from_pylist(rows, schema=SAMPLE_SCHEMA)
    # Two map-side tasks, then everything in one reduce-side task: key sums must be exact across chunks.
    half = table.num_rows // 2
    partial = [
        *partial_keys(iter(table.slice(0, half).to_batches(max_chunksize=700)), measured),
        *partial_keys(iter(table.slice(half).to_batches(max_chunksize=700)), measured),
    ]
    metrics = pa.Table.from_batches(list(key_metrics(iter(partial), measured, top_keys=3))).to_pylist()
    for topic, name in PARTITIONER.items():
        expected = _expected_loads(rows, topic, name, measured[topic].counts)
        got = {
            (m["partition_count"], m["partition"]): m for m in metrics if m["kind"] == "load" and m["topic"] == topic
        }
        assert set(got) == set(expected)
        for cell, figures in expected.items():
            for column, value in figures.items():
                if column != "load":  # added by the Spark step
                    assert got[cell][column] == pytest.approx(value), (topic, cell, column)


# --- the Spark job ----------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def records() -> list[dict]:
    return _records()


@pytest.fixture(scope="module")
def measured(spark, records, tmp_path_factory: pytest.TempPathFactory):
    """One run of the job over a Parquet sample file, shared by the module: (summary rows, lake, options)."""
    from jobs.io.lake import Lake

    root = tmp_path_factory.mktemp("skew")
    lake = Lake(root / "lake")
    lake.create_all()
    path = root / "samples.parquet"
    pq.write_table(pa.Table.from_pylist(records, schema=SAMPLE_SCHEMA), path)
    options = SkewOptions(partitions=COUNTS, partitioners=PARTITIONER, what_if=WHAT_IF, top_keys=3, input=str(path))
    run(RunContext.create(Config(lake=str(lake.root)), "run-1", spark=spark), options)
    return lake.read_arrow("key_skew_summary", [("run_id", "=", "run-1")]).to_pylist(), lake, options


def test_key_skew_rows_equal_independent_count(measured, records):
    _, lake, _ = measured
    rows = lake.read_arrow("key_skew", [("run_id", "=", "run-1")]).to_pylist()
    for topic, name in PARTITIONER.items():
        counts = (COUNTS[topic], *[n for n in WHAT_IF if n != COUNTS[topic]])
        expected = _expected_loads(records, topic, name, counts)
        got = {(r["partition_count"], r["partition"]): r for r in rows if r["topic"] == topic}
        assert set(got) == set(expected)
        total = sum(f["load"] for (n, _), f in expected.items() if n == counts[0])
        for cell, figures in expected.items():
            assert got[cell]["partitioner"] == name
            assert got[cell]["current"] == (cell[0] == counts[0])
            assert got[cell]["share"] == pytest.approx(figures["load"] / total)
            for column, value in figures.items():
                assert got[cell][column] == pytest.approx(value), (topic, cell, column)
    assert {r["topic"] for r in rows} == set(PARTITIONER)  # quiet has no samples, ghost no partition count


def test_summary_statistics_and_recommendation(measured, records):
    summary, _, _ = measured
    for topic, name in PARTITIONER.items():
        counts = (COUNTS[topic], *[n for n in WHAT_IF if n != COUNTS[topic]])
        expected = _expected_loads(records, topic, name, counts)
        got = {r["partition_count"]: r for r in summary if r["topic"] == topic}
        assert set(got) == set(counts)
        ranking = []
        for n in counts:
            loads = [expected[(n, p)]["load"] for p in range(n)]
            keyed = [expected[(n, p)] for p in range(n)]
            distinct = sum(f["distinct_keys"] for f in keyed)
            row = got[n]
            assert row["max_mean"] == pytest.approx(max(loads) / statistics.fmean(loads))
            assert row["cv"] == pytest.approx(statistics.pstdev(loads) / statistics.fmean(loads))
            assert row["gini"] == pytest.approx(_gini(loads))
            assert row["distinct_keys"] == distinct
            assert row["keys_remapped"] == sum(f["remapped_keys"] for f in keyed)
            assert row["keys_remapped_share"] == pytest.approx(row["keys_remapped"] / distinct)
            assert row["traffic_remapped_share"] == pytest.approx(
                sum(f["remapped_messages"] for f in keyed) / sum(f["messages"] for f in keyed)
            )
            assert row["current"] == (n == counts[0]) and row["error"] is None
            ranking.append((max(loads) / statistics.fmean(loads), row["keys_remapped"], n))
        recommended = [n for n in counts if got[n]["recommended"]]
        assert recommended == [min(ranking)[2]]


def test_hot_keys_and_null_keys(measured, records):
    summary, lake, _ = measured
    hot = lake.read_arrow("key_skew_hot_keys", [("run_id", "=", "run-1"), ("topic", "=", "orders")]).to_pylist()
    totals = Counter()
    for r in records:
        if r["topic"] == "orders" and r["key"] is not None:
            totals[r["key"]] += r["weight"]
    top = sorted(totals.items(), key=lambda kv: (-kv[1], kv[0]))[:3]
    topic_total = sum(r["weight"] for r in records if r["topic"] == "orders")
    for n in (6, 4, 8, 12):
        ranked = sorted((h for h in hot if h["partition_count"] == n), key=lambda h: h["rank"])
        assert [(h["key"], h["messages"]) for h in ranked] == top
        assert [h["partition"] for h in ranked] == [partition_key("murmur2", k, n) for k, _ in top]
        assert ranked[0]["share"] == pytest.approx(top[0][1] / topic_total)
    orders = {r["partition_count"]: r for r in summary if r["topic"] == "orders"}
    nulls = sum(r["weight"] for r in records if r["topic"] == "orders" and r["key"] is None)
    assert orders[6]["null_key_messages"] == nulls and orders[6]["null_key_placement"] == "spread"
    assert orders[6]["hot_key"] == top[0][0]
    events = {r["partition_count"]: r for r in summary if r["topic"] == "events"}
    # consistent_random sends empty keys down the null-key path too
    unkeyed = sum(r["weight"] for r in records if r["topic"] == "events" and not r["key"])
    assert events[4]["null_key_messages"] == unkeyed


def test_fingerprint_flags_non_java_producers(measured):
    summary, lake, _ = measured
    prints = {
        (r["topic"], r["partitioner"]): r
        for r in lake.read_arrow("key_skew_fingerprint", [("run_id", "=", "run-1")]).to_pylist()
    }
    assert prints[("orders", "murmur2")]["share"] == 1.0
    assert prints[("events", "consistent_random")]["share"] == 1.0
    assert prints[("events", "murmur2")]["share"] < 0.5
    verdict = {r["topic"]: r for r in summary if r["current"]}
    assert (verdict["orders"]["fingerprint"], verdict["orders"]["java_compatible"]) == ("murmur2", True)
    # consistent and consistent_random agree on non-empty keys; the earlier-registered name wins the tie
    assert (verdict["events"]["fingerprint"], verdict["events"]["java_compatible"]) == ("consistent", False)


def test_missing_topic_gets_an_error_and_others_continue(measured, records):
    summary, _, _ = measured
    ghost = [r for r in summary if r["topic"] == "ghost"]
    assert len(ghost) == 1 and ghost[0]["partition_count"] == 0
    assert "ghost" in ghost[0]["error"] and "--partitions" in ghost[0]["error"]
    assert ghost[0]["messages"] == sum(r["weight"] for r in records if r["topic"] == "ghost")
    assert {r["topic"] for r in summary} == {"orders", "events", "ghost"}


def test_partition_weights_and_idempotent_rerun(spark, measured):
    summary, lake, options = measured
    rows = lake.read_arrow("key_skew", [("run_id", "=", "run-1"), ("current", "=", True)]).to_pylist()
    weights = partition_weights(lake, "run-1")
    assert {t: len(w) for t, w in weights.items()} == {"orders": 6, "events": 4}
    assert weights["orders"] == [
        r["load"] for r in sorted(rows, key=lambda r: r["partition"]) if r["topic"] == "orders"
    ]
    before = {name: lake.read_arrow(name).num_rows for name in ("key_skew", "key_skew_summary")}
    run(RunContext.create(Config(lake=str(lake.root)), "run-1", spark=spark), options)
    assert {name: lake.read_arrow(name).num_rows for name in before} == before


# --- input and command line ---------------------------------------------------------------------------


def test_input_mapping_string_keys_and_partitioned_delta(lake, tmp_path: Path):
    from deltalake import write_deltalake

    from jobs.kernels.samples import read_units
    from jobs.tables.skew_input import SampleInputError, resolve

    data = pa.table({"stream": ["t", "t", "u"], "message_key": ["a", None, "é"], "n": [2, None, 1], "p": [0, 1, 2]})
    write_deltalake(tmp_path / "delta", data, partition_by=["stream"])
    source = resolve(
        lake,
        str(tmp_path / "delta"),
        columns={"topic": "stream", "key": "message_key", "weight": "n", "partition": "p"},
    )
    got = pa.Table.from_batches(list(read_units(source, source.units)), schema=SAMPLE_SCHEMA)
    assert sorted(got.to_pylist(), key=lambda r: r["partition"]) == [
        {"topic": "t", "key": b"a", "weight": 2, "bytes": 0, "partition": 0},
        {"topic": "t", "key": None, "weight": 1, "bytes": 0, "partition": 1},
        {"topic": "u", "key": "é".encode(), "weight": 1, "bytes": 0, "partition": 2},
    ]
    with pytest.raises(SampleInputError, match="no key"):
        resolve(lake, str(tmp_path / "delta"), columns={"topic": "stream"})
    with pytest.raises(SampleInputError, match="must be binary or string"):
        resolve(lake, str(tmp_path / "delta"), columns={"topic": "stream", "key": "n"})
    with pytest.raises(SampleInputError, match="not in the input"):
        resolve(lake, str(tmp_path / "delta"), columns={"topic": "stream", "key": "nope"})


def test_lake_samples_use_the_newest_sample_set(lake):
    from datetime import UTC, datetime

    from jobs.kernels.samples import read_units
    from jobs.tables.skew_input import resolve

    def sample(sample_id: str, day: int, keys: list[bytes]) -> pa.Table:
        return pa.Table.from_pylist(
            [
                {
                    "sample_id": sample_id,
                    "topic": "t",
                    "partition": 0,
                    "offset": i,
                    "key": k,
                    "value_size": 100,
                    "timestamp": datetime(2026, 11, day, tzinfo=UTC),
                }
                for i, k in enumerate(keys)
            ],
            schema=lake.read_arrow("key_samples").schema,
        )

    lake.append("key_samples", sample("old", 1, [b"x"]))
    lake.append("key_samples", sample("new", 2, [b"a", b"b"]))
    for sample_id, keys in ((None, [b"a", b"b"]), ("old", [b"x"])):
        source = resolve(lake, sample_id=sample_id)
        rows = [r for b in read_units(source, source.units) for r in b.to_pylist()]
        assert sorted(r["key"] for r in rows) == keys
        assert {r["bytes"] for r in rows} == {100}  # value_size stands in for bytes


def test_samples_are_found_without_delta_rs_python_file_handler(lake, tmp_path: Path, monkeypatch):
    """Read through Arrow's local file system: the handler's buffers, released by Arrow's IO threads while the
    interpreter exits, aborted runs after their work was done."""
    from deltalake import write_deltalake
    from deltalake.fs import DeltaStorageHandler

    from jobs.io.lake import rows_table
    from jobs.tables.skew_input import resolve

    lake.append(
        "key_samples", rows_table("key_samples", [{"sample_id": "s", "topic": "t", "partition": 0, "offset": 0}])
    )
    write_deltalake(tmp_path / "delta", pa.table({"topic": ["t"], "key": [b"k"]}))
    pq.write_table(pa.table({"topic": ["t"], "key": [b"k"]}), tmp_path / "plain.parquet")

    def refused(*args, **kwargs):
        raise AssertionError("read through delta-rs's Python file handler")

    monkeypatch.setattr(DeltaStorageHandler, "from_table", refused)
    for source in (None, str(tmp_path / "delta"), str(tmp_path / "plain.parquet")):
        assert len(resolve(lake, source).units) == 1


def test_option_parsing():
    assert parse_counts("orders=12, refunds=4") == {"orders": 12, "refunds": 4}
    assert parse_what_if("24,36,12-20:4") == (12, 16, 20, 24, 36)
    assert parse_partitioners("consistent_random,orders=murmur2") == ("consistent_random", {"orders": "murmur2"})
    with pytest.raises(ValueError, match="TOPIC=N"):
        parse_counts("orders")
    with pytest.raises(ValueError, match="unknown partitioner"):
        counts_to_measure({"t": 3}, SkewOptions(partitioner="crc"))
    assert counts_to_measure({"t": 3}, SkewOptions(what_if=(3, 6, 6))) == {"t": TopicCounts("murmur2", (3, 6))}


def test_cli_skew_prints_summary(lake_env, tmp_path: Path, capsys):
    from jobs.cli import main

    keys = np.array([b"k%d" % (i % 7) for i in range(200)], dtype=object)
    pq.write_table(pa.table({"topic": ["t"] * 200, "key": pa.array(list(keys), pa.binary())}), tmp_path / "s.parquet")
    assert (
        main(
            [
                "skew",
                "--input",
                str(tmp_path / "s.parquet"),
                "--partitions",
                "t=3",
                "--what-if",
                "4,5",
                "--run-id",
                "cli-1",
            ]
        )
        == 0
    )
    out = capsys.readouterr().out
    assert "max/mean" in out and len([line for line in out.splitlines() if line.startswith("t ")]) == 3
    assert len(partition_weights(lake_env, "cli-1")["t"]) == 3


def test_nightly_defaults_read_the_lake(spark, lake):
    from datetime import UTC, datetime

    summary = run(RunContext.create(Config(lake=str(lake.root)), "nightly-1", spark=spark))
    assert len(summary.rows) == 0 and lake.read_arrow("key_skew").num_rows == 0
    assert partition_weights(lake, "nightly-1") == {}
    # Samples but no snapshot of their topics: every topic reports the missing partition count.
    lake.append(
        "key_samples",
        pa.Table.from_pylist(
            [
                {
                    "sample_id": "s",
                    "topic": t,
                    "partition": 0,
                    "offset": 0,
                    "key": b"k",
                    "value_size": 1,
                    "timestamp": datetime(2026, 11, 21, tzinfo=UTC),
                }
                for t in ("a", "b")
            ],
            schema=lake.read_arrow("key_samples").schema,
        ),
    )
    summary = run(RunContext.create(Config(lake=str(lake.root)), "nightly-2", spark=spark)).rows
    assert [(r["topic"], r["partition_count"], "no partition count" in r["error"]) for r in summary] == [
        ("a", 0, True),
        ("b", 0, True),
    ]
    # The DAG passes its own run's sample set: a run that sampled nothing measures nothing.
    assert (
        len(
            run(
                RunContext.create(Config(lake=str(lake.root)), "nightly-3", spark=spark),
                SkewOptions(sample_id="nightly-3"),
            ).rows
        )
        == 0
    )

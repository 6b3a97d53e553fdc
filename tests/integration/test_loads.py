"""Partition loads on real Spark and Delta: each source, auto's order, the stated fallback, stored per generation."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest

from jobs.config import Config
from jobs.context import RunContext
from jobs.io.lake import Lake, rows_table
from jobs.io.snapshot_pieces import RawDocument
from jobs.steps import ingest, plan
from planner.errors import InputError
from planner.group import from_snapshot, parse_group
from planner.load import load_bound

pytestmark = pytest.mark.spark

T0 = datetime(2026, 11, 21, 2, 0, tzinfo=UTC)
SECONDS = 100  # between the two snapshots
PARTITIONS = 4
SKEW = [10.0, 0.0, 30.0, 60.0]  # key-skew messages of `clicks` per partition
SKEW_BYTES = [100, 0, 300, 600]


def group(group_id: str, topic: str, ends: list[int] | None, committed: list[int] | None = None) -> dict:
    """Two members of `topic` ({PARTITIONS} partitions), m0 owning all of it; offsets where `ends` gives them."""
    owned = [[topic, p] for p in range(PARTITIONS)]
    offsets = []
    for p, end in enumerate(ends or []):
        if end is not None:
            offsets.append({"topic": topic, "partition": p, "committed": (committed or ends)[p], "end": end})
    return {
        "group_id": group_id,
        "state": "Stable",
        "protocol": "range",
        "generation": 3,
        "topics": {topic: PARTITIONS},
        "members": [
            {"member_id": "m0", "strategies": ["range"], "topics": [topic], "owned": owned, "assignment": owned},
            {"member_id": "m1", "strategies": ["range"], "topics": [topic], "owned": [], "assignment": []},
        ],
        "offsets": offsets,
    }


def day(n: int) -> list[dict]:
    """The groups as snapshot `n` (0 or 1) sees them, SECONDS apart.

    - skewed: key-skew messages (run r1) and growing end offsets: messages win;
    - busy: end offsets grow by 50 (p + 1) per second and it lags: throughput wins over lag;
    - stalled: end offsets do not move, but it lags: lag;
    - lagging: first seen in snapshot 1, offsets for two partitions only: lag, the rest filled with the mean;
    - idle: nothing measured at all: uniform, saying why.
    """
    grow = [n * SECONDS * 50 * (p + 1) for p in range(PARTITIONS)]
    groups = [
        group("skewed", "clicks", [5000 + g for g in grow], [4000] * PARTITIONS),
        group("busy", "orders", [1000 * p + g for p, g in enumerate(grow)], [0] * PARTITIONS),
        group("stalled", "audit", [800] * PARTITIONS, [700, 500, 800, 100]),
    ]
    if n == 1:
        groups += [
            group("lagging", "payments", [300, None, 900, None], [200, None, 100, None]),
            group("idle", "idle", None),
        ]
    return [
        g | {"captured_at": (T0 + timedelta(seconds=n * SECONDS)).isoformat().replace("+00:00", "Z")} for g in groups
    ]


@pytest.fixture
def two_days(lake):
    """Snapshots r0 and r1 ingested, key-skew rows for r1's `clicks`."""
    return ingested(lake)


@pytest.fixture(scope="module")
def auto(spark, tmp_path_factory) -> dict[str, dict]:
    """Snapshot r1 planned with the default (auto) load source."""
    lake = Lake(tmp_path_factory.mktemp("auto") / "lake")
    lake.create_all()
    return planned(spark, ingested(lake))


def ingested(lake: Lake) -> Lake:
    for n in (0, 1):
        docs = [RawDocument(f"day{n}/{d['group_id']}", json.dumps(d), doc=d) for d in day(n)]
        ingest.ingest_documents(lake, docs, f"r{n}", f"r{n}", T0 + timedelta(seconds=n * SECONDS))
    lake.merge(
        "key_skew",
        rows_table(
            "key_skew",
            [
                {"run_id": "r1", "computed_at": T0, "topic": "clicks", "partitioner": "murmur2"}
                | {"partition_count": PARTITIONS, "partition": p, "current": True, "load": load}
                | {"messages": load, "bytes": SKEW_BYTES[p], "null_key_bytes": 0.0}
                for p, load in enumerate(SKEW)
            ],
        ),
    )
    return lake


def planned(spark, lake, run_id: str = "r1", load_source: str = "auto") -> dict[str, dict]:
    """Plan `run_id`; per group its generation row, partition loads (partition -> (load, source)), metrics and
    the weight of each plan row."""
    config = Config(lake=str(lake.root), strategies=("range", "balanced-load"), load_source=load_source)
    ids = plan.run(RunContext.create(config, run_id, spark=spark), created_at=T0).by_group("generation_id")
    out: dict[str, dict] = {
        g["group_id"]: {"generation": g, "loads": {}, "metrics": {}, "weights": {}}
        for g in lake.read_arrow("generations", [("run_id", "=", run_id)]).to_pylist()
    }
    for r in lake.read_arrow("partition_loads").to_pylist():
        if ids.get(r["group_id"]) == r["generation_id"]:
            out[r["group_id"]]["loads"][r["partition"]] = (r["load"], r["source"])
    for r in lake.read_arrow("plan_metrics").to_pylist():
        if ids.get(r["group_id"]) == r["generation_id"]:
            out[r["group_id"]]["metrics"][r["strategy"]] = r
    for r in lake.read_arrow("plans").to_pylist():
        if ids.get(r["group_id"]) == r["generation_id"]:
            out[r["group_id"]]["weights"][(r["strategy"], r["partition"])] = r["weight"]
    return out


def test_auto_takes_messages_then_throughput_then_lag_then_uniform_and_says_why(auto):
    groups = auto
    sources = {g: v["generation"]["load_source"] for g, v in groups.items()}
    assert sources == {
        "skewed": "messages",
        "busy": "throughput",
        "stalled": "lag",
        "lagging": "lag (2 of 4 partitions unmeasured: the group's mean)",
        "idle": "uniform (no key samples, no previous snapshot, no lag)",
    }
    assert groups["skewed"]["loads"] == {p: (load, "messages") for p, load in enumerate(SKEW)}
    assert groups["busy"]["loads"] == {p: (50.0 * (p + 1), "throughput") for p in range(PARTITIONS)}
    assert groups["stalled"]["loads"] == {0: (100.0, "lag"), 1: (300.0, "lag"), 2: (0.0, "lag"), 3: (700.0, "lag")}
    assert groups["lagging"]["loads"] == {0: (100.0, "lag"), 1: (450.0, "mean"), 2: (800.0, "lag"), 3: (450.0, "mean")}
    assert groups["idle"]["loads"] == {p: (1.0, "uniform") for p in range(PARTITIONS)}


def test_plans_weigh_partitions_by_the_stored_loads_and_metrics_carry_the_bound(auto):
    groups = auto
    for name, g in groups.items():
        for (strategy, p), weight in g["weights"].items():
            assert weight == g["loads"][p][0], (name, strategy, p)
        doc = next(d for d in day(1) if d["group_id"] == name)
        loads = [g["loads"][p][0] for p in range(PARTITIONS)]
        spec = parse_group(from_snapshot(doc) | {"loads": {next(iter(doc["topics"])): loads}})
        for strategy, m in g["metrics"].items():
            assert m["load_bound"] == pytest.approx(load_bound(spec))
            assert m["load_bound"] <= m["max_mean_load"] + 1e-9, (name, strategy)
    # skewed: 100 messages over two members; the partition of 60 alone sets the bound, and balanced-load meets it.
    skewed = groups["skewed"]["metrics"]
    assert skewed["balanced-load"]["load_bound"] == pytest.approx(60 / 50)
    assert skewed["balanced-load"]["max_mean_load"] == pytest.approx(60 / 50)
    assert skewed["balanced-load"]["chosen"] and not skewed["range"]["chosen"]
    assert skewed["range"]["max_mean_load"] == pytest.approx((30 + 60) / 50)  # range: m0 p0-1, m1 p2-3


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("bytes", {"skewed": "bytes", "busy": "uniform (no key samples)"}),
        ("lag", {"skewed": "lag", "busy": "lag", "idle": "uniform (no lag)"}),
        ("throughput", {"busy": "throughput", "lagging": "uniform (no previous snapshot)"}),
        ("throughput", {"stalled": "uniform (no end-offset growth since the previous snapshot)"}),
        ("uniform", {"skewed": "uniform", "busy": "uniform"}),
    ],
)
def test_a_configured_source_is_used_alone(spark, two_days, source, expected):
    groups = planned(spark, two_days, load_source=source)
    assert {g: groups[g]["generation"]["load_source"] for g in expected} == expected
    if source == "bytes":
        assert groups["skewed"]["loads"] == {p: (float(b), "bytes") for p, b in enumerate(SKEW_BYTES)}
    if source == "lag":
        assert groups["skewed"]["loads"] == {p: (1000.0 + 5000 * (p + 1), "lag") for p in range(PARTITIONS)}


def test_loads_are_stored_per_generation_and_a_rerun_rewrites_them(spark, two_days):
    first = planned(spark, two_days, "r0")
    assert {g: v["generation"]["load_source"] for g, v in first.items()} == {
        "skewed": "lag",
        "busy": "lag",
        "stalled": "lag",
    }
    planned(spark, two_days, "r1")
    rows = two_days.read_arrow("partition_loads").num_rows
    again = planned(spark, two_days, "r1")
    assert two_days.read_arrow("partition_loads").num_rows == rows == (3 + 5) * PARTITIONS
    assert again["busy"]["generation"]["generation_id"] == 2 and again["busy"]["loads"][0] == (50.0, "throughput")
    replanned = planned(spark, two_days, "r0")  # r0's generation gets its own loads back; r1's stay
    assert replanned["busy"]["loads"] == {p: (1000.0 * p, "lag") for p in range(PARTITIONS)}
    assert two_days.read_arrow("partition_loads").num_rows == rows


def test_an_unknown_load_source_is_named(spark, two_days):
    with pytest.raises(InputError, match="REBALANCE_LOAD_SOURCE: unknown load source 'weight'"):
        planned(spark, two_days, load_source="weight")

"""The report's per-partition tables laid out by batch: each batch reads the rows, in the order, a lookup would."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from deltalake.exceptions import TableNotFoundError

from jobs.report.reader import Filters, Read, Scan, filtered, whole
from jobs.report.regroup import regroup

PLANS = pa.table(
    {
        "group_id": pa.array(["b", "a", "c", "b", "a", None, "b"]).dictionary_encode(),
        "generation_id": [1, 1, 1, 2, 2, 1, 1],
        "partition": [0, 1, 2, 3, 4, 5, 6],
    }
)
# Group "b" straddles the batches: generation 2 in the first, generation 1 in the second.
BATCHES = [
    [{"group_id": "a", "generation_id": 1}, {"group_id": "b", "generation_id": 2}],
    [{"group_id": "b", "generation_id": 1}, {"group_id": "c", "generation_id": 1}],
]


def reading(plans: pa.Table) -> Read:
    """A lake of one table, `plans`."""

    def read(name: str, filters: Filters = None) -> pa.Table:
        if name != "plans":
            raise TableNotFoundError(f"no table {name}")
        return filtered(plans, filters)

    return read


read = reading(PLANS)


def lookup(batch: list[dict[str, Any]]) -> list[tuple[str, str, list[Any]]]:
    return [(key, "in", sorted({g[key] for g in batch})) for key in ("group_id", "generation_id")]


def test_each_batch_reads_what_the_lake_gives_its_lookup_in_the_same_order(tmp_path: Path) -> None:
    regrouped = regroup(whole(read), BATCHES, tmp_path)
    for number, batch in enumerate(BATCHES):
        mine, lakes = regrouped.read(number, read)("plans", lookup(batch)), read("plans", lookup(batch))
        assert mine.schema == lakes.schema and mine.to_pylist() == lakes.to_pylist()
    assert regrouped.read(1, read)("plans", lookup(BATCHES[1])).column("partition").to_pylist() == [0, 2, 6]


def test_a_table_the_lake_lacks_is_left_to_the_read(tmp_path: Path) -> None:
    regrouped = regroup(whole(read), BATCHES, tmp_path)
    assert sorted(regrouped.schemas) == ["plans"]
    with pytest.raises(TableNotFoundError):
        regrouped.read(0, read)("snapshots", lookup(BATCHES[0]))


def test_a_batch_without_rows_reads_an_empty_table_of_the_same_columns(tmp_path: Path) -> None:
    batches = [*BATCHES, [{"group_id": "z", "generation_id": 1}]]
    empty = regroup(whole(read), batches, tmp_path).read(2, read)("plans", lookup(batches[2]))
    assert empty.num_rows == 0 and empty.column_names == PLANS.column_names


def test_filtered_matches_equal_and_in_terms_and_never_a_null() -> None:
    rows = filtered(PLANS, [("group_id", "in", ["a", "b"]), ("generation_id", "=", 1)])
    assert rows.column("partition").to_pylist() == [0, 1, 6]


def test_a_table_written_group_by_group_reads_the_same(tmp_path: Path) -> None:
    read_ordered = reading(PLANS.take([1, 4, 0, 3, 6, 2, 5]))  # a, a, b, b, b, c, null: batch 0's rows one run
    regrouped = regroup(whole(read_ordered), BATCHES, tmp_path)
    for number, batch in enumerate(BATCHES):
        mine, lakes = regrouped.read(number, read_ordered)("plans", lookup(batch)), read_ordered("plans", lookup(batch))
        assert mine.schema == lakes.schema and mine.to_pylist() == lakes.to_pylist()


def shared(read: Read) -> Scan:
    """A `scan` whose shares are consecutive runs of the batches `read` gives, as a lake's shares are of its files."""

    def scan(name: str, filters: Filters = None, share: tuple[int, int] = (0, 1)) -> pa.RecordBatchReader:
        found = read(name, filters)
        batches, (part, parts) = found.to_batches(), share
        mine = batches[part * len(batches) // parts : (part + 1) * len(batches) // parts]
        return pa.RecordBatchReader.from_batches(found.schema, mine)

    return scan


def test_a_table_scanned_in_shares_reads_the_same(tmp_path: Path) -> None:
    in_batches = reading(pa.Table.from_batches(PLANS.to_batches(max_chunksize=2)))  # the shares split 4 batches
    regrouped = regroup(shared(in_batches), BATCHES, tmp_path)
    assert sorted(p.name for p in (tmp_path / "plans").iterdir()) == [
        "0.0.parquet",
        "0.1.parquet",
        "1.0.parquet",
        "1.1.parquet",
    ]
    for number, batch in enumerate(BATCHES):
        mine, lakes = regrouped.read(number, in_batches)("plans", lookup(batch)), in_batches("plans", lookup(batch))
        assert mine.schema == lakes.schema and mine.to_pylist() == lakes.to_pylist()

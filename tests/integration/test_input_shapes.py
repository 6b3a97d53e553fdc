"""Generated snapshot directories: any mix of good groups, broken documents and file-system shapes ingests the good
groups and quarantines everything else with a reason; never a traceback, never a hang."""

from __future__ import annotations

import json
import os
import tempfile
import threading
from datetime import UTC, datetime
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from jobs.config import Config
from jobs.context import RunContext, StepResult
from jobs.steps import ingest

NOW = datetime(2026, 11, 21, 2, 0, tzinfo=UTC)


def group(group_id: str) -> dict:
    return {
        "group_id": group_id,
        "topics": {"orders": 2},
        "members": [{"member_id": f"{group_id}-m", "topics": ["orders"], "assignment": [["orders", 0], ["orders", 1]]}],
    }


# Each entry kind: how to make it in the directory, and whether it holds a good group.
def good(path: Path, name: str) -> None:
    path.write_text(json.dumps(group(name)))


def good_lines(path: Path, name: str) -> None:
    path.with_suffix(".jsonl").write_text(json.dumps(group(name)) + "\n")


def truncated(path: Path, name: str) -> None:
    path.write_text(json.dumps(group(name))[:-7])


def garbage(path: Path, name: str) -> None:
    path.write_bytes(bytes(range(256)) * 3)


def empty(path: Path, name: str) -> None:
    path.write_bytes(b"")


def wrong_shape(path: Path, name: str) -> None:
    path.write_text(json.dumps([1, "two", None, {"group_id": name}]))


def bad_topic(path: Path, name: str) -> None:
    doc = group(name)
    doc["topics"] = {"or/ders": 2}
    path.write_text(json.dumps(doc))


def fifo(path: Path, name: str) -> None:
    os.mkfifo(path)


def folder(path: Path, name: str) -> None:
    path.mkdir()


def loop(path: Path, name: str) -> None:
    path.symlink_to(path.name)


def dangling(path: Path, name: str) -> None:
    path.symlink_to(f"{name}-nowhere.json")


def outside(path: Path, name: str) -> None:
    path.symlink_to("/etc/hostname")


GOOD = (good, good_lines)
KINDS = (*GOOD, truncated, garbage, empty, wrong_shape, bad_topic, fifo, folder, loop, dangling, outside)


def ingest_within(pattern: Path, seconds: float = 60.0) -> StepResult:
    """Ingest into a fresh lake on a daemon thread: a hang fails the test instead of stalling the run."""
    found: list[StepResult | BaseException] = []

    def work() -> None:
        with tempfile.TemporaryDirectory() as lake:
            try:
                ctx = RunContext.create(Config(lake=lake, snapshots=str(pattern)), "shapes")
                found.append(ingest.run(ctx, received_at=NOW))
            except BaseException as e:  # noqa: BLE001  # reported by the assertion below
                found.append(e)

    worker = threading.Thread(target=work, daemon=True)
    worker.start()
    worker.join(seconds)
    assert found, f"ingest of {pattern} still running after {seconds} s"
    if isinstance(found[0], BaseException):
        raise AssertionError(f"ingest raised {found[0]!r}")
    return found[0]


@settings(max_examples=25, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.sampled_from(KINDS), min_size=1, max_size=8))
def test_any_mix_of_entries_ingests_the_good_and_quarantines_the_rest_by_name(tmp_path_factory, kinds) -> None:
    root = tmp_path_factory.mktemp("shapes")
    for i, make in enumerate(kinds):
        make(root / f"e{i}.json", f"g{i}")
    result = ingest_within(root)
    assert sorted(result.groups) == sorted(f"g{i}" for i, make in enumerate(kinds) if make in GOOD)
    bad = {f"e{i}" for i, make in enumerate(kinds) if make not in GOOD}
    named = {Path(source.split(":")[0].split("[")[0]).stem for source, _ in result.quarantined}
    assert named == bad
    assert all(reason and "\n" not in reason and "Traceback" not in reason for _, reason in result.quarantined)

"""The driver's class archive: named after what it depends on, mapped when there, never required."""

from __future__ import annotations

from pathlib import Path

import pytest

from jobs.io import spark_cds

pytestmark = pytest.mark.unit


def jars(tmp_path: Path, *sizes: int) -> list[Path]:
    made = []
    for i, size in enumerate(sizes):
        jar = tmp_path / f"lib-{i}.jar"
        jar.write_bytes(b"x" * size)
        made.append(jar)
    return made


def test_the_archive_is_named_after_the_jvm_options_and_the_jars(tmp_path):
    base = spark_cds.archive_path("-Xmx1g", jars(tmp_path, 10, 20))
    assert base == spark_cds.archive_path("-Xmx1g", jars(tmp_path, 10, 20))
    assert base != spark_cds.archive_path("-Xmx2g", jars(tmp_path, 10, 20))
    assert base != spark_cds.archive_path("-Xmx1g", jars(tmp_path, 10, 21))  # a jar replaced by another build
    assert base != spark_cds.archive_path("-Xmx1g", jars(tmp_path, 10))


def test_options_map_an_archive_only_when_there_and_dump_only_when_training(tmp_path, monkeypatch):
    monkeypatch.setattr(spark_cds, "CDS_DIR", tmp_path / "cds")
    monkeypatch.delenv("REBALANCE_SPARK_CDS_TRAINING", raising=False)
    libs = jars(tmp_path, 5)
    archive = spark_cds.archive_path("-Xss1m", libs)
    assert spark_cds.driver_options("-Xss1m", libs) == "-Xss1m"
    archive.parent.mkdir()
    archive.write_bytes(b"archive")
    mapped = spark_cds.driver_options("-Xss1m", libs)
    assert mapped.startswith("-Xss1m ") and f"-XX:SharedArchiveFile={archive}" in mapped
    monkeypatch.setenv("REBALANCE_SPARK_CDS_TRAINING", str(archive))
    dumping = spark_cds.driver_options("-Xss1m", libs)
    assert f"-XX:ArchiveClassesAtExit={archive.with_suffix('.tmp')}" in dumping and "SharedArchiveFile" not in dumping

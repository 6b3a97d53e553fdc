"""The local session's Python daemon takes Spark's archives off its workers' path only where the environment has
pyspark and py4j itself (`jobs.io.spark_daemon`; the session that uses it: tests/integration/test_engines.py)."""

from __future__ import annotations

import sys
from pathlib import Path

import pyspark

from jobs.io.spark_daemon import is_spark_archive, without_spark_archives

SPARK_HOME = Path(pyspark.__file__).parent
ARCHIVES = [
    str(SPARK_HOME / "python" / "lib" / "pyspark.zip"),
    str(SPARK_HOME / "python" / "lib" / "py4j-0.10.9.9-src.zip"),
    str(SPARK_HOME / "jars" / "spark-core_2.13-4.1.4.jar"),
]


def test_spark_archives_are_told_from_other_entries() -> None:
    assert all(is_spark_archive(entry) for entry in ARCHIVES)
    others = ["/srv/app/code.zip", "/opt/lib/python311.zip", "/srv/udfs.jar", "/srv/spark-files", *sys.path]
    assert not any(is_spark_archive(entry) for entry in others)


def test_the_archives_leave_the_path_when_the_environment_has_the_packages() -> None:
    path = [ARCHIVES[0], "/tmp/spark-files", ARCHIVES[1], ARCHIVES[2], *sys.path]
    assert without_spark_archives(path) == ["/tmp/spark-files", *sys.path]


def test_the_path_stays_as_it_is_without_the_packages_elsewhere() -> None:
    # An interpreter without pyspark or py4j installed imports them from Spark's zips: nothing is taken away.
    site = [entry for entry in sys.path if Path(entry, "pyspark").exists() or Path(entry, "py4j").exists()]
    assert site, "this environment has pyspark installed"
    path = [*ARCHIVES, "/tmp/spark-files", *[entry for entry in sys.path if entry not in site]]
    assert without_spark_archives(path) == path
    assert without_spark_archives(["/tmp/spark-files", *sys.path]) == ["/tmp/spark-files", *sys.path]

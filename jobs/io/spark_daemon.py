"""Spark's Python daemon for a local session, importing from this environment rather than from Spark's archives.

Spark puts archives first on its Python workers' path (`PythonUtils.sparkPythonPath`): `$SPARK_HOME/python/lib`'s
pyspark.zip and py4j zip, and the jar holding Spark's own classes (`SparkContext.jarOfObject`; a pip-installed
pyspark's jar holds no Python). Python compiles a zip's modules from source in every process (a zip keeps no bytecode
cache), and before each task the worker calls `importlib.invalidate_caches()` (`worker_util.setup_spark_files`), which
re-reads every archive's whole directory from the path (5,362 entries in spark-core's jar, 1,328 in pyspark.zip): in a
run of 1,000 groups the workers' CPU was 19-20 s with the archives, 11-13 s without. A local session's workers run
this environment's interpreter (`spark.pyspark.python`), where the same pyspark and py4j releases are installed with
their bytecode. Run as `spark.python.daemon.module`, this module takes the archives off the path (and out of the
importers' cache), then serves as pyspark's daemon (`pyspark.daemon`, which reads the worker module from its
arguments).
"""

from __future__ import annotations

import sys
import zipimport
from importlib.machinery import PathFinder
from pathlib import PurePath

PACKAGES = ("pyspark", "py4j")  # what Spark's zips hold: pyspark.zip and py4j-<version>-src.zip


def is_spark_archive(entry: str) -> bool:
    """A path entry naming one of the archives Spark adds to its workers' path: its zips, or a jar of its own."""
    path = PurePath(entry)
    if path.suffix == ".jar":
        return path.parent.name == "jars"  # $SPARK_HOME/jars
    return path.name == "pyspark.zip" or (path.name.startswith("py4j-") and path.name.endswith("-src.zip"))


def without_spark_archives(path: list[str]) -> list[str]:
    """`path` without Spark's archives when the packages its zips hold are found on the rest; else `path` as it is."""
    rest = [entry for entry in path if not is_spark_archive(entry)]
    if len(rest) == len(path) or any(PathFinder.find_spec(package, rest) is None for package in PACKAGES):
        return path
    return rest


def main() -> None:
    kept = without_spark_archives(sys.path)
    dropped = set(sys.path) - set(kept)
    sys.path[:] = kept
    # Importers `python -m` made for them while it found this module (one per archive, and per package in one).
    for entry, finder in list(sys.path_importer_cache.items()):
        if isinstance(finder, zipimport.zipimporter) and finder.archive in dropped:
            del sys.path_importer_cache[entry]
    from pyspark import daemon

    daemon.manager()  # type: ignore[no-untyped-call]  # pyspark leaves it untyped


if __name__ == "__main__":
    main()

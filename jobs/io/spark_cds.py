"""Class data sharing for the driver JVM: the classes a run loads (Spark, Delta, Parquet, Arrow), archived once.

A JVM spends most of its first seconds loading and verifying classes; Java's dynamic CDS archive (JEP 350) keeps
them mapped ready-parsed. `make install` makes the archive by a training run (`jobs.spark_archive`: the demo fleet
planned, a what-if, a history query) with `-XX:ArchiveClassesAtExit`; every later embedded driver maps it with
`-XX:SharedArchiveFile`.
On this 2-core machine that halves session start-up (5.2 -> 2.5 s) and the first Delta reads (bench/what_if.py).

The archive is named after what it depends on (the java binary, Spark's and Delta's jars, the JVM options): a new
Java or new jars find no archive and start as before. The JVM checks the rest itself and ignores an archive it
cannot use (`-Xshare:auto`, its default), so an archive can cost a start-up nothing but never fail one.
"""

from __future__ import annotations

import hashlib
import os
import shutil
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CDS_DIR = Path(os.environ.get("REBALANCE_SPARK_CDS_DIR", ROOT / ".cache" / "spark-cds"))
# The archive loads silently: without this, a JVM that cannot map an archive says why on its stdout.
QUIET = "-Xlog:cds=off -Xlog:cds+dynamic=off"


def _java() -> str:
    """The java binary pyspark launches: $JAVA_HOME/bin/java, else `java` from PATH (resolved through links)."""
    home = os.environ.get("JAVA_HOME")
    found = os.path.join(home, "bin", "java") if home else shutil.which("java")
    return os.path.realpath(found) if found else ""


def archive_path(jvm_options: str, jars: list[Path]) -> Path:
    """Where the archive for this java, these jars and these JVM options lives (it may not exist yet)."""
    import pyspark

    spark_jars = sorted((Path(pyspark.__file__).parent / "jars").glob("*.jar"))
    key = hashlib.sha256()
    for part in (_java(), jvm_options, *(f"{j.resolve()}:{j.stat().st_size}" for j in [*spark_jars, *jars])):
        key.update(part.encode() + b"\0")
    return CDS_DIR / f"driver-{key.hexdigest()[:16]}.jsa"


def driver_options(jvm_options: str, jars: list[Path]) -> str:
    """The driver's JVM options with the archive mapped when there is one, or dumped when training."""
    archive = archive_path(jvm_options, jars)
    if os.environ.get("REBALANCE_SPARK_CDS_TRAINING") == str(archive):
        return f"{jvm_options} {QUIET} -XX:ArchiveClassesAtExit={archive.with_suffix('.tmp')}"
    if archive.is_file():
        return f"{jvm_options} {QUIET} -XX:SharedArchiveFile={archive}"
    return jvm_options

"""The SparkSession factory: embedded (`local`), a cluster master, or a Spark Connect server, from one set of settings.

Local sessions are tuned for small machines and bound to 127.0.0.1. Any other session ships the project's pure
code (`planner`, `schemas`, `jobs.kernels`: what executor code imports) to the executors itself, as one zip built
at start-up and cached by content hash, so workers need only NumPy, pandas, pyarrow and pyspark.
"""

from __future__ import annotations

import hashlib
import json
import os
import socket
import sys
import tempfile
import zipfile
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from threading import Thread
from urllib.parse import urlsplit

import pyarrow as pa
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.pandas.types import from_arrow_schema

from jobs.io.loopback import LOOPBACK
from jobs.io.spark_cds import driver_options
from planner.errors import InputError, SourceError

ENV_PREFIX = "REBALANCE_SPARK_"
APP_NAME = "rebalance-planner"
CONNECT_PORT = 15002  # Spark Connect's default port

# Serial GC and C1-only JIT halve JVM start-up on 2 cores; the jobs are short, so peak JIT speed matters less.
# The heap grows only while less than 10% of it is free after a collection and shrinks above 20% (Java's defaults:
# 40% / 70%): the driver's 1 GB heap then stays near what a run uses (the 1M-partition run: 1.27 -> 1.0 GB RSS).
EXECUTOR_JVM_OPTIONS = "-XX:+UseSerialGC -XX:TieredStopAtLevel=1 -XX:MinHeapFreeRatio=10 -XX:MaxHeapFreeRatio=20"
# The driver's logging configuration is a file of this host: executors elsewhere keep their own.
JVM_OPTIONS = f"{EXECUTOR_JVM_OPTIONS} -Dlog4j2.configurationFile={Path(__file__).with_name('log4j2.properties')}"

# Python workers keep freed NumPy temporaries in their heap instead of a fresh mmap per multi-MB array
# (glibc mallopt via the environment): vectorized hashing and planning run ~3x faster in workers.
MALLOC_ENV = {"MALLOC_MMAP_THRESHOLD_": str(32 << 20), "MALLOC_TRIM_THRESHOLD_": str(256 << 20)}

# Session settings that any session can take, Spark Connect ones included (runtime SQL settings).
SQL_CONF = {
    "spark.sql.session.timeZone": "UTC",
    "spark.sql.shuffle.partitions": "8",
    "spark.sql.execution.arrow.pyspark.enabled": "true",
    "spark.sql.execution.pythonUDF.arrow.enabled": "true",
}

# A one-group run's session (a what-if): its queries read a few hundred rows, where compiling each plan's generated
# Java (Janino) costs more CPU than it saves, 1.5 s of a what-if's 14 s on 2 cores; so whole-stage code generation
# is off (spark.sql.codegen.wholeStage) and expressions are interpreted (SQLConf.CODEGEN_FACTORY_MODE, an internal
# setting: CodeGeneratorWithInterpretedFallback reads it). Same results: both forms run the same expressions.
ONE_GROUP_CONF = {"spark.sql.codegen.wholeStage": "false", "spark.sql.codegen.factoryMode": "NO_CODEGEN"}

# What executor code imports, relative to the repository root: the pure domain, the contracts and the kernels.
SHIPPED = ("planner", "schemas", "jobs/__init__.py", "jobs/kernels")
ROOT = Path(__file__).resolve().parents[2]

# Delta Lake's Spark connector, resolved by `make install` (jvm/delta-runtime/pom.xml) into the repository's cache.
DELTA_LIB = Path(os.environ.get("REBALANCE_DELTA_LIB", ROOT / ".cache" / "delta" / "lib"))


def delta_jars(lib: Path = DELTA_LIB) -> list[Path]:
    """The jars of Delta Lake's connector (and S3A), or one line saying how to install them."""
    jars = sorted(lib.glob("*.jar"))
    if not any(j.name.startswith("delta-spark_") for j in jars):
        raise SourceError(f"Delta Lake's Spark connector is not installed in {lib}: run `make install`")
    return jars


def delta_conf(lib: Path = DELTA_LIB) -> dict[str, str]:
    """The settings that load Delta Lake into a session (driver, executors, a Connect server): the connector's
    jars on the classpath (shipped to a cluster's executors by Spark), its SQL extension and its catalog."""
    jars = delta_jars(lib)
    return {
        "spark.jars": ",".join(str(j) for j in jars),
        "spark.sql.extensions": "io.delta.sql.DeltaSparkSessionExtension",
        "spark.sql.catalog.spark_catalog": "org.apache.spark.sql.delta.catalog.DeltaCatalog",
        # A table's state is rebuilt from its log in this many tasks (Delta's default, 50, is for large logs: on a
        # lake's small tables it is 50 tasks of start-up per read).
        "spark.databricks.delta.snapshotPartitions": "2",
    }


@dataclass(frozen=True)
class SparkSettings:
    """Where Spark runs; each field is read from REBALANCE_SPARK_<FIELD> (upper case), empty meaning Spark's default.

    For a `local` master the executor Python defaults to the driver's interpreter and the driver binds 127.0.0.1;
    for any other master both are left to Spark (give them for a cluster whose workers need them).
    """

    master: str = "local[*]"
    remote: str = ""  # sc://host:port: a Spark Connect session (no JVM in this process); wins over `master`
    conf: tuple[tuple[str, str], ...] = ()  # any Spark setting, applied last
    python: str = ""  # the executors' Python (PYSPARK_PYTHON)
    driver_host: str = ""
    driver_bind_address: str = ""

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None, **overrides: str | None) -> SparkSettings:
        """REBALANCE_SPARK_* variables, then the non-empty overrides (e.g. `master` from Config or a CLI flag)."""
        env = os.environ if env is None else env
        values = {name: env.get(ENV_PREFIX + name.upper(), "") for name in cls.__dataclass_fields__}
        values.update({k: v for k, v in overrides.items() if v})
        unknown = sorted(set(values) - set(cls.__dataclass_fields__))
        if unknown:
            raise TypeError(f"unknown Spark settings {unknown}")
        conf = parse_conf(values.pop("conf") or "", ENV_PREFIX + "CONF")
        return replace(cls(), conf=conf, **{k: v for k, v in values.items() if v})

    @property
    def is_local(self) -> bool:
        """True for an embedded session (`local`, `local[N]`, `local[*]`, `local[N,F]`)."""
        return not self.remote and is_local_master(self.master)


def parse_conf(text: str, source: str = ENV_PREFIX + "CONF") -> tuple[tuple[str, str], ...]:
    """Spark settings from `key=value,key=value` or a JSON object (use JSON when a value holds a comma)."""
    text = text.strip()
    if not text:
        return ()
    if text.startswith("{"):
        try:
            doc = json.loads(text)
        except json.JSONDecodeError as e:
            raise InputError(f"{source}: not a JSON object: {e}") from None
        pairs = [(str(k), v if isinstance(v, str) else json.dumps(v)) for k, v in doc.items()]  # true, 4, ...
    else:
        pairs = []
        for i, item in enumerate(p for p in text.split(",") if p.strip()):
            key, sep, value = item.partition("=")
            if not sep or not key.strip():
                raise InputError(f"{source}: item {i} {item.strip()!r} is not key=value")
            pairs.append((key.strip(), value.strip()))
    return tuple(pairs)


def get_spark(
    settings: SparkSettings | str | None = None, app_name: str = APP_NAME, *, delta: bool = True
) -> SparkSession:
    """The process's SparkSession (created on first use); a string is a master URL, the rest read from the env.

    `delta=False`: a new driver without Delta Lake's connector (its jars, SQL extension and catalog), for a run whose
    steps read the lake's files with Spark's Parquet reader alone (`Lake.scan`; only `rebalance sql` and `Lake.read`
    use the connector): 0.4 s less CPU in a what-if's start-up. A Connect server keeps its own.
    """
    if not isinstance(settings, SparkSettings):
        settings = SparkSettings.from_env(master=settings)
    log = prepare_logs()
    return _connect_session(settings) if settings.remote else _classic_session(settings, app_name, log, delta)


def prepare_logs() -> Path | None:
    """Make pyspark's loggers before any thread starts a session, and route them (see `jvm_log`); returns the log.

    pyspark makes its loggers with `PySparkLogger.getLogger`, which swaps `logging`'s global logger class for the
    moment (not thread-safe): a logger another thread makes meanwhile becomes pyspark's, whose handlers all print
    JSON. Called on the main thread first (RunContext.start_spark), the swaps are over before a second thread runs.
    """
    import pyspark.sql.connect.logging  # noqa: F401  # makes its logger on import (Great Expectations imports it)

    if (log := jvm_log()) is not None:
        log.parent.mkdir(parents=True, exist_ok=True)
        _route_query_context_logs(log)
    return log


def _classic_session(settings: SparkSettings, app_name: str, log: Path | None, delta: bool) -> SparkSession:
    """A session with its driver JVM in this process: embedded, or the driver of a cluster application."""
    local = settings.is_local
    python = settings.python or (sys.executable if local else "")
    host = settings.driver_host or (LOOPBACK if local else "")
    bind = settings.driver_bind_address or host
    # SparkContext takes its workers' Python from PYSPARK_PYTHON, and the launched JVM its address from the env.
    if settings.python:
        os.environ["PYSPARK_PYTHON"] = python
    elif python:
        os.environ.setdefault("PYSPARK_PYTHON", python)
    if local:
        os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    if bind:
        os.environ.setdefault("SPARK_LOCAL_IP", bind)
    options = {
        "spark.master": settings.master,
        "spark.app.name": app_name,
        # The driver maps the class archive `make install` made (jobs.io.spark_cds); executors elsewhere have none.
        "spark.driver.extraJavaOptions": driver_options(JVM_OPTIONS, delta_jars()),
        "spark.executor.extraJavaOptions": EXECUTOR_JVM_OPTIONS,
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
    }
    if host:
        options["spark.driver.host"] = host
    if bind:
        options["spark.driver.bindAddress"] = bind
    if python:
        options["spark.pyspark.python"] = python
    options |= daemon_conf(settings.master, python)
    options |= SQL_CONF | {f"spark.executorEnv.{k}": v for k, v in MALLOC_ENV.items()} | (delta_conf() if delta else {})
    options |= dict(settings.conf)
    if log is not None:
        _launch_driver_jvm(options, log)
    builder = SparkSession.builder
    for name, value in options.items():
        builder = builder.config(name, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    if not local:
        code = code_zip()
        if not any(Path(f).name == code.name for f in spark.sparkContext.listFiles):
            spark.sparkContext.addPyFile(str(code))
    return spark


def daemon_conf(master: str, python: str) -> dict[str, str]:
    """`jobs.io.spark_daemon` as the Python daemon of a local master whose workers run this environment's
    interpreter (its pyspark and py4j, with their bytecode, instead of Spark's zips); nothing otherwise."""
    local = is_local_master(master) and python == sys.executable
    return {"spark.python.daemon.module": "jobs.io.spark_daemon"} if local else {}


def is_local_master(master: str) -> bool:
    """An embedded master: `local`, `local[N]`, `local[*]`, `local[N,F]`."""
    return master == "local" or master.startswith("local[")


def jvm_log() -> Path | None:
    """Where the driver JVM's own output goes: REBALANCE_SPARK_LOG, else (when stderr is a terminal) a file in the
    temporary directory, so Spark's start-up lines and logged stack traces never reach the terminal; None: stderr
    (Airflow task logs, pipes and tests keep them)."""
    if configured := os.environ.get(ENV_PREFIX + "LOG"):
        return Path(configured)
    if sys.stderr.isatty():
        return Path(tempfile.gettempdir()) / f"rebalance-spark-{os.getuid()}.log"
    return None


# pyspark's Python loggers that print a failed query's context with the whole Java stack trace, as JSON on stderr.
QUERY_CONTEXT_LOGGERS = ("SQLQueryContextLogger", "DataFrameQueryContextLogger")


_routed: set[str] = set()  # log files pyspark's query-context loggers already write to


def _route_query_context_logs(log: Path) -> None:
    """Send pyspark's query-context error logs to `log` instead of stderr (the command prints its own one line)."""
    import logging

    from pyspark.logger import PySparkLogger

    if str(log) in _routed:
        return
    _routed.add(str(log))
    for name in QUERY_CONTEXT_LOGGERS:
        logger = PySparkLogger.getLogger(name)
        if not any(isinstance(h, logging.FileHandler) and h.baseFilename == str(log) for h in logger.handlers):
            for handler in list(logger.handlers):
                logger.removeHandler(handler)
            logger.addHandler(logging.FileHandler(log, delay=True))


def _launch_driver_jvm(options: Mapping[str, str], log: Path) -> None:
    """Start the driver JVM (pyspark's gateway) with its stdout and stderr in `log`, unless a JVM runs in this
    process already; SparkContext then finds it (without a log, SparkContext starts the JVM as usual)."""
    from pyspark import SparkConf, SparkContext
    from pyspark.java_gateway import launch_gateway

    if SparkContext._gateway is not None:
        return
    with open(log, "ab") as out:  # the JVM keeps its own descriptor of the file
        gateway = launch_gateway(  # type: ignore[no-untyped-call]  # pyspark leaves it untyped
            SparkConf(loadDefaults=False).setAll(list(options.items())), {"stdout": out, "stderr": out}
        )
    SparkContext._ensure_initialized(gateway=gateway)


_shipped_sessions: set[str] = set()  # Connect session ids that already hold the code zip


def _connect_session(settings: SparkSettings) -> SparkSession:
    """A Spark Connect session: the client speaks gRPC to the server, which runs the driver and the executors."""
    _check_reachable(settings.remote)
    builder = SparkSession.builder.remote(settings.remote)
    for name, value in [*SQL_CONF.items(), *settings.conf]:
        builder = builder.config(name, value)
    try:
        spark = builder.getOrCreate()
        # pyspark types remote().getOrCreate() as the classic session, which has no session_id; Connect's has.
        if spark.session_id not in _shipped_sessions:  # type: ignore[attr-defined]  # see above: Connect-only
            spark.addArtifacts(str(code_zip()), pyfile=True)
            _shipped_sessions.add(spark.session_id)  # type: ignore[attr-defined]  # see above: Connect-only
    except ImportError as e:
        raise SourceError(
            f"Spark Connect needs pyspark's connect extras (grpcio, grpcio-status, zstandard): {e}"
        ) from e
    except Exception as e:
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise SourceError(f"Spark Connect server {settings.remote}: {first}") from e
    return spark


def _check_reachable(remote: str, timeout: float = 10.0) -> None:
    """Fail fast on a Connect server that does not answer: the gRPC client would retry for many minutes."""
    parsed = urlsplit(remote.split(";", 1)[0])
    if parsed.scheme != "sc" or not parsed.hostname:
        raise InputError(f"{ENV_PREFIX}REMOTE: {remote!r} is not a Spark Connect URL (sc://host:port)")
    address = (parsed.hostname, parsed.port or CONNECT_PORT)
    try:
        socket.create_connection(address, timeout=timeout).close()
    except OSError as e:
        raise SourceError(f"Spark Connect server {remote} is not reachable: {e.strerror or e}") from None


def stop_spark(spark: SparkSession) -> None:
    """Stop a session and, for a classic one, its driver JVM (PythonGatewayServer exits when its stdin closes), so
    the JVM's memory is back before what follows; a later `get_spark` starts a new one."""
    from pyspark import SparkContext

    gateway = None if is_connect(spark) else SparkContext._gateway
    if gateway is None:
        spark.stop()
        return
    # pyspark's SparkContext.stop shuts its accumulator server down after the JVM's context and waits for the
    # server's loop, whose handler of the JVM's connection polls once a second (pyspark/accumulators.py
    # UpdateRequestHandler; the loop itself every 0.5 s): up to a second of nothing in every `rebalance run`. The
    # server's shutdown starts here instead, on a thread not waited for: the JVM's exit ends its connection, the
    # handler's EOF then is expected (not reported), and the loop ends.
    context = spark.sparkContext
    accumulators = context._accumulatorServer
    context._accumulatorServer = None  # type: ignore[assignment]
    if accumulators is not None:
        accumulators.handle_error = _ended_quietly  # type: ignore[method-assign]
        Thread(target=accumulators.shutdown, name="accumulators-stop", daemon=True).start()
    spark.stop()
    gateway.shutdown()
    proc = getattr(gateway, "proc", None)
    if proc is not None and proc.stdin is not None:
        proc.stdin.close()
        proc.wait(timeout=60)
    SparkContext._gateway = None
    SparkContext._jvm = None


def _ended_quietly(request: object, client_address: object) -> None:
    """The accumulator server's handler of a request that failed: the JVM's connection ended with the JVM."""


@contextmanager
def session_conf(spark: SparkSession, conf: Mapping[str, str]) -> Iterator[None]:
    """Set session settings for the duration of a block, then restore what was there."""
    before = {key: spark.conf.get(key, None) for key in conf}
    for key, value in conf.items():
        spark.conf.set(key, value)
    try:
        yield
    finally:
        for key, old in before.items():
            if old is None:
                spark.conf.unset(key)
            else:
                spark.conf.set(key, old)


def local_frame(spark: SparkSession, rows: Sequence[Sequence[object]], schema: pa.Schema) -> DataFrame:
    """Driver-side rows as a DataFrame, handed over as Arrow: from a Python list, even an empty one, Spark starts
    Python workers (a second daemon beside the kernels' ones, ~180 MB) just to unpickle the rows."""
    columns = [[row[i] for row in rows] for i in range(len(schema))]
    table = pa.table({f.name: pa.array(c, f.type) for f, c in zip(schema, columns, strict=True)}, schema=schema)
    return spark.createDataFrame(table, schema=from_arrow_schema(schema))


def few_rows_conf(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """ONE_GROUP_CONF for queries of a few hundred rows in any session, but for the settings the environment gives
    (REBALANCE_SPARK_CONF): those come last, as they do at a session's start."""
    given = dict(SparkSettings.from_env(environ).conf)
    return {key: value for key, value in ONE_GROUP_CONF.items() if key not in given}


def is_connect(spark: SparkSession) -> bool:
    """True for a Spark Connect session (no SparkContext, no JVM in this process)."""
    return type(spark).__module__.startswith("pyspark.sql.connect")


def shipped_files(root: Path = ROOT) -> Iterator[tuple[str, Path]]:
    """(archive name, file) of the executor code in a stable order; sources and package data, no caches."""
    for entry in SHIPPED:
        path = root / entry
        files = [path] if path.is_file() else sorted(p for p in path.rglob("*") if p.is_file())
        for file in files:
            if "__pycache__" not in file.parts and file.suffix not in (".pyc", ".pyo"):
                yield file.relative_to(root).as_posix(), file


def code_zip(root: Path = ROOT, cache: Path | None = None) -> Path:
    """The executor code as a zip named by its content hash, built once per content in the temp dir."""
    files = list(shipped_files(root))
    digest = hashlib.sha256()
    for name, file in files:
        digest.update(name.encode() + b"\0" + file.read_bytes() + b"\0")
    cache = cache or Path(tempfile.gettempdir()) / "rebalance-pyfiles"
    target = cache / f"rebalance_code_{digest.hexdigest()[:16]}.zip"
    if target.exists():
        return target
    cache.mkdir(parents=True, exist_ok=True)
    # Written aside, then renamed: concurrent processes never see (or ship) a half-written zip.
    fd, partial = tempfile.mkstemp(dir=cache, suffix=".part")
    with os.fdopen(fd, "wb") as handle, zipfile.ZipFile(handle, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, file in files:
            archive.writestr(
                zipfile.ZipInfo(name, date_time=(1980, 1, 1, 0, 0, 0)), file.read_bytes(), zipfile.ZIP_DEFLATED
            )
    os.replace(partial, target)
    return target

"""Spark servers on 127.0.0.1 for tests, benchmarks and `make spark-connect`: a standalone master with one worker,
and a Spark Connect server, all from pyspark's own `bin/` scripts and jars.

Each server is one process group (the JVM, and for a worker its executors and their Python workers), started with
its output in a log directory, waited for with a bound, and ended by killing the group, so nothing outlives the
context that started it. Every listening socket is bound to 127.0.0.1.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path

import pyspark

from jobs.io.loopback import LOOPBACK, free_port
from jobs.io.spark import JVM_OPTIONS, daemon_conf, delta_conf
from planner.errors import SourceError

SPARK_HOME = Path(pyspark.__file__).resolve().parent
CONNECT_SERVER = "org.apache.spark.sql.connect.service.SparkConnectServer"
START_TIMEOUT_S = 90.0
STOP_TIMEOUT_S = 20.0


@dataclass(frozen=True)
class Server:
    """A started server: its process (leader of its own process group), log file and the URL clients use."""

    name: str
    process: subprocess.Popen[bytes]
    log: Path
    url: str


@dataclass(frozen=True)
class Cluster:
    """A standalone cluster: `master.url` is the `spark://` URL drivers connect to."""

    master: Server
    worker: Server


def spark_env(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment of a server: pyspark's SPARK_HOME, loopback only, fast JVM start-up."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SPARK_", "PYSPARK_"))}
    env.update(
        {
            "SPARK_HOME": str(SPARK_HOME),
            "SPARK_LOCAL_IP": LOOPBACK,
            "SPARK_NO_DAEMONIZE": "1",
            # Master and Worker JVMs: no REST submission server (it would take the fixed port 6066).
            "SPARK_DAEMON_JAVA_OPTS": "-XX:+UseSerialGC -XX:TieredStopAtLevel=1 -Dspark.master.rest.enabled=false",
        }
    )
    env.update(extra or {})
    return env


def start(name: str, argv: Sequence[str], env: Mapping[str, str], log_dir: Path, url: str) -> Server:
    """Start `argv` as the leader of a new process group, output appended to `<log_dir>/<name>.log`."""
    log_dir.mkdir(parents=True, exist_ok=True)
    log = log_dir / f"{name}.log"
    with open(log, "ab") as out:
        process = subprocess.Popen(
            list(argv),
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            env=dict(env),
            start_new_session=True,
        )
    return Server(name, process, log, url)


def stop(server: Server, timeout: float = STOP_TIMEOUT_S) -> None:
    """End the server's whole process group: SIGTERM, then SIGKILL after `timeout` seconds."""
    group = server.process.pid  # start_new_session: the group id is the leader's pid
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(group, sig)
        except ProcessLookupError:
            break
        if _group_gone(group, timeout):
            break
    try:
        server.process.wait(timeout)
    except subprocess.TimeoutExpired:
        pass


def _group_gone(group: int, timeout: float) -> bool:
    """Wait until no process of the group is left (the leader is reaped as it exits)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            os.killpg(group, 0)
        except ProcessLookupError:
            return True
        try:
            os.waitpid(group, os.WNOHANG)
        except ChildProcessError:
            pass
        time.sleep(0.1)
    return False


def wait_until(server: Server, ready: Callable[[], bool], what: str, timeout: float = START_TIMEOUT_S) -> None:
    """Poll `ready` until it holds; SourceError with the log's last lines if the server exits or time runs out."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if server.process.poll() is not None:
            raise SourceError(f"{server.name} exited with code {server.process.returncode}: {_tail(server.log)}")
        if ready():
            return
        time.sleep(0.25)
    raise SourceError(f"{server.name}: {what} not ready after {timeout:.0f} s (log {server.log}): {_tail(server.log)}")


def _tail(log: Path, lines: int = 5) -> str:
    text = log.read_text(errors="replace").strip().splitlines() if log.exists() else []
    return " | ".join(text[-lines:]) or "(empty log)"


def accepts(port: int) -> Callable[[], bool]:
    """True once something accepts TCP connections on 127.0.0.1:port."""

    def check() -> bool:
        try:
            with socket.create_connection((LOOPBACK, port), timeout=1):
                return True
        except OSError:
            return False

    return check


def alive_workers(webui_port: int) -> int:
    """Workers the master reports ALIVE (its web UI's JSON view); 0 while it is not up."""
    try:
        with urllib.request.urlopen(f"http://{LOOPBACK}:{webui_port}/json/", timeout=2) as response:
            state = json.load(response)
    except (OSError, ValueError):
        return 0
    return int(state.get("aliveworkers", 0)) if state.get("status") == "ALIVE" else 0


@contextmanager
def standalone_cluster(
    log_dir: Path,
    *,
    python: str | None = None,
    cores: int = 2,
    memory: str = "2g",
    port: int | None = None,
    timeout: float = START_TIMEOUT_S,
) -> Iterator[Cluster]:
    """A standalone master and one worker on 127.0.0.1; `python` is the worker's PYSPARK_PYTHON.

    The worker's scratch space (executor logs, shipped files) is `<log_dir>/work`.
    """
    port = port or free_port()
    master_ui, worker_port, worker_ui = free_port(), free_port(), free_port()
    spark_class = str(SPARK_HOME / "bin" / "spark-class")
    with ExitStack() as stack:
        master = start(
            "master",
            [spark_class, "org.apache.spark.deploy.master.Master"]
            + ["--host", LOOPBACK, "--port", str(port), "--webui-port", str(master_ui)],
            spark_env(),
            log_dir,
            f"spark://{LOOPBACK}:{port}",
        )
        stack.callback(stop, master)
        wait_until(master, accepts(port), "master", timeout)
        worker = start(
            "worker",
            [spark_class, "org.apache.spark.deploy.worker.Worker", "--host", LOOPBACK]
            + ["--port", str(worker_port), "--webui-port", str(worker_ui)]
            + ["--cores", str(cores), "--memory", memory, "--work-dir", str(log_dir / "work"), master.url],
            spark_env({"PYSPARK_PYTHON": python} if python else None),
            log_dir,
            master.url,
        )
        stack.callback(stop, worker)
        wait_until(worker, lambda: alive_workers(master_ui) >= 1, "worker registration", timeout)
        yield Cluster(master, worker)


@contextmanager
def connect_server(
    log_dir: Path,
    *,
    port: int | None = None,
    master: str = "local[*]",
    python: str | None = None,
    conf: Mapping[str, str] | None = None,
    timeout: float = START_TIMEOUT_S,
) -> Iterator[Server]:
    """A Spark Connect server on 127.0.0.1:`port` (its own driver, on `master`); `python` runs its Python UDFs."""
    port = port or free_port()
    settings = {
        "spark.connect.grpc.binding.address": LOOPBACK,
        "spark.connect.grpc.binding.port": str(port),
        "spark.driver.host": LOOPBACK,
        "spark.driver.bindAddress": LOOPBACK,
        "spark.ui.enabled": "false",
        "spark.driver.extraJavaOptions": JVM_OPTIONS,
        "spark.executor.extraJavaOptions": JVM_OPTIONS,
        "spark.sql.session.timeZone": "UTC",
        **delta_conf(),
        **daemon_conf(master, python or ""),
        **(conf or {}),
    }
    if python:
        settings["spark.pyspark.python"] = python
    argv = [str(SPARK_HOME / "bin" / "spark-submit"), "--class", CONNECT_SERVER, "--master", master]
    for key, value in settings.items():
        argv += ["--conf", f"{key}={value}"]
    server = start(
        "connect",
        [*argv, "spark-internal"],
        spark_env({"PYSPARK_PYTHON": python} if python else None),
        log_dir,
        f"sc://{LOOPBACK}:{port}",
    )
    try:
        wait_until(server, accepts(port), "Spark Connect gRPC port", timeout)
        yield server
    finally:
        stop(server)


def main(argv: Sequence[str] | None = None) -> int:
    """Run a server in the foreground until Ctrl-C: `connect --port 15002` or `cluster --port 7077`."""
    parser = argparse.ArgumentParser(prog="python -m jobs.io.spark_servers", description=main.__doc__)
    sub = parser.add_subparsers(dest="kind", required=True)
    for kind, default_port in (("connect", 15002), ("cluster", 7077)):
        p = sub.add_parser(kind)
        p.add_argument("--port", type=int, default=default_port, help=f"port on 127.0.0.1 (default {default_port})")
        p.add_argument(
            "--python",
            default=sys.executable,
            help="Python of the executors, with the pinned numpy, pandas and pyarrow (default: this one, the venv's)",
        )
        p.add_argument("--log-dir", type=Path, help="server logs (default: a new temp dir)")
    sub.choices["connect"].add_argument("--master", default="local[*]", help="the Connect server's own master")
    args = parser.parse_args(argv)
    log_dir = args.log_dir or Path(tempfile.mkdtemp(prefix=f"spark-{args.kind}-"))
    servers: AbstractContextManager[Server | Cluster]
    if args.kind == "connect":
        servers = connect_server(log_dir, port=args.port, master=args.master, python=args.python)
    else:
        servers = standalone_cluster(log_dir, port=args.port, python=args.python)
    try:
        with servers as running:
            leader = running if isinstance(running, Server) else running.master
            print(f"{args.kind} at {leader.url} (logs in {log_dir}); Ctrl-C stops it", flush=True)
            leader.process.wait()
            print(f"{leader.name} exited with code {leader.process.returncode}: {_tail(leader.log)}", file=sys.stderr)
            return 1
    except KeyboardInterrupt:
        return 0
    except SourceError as e:
        print(f"spark_servers: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    raise SystemExit(main())

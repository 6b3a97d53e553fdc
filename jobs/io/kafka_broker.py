"""Apache Kafka itself on 127.0.0.1: a single-node KRaft broker+controller for the demo, the tests and the benches.

`make install` resolves Apache Kafka (broker, CLIs, a log4j2 binding) from Maven Central once, into
`.cache/kafka/lib` (`jvm/kafka-runtime/pom.xml`). `broker()` formats a fresh storage directory with Kafka's own
`kafka.tools.StorageTool format --standalone`, starts `kafka.Kafka` on free loopback ports, waits until the broker
answers a metadata request, and on exit stops it by PID and removes its directory. `kafka_tool()` runs Kafka's CLIs
(`kafka-consumer-groups` and friends) from the same jars.

Group-protocol timings are shortened for tests (heartbeats every 500 ms, sessions of 6 s, no initial rebalance
delay); everything else is Kafka's default configuration for a one-node cluster (replication factors 1).
"""

from __future__ import annotations

import base64
import contextlib
import os
import secrets
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from jobs.io.loopback import free_port
from planner.errors import SourceError

KAFKA_HOME = Path(os.environ.get("REBALANCE_KAFKA_HOME", Path(__file__).resolve().parents[2] / ".cache" / "kafka"))
JVM_OPTS = ("-Xms128m", "-Xmx768m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-Djava.awt.headless=true")

# Shortened group timings: members join, leave and are fenced in seconds rather than Kafka's default 45 s
# (GroupCoordinatorConfig; the heartbeat interval must stay below the session timeout).
TEST_TIMINGS: dict[str, str] = {
    "group.initial.rebalance.delay.ms": "0",
    "group.consumer.heartbeat.interval.ms": "500",
    "group.consumer.min.heartbeat.interval.ms": "500",
    "group.consumer.session.timeout.ms": "6000",
    "group.consumer.min.session.timeout.ms": "6000",
    "group.min.session.timeout.ms": "6000",
    "group.consumer.assignment.interval.ms": "0",  # Kafka 4.4: recompute a target at once, not at most every 1 s
}


@dataclass(frozen=True)
class Listener:
    """One client listener: its name, security protocol and the broker settings that go with it."""

    name: str
    protocol: str = "PLAINTEXT"
    config: Mapping[str, str] = field(default_factory=dict, hash=False)  # hashed by name and protocol: a dict key


@dataclass(frozen=True)
class Broker:
    """A running Apache Kafka broker: its loopback address, process id, data directory and listener addresses."""

    bootstrap: str
    pid: int
    data_dir: str
    listeners: Mapping[str, str] = field(default_factory=dict)
    version: str = ""


def java() -> str:
    """The `java` executable, or one line naming what to install."""
    home = os.environ.get("JAVA_HOME")
    found = (
        str(Path(home) / "bin" / "java") if home and (Path(home) / "bin" / "java").is_file() else shutil.which("java")
    )
    if not found:
        raise SourceError("java is missing: install a Java 17 runtime (openjdk-17-jre-headless) to run Apache Kafka")
    return found


def kafka_version(home: Path = KAFKA_HOME) -> str:
    """The Apache Kafka version installed in `home` (from its broker jar's name)."""
    jars = sorted((home / "lib").glob("kafka_2.13-*.jar"))
    if not jars:
        raise SourceError(f"Apache Kafka is not installed in {home / 'lib'}: run `make install` (Maven resolves it)")
    return jars[-1].name.removeprefix("kafka_2.13-").removesuffix(".jar")


def classpath(home: Path = KAFKA_HOME, extra: Sequence[str | os.PathLike[str]] = ()) -> str:
    """Kafka's runtime classpath (every jar Maven copied), checked to hold the broker, then `extra` (plugin jars)."""
    kafka_version(home)
    return os.pathsep.join([str(home / "lib" / "*"), *map(str, extra)])


def kraft_cluster_id() -> str:
    """A random cluster id as Kafka's `Uuid.randomUuid().toString()` makes one: 16 bytes, base64url, no padding.

    Like Uuid.randomUuid, never one that starts with '-' (a command line would take it for an option).
    """
    while (uuid := base64.urlsafe_b64encode(secrets.token_bytes(16)).decode().rstrip("=")).startswith("-"):
        pass
    return uuid


def server_properties(
    data_dir: Path, port: int, controller_port: int, listeners: Mapping[Listener, int], overrides: Mapping[str, str]
) -> dict[str, str]:
    """A single-node KRaft configuration: broker and controller in one process, everything on 127.0.0.1."""
    names = ["PLAINTEXT", *(lst.name for lst in listeners)]
    addresses = [f"PLAINTEXT://127.0.0.1:{port}", *(f"{lst.name}://127.0.0.1:{p}" for lst, p in listeners.items())]
    protocols = ["CONTROLLER:PLAINTEXT", "PLAINTEXT:PLAINTEXT", *(f"{lst.name}:{lst.protocol}" for lst in listeners)]
    props = {
        "process.roles": "broker,controller",
        "node.id": "1",
        "controller.quorum.bootstrap.servers": f"127.0.0.1:{controller_port}",
        "controller.listener.names": "CONTROLLER",
        "listeners": ",".join([*addresses, f"CONTROLLER://127.0.0.1:{controller_port}"]),
        "advertised.listeners": ",".join(addresses),
        "listener.security.protocol.map": ",".join(protocols),
        "inter.broker.listener.name": names[0],
        "log.dirs": str(data_dir / "logs"),
        "num.partitions": "1",
        "offsets.topic.replication.factor": "1",
        "transaction.state.log.replication.factor": "1",
        "transaction.state.log.min.isr": "1",
        "share.coordinator.state.topic.replication.factor": "1",
        "share.coordinator.state.topic.min.isr": "1",
        **TEST_TIMINGS,
    }
    for lst in listeners:
        props.update({f"listener.name.{lst.name.lower()}.{k}": v for k, v in lst.config.items()})
    props.update(overrides)
    return props


def _log4j2(data_dir: Path) -> Path:
    """Kafka's logging: warnings and errors only, plus the line saying the server started and what the plan appliers
    (jvm/planned-assignor's broker plugin, when on the classpath) say of each plan, into the broker's log."""
    path = data_dir / "log4j2.properties"
    path.write_text(
        "rootLogger.level = WARN\nrootLogger.appenderRef.out.ref = OUT\n"
        "appender.out.type = Console\nappender.out.name = OUT\nappender.out.layout.type = PatternLayout\n"
        "appender.out.layout.pattern = [%d] %p %m (%c)%n\n"
        "logger.server.name = kafka.server.KafkaRaftServer\nlogger.server.level = INFO\n"
        "logger.planned.name = io.rebalanceplanner\nlogger.planned.level = INFO\n"
    )
    return path


def _java_command(
    data_dir: Path,
    main: str,
    *args: str,
    heap: Sequence[str] = JVM_OPTS,
    extra_classpath: Sequence[str | os.PathLike[str]] = (),
) -> list[str]:
    return [
        java(),
        *heap,
        f"-Dlog4j2.configurationFile={_log4j2(data_dir)}",
        "-cp",
        classpath(extra=extra_classpath),
        main,
        *args,
    ]


def _write_properties(path: Path, props: Mapping[str, str]) -> None:
    path.write_text("".join(f"{k}={v}\n" for k, v in props.items()))


def format_storage(data_dir: Path, config: Path, extra_classpath: Sequence[str | os.PathLike[str]] = ()) -> None:
    """Kafka's own storage tool: a new standalone KRaft cluster in `data_dir` (its meta.properties, bootstrap log).

    It checks the whole configuration, plugin classes included: `extra_classpath` must hold them."""
    done = subprocess.run(
        _java_command(
            data_dir,
            "kafka.tools.StorageTool",
            *("format", "--standalone", "-t", kraft_cluster_id(), "-c", str(config)),
            extra_classpath=extra_classpath,
        ),
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
        check=False,
    )
    if done.returncode != 0:
        reason = (done.stderr or done.stdout).strip().splitlines()
        raise SourceError(f"kafka storage format failed: {reason[-1] if reason else done.returncode}")


@contextlib.contextmanager
def broker(
    *,
    listeners: Sequence[Listener] = (),
    overrides: Mapping[str, str] | None = None,
    extra_classpath: Sequence[str | os.PathLike[str]] = (),
    startup_timeout_s: float = 90.0,
) -> Iterator[Broker]:
    """Run Apache Kafka (KRaft, one node) on free 127.0.0.1 ports; stop it by PID and remove its data on exit.

    `extra_classpath` adds jars after Kafka's own, such as a broker plugin that `overrides` enables (the plan
    applier's broker jar and `group.consumer.assignors`: `jobs.demo.java_members.planned_broker_settings`)."""
    data = Path(tempfile.mkdtemp(prefix="rebalance-kafka-"))
    port, controller_port = free_port(), free_port()
    extra = {lst: free_port() for lst in listeners}
    config = data / "server.properties"
    _write_properties(config, server_properties(data, port, controller_port, extra, overrides or {}))
    log_path = data / "broker.log"
    proc: subprocess.Popen[bytes] | None = None
    try:
        format_storage(data, config, extra_classpath)
        with open(log_path, "wb") as log:
            proc = subprocess.Popen(
                _java_command(data, "kafka.Kafka", str(config), extra_classpath=extra_classpath),
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
            )
        bootstrap = f"127.0.0.1:{port}"
        _wait_ready(proc, bootstrap, startup_timeout_s, log_path)
        addresses = {"PLAINTEXT": bootstrap, **{lst.name: f"127.0.0.1:{p}" for lst, p in extra.items()}}
        yield Broker(bootstrap, proc.pid, str(data), addresses, kafka_version())
    finally:
        if proc is not None:
            stop(proc)
        shutil.rmtree(data, ignore_errors=True)


def _wait_ready(proc: subprocess.Popen[bytes], bootstrap: str, timeout_s: float, log_path: Path) -> None:
    """Until the broker answers a metadata request listing itself (its port opens before it can serve) and its group
    coordinator answers (the first FindCoordinator creates __consumer_offsets, whose partitions then load): clients
    that join groups or commit right after start would otherwise meet COORDINATOR_NOT_AVAILABLE or
    COORDINATOR_LOAD_IN_PROGRESS."""
    from kafka import KafkaAdminClient
    from kafka.errors import KafkaError

    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SourceError(f"Apache Kafka exited with {proc.returncode} while starting: {_last_error(log_path)}")
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            listening = s.connect_ex(tuple(_host_port(bootstrap))) == 0
        if listening:
            with contextlib.suppress(KafkaError, OSError):
                admin = KafkaAdminClient(
                    bootstrap_servers=[bootstrap], client_id="rebalance-broker-probe", request_timeout_ms=5_000
                )
                try:
                    if admin.describe_cluster().get("brokers") and _coordinator_ready(admin):
                        return
                finally:
                    admin.close()
        time.sleep(0.2)
    raise SourceError(f"Apache Kafka did not answer on {bootstrap} within {timeout_s:.0f}s: {_last_error(log_path)}")


def _coordinator_ready(admin: Any) -> bool:
    """The group coordinator answers: FindCoordinator succeeds and a ListGroups is not refused as loading."""
    from kafka.errors import KafkaError

    try:
        admin._manager.run(admin._find_coordinator_ids, ["rebalance-broker-probe"])
        admin.list_groups()
    except KafkaError:
        return False
    return True


def _host_port(address: str) -> tuple[str, int]:
    host, _, port = address.rpartition(":")
    return host, int(port)


def _last_error(log_path: Path) -> str:
    lines = [ln for ln in log_path.read_text(errors="replace").splitlines() if " ERROR " in ln or "Exception" in ln]
    return lines[-1].strip() if lines else f"see {log_path}"


def stop(proc: subprocess.Popen[bytes]) -> None:
    """Stop a process we started, by its PID: SIGTERM (Kafka's clean shutdown), then SIGKILL after 20 s."""
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=20)


def kafka_tool(main: str, *args: str, timeout_s: float = 120.0) -> str:
    """Run one of Kafka's CLIs (e.g. `org.apache.kafka.tools.consumer.group.ConsumerGroupCommand`); its stdout."""
    work = Path(tempfile.mkdtemp(prefix="rebalance-kafka-tool-"))
    try:
        done = subprocess.run(
            _java_command(work, main, *args),
            capture_output=True,
            text=True,
            stdin=subprocess.DEVNULL,
            timeout=timeout_s,
            check=False,
        )
    finally:
        shutil.rmtree(work, ignore_errors=True)
    if done.returncode != 0:
        reason = (done.stderr or done.stdout).strip().splitlines()
        raise SourceError(f"{main.rsplit('.', 1)[-1]} failed: {reason[-1] if reason else done.returncode}")
    return done.stdout


if __name__ == "__main__":  # `python -m jobs.io.kafka_broker`: one broker in the foreground until Ctrl-C
    with broker() as running:
        print(f"Apache Kafka {running.version} on {running.bootstrap} (pid {running.pid}); Ctrl-C stops it", flush=True)
        with contextlib.suppress(KeyboardInterrupt):
            while True:
                time.sleep(3600)

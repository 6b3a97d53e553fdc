"""The Java plan appliers at work: their jars, Java consumer processes (PlanConsumer), a broker with the plugin.

`applier_jars()` finds jvm/planned-assignor's three jars (`make install` builds them; when one is missing they are
built here with Maven, offline first). `java_group()` runs a classic group of real JVM consumers, one process per
member, each the demo jar's PlanConsumer with the consumer jar's PlannedAssignor first in
`partition.assignment.strategy`: each reports its assignments and every record it consumed as JSON lines on stdout,
which this module reads back; the assignor's log line goes to the member's stderr. Members are stopped by closing
their stdin (a clean close: commit, leave), and by PID (SIGTERM, then SIGKILL) if they do not exit.
`planned_broker()` starts Apache Kafka with the broker jar on its classpath and PlannedGroupAssignor in
`group.consumer.assignors`, serving the plans of one directory.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import tempfile
import threading
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from jobs.apply.plan_file import TopicPartition
from jobs.demo.cluster import DemoClusterError
from jobs.io import kafka_broker

REPO = Path(__file__).resolve().parents[2]
APPLY_JVM = REPO / "jvm" / "planned-assignor"
VERSION = "1.0.0"

PLANNED_ASSIGNOR = "io.rebalanceplanner.apply.PlannedAssignor"
PLANNED_GROUP_ASSIGNOR = "io.rebalanceplanner.apply.broker.PlannedGroupAssignor"
PLAN_CONSUMER = "io.rebalanceplanner.apply.demo.PlanConsumer"
PROTOCOL = "rebalance-planned"  # both assignors' name: the classic group's protocol, the KIP-848 remote assignor

# Kafka's Java assignor for each strategy name (what a PlannedAssignor falls back to).
JAVA_ASSIGNORS = {
    "range": "org.apache.kafka.clients.consumer.RangeAssignor",
    "roundrobin": "org.apache.kafka.clients.consumer.RoundRobinAssignor",
    "sticky": "org.apache.kafka.clients.consumer.StickyAssignor",
    "cooperative-sticky": "org.apache.kafka.clients.consumer.CooperativeStickyAssignor",
}
JVM_OPTS = ("-Xms32m", "-Xmx128m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-Xshare:auto")
STOP_TIMEOUT_S = 30.0

# A member's log: warnings of the client, and every line of the plan appliers (served, or not served and why).
LOG4J2 = (
    "rootLogger.level = WARN\nrootLogger.appenderRef.err.ref = ERR\n"
    "appender.err.type = Console\nappender.err.name = ERR\nappender.err.target = SYSTEM_ERR\n"
    "appender.err.layout.type = PatternLayout\nappender.err.layout.pattern = [%d] %p %m (%c)%n\n"
    "logger.planned.name = io.rebalanceplanner\nlogger.planned.level = INFO\n"
)


@dataclass(frozen=True)
class ApplierJars:
    consumer: Path  # PlannedAssignor: on a Java consumer application's classpath
    broker: Path  # PlannedGroupAssignor: in a broker's libs
    demo: Path  # PlanConsumer


def applier_jars(build: bool = True) -> ApplierJars:
    """The three jars of jvm/planned-assignor; missing ones are built with Maven (offline first) when `build`."""
    target = APPLY_JVM / "target"
    jars = ApplierJars(
        target / f"planned-assignor-{VERSION}.jar",
        target / f"planned-assignor-{VERSION}-broker.jar",
        target / f"planned-assignor-{VERSION}-demo.jar",
    )
    missing = [p for p in (jars.consumer, jars.broker, jars.demo) if not p.is_file()]
    if missing and build:
        mvn = shutil.which("mvn")
        if not mvn:
            raise DemoClusterError("mvn is missing: install Maven 3 to build jvm/planned-assignor (make install)")
        command = [mvn, "-q", "-B", "-Dstyle.color=never", "-f", str(APPLY_JVM / "pom.xml"), "package", "-DskipTests"]
        built = subprocess.run([*command[:2], "-o", *command[2:]], capture_output=True, text=True, check=False)
        if built.returncode != 0:  # a dependency not in ~/.m2 yet: resolve it from Maven Central
            built = subprocess.run(command, capture_output=True, text=True, check=False)
        if built.returncode != 0:
            tail = (built.stdout + built.stderr).strip().splitlines()[-5:]
            raise DemoClusterError("Maven could not build jvm/planned-assignor: " + " | ".join(tail))
        missing = [p for p in (jars.consumer, jars.broker, jars.demo) if not p.is_file()]
    if missing:
        raise DemoClusterError(f"the plan appliers' jars are missing ({[p.name for p in missing]}): run make install")
    return jars


def planned_broker_settings(plan_dir: str | os.PathLike[str]) -> dict[str, str]:
    """Broker properties enabling PlannedGroupAssignor beside Kafka's own: uniform stays the default (first)."""
    return {
        "group.consumer.assignors": f"uniform,range,{PLANNED_GROUP_ASSIGNOR}",
        "rebalance.plan.dir": str(plan_dir),
    }


@contextlib.contextmanager
def planned_broker(plan_dir: str | os.PathLike[str], **kwargs: Any) -> Iterator[kafka_broker.Broker]:
    """Apache Kafka with the broker jar on its classpath and PlannedGroupAssignor serving `plan_dir`'s plans."""
    jars = applier_jars()
    overrides = {**planned_broker_settings(plan_dir), **kwargs.pop("overrides", {})}
    with kafka_broker.broker(overrides=overrides, extra_classpath=[jars.broker], **kwargs) as running:
        yield running


def broker_log(broker: kafka_broker.Broker) -> Path:
    return Path(broker.data_dir) / "broker.log"


@dataclass
class JavaMember:
    """One Java consumer process: its client id, process, and the files its stdout (events) and stderr (log) fill."""

    client_id: str
    proc: subprocess.Popen[bytes]
    out: Path
    err: Path
    offset: int = 0  # how far `out` was read
    assigned: frozenset[TopicPartition] = frozenset()
    stopping: bool = False

    @property
    def error(self) -> str | None:
        """Why the process ended by itself (None while it runs or after it was asked to stop)."""
        code = self.proc.poll()
        if code is None or self.stopping:
            return None
        lines = self.err.read_text(errors="replace").strip().splitlines()
        return f"exited with {code}: {lines[-1] if lines else 'no output'}"


@dataclass
class JavaGroup:
    """A classic group of PlanConsumer processes with PlannedAssignor(plan, fallback); start and stop them one by one.

    `events` keeps every event every member reported (stopped members' too), with the member's client id."""

    bootstrap: str
    group_id: str
    plan_path: Path
    fallback: str  # a Java assignor class name
    workdir: Path
    jars: ApplierJars
    members: dict[str, JavaMember] = field(default_factory=dict)
    stopped: list[JavaMember] = field(default_factory=list)
    events: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    starts: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def start(
        self,
        client_id: str,
        topics: Sequence[str],
        *,
        group_instance_id: str | None = None,
        properties: Mapping[str, str] | None = None,
    ) -> JavaMember:
        """Start a member process: PlannedAssignor first, its fallback (the same class PlannedAssignor delegates to)
        second, so the group runs the fallback's protocol when a member without PlannedAssignor is in it."""
        props = {
            "bootstrap.servers": self.bootstrap,
            "group.id": self.group_id,
            "client.id": client_id,
            "partition.assignment.strategy": f"{PLANNED_ASSIGNOR},{self.fallback}",
            "rebalance.plan.path": str(self.plan_path),
            "rebalance.plan.fallback": self.fallback,
            "enable.auto.commit": "false",
            "auto.offset.reset": "earliest",
            "session.timeout.ms": "10000",
            "heartbeat.interval.ms": "1000",
            "max.poll.records": "200",
            "metadata.max.age.ms": "1000",  # a grown topic is seen (and the group rebalanced) within a second
            **({"group.instance.id": group_instance_id} if group_instance_id else {}),
            **(properties or {}),
        }
        config = self.workdir / f"{client_id}.properties"
        config.write_text("".join(f"{k}={v}\n" for k, v in props.items()))
        self.starts += 1
        out, err = self.workdir / f"{client_id}.{self.starts}.out", self.workdir / f"{client_id}.log"
        classpath = os.pathsep.join([kafka_broker.classpath(), str(self.jars.consumer), str(self.jars.demo)])
        command = [
            kafka_broker.java(),
            *JVM_OPTS,
            f"-Dlog4j2.configurationFile={self.workdir / 'log4j2.properties'}",
            "-cp",
            classpath,
            PLAN_CONSUMER,
            str(config),
            ",".join(topics),
        ]
        with open(out, "wb") as stdout, open(err, "ab") as stderr:
            proc = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=stdout, stderr=stderr)
        member = self.members[client_id] = JavaMember(client_id, proc, out, err)
        return member

    def stop(self, *client_ids: str) -> None:
        """Stop members together: all asked (stdin closed: commit, close, leave), then awaited; by PID if stuck."""
        members = [self.members.pop(c) for c in client_ids]
        for m in members:
            m.stopping = True
            with contextlib.suppress(OSError):
                assert m.proc.stdin is not None
                m.proc.stdin.close()
        for m in members:
            try:
                m.proc.wait(timeout=STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                kafka_broker.stop(m.proc)  # SIGTERM by PID (the JVM's hook closes the consumer), then SIGKILL
            self._read(m)
            self.stopped.append(m)

    def stop_all(self) -> None:
        self.stop(*self.members)

    def assignments(self) -> dict[str, set[TopicPartition]]:
        """Each running member's assignment as its own process last reported it."""
        for m in self.members.values():
            self._read(m)
        return {c: set(m.assigned) for c, m in self.members.items()}

    def log_lines(self, needle: str = "planned assignor") -> list[str]:
        """Lines of every member's log (stderr) that contain `needle`, member by member, oldest first."""
        logs = {m.err for m in [*self.stopped, *self.members.values()]}
        lines = [line for path in sorted(logs) for line in path.read_text(errors="replace").splitlines()]
        return [line for line in lines if needle in line]

    def consumed(self) -> list[tuple[str, str, int, int]]:
        """(client id, topic, partition, offset) of every record any member reported consuming."""
        for m in self.members.values():
            self._read(m)
        with self._lock:
            return [
                (client, e["topic"], e["partition"], offset)
                for client, e in self.events
                if e["event"] == "records"
                for offset in e["offsets"]
            ]

    def _read(self, member: JavaMember) -> None:
        """The member's complete new stdout lines, parsed into `events`; its last assignment."""
        with self._lock, open(member.out, "rb") as f:
            f.seek(member.offset)
            data = f.read()
            complete = data[: data.rfind(b"\n") + 1]
            member.offset += len(complete)
            for line in complete.decode().splitlines():
                event = json.loads(line)
                self.events.append((member.client_id, event))
                if event["event"] == "assignment":
                    member.assigned = frozenset((t, p) for t, p in event["partitions"])
                elif event["event"] == "closed":
                    member.assigned = frozenset()


@contextlib.contextmanager
def java_group(
    bootstrap: str,
    group_id: str,
    plan_path: str | os.PathLike[str],
    fallback: str = JAVA_ASSIGNORS["cooperative-sticky"],
) -> Iterator[JavaGroup]:
    """A JavaGroup whose member processes are all stopped (by PID if need be) on exit."""
    workdir = Path(tempfile.mkdtemp(prefix=f"rebalance-java-{group_id}-"))
    (workdir / "log4j2.properties").write_text(LOG4J2)
    group = JavaGroup(bootstrap, group_id, Path(plan_path), fallback, workdir, applier_jars())
    try:
        yield group
    finally:
        group.stop_all()
        shutil.rmtree(workdir, ignore_errors=True)

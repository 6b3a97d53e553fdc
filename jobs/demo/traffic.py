"""Records produced continuously while a group switches assignments, and the check that each was consumed once.

`Traffic` produces to every partition of some topics in turn from a background thread until stopped, and knows
each partition's end offset from the broker's acknowledgements. `consumption()` compares what the members of a group
reported consuming (every (topic, partition, offset), by member) with what was produced and with the offsets the
group committed: every record consumed, none consumed twice (by two members, or by one member twice), the committed
offset of every partition at its end. The members commit what they consumed before a partition is revoked from them
(jobs.demo.java_members' PlanConsumer, jobs.demo.kip848_members), so a clean switch redelivers nothing: any duplicate
is a failure, not at-least-once noise.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from jobs.apply.plan_file import TopicPartition
from jobs.demo.cluster import DemoClusterError

Consumed = Sequence[tuple[str, str, int, int]]  # (member client id, topic, partition, offset)


@dataclass
class Traffic:
    """A producer thread writing one small record to each partition of `partitions` in turn, `rate` records/s."""

    bootstrap: str
    partitions: Sequence[TopicPartition]
    rate: float = 200.0
    ends: dict[TopicPartition, int] = field(default_factory=dict)
    error: str | None = None
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def start(self) -> Traffic:
        self._thread = threading.Thread(target=self._run, name="traffic", daemon=True)
        self._thread.start()
        return self

    def produced(self) -> int:
        with self._lock:
            return sum(self.ends.values())

    def stop(self) -> dict[TopicPartition, int]:
        """Stop producing; every record sent is acknowledged. Returns each partition's end offset."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=60)
        if self.error:
            raise DemoClusterError(f"producer failed: {self.error}")
        return dict(self.ends)

    def _run(self) -> None:
        from kafka import KafkaProducer

        producer = KafkaProducer(bootstrap_servers=[self.bootstrap], acks="all", linger_ms=5, client_id="traffic")
        pending: list[Any] = []
        try:
            n = 0
            while not self._stop.is_set():
                topic, partition = self.partitions[n % len(self.partitions)]
                pending.append(producer.send(topic, value=b"r%d" % n, partition=partition))
                n += 1
                if n % 20 == 0:
                    self._settle(producer, pending)
                    time.sleep(20 / self.rate)
            self._settle(producer, pending)
        except Exception as exc:  # noqa: BLE001 - raised by stop()
            self.error = repr(exc)
        finally:
            producer.close(timeout=10)

    def _settle(self, producer: Any, pending: list[Any]) -> None:
        producer.flush(timeout=30)
        with self._lock:
            for future in pending:
                meta = future.get(timeout=30)
                tp = (meta.topic, meta.partition)
                self.ends[tp] = max(self.ends.get(tp, 0), meta.offset + 1)
        pending.clear()


@dataclass(frozen=True)
class Consumption:
    """What a group made of the records produced: counts, and every problem found (all empty when nothing is wrong)."""

    produced: int
    consumed: int
    by_member: dict[str, int]
    missing: list[tuple[str, int, int]]
    duplicates: dict[tuple[str, int, int], list[str]]  # (topic, partition, offset) -> the members that consumed it
    commits: dict[TopicPartition, tuple[int | None, int]]  # partition -> (committed, end) where they differ

    @property
    def ok(self) -> bool:
        return not (self.missing or self.duplicates or self.commits)

    def summary(self) -> str:
        members = ", ".join(f"{c} {n}" for c, n in sorted(self.by_member.items()))
        return (
            f"{self.produced} records produced, {self.consumed} consumed ({members}); {len(self.missing)} missing, "
            f"{len(self.duplicates)} consumed twice, {len(self.commits)} partitions committed short of their end"
        )


def consumption(
    consumed: Consumed, ends: Mapping[TopicPartition, int], committed: Mapping[TopicPartition, int]
) -> Consumption:
    """Every (topic, partition, offset) below `ends` consumed exactly once, and `committed` at every end."""
    who: dict[tuple[str, int, int], list[str]] = {}
    for client, topic, partition, offset in consumed:
        who.setdefault((topic, partition, offset), []).append(client)
    produced = {(t, p, o) for (t, p), end in ends.items() for o in range(end)}
    return Consumption(
        produced=len(produced),
        consumed=len(consumed),
        by_member=dict(Counter(c for c, *_ in consumed)),
        missing=sorted(produced - who.keys())[:20],
        duplicates={k: v for k, v in sorted(who.items()) if len(v) > 1 or k not in produced},
        commits={tp: (committed.get(tp), end) for tp, end in ends.items() if committed.get(tp, 0) != end and end},
    )


def committed_offsets(bootstrap: str, group_id: str) -> dict[TopicPartition, int]:
    from kafka import KafkaAdminClient

    with KafkaAdminClient(bootstrap_servers=[bootstrap], client_id="traffic-check") as admin:
        offsets = admin.list_group_offsets({group_id: None})[group_id]
    return {(tp.topic, tp.partition): meta.offset for tp, meta in offsets.items() if meta.offset >= 0}


def drained(
    bootstrap: str,
    group_id: str,
    consumed: Callable[[], Consumed],
    ends: Mapping[TopicPartition, int],
    *,
    timeout_s: float = 90.0,
) -> Consumption:
    """Wait until the group consumed and committed everything produced (or the timeout), then check it."""
    deadline = time.monotonic() + timeout_s
    while True:
        result = consumption(consumed(), ends, committed_offsets(bootstrap, group_id))
        if (not result.missing and not result.commits) or time.monotonic() > deadline:
            return result
        time.sleep(0.5)

"""A kafka-python member's join of a group on a topic just created, for tests that wait on it.

kafka-python's group leader assigns from the metadata it holds when the group syncs; a round assigned while that
metadata lacked the new topic ("No partition metadata for topic ...") gives the member nothing, and in full runs under
load the member stayed empty for a minute (CI, 2026-11-27; once again here with metadata refreshed every second). So
the member subscribes once its metadata holds the topic (`jobs.demo.cluster.topics_known`, as the demo's restarted
members do), and a round that assigned it nothing is joined again by re-subscribing.
"""

from __future__ import annotations

import time
from typing import Any

from jobs.demo.cluster import topics_known

ROUND_S = 10.0  # a round that assigned nothing for this long is joined again


def join_when_known(consumer: Any, topic: str, timeout_s: float = 60.0) -> int:
    """Subscribe `consumer` (created without topics) to `topic` and poll until the group assigns it partitions;
    returns how many records its polls returned meanwhile. Raises AssertionError after `timeout_s`."""
    deadline = time.monotonic() + timeout_s
    if not topics_known(consumer, [topic], timeout_s):
        raise AssertionError(f"{topic} never reached the consumer's metadata")
    records = 0
    while True:
        consumer.subscribe([topic])
        round_end = time.monotonic() + ROUND_S
        while not consumer.assignment() and time.monotonic() < min(round_end, deadline):
            records += sum(len(batch) for batch in consumer.poll(timeout_ms=200).values())
        if consumer.assignment():
            return records
        if time.monotonic() > deadline:
            raise AssertionError(f"the group of {topic} assigned its member nothing within {timeout_s:.0f}s")
        consumer.unsubscribe()

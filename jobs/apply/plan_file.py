"""The exported plan: one approved generation of one group, as a JSON document other clients can apply.

`rebalance export` writes it; `PlannedAssignor` serves it; standard library only, so any consumer can read it.

    {"format": "rebalance-plan/1",
     "group_id": "payments", "generation_id": 3, "strategy": "range",
     "created_at": "2026-11-21T02:00:00Z", "snapshot_id": "scheduled__2026-11-21T02:00:00",
     "topics": {"orders": 12, "refunds": 4}, "topic_ids": {"orders": "mq3Uo1jSQk2bIGvYg9UmAQ", ...},
     "members": {"c-1-9f0e...": {"client_id": "c-1", "group_instance_id": null, "topics": ["orders", "refunds"],
                                 "assignment": {"orders": [0, 1, 2, 3, 4, 5], "refunds": [0, 1]}}, ...}}

`members` is keyed by the member id the snapshot saw; `client_id` and `group_instance_id` are what identify the
same consumer after it restarts (see `jobs.apply.matching`). `topics` holds the partition count of every topic the
group subscribes to: the plan assigns each of those partitions exactly once, to a member subscribed to its topic.
`topic_ids` (optional; every planned topic or none) holds each topic's Kafka topic id as the snapshot saw it: a
broker-side assignor sees topics by id only (KIP-848), and a topic deleted and created again under the same name has
a new id, so it is not the topic the plan was made for. schemas/plan.schema.json is this format as a JSON Schema.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from itertools import repeat
from pathlib import Path
from typing import Any

from planner.errors import PlanError

FORMAT = "rebalance-plan/1"
_TOPIC_ID = re.compile(r"^[A-Za-z0-9_-]{22}$")  # Kafka's Uuid.toString: 16 bytes, URL-safe base64 without padding

TopicPartition = tuple[str, int]


@dataclass(frozen=True)
class PlanMember:
    """One member of the planned group: who it is, what it subscribes to and what the plan gives it."""

    member_id: str
    client_id: str | None
    group_instance_id: str | None
    topics: tuple[str, ...]
    assignment: tuple[TopicPartition, ...]


@dataclass(frozen=True)
class Plan:
    """An approved generation's chosen assignment for one group."""

    group_id: str
    generation_id: int
    strategy: str
    created_at: str
    snapshot_id: str | None
    topics: dict[str, int]
    members: dict[str, PlanMember]
    topic_ids: dict[str, str] = field(default_factory=dict)  # topic -> Kafka topic id; empty when not known

    def owners(self) -> dict[TopicPartition, str]:
        """Planned member id of every partition."""
        return {tp: m.member_id for m in self.members.values() for tp in m.assignment}

    def to_json(self) -> dict[str, Any]:
        """The plan as its JSON document (the form `parse_plan` reads)."""
        members = {}
        for m in self.members.values():
            by_topic: dict[str, list[int]] = {}
            for topic, partition in sorted(m.assignment):
                by_topic.setdefault(topic, []).append(partition)
            members[m.member_id] = {
                "client_id": m.client_id,
                "group_instance_id": m.group_instance_id,
                "topics": list(m.topics),
                "assignment": by_topic,
            }
        doc: dict[str, Any] = {
            "format": FORMAT,
            "group_id": self.group_id,
            "generation_id": self.generation_id,
            "strategy": self.strategy,
            "created_at": self.created_at,
            "snapshot_id": self.snapshot_id,
            "topics": dict(sorted(self.topics.items())),
        }
        if self.topic_ids:
            doc["topic_ids"] = dict(sorted(self.topic_ids.items()))
        doc["members"] = members
        return doc


def load_plan(path: str | os.PathLike[str]) -> Plan:
    """Read and check a plan file; PlanError names the file and what is wrong with it."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as e:
        raise PlanError(f"plan file {path}: {e.strerror or e}", "plan_unreadable") from None
    except UnicodeDecodeError as e:
        message = f"plan file {path}: not UTF-8 text (invalid byte at offset {e.start})"
        raise PlanError(message, "plan_unreadable") from None
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as e:
        raise PlanError(f"plan file {path}: invalid JSON: {e}") from None
    return parse_plan(doc, f"plan file {path}")


def write_plan(plan: Plan, path: str | os.PathLike[str]) -> None:
    """Write the plan atomically (a temporary file renamed over `path`): a reader never sees half a plan."""
    target = Path(path)
    temporary = target.with_name(f".{target.name}.tmp-{os.getpid()}")
    temporary.write_text(json.dumps(plan.to_json(), indent=2) + "\n", encoding="utf-8")
    os.replace(temporary, target)


def parse_plan(doc: Any, source: str = "plan") -> Plan:
    """Check a plan document; every partition of `topics` is planned exactly once, to a subscribed member."""
    obj = _object(doc, source)
    if obj.get("format") != FORMAT:
        raise PlanError(f"{source}: format: expected {FORMAT!r}, got {obj.get('format')!r}", "wrong_format")
    topics = {
        topic: _int(count, f"{source}: topics.{topic}", minimum=1)
        for topic, count in _object(obj.get("topics"), f"{source}: topics").items()
    }
    topic_ids = _topic_ids(obj.get("topic_ids"), topics, f"{source}: topic_ids")
    members_doc = _object(obj.get("members"), f"{source}: members")
    if not members_doc:
        raise PlanError(f"{source}: members: the plan has no members")
    members = {mid: _member(mid, m, topics, f"{source}: members.{mid}") for mid, m in members_doc.items()}
    _check_coverage(members, topics, source)
    _check_unique_instances(members, source)
    return Plan(
        group_id=_text(obj.get("group_id"), f"{source}: group_id"),
        generation_id=_int(obj.get("generation_id"), f"{source}: generation_id", minimum=1),
        strategy=_text(obj.get("strategy"), f"{source}: strategy"),
        created_at=_text(obj.get("created_at"), f"{source}: created_at"),
        snapshot_id=_optional_text(obj.get("snapshot_id"), f"{source}: snapshot_id"),
        topics=topics,
        members=members,
        topic_ids=topic_ids,
    )


def _topic_ids(doc: Any, topics: Mapping[str, int], path: str) -> dict[str, str]:
    """Every planned topic's id, or none: an applier that needs ids must be able to check every topic."""
    if doc is None:
        return {}
    ids = {topic: _text(value, f"{path}.{topic}") for topic, value in _object(doc, path).items()}
    if set(ids) != set(topics):
        raise PlanError(f"{path}: expected the ids of exactly the plan's topics {sorted(topics)}, got {sorted(ids)}")
    for topic, value in ids.items():
        if not _TOPIC_ID.match(value):
            raise PlanError(f"{path}.{topic}: expected a Kafka topic id (22 URL-safe base64 characters), got {value!r}")
    if len(set(ids.values())) != len(ids):
        raise PlanError(f"{path}: two topics have the same id")
    return ids


def _member(member_id: str, doc: Any, topics: Mapping[str, int], path: str) -> PlanMember:
    obj = _object(doc, path)
    subscribed = obj.get("topics")
    if not isinstance(subscribed, list) or not all(isinstance(t, str) for t in subscribed):
        raise PlanError(f"{path}.topics: expected a list of topic names")
    if unknown := sorted(set(subscribed) - set(topics)):
        raise PlanError(f"{path}.topics: {unknown} are not in the plan's topics {sorted(topics)}")
    assignment: list[TopicPartition] = []
    for topic, partitions in _object(obj.get("assignment"), f"{path}.assignment").items():
        if topic not in subscribed:
            raise PlanError(f"{path}.assignment.{topic}: the member does not subscribe to {topic!r}")
        if not isinstance(partitions, list):
            raise PlanError(f"{path}.assignment.{topic}: expected a list of partitions")
        if (
            partitions
            and set(map(type, partitions)) == {int}
            and 0 <= min(partitions) <= max(partitions) < topics[topic]
        ):
            assignment.extend(zip(repeat(topic), partitions))  # all valid, found in C-level passes
            continue
        for i, p in enumerate(partitions):
            partition = _int(p, f"{path}.assignment.{topic}[{i}]", minimum=0)
            if partition >= topics[topic]:
                raise PlanError(
                    f"{path}.assignment.{topic}[{i}]: partition {partition} out of range "
                    f"({topic!r} has {topics[topic]} partitions)"
                )
            assignment.append((topic, partition))
    return PlanMember(
        member_id=member_id,
        client_id=_optional_text(obj.get("client_id"), f"{path}.client_id"),
        group_instance_id=_optional_text(obj.get("group_instance_id"), f"{path}.group_instance_id"),
        topics=tuple(sorted(set(subscribed))),
        assignment=tuple(sorted(assignment)),
    )


def _check_coverage(members: Mapping[str, PlanMember], topics: Mapping[str, int], source: str) -> None:
    """Every partition of every planned topic has exactly one planned owner."""
    owner: dict[TopicPartition, str] = {}
    for m in members.values():
        if owner.keys().isdisjoint(m.assignment) and len(set(m.assignment)) == len(m.assignment):
            owner.update(zip(m.assignment, repeat(m.member_id)))  # none planned twice, found in C-level passes
            continue
        for tp in m.assignment:
            if tp in owner:
                raise PlanError(
                    f"{source}: members.{m.member_id}.assignment.{tp[0]}: partition {tp[1]} is also planned for "
                    f"{owner[tp]!r}"
                )
            owner[tp] = m.member_id
    if len(owner) == sum(topics.values()):  # every key names a partition of `topics`: each is planned
        return
    for topic, count in topics.items():
        if missing := [p for p in range(count) if (topic, p) not in owner]:
            raise PlanError(f"{source}: topics.{topic}: partitions {missing} are planned for no member")


def _check_unique_instances(members: Mapping[str, PlanMember], source: str) -> None:
    seen: dict[str, str] = {}
    for m in members.values():
        if m.group_instance_id is None:
            continue
        if m.group_instance_id in seen:
            raise PlanError(
                f"{source}: members.{m.member_id}.group_instance_id: {m.group_instance_id!r} is also the instance "
                f"id of {seen[m.group_instance_id]!r}"
            )
        seen[m.group_instance_id] = m.member_id


def _object(value: Any, path: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise PlanError(f"{path}: expected a JSON object")
    return value


def _text(value: Any, path: str) -> str:
    if not isinstance(value, str) or not value:
        raise PlanError(f"{path}: expected a non-empty string")
    return value


def _optional_text(value: Any, path: str) -> str | None:
    return None if value is None else _text(value, path)


def _int(value: Any, path: str, *, minimum: int) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or value < minimum:
        raise PlanError(f"{path}: expected an integer >= {minimum}, got {value!r}")
    return value

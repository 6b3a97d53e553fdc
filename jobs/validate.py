"""Validation of one snapshot document: the JSON Schema first, then the rules a schema cannot say.

Every message names the field (a JSON path such as `members[2].owned[0]`) and the problem, so a user can fix
the file from the quarantine row alone.
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import cache
from typing import Any

from jsonschema import Draft202012Validator

from schemas.snapshot import snapshot_schema


@cache
def _validator() -> Draft202012Validator:
    return Draft202012Validator(snapshot_schema())


def _path(parts) -> str:
    text = ""
    for part in parts:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else str(part))
    return text or "(document)"


def schema_errors(doc: Any) -> list[str]:
    """JSON Schema violations, in document order."""
    errors = sorted(_validator().iter_errors(doc), key=lambda e: [str(p) for p in e.absolute_path])
    return [f"{_path(e.absolute_path)}: {e.message}" for e in errors]


def semantic_errors(doc: Mapping[str, Any]) -> list[str]:
    """Rules across fields: partition counts, subscriptions, ranges, unique members and owners, offsets."""
    topics: Mapping[str, int] = doc["topics"]
    errors = [f"topics.{t}: partition count must be positive, got {n}" for t, n in topics.items() if n <= 0]
    seen_members: dict[str, int] = {}
    seen_instances: dict[str, int] = {}
    owners: dict[str, dict[tuple[str, int], str]] = {"owned": {}, "assignment": {}}
    for i, member in enumerate(doc["members"]):
        where = f"members[{i}]"
        member_id = member["member_id"]
        if member_id in seen_members:
            errors.append(
                f"{where}.member_id: duplicate member id {member_id!r} (also members[{seen_members[member_id]}])"
            )
        seen_members.setdefault(member_id, i)
        instance = member.get("group_instance_id")
        if instance is not None:
            if instance in seen_instances:
                errors.append(
                    f"{where}.group_instance_id: duplicate static member {instance!r} "
                    f"(also members[{seen_instances[instance]}])"
                )
            seen_instances.setdefault(instance, i)
        errors += [
            f"{where}.topics: subscribes to {t!r}, which is missing from topics"
            for t in member["topics"]
            if t not in topics
        ]
        for field, claims in owners.items():
            for j, (topic, partition) in enumerate(member.get(field) or []):
                if (problem := _out_of_range(topics, topic, partition)) is not None:
                    errors.append(f"{where}.{field}[{j}]: {problem}")
                elif (other := claims.setdefault((topic, partition), member_id)) != member_id:
                    errors.append(
                        f"{where}.{field}[{j}]: {topic}-{partition} is claimed by both {other!r} and {member_id!r}"
                    )
    for i, offset in enumerate(doc.get("offsets") or []):
        topic, partition = offset["topic"], offset["partition"]
        committed, end = offset.get("committed"), offset.get("end")
        if (problem := _out_of_range(topics, topic, partition)) is not None:
            errors.append(f"offsets[{i}]: {problem}")
        elif committed is not None and end is not None and committed > end:
            errors.append(
                f"offsets[{i}]: committed offset {committed} is above end offset {end} for {topic}-{partition}"
            )
    return errors


def _out_of_range(topics: Mapping[str, int], topic: str, partition: int) -> str | None:
    if topic not in topics:
        return f"topic {topic!r} is missing from topics"
    if not 0 <= partition < topics[topic]:
        return f"{topic}-{partition} is out of range ({topic} has {topics[topic]} partitions)"
    return None


def document_errors(doc: Any) -> list[str]:
    """All problems of one snapshot document; empty when it may be ingested."""
    return schema_errors(doc) or semantic_errors(doc)

"""Every Delta table of the lake: name, Arrow schema, merge keys and partition columns.

This package is the authority for table shapes; jobs write through `jobs.io.lake.Lake`, which conforms data to
these schemas, and Spark reads them with the same column types.
"""

from __future__ import annotations

import pyarrow as pa

from schemas.key_skew import SKEW_TABLES
from schemas.spec import TOPIC_PARTITION, TS, TableSpec, table

__all__ = ["TABLES", "TS", "TOPIC_PARTITION", "TableSpec", "table"]

WHAT_IF_SOURCE = "what-if"
"""`snapshots.source` of a what-if scenario: history, never the base of a later scenario, run or comparison."""

SNAPSHOTS = table(
    "snapshots",
    ("snapshot_id", "group_id", "member_id"),
    [
        ("snapshot_id", pa.string()),
        ("group_id", pa.string()),
        ("member_id", pa.string()),
        ("captured_at", TS),
        ("source", pa.string()),
        ("state", pa.string()),
        ("protocol_type", pa.string()),
        ("protocol", pa.string()),
        ("kafka_generation", pa.int32()),
        ("client_id", pa.string()),
        ("host", pa.string()),
        ("group_instance_id", pa.string()),
        ("rack", pa.string()),
        ("strategies", pa.list_(pa.string())),
        ("topics", pa.list_(pa.string())),
        ("owned", pa.list_(TOPIC_PARTITION)),
        ("assignment", pa.list_(TOPIC_PARTITION)),
        ("group_type", pa.string()),
        ("state_reason", pa.string()),
        ("server_assignor", pa.string()),
        ("group_epoch", pa.int32()),
        ("assignment_epoch", pa.int32()),
        ("member_epoch", pa.int32()),
        ("target_assignment", pa.list_(TOPIC_PARTITION)),
        ("subscription_user_data", pa.string()),
        ("topic_regex", pa.string()),
        ("assignment_user_data", pa.string()),
    ],
    "one row per group member of a snapshot (a group without members has one row with member_id '')",
)

TOPIC_PARTITIONS = table(
    "topic_partitions",
    ("snapshot_id", "topic", "partition"),
    [
        ("snapshot_id", pa.string()),
        ("topic", pa.string()),
        ("partition", pa.int32()),
        ("partition_count", pa.int32()),
        ("end_offset", pa.int64()),
        ("topic_id", pa.string()),
    ],
    "every partition of every topic a snapshot mentions, with its topic's partition count",
)

PARTITION_OFFSETS = table(
    "partition_offsets",
    ("snapshot_id", "group_id", "topic", "partition"),
    [
        ("snapshot_id", pa.string()),
        ("group_id", pa.string()),
        ("topic", pa.string()),
        ("partition", pa.int32()),
        ("committed", pa.int64()),
        ("end_offset", pa.int64()),
        ("lag", pa.int64()),
    ],
    "a group's committed offset, the partition's end offset and the lag between them",
)

KEY_SAMPLES = table(
    "key_samples",
    ("sample_id", "topic", "partition", "offset"),
    [
        ("sample_id", pa.string()),
        ("topic", pa.string()),
        ("partition", pa.int32()),
        ("offset", pa.int64()),
        ("key", pa.binary()),
        ("value_size", pa.int32()),
        ("timestamp", TS),
        ("weight", pa.float64()),
    ],
    "sampled records: key bytes, value size, the partition they were read from, and how many of the partition's "
    "retained messages each sampled record stands for (weight)",
)

PLANS = table(
    "plans",
    ("generation_id", "group_id", "strategy", "topic", "partition"),
    [
        ("generation_id", pa.int64()),
        ("group_id", pa.string()),
        ("strategy", pa.string()),
        ("topic", pa.string()),
        ("partition", pa.int32()),
        ("member", pa.string()),
        ("previous_member", pa.string()),
        ("moved", pa.bool_()),
        ("phase", pa.string()),
        ("weight", pa.float64()),
    ],
    "a candidate assignment: partition -> member, with the previous owner and whether it moves",
)

PLAN_METRICS = table(
    "plan_metrics",
    ("generation_id", "group_id", "strategy"),
    [
        ("generation_id", pa.int64()),
        ("group_id", pa.string()),
        ("strategy", pa.string()),
        ("members", pa.int32()),
        ("partitions", pa.int32()),
        ("count_spread", pa.int32()),
        ("max_load", pa.float64()),
        ("mean_load", pa.float64()),
        ("max_mean_load", pa.float64()),
        ("load_bound", pa.float64()),
        ("partitions_moved", pa.int32()),
        ("stickiness", pa.float64()),
        ("chosen", pa.bool_()),
    ],
    "per candidate: balance (count spread, max/mean load) and movement (partitions moved, stickiness)",
)

GENERATIONS = table(
    "generations",
    ("group_id", "generation_id"),
    [
        ("group_id", pa.string()),
        ("generation_id", pa.int64()),
        ("created_at", TS),
        ("trigger", pa.string()),
        ("run_id", pa.string()),
        ("parameters", pa.string()),
        ("snapshot_id", pa.string()),
        ("chosen_strategy", pa.string()),
        ("status", pa.string()),
        ("gate_summary", pa.string()),
        ("changes", pa.string()),
        ("status_reason", pa.string()),
        ("status_at", TS),
        ("reviewed_by", pa.string()),
        ("reviewed_at", TS),
        ("review_comment", pa.string()),
        ("report_path", pa.string()),
        ("verification", pa.string()),
        ("verified_at", TS),
        ("verification_detail", pa.string()),
        ("load_source", pa.string()),
    ],
    "one planning run of one group; status (schemas.status.GenerationStatus) candidate -> gated -> approved | "
    "rejected, approved -> superseded, candidate -> abandoned; who reviewed it, when, and the report they saw",
)

GATE_RESULTS = table(
    "gate_results",
    ("generation_id", "group_id", "suite", "expectation"),
    [
        ("generation_id", pa.int64()),
        ("group_id", pa.string()),
        ("suite", pa.string()),
        ("expectation", pa.string()),
        ("success", pa.bool_()),
        ("observed_value", pa.string()),
        ("details", pa.string()),
    ],
    "one Great Expectations result per generation, group and expectation",
)

MOVE = pa.struct(
    [("topic", pa.string()), ("partition", pa.int32()), ("from_member", pa.string()), ("to_member", pa.string())]
)

MIGRATION_READINESS = table(
    "migration_readiness",
    ("generation_id", "group_id"),
    [
        ("generation_id", pa.int64()),
        ("group_id", pa.string()),
        ("snapshot_id", pa.string()),
        ("client_assignor", pa.string()),
        ("server_assignor", pa.string()),
        ("ready", pa.bool_()),
        ("blockers", pa.list_(pa.string())),
        ("warnings", pa.list_(pa.string())),
        ("partitions", pa.int32()),
        ("partitions_moved", pa.int32()),
        ("moves", pa.list_(MOVE)),
    ],
    "what would change if a classic group moved to group.protocol=consumer (KIP-848): the server assignor it gets, "
    "what blocks the online upgrade, warnings, and the partitions the server assignor would move",
)

PLAN_DIFFS = table(
    "plan_diffs",
    ("generation_id", "group_id", "strategy", "member"),
    [
        ("generation_id", pa.int64()),
        ("group_id", pa.string()),
        ("strategy", pa.string()),
        ("member", pa.string()),
        ("partitions_before", pa.int32()),
        ("partitions_after", pa.int32()),
        ("gained", pa.list_(TOPIC_PARTITION)),
        ("lost", pa.list_(TOPIC_PARTITION)),
    ],
    "each candidate against today's assignment, per member: partitions gained and lost",
)

PARTITION_LOADS = table(
    "partition_loads",
    ("generation_id", "group_id", "topic", "partition"),
    [
        ("generation_id", pa.int64()),
        ("group_id", pa.string()),
        ("topic", pa.string()),
        ("partition", pa.int32()),
        ("load", pa.float64()),
        ("source", pa.string()),
    ],
    "what each partition weighed when a generation was planned, and where that came from: messages, bytes, "
    "throughput or lag, mean (the group's mean where the measure had no value) or uniform",
)

QUARANTINE = table(
    "quarantine",
    ("ingest_id",),
    [
        ("ingest_id", pa.string()),
        ("run_id", pa.string()),
        ("source", pa.string()),
        ("raw_payload", pa.string()),
        ("error", pa.string()),
        ("received_at", TS),
        ("raw_bytes", pa.binary()),
    ],
    "rejected input, kept whole with the reason it was rejected: its bytes exactly as received (raw_bytes) and "
    "as readable text (raw_payload, bytes that are not UTF-8 shown as \\x escapes)",
)


TABLES: dict[str, TableSpec] = {
    s.name: s
    for s in (
        SNAPSHOTS,
        TOPIC_PARTITIONS,
        PARTITION_OFFSETS,
        KEY_SAMPLES,
        PLANS,
        PLAN_METRICS,
        PARTITION_LOADS,
        GENERATIONS,
        GATE_RESULTS,
        QUARANTINE,
        MIGRATION_READINESS,
        PLAN_DIFFS,
        *SKEW_TABLES,
    )
}

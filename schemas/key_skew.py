"""Key-skew tables: per-partition load, a summary per partition count, hot keys and the partitioner fingerprint.

One run of the job (`run_id`) measures each topic under its partitioner at its current partition count and at
every what-if count; rows are keyed by run so reruns MERGE in place and history stays queryable.
"""

from __future__ import annotations

import pyarrow as pa

from schemas.spec import TS, TableSpec, table

RUN = [("run_id", pa.string()), ("computed_at", TS), ("topic", pa.string()), ("partitioner", pa.string())]

KEY_SKEW = table(
    "key_skew",
    ("run_id", "topic", "partitioner", "partition_count", "partition"),
    [
        *RUN,
        ("partition_count", pa.int32()),
        ("partition", pa.int32()),
        ("current", pa.bool_()),
        ("messages", pa.float64()),
        ("bytes", pa.int64()),
        ("distinct_keys", pa.int64()),
        ("null_key_messages", pa.float64()),
        ("null_key_bytes", pa.float64()),
        ("load", pa.float64()),
        ("share", pa.float64()),
        ("remapped_keys", pa.int64()),
        ("remapped_messages", pa.float64()),
    ],
    "one row per topic, partitioner, partition count (current or what-if) and partition: keyed messages, "
    "bytes and distinct keys hashed there, the expected null-key records placed there, load = messages + "
    "null-key messages, its share of the topic, and the keys / messages that sit in another partition today",
)

KEY_SKEW_SUMMARY = table(
    "key_skew_summary",
    ("run_id", "topic", "partitioner", "partition_count"),
    [
        *RUN,
        ("partition_count", pa.int32()),
        ("current", pa.bool_()),
        ("messages", pa.float64()),
        ("null_key_messages", pa.float64()),
        ("null_key_placement", pa.string()),
        ("bytes", pa.int64()),
        ("distinct_keys", pa.int64()),
        ("max_load", pa.float64()),
        ("mean_load", pa.float64()),
        ("max_mean", pa.float64()),
        ("cv", pa.float64()),
        ("gini", pa.float64()),
        ("hot_key", pa.binary()),
        ("hot_key_partition", pa.int32()),
        ("hot_key_share", pa.float64()),
        ("keys_remapped", pa.int64()),
        ("keys_remapped_share", pa.float64()),
        ("traffic_remapped_share", pa.float64()),
        ("recommended", pa.bool_()),
        ("fingerprint", pa.string()),
        ("fingerprint_share", pa.float64()),
        ("java_compatible", pa.bool_()),
        ("error", pa.string()),
    ],
    "per topic and candidate partition count: max/mean, coefficient of variation and Gini of the load, the "
    "hottest key, keys and traffic remapped versus today, the recommended count, the producers' fingerprint; "
    "a topic that could not be measured has partition_count 0 and an error",
)

KEY_SKEW_HOT_KEYS = table(
    "key_skew_hot_keys",
    ("run_id", "topic", "partitioner", "partition_count", "rank"),
    [
        *RUN,
        ("partition_count", pa.int32()),
        ("rank", pa.int32()),
        ("key", pa.binary()),
        ("messages", pa.float64()),
        ("bytes", pa.int64()),
        ("partition", pa.int32()),
        ("share", pa.float64()),
    ],
    "the topic's hottest keys (rank 1 = most messages) and the partition each lands in at each count",
)

KEY_SKEW_FINGERPRINT = table(
    "key_skew_fingerprint",
    ("run_id", "topic", "partitioner"),
    [
        *RUN,
        ("partition_count", pa.int32()),
        ("observed_messages", pa.float64()),
        ("explained_messages", pa.float64()),
        ("share", pa.float64()),
    ],
    "for samples that carry the partition they were read from: the share of keyed records each known "
    "partitioner puts in that same partition at the current count",
)

SKEW_TABLES: list[TableSpec] = [KEY_SKEW, KEY_SKEW_SUMMARY, KEY_SKEW_HOT_KEYS, KEY_SKEW_FINGERPRINT]

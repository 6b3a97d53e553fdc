"""Data-quality suites as data: what the gate expects of a candidate plan before it may be published.

The gate (`jobs.steps.gate`) validates one frame per run, `plan_check`: the chosen candidates' plan rows full-outer
joined with the partitions each group must cover, with two flags computed by the join:
- `subscribed`: the row's member subscribes to the row's topic;
- `expected`: the row's partition is one the group subscribes to (and exists).
Each expectation below is a Great Expectations 1.x expectation type with its keyword arguments.
"""

from __future__ import annotations

PLAN_KEY = ["generation_id", "group_id", "strategy", "topic", "partition"]

PLAN_SUITE: dict[str, object] = {
    "name": "plan_invariants",
    "expectations": [
        # Each (generation, group, topic, partition) appears exactly once in a candidate.
        {"type": "expect_compound_columns_to_be_unique", "kwargs": {"column_list": PLAN_KEY}},
        # Every partition of every subscribed topic is assigned (an uncovered partition has no member).
        {"type": "expect_column_values_to_not_be_null", "kwargs": {"column": "member"}},
        # Each assigned member subscribes to the partition's topic.
        {"type": "expect_column_values_to_be_in_set", "kwargs": {"column": "subscribed", "value_set": [True]}},
        # Nothing is assigned that the group does not subscribe to or that does not exist.
        {"type": "expect_column_values_to_be_in_set", "kwargs": {"column": "expected", "value_set": [True]}},
    ],
}

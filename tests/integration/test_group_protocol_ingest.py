"""Ingest keeps both group protocols: a KIP-848 consumer group's type, assignor, epochs and target assignment."""

from __future__ import annotations

import json
from datetime import UTC, datetime

from jobs.steps.ingest import RawDocument, ingest_documents

NOW = datetime(2026, 11, 21, 2, 0, tzinfo=UTC)
CONSUMER = {
    "group_id": "orders-v2",
    "state": "Reconciling",
    "group_type": "consumer",
    "server_assignor": "range",
    "group_epoch": 7,
    "assignment_epoch": 6,
    "topics": {"orders": 2},
    "members": [
        {
            "member_id": "m0",
            "member_epoch": 6,
            "topics": ["orders"],
            "assignment": [["orders", 1], ["orders", 0]],
            "target_assignment": [["orders", 0]],
        }
    ],
}
CLASSIC = {"group_id": "billing", "topics": {"orders": 2}, "members": [{"member_id": "b0", "topics": ["orders"]}]}


def test_consumer_group_fields_land_in_snapshots_and_classic_is_the_default(lake):
    docs = [RawDocument(d["group_id"], json.dumps(d), doc=d) for d in (CONSUMER, CLASSIC)]
    result = ingest_documents(lake, docs, "snap-1", "run-1", NOW)
    assert result.quarantined == []
    rows = {r["member_id"]: r for r in lake.read_arrow("snapshots").to_pylist()}
    m0, b0 = rows["m0"], rows["b0"]
    assert (m0["group_type"], m0["server_assignor"], m0["group_epoch"], m0["assignment_epoch"]) == (
        "consumer",
        "range",
        7,
        6,
    )
    assert m0["member_epoch"] == 6 and m0["state"] == "Reconciling"
    assert m0["assignment"] == [{"topic": "orders", "partition": 0}, {"topic": "orders", "partition": 1}]
    assert m0["target_assignment"] == [{"topic": "orders", "partition": 0}]
    assert (b0["group_type"], b0["server_assignor"], b0["member_epoch"], b0["target_assignment"]) == (
        "classic",
        None,
        None,
        None,
    )

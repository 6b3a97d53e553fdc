"""Pipeline steps (ingest, key skew, plan, gate, publish), the lake, the Kafka source and the `rebalance` CLI."""

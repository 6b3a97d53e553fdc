"""The demo: an embedded Kafka cluster with live consumer groups, and bundled snapshot files (needs the demo extra)."""

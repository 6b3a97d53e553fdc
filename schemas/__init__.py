"""Data contracts: Delta tables, the snapshot-file JSON Schema and the data-quality suites, kept as data."""

from schemas.tables import TABLES, TableSpec

__all__ = ["TABLES", "TableSpec"]
